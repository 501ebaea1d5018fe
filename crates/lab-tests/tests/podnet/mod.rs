//! What the pod networking tests share: a cloud (an in-process cloudsim shaped like the lab, or the lab's
//! real Neutron), a namespace + cluster id of their own, a kuryr-controller scoped to both (in-process, or
//! the real binary as a child process), pod bursts and the checks every test makes.
//!
//! Pods are created with `spec.nodeName` set to the lab VMs; they need no kubelet (whether or not one runs,
//! the KuryrPort is made as soon as the pod is scheduled) and are deleted with grace period 0.

// Each test binary uses part of this module.
#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context as _};
use futures::future::try_join_all;
use futures::StreamExt;
use kuryr_api::{Api, Client, DeleteParams, KuryrPort, ListParams, Pod, PostParams, ResourceExt, Vif};
use kuryr_cloudsim::{Profile, Sim, SimHandle};
use kuryr_controller::runtime::{run, Runtime};
use kuryr_controller::Config;
use kuryr_openstack::neutron::ports::{self, CreatePort, FixedIpRequest};
use kuryr_openstack::neutron::subnets::{self, CreateSubnet};
use kuryr_openstack::neutron::trunks::{self, CreateTrunk};
use kuryr_openstack::neutron::{networks, Filter};
use kuryr_openstack::{ClientConfig, Cloud, Owner};
use lab_tests::{cluster, Lab};

/// Generous upper bounds for waits; assertions are about what happens, not how fast. The lab's real
/// Neutron on a loaded 2-core machine took over 150 s to bring the last subports of a 50-pod burst ACTIVE
/// (as pods_controller.rs found); after chaos_burst's three kills, on an idle lab, the last pod was wired
/// 400 s after the kills (2026-11-27): Neutron's OVN event queue (docs/pod-networking.md).
pub const WIRE_TIMEOUT: Duration = Duration::from_secs(600);
pub const GONE_TIMEOUT: Duration = Duration::from_secs(420);

/// The cloud a test runs against.
pub struct TestCloud {
    pub cloud: Cloud,
    pub subnet_id: String,
    pub network_id: String,
    /// Project owning the ports (`None`: the token's).
    pub project_id: Option<String>,
    /// node name -> trunk id
    pub trunks: BTreeMap<String, String>,
    /// node name -> VM (parent) port id
    pub vm_ports: BTreeMap<String, String>,
    /// clouds.yaml + cloud name for a controller binary.
    pub clouds_yaml: PathBuf,
    pub cloud_name: String,
    /// The in-process cloudsim, when that is the cloud.
    pub sim: Option<SimHandle>,
    _dir: Option<TempDir>,
}

