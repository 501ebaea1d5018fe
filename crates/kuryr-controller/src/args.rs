//! Command line of `kuryr-controller` (every flag also reads a `KURYR_*` environment variable).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use std::time::Duration;

use anyhow::Context as _;
use clap::{CommandFactory, Parser, ValueEnum};
use futures::FutureExt;
use kuryr_api::VifType;
use kuryr_core::{PoolLimits, VlanRange};
use kuryr_openstack::{secret_files, AuthSource, ClientConfig, Cloud, RateLimit};
use prometheus_client::registry::Registry;

use crate::admin::{self, AdminState};
use crate::config::Config;
use crate::config_file::{self, Known};
use crate::gc::{Collector, GcConfig};
use crate::leader::{self, Ended, LeaderConfig, Stop};
use crate::metrics::Metrics;
use crate::networks::{NetworksConfig, SubnetMode};
use crate::policies::PolicyConfig;
use crate::runtime::{self, Runtime};

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum VifDriverArg {
    NestedVlan,
    NeutronVif,
    NestedMacvlan,
}

impl From<VifDriverArg> for VifType {
    fn from(v: VifDriverArg) -> Self {
        match v {
            VifDriverArg::NestedVlan => VifType::NestedVlan,
            VifDriverArg::NeutronVif => VifType::NeutronVif,
            VifDriverArg::NestedMacvlan => VifType::NestedMacvlan,
        }
    }
}

