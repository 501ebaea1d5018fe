//! Warm pools: trimmed to their high watermark, rebuilt after a restart (and then topped up without
//! waiting for a pod), given back to on release, and their loose ports adopted or deleted while running.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use kuryr_cloudsim::FaultRule;
use kuryr_controller::ports::{pool, release};
use kuryr_core::pool::{PoolKey, PoolParent};
use kuryr_core::PoolLimits;
use kuryr_openstack::neutron::ports::{self, CreatePort};
use kuryr_openstack::neutron::trunks::{self, SubPort};

use crate::harness::{cached, harness, kuryrport, vif, TestCloud, NODE};

/// Ids of the free ports of the node's pool.
fn free(h: &crate::harness::Harness, cloud: &TestCloud) -> Vec<String> {
    pool::pool_snapshot(&h.ctx, &key(cloud))
        .free_ports()
        .map(|p| p.port_id.clone())
        .collect()
}

fn key(cloud: &TestCloud) -> PoolKey {
    PoolKey {
        parent: PoolParent::Trunk(cloud.trunk_id.clone()),
        network_id: cloud.network_id.clone(),
        project_id: cloud.project_id.clone(),
    }
}

#[tokio::test]
async fn a_pool_above_its_high_watermark_is_trimmed_to_it() {
    let cloud = TestCloud::start().await;
    let mut before = harness(&cloud, |_| {});
    let kp = before.wired("web-0").await;
    drop(before);
    // Restarted with a lower high watermark: the rebuilt pool is above it.
    let mut h = harness(&cloud, |c| c.pool_limits = PoolLimits::new(1, 3, 8).unwrap());
    h.add_kuryrport(&kp);
    // A pod on the node after the restart: the pool is rebuilt and serves it.
    let second = h.add_kuryrport(&kuryrport("web-1"));
    h.reconcile(&second).await.unwrap();
    let free_before = free(&h, &cloud).len();
    assert!(
        free_before > 3,
        "the first refill's batch left {free_before} free"
    );

    let live = BTreeSet::from([PoolParent::Trunk(cloud.trunk_id.clone())]);
    pool::maintain(&h.ctx, &live).await.unwrap();

    assert_eq!(free(&h, &cloud).len(), 3);
    // The trimmed ports are gone from Neutron and from the trunk: the two pods' ports and 3 free are left.
    assert_eq!(cloud.pod_ports().await.len(), 5);
    assert_eq!(cloud.subports().await.len(), 5);
}

#[tokio::test]
async fn after_a_restart_the_pool_is_rebuilt_from_its_tagged_ports_that_no_status_names() {
    let cloud = TestCloud::start().await;
    let mut before = harness(&cloud, |_| {});
    let kp = before.wired("web-0").await;
    let taken = vif(&kp).port_id.clone();
    let made: BTreeSet<String> = cloud.pod_ports().await.into_iter().collect();
    drop(before);

    // A new process: nothing in memory, the KuryrPort in its cache.
    let mut after = harness(&cloud, |_| {});
    after.add_kuryrport(&kp);
    pool::ensure_rebuilt(&after.ctx).await.unwrap();

    let free: BTreeSet<String> = free(&after, &cloud).into_iter().collect();
    let mut expected = made.clone();
    expected.remove(&taken);
    assert_eq!(free, expected, "every pool port but the one a status names");
    assert!(pool::is_pool_port(&after.ctx, &taken));
}

#[tokio::test]
async fn a_released_pool_port_goes_back_to_its_pool() {
    let cloud = TestCloud::start().await;
    let mut h = harness(&cloud, |_| {});
    let kp = h.wired("web-0").await;
    let vif = vif(&kp).clone();
    let free_before = free(&h, &cloud).len();

    release::release(&h.ctx, &vif, &kp.spec.pod_node_name)
        .await
        .unwrap();

    let now = free(&h, &cloud);
    assert_eq!(now.len(), free_before + 1);
    assert!(now.contains(&vif.port_id));
    assert!(
        cloud.subports().await.iter().any(|(p, _)| *p == vif.port_id),
        "still a subport, ready to reuse"
    );
}

