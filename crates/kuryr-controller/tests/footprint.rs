//! What one object costs in the controller's caches, whole and as `slim` keeps it: heap bytes held by the
//! deserialized object, counted by this binary's allocator. The objects are real apiserver answers captured
//! from the lab (`fixtures/footprint/`: a bench pod Pending on a node without a kubelet, a pod Running on a
//! lab kubelet, a KuryrPort with the status the controller writes, each with its managedFields). One test
//! only: the count is of the whole process, so nothing else may run beside it. The figures are printed for
//! docs/BENCHMARKS.md ("Scale").

use std::alloc::System;

use kuryr_api::k8s_openapi::api::core::v1::Pod;
use kuryr_api::KuryrPort;
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
    let held = (c.bytes_allocated + c.bytes_reallocated.max(0) as usize)
        .saturating_sub(c.bytes_deallocated + c.bytes_reallocated.min(0).unsigned_abs());
    drop(value);
    held + std::mem::size_of::<T>()
}

/// `json` deserialized and passed through `slim`.
fn cached<K: DeserializeOwned>(json: &str, slim: fn(&mut K)) -> usize {
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

#[test]
fn slim_objects_cost_a_fraction_of_whole_ones() {
    for name in ["pod-pending.json", "pod-running.json"] {
        let json = fixture(name);
        let full = cached::<Pod>(&json, whole);
        let meta = cached::<Pod>(&json, slim::meta);
        let slim = cached::<Pod>(&json, slim::pod);
        println!("{name}: whole {full} B, without managedFields {meta} B, slim {slim} B");
        assert!(meta < full, "{name}: managedFields cost nothing?");
        assert!(
            slim * 3 < full,
            "{name}: slim {slim} B is not under a third of {full} B"
        );
    }

    let json = fixture("kuryrport.json");
    let full = cached::<KuryrPort>(&json, whole);
    let meta = cached::<KuryrPort>(&json, slim::meta);
    let kp: KuryrPort = serde_json::from_str(&json).expect("fixture parses");
    let st = kp.status.expect("the fixture has a status");
    let status = footprint(|| st.clone());
    println!("kuryrport.json: whole {full} B, without managedFields {meta} B; a status copy {status} B");
    assert!(meta < full, "kuryrport: managedFields cost nothing?");
    assert!(status < meta, "a status is part of its object");
}
