use super::*;
use crate::neutron::{Subport, SUBPORT_DEVICE_OWNER};

fn sgs(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|s| (*s).to_owned()).collect()
}

fn mk_key(trunk: &str) -> PoolKey {
    PoolKey {
        parent: PoolParent::Trunk(trunk.into()),
        network_id: "net".into(),
        project_id: "proj".into(),
    }
}

fn mk_pool(free: &[(&str, &[&str])]) -> Pool {
    let mut pool = Pool::new(mk_key("trunk-1"), sgs(&["default"]));
    for (id, s) in free {
        pool.add_free(id, sgs(s));
    }
    pool
}

fn mk_port(id: &str, host: &str, tags: &[&str]) -> NeutronPort {
    NeutronPort {
        id: id.into(),
        network_id: "net".into(),
        project_id: "proj".into(),
        device_owner: DEVICE_OWNER.into(),
        binding_host_id: host.into(),
        tags: sgs(tags),
        security_groups: sgs(&["default"]),
        ..NeutronPort::default()
    }
}

#[test]
fn a_pod_takes_a_port_that_already_has_its_sgs_without_an_update() {
    let mut pool = mk_pool(&[("a", &["default"]), ("b", &["web"])]);
    assert_eq!(
        pool.take("pod-1", &sgs(&["web"])),
        Some(Taken {
            port_id: "b".into(),
            sg_update: None
        })
    );
}

#[test]
fn a_pod_with_other_sgs_takes_the_oldest_port_and_one_update() {
    let mut pool = mk_pool(&[("a", &["default"]), ("b", &["default"])]);
    assert_eq!(
        pool.take("pod-1", &sgs(&["db"])),
        Some(Taken {
            port_id: "a".into(),
            sg_update: Some(sgs(&["db"]))
        })
    );
}

#[test]
fn a_pod_finding_the_pool_empty_counts_as_surge_demand_until_served() {
    let mut pool = mk_pool(&[]);
    assert_eq!(pool.take("pod-1", &sgs(&["default"])), None);
    assert_eq!(pool.take("pod-1", &sgs(&["default"])), None);
    assert_eq!(pool.load().pending, 1);
    assert_eq!(pool.plan(PoolLimits::default()).create, 10);
    pool.begin_create(10);
    let ids: Vec<String> = (0..10).map(|i| format!("p{i}")).collect();
    pool.created(&ids);
    assert!(pool.take("pod-1", &sgs(&["default"])).is_some());
    assert_eq!(
        pool.load(),
        PoolLoad {
            free: 9,
            in_flight: 0,
            pending: 0
        }
    );
}

#[test]
fn landed_ports_go_to_the_pods_waiting_longest() {
    let mut pool = mk_pool(&[]);
    let default = sgs(&["default"]);
    for i in 1..=3 {
        assert_eq!(pool.take(&format!("old-{i}"), &default), None);
    }
    pool.begin_create(2);
    pool.created(&["p1".to_owned(), "p2".to_owned()]);
    // A pod that asks now queues behind the three: both ports are theirs.
    assert_eq!(pool.take("new", &default), None);
    assert_eq!(pool.take("old-3", &default), None, "third in line, two ports");
    assert_eq!(pool.take("old-2", &default).map(|t| t.port_id), Some("p1".into()));
    assert_eq!(pool.take("old-1", &default).map(|t| t.port_id), Some("p2".into()));
    assert_eq!(pool.load().pending, 2);
    // The next port is old-3's, not the newcomer's; a pod that leaves the line gives up its place.
    pool.add_free("p3", default.clone());
    assert_eq!(pool.take("new", &default), None);
    pool.forget("old-3");
    assert_eq!(pool.take("new", &default).map(|t| t.port_id), Some("p3".into()));
    assert_eq!(pool.load().pending, 0);
}

#[test]
fn a_pod_running_its_own_refill_keeps_its_place_but_not_the_ports_landing_meanwhile() {
    let mut pool = mk_pool(&[]);
    let default = sgs(&["default"]);
    assert_eq!(pool.take("first", &default), None);
    assert_eq!(pool.take("second", &default), None);
    pool.set_refilling("first", true);
    // Another refill lands while "first" awaits its own: the port is second's.
    pool.add_free("p1", default.clone());
    assert_eq!(
        pool.take("second", &default).map(|t| t.port_id),
        Some("p1".into())
    );
    assert_eq!(pool.take("third", &default), None);
    // Back from its refill, "first" is still ahead of "third".
    pool.set_refilling("first", false);
    pool.add_free("p2", default.clone());
    assert_eq!(pool.take("third", &default), None);
    assert_eq!(pool.take("first", &default).map(|t| t.port_id), Some("p2".into()));
    // Only a waiting pod is marked.
    pool.set_refilling("nobody", true);
    pool.add_free("p3", default.clone());
    assert_eq!(pool.take("third", &default).map(|t| t.port_id), Some("p3".into()));
}

