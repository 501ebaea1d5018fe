//! kuryr-cni: the node side of kuryr-rs.
//!
//! - [`cni`]: CNI spec types (request parsing with the spec's error codes, result rendering per version).
//! - [`protocol`]: plugin ↔ daemon messages over a root-only unix socket.
//! - [`daemon`]: node caches, the ADD wait, request handling, socket server, health and metrics.
//! - [`binding`]: rtnetlink drivers (nested-macvlan, nested-vlan, veth).

#![forbid(unsafe_code)]

pub mod binding;
pub mod cni;
pub mod daemon;
pub mod protocol;
pub mod testing;
