//! nested-macvlan: a bridge-mode macvlan child of the VM's NIC, created directly in the pod namespace under
//! its final name, with the VRRP MAC paired with the pod IP on the VM's port (falls back to the port MAC).

use std::os::fd::RawFd;

use kuryr_api::Vif;
use rtnetlink::packet_route::link::{LinkMessage, MacVlanMode};
use rtnetlink::LinkMacVlan;

use super::{link, BindError};

/// The MAC the macvlan device gets.
pub fn device_mac(vif: &Vif) -> &str {
    vif.vrrp_mac.as_deref().unwrap_or(&vif.mac)
}

pub fn message(ifname: &str, parent: u32, vif: &Vif, netns_fd: RawFd) -> Result<LinkMessage, BindError> {
    let mut b = LinkMacVlan::new(ifname, parent, MacVlanMode::Bridge)
        .address(link::parse_mac(device_mac(vif))?)
        .setns_by_fd(netns_fd);
    if let Some(mtu) = vif.mtu {
        b = b.mtu(mtu);
    }
    Ok(b.build())
}

#[cfg(test)]
mod tests {
    use rtnetlink::packet_route::link::LinkAttribute;

    use super::*;
    use crate::testing::mk_vif;

    #[test]
    fn macvlan_request_uses_vrrp_mac_bridge_mode_mtu_and_target_netns() {
        let m = message("eth0", 7, &mk_vif(true), 42).unwrap();
        let a = &m.attributes;
        assert!(a.contains(&LinkAttribute::IfName("eth0".into())));
        assert!(a.contains(&LinkAttribute::Link(7)));
        assert!(a.contains(&LinkAttribute::Address(vec![0, 0, 0x5e, 0, 1, 0x0a])));
        assert!(a.contains(&LinkAttribute::Mtu(1400)));
        assert!(a.contains(&LinkAttribute::NetNsFd(42)));
        assert!(crate::testing::is_bridge_macvlan(&m));
    }

    #[test]
    fn without_vrrp_mac_the_port_mac_is_used() {
        let mut v = mk_vif(true);
        v.vrrp_mac = None;
        assert_eq!(device_mac(&v), "fa:16:3e:00:00:01");
    }
}
