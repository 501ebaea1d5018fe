use std::collections::BTreeSet;

use super::*;
use crate::neutron::{FixedIp, PortStatus};
use crate::vif::PodFacts;

fn set(items: &[&str]) -> BTreeSet<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}

fn mk_subnet() -> Subnet {
    Subnet {
        id: "sub-1".into(),
        network_id: "net-1".into(),
        cidr: "10.1.0.0/24".into(),
        gateway_ip: Some("10.1.0.1".into()),
        mtu: Some(1450),
        ..Subnet::default()
    }
}

fn mk_pod() -> PodFacts {
    PodFacts {
        namespace: "ns".into(),
        name: "web".into(),
        uid: "uid-1".into(),
        node_name: "w1".into(),
        project_id: "proj".into(),
        security_groups: set(&["sg-web"]),
    }
}

fn mk_port() -> NeutronPort {
    NeutronPort {
        id: "port-1".into(),
        network_id: "net-1".into(),
        mac_address: "fa:16:3e:00:00:07".into(),
        fixed_ips: vec![FixedIp {
            subnet_id: "sub-1".into(),
            ip_address: "10.1.0.7".into(),
        }],
        security_groups: set(&["sg-web"]),
        status: PortStatus::Active,
        ..NeutronPort::default()
    }
}

fn request(driver: &dyn VifDriver, owner: PortOwner<'_>) -> PortRequest {
    let subnet = mk_subnet();
    let tags = set(&["kuryr.openstack.org/cluster=c1"]);
    let sgs = set(&["sg-web"]);
    driver.port_request(PortParams {
        owner,
        subnets: std::slice::from_ref(&subnet),
        project_id: "proj",
        security_groups: &sgs,
        tags: &tags,
        neutron_host: None,
    })
}

#[test]
fn nested_vlan_asks_for_an_unbound_kuryr_port_named_after_the_pod() {
    let pod = mk_pod();
    let req = request(&NestedVlan::default(), PortOwner::Pod(&pod));
    assert_eq!(req.name, "ns/web");
    assert_eq!(req.network_id, "net-1");
    assert_eq!(req.subnet_ids, vec!["sub-1".to_owned()]);
    assert_eq!(req.project_id, "proj");
    assert_eq!(req.device_owner, "compute:kuryr");
    // A port with a device cannot become a subport.
    assert_eq!(req.device_id, "");
    assert_eq!(req.binding_host_id, None);
    assert_eq!(req.security_groups, set(&["sg-web"]));
    assert!(req.tags.contains("kuryr.openstack.org/cluster=c1"));
}

#[test]
fn neutron_vif_binds_the_port_to_the_node() {
    let pod = mk_pod();
    let req = request(&NeutronVif::default(), PortOwner::Pod(&pod));
    assert_eq!(req.binding_host_id.as_deref(), Some("w1"));
    let pooled = request(&NeutronVif::default(), PortOwner::Pool { node_name: "w2" });
    assert_eq!(pooled.binding_host_id.as_deref(), Some("w2"));
    assert_eq!(pooled.name, "available-port");
    assert_eq!(pooled.device_id, "");
    let subnet = mk_subnet();
    let (tags, sgs) = (set(&[]), set(&[]));
    let labelled = NeutronVif::default().port_request(PortParams {
        owner: PortOwner::Pod(&pod),
        subnets: std::slice::from_ref(&subnet),
        project_id: "proj",
        security_groups: &sgs,
        tags: &tags,
        neutron_host: Some("hv-3"),
    });
    assert_eq!(labelled.binding_host_id.as_deref(), Some("hv-3"));
}

#[test]
fn the_nested_vlan_vif_has_everything_the_cni_daemon_needs() {
    let attachment = vlan_attachment();
    let vif = NestedVlan::default()
        .vif(&mk_port(), &[mk_subnet()], &attachment)
        .unwrap();
    assert_eq!(vif.vif_type, VifType::NestedVlan);
    assert_eq!(vif.port_id, "port-1");
    assert_eq!(vif.mac, "fa:16:3e:00:00:07");
    assert_eq!(vif.ips[0].address, "10.1.0.7");
    assert_eq!(vif.ips[0].cidr, "10.1.0.0/24");
    assert_eq!(vif.ips[0].gateway.as_deref(), Some("10.1.0.1"));
    assert_eq!(vif.mtu, Some(1450));
    assert_eq!(vif.vlan_id, Some(42));
    assert_eq!(vif.trunk_id.as_deref(), Some("trunk-1"));
    assert_eq!(vif.parent_port_id.as_deref(), Some("vm-port"));
    // No NIC name unless pinned: each node's daemon finds its NIC by the VM port's MAC.
    assert_eq!(vif.parent_ifname, None);
    assert_eq!(vif.parent_mac.as_deref(), Some("fa:16:3e:aa:bb:cc"));
    assert_eq!(vif.security_group_ids, vec!["sg-web".to_string()]);
    assert!(vif.active);
}

