//! Warm pools: trimmed to their high watermark, rebuilt after a restart, and given back to on release.

use std::collections::BTreeSet;

use kuryr_controller::ports::{allocate, pool};
use kuryr_core::pool::{PoolKey, PoolParent};
use kuryr_core::PoolLimits;

use crate::harness::{harness, kuryrport, vif, TestCloud};

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

    allocate::release(&h.ctx, &vif, &kp.spec.pod_node_name)
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