#[derive(Debug, Parser)]
#[command(
    name = "kuryr-controller",
    version = kuryr_version::VERSION,
    about = "Kubernetes pod networking on OpenStack Neutron",
    // Settings from --config / --kuryr-conf come first on the command line; the last occurrence wins.
    args_override_self = true
)]
pub struct Args {
    /// kubeconfig file; default: in-cluster config, else $KUBECONFIG / ~/.kube/config.
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// Cloud name in clouds.yaml; without it and --clouds-yaml the OS_* variables are used.
    #[arg(long, env = "OS_CLOUD")]
    pub os_cloud: Option<String>,
    /// clouds.yaml file; default: OS_CLIENT_CONFIG_FILE, ./clouds.yaml, ~/.config/openstack/, /etc/openstack/.
    #[arg(long, env = "OS_CLIENT_CONFIG_FILE")]
    pub clouds_yaml: Option<PathBuf>,
    /// Put into every ownership tag (kuryr.cluster=<id>); unique per cluster sharing a project.
    #[arg(long, env = "KURYR_CLUSTER_ID")]
    pub cluster_id: String,
    #[arg(long, env = "KURYR_VIF_DRIVER", value_enum, default_value = "nested-vlan")]
    pub vif_driver: VifDriverArg,
    /// Subnet every pod port takes its IP from.
    #[arg(long, env = "KURYR_POD_SUBNET")]
    pub pod_subnet: String,
    /// Dual-stack: a subnet of the other IP family on --pod-subnet's network; every pod port gets an
    /// address from each, and the pod both (docs/dual-stack.md).
    #[arg(long, env = "KURYR_SECONDARY_POD_SUBNET")]
    pub secondary_pod_subnet: Option<String>,
    /// Security groups of pod ports (comma separated); default: the project's default group.
    #[arg(long, env = "KURYR_POD_SECURITY_GROUPS", value_delimiter = ',')]
    pub pod_security_groups: Vec<String>,
    /// Project owning the ports; default: the token's project.
    #[arg(long, env = "KURYR_PROJECT_ID")]
    pub project_id: Option<String>,
    /// Projects (ids, comma separated) a Namespace may name with the openstack.org/kuryr-project
    /// annotation: its pods' ports, its network and its NetworkPolicies' security groups are then made in
    /// that project (the credentials must be allowed to: admin, docs/projects.md); default: none, the
    /// annotation is refused with an Event.
    #[arg(long, env = "KURYR_NAMESPACE_PROJECTS", value_delimiter = ',')]
    pub namespace_projects: Vec<String>,
    /// Neutron subnets (ids, comma separated) a NetworkAttachmentDefinition may name for pods' extra
    /// interfaces (k8s.v1.cni.cncf.io/networks; docs/multi-network.md); default: none, the annotation is
    /// refused with an Event.
    #[arg(long, env = "KURYR_ADDITIONAL_SUBNETS", value_delimiter = ',')]
    pub additional_subnets: Vec<String>,
    /// Only watch Pods and KuryrPorts of this namespace.
    #[arg(long, env = "KURYR_NAMESPACE")]
    pub namespace: Option<String>,
    /// VM NIC that carries the pods' VLAN/macvlan devices on every node (nested drivers), written into each
    /// VIF. Unset (the default), each node's CNI daemon finds the NIC by the MAC of the VM's Neutron port.
    #[arg(long, env = "KURYR_LINK_IFACE")]
    pub link_iface: Option<String>,
    #[arg(long, env = "KURYR_VLAN_FIRST", default_value_t = 1)]
    pub vlan_first: u16,
    #[arg(long, env = "KURYR_VLAN_LAST", default_value_t = 4094)]
    pub vlan_last: u16,
    /// Warm port pools per (node, network, project); `--ports-pool=false` gives every pod its own port.
    #[arg(long, env = "KURYR_PORTS_POOL", default_value_t = true, action = clap::ArgAction::Set)]
    pub ports_pool: bool,
    /// Pool low watermark: free ports kept ready per pool (plus one per pod waiting).
    #[arg(long, env = "KURYR_PORTS_POOL_MIN", default_value_t = 5)]
    pub ports_pool_min: u32,
    /// Pool high watermark: released ports beyond it are deleted, excess trimmed; 0 = none.
    #[arg(long, env = "KURYR_PORTS_POOL_MAX", default_value_t = 20)]
    pub ports_pool_max: u32,
    /// Ports per bulk create.
    #[arg(long, env = "KURYR_PORTS_POOL_BATCH", default_value_t = 10)]
    pub ports_pool_batch: u32,
    /// Optional rate ceiling: sustained calls per second to each service (one token bucket each for
    /// Keystone, Neutron and Octavia); 0 (the default) is none: the adaptive concurrency limit finds
    /// what the cloud takes (docs/openstack-client.md).
    #[arg(long, env = "KURYR_OPENSTACK_QPS", default_value_t = 0.0)]
    pub openstack_qps: f64,
    /// Rate ceiling: calls allowed back to back from a full bucket (per service).
    #[arg(long, env = "KURYR_OPENSTACK_BURST", default_value_t = 40)]
    pub openstack_burst: u32,
    /// Ceiling of the adaptive concurrency limit: calls in flight per service, however well the cloud
    /// answers.
    #[arg(long, env = "KURYR_OPENSTACK_MAX_CONCURRENCY", default_value_t = kuryr_openstack::AimdConfig::default().max)]
    pub openstack_max_concurrency: usize,
    /// Kubernetes API requests in flight at most. Each holds an HTTP/1 connection to the API server (with
    /// its TLS state and buffers, ~100 KB); unbounded, building 5,000 pods / 1,000 Services held ~200 of
    /// them. Further requests wait their turn in the client.
    #[arg(long, env = "KURYR_KUBE_API_CONCURRENCY", default_value_t = 64,
          value_parser = clap::value_parser!(u16).range(1..))]
    pub kube_api_concurrency: u16,
    /// The cloud's request body limit in bytes (oslo.middleware `max_request_body_size`; Octavia's default
    /// 114,688): bulk port and rule creates and Octavia member writes are shaped to fit it.
    #[arg(long, env = "KURYR_OPENSTACK_MAX_REQUEST_BODY", default_value_t = kuryr_openstack::fit::DEFAULT_MAX_REQUEST_BODY)]
    pub openstack_max_request_body: usize,
    /// Subnet of the Service IP range: turns on Services → Octavia (VIP = clusterIP on this subnet).
    #[arg(long, env = "KURYR_SERVICE_SUBNET")]
    pub service_subnet: Option<String>,
    /// Dual-stack: the subnet of the second Service IP range (the other IP family, on --service-subnet's
    /// network): a dual-stack Service's second clusterIP becomes an Octavia additional VIP on it.
    #[arg(long, env = "KURYR_SECONDARY_SERVICE_SUBNET")]
    pub secondary_service_subnet: Option<String>,
    /// External network for floating IPs of type=LoadBalancer Services.
    #[arg(long, env = "KURYR_EXTERNAL_NETWORK")]
    pub external_network: Option<String>,
    /// Octavia provider for Services that name none (annotation openstack.org/kuryr-lb-provider).
    #[arg(long, env = "KURYR_LB_PROVIDER")]
    pub lb_provider: Option<String>,
    /// Providers a Service may name with openstack.org/kuryr-lb-provider besides --lb-provider (comma
    /// separated); default: none, any other name is refused with an Event.
    #[arg(long, env = "KURYR_LB_ALLOWED_PROVIDERS", value_delimiter = ',')]
    pub lb_allowed_providers: Vec<String>,
    /// External networks a Service's loadBalancerIP may be on besides --external-network.
    #[arg(long, env = "KURYR_LB_FLOATING_IP_NETWORKS", value_delimiter = ',')]
    pub lb_floating_ip_networks: Vec<String>,
    /// Ranges a Service's loadBalancerIP must fall in; default: any address of the allowed networks.
    #[arg(long, env = "KURYR_LB_FLOATING_IP_CIDRS", value_delimiter = ',')]
    pub lb_floating_ip_cidrs: Vec<String>,
    /// Octavia's own default provider (for the feature gates when none is named).
    #[arg(long, env = "KURYR_LB_DEFAULT_PROVIDER", default_value = "amphora")]
    pub lb_default_provider: String,
    /// A load balancer for `default/kubernetes` (members: the API servers' advertised addresses), so pods
    /// reach the API through its clusterIP. `auto`: when this controller sees that Service (it watches every
    /// namespace, or `default`); `always`: also when scoped to another namespace; `never`: something else
    /// does it.
    #[arg(long, env = "KURYR_LB_DEFAULT_KUBERNETES", value_enum, default_value = "auto")]
    pub lb_default_kubernetes: crate::services::DefaultKubernetes,
    /// Seconds a load balancer may stay PENDING_* before it is replaced.
    #[arg(long, env = "KURYR_LB_PENDING_LIMIT", default_value_t = 300)]
    pub lb_pending_limit: u64,
    /// Milliseconds added to the pending limit for each object (listener, pool, health monitor, member)
    /// the write made, changed or removed: providers that make them one by one, like ovn, take seconds each for a
    /// large batch or a Service of many ports. `--lb-pending-per-member-ms` is the former name.
    #[arg(
        long,
        alias = "lb-pending-per-member-ms",
        env = "KURYR_LB_PENDING_PER_OBJECT_MS",
        default_value_t = 3000
    )]
    pub lb_pending_per_object_ms: u64,
    /// Seconds between the observer's listings of the cluster's load balancers, listeners and pools when
    /// none is pending: a part deleted or changed behind our back is noticed within this.
    #[arg(long, env = "KURYR_LB_DRIFT_INTERVAL", default_value_t = 15)]
    pub lb_drift_interval: u64,
    /// Milliseconds over which endpoint changes are gathered into one member replace.
    #[arg(long, env = "KURYR_LB_COALESCE_MS", default_value_t = 300)]
    pub lb_coalesce_ms: u64,
    /// Seconds between pool upkeep rounds (drain pools of deleted nodes, adopt or delete loose pool ports,
    /// trim, top up). A loose pool port is gone within two rounds.
    #[arg(long, env = "KURYR_PORTS_POOL_SYNC_SECONDS", default_value_t = 30)]
    pub ports_pool_sync_seconds: u64,
    /// Address of /livez, /readyz and /metrics.
    #[arg(long, env = "KURYR_METRICS_ADDR", default_value = "0.0.0.0:8082")]
    pub metrics_addr: SocketAddr,
    /// YAML file of settings (keys: these flags' long names); below environment and flags.
    #[arg(long, env = "KURYR_CONFIG")]
    pub config: Option<PathBuf>,
    /// Upstream kuryr-kubernetes kuryr.conf (INI): the options that matter are read (docs/operations.md).
    #[arg(long, env = "KURYR_UPSTREAM_CONF")]
    pub kuryr_conf: Option<PathBuf>,
    /// Run as one of several replicas: only the holder of the Lease writes to the cloud.
    #[arg(long, env = "KURYR_LEADER_ELECT", default_value_t = false, action = clap::ArgAction::Set)]
    pub leader_elect: bool,
    #[arg(long, env = "KURYR_LEADER_LEASE_NAME", default_value = "kuryr-controller")]
    pub leader_lease_name: String,
    /// Namespace of the Lease (the controller's own, from the downward API).
    #[arg(long, env = "POD_NAMESPACE", default_value = "kube-system")]
    pub leader_lease_namespace: String,
    /// This replica's name in the Lease; default: $POD_NAME, else host name and process id.
    #[arg(long, env = "KURYR_LEADER_IDENTITY")]
    pub leader_identity: Option<String>,
    /// Lease validity: the longest a standby waits after the leader dies.
    #[arg(long, env = "KURYR_LEADER_LEASE_SECONDS", default_value_t = 10)]
    pub leader_lease_seconds: u64,
    /// The leader renews this many seconds before the Lease expires.
    #[arg(long, env = "KURYR_LEADER_RENEW_GRACE_SECONDS", default_value_t = 3)]
    pub leader_renew_grace_seconds: u64,
    /// Garbage collector sweep interval; 0 disables it.
    #[arg(long, env = "KURYR_GC_INTERVAL_SECONDS", default_value_t = 300)]
    pub gc_interval_seconds: u64,
    /// Orphans younger than this are never collected.
    #[arg(long, env = "KURYR_GC_GRACE_SECONDS", default_value_t = 600)]
    pub gc_grace_seconds: u64,
    #[arg(long, env = "KURYR_LOG_FORMAT", value_enum, default_value = "text")]
    pub log_format: LogFormat,
    /// Only Namespaces matching this label selector get networks and policies.
    #[arg(long, env = "KURYR_NAMESPACE_SELECTOR")]
    pub namespace_selector: Option<String>,
    /// `default`: every pod on --pod-subnet; `namespace`: one network + subnet per Namespace.
    #[arg(long, env = "KURYR_SUBNET_DRIVER", value_enum, default_value = "default")]
    pub subnet_driver: SubnetDriverArg,
    /// Subnet pool of namespace subnets; without it one is found by tags or made from --namespace-prefixes.
    #[arg(long, env = "KURYR_NAMESPACE_SUBNET_POOL")]
    pub namespace_subnet_pool: Option<String>,
    #[arg(
        long,
        env = "KURYR_NAMESPACE_PREFIXES",
        value_delimiter = ',',
        default_value = "10.128.0.0/14"
    )]
    pub namespace_prefixes: Vec<String>,
    #[arg(long, env = "KURYR_NAMESPACE_PREFIXLEN", default_value_t = 24)]
    pub namespace_prefixlen: u8,
    /// Dual-stack namespaces: a subnet pool of the other IP family (an IPv6 pool for IPv4 namespace
    /// subnets); each namespace network also gets a subnet of the pool's default prefix length from it.
    #[arg(long, env = "KURYR_NAMESPACE_SECONDARY_SUBNET_POOL")]
    pub namespace_secondary_subnet_pool: Option<String>,
    /// Router of namespace subnets; default: the router of --pod-subnet.
    #[arg(long, env = "KURYR_NAMESPACE_ROUTER")]
    pub namespace_router: Option<String>,
    /// Create namespace networks when namespaces appear, not with their first pod.
    #[arg(long, env = "KURYR_NAMESPACE_EAGER")]
    pub namespace_eager: bool,
    /// Enforce NetworkPolicies with security groups.
    #[arg(long, env = "KURYR_NETWORK_POLICY")]
    pub network_policy: bool,
    /// Opt-in: pods no policy selects accept ingress only from their own namespace (needs --pod-cidrs).
    #[arg(long, env = "KURYR_NAMESPACE_ISOLATION")]
    pub namespace_isolation: bool,
    #[arg(long, env = "KURYR_POD_CIDRS", value_delimiter = ',')]
    pub pod_cidrs: Vec<String>,
    /// Service ClusterIP ranges (Services are part of policies only when set).
    #[arg(long, env = "KURYR_SERVICE_CIDRS", value_delimiter = ',')]
    pub service_cidrs: Vec<String>,
    #[arg(long, env = "KURYR_NODE_CIDRS", value_delimiter = ',')]
    pub node_cidrs: Vec<String>,
    /// Security groups kuryr may use (what the project quota leaves); unlimited when absent.
    #[arg(long, env = "KURYR_SG_QUOTA")]
    pub sg_quota: Option<usize>,
    /// Security group rules kuryr may use.
    #[arg(long, env = "KURYR_SG_RULE_QUOTA")]
    pub sg_rule_quota: Option<usize>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum SubnetDriverArg {
    Default,
    Namespace,
}

