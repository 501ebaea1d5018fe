use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;

use super::*;

fn mk_trunk(subports: &[(&str, u16)]) -> Trunk {
    Trunk {
        id: "trunk-1".into(),
        port_id: "vm-port".into(),
        subports: subports
            .iter()
            .map(|(p, id)| Subport {
                port_id: (*p).into(),
                segmentation_id: *id,
            })
            .collect(),
    }
}

fn full(trunk: &Trunk) -> VlanAllocator {
    VlanAllocator::from_trunk(trunk, VlanRange::default())
}

#[test]
fn the_lowest_id_not_on_the_trunk_is_handed_out_first() {
    let mut vlans = full(&mk_trunk(&[("a", 1), ("b", 2), ("c", 4)]));
    assert_eq!(vlans.reserve("p1"), Ok(3));
    assert_eq!(vlans.reserve("p2"), Ok(5));
}

#[test]
fn a_reserved_id_is_not_handed_out_again_before_commit_or_release() {
    let mut vlans = full(&mk_trunk(&[]));
    let first = vlans.reserve("p1").unwrap();
    let second = vlans.reserve("p2").unwrap();
    assert_ne!(first, second);
}

#[test]
fn reserving_twice_for_one_port_returns_the_same_id() {
    let mut vlans = full(&mk_trunk(&[]));
    let id = vlans.reserve("p1").unwrap();
    assert_eq!(vlans.reserve("p1"), Ok(id));
    vlans.commit("p1");
    assert_eq!(vlans.reserve("p1"), Ok(id));
}

#[test]
fn a_released_vlan_is_reused_after_commit_of_others() {
    let mut vlans = full(&mk_trunk(&[]));
    let a = vlans.reserve("a").unwrap();
    let _b = vlans.reserve("b").unwrap();
    assert_eq!(vlans.release("a"), Some(a));
    vlans.commit("b");
    assert_eq!(vlans.reserve("c"), Ok(a));
}

#[test]
fn a_failed_batch_releases_every_reservation() {
    let mut vlans = full(&mk_trunk(&[]));
    let ports: Vec<String> = (0..10).map(|i| format!("p{i}")).collect();
    let subports = vlans.reserve_many(&ports).unwrap();
    for s in &subports {
        vlans.release(&s.port_id);
    }
    assert_eq!(vlans.free_count(), 4094);
    assert!(vlans.reserved().is_empty());
}

#[test]
fn a_batch_larger_than_the_free_range_reserves_nothing() {
    let mut vlans = VlanAllocator::from_trunk(&mk_trunk(&[("x", 10)]), VlanRange::new(10, 12).unwrap());
    let ports = vec!["p1".to_string(), "p2".into(), "p3".into()];
    let err = vlans.reserve_many(&ports).unwrap_err();
    assert_eq!(err.reason(), "VlanRangeExhausted");
    assert_eq!(vlans.free_count(), 2);
}

#[test]
fn an_exhausted_range_names_the_trunk() {
    let mut vlans = VlanAllocator::from_trunk(&mk_trunk(&[("x", 7)]), VlanRange::new(7, 7).unwrap());
    assert_eq!(
        vlans.reserve("p"),
        Err(CoreError::VlanRangeExhausted {
            trunk_id: "trunk-1".into(),
            first: 7,
            last: 7
        })
    );
}

#[test]
fn ranges_outside_the_8021q_ids_are_refused() {
    assert!(VlanRange::new(0, 10).is_err());
    assert!(VlanRange::new(1, 4095).is_err());
    assert!(VlanRange::new(20, 10).is_err());
    assert_eq!(VlanRange::new(100, 199).unwrap().len(), 100);
}

#[test]
fn a_restarted_controller_rebuilds_the_same_ids_from_the_trunk() {
    let mut before = full(&mk_trunk(&[("a", 1)]));
    before.reserve("b").unwrap();
    before.commit("b");
    // What Neutron shows after the successful add_subports.
    let trunk = mk_trunk(&[("a", 1), ("b", 2)]);
    let after = full(&trunk);
    assert_eq!(after.committed(), before.committed());
}

#[test]
fn a_conflict_resync_displaces_the_reservation_another_writer_took() {
    let mut vlans = full(&mk_trunk(&[]));
    assert_eq!(vlans.reserve("mine"), Ok(1));
    // Another writer (an old leader) added a subport on VLAN 1 meanwhile: our add_subports got 409.
    let displaced = vlans.resync(&mk_trunk(&[("theirs", 1)]));
    assert_eq!(displaced, vec!["mine".to_string()]);
    assert_eq!(vlans.reserve("mine"), Ok(2));
}

