//! The KuryrPort controller.

pub mod nested_vlan;
pub mod parent;
pub mod reconcile;
pub mod status;