/// A directory removed on drop.
pub struct TempDir(pub PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub fn temp_dir(prefix: &str) -> anyhow::Result<TempDir> {
    let dir = std::env::temp_dir().join(format!("{prefix}-{}-{}", std::process::id(), fastrand::u64(..)));
    std::fs::create_dir_all(&dir)?;
    Ok(TempDir(dir))
}

impl TestCloud {
    /// The lab's Keystone + Neutron (ML2/OVN) and the lab VMs' real trunks.
    pub async fn lab(lab: &Lab) -> anyhow::Result<TestCloud> {
        let cfg = ClientConfig::clouds_yaml(Some(lab.clouds_yaml.clone()), lab.cloud.clone());
        let cloud = Cloud::connect(cfg).await.context("login to the lab cloud")?;
        Ok(TestCloud {
            cloud,
            subnet_id: lab.pod_subnet_id.clone(),
            network_id: lab.pod_network_id.clone(),
            project_id: Some(lab.project_id.clone()),
            trunks: lab
                .vms
                .iter()
                .map(|vm| (vm.name.clone(), vm.trunk_id.clone()))
                .collect(),
            vm_ports: lab
                .vms
                .iter()
                .map(|vm| (vm.name.clone(), vm.port_id.clone()))
                .collect(),
            clouds_yaml: lab.clouds_yaml.clone(),
            cloud_name: lab.cloud.clone(),
            sim: None,
            _dir: None,
        })
    }

    /// An in-process cloudsim with the lab's pod network and, per lab VM, a bound parent port carrying the
    /// VM's IP (= its Node's InternalIP) and a trunk on it. `tweak` adjusts the profile.
    pub async fn cloudsim(lab: &Lab, tweak: impl FnOnce(&mut Profile)) -> anyhow::Result<TestCloud> {
        let mut profile = Profile::zero();
        // Subports go ACTIVE a little later, as on ML2/OVN (measured 0.05-1.3 s; scaled down here).
        profile.neutron.subport_active_delay =
            serde_json::from_value(serde_json::json!({"uniform": {"min": 20, "max": 200}}))?;
        tweak(&mut profile);
        let (_, handle) = Sim::new(profile).spawn_on("127.0.0.1:0").await?;
        let dir = temp_dir("kuryr-podnet")?;
        let yaml = dir.0.join("clouds.yaml");
        std::fs::write(&yaml, handle.clouds_yaml("sim"))?;
        // The controller and daemon binaries refuse credentials others can read.
        std::fs::set_permissions(&yaml, std::os::unix::fs::PermissionsExt::from_mode(0o600))?;
        let cloud = Cloud::connect(ClientConfig::clouds_yaml(Some(yaml.clone()), "sim")).await?;
        let net = networks::create(&cloud, &networks::CreateNetwork::named("kuryr-pods"), &[]).await?;
        let mut sub = CreateSubnet::v4(&net.id, lab.pod_subnet_cidr.clone());
        sub.gateway_ip = Some(Some("198.18.0.1".into()));
        let subnet = subnets::create(&cloud, &sub, &[]).await?;
        let mut trunks_by_node = BTreeMap::new();
        let mut vm_ports = BTreeMap::new();
        for vm in &lab.vms {
            let (port, trunk) = sim_vm(&cloud, &net.id, &subnet.id, &vm.name, &vm.ip, true).await?;
            vm_ports.insert(vm.name.clone(), port);
            trunks_by_node.insert(vm.name.clone(), trunk.unwrap_or_default());
        }
        Ok(TestCloud {
            cloud,
            subnet_id: subnet.id,
            network_id: net.id,
            project_id: None,
            trunks: trunks_by_node,
            vm_ports,
            clouds_yaml: yaml,
            cloud_name: "sim".into(),
            sim: Some(handle),
            _dir: Some(dir),
        })
    }

    pub fn sim(&self) -> &SimHandle {
        self.sim.as_ref().expect("a cloudsim test")
    }

    /// Calls of `op` in cloudsim's log.
    pub fn count(&self, op: &str) -> usize {
        self.sim().calls_matching(op).len()
    }

    /// The ports carrying this cluster's ownership tags.
    pub async fn tagged(&self, cluster_id: &str) -> anyhow::Result<Vec<ports::Port>> {
        Ok(ports::list(
            &self.cloud,
            Filter::new().tags(&Owner::cluster_filter(cluster_id)),
        )
        .await?)
    }

    /// Detaches and deletes every port of this cluster (the end of every test: pool ports outlive pods).
    pub async fn delete_tagged(&self, cluster_id: &str) -> anyhow::Result<usize> {
        let tagged = self.tagged(cluster_id).await?;
        if tagged.is_empty() {
            return Ok(0);
        }
        // ML2/OVN leaves a subport's device_id empty: find its trunk by listing.
        for trunk in trunks::list(&self.cloud, Filter::new()).await? {
            let ids: Vec<String> = trunk
                .sub_ports
                .iter()
                .filter(|s| tagged.iter().any(|p| p.id == s.port_id))
                .map(|s| s.port_id.clone())
                .collect();
            if !ids.is_empty() {
                trunks::remove_subports(&self.cloud, &trunk.id, &ids).await?;
            }
        }
        futures::stream::iter(tagged.iter().map(|p| ports::delete(&self.cloud, &p.id)))
            .buffer_unordered(8)
            .collect::<Vec<_>>()
            .await
            .into_iter()
            .collect::<Result<Vec<_>, _>>()?;
        Ok(tagged.len())
    }
}

/// On cloudsim: a VM port with `ip` bound to a hypervisor, and (with `trunk`) a trunk on it.
pub async fn sim_vm(
    cloud: &Cloud,
    net: &str,
    subnet: &str,
    name: &str,
    ip: &str,
    trunk: bool,
) -> anyhow::Result<(String, Option<String>)> {
    let port = ports::create(
        cloud,
        &CreatePort {
            name: Some(name.to_owned()),
            fixed_ips: vec![FixedIpRequest {
                subnet_id: Some(subnet.to_owned()),
                ip_address: Some(ip.to_owned()),
            }],
            device_owner: Some("compute:nova".into()),
            binding_host_id: Some("lab-hv1".into()),
            ..CreatePort::on_network(net)
        },
    )
    .await?;
    if !trunk {
        return Ok((port.id, None));
    }
    let t = trunks::create(
        cloud,
        &CreateTrunk {
            port_id: port.id.clone(),
            name: Some(format!("{name}-trunk")),
            ..CreateTrunk::default()
        },
        &[],
    )
    .await?;
    Ok((port.id, Some(t.id)))
}

/// A namespace and a cluster id of the test's own.
pub struct Scope {
    pub client: Client,
    pub ns: String,
    pub cluster_id: String,
}

impl Scope {
    pub async fn new(lab: &Lab, kind: &str) -> anyhow::Result<Scope> {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(
                tracing_subscriber::EnvFilter::try_from_default_env()
                    .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("kuryr_controller=warn")),
            )
            .with_test_writer()
            .try_init();
        let client = lab.kube_client().await?;
        cluster::install_crds(&client).await?;
        let run_id = format!("{:08x}", fastrand::u32(..));
        let ns = format!("{kind}-{run_id}");
        let cluster_id = format!("t-{kind}-{run_id}");
        cluster::create_namespace(&client, &ns).await?;
        Ok(Scope {
            client,
            ns,
            cluster_id,
        })
    }

    pub fn pods(&self) -> Api<Pod> {
        Api::namespaced(self.client.clone(), &self.ns)
    }

    pub fn kps(&self) -> Api<KuryrPort> {
        Api::namespaced(self.client.clone(), &self.ns)
    }

    /// Controller settings for this scope on `cloud`.
    pub fn config(&self, cloud: &TestCloud) -> Config {
        let mut config = Config::new(&self.cluster_id, &cloud.subnet_id);
        config.namespace = Some(self.ns.clone());
        config.project_id = cloud.project_id.clone();
        config
    }

    /// Strips finalizers of whatever is left, deletes the namespace.
    pub async fn close(&self) {
        cluster::strip_and_delete_all(&self.client, &self.ns).await;
        cluster::delete_namespace(&self.client, &self.ns).await;
    }
}

