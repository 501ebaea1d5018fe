//! Command line of `kuryr-controller` (every flag also reads a `KURYR_*` environment variable).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context as _;
use clap::{Parser, ValueEnum};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kuryr_api::VifType;
use kuryr_core::{PoolLimits, VlanRange};
use kuryr_openstack::{AuthSource, ClientConfig, Cloud};
use prometheus_client::registry::Registry;

use crate::admin::{self, AdminState};
use crate::config::Config;
use crate::metrics::Metrics;
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
    about = "Kubernetes pod networking on OpenStack Neutron"
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
    /// Security groups of pod ports (comma separated); default: the project's default group.
    #[arg(long, env = "KURYR_POD_SECURITY_GROUPS", value_delimiter = ',')]
    pub pod_security_groups: Vec<String>,
    /// Project owning the ports; default: the token's project.
    #[arg(long, env = "KURYR_PROJECT_ID")]
    pub project_id: Option<String>,
    /// Only watch Pods and KuryrPorts of this namespace.
    #[arg(long, env = "KURYR_NAMESPACE")]
    pub namespace: Option<String>,
    /// VM NIC that carries the VLAN subinterfaces (nested drivers).
    #[arg(long, env = "KURYR_LINK_IFACE", default_value = "eth0")]
    pub link_iface: String,
    #[arg(long, env = "KURYR_VLAN_FIRST", default_value_t = 1)]
    pub vlan_first: u16,
    #[arg(long, env = "KURYR_VLAN_LAST", default_value_t = 4094)]
    pub vlan_last: u16,
    /// Pool low watermark (pools: to come).
    #[arg(long, env = "KURYR_PORTS_POOL_MIN", default_value_t = 5)]
    pub ports_pool_min: u32,
    /// Pool high watermark; 0 = none.
    #[arg(long, env = "KURYR_PORTS_POOL_MAX", default_value_t = 0)]
    pub ports_pool_max: u32,
    /// Ports per bulk create.
    #[arg(long, env = "KURYR_PORTS_POOL_BATCH", default_value_t = 10)]
    pub ports_pool_batch: u32,
    /// Address of /livez, /readyz and /metrics.
    #[arg(long, env = "KURYR_METRICS_ADDR", default_value = "0.0.0.0:8082")]
    pub metrics_addr: SocketAddr,
}

impl Args {
    pub fn config(&self) -> anyhow::Result<Config> {
        let mut c = Config::new(&self.cluster_id, &self.pod_subnet);
        c.vif_type = self.vif_driver.into();
        c.driver.link_iface = self.link_iface.clone();
        c.pod_security_groups = self.pod_security_groups.clone();
        c.project_id = self.project_id.clone();
        c.namespace = self.namespace.clone();
        c.vlan_range = VlanRange::new(self.vlan_first, self.vlan_last)?;
        c.pool_limits = PoolLimits::new(self.ports_pool_min, self.ports_pool_max, self.ports_pool_batch)?;
        Ok(c)
    }

    fn cloud_config(&self) -> ClientConfig {
        match (&self.os_cloud, &self.clouds_yaml) {
            (None, None) => ClientConfig::new(AuthSource::Env),
            (cloud, file) => {
                ClientConfig::clouds_yaml(file.clone(), cloud.clone().unwrap_or_else(|| "kuryr".into()))
            }
        }
    }

    async fn kube_client(&self) -> anyhow::Result<kube::Client> {
        let config = match &self.kubeconfig {
            Some(path) => {
                let kc =
                    Kubeconfig::read_from(path).with_context(|| format!("reading {}", path.display()))?;
                kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default()).await?
            }
            None => kube::Config::infer().await?,
        };
        Ok(kube::Client::try_from(config)?)
    }

    /// Parses the command line, logs, connects to Kubernetes and OpenStack, serves the admin port and runs
    /// the controllers until SIGINT or SIGTERM.
    pub async fn parse_and_run() -> anyhow::Result<()> {
        Self::parse().run().await
    }

    pub async fn run(self) -> anyhow::Result<()> {
        tracing_subscriber::fmt()
            .with_env_filter(
                tracing_subscriber::EnvFilter::try_from_default_env()
                    .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
            )
            .init();
        let config = self.config()?;
        let mut registry = Registry::default();
        let metrics = Metrics::register(&mut registry);
        let client = self.kube_client().await.context("connecting to Kubernetes")?;
        let cloud = Cloud::connect_with_observer(self.cloud_config(), Some(metrics.call_observer()))
            .await
            .context("connecting to OpenStack")?;
        let features = cloud.neutron_features().await?;
        if let Err(e) = features.require("kuryr-controller", "trunk") {
            anyhow::bail!("{e}");
        }
        let rt = Runtime {
            client,
            cloud,
            config,
            metrics,
            ready: Arc::default(),
        };
        let state = AdminState {
            registry: Arc::new(registry),
            ready: rt.ready.clone(),
        };
        let admin = tokio::spawn(admin::serve(self.metrics_addr, state, shutdown_signal()));
        let result = runtime::run(rt, shutdown_signal()).await;
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
