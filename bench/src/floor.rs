//! The floor: a minimal controller inside kuryr-bench that does only the work a burst cannot do without,
//! so every figure of kuryr-rs and upstream can be read as × what this machine, this API server and this
//! cloud allow at the least.
//!
//! Per pod, seen by a watch on the session's namespace: the KuryrPort create and one Neutron port create
//! (a perfect plan: no pool, no retry beyond the client's, no duplicate scan) at once, then the KuryrPort's
//! status write naming that port with its VIF active: the write the harness's detector
//! (`kubeenv::is_wired`) reads for every implementation. Nothing else: no pod finalizer, no trunk attach,
//! no wait for Neutron's ACTIVE, no rate or concurrency limit it would have to learn. A deleted pod's port
//! and KuryrPort are deleted (the drain is not measured, but the next session must start clean).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use kube::runtime::watcher;
use kuryr_api::{
    Api, Client, DeleteParams, KuryrPort, KuryrPortSpec, Patch, PatchParams, Pod, PostParams, ResourceExt,
};
use kuryr_openstack::neutron::{ports, subnets};
use kuryr_openstack::{AimdConfig, ClientConfig, Cloud, ErrorKind};
use serde_json::json;
use tokio::task::{JoinHandle, JoinSet};

use crate::cloud::BenchCloud;

/// Pods worked on at once, and the cloud calls in flight: fixed, high enough that neither is what a
/// 500-pod burst waits for (the harness itself creates 32 pods at a time).
const IN_FLIGHT: usize = 64;

/// What the floor did, for the record.
#[derive(Debug, Default)]
pub struct FloorCounts {
    pub ports_created: AtomicU64,
    pub errors: AtomicU64,
}

/// The running floor (stopped, with every task it spawned, when dropped or stopped).
pub struct Floor {
    task: JoinHandle<()>,
    pub counts: Arc<FloorCounts>,
    last_error: Arc<Mutex<Option<String>>>,
}

/// What one pod's work needs to know (the same for every pod of the session).
struct Ctx {
    kps: Api<KuryrPort>,
    cloud: Cloud,
    network_id: String,
    subnet_id: String,
    cidr: String,
    security_group: String,
    tag: String,
    ns: String,
    /// Pod name → its Neutron port, for the release.
    ports: Mutex<HashMap<String, String>>,
    counts: Arc<FloorCounts>,
    last_error: Arc<Mutex<Option<String>>>,
}

impl Floor {
    pub async fn start(
        client: &Client,
        ns: &str,
        cloud: &BenchCloud,
        cluster_id: &str,
    ) -> anyhow::Result<Floor> {
        let os = connect_fixed(cloud, IN_FLIGHT).await?;
        // Read once before the window: the VIF names the subnet's CIDR.
        let cidr = subnets::get(&os, &cloud.subnet_id).await?.cidr;
        let counts = Arc::new(FloorCounts::default());
        let last_error = Arc::new(Mutex::new(None));
        let ctx = Arc::new(Ctx {
            kps: Api::namespaced(client.clone(), ns),
            cloud: os,
            network_id: cloud.network_id.clone(),
            subnet_id: cloud.subnet_id.clone(),
            cidr,
            security_group: cloud.security_group_id.clone(),
            tag: format!("kuryr.cluster={cluster_id}"),
            ns: ns.to_string(),
            ports: Mutex::new(HashMap::new()),
            counts: counts.clone(),
            last_error: last_error.clone(),
        });
        let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
        let task = tokio::spawn(run(pods, ctx));
        Ok(Floor {
            task,
            counts,
            last_error,
        })
    }

    /// Fails if the watch loop has ended (it only ends on a bug).
    pub fn ensure_running(&self) -> anyhow::Result<()> {
        anyhow::ensure!(!self.task.is_finished(), "the floor's pod watch ended");
        Ok(())
    }

    pub fn last_error(&self) -> Option<String> {
        self.last_error.lock().ok().and_then(|e| e.clone())
    }

    pub fn stop(self) {
        self.task.abort();
    }
}

