//! NetworkPolicies → Neutron security groups, with `kuryr_core::policy` doing the thinking: one loop
//! rebuilds the cluster model from the watch caches whenever a Namespace, Pod, KuryrPort, Service or
//! NetworkPolicy changes, compiles it, diffs it against the kuryr-tagged SGs and the pod ports' SG lists,
//! runs the plan and records each policy's SG and rules in its KuryrNetworkPolicy.
//!
//! - [`inputs`]: the caches → `Cluster` + `Policy` list (pods known by their KuryrPort's port);
//! - [`neutron`]: observed state from Neutron, and running a `Plan`;
//! - [`status`]: KuryrNetworkPolicy objects, Events and conditions;
//! - [`controller`]: the watch-driven loop.
//!
//! One global reconcile (not one per policy) because selector groups are shared between policies and a
//! pod's SG list depends on every policy at once; compiling is in-memory and the diff makes a no-op sync
//! cost two list calls.

pub mod controller;
pub mod inputs;
pub mod neutron;
pub mod status;

pub use crate::config::policies::PolicyConfig;
