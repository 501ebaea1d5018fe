//! Kubernetes side of a run on the lab's kube-apiserver: the bench namespace, fake Nodes, pods, and a
//! watch that timestamps when each pod's KuryrPort turns wired.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use kube::api::{ApiResource, DynamicObject};
use kube::runtime::watcher;
use kuryr_api::k8s_openapi::api::core::v1::{
    Container, Node, NodeAddress, NodeCondition, NodeStatus, PodSpec,
};
use kuryr_api::{
    crds, Api, Client, DeleteParams, KuryrLoadBalancer, KuryrPort, ListParams, Namespace, ObjectMeta, Patch,
    PatchParams, Pod, PostParams, ResourceExt, Service,
};
use serde_json::{json, Value};

use crate::cloud::Vm;
use crate::lock;

pub fn kuryrport_api(client: &Client, ns: &str) -> Api<DynamicObject> {
    let ar = ApiResource::erase::<KuryrPort>(&());
    Api::namespaced_with(client.clone(), ns, &ar)
}

pub fn klb_api(client: &Client, ns: &str) -> Api<DynamicObject> {
    let ar = ApiResource::erase::<KuryrLoadBalancer>(&());
    Api::namespaced_with(client.clone(), ns, &ar)
}

/// Whether a KuryrPort (ours or upstream's shape) reports every VIF active.
pub fn is_wired(kp: &Value) -> bool {
    let Some(vifs) = kp.pointer("/status/vifs").and_then(Value::as_object) else {
        return false;
    };
    !vifs.is_empty()
        && vifs.values().all(|v| {
            let vif = &v["vif"];
            vif["active"] == Value::Bool(true) || vif["versioned_object.data"]["active"] == Value::Bool(true)
        })
}

/// Makes sure our CRDs are installed (they are what the lab runs; upstream's objects must fit them).
pub async fn ensure_crds(client: &Client) -> anyhow::Result<()> {
    let api: Api<kuryr_api::CustomResourceDefinition> = Api::all(client.clone());
    for crd in crds::crds() {
        if api.get_opt(&crd.name_any()).await?.is_none() {
            api.patch(
                &crd.name_any(),
                &PatchParams::apply("kuryr-bench").force(),
                &Patch::Apply(&crd),
            )
            .await?;
        }
    }
    Ok(())
}

pub async fn create_namespace(client: &Client, ns: &str) -> anyhow::Result<()> {
    // Waits for its `default` ServiceAccount too (the lab runs ServiceAccount admission).
    lab_tests::cluster::create_namespace_object(
        client,
        &Namespace {
            metadata: ObjectMeta {
                name: Some(ns.into()),
                labels: Some([("kuryr-bench".to_string(), "true".to_string())].into()),
                ..ObjectMeta::default()
            },
            ..Namespace::default()
        },
    )
    .await
}

/// How long [`delete_namespace`] works on a namespace's objects itself before it leaves the rest to the
/// apiserver's namespace controller (and `kuryr-bench cleanup`): a stuck or slow apiserver must not hold
/// the run (a 5,000-pod teardown outlasted a 5-minute deadline when every object went one at a time
/// through a serial `deletecollection`).
pub const TEARDOWN_LIMIT: Duration = Duration::from_secs(600);

/// Writes in flight during a teardown (the lab's apiserver takes far more than the 32 of pod creates).
const TEARDOWN_CONCURRENCY: usize = 64;

