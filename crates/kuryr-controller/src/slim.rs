//! What the watch caches keep of an object. A reflector store holds every watched object for the life of
//! the process, and a reconcile is handed the cached object: each watch maps its stream through one of these
//! before the store, and every field a reader here uses must be kept (the tests below pin them).
//! `managedFields` (one entry per writer, often the largest part of an object) and kubectl's last-applied
//! copy are read by nobody; of a Pod, the Pod front end and the policy compiler read a few fields only
//! (see [`pod`]). Writes never send a cached object back (finalizers are JSON patches that test the list,
//! statuses are applies of their own bodies), so nothing dropped here can be erased on the server.
//!
//! Measured per object in `tests/footprint.rs` (docs/BENCHMARKS.md, "Scale").

use std::fmt::Debug;

use kube::runtime::controller::Controller;
use kube::runtime::{reflector, watcher, WatchStreamExt};
use kuryr_api::k8s_openapi::api::core::v1::{
    Container, ContainerState, ContainerStateRunning, ContainerStatus, Node, Pod, PodSpec, PodStatus,
};
use kuryr_api::{Api, Resource};
use serde::de::DeserializeOwned;

/// `kubectl apply`'s copy of the whole object it applied: read by nobody here.
pub const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// Any kind: drops `metadata.managedFields` and `kubectl apply`'s last-applied annotation.
pub fn meta<K: Resource>(o: &mut K) {
    let m = o.meta_mut();
    m.managed_fields = None;
    if let Some(a) = m.annotations.as_mut() {
        a.remove(LAST_APPLIED);
    }
}

/// A Pod as it is read here: its metadata (name, namespace, uid, labels, annotations, finalizers,
/// deletionTimestamp, owners), `spec.nodeName`, `spec.hostNetwork`, `status.phase` and which of its
/// containers runs (the Pod front end, `kuryr_core::pod`), and its containers' names and named ports (the policy compiler resolves named
/// ports). Volumes, tolerations, images, probes, env and the rest of the status go.
pub fn pod(p: &mut Pod) {
    meta(p);
    if let Some(spec) = p.spec.take() {
        let containers = spec
            .containers
            .into_iter()
            .filter(|c| c.ports.as_ref().is_some_and(|p| !p.is_empty()))
            .map(|c| Container {
                name: c.name,
                ports: c.ports,
                ..Container::default()
            })
            .collect();
        p.spec = Some(PodSpec {
            node_name: spec.node_name,
            host_network: spec.host_network,
            containers,
            ..PodSpec::default()
        });
    }
    if let Some(status) = p.status.take() {
        p.status = Some(PodStatus {
            phase: status.phase,
            container_statuses: status.container_statuses.map(running_containers),
            ..PodStatus::default()
        });
    }
}

/// Of the containers' statuses, which one runs (`kuryr_core::pod::draining_for`: a terminating pod keeps
/// its port while one does). Image, ids, restart counts and the other states' messages go.
fn running_containers(statuses: Vec<ContainerStatus>) -> Vec<ContainerStatus> {
    statuses
        .into_iter()
        .map(|c| ContainerStatus {
            name: c.name,
            state: c.state.map(|st| ContainerState {
                running: st.running.map(|_| ContainerStateRunning::default()),
                ..ContainerState::default()
            }),
            ..ContainerStatus::default()
        })
        .collect()
}

/// A controller whose cache holds the objects as `slim` leaves them, built as `Controller::new` builds its
/// own (watcher, reflector, applied objects) with `slim` before the store.
pub fn controller<K>(api: Api<K>, wc: watcher::Config, slim: fn(&mut K)) -> Controller<K>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    let (store, writer) = reflector::store();
    let stream = watcher(api, wc).modify(slim).reflect(writer).applied_objects();
    Controller::for_stream(stream, store)
}

