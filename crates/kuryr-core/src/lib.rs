//! Kuryr's pure domain core. Everything here is decided from plain values the controller passes in (observed
//! Neutron and Kubernetes state); nothing here talks to a server, so all of it is tested without one.
//!
//! Pod networking: [`vlan`] (per-trunk VLAN ids), [`pool`] / [`pool_sizing`] (warm port pools),
//! [`vif`] / [`drivers`] (port requests and the KuryrPort status entry), [`pod`] (which pods we handle), [`node_vif`] (which driver a node's pods get), [`kuryrport`] (status and release),
//! on the cloud values of [`neutron`]. NetworkPolicy compilation lives in `policy`; Services → Octavia in
//! [`lb`].

#![forbid(unsafe_code)]

pub mod policy;

pub mod annotations;
pub mod attachments;
pub mod backoff;
pub mod drivers;
pub mod error;
pub mod gc;
pub mod kuryrport;
pub mod lb;
pub mod neutron;
pub mod node_vif;
pub mod owner;
pub mod parent;
pub mod pod;
pub mod pool;
pub mod pool_sizing;
pub mod projects;
pub mod subnet;
pub mod vif;
pub mod vlan;
pub mod vrrp;

pub use drivers::{driver_for, DriverConfig, NestedMacvlan, NestedVlan, NeutronVif, VifDriver};
pub use error::CoreError;
pub use owner::OwnerKind;
pub use pool::{Pool, PoolKey, PoolParent, Pools};
pub use pool_sizing::{PoolLimits, PoolLoad, PoolPlan};
pub use subnet::{DefaultSubnet, NamespaceSubnets, SubnetSelector};
pub use vif::{Attachment, PodFacts, PortOwner, PortParams, PortRequest};
pub use vlan::{VlanAllocator, VlanBook, VlanRange};
pub use vrrp::VrrpMacs;