#[test]
fn a_refill_asked_for_while_another_runs_covers_only_the_demand_that_one_does_not() {
    let mut pool = mk_pool(&[]);
    let limits = PoolLimits::default();
    assert_eq!(pool.take("pod-1", &sgs(&["default"])), None);
    // 1 waiting + 5 spare: one batch of 10, in flight from now.
    assert_eq!(pool.reserve(limits), 10);
    assert_eq!(pool.reserve(limits), 0, "covered by the creates in flight");
    // Four more pods arrive while it runs: 10 in flight still covers 5 waiting + 5 spare.
    for i in 2..=5 {
        assert_eq!(pool.take(&format!("pod-{i}"), &sgs(&["default"])), None);
    }
    assert_eq!(pool.reserve(limits), 0);
    // Twenty more: 25 waiting + 5 spare against 10 in flight: 20 more, side by side with the first.
    for i in 6..=25 {
        pool.take(&format!("pod-{i}"), &sgs(&["default"]));
    }
    assert_eq!(pool.reserve(limits), 20);
    assert_eq!(pool.load().in_flight, 30);
    assert_eq!(pool.reserve(limits), 0);
}

#[test]
fn a_forgotten_pod_no_longer_drives_creates() {
    let mut pool = mk_pool(&[("a", &["default"]), ("b", &["default"]), ("c", &["default"])]);
    pool.take("gone", &sgs(&[]));
    pool.take("gone2", &sgs(&[]));
    pool.take("gone3", &sgs(&[]));
    pool.take("gone4", &sgs(&[]));
    assert_eq!(pool.load().pending, 1);
    pool.forget("gone4");
    assert_eq!(pool.load().pending, 0);
}

#[test]
fn a_released_port_is_recycled_with_its_sgs_reset_to_the_pool_default() {
    let pool = mk_pool(&[]);
    assert_eq!(
        pool.on_release(&sgs(&["web"]), PoolLimits::default()),
        ReleaseDecision::Recycle {
            sg_reset: Some(sgs(&["default"]))
        }
    );
    assert_eq!(
        pool.on_release(&sgs(&["default"]), PoolLimits::default()),
        ReleaseDecision::Recycle { sg_reset: None }
    );
}

#[test]
fn a_released_port_is_deleted_when_the_pool_is_full() {
    let pool = mk_pool(&[("a", &["default"]), ("b", &["default"])]);
    let limits = PoolLimits::new(1, 2, 1).unwrap();
    assert_eq!(pool.on_release(&sgs(&["web"]), limits), ReleaseDecision::Delete);
}

#[test]
fn a_failed_batch_stops_counting_as_in_flight() {
    let mut pool = mk_pool(&[]);
    pool.begin_create(10);
    assert_eq!(pool.plan(PoolLimits::default()).create, 0);
    pool.create_failed(10);
    assert_eq!(pool.plan(PoolLimits::default()).create, 10);
}

#[test]
fn ports_above_max_are_given_back_newest_first() {
    let mut pool = mk_pool(&[
        ("old", &["default"]),
        ("mid", &["default"]),
        ("new", &["default"]),
    ]);
    let limits = PoolLimits::new(0, 1, 1).unwrap();
    let n = pool.plan(limits).release;
    assert_eq!(pool.take_for_release(n), vec!["mid".to_string(), "new".into()]);
    assert_eq!(pool.load().free, 1);
}

#[test]
fn pools_of_deleted_nodes_are_drained_and_removed() {
    let mut pools = Pools::default();
    pools
        .entry(mk_key("t-live"), &sgs(&["default"]))
        .add_free("a", sgs(&["default"]));
    pools
        .entry(mk_key("t-dead"), &sgs(&["default"]))
        .add_free("b", sgs(&["default"]));
    let live = [PoolParent::Trunk("t-live".into())].into_iter().collect();
    let drained = pools.drain_dead_parents(&live);
    assert_eq!(drained, vec![(mk_key("t-dead"), vec!["b".to_string()])]);
    assert_eq!(pools.len(), 1);
}

#[test]
fn a_dead_pool_with_creates_in_flight_stays_until_they_land() {
    let mut pools = Pools::default();
    pools.entry(mk_key("t-dead"), &sgs(&[])).begin_create(3);
    assert!(pools.drain_dead_parents(&BTreeSet::new()).is_empty());
    assert_eq!(pools.len(), 1);
    pools
        .get_mut(&mk_key("t-dead"))
        .unwrap()
        .created(&["x".to_string()]);
    pools.get_mut(&mk_key("t-dead")).unwrap().create_failed(2);
    assert_eq!(pools.drain_dead_parents(&BTreeSet::new()).len(), 1);
    assert!(pools.is_empty());
}

