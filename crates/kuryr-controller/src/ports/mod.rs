//! The KuryrPort side: making a pod's ports ([`allocate`]) and giving them back ([`release`]), the node
//! trunks and their VLANs ([`trunk`]), ports of one pod ([`podport`]), warm pools ([`pool`]), nested-macvlan
//! ([`macvlan`]), what is kept per KuryrPort ([`book`]), the status ([`status`]) and the controller itself
//! ([`reconcile`]).

pub mod active;
pub mod allocate;
pub mod attach_queue;
pub mod book;
pub mod cached;
pub mod macvlan;
pub mod macvlan_state;
pub mod nested_vlan;
pub mod node_vif;
pub mod podport;
pub mod pool;
pub mod pool_state;
pub mod reconcile;
pub mod release;
pub mod status;
pub mod trunk;