/// Deletes `ns` and everything in it, within `limit`.
///
/// The namespace is deleted first, so nothing new is made in it and the apiserver removes whatever else it
/// holds. Pods, KuryrPorts, Services and KuryrLoadBalancers are listed (metadata only) and deleted here,
/// `TEARDOWN_CONCURRENCY` writes at a time over all kinds at once, each after its finalizers are stripped
/// (the stopped controller's, which it will never release). Left to the namespace controller, 10k
/// KuryrPorts went at ~2 per second, loading the shared apiserver for over an hour. Returns how many
/// objects could not be handled within `limit`.
pub async fn delete_namespace(client: &Client, ns: &str, limit: Duration) -> usize {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let _ = namespaces.delete(ns, &DeleteParams::default()).await;
    let kinds = [
        (ApiResource::erase::<Pod>(&()), true),
        (ApiResource::erase::<KuryrPort>(&()), false),
        (ApiResource::erase::<Service>(&()), false),
        (ApiResource::erase::<KuryrLoadBalancer>(&()), false),
    ];
    // (api, name, strip its finalizers first, how to delete it)
    let mut work: Vec<(Api<DynamicObject>, String, bool, DeleteParams)> = Vec::new();
    for (ar, is_pod) in kinds {
        let api = Api::<DynamicObject>::namespaced_with(client.clone(), ns, &ar);
        let Ok(list) = api.list_metadata(&ListParams::default()).await else {
            continue;
        };
        for o in list.items {
            let (strip, dp) = teardown_step(o.metadata.finalizers.as_deref(), is_pod);
            work.push((api.clone(), o.name_any(), strip, dp));
        }
    }
    let total = work.len();
    let done = std::sync::atomic::AtomicUsize::new(0);
    let strip = json!({"metadata": {"finalizers": null}});
    let all =
        futures::stream::iter(work).for_each_concurrent(TEARDOWN_CONCURRENCY, |(api, name, held, dp)| {
            let (strip, done) = (&strip, &done);
            async move {
                if held {
                    let _ = api
                        .patch(&name, &PatchParams::default(), &Patch::Merge(strip))
                        .await;
                }
                let _ = api.delete(&name, &dp).await;
                done.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
        });
    if tokio::time::timeout(limit, all).await.is_err() {
        let left = total - done.load(std::sync::atomic::Ordering::Relaxed);
        eprintln!(
            "teardown of {ns}: {left} of {total} objects not handled within {limit:?}; the namespace is being \
             deleted, `kuryr-bench cleanup` strips what still holds a finalizer"
        );
        return left;
    }
    0
}

/// What the teardown does to one object: whether its finalizers are stripped before its delete, and how it
/// is deleted (pods with grace 0: no kubelet confirms a graceful delete).
pub fn teardown_step(finalizers: Option<&[String]>, is_pod: bool) -> (bool, DeleteParams) {
    let held = finalizers.is_some_and(|f| !f.is_empty());
    (held, if is_pod { grace0() } else { DeleteParams::default() })
}

/// Every namespace and Node a bench run labelled (`kuryr-bench=true`), e.g. after an interrupted run.
pub async fn cleanup_all(client: &Client) -> anyhow::Result<()> {
    let lp = ListParams::default().labels("kuryr-bench=true");
    let nss: Api<Namespace> = Api::all(client.clone());
    for ns in nss.list(&lp).await? {
        eprintln!("deleting namespace {}", ns.name_any());
        delete_namespace(client, &ns.name_any(), TEARDOWN_LIMIT).await;
    }
    let nodes: Api<Node> = Api::all(client.clone());
    for n in nodes.list(&lp).await? {
        eprintln!("deleting node {}", n.name_any());
        let _ = nodes.delete(&n.name_any(), &DeleteParams::default()).await;
    }
    Ok(())
}

pub fn grace0() -> DeleteParams {
    DeleteParams {
        grace_period_seconds: Some(0),
        ..DeleteParams::default()
    }
}

/// Creates a Ready Node per VM (unique names; the lab's own Nodes are left alone).
pub async fn create_nodes(client: &Client, vms: &[Vm]) -> anyhow::Result<()> {
    let api: Api<Node> = Api::all(client.clone());
    for vm in vms.iter().filter(|v| !v.preexisting) {
        let node = Node {
            metadata: ObjectMeta {
                name: Some(vm.node.clone()),
                labels: Some([("kuryr-bench".to_string(), "true".to_string())].into()),
                ..ObjectMeta::default()
            },
            ..Node::default()
        };
        api.create(&PostParams::default(), &node).await?;
        let status = NodeStatus {
            addresses: Some(vec![NodeAddress {
                type_: "InternalIP".into(),
                address: vm.ip.clone(),
            }]),
            conditions: Some(vec![NodeCondition {
                type_: "Ready".into(),
                status: "True".into(),
                ..NodeCondition::default()
            }]),
            ..NodeStatus::default()
        };
        api.patch_status(
            &vm.node,
            &PatchParams::default(),
            &Patch::Merge(&json!({"status": status})),
        )
        .await?;
    }
    Ok(())
}

pub async fn delete_nodes(client: &Client, vms: &[Vm]) {
    let api: Api<Node> = Api::all(client.clone());
    for vm in vms.iter().filter(|v| !v.preexisting) {
        let _ = api.delete(&vm.node, &DeleteParams::default()).await;
    }
}

pub fn pod(name: &str, node: &str, labels: &[(&str, &str)]) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some(
                labels
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            ),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            node_name: Some(node.into()),
            containers: vec![Container {
                name: "pause".into(),
                image: Some("registry.k8s.io/pause:3.9".into()),
                ..Container::default()
            }],
            ..PodSpec::default()
        }),
        ..Pod::default()
    }
}