fn live(cloud: &TestCloud) -> BTreeSet<PoolParent> {
    BTreeSet::from([PoolParent::Trunk(cloud.trunk_id.clone())])
}

#[tokio::test]
async fn loose_pool_ports_are_adopted_or_deleted_by_the_running_upkeep_at_their_second_round() {
    let cloud = TestCloud::start().await;
    let mut h = harness(&cloud, |_| {});
    h.wired("web-0").await;
    // A bulk create for a refill that outlived its caller: two pool ports no pool holds and no status
    // names; the first also got attached (its add_subports went through, the answer was lost).
    let body = CreatePort {
        device_owner: Some("compute:kuryr".into()),
        tags: pool::owner(&h.ctx).tags().unwrap(),
        ..CreatePort::on_subnet(&cloud.network_id, &cloud.subnet_id)
    };
    let made = ports::bulk_create(&cloud.cloud, &[body.clone(), body])
        .await
        .unwrap();
    let (attached, unattached) = (made[0].id.clone(), made[1].id.clone());
    trunks::add_subports(&cloud.cloud, &cloud.trunk_id, &[SubPort::vlan(&attached, 100)])
        .await
        .unwrap();

    // First sighting: a refill whose answer is still coming would add them, so nothing is done yet.
    pool::maintain(&h.ctx, &live(&cloud)).await.unwrap();
    assert!(!free(&h, &cloud).contains(&attached));
    assert!(cloud.pod_ports().await.contains(&unattached));

    // Second round: the subport of the live node goes to its pool, the port attached nowhere is deleted.
    pool::maintain(&h.ctx, &live(&cloud)).await.unwrap();
    assert!(free(&h, &cloud).contains(&attached), "adopted");
    assert!(pool::is_pool_port(&h.ctx, &attached));
    assert!(cloud
        .subports()
        .await
        .iter()
        .any(|(p, vlan)| *p == attached && *vlan == 100));
    assert!(!cloud.pod_ports().await.contains(&unattached), "deleted");
}

