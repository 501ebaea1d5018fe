//! Services → KuryrLoadBalancer → Octavia, end to end: the lab's kube-apiserver and real
//! kube-controller-manager (building Endpoints from kubelet-less pods whose status the test patches), an
//! in-process kuryr-controller running its Services side, and Octavia from cloudsim or the lab (ovn and
//! amphora providers).
//!
//! `lifecycle_*`: a Service with 2 ports × 3 pods is one load balancer with 2 listeners, 2 pools and 6
//! members, the whole tree ACTIVE, in exactly one Octavia write; scaling 3 → 20 → 2 pods is at most one
//! member replace per pool per EndpointSlice change (kube-controller-manager may publish one scale step
//! in several updates; the test counts them with its own watch) and never a per-member write; deleting
//! the Service leaves no load balancer.

mod simnets;
mod svc_common;

use std::time::Instant;

use anyhow::ensure;
use kuryr_api::finalizers;
use kuryr_api::ResourceExt;
use kuryr_openstack::octavia::{loadbalancers, status as tree};
use lab_tests::Lab;
use svc_common::slice_watch::SliceWatch;
use svc_common::{delta, mk_service, pod_ips, shape, Backend, Harness};

#[tokio::test]
async fn lifecycle_on_cloudsim_ovn() -> anyhow::Result<()> {
    let lab = Lab::require();
    lifecycle(&lab, Backend::sim("ovn", |_| {}).await?).await
}

#[tokio::test]
async fn lifecycle_on_cloudsim_amphora() -> anyhow::Result<()> {
    let lab = Lab::require();
    lifecycle(&lab, Backend::sim("amphora", |_| {}).await?).await
}

#[tokio::test]
async fn lifecycle_on_real_octavia_ovn() -> anyhow::Result<()> {
    let lab = Lab::require();
    lifecycle(&lab, Backend::lab(&lab, "ovn").await?).await
}

#[tokio::test]
async fn lifecycle_on_real_octavia_amphora() -> anyhow::Result<()> {
    let lab = Lab::require();
    lifecycle(&lab, Backend::lab(&lab, "amphora").await?).await
}

async fn lifecycle(lab: &Lab, backend: Backend) -> anyhow::Result<()> {
    let h = Harness::start(lab, backend, |_| {}).await?;
    let result = scenario(&h).await;
    h.finish(result).await
}