#[test]
fn pools_are_rebuilt_from_tagged_unused_ports_after_a_restart() {
    let tags = vec!["kuryr.openstack.org/cluster=c1".to_string()];
    let mut recycled = mk_port("sub-web", "", &["kuryr.openstack.org/cluster=c1"]);
    recycled.security_groups = sgs(&["web"]);
    let ports = vec![
        // Neutron replaced our device_owner when the port became a subport.
        NeutronPort {
            device_owner: SUBPORT_DEVICE_OWNER.into(),
            ..mk_port("sub-free", "", &["kuryr.openstack.org/cluster=c1"])
        },
        mk_port("sub-used", "", &["kuryr.openstack.org/cluster=c1"]),
        recycled,
        mk_port("bound-free", "node-2", &["kuryr.openstack.org/cluster=c1"]),
        mk_port("half-made", "", &["kuryr.openstack.org/cluster=c1"]),
        // Detached on release (Neutron cleared its device_owner), the delete cut short by a crash.
        NeutronPort {
            device_owner: String::new(),
            ..mk_port("detached", "", &["kuryr.openstack.org/cluster=c1"])
        },
        mk_port("other-cluster", "node-2", &["kuryr.openstack.org/cluster=c2"]),
        NeutronPort {
            device_owner: "compute:nova".into(),
            ..mk_port("vm", "node-2", &[])
        },
    ];
    let trunks = vec![Trunk {
        id: "trunk-1".into(),
        port_id: "vm".into(),
        subports: ["sub-free", "sub-used", "sub-web"]
            .iter()
            .enumerate()
            .map(|(i, p)| Subport {
                port_id: (*p).into(),
                segmentation_id: i as u16 + 1,
            })
            .collect(),
    }];
    let in_use = sgs(&["sub-used"]);
    let rebuilt = rebuild(&ports, &trunks, &in_use, &tags, &sgs(&["default"]));

    let trunk_pool = rebuilt.pools.get(&mk_key("trunk-1")).unwrap();
    let free: Vec<_> = trunk_pool.free_ports().map(|p| p.port_id.as_str()).collect();
    assert_eq!(free, vec!["sub-free", "sub-web"]);
    let host_key = PoolKey {
        parent: PoolParent::Host("node-2".into()),
        ..mk_key("")
    };
    assert_eq!(rebuilt.pools.pool_of_free_port("bound-free"), Some(&host_key));
    assert_eq!(
        rebuilt.orphans,
        vec!["half-made".to_string(), "detached".to_string()]
    );
    assert_eq!(rebuilt.pools.len(), 2);

    // The recycled port whose SG reset was cut short still serves a pod that wants "web" for free.
    let mut pools = rebuilt.pools;
    let pool = pools.get_mut(&mk_key("trunk-1")).unwrap();
    assert_eq!(pool.take("pod", &sgs(&["web"])).unwrap().sg_update, None);
}

// === properties ===

mod properties {
    use proptest::prelude::*;

    use super::*;