#[test]
fn a_resync_commits_a_reservation_whose_call_went_through() {
    let mut vlans = full(&mk_trunk(&[]));
    let id = vlans.reserve("p").unwrap();
    let displaced = vlans.resync(&mk_trunk(&[("p", id)]));
    assert!(displaced.is_empty());
    assert!(vlans.reserved().is_empty());
    assert_eq!(vlans.vlan_of("p"), Some(id));
}

#[test]
fn a_resync_keeps_reservations_still_in_flight() {
    let mut vlans = full(&mk_trunk(&[("a", 1)]));
    let id = vlans.reserve("p").unwrap();
    assert!(vlans.resync(&mk_trunk(&[])).is_empty());
    assert_eq!(vlans.vlan_of("p"), Some(id));
    assert_eq!(vlans.vlan_of("a"), None);
}

#[test]
fn subports_outside_the_range_still_block_nothing_inside_it() {
    let mut vlans = VlanAllocator::from_trunk(&mk_trunk(&[("x", 5)]), VlanRange::new(100, 101).unwrap());
    assert_eq!(vlans.free_count(), 2);
    assert_eq!(vlans.reserve("p"), Ok(100));
}

#[test]
fn a_book_keeps_one_allocator_per_trunk() {
    let mut book = VlanBook::new(VlanRange::default());
    let t1 = mk_trunk(&[("a", 1)]);
    let t2 = Trunk {
        id: "trunk-2".into(),
        ..mk_trunk(&[])
    };
    assert_eq!(book.for_trunk(&t1).reserve("p"), Ok(2));
    // Same VLAN on another trunk is fine: ids are per trunk.
    assert_eq!(book.for_trunk(&t2).reserve("q"), Ok(1));
    // Known trunks keep their reservations rather than being rebuilt.
    assert_eq!(book.for_trunk(&t1).reserve("r"), Ok(3));
    assert!(book.forget("trunk-1").is_some());
    assert_eq!(book.for_trunk(&t1).reserve("r"), Ok(2));
}

#[test]
fn a_batch_is_committed_or_released_as_a_whole() {
    let mut vlans = full(&mk_trunk(&[]));
    let ports: Vec<String> = (0..3).map(|i| format!("p{i}")).collect();
    vlans.reserve_many(&ports).unwrap();
    vlans.commit_many(ports[..2].iter().map(String::as_str));
    vlans.release_many([ports[2].as_str()]);
    assert_eq!(vlans.committed().len(), 2);
    assert!(vlans.reserved().is_empty());
}

// === properties ===

#[derive(Clone, Debug)]
enum Op {
    Reserve(u8),
    ReserveMany(Vec<u8>),
    Commit(u8),
    Release(u8),
    /// Re-read the trunk as Neutron shows it, with a foreign subport possibly added.
    Resync(Option<u16>),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0u8..24).prop_map(Op::Reserve),
        1 => proptest::collection::vec(0u8..24, 0..6).prop_map(Op::ReserveMany),
        3 => (0u8..24).prop_map(Op::Commit),
        2 => (0u8..24).prop_map(Op::Release),
        1 => proptest::option::of(1u16..40).prop_map(Op::Resync),
    ]
}

fn port(n: u8) -> String {
    format!("port-{n}")
}

/// Every holder's id, checking on the way that no id has two holders and no holder two ids.
fn holders(v: &VlanAllocator) -> BTreeMap<String, u16> {
    let mut by_port = BTreeMap::new();
    let mut ids = BTreeSet::new();
    for s in v.committed().into_iter().chain(v.reserved()) {
        assert!(
            ids.insert(s.segmentation_id),
            "id {} has two holders",
            s.segmentation_id
        );
        assert!(
            by_port.insert(s.port_id.clone(), s.segmentation_id).is_none(),
            "{} holds two ids",
            s.port_id
        );
    }
    by_port
}