fn vlan_attachment() -> Attachment {
    Attachment::Vlan {
        trunk_id: "trunk-1".into(),
        parent_port_id: "vm-port".into(),
        parent_mac: "fa:16:3e:aa:bb:cc".into(),
        vlan_id: 42,
    }
}

#[test]
fn a_pinned_link_iface_is_recorded_and_an_unknown_parent_mac_is_not() {
    let attachment = Attachment::Vlan {
        trunk_id: "trunk-1".into(),
        parent_port_id: "vm-port".into(),
        parent_mac: String::new(),
        vlan_id: 42,
    };
    let vif = NestedVlan {
        link_iface: Some("ens3".into()),
    }
    .vif(&mk_port(), &[mk_subnet()], &attachment)
    .unwrap();
    assert_eq!(vif.parent_ifname.as_deref(), Some("ens3"));
    assert_eq!(vif.parent_mac, None);
}

#[test]
fn the_neutron_vif_vif_names_its_bridge() {
    let vif = NeutronVif {
        bridge: "br-kuryr".into(),
    }
    .vif(&mk_port(), &[mk_subnet()], &Attachment::Bridge)
    .unwrap();
    assert_eq!(vif.bridge_name.as_deref(), Some("br-kuryr"));
    assert_eq!(vif.vlan_id, None);
    assert_eq!(vif.vif_name.as_deref(), Some("tapport-1"));
}

#[test]
fn the_macvlan_vif_carries_the_vrrp_mac_and_its_own_port_mac() {
    let attachment = Attachment::Macvlan {
        parent_port_id: "vm-port".into(),
        parent_mac: "fa:16:3e:aa:bb:cc".into(),
        vrrp_mac: "00:00:5e:00:01:01".into(),
    };
    let driver = NestedMacvlan {
        link_iface: Some("ens3".into()),
    };
    let vif = driver.vif(&mk_port(), &[mk_subnet()], &attachment).unwrap();
    assert_eq!(vif.vrrp_mac.as_deref(), Some("00:00:5e:00:01:01"));
    assert_eq!(vif.mac, "fa:16:3e:00:00:07");
    assert_eq!(vif.parent_ifname.as_deref(), Some("ens3"));
    assert_eq!(vif.parent_mac.as_deref(), Some("fa:16:3e:aa:bb:cc"));
    assert!(!driver.pools_ports());
}

#[test]
fn a_driver_refuses_another_drivers_attachment() {
    let err = NeutronVif::default()
        .vif(&mk_port(), &[mk_subnet()], &vlan_attachment())
        .unwrap_err();
    assert_eq!(
        err,
        CoreError::AttachmentMismatch {
            driver: "neutron-vif",
            attachment: "vlan"
        }
    );
    assert!(NestedVlan::default()
        .vif(&mk_port(), &[mk_subnet()], &Attachment::Bridge)
        .is_err());
}

#[test]
fn every_creatable_vif_type_has_a_driver() {
    let config = DriverConfig::default();
    for t in [VifType::NeutronVif, VifType::NestedVlan, VifType::NestedMacvlan] {
        assert_eq!(driver_for(t, &config).map(|d| d.vif_type()), Some(t));
    }
    assert!(driver_for(VifType::NestedDpdk, &config).is_none());
}

#[test]
fn a_dual_stack_pod_asks_for_one_address_from_each_subnet_and_gets_both_on_its_vif() {
    let v4 = mk_subnet();
    let v6 = Subnet {
        id: "sub-6".into(),
        cidr: "fd00:1::/64".into(),
        gateway_ip: Some("fd00:1::1".into()),
        ..mk_subnet()
    };
    let subnets = [v4, v6];
    let pod = mk_pod();
    let tags = set(&[]);
    let sgs = set(&["sg-web"]);
    let req = NestedVlan::default().port_request(PortParams {
        owner: PortOwner::Pod(&pod),
        subnets: &subnets,
        project_id: "proj",
        security_groups: &sgs,
        tags: &tags,
        neutron_host: None,
    });
    assert_eq!(req.network_id, "net-1");
    assert_eq!(req.subnet_ids, vec!["sub-1".to_owned(), "sub-6".to_owned()]);
    let mut port = mk_port();
    port.fixed_ips.push(FixedIp {
        subnet_id: "sub-6".into(),
        ip_address: "fd00:1::7".into(),
    });
    let vif = NestedVlan::default()
        .vif(&port, &subnets, &vlan_attachment())
        .unwrap();
    let got: Vec<(&str, &str, Option<&str>)> = vif
        .ips
        .iter()
        .map(|ip| (ip.address.as_str(), ip.cidr.as_str(), ip.gateway.as_deref()))
        .collect();
    assert_eq!(
        got,
        vec![
            ("10.1.0.7", "10.1.0.0/24", Some("10.1.0.1")),
            ("fd00:1::7", "fd00:1::/64", Some("fd00:1::1"))
        ]
    );
}
