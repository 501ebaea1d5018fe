//! Warm port pools, asserted from cloudsim's call log (in-process kuryr-controller, lab kube-apiserver):
//! - after warm-up a burst of 20 pods makes ZERO port creates on the pod path (every pod's port was a free
//!   pool port before the burst) and every refill is one bulk create + one add_subports of a whole batch;
//! - a pod whose KuryrPort names other SGs costs one port update when it takes a port, and one more when the
//!   port goes back (SGs reset); released ports are recycled (still subports), not deleted;
//! - a restarted controller rebuilds the pools from the tagged ports: new pods make no create;
//! - the pool of a deleted node is drained (its ports detached and deleted);
//! - pods arriving while a pool's refill is held up in Neutron start a refill of their own beside it, sized
//!   to their demand, instead of waiting for the first to land.

mod podnet;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use anyhow::{ensure, Context as _};
use kuryr_api::k8s_openapi::api::core::v1::{Node, NodeAddress, NodeSpec, NodeStatus, Taint};
use kuryr_api::{Api, KuryrPort, KuryrPortSpec, ObjectMeta, PostParams};
use kuryr_openstack::neutron::{ports, security_groups, trunks};
use lab_tests::Lab;
use podnet::{InProcess, Scope, TestCloud};

#[tokio::test]
async fn pools_serve_bursts_recycle_and_survive_restarts_on_cloudsim() -> anyhow::Result<()> {
    let lab = Lab::require();
    let cloud = TestCloud::cloudsim(&lab, |_| {}).await?;
    let scope = Scope::new(&lab, "pools").await?;
    let result = scenario(&lab, &scope, &cloud).await;
    scope.close().await;
    result
}

#[tokio::test]
async fn refills_of_one_pool_run_side_by_side_on_cloudsim() -> anyhow::Result<()> {
    let lab = Lab::require();
    let cloud = TestCloud::cloudsim(&lab, |_| {}).await?;
    let scope = Scope::new(&lab, "pools-sbs").await?;
    let result = side_by_side(&scope, &cloud).await;
    scope.close().await;
    result
}

