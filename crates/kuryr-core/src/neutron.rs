//! The cloud side as the core sees it: plain Neutron values the controller converts the OpenStack client's
//! types into. Only the fields the core decides on are here.

use std::collections::BTreeSet;
use std::fmt;

/// `device_owner` of every port Kuryr creates for pods (upstream's value, so its ports are recognised).
pub const DEVICE_OWNER: &str = "compute:kuryr";
/// `device_owner` Neutron gives a port once it is a trunk subport (it replaces ours).
pub const SUBPORT_DEVICE_OWNER: &str = "trunk:subport";
/// `device_owner` of a router's interface port on a subnet.
pub const ROUTER_INTERFACE_DEVICE_OWNER: &str = "network:router_interface";

/// Neutron's port status. Anything Neutron may add later reads as `Other`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub enum PortStatus {
    Active,
    #[default]
    Down,
    Build,
    Error,
    Other(String),
}

impl PortStatus {
    pub fn parse(status: &str) -> Self {
        match status {
            "ACTIVE" => Self::Active,
            "DOWN" => Self::Down,
            "BUILD" => Self::Build,
            "ERROR" => Self::Error,
            other => Self::Other(other.to_owned()),
        }
    }

    pub fn is_active(&self) -> bool {
        matches!(self, Self::Active)
    }
}

impl fmt::Display for PortStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Active => "ACTIVE",
            Self::Down => "DOWN",
            Self::Build => "BUILD",
            Self::Error => "ERROR",
            Self::Other(s) => s,
        })
    }
}

/// One fixed IP of a port.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct FixedIp {
    pub subnet_id: String,
    pub ip_address: String,
}

/// One `allowed_address_pairs` entry of a port.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AddressPair {
    pub ip_address: String,
    /// Absent means the port's own MAC.
    pub mac_address: Option<String>,
}

/// A Neutron port.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NeutronPort {
    pub id: String,
    pub name: String,
    pub network_id: String,
    pub project_id: String,
    pub mac_address: String,
    pub fixed_ips: Vec<FixedIp>,
    pub security_groups: BTreeSet<String>,
    pub tags: BTreeSet<String>,
    pub device_owner: String,
    pub device_id: String,
    /// `binding:host_id`; empty when unbound.
    pub binding_host_id: String,
    pub status: PortStatus,
    pub allowed_address_pairs: Vec<AddressPair>,
    /// `trunk_details.trunk_id`: set when this port is a trunk's parent.
    pub trunk_id: Option<String>,
    /// For `If-Match` on updates that must not lose a concurrent writer's change (address pairs).
    pub revision_number: u64,
}

impl NeutronPort {
    pub fn has_ip(&self, ip: &str) -> bool {
        self.fixed_ips.iter().any(|f| f.ip_address == ip)
    }

    pub fn has_tags(&self, tags: &[String]) -> bool {
        tags.iter().all(|t| self.tags.contains(t))
    }
}

/// One subport of a trunk.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Subport {
    pub port_id: String,
    /// VLAN id (segmentation type is always `vlan` for Kuryr).
    pub segmentation_id: u16,
}

/// A Neutron trunk: the node VM's port (`port_id`) plus its VLAN subports.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Trunk {
    pub id: String,
    pub port_id: String,
    pub subports: Vec<Subport>,
}

/// A host route of a subnet.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct HostRoute {
    pub destination: String,
    pub nexthop: String,
}

/// A Neutron subnet, with its network's MTU folded in (the VIF needs both).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Subnet {
    pub id: String,
    pub network_id: String,
    pub project_id: String,
    pub cidr: String,
    pub gateway_ip: Option<String>,
    pub host_routes: Vec<HostRoute>,
    /// MTU of the subnet's network.
    pub mtu: Option<u32>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn port_statuses_parse_and_print_as_neutron_spells_them() {
        for s in ["ACTIVE", "DOWN", "BUILD", "ERROR", "BINDING_FAILED"] {
            assert_eq!(PortStatus::parse(s).to_string(), s);
        }
        assert!(PortStatus::parse("ACTIVE").is_active());
        assert!(!PortStatus::parse("DOWN").is_active());
    }
}