/// Trimmed, without empty items (`--x=` from a file means none).
fn nonempty(list: &[String]) -> Vec<String> {
    list.iter()
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
        .collect()
}

/// An optional id; blank (`""` in a settings file) is the same as left out.
fn nonempty_one(v: Option<&str>) -> Option<String> {
    v.map(str::trim).filter(|s| !s.is_empty()).map(str::to_owned)
}

fn cidrs(list: &[String]) -> anyhow::Result<Vec<kuryr_core::policy::Cidr>> {
    list.iter()
        .map(|c| c.parse().map_err(|e| anyhow::anyhow!("{c}: {e}")))
        .collect()
}

impl Args {
    pub fn config(&self) -> anyhow::Result<Config> {
        let mut c = Config::new(&self.cluster_id, &self.pod_subnet);
        c.vif_type = self.vif_driver.into();
        c.secondary_pod_subnet_id = nonempty_one(self.secondary_pod_subnet.as_deref());
        // `link_iface: ""` in a file means not pinned, like leaving it out.
        c.driver.link_iface = nonempty_one(self.link_iface.as_deref());
        c.pod_security_groups = self.pod_security_groups.clone();
        c.project_id = self.project_id.clone();
        c.namespace_projects =
            kuryr_core::projects::NamespaceProjects::new(nonempty(&self.namespace_projects));
        c.namespace = self.namespace.clone();
        c.vlan_range = VlanRange::new(self.vlan_first, self.vlan_last).context("vlan-first / vlan-last")?;
        c.pool_limits = PoolLimits::new(self.ports_pool_min, self.ports_pool_max, self.ports_pool_batch)
            .context("ports-pool-min / ports-pool-max / ports-pool-batch")?;
        if self.cluster_id.is_empty() {
            anyhow::bail!("cluster-id: must not be empty (it goes into every ownership tag)");
        }
        kuryr_openstack::Owner::new(&self.cluster_id, "x", "x")
            .tags()
            .map_err(|e| anyhow::anyhow!("cluster-id: {e}"))?;
        if self.gc_interval_seconds > 0 && self.gc_grace_seconds < self.gc_interval_seconds {
            anyhow::bail!(
                "gc-grace-seconds: {} is shorter than gc-interval-seconds ({}): an orphan must outlive a sweep",
                self.gc_grace_seconds,
                self.gc_interval_seconds
            );
        }
        self.leader_config().validate().map_err(anyhow::Error::msg)?;
        c.namespace_selector = self.namespace_selector.clone();
        c.networks = NetworksConfig {
            mode: match self.subnet_driver {
                SubnetDriverArg::Default => SubnetMode::Default,
                SubnetDriverArg::Namespace => SubnetMode::Namespace,
            },
            subnet_pool_id: self.namespace_subnet_pool.clone(),
            pool_prefixes: self.namespace_prefixes.clone(),
            prefixlen: self.namespace_prefixlen,
            secondary_subnet_pool_id: nonempty_one(self.namespace_secondary_subnet_pool.as_deref()),
            router_id: self.namespace_router.clone(),
            eager: self.namespace_eager,
        };
        c.policy = PolicyConfig {
            enabled: self.network_policy,
            namespace_isolation: self.namespace_isolation,
            pod_cidrs: cidrs(&self.pod_cidrs)?,
            service_cidrs: cidrs(&self.service_cidrs)?,
            node_cidrs: cidrs(&self.node_cidrs)?,
            quota: kuryr_core::policy::Quota {
                security_groups: self.sg_quota,
                security_group_rules: self.sg_rule_quota,
            },
        };
        if c.policy.namespace_isolation && c.policy.pod_cidrs.is_empty() {
            anyhow::bail!("--namespace-isolation needs --pod-cidrs");
        }
        let fip_cidrs = cidrs(&nonempty(&self.lb_floating_ip_cidrs)).context("lb-floating-ip-cidrs")?;
        c.services = self.service_subnet.as_ref().map(|subnet| {
            let mut s = crate::services::ServicesConfig::new(subnet);
            s.member_subnet_id = Some(self.pod_subnet.clone());
            s.secondary_service_subnet_id = nonempty_one(self.secondary_service_subnet.as_deref());
            s.secondary_member_subnet_id = nonempty_one(self.secondary_pod_subnet.as_deref());
            s.external_network_id = self.external_network.clone();
            s.provider = self.lb_provider.clone();
            s.default_provider = self.lb_default_provider.clone();
            s.default_kubernetes = self.lb_default_kubernetes;
            s.allowed_providers = nonempty(&self.lb_allowed_providers);
            s.floating_ip_networks = nonempty(&self.lb_floating_ip_networks);
            s.floating_ip_cidrs = fip_cidrs;
            s.pending_limit = std::time::Duration::from_secs(self.lb_pending_limit);
            s.pending_per_object = std::time::Duration::from_millis(self.lb_pending_per_object_ms);
            s.drift_interval = std::time::Duration::from_secs(self.lb_drift_interval);
            s.coalesce = std::time::Duration::from_millis(self.lb_coalesce_ms);
            s
        });
        c.pools_enabled = self.ports_pool;
        c.pool_sync_interval = std::time::Duration::from_secs(self.ports_pool_sync_seconds.max(1));
        // Leftover macvlan pairs are garbage: swept on the collector's cadence.
        c.pairs_sweep_interval = std::time::Duration::from_secs(self.gc_interval_seconds);
        Ok(c)
    }