/// A Node as the parent-port lookups read it: name and `status.addresses` (InternalIPs). The image list
/// (up to 50 entries of several names each on a busy node) goes; the rest is small and kept.
pub fn node(n: &mut Node) {
    meta(n);
    if let Some(status) = n.status.as_mut() {
        status.images = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kuryr_api::k8s_openapi::api::core::v1::{ContainerImage, NodeAddress, NodeStatus};
    use kuryr_api::k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;
    use kuryr_api::ObjectMeta;

    #[test]
    fn a_slim_node_keeps_its_name_and_addresses() {
        let mut n = Node {
            metadata: ObjectMeta {
                name: Some("node-1".into()),
                managed_fields: Some(vec![ManagedFieldsEntry::default()]),
                ..ObjectMeta::default()
            },
            status: Some(NodeStatus {
                addresses: Some(vec![NodeAddress {
                    type_: "InternalIP".into(),
                    address: "192.0.2.10".into(),
                }]),
                images: Some(vec![ContainerImage::default()]),
                ..NodeStatus::default()
            }),
            ..Node::default()
        };
        node(&mut n);
        assert_eq!(kuryr_core::parent::internal_ips(&n), vec!["192.0.2.10"]);
        assert_eq!(n.metadata.name.as_deref(), Some("node-1"));
        assert!(n.metadata.managed_fields.is_none());
        assert!(n.status.as_ref().is_some_and(|s| s.images.is_none()));
    }

    #[test]
    fn a_slim_pod_keeps_what_the_front_end_and_the_policy_compiler_read() {
        let mut p: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {
                "name": "web-0", "namespace": "ns", "uid": "uid-1", "resourceVersion": "7",
                "labels": {"app": "web"},
                "annotations": {"kuryr.openstack.org/refused": "x", LAST_APPLIED: "{}"},
                "finalizers": ["kuryr.openstack.org/pod-finalizer"],
                "deletionTimestamp": "2026-11-27T12:00:00Z",
                "managedFields": [{"manager": "kubectl", "operation": "Update"}]
            },
            "spec": {
                "nodeName": "node-1", "hostNetwork": false,
                "containers": [
                    {"name": "app", "image": "img", "ports": [{"name": "http", "containerPort": 8080}],
                     "env": [{"name": "A", "value": "b"}]},
                    {"name": "sidecar", "image": "img2"}
                ],
                "volumes": [{"name": "v", "emptyDir": {}}],
                "tolerations": [{"key": "k", "operator": "Exists"}]
            },
            "status": {"phase": "Running", "podIP": "10.0.0.5",
                       "conditions": [{"type": "Ready", "status": "True"}],
                       "containerStatuses": [
                           {"name": "app", "image": "img", "imageID": "sha", "ready": false, "restartCount": 0,
                            "state": {"running": {"startedAt": "2026-11-27T11:00:00Z"}}},
                           {"name": "sidecar", "image": "img2", "imageID": "sha2", "ready": false,
                            "restartCount": 3, "state": {"terminated": {"exitCode": 1, "message": "long"}}}
                       ]}
        }))
        .unwrap();
        // Half a minute into the default grace period of the deletion above.
        let at = "2026-11-27T11:59:30Z".parse().unwrap();
        let before = (
            kuryr_core::pod::pod_actions(&p, None),
            kuryr_core::pod::is_terminal(&p),
            kuryr_core::pod::is_static(&p),
            kuryr_core::pod::draining_for(&p, at),
        );
        pod(&mut p);
        assert_eq!(
            (
                kuryr_core::pod::pod_actions(&p, None),
                kuryr_core::pod::is_terminal(&p),
                kuryr_core::pod::is_static(&p),
                kuryr_core::pod::draining_for(&p, at),
            ),
            before
        );
        assert!(
            before.3.is_some(),
            "a terminating pod whose container runs keeps its port"
        );
        assert_eq!(kuryr_core::pod::node_name(&p), Some("node-1"));
        assert!(kuryr_core::pod::is_deleting(&p));
        let m = &p.metadata;
        assert_eq!(
            (m.uid.as_deref(), m.resource_version.as_deref()),
            (Some("uid-1"), Some("7"))
        );
        assert!(m.managed_fields.is_none());
        assert_eq!(m.annotations.as_ref().map(|a| a.len()), Some(1));
        let policy_pod = kuryr_core::policy::model::Pod::from_k8s(&p, "10.0.0.5".parse().unwrap()).unwrap();
        assert_eq!(
            policy_pod.resolve_port("http", kuryr_core::policy::model::Protocol::Tcp),
            Some(8080)
        );
        assert_eq!(policy_pod.labels.get("app").map(String::as_str), Some("web"));
        let spec = p.spec.as_ref().unwrap();
        assert_eq!(spec.containers.len(), 1, "a container without ports is not read");
        assert!(spec.containers[0].image.is_none() && spec.containers[0].env.is_none());
        assert!(spec.volumes.is_none() && spec.tolerations.is_none());
        let status = p.status.as_ref().unwrap();
        assert_eq!(status.phase.as_deref(), Some("Running"));
        assert!(status.conditions.is_none() && status.pod_ip.is_none());
        let cs = status.container_statuses.as_ref().unwrap();
        assert!(cs[0].image.is_empty() && cs[1].state.as_ref().unwrap().terminated.is_none());
    }

    #[test]
    fn any_kind_loses_managed_fields_and_the_last_applied_copy_only() {
        let mut kp = kuryr_api::KuryrPort::new(
            "p",
            kuryr_api::KuryrPortSpec {
                pod_uid: "uid-1".into(),
                pod_node_name: "node-1".into(),
                pod_static: false,
                vif_type: None,
                project_id: None,
                subnet_ids: None,
                security_group_ids: None,
                additional_networks: Vec::new(),
            },
        );
        kp.metadata.managed_fields = Some(vec![ManagedFieldsEntry::default()]);
        kp.metadata.annotations = Some(
            [
                (LAST_APPLIED.to_string(), "{}".to_string()),
                ("other".to_string(), "x".to_string()),
            ]
            .into(),
        );
        let before = kp.spec.clone();
        meta(&mut kp);
        assert!(kp.metadata.managed_fields.is_none());
        assert_eq!(
            kp.metadata.annotations,
            Some([("other".to_string(), "x".to_string())].into())
        );
        assert_eq!(kp.spec, before);
    }
}
