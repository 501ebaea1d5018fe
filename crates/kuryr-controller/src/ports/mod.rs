//! The KuryrPort controller.

pub mod allocate;
pub mod macvlan;
pub mod nested_vlan;
pub mod parent;
pub mod podport;
pub mod pool;
pub mod reconcile;
pub mod status;
