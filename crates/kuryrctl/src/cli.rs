//! Command line.

use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};

use crate::output::Format;

#[derive(Debug, Parser)]
#[command(
    name = "kuryrctl",
    version = kuryr_version::VERSION,
    about = "Operate kuryr-rs: preflight, status, pools, gc"
)]
pub struct Cli {
    /// kubeconfig file; default: in-cluster config, else $KUBECONFIG / ~/.kube/config.
    #[arg(long, global = true)]
    pub kubeconfig: Option<PathBuf>,
    /// Cloud name in clouds.yaml; without it and --clouds-yaml the OS_* variables are used.
    #[arg(long, env = "OS_CLOUD", global = true)]
    pub os_cloud: Option<String>,
    #[arg(long, env = "OS_CLIENT_CONFIG_FILE", global = true)]
    pub clouds_yaml: Option<PathBuf>,
    /// The cluster id the controller tags with (kuryr.cluster=<id>).
    #[arg(long, env = "KURYR_CLUSTER_ID", global = true, default_value = "kuryr")]
    pub cluster_id: String,
    /// Project to look at; default: the token's project.
    #[arg(long, env = "KURYR_PROJECT_ID", global = true)]
    pub project_id: Option<String>,
    #[arg(short = 'o', long, value_enum, default_value = "table", global = true)]
    pub output: OutputArg,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum OutputArg {
    Table,
    Json,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Check a cloud (and cluster) before installing: extensions, Octavia, firewall, quotas vs needs.
    Preflight(Box<PreflightArgs>),
    /// Pods, Services, namespaces and policies with their cloud objects; drift marked.
    Status(StatusArgs),
    /// Pool sizes per trunk and network, from tagged ports.
    Pools,
    /// What the garbage collector would delete.
    Gc(GcArgs),
    /// Make what upstream kuryr-kubernetes left adoptable (trunk ids in KuryrPort status, ownership tags).
    Migrate(MigrateArgs),
}

#[derive(Debug, Clone, clap::Args)]
pub struct MigrateArgs {
    /// Only this namespace.
    #[arg(short, long)]
    pub namespace: Option<String>,
    /// Change things; without it, only list what would change.
    #[arg(long)]
    pub apply: bool,
}

#[derive(Debug, Clone, clap::Args)]
pub struct PreflightArgs {
    /// Planned cluster size, where the cluster does not exist yet (else counted from Kubernetes).
    #[arg(long)]
    pub nodes: Option<u64>,
    #[arg(long)]
    pub namespaces: Option<u64>,
    #[arg(long)]
    pub services: Option<u64>,
    #[arg(long)]
    pub policies: Option<u64>,
    #[arg(long)]
    pub pods: Option<u64>,
    /// Do not read Kubernetes at all (counts from the flags above, 0 when absent).
    #[arg(long)]
    pub no_kubernetes: bool,
    /// Ports a node's pool holds (ports-pool-batch of the controller).
    #[arg(long, default_value_t = 10)]
    pub pool_batch: u64,
    /// The controller's settings file (its `--config`): `vif_driver`, `pod_subnet`, `service_subnet` and
    /// `external_network` are read from it where the options below are not given.
    #[arg(long, env = "KURYR_CONFIG")]
    pub config: Option<PathBuf>,
    /// How pods will be wired (the controller's option; default nested-vlan): nested-vlan needs every
    /// Node's port to be a trunk parent, nested-macvlan a Neutron port, neutron-vif nothing of the VMs.
    #[arg(long, env = "KURYR_VIF_DRIVER", value_enum)]
    pub vif_driver: Option<VifDriverArg>,
    /// Subnet of pod ports (the controller's option): checked to exist.
    #[arg(long, env = "KURYR_POD_SUBNET")]
    pub pod_subnet: Option<String>,
    /// Subnet of Service VIPs (the controller's option): checked to exist.
    #[arg(long, env = "KURYR_SERVICE_SUBNET")]
    pub service_subnet: Option<String>,
    /// Dual-stack (the controller's option): checked to be on the pod subnet's network, of the other family.
    #[arg(long, env = "KURYR_SECONDARY_POD_SUBNET")]
    pub secondary_pod_subnet: Option<String>,
    /// Dual-stack Services (the controller's option): checked to be on the service subnet's network, of the
    /// other family, and Octavia to have additional VIPs (API 2.26).
    #[arg(long, env = "KURYR_SECONDARY_SERVICE_SUBNET")]
    pub secondary_service_subnet: Option<String>,
    /// Network of LoadBalancer Services' floating IPs (the controller's option): checked to exist and be
    /// external.
    #[arg(long, env = "KURYR_EXTERNAL_NETWORK")]
    pub external_network: Option<String>,
    /// Projects Namespaces may be put in (the controller's option, comma separated): each one's Neutron
    /// quotas are checked against the pods, namespaces and policies of the Namespaces annotated with it.
    #[arg(long, env = "KURYR_NAMESPACE_PROJECTS", value_delimiter = ',')]
    pub namespace_projects: Vec<String>,
    /// Subnets pods' extra interfaces may be on (the controller's option, comma separated): each checked to
    /// exist.
    #[arg(long, env = "KURYR_ADDITIONAL_SUBNETS", value_delimiter = ',')]
    pub additional_subnets: Vec<String>,
}

/// The controller's `--vif-driver` values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum VifDriverArg {
    NestedVlan,
    NestedMacvlan,
    NeutronVif,
}

impl From<VifDriverArg> for kuryr_api::VifType {
    fn from(v: VifDriverArg) -> Self {
        match v {
            VifDriverArg::NestedVlan => Self::NestedVlan,
            VifDriverArg::NestedMacvlan => Self::NestedMacvlan,
            VifDriverArg::NeutronVif => Self::NeutronVif,
        }
    }
}

#[derive(Debug, Clone, clap::Args)]
pub struct StatusArgs {
    /// Only this namespace.
    #[arg(short, long)]
    pub namespace: Option<String>,
    /// Only rows with drift.
    #[arg(long)]
    pub drift_only: bool,
}

#[derive(Debug, Clone, clap::Args)]
pub struct GcArgs {
    /// Accepted, and changes nothing: `gc` only ever lists (deleting is the controller's, after a
    /// confirming sweep); scripts written when this flag was required keep working.
    #[arg(long, hide = true)]
    pub dry_run: bool,
    /// Orphans younger than this are reported as suspects, not for collection.
    #[arg(long, default_value_t = 600)]
    pub grace_seconds: u64,
}

impl Cli {
    pub fn parse_args() -> Self {
        Self::parse()
    }

    pub fn format(&self) -> Format {
        match self.output {
            OutputArg::Table => Format::Table,
            OutputArg::Json => Format::Json,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gc_lists_without_a_flag_and_still_takes_the_dry_run_flag_it_once_required() {
        for argv in [&["kuryrctl", "gc"][..], &["kuryrctl", "gc", "--dry-run"]] {
            let cli = Cli::try_parse_from(argv).unwrap();
            assert!(matches!(cli.command, Command::Gc(_)), "{argv:?}");
        }
    }
}
