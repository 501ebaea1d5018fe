use super::*;
use crate::neutron::{FixedIp, HostRoute, PortStatus};

fn mk_subnet() -> Subnet {
    Subnet {
        id: "sub-1".into(),
        network_id: "net-1".into(),
        cidr: "10.1.0.0/24".into(),
        gateway_ip: Some("10.1.0.1".into()),
        host_routes: vec![HostRoute {
            destination: "10.2.0.0/16".into(),
            nexthop: "10.1.0.254".into(),
        }],
        mtu: Some(1442),
        ..Subnet::default()
    }
}

fn mk_port(subnet: &str) -> NeutronPort {
    NeutronPort {
        id: "0123456789abcdef".into(),
        network_id: "net-1".into(),
        mac_address: "fa:16:3e:00:00:01".into(),
        fixed_ips: vec![FixedIp {
            subnet_id: subnet.into(),
            ip_address: "10.1.0.7".into(),
        }],
        status: PortStatus::Active,
        ..NeutronPort::default()
    }
}

#[test]
fn vif_ips_carry_the_subnet_cidr_gateway_and_routes() {
    let ips = vif_ips(&mk_port("sub-1"), &[mk_subnet()]).unwrap();
    assert_eq!(ips.len(), 1);
    assert_eq!(ips[0].address, "10.1.0.7");
    assert_eq!(ips[0].cidr, "10.1.0.0/24");
    assert_eq!(ips[0].gateway.as_deref(), Some("10.1.0.1"));
    assert_eq!(ips[0].subnet_id.as_deref(), Some("sub-1"));
    assert_eq!(ips[0].routes[0].cidr, "10.2.0.0/16");
}

#[test]
fn an_ip_on_an_unknown_subnet_is_an_error_not_a_guess() {
    let err = vif_ips(&mk_port("sub-x"), &[mk_subnet()]).unwrap_err();
    assert_eq!(
        err,
        CoreError::UnknownSubnet {
            port_id: "0123456789abcdef".into(),
            subnet_id: "sub-x".into()
        }
    );
}

#[test]
fn a_port_without_ips_cannot_serve_a_pod() {
    let port = NeutronPort {
        fixed_ips: vec![],
        ..mk_port("sub-1")
    };
    assert_eq!(
        vif_ips(&port, &[mk_subnet()]).unwrap_err().reason(),
        "PortWithoutIp"
    );
}

#[test]
fn vif_names_fit_in_ifnamsiz() {
    assert_eq!(vif_name("0123456789abcdef"), "tap0123456789a");
    assert!(vif_name("0123456789abcdef").len() < 16);
}

#[test]
fn the_base_vif_takes_mtu_mac_and_activity_from_the_port() {
    let vif = base_vif(VifType::NestedVlan, &mk_port("sub-1"), &[mk_subnet()]).unwrap();
    assert_eq!(vif.mtu, Some(1442));
    assert_eq!(vif.mac, "fa:16:3e:00:00:01");
    assert!(vif.active);
    let down = NeutronPort {
        status: PortStatus::Down,
        ..mk_port("sub-1")
    };
    assert!(
        !base_vif(VifType::NestedVlan, &down, &[mk_subnet()])
            .unwrap()
            .active
    );
}