    #[derive(Clone, Debug)]
    enum Op {
        Take { pod: u8, sg: u8 },
        Give { nth: u8 },
        Refill,
        Land { ok: bool },
        Forget { pod: u8 },
        Trim,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (0u8..30, 0u8..3).prop_map(|(pod, sg)| Op::Take { pod, sg }),
            3 => any::<u8>().prop_map(|nth| Op::Give { nth }),
            2 => Just(Op::Refill),
            2 => any::<bool>().prop_map(|ok| Op::Land { ok }),
            1 => (0u8..30).prop_map(|pod| Op::Forget { pod }),
            1 => Just(Op::Trim),
        ]
    }

    proptest! {
        #[test]
        fn a_port_is_never_free_and_in_use_at_once(
            min in 0u32..6, extra in 0u32..8, batch in 1u32..5,
            ops in proptest::collection::vec(op(), 0..120),
        ) {
            let limits = PoolLimits::new(min, if extra == 0 { 0 } else { min + extra }, batch).unwrap();
            let mut pool = mk_pool(&[]);
            let mut in_use: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
            let mut landing: Vec<u32> = Vec::new();
            let mut next_id = 0u32;
            for op in ops {
                match op {
                    Op::Take { pod, sg } => {
                        let want = sgs(&[["default", "web", "db"][sg as usize]]);
                        if let Some(t) = pool.take(&format!("pod-{pod}"), &want) {
                            prop_assert!(!in_use.contains_key(&t.port_id), "{} handed out twice", t.port_id);
                            in_use.insert(t.port_id, want);
                        }
                    }
                    Op::Give { nth } => {
                        let Some(id) = in_use.keys().nth(nth as usize % in_use.len().max(1)).cloned() else {
                            continue;
                        };
                        let current = in_use.remove(&id).unwrap();
                        match pool.on_release(&current, limits) {
                            ReleaseDecision::Recycle { sg_reset } => {
                                let now = sg_reset.unwrap_or(current);
                                prop_assert_eq!(&now, pool.default_sgs());
                                pool.add_free(&id, now);
                            }
                            ReleaseDecision::Delete => {
                                let max = limits.max_free().unwrap();
                                prop_assert!(pool.load().spare() >= max);
                            }
                        }
                    }
                    Op::Refill => {
                        let n = pool.plan(limits).create;
                        if n > 0 {
                            pool.begin_create(n);
                            landing.push(n);
                        }
                    }
                    Op::Land { ok } => {
                        let Some(n) = landing.pop() else { continue };
                        if ok {
                            let ids: Vec<String> = (0..n).map(|i| format!("new-{}", next_id + i)).collect();
                            next_id += n;
                            pool.created(&ids);
                        } else {
                            pool.create_failed(n);
                        }
                    }
                    Op::Forget { pod } => {
                        pool.forget(&format!("pod-{pod}"));
                    }
                    Op::Trim => {
                        let n = pool.plan(limits).release;
                        let gone = pool.take_for_release(n);
                        prop_assert_eq!(gone.len() as u32, n);
                    }
                }
                let free: Vec<&str> = pool.free_ports().map(|p| p.port_id.as_str()).collect();
                let unique: BTreeSet<&str> = free.iter().copied().collect();
                prop_assert_eq!(unique.len(), free.len(), "a port is free twice");
                prop_assert!(free.iter().all(|id| !in_use.contains_key(*id)), "a port is free and in use");
                prop_assert_eq!(pool.load().in_flight, landing.iter().sum::<u32>());
            }
        }
    }
}

#[test]
fn free_ports_gone_from_neutron_leave_their_pools_and_idle_pools_go() {
    let mut pools = Pools::default();
    let defaults = sgs(&["default"]);
    pools
        .entry(mk_key("t1"), &defaults)
        .add_free("a", defaults.clone());
    pools
        .entry(mk_key("t1"), &defaults)
        .add_free("b", defaults.clone());
    pools
        .entry(mk_key("t2"), &defaults)
        .add_free("c", defaults.clone());
    pools.entry(mk_key("t3"), &defaults).begin_create(2);
    // "c" was free before the list and is not listed; "b" became free after the list began.
    let before = sgs(&["a", "c"]);
    let listed = [subport("a")];
    assert_eq!(pools.forget_vanished(&before, &listed), ["c"]);
    assert_eq!(pools.free_port_ids(), sgs(&["a", "b"]));
    // t2 is empty now, t3 has creates in flight, t1 has ports.
    assert_eq!(pools.drop_idle(|_| false), [mk_key("t2")]);
    assert_eq!(pools.len(), 2);
    // A kept pool stays even when idle.
    pools.entry(mk_key("t4"), &defaults);
    assert!(pools.drop_idle(|k| *k == mk_key("t4")).is_empty());
}

fn subport(id: &str) -> NeutronPort {
    NeutronPort {
        device_owner: SUBPORT_DEVICE_OWNER.into(),
        ..mk_port(id, "", &[])
    }
}

#[test]
fn a_free_port_detached_from_its_trunk_leaves_the_pool_a_host_pools_port_stays() {
    // A detach a killed process sent lands after the port was given back: "a" is listed, no longer a
    // subport. "h" is in a host's (macvlan) pool, where ports are never subports.
    let mut pools = Pools::default();
    let defaults = sgs(&["default"]);
    pools
        .entry(mk_key("t1"), &defaults)
        .add_free("a", defaults.clone());
    pools
        .entry(mk_key("t1"), &defaults)
        .add_free("s", defaults.clone());
    let host = PoolKey {
        parent: PoolParent::Host("node-1".into()),
        ..mk_key("t1")
    };
    pools.entry(host, &defaults).add_free("h", defaults.clone());
    let before = sgs(&["a", "s", "h"]);
    let listed = [mk_port("a", "", &[]), subport("s"), mk_port("h", "node-1", &[])];
    assert_eq!(pools.forget_vanished(&before, &listed), ["a"]);
    assert_eq!(pools.free_port_ids(), sgs(&["h", "s"]));
}
