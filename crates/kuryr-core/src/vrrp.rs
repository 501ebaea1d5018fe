//! VRRP MACs for nested-macvlan.
//!
//! ML2/OVN refuses an allowed address pair whose MAC is another port's, so a macvlan pod cannot use its own
//! port's MAC on the VM's port. What it accepts is a VRRP MAC, `00:00:5e:00:01:XX` (XX = 01..ff): the VM
//! port gets the pair {pod IP, VRRP MAC} and the pod's macvlan device uses that MAC. A MAC may be used once
//! per network, so a network holds at most 255 such pods. The pairs on the network's ports are the truth;
//! the book is rebuilt from them, and updates carry the port's `revision_number` for `If-Match`, so two
//! writers cannot overwrite each other's pairs (upstream's race, 3208b192): on 412 re-read and plan again.

use std::collections::{BTreeMap, BTreeSet};

use crate::error::CoreError;
use crate::neutron::{AddressPair, NeutronPort};

/// The VRRP (IPv4) virtual router MAC prefix; the last octet is the router id.
pub const VRRP_MAC_PREFIX: &str = "00:00:5e:00:01:";

/// The VRRP MAC of router id `n` (1..=255).
pub fn vrrp_mac(n: u8) -> String {
    format!("{VRRP_MAC_PREFIX}{n:02x}")
}

/// The router id of a VRRP MAC, any case; `None` for other MACs and for id 0 (not a valid VRID).
pub fn parse_vrrp_mac(mac: &str) -> Option<u8> {
    let mac = mac.to_ascii_lowercase();
    let last = mac.strip_prefix(VRRP_MAC_PREFIX)?;
    if last.len() != 2 {
        return None;
    }
    u8::from_str_radix(last, 16).ok().filter(|n| *n != 0)
}

/// The VRRP MACs in use on one network, by pod IP.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VrrpMacs {
    network_id: String,
    /// router id → pod IP.
    used: BTreeMap<u8, String>,
}

impl VrrpMacs {
    /// Rebuilt from the address pairs of the network's ports (the VM ports; others are skipped).
    pub fn from_ports(network_id: &str, ports: &[NeutronPort]) -> Self {
        let used = ports
            .iter()
            .filter(|p| p.network_id == network_id)
            .flat_map(|p| p.allowed_address_pairs.iter())
            .filter_map(|pair| {
                let n = parse_vrrp_mac(pair.mac_address.as_deref()?)?;
                Some((n, pair.ip_address.clone()))
            })
            .collect();
        Self {
            network_id: network_id.to_owned(),
            used,
        }
    }

    pub fn network_id(&self) -> &str {
        &self.network_id
    }

    /// The MAC for pod IP `ip`: the one it has, else the lowest free.
    pub fn allocate(&mut self, ip: &str) -> Result<String, CoreError> {
        if let Some(mac) = self.mac_of(ip) {
            return Ok(mac);
        }
        let n = (1..=u8::MAX)
            .find(|n| !self.used.contains_key(n))
            .ok_or_else(|| CoreError::VrrpMacsExhausted {
                network_id: self.network_id.clone(),
            })?;
        self.used.insert(n, ip.to_owned());
        Ok(vrrp_mac(n))
    }

    /// Frees the MAC of pod IP `ip` (its pair was removed, or adding it failed).
    pub fn release(&mut self, ip: &str) -> Option<String> {
        let n = self.id_of(ip)?;
        self.used.remove(&n);
        Some(vrrp_mac(n))
    }

    pub fn mac_of(&self, ip: &str) -> Option<String> {
        self.id_of(ip).map(vrrp_mac)
    }

    pub fn in_use(&self) -> usize {
        self.used.len()
    }

    fn id_of(&self, ip: &str) -> Option<u8> {
        self.used.iter().find(|(_, i)| i.as_str() == ip).map(|(n, _)| *n)
    }
}

/// A full replacement of a port's `allowed_address_pairs`, valid only at that revision.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AddressPairsUpdate {
    pub port_id: String,
    /// Send as `If-Match: revision_number=N`; a 412 means re-read the port and plan again.
    pub if_match_revision: u64,
    pub pairs: Vec<AddressPair>,
}

/// The update pairing `ip` with `mac` on the VM's port; `None` when the port has exactly that pair already.
/// A pair for `ip` with another MAC is replaced.
pub fn add_pair(vm_port: &NeutronPort, ip: &str, mac: &str) -> Option<AddressPairsUpdate> {
    let wanted = AddressPair {
        ip_address: ip.to_owned(),
        mac_address: Some(mac.to_owned()),
    };
    if vm_port.allowed_address_pairs.contains(&wanted) {
        return None;
    }
    let mut pairs: Vec<AddressPair> = vm_port
        .allowed_address_pairs
        .iter()
        .filter(|p| p.ip_address != ip)
        .cloned()
        .collect();
    pairs.push(wanted);
    Some(update(vm_port, pairs))
}

/// The update removing every pair of `ip` from the VM's port; `None` when it has none.
pub fn remove_pair(vm_port: &NeutronPort, ip: &str) -> Option<AddressPairsUpdate> {
    if !vm_port.allowed_address_pairs.iter().any(|p| p.ip_address == ip) {
        return None;
    }
    let pairs = vm_port
        .allowed_address_pairs
        .iter()
        .filter(|p| p.ip_address != ip)
        .cloned()
        .collect();
    Some(update(vm_port, pairs))
}

/// IPs of the VM port's pairs that carry a VRRP MAC: the pairs nested-macvlan writes.
pub fn vrrp_paired_ips(vm_port: &NeutronPort) -> BTreeSet<String> {
    vm_port
        .allowed_address_pairs
        .iter()
        .filter(|p| p.mac_address.as_deref().and_then(parse_vrrp_mac).is_some())
        .map(|p| p.ip_address.clone())
        .collect()
}

/// The update dropping the VRRP-MAC pairs whose IP no port holds any more (`held`: the IPs of
/// [`vrrp_paired_ips`] that Neutron still has a port for), with the IPs dropped; `None` when there is none.
/// A pod's IP is paired only once its port exists, and its pair is removed before the port is deleted, so
/// a pair without a port is a leftover (a lost update, a writer that died) whose VRRP MAC would otherwise
/// be handed out again on another VM port of the network, where OVN could not tell the two apart.
pub fn drop_stale_pairs(
    vm_port: &NeutronPort,
    held: &BTreeSet<String>,
) -> Option<(AddressPairsUpdate, Vec<String>)> {
    let stale: Vec<String> = vrrp_paired_ips(vm_port)
        .into_iter()
        .filter(|ip| !held.contains(ip))
        .collect();
    if stale.is_empty() {
        return None;
    }
    let pairs = vm_port
        .allowed_address_pairs
        .iter()
        .filter(|p| {
            !stale.contains(&p.ip_address) || p.mac_address.as_deref().and_then(parse_vrrp_mac).is_none()
        })
        .cloned()
        .collect();
    Some((update(vm_port, pairs), stale))
}

fn update(vm_port: &NeutronPort, pairs: Vec<AddressPair>) -> AddressPairsUpdate {
    AddressPairsUpdate {
        port_id: vm_port.id.clone(),
        if_match_revision: vm_port.revision_number,
        pairs,
    }
}

#[cfg(test)]
mod tests;
