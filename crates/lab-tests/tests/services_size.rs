//! Services of any size against the real Octavia's request-size limit (oslo sizelimit, 112 KiB): a
//! selector-less Service whose EndpointSlices (1,000 endpoints each, the API's maximum) the test writes,
//! served by an in-process kuryr-controller. It becomes Ready with exactly its endpoints as members, in
//! writes that each fit one request (never a 413), the writes counted; 1,000 → 5,000 and 10 → 5,000 are
//! additive batches only, 5,000 → 10 member writes ending in a replace. The real ovn provider adds members
//! one by one, seconds each on a busy host, and the lab's amphora worker spends about two minutes on each
//! additive batch (docs/services.md, "Large Services"), so on the real Octavia the size is 200 (one create
//! body) and the 5,000 figures come from cloudsim, which enforces the same limit.

mod simnets;
mod svc_common;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

use anyhow::ensure;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kuryr_api::k8s_openapi::api::discovery::v1::{Endpoint, EndpointConditions, EndpointPort, EndpointSlice};
use kuryr_api::ObjectMeta;
use kuryr_openstack::octavia::members;
use lab_tests::Lab;
use svc_common::{delta, mk_service, Backend, Harness};

const NAME: &str = "big";

#[tokio::test]
async fn five_thousand_endpoints_on_cloudsim() -> anyhow::Result<()> {
    let lab = Lab::require();
    sizes(&lab, Backend::sim("amphora", |_| {}).await?, &[1000, 5000]).await
}

#[tokio::test]
async fn two_hundred_endpoints_on_real_octavia_ovn() -> anyhow::Result<()> {
    let lab = Lab::require();
    sizes(&lab, Backend::lab(&lab, "ovn").await?, &[200]).await
}

async fn sizes(lab: &Lab, backend: Backend, sizes: &[usize]) -> anyhow::Result<()> {
    let h = Harness::start(lab, backend, |_| {}).await?;
    let result = scenario(&h, sizes).await;
    h.finish(result).await
}

/// `n` addresses in 10.77.0.0/16 (on no subnet: members are addresses to Octavia; nothing sends to them).
fn addresses(n: usize) -> Vec<String> {
    (0..n)
        .map(|i| format!("10.77.{}.{}", i / 250, 2 + i % 250))
        .collect()
}

/// The Service's EndpointSlices, 1,000 endpoints each, as a custom endpoints controller writes them: each
/// slice replaced in place, the ones no longer needed deleted after.
async fn set_endpoints(h: &Harness, ips: &[String]) -> anyhow::Result<()> {
    let api: Api<EndpointSlice> = Api::namespaced(h.client.clone(), &h.ns);
    let selector = format!("kubernetes.io/service-name={NAME}");
    let existing: BTreeMap<String, EndpointSlice> = api
        .list(&ListParams::default().labels(&selector))
        .await?
        .into_iter()
        .map(|s| (s.metadata.name.clone().unwrap_or_default(), s))
        .collect();
    let mut wanted = BTreeSet::new();
    for (i, chunk) in ips.chunks(1000).enumerate() {
        let name = format!("{NAME}-{i}");
        let mut slice = EndpointSlice {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                labels: Some(BTreeMap::from([
                    ("kubernetes.io/service-name".to_owned(), NAME.to_owned()),
                    (
                        "endpointslice.kubernetes.io/managed-by".to_owned(),
                        "size-test".to_owned(),
                    ),
                ])),
                ..ObjectMeta::default()
            },
            address_type: "IPv4".into(),
            endpoints: chunk
                .iter()
                .map(|ip| Endpoint {
                    addresses: vec![ip.clone()],
                    conditions: Some(EndpointConditions {
                        ready: Some(true),
                        ..EndpointConditions::default()
                    }),
                    ..Endpoint::default()
                })
                .collect(),
            ports: Some(vec![EndpointPort {
                name: Some("http".into()),
                port: Some(8080),
                protocol: Some("TCP".into()),
                ..EndpointPort::default()
            }]),
        };
        match existing.get(&name) {
            Some(old) if old.endpoints == slice.endpoints => {}
            Some(old) => {
                slice.metadata.resource_version = old.metadata.resource_version.clone();
                api.replace(&name, &PostParams::default(), &slice).await?;
            }
            None => {
                api.create(&PostParams::default(), &slice).await?;
            }
        }
        wanted.insert(name);
    }
    for name in existing.keys().filter(|n| !wanted.contains(*n)) {
        api.delete(name, &DeleteParams::default()).await?;
    }
    Ok(())
}

