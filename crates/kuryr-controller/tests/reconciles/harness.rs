//! A controller `Context` for reconcile tests: the scripted API server (apiserver.rs) and an in-process
//! cloudsim shaped like one node VM of a cluster (pod network and subnet, the VM's port as a trunk parent,
//! the Node with that port's address), logged in through a clouds.yaml as production is.

use std::path::PathBuf;
use std::sync::Arc;

use kube::runtime::reflector::{self, store::Writer, Store};
use kube::runtime::watcher;
use kuryr_api::k8s_openapi::api::core::v1::{Node, NodeAddress, NodeStatus};
use kuryr_api::port::DEFAULT_IFNAME;
use kuryr_api::{KuryrPort, KuryrPortSpec, ObjectMeta, Vif};
use kuryr_cloudsim::{Profile, Sim, SimHandle};
use kuryr_controller::metrics::Metrics;
use kuryr_controller::ports::cached::CachedKp;
use kuryr_controller::{Config, Context};
use kuryr_openstack::neutron::networks;
use kuryr_openstack::neutron::ports::{self, CreatePort};
use kuryr_openstack::neutron::subnets::{self, CreateSubnet};
use kuryr_openstack::neutron::trunks::{self, CreateTrunk};
use kuryr_openstack::{ClientConfig, Cloud};

use crate::apiserver::{self, ApiServer};

pub const NODE: &str = "worker-1";
pub const NS: &str = "app";

/// The cloud: cloudsim (instant, no faults) with one node VM.
pub struct TestCloud {
    pub sim: SimHandle,
    pub cloud: Cloud,
    pub project_id: String,
    pub network_id: String,
    pub subnet_id: String,
    pub trunk_id: String,
    pub vm_port_id: String,
    pub vm_ip: String,
    _dir: TempDir,
}

struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

impl TestCloud {
    pub async fn start() -> Self {
        let (_, sim) = Sim::new(Profile::zero()).spawn_on("127.0.0.1:0").await.unwrap();
        let dir = std::env::temp_dir().join(format!(
            "kuryr-reconciles-{}-{}",
            std::process::id(),
            fastrand::u64(..)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let yaml = dir.join("clouds.yaml");
        std::fs::write(&yaml, sim.clouds_yaml("sim")).unwrap();
        let cloud = Cloud::connect(ClientConfig::clouds_yaml(Some(yaml), "sim"))
            .await
            .unwrap();
        let project_id = cloud.project_id().unwrap();
        let net = networks::create(&cloud, &networks::CreateNetwork::named("pods"), &[])
            .await
            .unwrap();
        let subnet = subnets::create(&cloud, &CreateSubnet::v4(&net.id, "10.10.0.0/16"), &[])
            .await
            .unwrap();
        // The VM's NIC: bound to its hypervisor, so it goes ACTIVE and so do its subports.
        let vm_port = ports::create(
            &cloud,
            &CreatePort {
                device_owner: Some("compute:nova".into()),
                binding_host_id: Some("hv-1".into()),
                ..CreatePort::on_subnet(&net.id, &subnet.id)
            },
        )
        .await
        .unwrap();
        let trunk = trunks::create(
            &cloud,
            &CreateTrunk {
                port_id: vm_port.id.clone(),
                ..CreateTrunk::default()
            },
            &[],
        )
        .await
        .unwrap();
        // What the tests count starts here.
        sim.clear_calls();
        Self {
            project_id,
            network_id: net.id,
            subnet_id: subnet.id,
            trunk_id: trunk.id,
            vm_ip: vm_port.ip().unwrap().to_owned(),
            vm_port_id: vm_port.id,
            sim,
            cloud,
            _dir: TempDir(dir),
        }
    }

    /// Calls of cloudsim op `op` (e.g. `neutron.ports.create`) so far.
    pub fn calls(&self, op: &str) -> usize {
        self.sim.calls().iter().filter(|c| c.op == op).count()
    }

    /// Ids of the ports on the pod network other than the VM's.
    pub async fn pod_ports(&self) -> Vec<String> {
        let all = ports::list(
            &self.cloud,
            kuryr_openstack::neutron::Filter::new().eq("network_id", &self.network_id),
        )
        .await
        .unwrap();
        all.into_iter()
            .map(|p| p.id)
            .filter(|id| *id != self.vm_port_id)
            .collect()
    }

    /// (port, VLAN) of the trunk's subports.
    pub async fn subports(&self) -> Vec<(String, u32)> {
        let t = trunks::get(&self.cloud, &self.trunk_id).await.unwrap();
        t.sub_ports
            .into_iter()
            .map(|s| (s.port_id, s.segmentation_id))
            .collect()
    }
}

/// A controller context on `cloud`, the scripted API server, and the writer of its KuryrPort cache.
pub struct Harness {
    pub ctx: Arc<Context>,
    /// Where the context's metrics are registered.
    pub registry: prometheus_client::registry::Registry,
    pub api: ApiServer,
    pub kuryrports: Writer<CachedKp>,
}

pub fn harness(cloud: &TestCloud, tweak: impl FnOnce(&mut Config)) -> Harness {
    harness_on_node(cloud, &[], tweak)
}

/// [`harness`] whose Node carries these labels (e.g. `kuryr.openstack.org/pod-vif`).
pub fn harness_on_node(
    cloud: &TestCloud,
    labels: &[(&str, &str)],
    tweak: impl FnOnce(&mut Config),
) -> Harness {
    let (client, api) = apiserver::client();
    let mut config = Config::new("reconcile-test", &cloud.subnet_id);
    config.project_id = Some(cloud.project_id.clone());
    tweak(&mut config);
    // Both caches synced, as after the watches' first list: the node, and no KuryrPort yet.
    let (nodes, mut node_writer) = reflector::store::<Node>();
    node_writer.apply_watcher_event(&watcher::Event::Init);
    node_writer.apply_watcher_event(&watcher::Event::InitApply(node(&cloud.vm_ip, labels)));
    node_writer.apply_watcher_event(&watcher::Event::InitDone);
    let (kps, mut kp_writer): (Store<CachedKp>, Writer<CachedKp>) = reflector::store();
    kp_writer.apply_watcher_event(&watcher::Event::Init);
    kp_writer.apply_watcher_event(&watcher::Event::InitDone);
    let mut registry = prometheus_client::registry::Registry::default();
    let metrics = Metrics::register(&mut registry);
    let ctx = Context::new(
        client,
        cloud.cloud.clone(),
        config,
        cloud.project_id.clone(),
        metrics,
        nodes,
        kps,
    );
    Harness {
        ctx: Arc::new(ctx),
        registry,
        api,
        kuryrports: kp_writer,
    }
}

fn node(ip: &str, labels: &[(&str, &str)]) -> Node {
    Node {
        metadata: ObjectMeta {
            name: Some(NODE.into()),
            uid: Some("node-uid".into()),
            labels: (!labels.is_empty()).then(|| {
                labels
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                    .collect()
            }),
            ..ObjectMeta::default()
        },
        status: Some(NodeStatus {
            addresses: Some(vec![NodeAddress {
                type_: "InternalIP".into(),
                address: ip.into(),
            }]),
            ..NodeStatus::default()
        }),
        ..Node::default()
    }
}

/// The eth0 VIF a KuryrPort's status records.
pub fn vif(kp: &KuryrPort) -> &Vif {
    &kp.status.as_ref().expect("status written").vifs[DEFAULT_IFNAME].vif
}

/// A KuryrPort of pod `name` (uid `pod-<name>`) on [`NODE`], with its finalizer, as the Pod front end makes it.
pub fn kuryrport(name: &str) -> KuryrPort {
    KuryrPort {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some(NS.into()),
            uid: Some(format!("kp-{name}")),
            finalizers: Some(vec![kuryr_api::finalizers::KURYRPORT.into()]),
            ..ObjectMeta::default()
        },
        spec: KuryrPortSpec {
            pod_uid: format!("pod-{name}"),
            pod_node_name: NODE.into(),
            pod_static: false,
            vif_type: None,
            project_id: None,
            subnet_ids: None,
            security_group_ids: None,
            additional_networks: Vec::new(),
        },
        status: None,
    }
}

impl Harness {
    /// One KuryrPort reconcile, on its own task as the controller runs it (a reconcile's future is too big
    /// for a test thread's stack in a debug build).
    pub async fn reconcile(
        &self,
        kp: &KuryrPort,
    ) -> kuryr_controller::Result<kube::runtime::controller::Action> {
        let fut = kuryr_controller::ports::reconcile::reconcile(Arc::new(cached(kp)), self.ctx.clone());
        tokio::spawn(fut).await.unwrap()
    }

