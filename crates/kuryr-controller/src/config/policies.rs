//! Settings of NetworkPolicy enforcement ([`crate::policies`] carries them out).

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