    pub fn leader_config(&self) -> LeaderConfig {
        let identity = self.leader_identity.clone().unwrap_or_else(|| {
            std::env::var("POD_NAME").unwrap_or_else(|_| {
                let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
                format!("{}-{}", host.trim(), std::process::id())
            })
        });
        LeaderConfig {
            lease_name: self.leader_lease_name.clone(),
            namespace: self.leader_lease_namespace.clone(),
            identity,
            duration_s: self.leader_lease_seconds,
            grace_s: self.leader_renew_grace_seconds,
        }
    }

    pub fn gc_config(&self) -> GcConfig {
        GcConfig {
            interval: Duration::from_secs(self.gc_interval_seconds),
            grace: Duration::from_secs(self.gc_grace_seconds),
        }
    }

    /// The command line with `--config` / `--kuryr-conf` settings put first; warnings about upstream
    /// options that are not used.
    pub fn try_parse_with_files(argv: Vec<std::ffi::OsString>) -> anyhow::Result<(Self, Vec<String>)> {
        let known = Known::of(&Self::command());
        let (argv, warnings) = config_file::expand(argv, &known, |k| std::env::var(k).ok())?;
        Ok((Self::try_parse_from(argv)?, warnings))
    }

    fn cloud_config(&self) -> ClientConfig {
        let config = match (&self.os_cloud, &self.clouds_yaml) {
            (None, None) => ClientConfig::new(AuthSource::Env),
            (cloud, file) => {
                ClientConfig::clouds_yaml(file.clone(), cloud.clone().unwrap_or_else(|| "kuryr".into()))
            }
        };
        config
            .with_rate_limit(self.rate_limit())
            .with_max_concurrency(self.openstack_max_concurrency)
            .with_max_request_body(self.openstack_max_request_body)
    }

