//! What one object costs in the controller's caches, whole and as `slim` keeps it: heap bytes held by the
//! deserialized object, counted by this binary's allocator. The objects are real apiserver answers captured
//! from the lab (`fixtures/footprint/`: a bench pod Pending on a node without a kubelet, a pod Running on a
//! lab kubelet, a KuryrPort with the status the controller writes; a two-port ClusterIP Service applied
//! with kubectl, an EndpointSlice of its five pods made with kubectl, labelled and owned as the
//! endpointslice controller makes its own (the pods had no node to run on), and the KuryrLoadBalancer the
//! front end writes for the two, with a ten-member tree (two listeners and pools, five members each;
//! Octavia ids made up, no controller served that namespace) written to its status subresource; each with
//! its managedFields). One test only: the count is of the whole process, so nothing else may run beside
//! it. The figures are printed for docs/BENCHMARKS.md ("Scale").

use std::alloc::System;

use kuryr_api::k8s_openapi::api::core::v1::{Pod, Service};
use kuryr_api::k8s_openapi::api::discovery::v1::EndpointSlice;
use kuryr_api::{KuryrLoadBalancer, KuryrPort, SlimEndpointSlice, SlimPod};
use kuryr_controller::loadbalancers::CachedKlb;
use kuryr_controller::ports::cached::CachedKp;
use kuryr_controller::slim;
use serde::de::DeserializeOwned;
use stats_alloc::{Region, StatsAlloc, INSTRUMENTED_SYSTEM};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// Bytes the value built by `make` holds once made: its heap (what was allocated and not freed while it
/// was made) plus the value itself.
fn footprint<T>(make: impl FnOnce() -> T) -> usize {
    let region = Region::new(GLOBAL);
    let value = make();
    let c = region.change();
    // stats_alloc counts a realloc's growth in `bytes_allocated` and its shrink in `bytes_deallocated`
    // already (`bytes_reallocated` is the same change again: adding it counted every list's growth twice).
    let held = c.bytes_allocated.saturating_sub(c.bytes_deallocated);
    drop(value);
    held + std::mem::size_of::<T>()
}

/// `json` deserialized and passed through `slim`.
fn cached<K: DeserializeOwned>(json: &str, slim: fn(&mut K)) -> usize {
    // Once outside the count: a packed kind's first object on a thread makes that thread's packing state,
    // which every later object shares (crate::packed).
    drop(serde_json::from_str::<K>(json).expect("fixture parses"));
    footprint(|| {
        let mut k: K = serde_json::from_str(json).expect("fixture parses");
        slim(&mut k);
        k
    })
}

