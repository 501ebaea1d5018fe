use super::*;
use crate::neutron::Subport;

const TAGS: [&str; 3] = ["kuryr.cluster=c", "kuryr.kind=pool", "kuryr.uid=c"];

fn tags() -> Vec<String> {
    TAGS.iter().map(|t| (*t).to_owned()).collect()
}

fn set(ids: &[&str]) -> BTreeSet<String> {
    ids.iter().map(|s| (*s).to_owned()).collect()
}

fn port(id: &str, owner: &str, host: &str) -> NeutronPort {
    NeutronPort {
        id: id.into(),
        network_id: "net".into(),
        project_id: "proj".into(),
        device_owner: owner.into(),
        binding_host_id: host.into(),
        tags: set(&TAGS),
        security_groups: set(&["default"]),
        status: PortStatus::Active,
        ..NeutronPort::default()
    }
}

fn subport(id: &str) -> NeutronPort {
    port(id, SUBPORT_DEVICE_OWNER, "")
}

fn trunk(id: &str, subports: &[&str]) -> Trunk {
    Trunk {
        id: id.into(),
        port_id: format!("{id}-parent"),
        subports: subports
            .iter()
            .enumerate()
            .map(|(i, p)| Subport {
                port_id: (*p).into(),
                segmentation_id: u16::try_from(i + 1).unwrap(),
            })
            .collect(),
    }
}

fn key(parent: PoolParent) -> PoolKey {
    PoolKey {
        parent,
        network_id: "net".into(),
        project_id: "proj".into(),
    }
}

fn ids(ports: &[NeutronPort]) -> Vec<&str> {
    ports.iter().map(|p| p.id.as_str()).collect()
}

fn nothing() -> BTreeSet<String> {
    BTreeSet::new()
}

#[test]
fn a_port_loose_at_two_scans_with_no_operation_running_is_acted_on() {
    let mut book = LooseBook::default();
    let listed = [subport("a")];
    let (held, in_use) = (nothing(), nothing());
    let now = Held {
        held: &held,
        in_use: &in_use,
        oldest_op: None,
    };
    assert!(
        book.observe(1, &listed, &tags(), now).is_empty(),
        "first sighting only"
    );
    assert_eq!(book.suspects(), 1);
    assert_eq!(ids(&book.observe(2, &listed, &tags(), now)), ["a"]);
    assert_eq!(book.suspects(), 0, "acted on: forgotten");
}

#[test]
fn a_port_a_pool_or_a_status_or_an_operation_holds_is_never_loose() {
    let mut book = LooseBook::default();
    let listed = [subport("free"), subport("named"), subport("taken")];
    let held = set(&["free", "taken"]);
    let in_use = set(&["named"]);
    let now = Held {
        held: &held,
        in_use: &in_use,
        oldest_op: None,
    };
    for scan in 1..5 {
        assert!(book.observe(scan, &listed, &tags(), now).is_empty());
    }
    assert_eq!(book.suspects(), 0);
}

#[test]
fn a_refill_begun_before_the_first_sighting_keeps_its_ports_until_it_ends() {
    // The create was carried out (the port is listed) but its answer has not come back: the refill that
    // began before scan 1 would add the port to its pool. Acting on it would hand it out twice.
    let mut book = LooseBook::default();
    let listed = [subport("landing")];
    let (held, in_use) = (nothing(), nothing());
    let running = |oldest_op| Held {
        held: &held,
        in_use: &in_use,
        oldest_op,
    };
    assert!(book.observe(1, &listed, &tags(), running(Some(0))).is_empty());
    assert!(book.observe(2, &listed, &tags(), running(Some(0))).is_empty());
    assert!(
        book.observe(3, &listed, &tags(), running(Some(1))).is_empty(),
        "began in scan 1's round"
    );
    // Operations begun after the first sighting cannot have made it.
    assert_eq!(
        ids(&book.observe(4, &listed, &tags(), running(Some(2)))),
        ["landing"]
    );
}

