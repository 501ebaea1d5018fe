//! The one error type of the pod-networking core. Variants say what is missing or exhausted and carry the
//! object it concerns, so the controller can put them into conditions and Events as they are.

/// What went wrong while planning pod networking.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CoreError {
    /// The node has no InternalIP address, so its VM port cannot be found.
    #[error("node {node} has no InternalIP address")]
    NoNodeAddress { node: String },
    /// No Neutron port carries the node's InternalIP.
    #[error("no Neutron port has node {node}'s address {ip}")]
    NoParentPort { node: String, ip: String },
    /// The node VM's port is not a trunk parent (nested-vlan needs one).
    #[error("port {port_id} of node {node} is not a trunk parent (no trunk_details)")]
    NoTrunkOnNode { node: String, port_id: String },
    /// The pod is not scheduled yet.
    #[error("pod {namespace}/{name} has no spec.nodeName yet")]
    PodNotScheduled { namespace: String, name: String },
    /// Every VLAN id of the configured range is in use or reserved on the trunk.
    #[error("trunk {trunk_id}: every VLAN id in {first}..={last} is in use")]
    VlanRangeExhausted { trunk_id: String, first: u16, last: u16 },
    /// A VLAN range outside 1..=4094 or with first > last.
    #[error("invalid VLAN range {first}..={last} (must be within 1..=4094)")]
    InvalidVlanRange { first: u16, last: u16 },
    /// All 255 VRRP MACs of the network are paired with pod IPs already.
    #[error("network {network_id}: all 255 VRRP MACs 00:00:5e:00:01:01..ff are in use")]
    VrrpMacsExhausted { network_id: String },
    /// The subnet selector found no subnet for the pod.
    #[error("no pod subnet for {namespace}/{name}: {reason}")]
    NoSubnet {
        namespace: String,
        name: String,
        reason: String,
    },
    /// A port has an IP on a subnet the caller did not pass in.
    #[error("port {port_id} has an IP on subnet {subnet_id}, which is unknown")]
    UnknownSubnet { port_id: String, subnet_id: String },
    /// A port without any fixed IP cannot serve a pod.
    #[error("port {port_id} has no fixed IP")]
    PortWithoutIp { port_id: String },
    /// The attachment given does not fit the driver (e.g. a VLAN id for neutron-vif).
    #[error("{driver} driver cannot use a {attachment} attachment")]
    AttachmentMismatch {
        driver: &'static str,
        attachment: &'static str,
    },
    /// Pool watermarks that contradict each other.
    #[error("invalid port pool limits: {0}")]
    InvalidPoolLimits(String),
}

impl CoreError {
    /// Short CamelCase reason for Events, conditions and metric labels.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::NoNodeAddress { .. } => "NoNodeAddress",
            Self::NoParentPort { .. } => "NoParentPort",
            Self::NoTrunkOnNode { .. } => "NoTrunkOnNode",
            Self::PodNotScheduled { .. } => "PodNotScheduled",
            Self::VlanRangeExhausted { .. } => "VlanRangeExhausted",
            Self::InvalidVlanRange { .. } => "InvalidVlanRange",
            Self::VrrpMacsExhausted { .. } => "VrrpMacsExhausted",
            Self::NoSubnet { .. } => "NoSubnet",
            Self::UnknownSubnet { .. } => "UnknownSubnet",
            Self::PortWithoutIp { .. } => "PortWithoutIp",
            Self::AttachmentMismatch { .. } => "AttachmentMismatch",
            Self::InvalidPoolLimits(_) => "InvalidPoolLimits",
        }
    }
}