/// kuryr-controller running in this process until stopped.
pub struct InProcess {
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<anyhow::Result<()>>,
}

impl InProcess {
    pub fn start(scope: &Scope, cloud: &TestCloud, config: Config) -> InProcess {
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let rt = Runtime::new(scope.client.clone(), cloud.cloud.clone(), config);
        let task = tokio::spawn(run(rt, async {
            let _ = stopped.await;
        }));
        InProcess { stop, task }
    }

    /// Graceful stop (in-flight reconciles finish).
    pub async fn stop(self) -> anyhow::Result<()> {
        let _ = self.stop.send(());
        match tokio::time::timeout(Duration::from_secs(30), self.task).await {
            Ok(Ok(r)) => r,
            Ok(Err(e)) => bail!("controller task panicked: {e}"),
            Err(_) => bail!("controller did not stop within 30 s"),
        }
    }
}

pub fn grace0() -> DeleteParams {
    DeleteParams {
        grace_period_seconds: Some(0),
        ..DeleteParams::default()
    }
}

/// `n` pods named `{prefix}{i}`, round-robin over `nodes`, created 10 at a time (a burst). Returns
/// name -> (node, creation instant).
pub async fn create_pods(
    scope: &Scope,
    prefix: &str,
    n: usize,
    nodes: &[String],
) -> anyhow::Result<BTreeMap<String, (String, Instant)>> {
    let pods = scope.pods();
    let wanted: Vec<(String, String)> = (0..n)
        .map(|i| (format!("{prefix}{i}"), nodes[i % nodes.len()].clone()))
        .collect();
    let mut out = BTreeMap::new();
    for chunk in wanted.chunks(10) {
        let made = try_join_all(chunk.iter().map(|(name, node)| {
            let pods = pods.clone();
            async move {
                pods.create(&PostParams::default(), &cluster::scheduled_pod(name, node))
                    .await?;
                anyhow::Ok((name.clone(), (node.clone(), Instant::now())))
            }
        }))
        .await?;
        out.extend(made);
    }
    Ok(out)
}