#[tokio::test]
async fn a_pool_rebuilt_after_a_restart_is_topped_up_without_waiting_for_a_pod() {
    let cloud = TestCloud::start().await;
    let mut before = harness(&cloud, |_| {});
    let kp = before.wired("web-0").await;
    let rebuilt = free(&before, &cloud).len();
    drop(before);
    // Restarted with a higher low watermark: the rebuilt pool is below it, and no pod comes.
    let mut h = harness(&cloud, |c| c.pool_limits = PoolLimits::new(12, 20, 4).unwrap());
    h.add_kuryrport(&kp);
    assert!(rebuilt < 12, "{rebuilt} free after the first refill");
    // As the upkeep loop does before each round: the live nodes' parents.
    let node = h.ctx.node(NODE).unwrap();
    h.ctx.trunks.parent_of(&h.ctx.cloud, &node).await.unwrap();

    pool::maintain(&h.ctx, &live(&cloud)).await.unwrap();

    // The top-up runs in the background; wait for it (bounded), then check what it made.
    for _ in 0..200 {
        if free(&h, &cloud).len() >= 12 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let now = free(&h, &cloud).len();
    assert!(now >= 12, "{now} free after the upkeep, {rebuilt} before");
    assert_eq!(cloud.subports().await.len(), now + 1, "every free port a subport");
}

#[tokio::test]
async fn an_extra_network_has_a_pool_of_its_own_that_takes_its_ports_back_and_serves_the_next_pod() {
    let cloud = TestCloud::start().await;
    let c = &cloud.cloud;
    let net = kuryr_openstack::neutron::networks::create(
        c,
        &kuryr_openstack::neutron::networks::CreateNetwork::named("storage"),
        &[],
    )
    .await
    .unwrap();
    let sub = kuryr_openstack::neutron::subnets::create(
        c,
        &kuryr_openstack::neutron::subnets::CreateSubnet::v4(&net.id, "10.77.0.0/24"),
        &[],
    )
    .await
    .unwrap();
    let mut h = harness(&cloud, |c| c.additional_subnets = [sub.id.clone()].into());
    let with_extra = |name: &str| {
        let mut kp = kuryrport(name);
        kp.spec.additional_networks = vec![kuryr_api::port::AdditionalNetwork {
            interface: "data0".into(),
            subnet_id: sub.id.clone(),
            attachment: "storage".into(),
        }];
        kp
    };
    let extra_key = PoolKey {
        network_id: net.id.clone(),
        ..key(&cloud)
    };
    let first = h.add_kuryrport(&with_extra("db-0"));
    h.reconcile(&first).await.unwrap();
    let first = h.kuryrport_now(&first);
    let data0 = first.status.as_ref().unwrap().vifs["data0"].vif.clone();
    assert_eq!(data0.network_id, net.id);
    assert!(
        pool::is_pool_port(&h.ctx, &data0.port_id),
        "data0 came from the extra network's pool"
    );

    release::release(&h.ctx, &data0, NODE).await.unwrap();
    let free: Vec<String> = pool::pool_snapshot(&h.ctx, &extra_key)
        .free_ports()
        .map(|p| p.port_id.clone())
        .collect();
    assert!(free.contains(&data0.port_id), "back in its own pool: {free:?}");
    assert!(
        !pool::pool_snapshot(&h.ctx, &key(&cloud))
            .free_ports()
            .any(|p| p.port_id == data0.port_id),
        "not in the pod network's pool"
    );

    // The next pod asking for the network is served from that pool: no port created for it.
    cloud.sim.clear_calls();
    let second = h.add_kuryrport(&with_extra("db-1"));
    h.reconcile(&second).await.unwrap();
    let second = h.kuryrport_now(&second);
    let again = &second.status.as_ref().unwrap().vifs["data0"].vif;
    assert!(
        free.contains(&again.port_id),
        "{} not from the pool {free:?}",
        again.port_id
    );
}

#[tokio::test]
async fn a_pod_whose_refill_fails_leaves_the_pools_line_and_the_next_pod_is_served() {
    let cloud = TestCloud::start().await;
    let mut h = harness(&cloud, |c| c.pool_limits = PoolLimits::new(0, 0, 1).unwrap());
    cloud.sim.add_fault(FaultRule {
        op: "neutron.ports.bulk_create".into(),
        count: Some(1),
        status: Some(400),
        ..FaultRule::default()
    });
    let first = h.add_kuryrport(&kuryrport("web-0"));
    assert!(h.reconcile(&first).await.is_err());
    let load = pool::pool_snapshot(&h.ctx, &key(&cloud)).load();
    assert_eq!((load.pending, load.in_flight), (0, 0), "{load:?}");
    // Nobody stale ahead of it in the line: the next pod gets the next port.
    let kp = h.wired("web-1").await;
    assert!(!vif(&kp).port_id.is_empty());
}

#[tokio::test]
async fn a_refill_whose_reconcile_is_dropped_midway_leaves_nothing_counted() {
    let cloud = TestCloud::start().await;
    let mut h = harness(&cloud, |c| c.pool_limits = PoolLimits::new(0, 0, 1).unwrap());
    cloud.sim.add_fault(FaultRule {
        op: "neutron.ports.bulk_create".into(),
        count: Some(1),
        hold_ms: Some(30_000),
        ..FaultRule::default()
    });
    let kp = h.add_kuryrport(&kuryrport("web-0"));
    let task = tokio::spawn(kuryr_controller::ports::reconcile::reconcile(
        Arc::new(cached(&kp)),
        h.ctx.clone(),
    ));
    let load = || pool::pool_snapshot(&h.ctx, &key(&cloud)).load();
    for _ in 0..500 {
        if load().in_flight > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(
        (load().pending, load().in_flight),
        (1, 1),
        "the pod waits on its refill"
    );
    task.abort();
    assert!(task.await.unwrap_err().is_cancelled());
    // Neither the pod nor its create is counted any more: the pool's next plan starts from the truth.
    assert_eq!((load().pending, load().in_flight), (0, 0));
}