impl Drop for Floor {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A floor's own client on the session's cloud: the same endpoint and credentials, with `in_flight` calls
/// at once, fixed (the adaptive limit's learning would be the client's cost, not the floor's).
pub(crate) async fn connect_fixed(cloud: &BenchCloud, in_flight: usize) -> anyhow::Result<Cloud> {
    Ok(Cloud::connect(
        ClientConfig::clouds_yaml(Some(cloud.clouds_yaml.clone()), &cloud.cloud_name)
            .with_concurrency(AimdConfig::fixed(in_flight)),
    )
    .await?)
}

/// The watch loop: each new pod's work and each deleted pod's release in a task of its own, at most
/// `IN_FLIGHT` at once; aborting the loop drops the JoinSet, which aborts them all.
async fn run(pods: Api<Pod>, ctx: Arc<Ctx>) {
    let gate = Arc::new(tokio::sync::Semaphore::new(IN_FLIGHT));
    let mut tasks = JoinSet::new();
    let mut seen = std::collections::HashSet::new();
    crate::kubeenv::for_each_event(pods, "floor's pod", move |ev| {
        while tasks.try_join_next().is_some() {}
        let (pod, deleted) = match ev {
            watcher::Event::Apply(p) | watcher::Event::InitApply(p) => {
                let deleting = p.metadata.deletion_timestamp.is_some();
                (p, deleting)
            }
            watcher::Event::Delete(p) => (p, true),
            _ => return,
        };
        let name = pod.name_any();
        // Once per pod each way: later updates of a pod being wired are not new work.
        let new = if deleted {
            seen.remove(&name)
        } else {
            seen.insert(name.clone())
        };
        if !new {
            return;
        }
        let (ctx, gate) = (ctx.clone(), gate.clone());
        tasks.spawn(async move {
            let Ok(_permit) = gate.acquire_owned().await else {
                return;
            };
            let r = if deleted {
                release(&ctx, &name).await
            } else {
                wire(&ctx, &pod).await
            };
            if let Err(e) = r {
                ctx.counts.errors.fetch_add(1, Ordering::Relaxed);
                let msg = format!("{}/{name}: {e:#}", ctx.ns);
                tracing::warn!("floor: {msg}");
                if let Ok(mut last) = ctx.last_error.lock() {
                    *last = Some(msg);
                }
            }
        });
    })
    .await;
}

/// KuryrPort create and port create at once (neither needs the other), then the status write.
async fn wire(ctx: &Ctx, pod: &Pod) -> anyhow::Result<()> {
    let name = pod.name_any();
    let node = pod.spec.as_ref().and_then(|s| s.node_name.clone());
    let spec: KuryrPortSpec = serde_json::from_value(json!({
        "podUid": pod.metadata.uid.clone().unwrap_or_default(),
        "podNodeName": node.unwrap_or_default(),
    }))?;
    let kp = KuryrPort::new(&name, spec);
    let req = ports::CreatePort {
        name: Some(format!("{}/{name}", ctx.ns)),
        device_owner: Some("compute:kuryr".into()),
        security_groups: Some(vec![ctx.security_group.clone()]),
        ..ports::CreatePort::on_subnet(&ctx.network_id, &ctx.subnet_id).tagged(vec![ctx.tag.clone()])
    };
    let pp = PostParams::default();
    let (made, port) = tokio::join!(ctx.kps.create(&pp, &kp), create_port(ctx, &req));
    let port = port?;
    ctx.counts.ports_created.fetch_add(1, Ordering::Relaxed);
    if let Ok(mut m) = ctx.ports.lock() {
        m.insert(name.clone(), port.id.clone());
    }
    made?;
    ctx.kps
        .patch_status(
            &name,
            &PatchParams::default(),
            &Patch::Merge(&status(&port, &ctx.cidr)),
        )
        .await?;
    Ok(())
}

/// Address races the floor outlasts: the client's own retries (6 tries) are started again this many times.
/// A burst at 64 creates in flight loses ~30 % of them to a race, so 6 losses in a row hit about one pod in
/// 1,400, and a 500-pod run about one time in three: that pod was never wired and the run timed out.
const RACE_ROUNDS: u32 = 5;

/// The pod's port, however many address races it takes (a pod without one is no floor, only a timeout).
async fn create_port(ctx: &Ctx, req: &ports::CreatePort) -> kuryr_openstack::Result<ports::Port> {
    let mut rounds = 1;
    loop {
        match ports::create(&ctx.cloud, req).await {
            Err(e) if e.kind() == Some(ErrorKind::IpamConflict) && rounds < RACE_ROUNDS => rounds += 1,
            other => return other,
        }
    }
}

/// The status the floor writes: one active VIF on its port (the shape kuryr-rs writes).
fn status(port: &ports::Port, cidr: &str) -> serde_json::Value {
    let ips: Vec<_> = port
        .fixed_ips
        .iter()
        .map(|f| json!({"address": f.ip_address, "cidr": cidr, "subnetId": f.subnet_id}))
        .collect();
    json!({"status": {"vifs": {"eth0": {"default": true, "vif": {
        "type": "nested-vlan",
        "portId": port.id,
        "networkId": port.network_id,
        "mac": port.mac_address,
        "ips": ips,
        "active": true,
    }}}}})
}

async fn release(ctx: &Ctx, name: &str) -> anyhow::Result<()> {
    let port = ctx.ports.lock().ok().and_then(|mut m| m.remove(name));
    if let Some(id) = port {
        ports::delete(&ctx.cloud, &id).await?;
    }
    match ctx.kps.delete(name, &DeleteParams::default()).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
        Err(e) => Err(e.into()),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_status_written_is_what_the_detector_reads() {
        let port = kuryr_openstack::neutron::ports::Port {
            id: "p1".into(),
            network_id: "n1".into(),
            mac_address: "fa:16:3e:00:00:01".into(),
            fixed_ips: vec![kuryr_openstack::neutron::ports::FixedIp {
                subnet_id: "s1".into(),
                ip_address: "198.18.64.20".into(),
            }],
            ..Default::default()
        };
        let s = super::status(&port, "198.18.64.0/18");
        assert!(crate::kubeenv::is_wired(&s));
        // It parses as our typed status too (the CRD's schema is the typed one).
        let typed: kuryr_api::KuryrPortStatus =
            serde_json::from_value(s["status"].clone()).expect("typed status");
        let (_, vif) = typed.default_vif().expect("eth0");
        assert_eq!((vif.port_id.as_str(), vif.active), ("p1", true));
        assert_eq!(crate::cleanup::port_ids(&s), vec!["p1".to_string()]);
    }
}