pub use lab_tests::cluster::is_ready;

pub fn eth0(kp: &KuryrPort) -> anyhow::Result<Vif> {
    let status = kp.status.as_ref().context("status")?;
    Ok(status.vifs.get("eth0").context("eth0")?.vif.clone())
}

/// Waits until every named KuryrPort is Ready; returns them and prints create -> Ready times.
pub async fn wait_ready(
    scope: &Scope,
    created: &BTreeMap<String, (String, Instant)>,
    label: &str,
) -> anyhow::Result<BTreeMap<String, KuryrPort>> {
    let kps = scope.kps();
    let mut wired = BTreeMap::new();
    let mut took = Vec::new();
    let deadline = Instant::now() + WIRE_TIMEOUT;
    while wired.len() < created.len() {
        for kp in kps.list(&ListParams::default()).await? {
            let name = kp.name_any();
            if wired.contains_key(&name) || !is_ready(&kp) {
                continue;
            }
            if let Some((_, t0)) = created.get(&name) {
                took.push(t0.elapsed());
                wired.insert(name, kp);
            }
        }
        if Instant::now() > deadline {
            let missing: Vec<_> = created.keys().filter(|n| !wired.contains_key(*n)).collect();
            bail!("not wired within {WIRE_TIMEOUT:?}: {missing:?}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    took.sort();
    let ms: Vec<u128> = took.iter().map(Duration::as_millis).collect();
    eprintln!(
        "[{label}] {} pods wired; pod create -> KuryrPort Ready, ms: min {} median {} p90 {} max {}",
        ms.len(),
        ms.first().copied().unwrap_or_default(),
        ms.get(ms.len() / 2).copied().unwrap_or_default(),
        ms.get(ms.len() * 9 / 10).copied().unwrap_or_default(),
        ms.last().copied().unwrap_or_default(),
    );
    Ok(wired)
}

/// Every wired pod has one ACTIVE nested-vlan VIF with MAC, IP+CIDR+gateway, MTU; its port is a subport of
/// its node's trunk on the VLAN the status names; VLANs are unique per trunk and ports unique overall.
/// Returns the port ids.
pub async fn check_wired(
    cloud: &TestCloud,
    created: &BTreeMap<String, (String, Instant)>,
    wired: &BTreeMap<String, KuryrPort>,
) -> anyhow::Result<BTreeSet<String>> {
    let mut vlans: BTreeMap<String, BTreeSet<u16>> = BTreeMap::new();
    let mut port_ids = BTreeSet::new();
    let mut trunk_cache = BTreeMap::new();
    for trunk in cloud.trunks.values() {
        trunk_cache.insert(trunk.clone(), trunks::get(&cloud.cloud, trunk).await?);
    }
    for (name, kp) in wired {
        let (node, _) = &created[name];
        let st = kp.status.as_ref().context("status")?;
        ensure!(st.vifs.len() == 1, "{name}: {} VIFs", st.vifs.len());
        let vif = eth0(kp)?;
        ensure!(vif.active, "{name}: not active");
        ensure!(!vif.mac.is_empty() && vif.mtu.is_some(), "{name}: MAC / MTU");
        let ip = vif.ips.first().context("IP")?;
        ensure!(
            !ip.address.is_empty() && !ip.cidr.is_empty() && ip.gateway.is_some(),
            "{name}: IP/CIDR/gateway {ip:?}"
        );
        let trunk = vif.trunk_id.clone().context("trunkId")?;
        ensure!(
            trunk == cloud.trunks[node],
            "{name}: trunk {trunk} is not {node}'s"
        );
        let vlan = vif.vlan_id.context("vlanId")?;
        ensure!(
            vlans.entry(trunk.clone()).or_default().insert(vlan),
            "{name}: VLAN {vlan} used twice on trunk {trunk}"
        );
        ensure!(
            port_ids.insert(vif.port_id.clone()),
            "{name}: port {} used twice",
            vif.port_id
        );
        let on_trunk = trunk_cache[&trunk]
            .sub_ports
            .iter()
            .any(|s| s.port_id == vif.port_id && s.segmentation_id == u32::from(vlan));
        ensure!(
            on_trunk,
            "{name}: port {} not a subport of {trunk} on VLAN {vlan}",
            vif.port_id
        );
    }
    Ok(port_ids)
}

/// Deletes the pods and waits until they and their KuryrPorts are gone.
pub async fn delete_pods(scope: &Scope, names: impl IntoIterator<Item = &String>) -> anyhow::Result<()> {
    let pods = scope.pods();
    for name in names {
        pods.delete(name, &grace0()).await?;
    }
    wait_empty(scope).await
}

pub async fn wait_empty(scope: &Scope) -> anyhow::Result<()> {
    let (pods, kps) = (scope.pods(), scope.kps());
    let deadline = Instant::now() + GONE_TIMEOUT;
    loop {
        let left_pods = pods.list(&ListParams::default()).await?.items.len();
        let left_kps = kps.list(&ListParams::default()).await?.items.len();
        if left_pods == 0 && left_kps == 0 {
            return Ok(());
        }
        ensure!(
            Instant::now() < deadline,
            "after {GONE_TIMEOUT:?}: {left_pods} pods and {left_kps} KuryrPorts left"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// After every pod is gone: no port tagged for a pod is left, and every pool port is a subport of one of
/// the trunks (reusable, not leaked). Polls while a refill may still be attaching its batch. Returns how
/// many pool ports there are.
pub async fn check_no_leak(cloud: &TestCloud, cluster_id: &str) -> anyhow::Result<usize> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let tagged = cloud.tagged(cluster_id).await?;
        let mut attached = BTreeSet::new();
        for trunk in cloud.trunks.values() {
            let t = trunks::get(&cloud.cloud, trunk).await?;
            attached.extend(t.sub_ports.into_iter().map(|s| s.port_id));
        }
        let pod_ports: Vec<&str> = tagged
            .iter()
            .filter(|p| Owner::from_tags(&p.tags).is_some_and(|o| o.kind != "pool"))
            .map(|p| p.id.as_str())
            .collect();
        let loose: Vec<&str> = tagged
            .iter()
            .filter(|p| !attached.contains(&p.id))
            .map(|p| p.id.as_str())
            .collect();
        if pod_ports.is_empty() && loose.is_empty() {
            return Ok(tagged.len());
        }
        ensure!(
            Instant::now() < deadline,
            "leaked: pod ports {pod_ports:?}, pool ports attached nowhere {loose:?}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}
