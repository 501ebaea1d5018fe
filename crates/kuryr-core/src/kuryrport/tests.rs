use kuryr_api::vif::VifIp;
use kuryr_api::KuryrPortSpec;

use super::*;

fn mk_vif(vif_type: VifType, active: bool) -> Vif {
    Vif {
        vif_type,
        port_id: "port-1".into(),
        network_id: "net-1".into(),
        mac: "fa:16:3e:00:00:01".into(),
        ips: vec![VifIp {
            address: "10.1.0.7".into(),
            cidr: "10.1.0.0/24".into(),
            gateway: None,
            subnet_id: None,
            routes: vec![],
        }],
        mtu: Some(1450),
        vlan_id: (vif_type == VifType::NestedVlan).then_some(5),
        vrrp_mac: None,
        trunk_id: (vif_type == VifType::NestedVlan).then(|| "trunk-1".into()),
        parent_port_id: Some("vm-port".into()),
        parent_ifname: None,
        parent_mac: None,
        vif_name: None,
        bridge_name: None,
        security_group_ids: vec!["sg-web".into()],
        active,
    }
}

fn mk_kp(node: &str) -> KuryrPort {
    let spec = KuryrPortSpec {
        pod_uid: "uid-1".into(),
        pod_node_name: node.into(),
        pod_static: false,
        vif_type: None,
        project_id: None,
        subnet_ids: None,
        security_group_ids: None,
        additional_networks: Vec::new(),
    };
    let mut kp = KuryrPort::new("web", spec);
    kp.metadata.namespace = Some("ns".into());
    kp
}

fn set(items: &[&str]) -> BTreeSet<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}

#[test]
fn facts_come_from_the_kuryrport_spec() {
    let facts = facts(&mk_kp("w1"), "proj", ["sg".to_string()]).unwrap();
    assert_eq!((facts.namespace.as_str(), facts.name.as_str()), ("ns", "web"));
    assert_eq!((facts.uid.as_str(), facts.node_name.as_str()), ("uid-1", "w1"));
    assert_eq!(
        super::facts(&mk_kp(""), "proj", []).unwrap_err().reason(),
        "PodNotScheduled"
    );
}

#[test]
fn eth0_is_recorded_as_the_default_interface_and_rewrites_are_noticed() {
    let mut status = KuryrPortStatus::default();
    assert!(set_vif(&mut status, "eth0", mk_vif(VifType::NestedVlan, false)));
    assert!(!set_vif(&mut status, "eth0", mk_vif(VifType::NestedVlan, false)));
    assert!(set_vif(&mut status, "eth0", mk_vif(VifType::NestedVlan, true)));
    assert!(set_vif(&mut status, "net1", mk_vif(VifType::NestedVlan, true)));
    assert_eq!(status.default_vif().map(|(n, _)| n), Some("eth0"));
    assert!(!status.vifs["net1"].default);
}

#[test]
fn ready_follows_allocation_activity_and_failures() {
    let now = Timestamp::UNIX_EPOCH;
    let mut status = KuryrPortStatus::default();
    let c = ready_condition(&status, None, Some(3), now);
    assert_eq!(
        (c.status, c.reason.as_str()),
        (ConditionStatus::False, REASON_ALLOCATING)
    );
    assert_eq!(c.observed_generation, Some(3));

    set_vif(&mut status, "eth0", mk_vif(VifType::NestedVlan, false));
    let c = ready_condition(&status, None, None, now);
    assert_eq!(
        (c.status, c.reason.as_str()),
        (ConditionStatus::False, REASON_WAITING_FOR_ACTIVE)
    );
    assert!(c.message.contains("eth0"));

    set_vif(&mut status, "eth0", mk_vif(VifType::NestedVlan, true));
    assert!(ready_condition(&status, None, None, now).is_true());

    let err = CoreError::NoTrunkOnNode {
        node: "w1".into(),
        port_id: "vm".into(),
    };
    let c = ready_condition(&status, Some(&err), None, now);
    assert_eq!(
        (c.status, c.reason.as_str()),
        (ConditionStatus::False, "NoTrunkOnNode")
    );
    assert!(c.message.contains("w1"));
}

#[test]
fn ports_go_back_to_the_pool_of_their_trunk_or_host() {
    let vlan = pool_key(&mk_vif(VifType::NestedVlan, true), "w1", "proj").unwrap();
    assert_eq!(vlan.parent, PoolParent::Trunk("trunk-1".into()));
    assert_eq!(vlan.network_id, "net-1");
    let bound = pool_key(&mk_vif(VifType::NeutronVif, true), "w1", "proj").unwrap();
    assert_eq!(bound.parent, PoolParent::Host("w1".into()));
    assert_eq!(
        pool_key(&mk_vif(VifType::NestedMacvlan, true), "w1", "proj"),
        None
    );
}

#[test]
fn a_pooled_port_is_recycled_with_an_sg_reset_and_keeps_its_subport() {
    let vif = mk_vif(VifType::NestedVlan, true);
    let key = pool_key(&vif, "w1", "proj").unwrap();
    let pool = Pool::new(key.clone(), set(&["default"]));
    assert_eq!(
        release_plan(&vif, Some(&pool), PoolLimits::default()),
        vec![
            ReleaseStep::ResetSecurityGroups {
                port_id: "port-1".into(),
                security_groups: set(&["default"])
            },
            ReleaseStep::ReturnToPool {
                key,
                port_id: "port-1".into()
            },
        ]
    );
}

#[test]
fn without_room_in_the_pool_a_subport_is_removed_then_deleted() {
    let vif = mk_vif(VifType::NestedVlan, true);
    let mut pool = Pool::new(pool_key(&vif, "w1", "proj").unwrap(), set(&["default"]));
    pool.add_free("other", set(&["default"]));
    let full = PoolLimits::new(0, 1, 1).unwrap();
    let expected = vec![
        ReleaseStep::RemoveSubport {
            trunk_id: "trunk-1".into(),
            port_id: "port-1".into(),
        },
        ReleaseStep::DeletePort {
            port_id: "port-1".into(),
        },
    ];
    assert_eq!(release_plan(&vif, Some(&pool), full), expected);
    assert_eq!(release_plan(&vif, None, PoolLimits::default()), expected);
}

#[test]
fn a_macvlan_port_loses_its_address_pair_before_it_is_deleted() {
    assert_eq!(
        release_plan(&mk_vif(VifType::NestedMacvlan, true), None, PoolLimits::default()),
        vec![
            ReleaseStep::RemoveAddressPair {
                vm_port_id: "vm-port".into(),
                ip: "10.1.0.7".into()
            },
            ReleaseStep::DeletePort {
                port_id: "port-1".into()
            },
        ]
    );
    assert_eq!(
        release_plan(&mk_vif(VifType::NeutronVif, true), None, PoolLimits::default()),
        vec![ReleaseStep::DeletePort {
            port_id: "port-1".into()
        }]
    );
}