    /// The client's rate limit: `--openstack-qps` 0 (or less) is no limit.
    fn rate_limit(&self) -> RateLimit {
        if self.openstack_qps > 0.0 {
            RateLimit {
                qps: self.openstack_qps,
                burst: self.openstack_burst.max(1),
            }
        } else {
            RateLimit::unlimited()
        }
    }

    /// The Kubernetes clients: the controllers' (at most `--kube-api-concurrency` requests in flight) and
    /// the leader election's own, so that a renewal of the Lease never waits behind a burst's writes (a
    /// renewal unseen for the Lease's duration makes the leader step down). Warns loudly when the
    /// kubeconfig turns certificate verification off.
    async fn kube_clients(&self) -> anyhow::Result<(kube::Client, kube::Client)> {
        let config = kuryr_api::kubeconfig::load(self.kubeconfig.as_deref()).await?;
        if let Some(w) = kuryr_api::kubeconfig::tls_warning(&config) {
            tracing::warn!("{w}");
        }
        let lease = kube::Client::try_from(config.clone())?;
        let work = crate::kube_client::build(config, self.kube_api_concurrency)?;
        Ok((work, lease))
    }

    /// Parses the command line, logs, connects to Kubernetes and OpenStack, serves the admin port and runs
    /// the controllers until SIGINT or SIGTERM.
    pub async fn parse_and_run() -> anyhow::Result<()> {
        let (args, warnings) = match Self::try_parse_with_files(std::env::args_os().collect()) {
            Ok(parsed) => parsed,
            Err(e) => match e.downcast::<clap::Error>() {
                Ok(clap_err) => clap_err.exit(),
                Err(e) => return Err(e),
            },
        };
        args.init_logging();
        for w in &warnings {
            tracing::warn!("{w}");
        }
        args.run().await
    }

