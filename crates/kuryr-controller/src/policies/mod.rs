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

use kuryr_core::policy::{Cidr, CompileOptions, Quota};

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PolicyConfig {
    /// Run the NetworkPolicy controller.
    pub enabled: bool,
    /// Opt-in: pods no ingress policy selects accept only their own namespace (and the outside).
    pub namespace_isolation: bool,
    /// Pod address ranges (needed by namespace isolation).
    pub pod_cidrs: Vec<Cidr>,
    /// Service ClusterIP ranges; Services are only modelled when set.
    pub service_cidrs: Vec<Cidr>,
    /// Worker node addresses (kubelet probes reach ingress-isolated pods).
    pub node_cidrs: Vec<Cidr>,
    /// What is left of the project's quota for kuryr's groups and rules.
    pub quota: Quota,
}

impl PolicyConfig {
    pub fn compile_options(&self) -> CompileOptions {
        CompileOptions {
            namespace_isolation: self.namespace_isolation,
            pod_cidrs: self.pod_cidrs.clone(),
            service_cidrs: self.service_cidrs.clone(),
            node_cidrs: self.node_cidrs.clone(),
            quota: self.quota,
            ..CompileOptions::default()
        }
    }
}
