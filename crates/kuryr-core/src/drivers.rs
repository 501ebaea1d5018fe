//! VIF drivers, planning side: what port to ask Neutron for, and the KuryrPort status entry once it exists.
//! The controller does the calls in between (create, add_subports, address pairs) and passes the outcome
//! in as an [`Attachment`].
//!
//! - [`NeutronVif`]: nodes that are hypervisors themselves (or bare metal on the Neutron network); the port is
//!   bound to the node (`binding:host_id`) and plugged into its integration bridge.
//! - [`NestedVlan`]: nodes that are VMs whose port is a trunk parent; the pod port becomes a VLAN subport.
//!   Per-pod SGs, no per-VM port limit but the 4094 VLAN ids. The default for VM nodes.
//! - [`NestedMacvlan`]: VMs without trunks; the pod IP rides on the VM's port as an allowed address pair with
//!   a VRRP MAC (ML2/OVN refuses other foreign MACs), at most 255 pods per network, SGs of the VM port apply.

use kuryr_api::vif::{Vif, VifType};

use crate::error::CoreError;
use crate::neutron::{NeutronPort, Subnet, DEVICE_OWNER};
use crate::vif::{base_vif, port_name, Attachment, PortOwner, PortParams, PortRequest};

/// Integration bridge neutron-vif plugs into unless configured otherwise.
pub const DEFAULT_BRIDGE: &str = "br-int";

/// One way of wiring pods.
pub trait VifDriver {
    fn vif_type(&self) -> VifType;

    /// The port to create for a pod or a pool.
    fn port_request(&self, params: PortParams<'_>) -> PortRequest;

    /// The status entry for `port`, attached as `attachment`. `subnets` must hold the port's subnets.
    fn vif(&self, port: &NeutronPort, subnets: &[Subnet], attachment: &Attachment) -> Result<Vif, CoreError>;

    /// Whether ports of this driver can be pooled (macvlan ports cannot: their address pair names the pod IP
    /// on the VM's port, which is per pod anyway).
    fn pools_ports(&self) -> bool {
        true
    }
}

/// The request every driver starts from.
fn common_request(params: PortParams<'_>) -> PortRequest {
    PortRequest {
        name: port_name(params.owner),
        network_id: params
            .subnets
            .first()
            .map(|s| s.network_id.clone())
            .unwrap_or_default(),
        project_id: params.project_id.to_owned(),
        subnet_ids: params.subnets.iter().map(|s| s.id.clone()).collect(),
        security_groups: params.security_groups.clone(),
        device_owner: DEVICE_OWNER.to_owned(),
        device_id: match params.owner {
            PortOwner::Pod(pod) => pod.uid.clone(),
            PortOwner::Pool { .. } => String::new(),
        },
        binding_host_id: None,
        tags: params.tags.clone(),
        admin_state_up: true,
    }
}

/// An empty MAC (a port read without one) is recorded as unknown rather than as a MAC no link can have.
fn known_mac(mac: &str) -> Option<String> {
    (!mac.is_empty()).then(|| mac.to_owned())
}

fn mismatch(driver: VifType, attachment: &Attachment) -> CoreError {
    CoreError::AttachmentMismatch {
        driver: driver.as_str(),
        attachment: attachment.kind(),
    }
}

// === impl NeutronVif ===

/// Plain port bound to the node (non-nested nodes).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NeutronVif {
    pub bridge: String,
}

impl Default for NeutronVif {
    fn default() -> Self {
        Self {
            bridge: DEFAULT_BRIDGE.to_owned(),
        }
    }
}

impl VifDriver for NeutronVif {
    fn vif_type(&self) -> VifType {
        VifType::NeutronVif
    }

    fn port_request(&self, params: PortParams<'_>) -> PortRequest {
        // Neutron's host id is the hypervisor's hostname: the node's name unless its label says otherwise.
        let host = params.neutron_host.unwrap_or(params.owner.node_name()).to_owned();
        PortRequest {
            binding_host_id: Some(host),
            ..common_request(params)
        }
    }