#[test]
fn a_port_taken_in_between_starts_again_from_scratch() {
    let mut book = LooseBook::default();
    let listed = [subport("a")];
    let in_use = nothing();
    let none = nothing();
    let held_a = set(&["a"]);
    let at = |held| Held {
        held,
        in_use: &in_use,
        oldest_op: None,
    };
    assert!(book.observe(1, &listed, &tags(), at(&none)).is_empty());
    assert!(
        book.observe(2, &listed, &tags(), at(&held_a)).is_empty(),
        "in a pool now"
    );
    assert!(
        book.observe(3, &listed, &tags(), at(&none)).is_empty(),
        "loose again: first sighting"
    );
    assert_eq!(ids(&book.observe(4, &listed, &tags(), at(&none))), ["a"]);
}

#[test]
fn ports_without_the_pool_tags_or_not_made_by_kuryr_are_not_looked_at() {
    let mut book = LooseBook::default();
    let mut other_cluster = subport("other");
    other_cluster.tags = set(&["kuryr.cluster=d", "kuryr.kind=pool", "kuryr.uid=d"]);
    let vm = port("vm", "compute:nova", "");
    let (held, in_use) = (nothing(), nothing());
    let now = Held {
        held: &held,
        in_use: &in_use,
        oldest_op: None,
    };
    let listed = [other_cluster, vm];
    for scan in 1..4 {
        assert!(book.observe(scan, &listed, &tags(), now).is_empty());
    }
}

#[test]
fn a_subport_of_a_live_node_goes_to_its_pool_up_to_the_high_watermark() {
    let limits = PoolLimits::new(1, 2, 1).unwrap();
    let t1 = PoolParent::Trunk("t1".into());
    let live = BTreeSet::from([t1.clone()]);
    let loads = BTreeMap::from([(
        key(t1.clone()),
        PoolLoad {
            free: 1,
            in_flight: 0,
            pending: 0,
        },
    )]);
    let ports = [subport("a"), subport("b")];
    let got = decide(&ports, &[trunk("t1", &["a", "b"])], &live, &loads, limits);
    assert_eq!(
        got,
        [
            LooseAction::Adopt {
                key: key(t1),
                port_id: "a".into(),
                security_groups: set(&["default"]),
            },
            // The pool is at max_free once "a" is in.
            LooseAction::Delete {
                port_id: "b".into(),
                trunk_id: Some("t1".into()),
            },
        ]
    );
}

#[test]
fn a_pool_not_in_memory_counts_as_empty() {
    let limits = PoolLimits::new(2, 8, 4).unwrap();
    let t1 = PoolParent::Trunk("t1".into());
    let live = BTreeSet::from([t1.clone()]);
    let got = decide(
        &[subport("a")],
        &[trunk("t1", &["a"])],
        &live,
        &BTreeMap::new(),
        limits,
    );
    assert!(matches!(&got[..], [LooseAction::Adopt { key: k, .. }] if *k == key(t1)));
}

#[test]
fn unattached_dead_node_and_unusable_ports_are_deleted() {
    let limits = PoolLimits::new(2, 8, 4).unwrap();
    let live = BTreeSet::from([PoolParent::Trunk("t1".into()), PoolParent::Host("h1".into())]);
    let never_attached = port("made", DEVICE_OWNER, "");
    let dead_node = subport("dead");
    let not_yet_subport = port("odd", DEVICE_OWNER, ""); // listed as a subport by the trunk, owner not set
    let mut broken = subport("broken");
    broken.status = PortStatus::Error;
    let gone_host = port("gone-host", DEVICE_OWNER, "h2");
    let bound = port("bound", DEVICE_OWNER, "h1");
    let trunks = [trunk("t1", &["odd", "broken"]), trunk("t9", &["dead"])];
    let ports = [
        never_attached,
        dead_node,
        not_yet_subport,
        broken,
        gone_host,
        bound,
    ];
    let got = decide(&ports, &trunks, &live, &BTreeMap::new(), limits);
    let del = |id: &str, t: Option<&str>| LooseAction::Delete {
        port_id: id.into(),
        trunk_id: t.map(str::to_owned),
    };
    assert_eq!(
        got,
        [
            del("made", None),
            del("dead", Some("t9")),
            del("odd", Some("t1")),
            del("broken", Some("t1")),
            del("gone-host", None),
            LooseAction::Adopt {
                key: key(PoolParent::Host("h1".into())),
                port_id: "bound".into(),
                security_groups: set(&["default"]),
            },
        ]
    );
}
