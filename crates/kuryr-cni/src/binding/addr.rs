//! The VIF's fixed IPs on the pod interface.

use std::net::IpAddr;

use futures::TryStreamExt;
use kuryr_api::Vif;
use rtnetlink::packet_route::address::{AddressAttribute, AddressFlags};
use rtnetlink::Handle;

use super::BindError;

/// `(address, prefix length of its subnet)` for every IP of the VIF.
pub fn vif_addresses(vif: &Vif) -> Result<Vec<(IpAddr, u8)>, BindError> {
    vif.ips
        .iter()
        .map(|ip| {
            let addr: IpAddr = ip
                .address
                .parse()
                .map_err(|_| BindError::InvalidVif(format!("bad IP address {:?}", ip.address)))?;
            let prefix = ip
                .cidr
                .split_once('/')
                .and_then(|(_, p)| p.parse::<u8>().ok())
                .filter(|p| *p <= if addr.is_ipv4() { 32 } else { 128 })
                .ok_or_else(|| BindError::InvalidVif(format!("bad subnet CIDR {:?}", ip.cidr)))?;
            Ok((addr, prefix))
        })
        .collect()
}

/// Adds every address. IPv6 ones skip duplicate address detection (Neutron's IPAM already made the address
/// unique): a tentative address could not be used for a second or more after the pod starts.
pub async fn add_all(h: &Handle, index: u32, addrs: &[(IpAddr, u8)]) -> Result<(), BindError> {
    for (addr, prefix) in addrs {
        let mut req = h.address().add(index, *addr, *prefix).replace();
        if addr.is_ipv6() {
            req.message_mut()
                .attributes
                .push(AddressAttribute::Flags(AddressFlags::Nodad));
        }
        req.execute()
            .await
            .map_err(BindError::netlink(format!("add address {addr}/{prefix}")))?;
    }
    Ok(())
}

pub async fn list(h: &Handle, index: u32) -> Result<Vec<IpAddr>, BindError> {
    let msgs: Vec<_> = h
        .address()
        .get()
        .set_link_index_filter(index)
        .execute()
        .try_collect()
        .await
        .map_err(BindError::netlink("list addresses"))?;
    Ok(msgs
        .iter()
        .flat_map(|m| m.attributes.iter())
        .filter_map(|a| match a {
            AddressAttribute::Address(ip) => Some(*ip),
            _ => None,
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::mk_vif;

    #[test]
    fn prefix_comes_from_the_subnet_cidr() {
        let mut vif = mk_vif(true);
        assert_eq!(
            vif_addresses(&vif).unwrap(),
            vec![("198.18.200.10".parse().unwrap(), 24)]
        );
        vif.ips[0].cidr = "198.18.200.0".into();
        assert!(vif_addresses(&vif).is_err());
        vif.ips[0].cidr = "198.18.200.0/33".into();
        assert!(vif_addresses(&vif).is_err());
        vif.ips[0].address = "nope".into();
        assert!(vif_addresses(&vif).is_err());
    }
}