/// The first refill of a cold pool is held 10 s in Neutron; 20 pods created meanwhile on the same node get
/// their ports from refills asked for while it is still held, and are wired before it is answered (before:
/// they queued behind it, one refill at a time per pool).
async fn side_by_side(scope: &Scope, cloud: &TestCloud) -> anyhow::Result<()> {
    const HOLD_MS: u64 = 10_000;
    let config = scope.config(cloud);
    let batch = config.pool_limits.batch() as usize;
    let node = cloud.trunks.keys().next().cloned().context("a trunk")?;
    let nodes = vec![node];
    cloud.sim().add_fault(kuryr_cloudsim::faults::FaultRule {
        op: "neutron.ports.bulk_create".into(),
        count: Some(1),
        hold_ms: Some(HOLD_MS),
        ..Default::default()
    });
    let controller = InProcess::start(scope, cloud, config);
    let first = podnet::create_pods(scope, "first", 1, &nodes).await?;
    // Until the held create has arrived.
    let deadline = Instant::now() + Duration::from_secs(60);
    while cloud.sim().faults_fired() == 0 {
        ensure!(
            Instant::now() < deadline,
            "the first refill never reached Neutron"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let surge = podnet::create_pods(scope, "surge", 20, &nodes).await?;
    let wired = podnet::wait_ready(scope, &surge, "sim surge during a held refill").await?;
    // Wired while the first pod's refill is still held in Neutron: they did not wait for it.
    let first_kp = scope
        .kps()
        .get_opt("first0")
        .await?
        .context("first0's KuryrPort")?;
    ensure!(
        !podnet::is_ready(&first_kp),
        "the first pod was ready before the surge was: its refill was not held"
    );
    podnet::check_wired(cloud, &surge, &wired).await?;
    podnet::wait_ready(scope, &first, "sim first pod").await?;

    let bulk = cloud.sim().calls_matching("neutron.ports.bulk_create");
    let held = bulk
        .iter()
        .find(|c| c.latency_ms >= HOLD_MS as f64)
        .context("the held bulk create in the call log")?;
    let held_at = chrono::DateTime::parse_from_rfc3339(&held.ts)?;
    let held_until = held_at + chrono::Duration::milliseconds(held.latency_ms as i64);
    let beside: Vec<_> = bulk
        .iter()
        .filter(|c| c.seq != held.seq)
        .filter(|c| chrono::DateTime::parse_from_rfc3339(&c.ts).is_ok_and(|t| t > held_at && t < held_until))
        .collect();
    let beside_ports: usize = beside.iter().filter_map(|c| c.items).sum();
    eprintln!(
        "held refill of {:?} ports; {} bulk creates of {:?} ports began while it was held",
        held.items,
        beside.len(),
        beside.iter().map(|c| c.items).collect::<Vec<_>>()
    );
    ensure!(held.items == Some(batch), "first refill {:?} ports", held.items);
    // 21 pods + 5 spare against the held 10: at least 16 more, begun while the first was held.
    ensure!(
        beside_ports >= 16,
        "only {beside_ports} ports were asked for beside the held refill: {:?}",
        bulk.iter()
            .map(|c| (&c.ts, c.items, c.latency_ms))
            .collect::<Vec<_>>()
    );
    let names: Vec<String> = first.keys().chain(surge.keys()).cloned().collect();
    podnet::delete_pods(scope, &names).await?;
    podnet::check_no_leak(cloud, &scope.cluster_id).await?;
    controller.stop().await?;
    cloud.delete_tagged(&scope.cluster_id).await?;
    Ok(())
}

async fn scenario(lab: &Lab, scope: &Scope, cloud: &TestCloud) -> anyhow::Result<()> {
    let mut config = scope.config(cloud);
    config.pool_sync_interval = Duration::from_secs(1);
    let batch = config.pool_limits.batch() as usize;
    let controller = InProcess::start(scope, cloud, config.clone());
    let nodes: Vec<String> = cloud.trunks.keys().cloned().collect();

    // Warm-up: one pod per node fills its node's pool.
    let warm = podnet::create_pods(scope, "warm", nodes.len(), &nodes).await?;
    podnet::wait_ready(scope, &warm, "sim warm-up").await?;
    let free = wait_free_at_least(cloud, scope, config.pool_limits.min_free() as usize).await?;

    // The burst: every port comes from the pool; refills are whole batches, one bulk create each.
    cloud.sim().clear_calls();
    let burst = podnet::create_pods(scope, "burst", 20, &nodes).await?;
    let wired = podnet::wait_ready(scope, &burst, "sim burst from warm pools").await?;
    let burst_ports = podnet::check_wired(cloud, &burst, &wired).await?;
    ensure!(
        burst_ports.is_subset(&free),
        "ports not from the warm pool: {:?}",
        burst_ports.difference(&free).collect::<Vec<_>>()
    );
    ensure!(cloud.count("neutron.ports.create") == 0, "single port creates");
    let bulk = cloud.sim().calls_matching("neutron.ports.bulk_create");
    ensure!(
        bulk.iter().all(|c| c.items == Some(batch)),
        "refills not whole batches: {:?}",
        bulk.iter().map(|c| c.items).collect::<Vec<_>>()
    );
    ensure!(
        cloud.count("neutron.trunks.add_subports") == bulk.len(),
        "{} add_subports for {} bulk creates",
        cloud.count("neutron.trunks.add_subports"),
        bulk.len()
    );
    ensure!(
        cloud.count("neutron.ports.update") == 0,
        "SG updates although the SGs matched"
    );
    eprintln!(
        "burst of 20 from warm pools: {} bulk creates (refills), {} add_subports, {} port GETs, 0 creates on the pod path",
        bulk.len(),
        cloud.count("neutron.trunks.add_subports"),
        cloud.count("neutron.ports.show"),
    );

    // Other SGs: one update when taken, one (reset) when given back; the port stays a pool subport.
    let other_sg = security_groups::create(
        &cloud.cloud,
        &security_groups::CreateSecurityGroup {
            name: "pod-sg".into(),
            ..Default::default()
        },
        &[],
    )
    .await?;
    cloud.sim().clear_calls();
    let kps = scope.kps();
    let mut kp = KuryrPort::new(
        "sg-pod",
        KuryrPortSpec {
            pod_uid: format!("sg-pod-{}", fastrand::u32(..)),
            pod_node_name: nodes[0].clone(),
            pod_static: false,
            vif_type: None,
            project_id: None,
            subnet_ids: None,
            security_group_ids: Some(vec![other_sg.id.clone()]),
            additional_networks: Vec::new(),
        },
    );
    kp.metadata.namespace = Some(scope.ns.clone());
    kps.create(&PostParams::default(), &kp).await?;
    let vif = wait_kp_ready(&kps, "sg-pod").await?;
    ensure!(
        vif.security_group_ids == vec![other_sg.id.clone()],
        "SGs {:?}",
        vif.security_group_ids
    );
    ensure!(cloud.count("neutron.ports.update") == 1, "one SG update on take");
    kps.delete("sg-pod", &Default::default()).await?;
    let deadline = Instant::now() + podnet::GONE_TIMEOUT;
    while kps.get_opt("sg-pod").await?.is_some() {
        ensure!(Instant::now() < deadline, "sg-pod KuryrPort not finalized");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    ensure!(
        cloud.count("neutron.ports.update") == 2,
        "one SG reset on release"
    );
    ensure!(
        cloud.count("neutron.ports.delete") == 0,
        "a released port was deleted"
    );
    let port = ports::get(&cloud.cloud, &vif.port_id).await?;
    ensure!(
        !port.security_groups.contains(&other_sg.id),
        "SGs not reset: {:?}",
        port.security_groups
    );
    let trunk = trunks::get(&cloud.cloud, &cloud.trunks[&nodes[0]]).await?;
    ensure!(
        trunk.sub_ports.iter().any(|s| s.port_id == vif.port_id),
        "recycled port is no subport any more"
    );

    // Delete every pod: ports go back to their pools (below max_free nothing is deleted), none leaks.
    let names: Vec<String> = warm.keys().chain(burst.keys()).cloned().collect();
    podnet::delete_pods(scope, &names).await?;
    let pool_ports = podnet::check_no_leak(cloud, &scope.cluster_id).await?;
    eprintln!("after deleting every pod: {pool_ports} pool ports, all subports, no pod port left");

    // Restart: the new controller rebuilds the pools; new pods take rebuilt ports, no create.
    controller.stop().await?;
    let before: BTreeSet<String> = cloud
        .tagged(&scope.cluster_id)
        .await?
        .into_iter()
        .map(|p| p.id)
        .collect();
    cloud.sim().clear_calls();
    let controller = InProcess::start(scope, cloud, config.clone());
    let again = podnet::create_pods(scope, "again", nodes.len(), &nodes).await?;
    let wired = podnet::wait_ready(scope, &again, "sim after restart").await?;
    let again_ports = podnet::check_wired(cloud, &again, &wired).await?;
    ensure!(again_ports.is_subset(&before), "pods after restart got new ports");
    ensure!(
        cloud.count("neutron.ports.bulk_create") == 0,
        "creates after restart although the rebuilt pools had ports"
    );
    podnet::delete_pods(scope, &again.keys().cloned().collect::<Vec<_>>()).await?;

    // A node that goes away takes its pool with it.
    drained_with_its_node(lab, scope, cloud).await?;
    controller.stop().await?;
    cloud.delete_tagged(&scope.cluster_id).await?;
    Ok(())
}

/// Polls until every trunk has at least `min` pool ports no KuryrPort names; returns all such ports.
async fn wait_free_at_least(
    cloud: &TestCloud,
    scope: &Scope,
    min: usize,
) -> anyhow::Result<BTreeSet<String>> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let used: BTreeSet<String> = scope
            .kps()
            .list(&Default::default())
            .await?
            .iter()
            .filter_map(|kp| podnet::eth0(kp).ok())
            .map(|v| v.port_id)
            .collect();
        let tagged: BTreeSet<String> = cloud
            .tagged(&scope.cluster_id)
            .await?
            .into_iter()
            .map(|p| p.id)
            .collect();
        let mut free = BTreeSet::new();
        let mut enough = true;
        for trunk in cloud.trunks.values() {
            let t = trunks::get(&cloud.cloud, trunk).await?;
            let mine: Vec<String> = t
                .sub_ports
                .into_iter()
                .map(|s| s.port_id)
                .filter(|p| tagged.contains(p) && !used.contains(p))
                .collect();
            enough &= mine.len() >= min;
            free.extend(mine);
        }
        if enough {
            return Ok(free);
        }
        ensure!(Instant::now() < deadline, "pools not warm after 60 s");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn wait_kp_ready(kps: &Api<KuryrPort>, name: &str) -> anyhow::Result<kuryr_api::Vif> {
    let deadline = Instant::now() + podnet::WIRE_TIMEOUT;
    loop {
        if let Some(kp) = kps.get_opt(name).await? {
            if podnet::is_ready(&kp) {
                return podnet::eth0(&kp);
            }
        }
        ensure!(Instant::now() < deadline, "{name} not Ready");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A Node of the test's own (unschedulable and tainted, so nothing else lands there) whose VM has a trunk
/// on cloudsim: a pod there fills a pool; deleting the pod and then the Node drains that pool.
async fn drained_with_its_node(lab: &Lab, scope: &Scope, cloud: &TestCloud) -> anyhow::Result<()> {
    let _ = lab;
    let name = format!("{}-node", scope.ns);
    let ip = "198.18.63.200";
    let (_, trunk) =
        podnet::sim_vm(&cloud.cloud, &cloud.network_id, &cloud.subnet_id, &name, ip, true).await?;
    let trunk = trunk.context("trunk")?;
    let nodes: Api<Node> = Api::all(scope.client.clone());
    nodes
        .create(&PostParams::default(), &test_node(&name, ip))
        .await?;
    let result = async {
        let created = podnet::create_pods(scope, "gone", 1, std::slice::from_ref(&name)).await?;
        podnet::wait_ready(scope, &created, "sim pod on a test node").await?;
        podnet::delete_pods(scope, created.keys()).await?;
        let pool: Vec<String> = trunks::get(&cloud.cloud, &trunk)
            .await?
            .sub_ports
            .into_iter()
            .map(|s| s.port_id)
            .collect();
        ensure!(!pool.is_empty(), "no pool on the test node");
        nodes.delete(&name, &Default::default()).await?;
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let left = trunks::get(&cloud.cloud, &trunk).await?.sub_ports.len();
            let tagged: BTreeSet<String> = cloud
                .tagged(&scope.cluster_id)
                .await?
                .into_iter()
                .map(|p| p.id)
                .collect();
            if left == 0 && pool.iter().all(|p| !tagged.contains(p)) {
                eprintln!("deleted node: its pool of {} ports drained", pool.len());
                return Ok(());
            }
            ensure!(
                Instant::now() < deadline,
                "pool of the deleted node not drained: {left} subports left"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    .await;
    let _ = nodes.delete(&name, &Default::default()).await;
    result
}

fn test_node(name: &str, ip: &str) -> Node {
    Node {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            ..ObjectMeta::default()
        },
        spec: Some(NodeSpec {
            unschedulable: Some(true),
            taints: Some(vec![Taint {
                key: "kuryr.openstack.org/test-node".into(),
                effect: "NoSchedule".into(),
                ..Taint::default()
            }]),
            ..NodeSpec::default()
        }),
        status: Some(NodeStatus {
            addresses: Some(vec![NodeAddress {
                type_: "InternalIP".into(),
                address: ip.to_owned(),
            }]),
            ..NodeStatus::default()
        }),
    }
}