fn fixture(name: &str) -> String {
    let path = format!("{}/tests/fixtures/footprint/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn whole<K>(_: &mut K) {}

/// What a pod may cost in the Pod cache (issue 37): read as `SlimPod`, its fields only.
const PER_POD_TARGET: usize = 6_000;

/// What a Service may cost in the caches of the Service front end and the KuryrLoadBalancer controller
/// (issue 37): its Service, EndpointSlice and KuryrLoadBalancer.
const PER_SERVICE_TARGET: usize = 12_000;

/// Whole, without managedFields, and as `slim` keeps it, printed; (meta, slim).
fn kind<K: DeserializeOwned + kuryr_api::Resource>(
    name: &str,
    json: &str,
    slim: fn(&mut K),
) -> (usize, usize) {
    let full = cached::<K>(json, whole);
    let meta = cached::<K>(json, slim::meta::<K>);
    let slim = cached::<K>(json, slim);
    println!("{name}: whole {full} B, without managedFields {meta} B, slim {slim} B");
    assert!(meta < full, "{name}: managedFields cost nothing?");
    (meta, slim)
}

#[test]
fn slim_objects_cost_a_fraction_of_whole_ones() {
    for name in ["pod-pending.json", "pod-running.json"] {
        let json = fixture(name);
        let full = cached::<Pod>(&json, whole);
        let meta = cached::<Pod>(&json, slim::meta);
        let slim = cached::<SlimPod>(&json, slim::pod);
        println!("{name}: whole {full} B, without managedFields {meta} B, slim {slim} B");
        assert!(meta < full, "{name}: managedFields cost nothing?");
        assert!(
            slim * 3 < full,
            "{name}: slim {slim} B is not under a third of {full} B"
        );
        assert!(
            slim <= PER_POD_TARGET,
            "{name}: {slim} B in the cache, over {PER_POD_TARGET} B"
        );
    }

    let json = fixture("kuryrport.json");
    let full = cached::<KuryrPort>(&json, whole);
    let meta = cached::<KuryrPort>(&json, slim::meta);
    let slim = cached::<KuryrPort>(&json, slim::kuryrport);
    // As the KuryrPort controller's cache keeps it (ports::cached): packed, its port ids beside.
    let packed = cached::<CachedKp>(&json, whole);
    let kp: KuryrPort = serde_json::from_str(&json).expect("fixture parses");
    let st = kp.status.expect("the fixture has a status");
    let status = footprint(|| st.clone());
    println!(
        "kuryrport.json: whole {full} B, without managedFields {meta} B, slim {slim} B, packed {packed} B; \
         a status copy {status} B"
    );
    assert!(meta < full, "kuryrport: managedFields cost nothing?");
    assert!(slim < meta, "kuryrport: labels and slack cost nothing?");
    assert!(status < meta, "a status is part of its object");
    assert!(
        packed * 3 < slim * 2,
        "kuryrport: packed {packed} B is not under two thirds of slim {slim} B"
    );

    services();
}

/// A Service's share: its Service, EndpointSlice and KuryrLoadBalancer, and the policy loop's copy of the
/// Service.
fn services() {
    let (svc, slice, klb) = (
        fixture("service.json"),
        fixture("endpointslice.json"),
        fixture("kuryrloadbalancer.json"),
    );
    fixture_is_what_the_front_end_writes(&svc, &slice, &klb);
    let (svc_meta, svc_slim) = kind::<Service>("service.json", &svc, slim::service);
    let policy = cached::<Service>(&svc, slim::policy_service);
    println!("service.json: the policy loop's copy {policy} B");
    // Read as the cache's own type (kuryr_api::SlimEndpointSlice), as the Pod is.
    let slice_full = cached::<EndpointSlice>(&slice, whole);
    let slice_meta = cached::<EndpointSlice>(&slice, slim::meta);
    let slice_slim = cached::<SlimEndpointSlice>(&slice, slim::endpoint_slice);
    println!(
        "endpointslice.json: whole {slice_full} B, without managedFields {slice_meta} B, slim {slice_slim} B"
    );
    // Read whole (every part of it is read), packed as its cache keeps it (crate::packed).
    let klb_full = cached::<KuryrLoadBalancer>(&klb, whole);
    let klb_meta = cached::<KuryrLoadBalancer>(&klb, slim::meta);
    let klb_slim = cached::<CachedKlb>(&klb, whole);
    println!(
        "kuryrloadbalancer.json: whole {klb_full} B, without managedFields {klb_meta} B, packed {klb_slim} B"
    );
    let before = svc_meta + slice_meta + klb_meta;
    let after = svc_slim + slice_slim + klb_slim;
    println!(
        "per Service (Service + EndpointSlice + KuryrLoadBalancer): without managedFields {before} B, \
         slim {after} B (target {PER_SERVICE_TARGET} B); with the policy loop's copy {} B",
        after + policy
    );
    assert!(svc_slim < svc_meta && slice_slim < slice_meta && klb_slim < klb_meta);
    assert!(policy < svc_slim, "the policy loop reads less of a Service");
    assert!(
        after <= PER_SERVICE_TARGET,
        "a Service costs {after} B in the caches, over {PER_SERVICE_TARGET} B"
    );
}

/// The KuryrLoadBalancer fixture's spec is the one the front end builds from the Service and EndpointSlice
/// fixtures (with its service subnet and the lab's provider), so the three are one Service's share.
fn fixture_is_what_the_front_end_writes(svc: &str, slice: &str, klb: &str) {
    let svc: Service = serde_json::from_str(svc).expect("fixture parses");
    let slice: EndpointSlice = serde_json::from_str(slice).expect("fixture parses");
    let klb: KuryrLoadBalancer = serde_json::from_str(klb).expect("fixture parses");
    let defaults = kuryr_core::lb::SpecDefaults {
        subnet_id: klb.spec.subnet_id.clone(),
        provider: Some("ovn".into()),
        ..Default::default()
    };
    let slices = kuryr_core::lb::endpoints::from_slices([&SlimEndpointSlice::from(slice)], false);
    let (spec, problems) = kuryr_core::lb::service_spec(&svc, slices, &defaults).expect("served");
    assert_eq!(spec, klb.spec);
    assert!(problems.is_empty(), "{problems:?}");
    let members = klb.status.map_or(0, |s| s.members.len());
    assert_eq!(members, 10, "two ports, five ready endpoints");
}
