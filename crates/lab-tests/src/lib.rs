//! Where the running lab is and what it bootstrapped, read from `$KURYR_LAB_STATE/lab.json` (written by
//! `lab/lab up`). Tests in this crate talk to those real servers; without a lab they fail and say how to start
//! one, never skip.

pub mod cloud;
pub mod cluster;
pub mod kube;
pub mod netns;
pub mod nodes;
pub mod ovn;

use std::path::{Path, PathBuf};

use serde::Deserialize;

/// One worker "VM": a network namespace whose eth0 is plugged into OVN as the VM's Neutron parent port.
#[derive(Debug, Clone, Deserialize)]
pub struct LabVm {
    /// Kubernetes Node name and Neutron port name.
    pub name: String,
    /// Network namespace holding the VM's NIC (`eth0`).
    pub netns: String,
    pub port_id: String,
    pub mac: String,
    pub ip: String,
    pub trunk_id: String,
}

/// The lab as `lab/lab up` left it.
#[derive(Debug, Clone, Deserialize)]
pub struct Lab {
    pub state_dir: PathBuf,
    pub kubeconfig: PathBuf,
    /// clouds.yaml with the clouds `kuryr-lab` (password), `kuryr-lab-appcred` (application credential),
    /// `kuryr-lab-short-token` (password, short-lived tokens) and `kuryr-lab-noauth` (no Keystone).
    pub clouds_yaml: PathBuf,
    pub cloud: String,
    /// `keystone` or `noauth`.
    pub auth: String,
    pub keystone_url: Option<String>,
    /// A second Keystone API whose tokens expire after `short_token_expiration_s` (cloud `kuryr-lab-short-token`).
    pub keystone_short_token_url: Option<String>,
    pub short_token_expiration_s: u64,
    pub neutron_url: String,
    pub octavia_url: String,
    pub project_id: String,
    /// A second project the lab's credentials may make resources in (a project per namespace).
    #[serde(default)]
    pub tenant_project_id: Option<String>,
    pub region: String,
    pub chassis: String,
    pub service_cluster_ip_range: String,
    pub pod_network_id: String,
    pub pod_subnet_id: String,
    pub pod_subnet_cidr: String,
    pub service_network_id: String,
    pub service_subnet_id: String,
    pub service_subnet_cidr: String,
    /// The pod and service networks' IPv6 subnets (dual-stack; the API server's second service range).
    pub pod_subnet_v6_id: String,
    pub pod_subnet_v6_cidr: String,
    pub service_subnet_v6_id: String,
    pub service_subnet_v6_cidr: String,
    pub router_id: String,
    pub external_network_id: String,
    pub external_subnet_id: String,
    /// Octavia providers enabled in the lab (`ovn`, `amphora`).
    pub octavia_providers: Vec<String>,
    pub vms: Vec<LabVm>,
    /// The API server as pods reach it (lab/lib/bootstrap.sh).
    pub apiserver: LabApiServer,
}

/// The API server on the pod network: it listens on 127.0.0.1 and advertises `ip` (a Neutron port in netns
/// `netns`, relayed to loopback), the `default/kubernetes` endpoint; `service_ip` is that Service's clusterIP.
#[derive(Debug, Clone, Deserialize)]
pub struct LabApiServer {
    pub ip: String,
    pub port: u16,
    pub port_id: String,
    pub netns: String,
    pub service_ip: String,
}

/// The cluster DNS (lab/lib/dns.sh): CoreDNS at `ip` in netns `netns`, behind Service kube-system/kube-dns at
/// `service_ip`, for names under `domain`.
#[derive(Debug, Clone, Deserialize)]
pub struct LabDns {
    pub ip: String,
    pub netns: String,
    pub service_ip: String,
    pub domain: String,
}

/// Logs of the controllers a test runs in-process (`kuryr_controller=info`, or `RUST_LOG`), to the test's
/// output. Once per process; later calls do nothing.
pub fn trace_controllers() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("kuryr_controller=info")),
        )
        .with_test_writer()
        .try_init();
}

impl Lab {
    /// The state directory: `$KURYR_LAB_STATE`, else the lab's default.
    pub fn state_dir() -> PathBuf {
        std::env::var_os("KURYR_LAB_STATE")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("/var/lib/kuryr-lab"))
    }

    /// Loads the running lab's description.
    pub fn load() -> anyhow::Result<Lab> {
        Self::load_from(&Self::state_dir())
    }

    pub fn load_from(dir: &Path) -> anyhow::Result<Lab> {
        read_state(
            &dir.join("lab.json"),
            "no running lab",
            "start one with `lab/lab up` (or set KURYR_LAB_STATE)",
        )
    }

    /// The cluster DNS as `lab/lab up` started it (`dns/dns.json` in the state directory).
    pub fn dns(&self) -> anyhow::Result<LabDns> {
        read_state(
            &self.state_dir.join("dns/dns.json"),
            "the lab has no cluster DNS",
            "`lab/lab up` starts it",
        )
    }

    /// Like [`Lab::load`], for tests: panics with the reason and the command that fixes it.
    pub fn require() -> Lab {
        match Self::load() {
            Ok(lab) => lab,
            Err(e) => panic!("this test needs the lab: {e:#}"),
        }
    }
}

/// A JSON file the lab's scripts wrote; when it cannot be read, `what` and `fix` say why and what to do.
fn read_state<T: serde::de::DeserializeOwned>(path: &Path, what: &str, fix: &str) -> anyhow::Result<T> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| anyhow::anyhow!("{what} ({}: {e}); {fix}", path.display()))?;
    Ok(serde_json::from_str(&text)?)
}
