//! Settings of the Services side, and the allow-lists every KuryrLoadBalancer is held to.

use std::time::Duration;

use kuryr_core::lb::AllowList;

/// Settings of the Services side.
#[derive(Clone, Debug)]
pub struct ServicesConfig {
    /// VIP subnet: the subnet holding the cluster's service IP range (clusterIPs are the VIPs).
    pub service_subnet_id: String,
    /// Subnet of the members (the pod subnet); `None` lets Octavia use the VIP subnet.
    pub member_subnet_id: Option<String>,
    /// Dual-stack: the service subnet of the other IP family, on the service subnet's network (a dual-stack
    /// Service's second clusterIP becomes an Octavia additional VIP there).
    pub secondary_service_subnet_id: Option<String>,
    /// Dual-stack: the pod subnet of the other IP family (members of that family are declared on it).
    pub secondary_member_subnet_id: Option<String>,
    /// External network floating IPs of type=LoadBalancer Services come from; `None`: no floating IPs.
    pub external_network_id: Option<String>,
    /// Octavia provider when a Service names none (`openstack.org/kuryr-lb-provider`); `None`: Octavia's
    /// default.
    pub provider: Option<String>,
    /// What Octavia's default provider is, for the feature gates when no provider is named.
    pub default_provider: String,
    /// Whether `default/kubernetes` gets a load balancer (pods reach the API servers through it).
    pub default_kubernetes: DefaultKubernetes,
    /// Providers a Service may name besides `provider` (`openstack.org/kuryr-lb-provider`); empty: only
    /// `provider`. Anything else is refused (docs/security.md).
    pub allowed_providers: Vec<String>,
    /// External networks a Service's `loadBalancerIP` may be on, besides `external_network_id`.
    pub floating_ip_networks: Vec<String>,
    /// Ranges a `loadBalancerIP` must fall in; empty: any address of the allowed networks.
    pub floating_ip_cidrs: Vec<kuryr_core::policy::Cidr>,
    /// An LB (or part of its tree) PENDING_* this long is replaced...
    pub pending_limit: Duration,
    /// ...plus this much per object the write it is pending on made or changed ([`kuryr_core::lb::Op::objects`]).
    pub pending_per_object: Duration,
    /// Period of the observer's listings while nothing is pending: how late a listener, pool or member
    /// deleted or changed behind our back is noticed at most (the listings cost the same whatever the
    /// number of Services).
    pub drift_interval: Duration,
    /// Endpoint changes closer together than this go out as one member replace.
    pub coalesce: Duration,
    /// Polls of a pending load balancer start here and grow by half up to `poll_max`.
    pub poll_min: Duration,
    pub poll_max: Duration,
}

impl ServicesConfig {
    pub fn new(service_subnet_id: impl Into<String>) -> Self {
        Self {
            service_subnet_id: service_subnet_id.into(),
            member_subnet_id: None,
            secondary_service_subnet_id: None,
            secondary_member_subnet_id: None,
            external_network_id: None,
            provider: None,
            default_provider: "amphora".into(),
            default_kubernetes: DefaultKubernetes::Auto,
            allowed_providers: Vec::new(),
            floating_ip_networks: Vec::new(),
            floating_ip_cidrs: Vec::new(),
            // Upstream's lbaas_activation_timeout; amphora LBs take minutes on real clouds.
            pending_limit: Duration::from_secs(300),
            // The lab's ovn provider took 2.5 s per member of a 300-member batch on a loaded 2-core host.
            pending_per_object: Duration::from_secs(3),
            // Drift repaired within 30 s: a listing every 15 s, 3-4 list calls each.
            drift_interval: Duration::from_secs(15),
            coalesce: Duration::from_millis(300),
            poll_min: Duration::from_millis(200),
            poll_max: Duration::from_secs(5),
        }
    }
}

/// Who gives `default/kubernetes` its load balancer. The Service is the cluster's, not a namespace's: a
/// controller scoped to one namespace (`--namespace`) does not see it unless told to serve it too.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum DefaultKubernetes {
    /// Served when the controller sees it: it watches every namespace, or `default`.
    Auto,
    /// Served also by a controller scoped to another namespace (one such controller per cluster).
    #[value(alias = "true")]
    Always,
    /// Never: something else (the installer, a cloud LB) makes pods reach the API servers. A load balancer
    /// made earlier is released, also by a controller scoped to another namespace (how an uninstall
    /// releases it, docs/operations.md).
    #[value(alias = "false")]
    Never,
}

impl ServicesConfig {
    /// A load balancer for `default/kubernetes` when the front end meets that Service.
    pub fn serves_default_kubernetes(&self) -> bool {
        self.default_kubernetes != DefaultKubernetes::Never
    }

    /// The allow-lists every KuryrLoadBalancer is held to; `project`: the controller's project.
    pub fn allow_list(&self, project: Option<String>) -> AllowList {
        let mut fip_networks: Vec<String> = self.external_network_id.iter().cloned().collect();
        for n in &self.floating_ip_networks {
            if !fip_networks.contains(n) {
                fip_networks.push(n.clone());
            }
        }
        AllowList {
            default_provider: self.provider.clone(),
            providers: self.allowed_providers.clone(),
            vip_subnet: self.service_subnet_id.clone(),
            secondary_vip_subnet: self.secondary_service_subnet_id.clone(),
            project,
            fip_networks,
            fip_create_network: self.external_network_id.clone(),
            fip_cidrs: self.floating_ip_cidrs.clone(),
        }
    }
}