    fn init_logging(&self) {
        let filter = tracing_subscriber::EnvFilter::try_from_default_env()
            .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
        let builder = tracing_subscriber::fmt().with_env_filter(filter);
        let _ = match self.log_format {
            LogFormat::Text => builder.try_init(),
            LogFormat::Json => builder
                .json()
                .with_current_span(true)
                .with_span_list(true)
                .try_init(),
        };
    }

    pub async fn run(self) -> anyhow::Result<()> {
        let config = self.config()?;
        // Every clouds.yaml / secure.yaml the SDK will read, before anything connects.
        secret_files::guard_cloud_files(&self.cloud_config().auth)?;
        let mut registry = Registry::default();
        let metrics = Metrics::register(&mut registry);
        let (client, lease_client) = self.kube_clients().await.context("connecting to Kubernetes")?;
        // An API server known to be too old is refused; one not reachable yet is not a reason to stop (the
        // watches retry until it answers, as they do after any outage).
        match tokio::time::timeout(Duration::from_secs(10), client.apiserver_version()).await {
            Ok(Ok(version)) => {
                kuryr_api::kube_version::require_supported(&version)?;
                tracing::info!(kubernetes = %version.git_version, "API server version supported");
            }
            Ok(Err(e)) => tracing::warn!(error = %e, "could not read the API server's version; not checked"),
            Err(_) => tracing::warn!("the API server did not tell its version within 10 s; not checked"),
        }
        let cloud = Cloud::connect_with_observer(self.cloud_config(), Some(metrics.call_observer()))
            .await
            .context("connecting to OpenStack")?;
        if let Some(w) = cloud.tls_warning() {
            tracing::warn!("{w}");
        }
        let features = cloud.neutron_features().await?;
        if let Err(e) = features.require("kuryr-controller", "trunk") {
            anyhow::bail!("{e}");
        }
        Metrics::register_cloud(&mut registry, cloud.metrics().clone());
        // Namespaces in projects of their own: the sweep lists every project the credentials see (the
        // cluster tag still scopes it).
        let project_id = if config.namespace_projects.enabled() {
            None
        } else {
            config.project_id.clone().or_else(|| cloud.project_id())
        };
        let collector = Collector::new(
            cloud.clone(),
            client.clone(),
            config.cluster_id.clone(),
            project_id,
            self.gc_config().grace,
            metrics.clone(),
        );
        let rt = Runtime {
            client: client.clone(),
            cloud,
            config,
            metrics: metrics.clone(),
            ready: Arc::default(),
        };
        let state = AdminState {
            registry: Arc::new(registry),
            ready: rt.ready.clone(),
        };
        if self.leader_elect {
            // A standby is ready to take over: /readyz must not hold a rollout up behind it.
            rt.ready.store(true, std::sync::atomic::Ordering::Relaxed);
        }
        let listener = admin::bind(self.metrics_addr).await.with_context(|| {
            format!(
                "admin server (--metrics-addr): cannot listen on {}",
                self.metrics_addr
            )
        })?;
        let admin = tokio::spawn(admin::serve(listener, state, shutdown_signal()));
        let shutdown: Stop = shutdown_signal().boxed().shared();
        let gc_interval = self.gc_config().interval;
        let work = move |stop: Stop| async move {
            let gc = async {
                if !gc_interval.is_zero() {
                    collector.run(gc_interval, stop.clone()).await;
                }
            };
            let (result, ()) = tokio::join!(runtime::run(rt, stop.clone()), gc);
            result
        };
        let result = if self.leader_elect {
            match leader::run_elected(lease_client, &self.leader_config(), &metrics, shutdown, work).await {
                Ok(Ended::LostLease) => Err(anyhow::anyhow!(
                    "lost the leader Lease; exiting so a restart stands by"
                )),
                Ok(Ended::Shutdown) => Ok(()),
                Err(e) => Err(e),
            }
        } else {
            work(shutdown).await
        };
        admin.abort();
        result
    }
}