    /// Pod `name`'s KuryrPort put in, reconciled once, and read back: a wired pod.
    pub async fn wired(&mut self, name: &str) -> KuryrPort {
        let kp = self.add_kuryrport(&kuryrport(name));
        self.reconcile(&kp).await.unwrap();
        self.kuryrport_now(&kp)
    }

    /// Puts `kp` in the API server and the cache; returns it as stored.
    pub fn add_kuryrport(&mut self, kp: &KuryrPort) -> KuryrPort {
        let stored = self.api.put(&self.kuryrport_path(kp), kp);
        let kp: KuryrPort = serde_json::from_value(stored).unwrap();
        self.kuryrports
            .apply_watcher_event(&watcher::Event::Apply(cached(&kp)));
        kp
    }

    /// The KuryrPort as the API server holds it now (what the reconcile wrote).
    pub fn kuryrport_now(&self, kp: &KuryrPort) -> KuryrPort {
        serde_json::from_value(self.api.get(&self.kuryrport_path(kp)).unwrap()).unwrap()
    }

    /// The cache catches up with the API server (as the watch would).
    pub fn sync_cache(&mut self, kp: &KuryrPort) -> KuryrPort {
        let now = self.kuryrport_now(kp);
        self.kuryrports
            .apply_watcher_event(&watcher::Event::Apply(cached(&now)));
        now
    }

    /// The metrics as `/metrics` serves them.
    pub fn metrics(&self) -> String {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &self.registry).unwrap();
        text
    }

    fn kuryrport_path(&self, kp: &KuryrPort) -> String {
        apiserver::path(
            "openstack.org/v1",
            NS,
            "kuryrports",
            kp.metadata.name.as_deref().unwrap(),
        )
    }
}

/// `kp` as the KuryrPort watch caches it (packed).
pub fn cached(kp: &KuryrPort) -> CachedKp {
    CachedKp::pack(kp.clone()).unwrap()
}
