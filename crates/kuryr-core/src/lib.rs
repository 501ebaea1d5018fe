//! Kuryr's pure domain core. Everything here is decided from plain values the controller passes in (observed
//! Neutron and Kubernetes state); nothing here talks to a server, so all of it is tested without one.
//!
//! Pod networking: [`vlan`] (per-trunk VLAN ids), [`pool`] / [`pool_sizing`] (warm port pools),
//! [`vif`] / [`drivers`] (port requests and the KuryrPort status entry), [`pod`] (which pods we handle),
//! on the cloud values of [`neutron`]. NetworkPolicy compilation lives in `policy`.

#![forbid(unsafe_code)]

pub mod policy;

pub mod error;
pub mod neutron;
pub mod pool;
pub mod pool_sizing;
pub mod vlan;

pub use error::CoreError;