/// The member count the Ready condition gives (the status lists at most 1,000 members).
fn ready_members(k: &kuryr_api::KuryrLoadBalancer) -> Option<usize> {
    let st = k.status.as_ref()?;
    let msg = &kuryr_api::conditions::find_condition(&st.conditions, "Ready")?.message;
    let n = msg.split(", ").nth(1)?.split(' ').next()?;
    n.parse().ok()
}

/// Waits for `ips` to be the members (status and Octavia); the writes it took.
async fn converge(h: &Harness, ips: &[String], what: &str) -> anyhow::Result<BTreeMap<String, u64>> {
    let before = h.backend.octavia_writes();
    let t0 = Instant::now();
    set_endpoints(h, ips).await?;
    let n = ips.len();
    let klb = h.wait_klb(NAME, what, |k| ready_members(k) == Some(n)).await?;
    let listed = klb.status.as_ref().map_or(0, |s| s.members.len());
    ensure!(listed == n.min(1000), "{what}: the status lists {listed} members");
    let writes = delta(&before, &h.backend.octavia_writes());
    let pool = &klb
        .status
        .as_ref()
        .and_then(|s| s.pools.first())
        .map(|p| p.id.clone())
        .unwrap_or_default();
    let have: BTreeSet<String> = members::list(&h.backend.check, pool)
        .await?
        .into_iter()
        .map(|m| m.address)
        .collect();
    let want: BTreeSet<String> = ips.iter().cloned().collect();
    ensure!(
        have == want,
        "{what}: Octavia has {} members, {} wanted",
        have.len(),
        want.len()
    );
    eprintln!(
        "[{}] {what}: Ready in {} ms, Octavia writes {writes:?}",
        h.backend.kind,
        t0.elapsed().as_millis()
    );
    // A refused body (the cloud's 413 or the client's own refusal) is an Event with this reason.
    let refused = h.events("RequestTooLarge").await?;
    ensure!(
        refused.is_empty(),
        "{what}: a body over the size limit: {:?}",
        refused[0].message
    );
    Ok(writes)
}

async fn scenario(h: &Harness, sizes: &[usize]) -> anyhow::Result<()> {
    h.services()
        .create(
            &PostParams::default(),
            &mk_service(NAME, &[("http", 80, "TCP", 8080)], None),
        )
        .await?;
    let all = addresses(*sizes.iter().max().unwrap_or(&0));
    let mut current = 0;
    for &n in sizes {
        let writes = converge(h, &all[..n], &format!("{current} -> {n} endpoints")).await?;
        let batches = writes.get("octavia.members.batch_add").copied().unwrap_or(0);
        if current == 0 {
            ensure!(
                writes.get("octavia.loadbalancers.create") == Some(&1),
                "{writes:?}"
            );
        }
        // About 200 bytes a member: more than 500 never fit one body.
        if n - current > 600 {
            ensure!(batches > 0, "{n} endpoints without an additive batch: {writes:?}");
        }
        current = n;
    }
    let n = current;
    // Shrinking rewrites the first slice and deletes the others: the controller may see the steps
    // between (coalesced over --lb-coalesce-ms when they come close together). Member writes only.
    let writes = converge(h, &all[..10], &format!("{n} -> 10 endpoints")).await?;
    ensure!(
        writes.keys().all(|op| op.starts_with("octavia.members.")),
        "{n} -> 10: member writes only: {writes:?}"
    );
    ensure!(
        writes.contains_key("octavia.members.batch_update"),
        "{n} -> 10 ends in a replace: {writes:?}"
    );
    let writes = converge(h, &all[..n], &format!("10 -> {n} endpoints")).await?;
    // More than one body holds: additive batches only; what fits one body is one replace.
    let expected = if n > 600 {
        "octavia.members.batch_add"
    } else {
        "octavia.members.batch_update"
    };
    ensure!(
        writes.keys().all(|op| op == expected),
        "10 -> {n}: {expected} only: {writes:?}"
    );
    h.services().delete(NAME, &DeleteParams::default()).await?;
    h.wait_gone(NAME).await?;
    Ok(())
}
