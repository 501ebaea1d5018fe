//! neutron-vif: a veth pair whose host end joins the node's bridge and whose peer is created directly in
//! the pod namespace under its final name, with the port's MAC.

use std::os::fd::RawFd;

use kuryr_api::Vif;
use rtnetlink::packet_route::link::{InfoData, InfoVeth, LinkMessage};
use rtnetlink::{LinkUnspec, LinkVeth};

use super::{link, BindError};

/// Host end name: the VIF's `vifName`, else `tap` + the first 11 characters of the port ID (15 max,
/// os-vif's convention, so it can be found from the port alone).
pub fn host_ifname(vif: &Vif) -> String {
    match &vif.vif_name {
        Some(n) if !n.is_empty() => n.clone(),
        _ => format!("tap{}", vif.port_id.chars().take(11).collect::<String>()),
    }
}

pub fn message(host: &str, ifname: &str, vif: &Vif, netns_fd: RawFd) -> Result<LinkMessage, BindError> {
    let mut peer = LinkUnspec::new_with_name(ifname)
        .address(link::parse_mac(&vif.mac)?)
        .setns_by_fd(netns_fd);
    let mut b = LinkVeth::new(host, ifname);
    if let Some(mtu) = vif.mtu {
        peer = peer.mtu(mtu);
        b = b.mtu(mtu);
    }
    Ok(b.set_info_data(InfoData::Veth(InfoVeth::Peer(peer.build())))
        .build())
}

#[cfg(test)]
mod tests {
    use rtnetlink::packet_route::link::{LinkAttribute, LinkInfo};

    use super::*;
    use crate::testing::mk_vif;

    #[test]
    fn host_name_defaults_to_tap_and_port_prefix() {
        let mut v = mk_vif(true);
        assert_eq!(host_ifname(&v), "tap11111111-22");
        assert!(host_ifname(&v).len() <= 15);
        v.vif_name = Some("tapcustom".into());
        assert_eq!(host_ifname(&v), "tapcustom");
    }

    #[test]
    fn peer_goes_to_the_pod_with_mac_and_mtu() {
        let m = message("tapx", "eth0", &mk_vif(true), 5).unwrap();
        assert!(m.attributes.contains(&LinkAttribute::IfName("tapx".into())));
        assert!(m.attributes.contains(&LinkAttribute::Mtu(1400)));
        let peer = m
            .attributes
            .iter()
            .find_map(|a| match a {
                LinkAttribute::LinkInfo(i) => i.iter().find_map(|x| match x {
                    LinkInfo::Data(InfoData::Veth(InfoVeth::Peer(p))) => Some(p.clone()),
                    _ => None,
                }),
                _ => None,
            })
            .unwrap();
        assert!(peer.attributes.contains(&LinkAttribute::IfName("eth0".into())));
        assert!(peer.attributes.contains(&LinkAttribute::NetNsFd(5)));
        assert!(peer
            .attributes
            .contains(&LinkAttribute::Address(vec![0xfa, 0x16, 0x3e, 0, 0, 1])));
    }
}
