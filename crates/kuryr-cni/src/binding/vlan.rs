//! nested-vlan: an 802.1Q sub-interface of the VM's NIC (the trunk subport's tag), created directly in the pod
//! namespace under its final name with the subport's MAC.

use std::os::fd::RawFd;

use kuryr_api::Vif;
use rtnetlink::packet_route::link::LinkMessage;
use rtnetlink::LinkVlan;

use super::{link, BindError};

pub fn message(ifname: &str, parent: u32, vif: &Vif, netns_fd: RawFd) -> Result<LinkMessage, BindError> {
    let vlan_id = vif.vlan_id.filter(|id| (1..=4094).contains(id)).ok_or_else(|| {
        BindError::InvalidVif(format!("nested-vlan port {} lacks a valid vlanId", vif.port_id))
    })?;
    let mut b = LinkVlan::new(ifname, parent, vlan_id)
        .address(link::parse_mac(&vif.mac)?)
        .setns_by_fd(netns_fd);
    if let Some(mtu) = vif.mtu {
        b = b.mtu(mtu);
    }
    Ok(b.build())
}

#[cfg(test)]
mod tests {
    use kuryr_api::VifType;
    use rtnetlink::packet_route::link::{InfoData, InfoKind, InfoVlan, LinkAttribute, LinkInfo};

    use super::*;
    use crate::testing::mk_vif;

    fn vlan_vif(id: Option<u16>) -> Vif {
        let mut v = mk_vif(true);
        v.vif_type = VifType::NestedVlan;
        v.vrrp_mac = None;
        v.vlan_id = id;
        v
    }

    #[test]
    fn vlan_request_carries_tag_parent_mac_mtu_and_netns() {
        let m = message("eth0", 3, &vlan_vif(Some(3018)), 9).unwrap();
        let a = &m.attributes;
        assert!(a.contains(&LinkAttribute::IfName("eth0".into())));
        assert!(a.contains(&LinkAttribute::Link(3)));
        assert!(a.contains(&LinkAttribute::Address(vec![0xfa, 0x16, 0x3e, 0, 0, 1])));
        assert!(a.contains(&LinkAttribute::Mtu(1400)));
        assert!(a.contains(&LinkAttribute::NetNsFd(9)));
        let info = crate::testing::link_info(&m);
        assert!(info.contains(&LinkInfo::Kind(InfoKind::Vlan)));
        assert!(info.contains(&LinkInfo::Data(InfoData::Vlan(vec![InfoVlan::Id(3018)]))));
    }

    #[test]
    fn missing_or_out_of_range_vlan_is_refused() {
        for id in [None, Some(0), Some(4095)] {
            assert!(
                matches!(
                    message("eth0", 3, &vlan_vif(id), 9),
                    Err(BindError::InvalidVif(_))
                ),
                "{id:?}"
            );
        }
    }
}
