//! Synthetic objects for tests (unit, root and plugin-level); no Kubernetes needed.

use std::collections::BTreeMap;

use kuryr_api::{KuryrPort, KuryrPortSpec, KuryrPortStatus, PodVif, Vif, VifIp, VifType};

/// A nested-macvlan VIF on 198.18.200.0/24 (the test range).
pub fn mk_vif(active: bool) -> Vif {
    Vif {
        vif_type: VifType::NestedMacvlan,
        port_id: "11111111-2222-3333-4444-555555555555".into(),
        network_id: "net-1".into(),
        mac: "fa:16:3e:00:00:01".into(),
        ips: vec![VifIp {
            address: "198.18.200.10".into(),
            cidr: "198.18.200.0/24".into(),
            gateway: Some("198.18.200.1".into()),
            subnet_id: None,
            routes: vec![],
        }],
        mtu: Some(1400),
        vlan_id: None,
        vrrp_mac: Some("00:00:5e:00:01:0a".into()),
        trunk_id: None,
        parent_port_id: None,
        parent_ifname: Some("eth0".into()),
        parent_mac: None,
        vif_name: None,
        bridge_name: None,
        security_group_ids: vec![],
        active,
    }
}

pub fn mk_port(ns: &str, name: &str, uid: &str, vifs: Vec<(&str, Vif)>) -> KuryrPort {
    let mut p = KuryrPort::new(
        name,
        KuryrPortSpec {
            pod_uid: uid.into(),
            pod_node_name: "node-1".into(),
            pod_static: false,
            vif_type: None,
            project_id: None,
            subnet_ids: None,
            security_group_ids: None,
            additional_networks: Vec::new(),
        },
    );
    p.metadata.namespace = Some(ns.into());
    p.status = Some(KuryrPortStatus {
        vifs: vifs
            .into_iter()
            .enumerate()
            .map(|(i, (n, vif))| (n.to_string(), Box::new(PodVif { default: i == 0, vif })))
            .collect::<BTreeMap<_, _>>(),
        conditions: vec![],
        observed_generation: None,
    });
    p
}

/// The `IFLA_LINKINFO` entries of a link request (kind and kind data), empty when it has none.
pub fn link_info(
    m: &rtnetlink::packet_route::link::LinkMessage,
) -> &[rtnetlink::packet_route::link::LinkInfo] {
    m.attributes
        .iter()
        .find_map(|x| match x {
            rtnetlink::packet_route::link::LinkAttribute::LinkInfo(i) => Some(i.as_slice()),
            _ => None,
        })
        .unwrap_or(&[])
}

/// The request makes a bridge-mode macvlan (nested-macvlan pods and the node's host link alike).
pub fn is_bridge_macvlan(m: &rtnetlink::packet_route::link::LinkMessage) -> bool {
    use rtnetlink::packet_route::link::{InfoData, InfoKind, InfoMacVlan, LinkInfo, MacVlanMode};
    let info = link_info(m);
    info.contains(&LinkInfo::Kind(InfoKind::MacVlan))
        && info.contains(&LinkInfo::Data(InfoData::MacVlan(vec![InfoMacVlan::Mode(
            MacVlanMode::Bridge,
        )])))
}