/// SIGINT or SIGTERM.
async fn shutdown_signal() {
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_become_a_validated_config() {
        let args = Args::try_parse_from([
            "kuryr-controller",
            "--cluster-id",
            "c1",
            "--pod-subnet",
            "sub",
            "--pod-security-groups",
            "sg1,sg2",
            "--vif-driver",
            "nested-vlan",
            "--vlan-first",
            "100",
            "--vlan-last",
            "199",
        ])
        .unwrap();
        let c = args.config().unwrap();
        assert_eq!(c.vif_type, VifType::NestedVlan);
        assert_eq!(c.pod_security_groups, vec!["sg1", "sg2"]);
        assert_eq!((c.vlan_range.first(), c.vlan_range.last()), (100, 199));
        assert!(c.pools_enabled);
        assert_eq!(c.pool_limits.max_free(), Some(20));
    }

    #[tokio::test]
    async fn kube_requests_beyond_the_limit_wait_their_turn() {
        use kuryr_api::k8s_openapi::api::core::v1::ConfigMap;
        let base = ["kuryr-controller", "--cluster-id", "c1", "--pod-subnet", "sub"];
        assert_eq!(Args::try_parse_from(base).unwrap().kube_api_concurrency, 64);
        assert!(Args::try_parse_from(base.iter().chain(&["--kube-api-concurrency", "0"])).is_err());

        let (svc, mut server) =
            tower_test::mock::pair::<http::Request<kube::client::Body>, http::Response<kube::client::Body>>();
        let client = kube::client::ClientBuilder::new(svc, "default")
            .with_layer(&crate::kube_client::in_flight_limit(2))
            .build();
        let api: kube::Api<ConfigMap> = kube::Api::namespaced(client, "default");
        let gets: Vec<_> = (0..3)
            .map(|i| {
                let api = api.clone();
                tokio::spawn(async move { api.get_opt(&format!("c{i}")).await })
            })
            .collect();
        let first = server.next_request().await.expect("a request");
        let second = server.next_request().await.expect("a request");
        for _ in 0..100 {
            tokio::task::yield_now().await;
        }
        assert!(
            server.next_request().now_or_never().is_none(),
            "a third request in flight"
        );
        let not_found = || {
            http::Response::builder()
                .status(404)
                .body(kube::client::Body::from(
                    br#"{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}"#
                        .to_vec(),
                ))
                .unwrap()
        };
        first.1.send_response(not_found());
        // One answered: the third goes out.
        let third = server
            .next_request()
            .await
            .expect("the third, once the first was answered");
        third.1.send_response(not_found());
        second.1.send_response(not_found());
        for g in gets {
            assert!(g.await.unwrap().unwrap().is_none());
        }
    }

    #[test]
    fn openstack_rate_ceiling_is_off_by_default_and_set_by_flags() {
        let base = ["kuryr-controller", "--cluster-id", "c1", "--pod-subnet", "sub"];
        let args = Args::try_parse_from(base).unwrap();
        assert_eq!(args.rate_limit(), RateLimit::unlimited());
        assert_eq!(args.cloud_config().rate_limit, RateLimit::default());
        assert_eq!(args.cloud_config().concurrency.max, 64);
        let args = Args::try_parse_from(base.iter().chain(&["--openstack-max-concurrency", "4"])).unwrap();
        let c = args.cloud_config().concurrency;
        assert_eq!((c.initial, c.max), (4, 4));
        let args = Args::try_parse_from(base.iter().chain(&["--openstack-qps", "0"])).unwrap();
        assert_eq!(args.cloud_config().rate_limit, RateLimit::unlimited());
        let args =
            Args::try_parse_from(
                base.iter()
                    .chain(&["--openstack-qps", "50", "--openstack-burst", "80"]),
            )
            .unwrap();
        assert_eq!(args.rate_limit(), RateLimit { qps: 50.0, burst: 80 });
    }

    #[test]
    fn link_iface_is_unpinned_unless_named() {
        let base = ["kuryr-controller", "--cluster-id", "c1", "--pod-subnet", "sub"];
        let pinned = |extra: &[&str]| {
            let argv: Vec<&str> = base.iter().chain(extra).copied().collect();
            Args::try_parse_from(argv)
                .unwrap()
                .config()
                .unwrap()
                .driver
                .link_iface
        };
        assert_eq!(
            pinned(&[]),
            None,
            "no cluster-wide eth0: nodes find their NIC by MAC"
        );
        assert_eq!(pinned(&["--link-iface="]), None);
        assert_eq!(pinned(&["--link-iface", "ens3"]), Some("ens3".into()));
    }

    #[test]
    fn pools_can_be_switched_off() {
        let args = Args::try_parse_from([
            "kuryr-controller",
            "--cluster-id",
            "c1",
            "--pod-subnet",
            "sub",
            "--ports-pool=false",
            "--vif-driver",
            "nested-macvlan",
        ])
        .unwrap();
        let c = args.config().unwrap();
        assert!(!c.pools_enabled);
        assert_eq!(c.vif_type, VifType::NestedMacvlan);
    }

    #[test]
    fn the_kubernetes_service_is_served_when_seen_unless_told_otherwise() {
        use crate::services::DefaultKubernetes;
        let base = [
            "kuryr-controller",
            "--cluster-id",
            "c1",
            "--pod-subnet",
            "sub",
            "--service-subnet",
            "svc",
        ];
        let mode = |extra: &[&str]| {
            let mut argv = base.to_vec();
            argv.extend_from_slice(extra);
            let s = Args::try_parse_from(argv)
                .unwrap()
                .config()
                .unwrap()
                .services
                .unwrap();
            (s.default_kubernetes, s.serves_default_kubernetes())
        };
        assert_eq!(mode(&[]), (DefaultKubernetes::Auto, true));
        // The old boolean spellings still parse (configs written for the first release).
        assert_eq!(
            mode(&["--lb-default-kubernetes", "true"]),
            (DefaultKubernetes::Always, true)
        );
        assert_eq!(
            mode(&["--lb-default-kubernetes", "always"]),
            (DefaultKubernetes::Always, true)
        );
        assert_eq!(
            mode(&["--lb-default-kubernetes", "false"]),
            (DefaultKubernetes::Never, false)
        );
        assert_eq!(
            mode(&["--lb-default-kubernetes", "never"]),
            (DefaultKubernetes::Never, false)
        );
        let mut argv = base.to_vec();
        argv.extend(["--lb-default-kubernetes", "sometimes"]);
        assert!(Args::try_parse_from(argv).is_err());
    }

    #[test]
    fn load_balancer_allow_lists_come_from_flags_and_default_to_the_configured_values() {
        let base = [
            "kuryr-controller",
            "--cluster-id",
            "c1",
            "--pod-subnet",
            "sub",
            "--service-subnet",
            "svc",
            "--lb-provider",
            "ovn",
            "--external-network",
            "public",
        ];
        let c = Args::try_parse_from(base).unwrap().config().unwrap();
        let a = c.services.unwrap().allow_list(Some("p".into()));
        assert_eq!(a.default_provider.as_deref(), Some("ovn"));
        assert!(a.providers.is_empty(), "only the default provider by default");
        assert_eq!(a.fip_networks, vec!["public"]);
        assert!(a.fip_cidrs.is_empty());
        let mut argv: Vec<&str> = base.to_vec();
        argv.extend([
            "--lb-allowed-providers",
            "amphora",
            "--lb-floating-ip-networks",
            "public,corp",
            "--lb-floating-ip-cidrs",
            "203.0.113.0/26",
        ]);
        let c = Args::try_parse_from(argv.clone()).unwrap().config().unwrap();
        let a = c.services.unwrap().allow_list(None);
        assert_eq!(a.providers, vec!["amphora"]);
        assert_eq!(a.fip_networks, vec!["public", "corp"]);
        assert_eq!(a.fip_cidrs.len(), 1);
        argv.extend(["--lb-floating-ip-cidrs", "203.0.113.1/8"]);
        assert!(Args::try_parse_from(argv).unwrap().config().is_err());
    }

    #[test]
    fn namespace_projects_are_a_comma_list_and_off_by_default() {
        let base = ["kuryr-controller", "--cluster-id", "c1", "--pod-subnet", "sub"];
        let c = Args::try_parse_from(base).unwrap().config().unwrap();
        assert!(!c.namespace_projects.enabled());
        let mut argv = base.to_vec();
        argv.extend(["--namespace-projects", "p-a, p-b,"]);
        let c = Args::try_parse_from(argv).unwrap().config().unwrap();
        assert_eq!(c.namespace_projects.listed().collect::<Vec<_>>(), ["p-a", "p-b"]);
    }

    #[test]
    fn contradictory_pool_knobs_are_refused() {
        let args = Args::try_parse_from([
            "kuryr-controller",
            "--cluster-id",
            "c1",
            "--pod-subnet",
            "sub",
            "--ports-pool-min",
            "10",
            "--ports-pool-max",
            "5",
        ])
        .unwrap();
        assert!(args.config().is_err());
    }
}
