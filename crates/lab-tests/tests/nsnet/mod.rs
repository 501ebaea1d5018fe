//! What the namespace-network tests share: the lab connection and a namespace-mode controller run in
//! process, bounds, waiting for a namespace to go, the tag scan of what a run left, and the cleanup after a
//! failure.

#![allow(dead_code)]

use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use kuryr_api::{Api, Client, KuryrNetwork, KuryrPort, Namespace, Patch, PatchParams, Pod};
use kuryr_controller::networks::{NetworksConfig, SubnetMode};
use kuryr_controller::runtime::{run, Runtime};
use kuryr_controller::Config;
use kuryr_openstack::neutron::{networks, ports, subnetpools, subnets, Filter};
use kuryr_openstack::{ClientConfig, Cloud, Owner};
use lab_tests::{cluster, Lab};
use serde_json::json;

pub const CRD_MANAGER: &str = "kuryr-crd-test";
/// A generous bound (the lab's Neutron is slow on a loaded 2-core machine); nothing asserts speed.
pub const WAIT: Duration = Duration::from_secs(300);

/// The lab's Kubernetes (our CRDs installed) and cloud, and a random id for this run's names.
pub async fn connect(lab: &Lab) -> anyhow::Result<(Client, Cloud, String)> {
    let client = lab.kube_client().await?;
    lab_tests::kube::install_crds(&client, CRD_MANAGER).await?;
    let cfg = ClientConfig::clouds_yaml(Some(lab.clouds_yaml.clone()), lab.cloud.clone());
    let cloud = Cloud::connect(cfg).await.context("login to the lab cloud")?;
    Ok((client, cloud, format!("{:06x}", fastrand::u32(..0x100_0000))))
}

/// A controller config in namespace-subnet mode: /28s from a random /24 of the pod range's upper half.
pub fn namespace_mode(lab: &Lab, cluster_id: &str) -> Config {
    let mut config = Config::new(cluster_id, &lab.pod_subnet_id);
    config.project_id = Some(lab.project_id.clone());
    config.networks = NetworksConfig {
        mode: SubnetMode::Namespace,
        pool_prefixes: vec![format!("198.18.{}.0/24", 128 + fastrand::u8(..128))],
        prefixlen: 28,
        ..NetworksConfig::default()
    };
    config
}

/// kuryr-controller running in this process until [`Controller::stop`].
pub struct Controller {
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<anyhow::Result<()>>,
}

impl Controller {
    pub fn start(client: &Client, cloud: &Cloud, config: Config) -> Controller {
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(run(Runtime::new(client.clone(), cloud.clone(), config), async {
            let _ = stopped.await;
        }));
        Controller { stop, task }
    }

    /// Asks it to stop and waits for that, at most 30 s.
    pub async fn stop(self) {
        let _ = self.stop.send(());
        let _ = tokio::time::timeout(Duration::from_secs(30), self.task).await;
    }
}

pub async fn wait_gone(namespaces: &Api<Namespace>, ns: &str) -> anyhow::Result<()> {
    let deadline = Instant::now() + WAIT;
    while namespaces.get_opt(ns).await?.is_some() {
        if Instant::now() > deadline {
            bail!("namespace {ns} still there after {WAIT:?}");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Ok(())
}

pub async fn leftovers(cloud: &Cloud, cluster_id: &str) -> anyhow::Result<Vec<String>> {
    let tags = Owner::cluster_filter(cluster_id);
    let mut left: Vec<String> = ports::list(cloud, Filter::new().tags(&tags))
        .await?
        .into_iter()
        .map(|p| format!("port {}", p.id))
        .collect();
    left.extend(
        subnets::list(cloud, Filter::new().tags(&tags))
            .await?
            .into_iter()
            .map(|s| format!("subnet {}", s.id)),
    );
    left.extend(
        networks::list(cloud, Filter::new().tags(&tags))
            .await?
            .into_iter()
            .map(|n| format!("network {}", n.id)),
    );
    Ok(left)
}

/// After a failure: let the namespace go (what is left shows in the tag scan).
pub async fn strip_finalizers(client: &Client, ns: &str) {
    cluster::strip_finalizers(&Api::<KuryrPort>::namespaced(client.clone(), ns)).await;
    cluster::strip_finalizers(&Api::<Pod>::namespaced(client.clone(), ns)).await;
    let strip = json!({"metadata": {"finalizers": null}});
    let _ = Api::<KuryrNetwork>::namespaced(client.clone(), ns)
        .patch(ns, &PatchParams::default(), &Patch::Merge(&strip))
        .await;
}

pub async fn delete_subnetpools(cloud: &Cloud, cluster_id: &str) -> anyhow::Result<()> {
    for p in subnetpools::list(cloud, Filter::new().tags(&Owner::cluster_filter(cluster_id))).await? {
        subnetpools::delete(cloud, &p.id).await?;
    }
    Ok(())
}