    fn vif(&self, port: &NeutronPort, subnets: &[Subnet], attachment: &Attachment) -> Result<Vif, CoreError> {
        let Attachment::Bridge = attachment else {
            return Err(mismatch(self.vif_type(), attachment));
        };
        Ok(Vif {
            bridge_name: Some(self.bridge.clone()),
            ..base_vif(self.vif_type(), port, subnets)?
        })
    }
}

// === impl NestedVlan ===

/// Trunk subport of the node VM's port.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NestedVlan {
    /// The VM NIC an operator pinned for every node (`parentIfname`); `None`: each node's CNI daemon finds
    /// its NIC by the VM port's MAC.
    pub link_iface: Option<String>,
}

impl VifDriver for NestedVlan {
    fn vif_type(&self) -> VifType {
        VifType::NestedVlan
    }

    /// No `device_id`: Neutron refuses to make a port with an attached device a trunk subport (409
    /// `PortInUse`), and sets `device_id` to the trunk itself once it is one. The pod is in the name and tags.
    fn port_request(&self, params: PortParams<'_>) -> PortRequest {
        PortRequest {
            device_id: String::new(),
            ..common_request(params)
        }
    }

    fn vif(&self, port: &NeutronPort, subnets: &[Subnet], attachment: &Attachment) -> Result<Vif, CoreError> {
        let Attachment::Vlan {
            trunk_id,
            parent_port_id,
            parent_mac,
            vlan_id,
        } = attachment
        else {
            return Err(mismatch(self.vif_type(), attachment));
        };
        Ok(Vif {
            vlan_id: Some(*vlan_id),
            trunk_id: Some(trunk_id.clone()),
            parent_port_id: Some(parent_port_id.clone()),
            parent_ifname: self.link_iface.clone(),
            parent_mac: known_mac(parent_mac),
            ..base_vif(self.vif_type(), port, subnets)?
        })
    }
}

// === impl NestedMacvlan ===

/// Pod IP as an allowed address pair (with a VRRP MAC) on the node VM's port.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NestedMacvlan {
    /// As [`NestedVlan::link_iface`].
    pub link_iface: Option<String>,
}

impl VifDriver for NestedMacvlan {
    fn vif_type(&self) -> VifType {
        VifType::NestedMacvlan
    }

    /// The pod keeps a normal, unbound port: it holds the IP (IPAM) and the pod's SGs for the record.
    fn port_request(&self, params: PortParams<'_>) -> PortRequest {
        common_request(params)
    }

    fn vif(&self, port: &NeutronPort, subnets: &[Subnet], attachment: &Attachment) -> Result<Vif, CoreError> {
        let Attachment::Macvlan {
            parent_port_id,
            parent_mac,
            vrrp_mac,
        } = attachment
        else {
            return Err(mismatch(self.vif_type(), attachment));
        };
        Ok(Vif {
            vrrp_mac: Some(vrrp_mac.clone()),
            parent_port_id: Some(parent_port_id.clone()),
            parent_ifname: self.link_iface.clone(),
            parent_mac: known_mac(parent_mac),
            ..base_vif(self.vif_type(), port, subnets)?
        })
    }

    fn pools_ports(&self) -> bool {
        false
    }
}

/// Node-side settings of the drivers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DriverConfig {
    pub bridge: String,
    /// A VM NIC name pinned for every node; `None` (the default) lets each node find its own by MAC.
    pub link_iface: Option<String>,
}

impl Default for DriverConfig {
    fn default() -> Self {
        Self {
            bridge: DEFAULT_BRIDGE.to_owned(),
            link_iface: None,
        }
    }
}

/// The driver for a VIF type; `None` for nested-dpdk, which is only ever read, never created.
pub fn driver_for(vif_type: VifType, config: &DriverConfig) -> Option<Box<dyn VifDriver + Send + Sync>> {
    match vif_type {
        VifType::NeutronVif => Some(Box::new(NeutronVif {
            bridge: config.bridge.clone(),
        })),
        VifType::NestedVlan => Some(Box::new(NestedVlan {
            link_iface: config.link_iface.clone(),
        })),
        VifType::NestedMacvlan => Some(Box::new(NestedMacvlan {
            link_iface: config.link_iface.clone(),
        })),
        VifType::NestedDpdk => None,
    }
}

#[cfg(test)]
mod tests;
