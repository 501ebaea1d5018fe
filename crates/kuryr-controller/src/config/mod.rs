//! What the controller is told to do, independent of how it was told (flags in [`crate::args`], or a test
//! building it directly): the pod side's settings here, each feature's in a file of its own. Settings only,
//! so every module may read them: nothing here imports the code that carries them out.

pub mod networks;
pub mod policies;
pub mod services;

use kuryr_core::policy::Family;
use std::time::Duration;

use kuryr_api::VifType;
use kuryr_core::{DriverConfig, PoolLimits, VlanRange};

/// Controller settings.
#[derive(Clone, Debug)]
pub struct Config {
    /// Goes into every ownership tag (`kuryr.cluster=<id>`), so two clusters on one project never touch
    /// each other's ports.
    pub cluster_id: String,
    /// How pods are wired: nested-vlan (default), neutron-vif or nested-macvlan.
    pub vif_type: VifType,
    pub driver: DriverConfig,
    /// Every pod's port takes its IP from this subnet (`DefaultSubnet`).
    pub pod_subnet_id: String,
    /// Dual-stack: a subnet of the other IP family on the pod subnet's network; every pod port then gets
    /// an address from each (docs/dual-stack.md).
    pub secondary_pod_subnet_id: Option<String>,
    /// Security groups of every pod port; empty means the project's `default` group.
    pub pod_security_groups: Vec<String>,
    /// Project owning the ports; `None` means the project of the cloud's token.
    pub project_id: Option<String>,
    /// Projects a Namespace may name with `openstack.org/kuryr-project` (its ports, network and security
    /// groups are made there); empty: the annotation is not honoured.
    pub namespace_projects: kuryr_core::projects::NamespaceProjects,
    /// Subnets a NetworkAttachmentDefinition may name for a pod's extra interfaces
    /// (`k8s.v1.cni.cncf.io/networks`); empty: the annotation is not honoured.
    pub additional_subnets: std::collections::BTreeSet<String>,
    pub vlan_range: VlanRange,
    /// Warm port pools (nested-vlan, neutron-vif); on by default.
    pub pools_enabled: bool,
    /// Pool watermarks and batch size, validated.
    pub pool_limits: PoolLimits,
    /// How often pools are checked: drained when their node is gone, trimmed above max, topped up to min.
    pub pool_sync_interval: Duration,
    /// nested-macvlan: how often the node VM ports' leftover address pairs are dropped (also once at start);
    /// zero: at start only.
    pub pairs_sweep_interval: Duration,
    /// Watch Pods and KuryrPorts of this namespace only (tests, or one controller per tenant namespace).
    pub namespace: Option<String>,
    /// First interval of the ACTIVE poll; it grows by half each time up to [`Config::active_poll_max`].
    pub active_poll_min: Duration,
    pub active_poll_max: Duration,
    /// Only Namespaces matching this label selector (and the objects in them) are handled by the namespace
    /// and NetworkPolicy controllers (tests, or several clusters sharing one API server).
    pub namespace_selector: Option<String>,
    /// Which subnet pods take their IP from, and how namespace networks are made.
    pub networks: networks::NetworksConfig,
    /// NetworkPolicy enforcement (off unless enabled).
    pub policy: policies::PolicyConfig,
    /// Services → Octavia; `None` leaves Services alone (no `--service-subnet`).
    pub services: Option<services::ServicesConfig>,
}

impl Config {
    /// Whether pods get an address of each family: a secondary pod subnet (default mode), a secondary subnet
    /// pool (namespace mode).
    pub fn dual_stack(&self) -> bool {
        match self.networks.mode {
            networks::SubnetMode::Default => self.secondary_pod_subnet_id.is_some(),
            networks::SubnetMode::Namespace => self.networks.secondary_subnet_pool_id.is_some(),
        }
    }

    /// The IP families pods get addresses of: the pod subnets' in default mode (`primary`: the family of
    /// `pod_subnet_id`); namespace subnets are IPv4, plus IPv6 with a secondary subnet pool.
    pub fn pod_families(&self, primary: Family) -> Vec<Family> {
        let first = match self.networks.mode {
            networks::SubnetMode::Default => primary,
            networks::SubnetMode::Namespace => Family::V4,
        };
        match (self.dual_stack(), first) {
            (false, f) => vec![f],
            (true, _) => vec![Family::V4, Family::V6],
        }
    }

    /// Defaults for everything but the cluster id and the pod subnet.
    pub fn new(cluster_id: impl Into<String>, pod_subnet_id: impl Into<String>) -> Self {
        Self {
            cluster_id: cluster_id.into(),
            vif_type: VifType::NestedVlan,
            driver: DriverConfig::default(),
            pod_subnet_id: pod_subnet_id.into(),
            secondary_pod_subnet_id: None,
            pod_security_groups: Vec::new(),
            project_id: None,
            namespace_projects: Default::default(),
            additional_subnets: Default::default(),
            vlan_range: VlanRange::default(),
            pools_enabled: true,
            pool_limits: PoolLimits::new(5, 20, 10).unwrap_or_default(),
            pool_sync_interval: Duration::from_secs(30),
            pairs_sweep_interval: Duration::from_secs(300),
            namespace: None,
            // Subports of an ACTIVE trunk go ACTIVE in 0.05-1.3 s on ML2/OVN: poll often at first.
            active_poll_min: Duration::from_millis(100),
            active_poll_max: Duration::from_secs(5),
            namespace_selector: None,
            networks: networks::NetworksConfig::default(),
            policy: policies::PolicyConfig::default(),
            services: None,
        }
    }
}

#[cfg(test)]
mod families_tests {
    use super::*;
    use networks::SubnetMode;

    #[test]
    fn pods_are_dual_stack_by_the_secondary_subnet_or_in_namespace_mode_by_the_secondary_pool() {
        let mut c = Config::new("c", "pods");
        assert_eq!(c.pod_families(Family::V6), vec![Family::V6], "IPv6-only");
        c.secondary_pod_subnet_id = Some("pods6".into());
        assert_eq!(c.pod_families(Family::V4), vec![Family::V4, Family::V6]);
        c.networks.mode = SubnetMode::Namespace;
        assert_eq!(
            c.pod_families(Family::V4),
            vec![Family::V4],
            "namespace subnets are IPv4"
        );
        c.networks.secondary_subnet_pool_id = Some("pool6".into());
        assert_eq!(c.pod_families(Family::V4), vec![Family::V4, Family::V6]);
    }
}