fn apply(v: &mut VlanAllocator, trunk: &mut Trunk, op: &Op) {
    match op {
        Op::Reserve(p) => {
            let before = v.vlan_of(&port(*p));
            if let Ok(id) = v.reserve(&port(*p)) {
                assert!(before.is_none_or(|b| b == id));
                assert!(
                    before.is_some() || v.range().contains(id),
                    "{id} outside the range"
                );
            }
        }
        Op::ReserveMany(ps) => {
            let mut ps: Vec<String> = ps.iter().map(|p| port(*p)).collect();
            ps.dedup();
            let before = v.clone();
            if v.reserve_many(&ps).is_err() {
                assert_eq!(*v, before, "a failed batch must leave no reservation behind");
            }
        }
        Op::Commit(p) => {
            if let Some(id) = v.commit(&port(*p)) {
                // Neutron now shows it: keep the simulated trunk in step.
                trunk.subports.push(Subport {
                    port_id: port(*p),
                    segmentation_id: id,
                });
            }
        }
        Op::Release(p) => {
            if let Some(id) = v.release(&port(*p)) {
                trunk.subports.retain(|s| s.segmentation_id != id);
                assert_eq!(v.vlan_of(&port(*p)), None);
                // The id is free again: a fresh holder can get it.
                let mut probe = v.clone();
                let mut got = Vec::new();
                while let Ok(x) = probe.reserve(&format!("probe-{}", got.len())) {
                    got.push(x);
                    if x == id {
                        break;
                    }
                }
                assert!(!v.range().contains(id) || got.contains(&id));
            }
        }
        Op::Resync(foreign) => {
            if let Some(id) = foreign {
                if !trunk.subports.iter().any(|s| s.segmentation_id == *id) {
                    trunk.subports.push(Subport {
                        port_id: format!("foreign-{id}"),
                        segmentation_id: *id,
                    });
                }
            }
            for displaced in v.resync(trunk) {
                assert_eq!(v.vlan_of(&displaced), None);
            }
        }
    }
}

proptest! {
    #[test]
    fn no_id_is_ever_held_twice_and_rebuild_equals_the_committed_set(
        first in 1u16..20,
        width in 0u16..20,
        seed in proptest::collection::vec((1u16..30, 0u8..3), 0..6),
        ops in proptest::collection::vec(op(), 0..80),
    ) {
        let range = VlanRange::new(first, first + width).unwrap();
        let mut trunk = mk_trunk(&[]);
        for (id, n) in seed {
            if !trunk.subports.iter().any(|s| s.segmentation_id == id) {
                trunk.subports.push(Subport { port_id: format!("seed-{n}-{id}"), segmentation_id: id });
            }
        }
        let mut v = VlanAllocator::from_trunk(&trunk, range);
        for op in &ops {
            apply(&mut v, &mut trunk, op);
            holders(&v);
            let rebuilt = VlanAllocator::from_trunk(&trunk, range);
            prop_assert_eq!(rebuilt.committed(), v.committed());
        }
    }

    #[test]
    fn two_replicas_rebuilding_from_one_trunk_pick_the_same_ids(
        taken in proptest::collection::btree_set(1u16..64, 0..40),
        wanted in 1usize..30,
    ) {
        let trunk = Trunk {
            id: "t".into(),
            port_id: "vm".into(),
            subports: taken.iter().map(|id| Subport { port_id: format!("s{id}"), segmentation_id: *id }).collect(),
        };
        let ports: Vec<String> = (0..wanted).map(|i| format!("p{i}")).collect();
        let a = VlanAllocator::from_trunk(&trunk, VlanRange::default()).reserve_many(&ports);
        let b = VlanAllocator::from_trunk(&trunk, VlanRange::default()).reserve_many(&ports);
        prop_assert_eq!(&a, &b);
        for s in a.unwrap() {
            prop_assert!(!taken.contains(&s.segmentation_id));
        }
    }

    #[test]
    fn handed_out_ids_stay_within_the_configured_range(first in 1u16..4000, width in 0u16..50, n in 0usize..80) {
        let range = VlanRange::new(first, first + width).unwrap();
        let mut v = VlanAllocator::from_trunk(&mk_trunk(&[]), range);
        let mut got = BTreeSet::new();
        for i in 0..n {
            match v.reserve(&format!("p{i}")) {
                Ok(id) => {
                    prop_assert!(range.contains(id));
                    prop_assert!(got.insert(id));
                }
                Err(e) => {
                    prop_assert_eq!(got.len(), range.len());
                    prop_assert_eq!(e.reason(), "VlanRangeExhausted");
                }
            }
        }
    }
}
