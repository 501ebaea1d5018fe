//! What a VIF driver plans with: the pod's facts, the port it asks Neutron for, how the port is attached
//! to the node, and the helpers that turn a created port into the KuryrPort status entry.

use std::collections::BTreeSet;

use kuryr_api::vif::{Vif, VifIp, VifRoute, VifType};

use crate::error::CoreError;
use crate::neutron::{NeutronPort, Subnet};

/// The pod as the drivers need it (the controller reads it off the Pod and its KuryrPort).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PodFacts {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub node_name: String,
    pub project_id: String,
    pub security_groups: BTreeSet<String>,
}

/// Who a port is created for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PortOwner<'a> {
    /// Directly for one pod (no pool, or the pool was empty).
    Pod(&'a PodFacts),
    /// Ahead of pods, for the pool of a node.
    Pool { node_name: &'a str },
}

impl PortOwner<'_> {
    pub fn node_name(&self) -> &str {
        match self {
            Self::Pod(pod) => &pod.node_name,
            Self::Pool { node_name } => node_name,
        }
    }
}

/// Everything a port request is made of besides the driver's own choices.
#[derive(Clone, Copy, Debug)]
pub struct PortParams<'a> {
    pub owner: PortOwner<'a>,
    /// The pod's subnets, all on one network: one (single-stack) or one of each IP family (dual-stack).
    pub subnets: &'a [Subnet],
    pub project_id: &'a str,
    pub security_groups: &'a BTreeSet<String>,
    /// Ownership tags (cluster, controller) the caller puts on everything Kuryr creates.
    pub tags: &'a BTreeSet<String>,
    /// Neutron's name of the node's host when it is not the node's ([`crate::node_vif::neutron_host`]).
    pub neutron_host: Option<&'a str>,
}

/// The port to ask Neutron for (one element of a bulk create).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PortRequest {
    pub name: String,
    pub network_id: String,
    pub project_id: String,
    /// One fixed IP from each of these subnets (two for a dual-stack pod).
    pub subnet_ids: Vec<String>,
    pub security_groups: BTreeSet<String>,
    pub device_owner: String,
    /// The pod's UID for pod ports, empty for pool ports.
    pub device_id: String,
    /// `binding:host_id`: neutron-vif only; nested ports stay unbound (the trunk / the VM binds them).
    pub binding_host_id: Option<String>,
    pub tags: BTreeSet<String>,
    pub admin_state_up: bool,
}

/// Name of a pool port until a pod takes it (upstream's, so its leftovers are recognised).
pub const POOL_PORT_NAME: &str = "available-port";

/// Port name: `namespace/name` of the pod, or [`POOL_PORT_NAME`].
pub fn port_name(owner: PortOwner<'_>) -> String {
    match owner {
        PortOwner::Pod(pod) => format!("{}/{}", pod.namespace, pod.name),
        PortOwner::Pool { .. } => POOL_PORT_NAME.to_owned(),
    }
}

/// How a port reaches the node, as decided after it was created.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Attachment {
    /// neutron-vif: a veth plugged into the node's integration bridge.
    Bridge,
    /// nested-vlan: a subport of the VM's trunk on this VLAN. `parent_mac` is the VM port's MAC, by which
    /// the node's CNI daemon finds the NIC the trunk is on.
    Vlan {
        trunk_id: String,
        parent_port_id: String,
        parent_mac: String,
        vlan_id: u16,
    },
    /// nested-macvlan: the pod IP paired with a VRRP MAC on the VM's port (MAC `parent_mac`).
    Macvlan {
        parent_port_id: String,
        parent_mac: String,
        vrrp_mac: String,
    },
}

impl Attachment {
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Bridge => "bridge",
            Self::Vlan { .. } => "vlan",
            Self::Macvlan { .. } => "macvlan",
        }
    }
}

/// Host-side device name: `tap` plus the port id's first 11 characters (14 < IFNAMSIZ, upstream's scheme).
pub fn vif_name(port_id: &str) -> String {
    let head: String = port_id.chars().take(11).collect();
    format!("tap{head}")
}

/// The port's IPs with their subnets' CIDR, gateway and routes. Every fixed IP's subnet must be known.
pub fn vif_ips(port: &NeutronPort, subnets: &[Subnet]) -> Result<Vec<VifIp>, CoreError> {
    if port.fixed_ips.is_empty() {
        return Err(CoreError::PortWithoutIp {
            port_id: port.id.clone(),
        });
    }
    port.fixed_ips
        .iter()
        .map(|ip| {
            let subnet =
                subnets
                    .iter()
                    .find(|s| s.id == ip.subnet_id)
                    .ok_or_else(|| CoreError::UnknownSubnet {
                        port_id: port.id.clone(),
                        subnet_id: ip.subnet_id.clone(),
                    })?;
            Ok(VifIp {
                address: ip.ip_address.clone(),
                cidr: subnet.cidr.clone(),
                gateway: subnet.gateway_ip.clone(),
                subnet_id: Some(subnet.id.clone()),
                routes: subnet
                    .host_routes
                    .iter()
                    .map(|r| VifRoute {
                        cidr: r.destination.clone(),
                        gateway: r.nexthop.clone(),
                    })
                    .collect(),
            })
        })
        .collect()
}

/// The MTU of the port's network, from the subnet of its first IP.
fn mtu(port: &NeutronPort, subnets: &[Subnet]) -> Option<u32> {
    let first = port.fixed_ips.first()?;
    subnets.iter().find(|s| s.id == first.subnet_id)?.mtu
}

/// The fields every VIF type shares; drivers fill in their attachment-specific ones.
pub fn base_vif(vif_type: VifType, port: &NeutronPort, subnets: &[Subnet]) -> Result<Vif, CoreError> {
    Ok(Vif {
        vif_type,
        port_id: port.id.clone(),
        network_id: port.network_id.clone(),
        mac: port.mac_address.clone(),
        ips: vif_ips(port, subnets)?,
        mtu: mtu(port, subnets),
        vlan_id: None,
        vrrp_mac: None,
        trunk_id: None,
        parent_port_id: None,
        parent_ifname: None,
        parent_mac: None,
        vif_name: Some(vif_name(&port.id)),
        bridge_name: None,
        security_group_ids: port.security_groups.iter().cloned().collect(),
        active: port.status.is_active(),
    })
}

#[cfg(test)]
mod tests;