async fn scenario(h: &Harness) -> anyhow::Result<()> {
    let kind = h.backend.kind.clone();
    let app = [("app", "web")];
    let ips = pod_ips(20);
    let pods: Vec<(String, String)> = ips
        .iter()
        .enumerate()
        .map(|(i, ip)| (format!("web-{i}"), ip.clone()))
        .collect();
    h.ready_pods(&pods[..3], &app, true).await?;

    // Create: one fully-populated POST.
    let before = h.backend.octavia_writes();
    let resent_before = h.backend.timeout_retries("octavia.loadbalancers.create");
    let t0 = Instant::now();
    h.services()
        .create(
            &Default::default(),
            &mk_service(
                "web",
                &[("http", 80, "TCP", 8080), ("dns", 53, "UDP", 5353)],
                Some(&app),
            ),
        )
        .await?;
    let klb = h
        .wait_klb("web", "2 listeners, 2 pools, 6 members", |k| {
            shape(k) == (2, 2, 6)
        })
        .await?;
    let took = t0.elapsed();
    let writes = delta(&before, &h.backend.octavia_writes());
    // A create whose answer timed out is sent again (CI of stop 50 on a slow machine: the first landed, the
    // second was refused, its VIP taken, and the first was found by its tags): one write all the same.
    let resent = h.backend.timeout_retries("octavia.loadbalancers.create") - resent_before;
    eprintln!(
        "[{kind}] Service create -> KuryrLoadBalancer Ready (tree ACTIVE): {} ms; Octavia writes {writes:?} ({resent} resent after a timeout)",
        took.as_millis()
    );
    ensure!(
        writes.values().sum::<u64>() == 1 + resent
            && writes.get("octavia.loadbalancers.create") == Some(&(1 + resent)),
        "one Octavia write per Service create, got {writes:?} ({resent} resent after a timeout)"
    );
    let st = klb.status.clone().unwrap_or_default();
    let lb = st
        .loadbalancer
        .clone()
        .ok_or_else(|| anyhow::anyhow!("no LB in status"))?;
    let svc = h.services().get("web").await?;
    ensure!(
        lb.ip == svc.spec.and_then(|s| s.cluster_ip).unwrap_or_default(),
        "VIP is the clusterIP"
    );
    ensure!(
        lb.provider.as_deref() == Some(h.backend.provider.as_str()),
        "provider {:?}",
        lb.provider
    );
    let t = tree::get(&h.backend.check, &lb.id).await?;
    ensure!(
        t.provisioning_states().iter().all(|s| *s == "ACTIVE") && t.member_count() == 6,
        "whole tree ACTIVE with 6 members: {:?}",
        t.provisioning_states()
    );
    let mut ports: Vec<i32> = st.members.iter().map(|m| m.port).collect();
    ports.sort();
    ensure!(
        ports == vec![5353, 5353, 5353, 8080, 8080, 8080],
        "members on the target ports: {ports:?}"
    );
    let real = loadbalancers::get(&h.backend.check, &lb.id).await?;
    ensure!(
        real.tags
            .iter()
            .any(|t| t == &format!("kuryr.cluster={}", h.cluster_id))
            && real.tags.iter().any(|t| t == "kuryr.kind=service"),
        "ownership tags on the LB: {:?}",
        real.tags
    );
    // Deleting a Service is never held up (conformance): its KuryrLoadBalancer holds the cloud side.
    ensure!(
        !svc_has_finalizer(h).await?,
        "no finalizer of ours on the Service"
    );
    ensure!(
        klb.finalizers()
            .iter()
            .any(|f| f == finalizers::KURYRLOADBALANCER),
        "KLB finalizer"
    );

    // Scale 3 -> 20: member replaces only, at most one per pool per slice change.
    let mut slices = SliceWatch::start(&h.client, &h.ns, "web").await?;
    let before = h.backend.octavia_writes();
    let t0 = Instant::now();
    h.ready_pods(&pods[3..], &app, true).await?;
    // The slices first: a stalled kube-controller-manager is not the controller's fault.
    let up_changes = slices.wait_ready(&ips).await?.changes;
    h.wait_klb("web", "40 members", |k| shape(k) == (2, 2, 40))
        .await?;
    let up = delta(&before, &h.backend.octavia_writes());
    eprintln!(
        "[{kind}] scale 3->20: {} ms, {up_changes} EndpointSlice change(s), Octavia writes {up:?}",
        t0.elapsed().as_millis()
    );
    let up_replaces = only_replaces(&up, up_changes, "3 -> 20")?;

    // Scale 20 -> 2.
    let before = h.backend.octavia_writes();
    let t0 = Instant::now();
    let gone: Vec<String> = pods[2..].iter().map(|(n, _)| n.clone()).collect();
    h.delete_pods(&gone).await?;
    let down_changes = slices.wait_ready(&ips[..2]).await?.changes - up_changes;
    let klb = h.wait_klb("web", "4 members", |k| shape(k) == (2, 2, 4)).await?;
    let down = delta(&before, &h.backend.octavia_writes());
    eprintln!(
        "[{kind}] scale 20->2: {} ms, {down_changes} EndpointSlice change(s), Octavia writes {down:?}",
        t0.elapsed().as_millis()
    );
    let down_replaces = only_replaces(&down, down_changes, "20 -> 2")?;
    let left: Vec<String> = klb
        .status
        .unwrap_or_default()
        .members
        .iter()
        .map(|m| m.ip.clone())
        .collect();
    ensure!(
        left.iter().all(|ip| *ip == ips[0] || *ip == ips[1]),
        "only the 2 remaining pods: {left:?}"
    );
    if let Some(sim) = &h.backend.sim {
        // The call log agrees with the client's count.
        let logged = sim.calls_matching("octavia.members.batch_update").len() as u64;
        ensure!(
            logged == up_replaces + down_replaces,
            "call log: {logged} batch updates, the client counted {}",
            up_replaces + down_replaces
        );
    }

    // Delete: nothing left in Octavia.
    let t0 = Instant::now();
    h.services().delete("web", &Default::default()).await?;
    ensure!(
        h.services().get_opt("web").await?.is_none(),
        "the Service is gone at once"
    );
    // The garbage collector deletes the KuryrLoadBalancer with its owner; its finalizer, the LB.
    h.wait_gone("web").await?;
    eprintln!(
        "[{kind}] Service delete -> LB gone, finalizers released: {} ms",
        t0.elapsed().as_millis()
    );
    match loadbalancers::get(&h.backend.check, &lb.id).await {
        Err(e) if e.is_not_found() => {}
        other => anyhow::bail!("LB {} still there: {other:?}", lb.id),
    }
    ensure!(h.tagged_lbs().await?.is_empty(), "tagged load balancers left");
    Ok(())
}

async fn svc_has_finalizer(h: &Harness) -> anyhow::Result<bool> {
    Ok(h.services()
        .get("web")
        .await?
        .finalizers()
        .iter()
        .any(|f| f == finalizers::SERVICE))
}

/// The writes of one scale step: member replaces and nothing else, both pools written, and no more than
/// one replace per pool for each EndpointSlice change the step produced. Returns the replace count.
fn only_replaces(
    writes: &std::collections::BTreeMap<String, u64>,
    slice_changes: usize,
    step: &str,
) -> anyhow::Result<u64> {
    let replaces = writes.get("octavia.members.batch_update").copied().unwrap_or(0);
    ensure!(
        writes.values().sum::<u64>() == replaces,
        "{step}: only member replaces, got {writes:?}"
    );
    ensure!(
        slice_changes >= 1 && replaces >= 2 && replaces <= 2 * slice_changes as u64,
        "{step}: between 2 and one per pool per EndpointSlice change ({slice_changes}) member replaces, got {writes:?}"
    );
    Ok(replaces)
}
