//! The typed VIF: everything the CNI daemon needs to wire one pod interface, as recorded in a KuryrPort's
//! `status.vifs.<ifname>.vif`.

use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// How a pod interface is wired (upstream's `pod_vif_driver` names).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum VifType {
    /// A Neutron port bound on the node itself; the daemon plugs a veth into the node's bridge (br-int).
    NeutronVif,
    /// A trunk subport of the node VM's port; the daemon creates a VLAN device on the VM's NIC.
    NestedVlan,
    /// A port whose IP rides on the node VM's port (allowed address pair); the daemon creates a macvlan.
    NestedMacvlan,
    /// Upstream only (DPDK in a VM). Parsed so such ports can be released; never created.
    NestedDpdk,
}

impl VifType {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::NeutronVif => "neutron-vif",
            Self::NestedVlan => "nested-vlan",
            Self::NestedMacvlan => "nested-macvlan",
            Self::NestedDpdk => "nested-dpdk",
        }
    }

    /// The type of this name among those kuryr-rs creates ports for (not `nested-dpdk`).
    pub fn creatable(name: &str) -> Option<Self> {
        [Self::NeutronVif, Self::NestedVlan, Self::NestedMacvlan]
            .into_iter()
            .find(|t| t.as_str() == name)
    }

    /// Nested types hang off the node VM's own Neutron port.
    pub fn is_nested(self) -> bool {
        !matches!(self, Self::NeutronVif)
    }
}

impl fmt::Display for VifType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One fixed IP of the port with what the daemon needs to configure it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VifIp {
    /// The address, e.g. `10.0.0.23`.
    #[schemars(length(min = 1))]
    pub address: String,
    /// CIDR of the subnet the address is on, e.g. `10.0.0.0/26` (gives the prefix length).
    #[schemars(length(min = 1))]
    pub cidr: String,
    /// Subnet gateway; absent on subnets without one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway: Option<String>,
    /// Neutron subnet ID (absent in objects migrated from upstream, whose os-vif subnets carried none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subnet_id: Option<String>,
    /// Subnet host routes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub routes: Vec<VifRoute>,
}

/// A subnet host route.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct VifRoute {
    /// Destination CIDR.
    pub cidr: String,
    /// Next hop.
    pub gateway: String,
}

/// One wired (or being wired) pod interface.
///
/// `Deserialize` reads only this shape; [`Vif::from_value`] (used for `status.vifs.*.vif`) also accepts
/// upstream's os-vif OVO primitive (`versioned_object.*`), so KuryrPorts written by upstream Kuryr parse. The
/// CRD schema keeps unknown fields here and requires none, so such objects survive pruning and validation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(
    transform = crate::schema::accept_upstream_shape,
    extend("x-kubernetes-preserve-unknown-fields" = true)
)]
pub struct Vif {
    #[serde(rename = "type")]
    pub vif_type: VifType,
    /// Neutron port ID.
    pub port_id: String,
    /// Neutron network ID.
    pub network_id: String,
    /// MAC address of the Neutron port.
    pub mac: String,
    #[serde(default)]
    pub ips: Vec<VifIp>,
    /// MTU of the Neutron network.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    // Kubernetes API conventions: no unsigned integer formats in schemas.
    #[schemars(with = "Option<i32>", range(min = 68, max = 65535))]
    pub mtu: Option<u32>,
    /// nested-vlan: 802.1Q tag of the trunk subport.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<i32>", range(min = 1, max = 4094))]
    pub vlan_id: Option<u16>,
    /// nested-macvlan: the VRRP MAC (`00:00:5e:00:01:XX`) paired with the pod IP on the VM's port; the macvlan
    /// device uses it instead of `mac` (ML2/OVN refuses other foreign MACs in address pairs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vrrp_mac: Option<String>,
    /// nested-vlan: trunk the subport belongs to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trunk_id: Option<String>,
    /// Nested types: the node VM's Neutron port (trunk parent / address-pair owner).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_port_id: Option<String>,
    /// Nested types: the VM's NIC the VLAN/macvlan device is created on, e.g. `ens3`, when an operator pinned
    /// one (`link_iface`); absent, the CNI daemon finds the NIC by `parentMac`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_ifname: Option<String>,
    /// Nested types: MAC of the node VM's Neutron port (`parentPortId`). NIC names differ between images and
    /// nodes, the MAC does not: the CNI daemon finds the VM's NIC by it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_mac: Option<String>,
    /// Host-side device name (veth end, or the VLAN/macvlan device before it moves into the pod).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vif_name: Option<String>,
    /// neutron-vif: bridge the host end is plugged into, e.g. `br-int`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bridge_name: Option<String>,
    /// Security groups applied to the port.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub security_group_ids: Vec<String>,
    /// The Neutron port is ACTIVE (the daemon waits for this before answering CNI ADD).
    #[serde(default)]
    pub active: bool,
}

impl Vif {
    /// First IP, the pod's primary address.
    pub fn primary_ip(&self) -> Option<&VifIp> {
        self.ips.first()
    }
}