/// Creates a pod on `vm`; with `host_ip` it also writes `status.hostIP` as a kubelet would (upstream reads
/// the node from it; there is no kubelet in the lab).
pub async fn create_pod(pods: &Api<Pod>, name: &str, vm: &Vm, host_ip: bool) -> anyhow::Result<()> {
    pods.create(&PostParams::default(), &pod(name, &vm.node, &[("app", "bench")]))
        .await?;
    if host_ip {
        pods.patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(&json!({"status": {"hostIP": vm.ip, "phase": "Pending"}})),
        )
        .await?;
    }
    Ok(())
}

/// When each KuryrPort of the namespace was first seen, first seen wired, and deleted.
#[derive(Default)]
pub struct WireLog {
    /// First seen at all: the controller's front end made it (a pod's wait until then is the front end's).
    pub seen: HashMap<String, Instant>,
    pub wired: HashMap<String, Instant>,
    pub gone: HashMap<String, Instant>,
}

pub type SharedWireLog = Arc<Mutex<WireLog>>;

/// Watches the namespace's KuryrPorts in the background, recording seen, wired and deleted times.
pub fn watch_wiring(client: &Client, ns: &str) -> (SharedWireLog, tokio::task::JoinHandle<()>) {
    let log: SharedWireLog = Arc::default();
    let api = kuryrport_api(client, ns);
    let l = log.clone();
    let task = tokio::spawn(for_each_event(api, "kuryrport", move |ev| {
        let now = Instant::now();
        let mut log = lock(&l);
        match ev {
            watcher::Event::Apply(o) | watcher::Event::InitApply(o) => {
                let name = o.name_any();
                log.seen.entry(name.clone()).or_insert(now);
                if is_wired(&serde_json::to_value(&o).unwrap_or_default()) {
                    log.wired.entry(name).or_insert(now);
                }
            }
            watcher::Event::Delete(o) => {
                log.gone.insert(o.name_any(), now);
            }
            _ => {}
        }
    }));
    (log, task)
}

/// Hands `f` every event of a watch on `api` until the stream ends, going on after a failed read (the
/// watcher re-lists on its own); `what` names the watch in the warning.
pub async fn for_each_event<K>(api: Api<K>, what: &str, mut f: impl FnMut(watcher::Event<K>))
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    let stream = watcher(api, watcher::Config::default());
    futures::pin_mut!(stream);
    loop {
        match stream.try_next().await {
            Ok(Some(ev)) => f(ev),
            Ok(None) => break,
            Err(e) => {
                tracing::warn!("{what} watch: {e}");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    }
}

/// Waits until `done` holds on the log or `timeout` passes; returns whether it held.
pub async fn wait_until(log: &SharedWireLog, timeout: Duration, done: impl Fn(&WireLog) -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if done(&lock(log)) {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Deletes `names` (grace 0) with bounded concurrency.
pub async fn delete_pods(pods: &Api<Pod>, names: &[String]) {
    futures::stream::iter(names.iter().cloned())
        .for_each_concurrent(32, |n| {
            let pods = pods.clone();
            async move {
                let _ = pods.delete(&n, &grace0()).await;
            }
        })
        .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn teardown_strips_what_is_held_and_deletes_everything() {
        let held = vec!["kuryr.openstack.org/kuryrport-finalizer".to_string()];
        let (strip, dp) = teardown_step(Some(&held), false);
        assert!(strip && dp.grace_period_seconds.is_none());
        let (strip, dp) = teardown_step(Some(&held), true);
        assert!(strip && dp.grace_period_seconds == Some(0));
        let (strip, dp) = teardown_step(None, true);
        assert!(!strip && dp.grace_period_seconds == Some(0));
        assert!(!teardown_step(Some(&[]), false).0);
    }

    #[test]
    fn wired_means_every_vif_active_in_either_shape() {
        let ours = json!({"status": {"vifs": {"eth0": {"default": true, "vif": {"active": true}}}}});
        assert!(is_wired(&ours));
        let upstream = json!({"status": {"vifs": {"eth0": {"default": true,
            "vif": {"versioned_object.data": {"active": true}, "versioned_object.name": "VIFVlanNested"}}}}});
        assert!(is_wired(&upstream));
        let half = json!({"status": {"vifs": {"eth0": {"vif": {"active": true}}, "eth1": {"vif": {"active": false}}}}});
        assert!(!is_wired(&half));
        assert!(!is_wired(&json!({"status": {"vifs": {}}})));
        assert!(!is_wired(&json!({"spec": {}})));
    }
}
