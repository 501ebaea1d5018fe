//! A Pod as the controller keeps it: the fields the Pod front end (`kuryr_core::pod`) and the policy
//! compiler read, deserialized straight from the API server's answers. k8s-openapi's `Pod` is 2,176 B before
//! any of its fields is filled, its `Container` and `ContainerStatus` some hundreds more each, and its
//! `managedFields` are parsed into JSON trees only to be dropped: one watch event of a running pod allocated
//! ~35 KB, and a cached one still held ~7 KB after trimming. This type has the same JSON paths, so the API
//! server's answers and `Pod` values convert to it; everything else in a Pod is skipped unparsed.

use k8s_openapi::api::core::v1::{ContainerPort, ContainerStateRunning, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};

use crate::slim_meta::{lean_meta, trim_meta};

/// A Pod: its metadata (without `managedFields` and kubectl's last-applied copy), `spec.nodeName`,
/// `spec.hostNetwork`, its containers' names and ports, `status.phase` and which containers run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SlimPod {
    #[serde(default, deserialize_with = "lean_meta")]
    pub metadata: ObjectMeta,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<SlimPodSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<SlimPodStatus>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SlimPodSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_network: Option<bool>,
    #[serde(default)]
    pub containers: Vec<SlimContainer>,
}

/// A container's name and ports (the policy compiler resolves named ports).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SlimContainer {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ports: Option<Vec<ContainerPort>>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SlimPodStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container_statuses: Option<Vec<SlimContainerStatus>>,
}

/// A container's name and whether it runs (a terminating pod keeps its port while one does).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SlimContainerStatus {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<SlimContainerState>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SlimContainerState {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub running: Option<ContainerStateRunning>,
}

impl SlimPod {
    /// Whether the kubelet reports a container of the pod running.
    pub fn runs_a_container(&self) -> bool {
        self.status
            .as_ref()
            .and_then(|s| s.container_statuses.as_ref())
            .is_some_and(|cs| {
                cs.iter()
                    .any(|c| c.state.as_ref().is_some_and(|st| st.running.is_some()))
            })
    }
}

crate::slim_meta::resource_as!(SlimPod, Pod);

impl From<Pod> for SlimPod {
    fn from(p: Pod) -> Self {
        let mut metadata = p.metadata;
        trim_meta(&mut metadata);
        Self {
            metadata,
            spec: p.spec.map(|s| SlimPodSpec {
                node_name: s.node_name,
                host_network: s.host_network,
                containers: s
                    .containers
                    .into_iter()
                    .map(|c| SlimContainer {
                        name: c.name,
                        ports: c.ports,
                    })
                    .collect(),
            }),
            status: p.status.map(|s| SlimPodStatus {
                phase: s.phase,
                container_statuses: s.container_statuses.map(|cs| {
                    cs.into_iter()
                        .map(|c| SlimContainerStatus {
                            name: c.name,
                            state: c.state.map(|st| SlimContainerState { running: st.running }),
                        })
                        .collect()
                }),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::annotations::LAST_APPLIED;

    fn pod_json() -> serde_json::Value {
        serde_json::json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {
                "name": "web-0", "namespace": "ns", "uid": "uid-1", "resourceVersion": "7", "generation": 1,
                "labels": {"app": "web"},
                "annotations": {"kuryr.openstack.org/refused": "x", LAST_APPLIED: "{}"},
                "finalizers": ["kuryr.openstack.org/pod-finalizer"],
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": "rs"}],
                "creationTimestamp": "2026-11-27T11:00:00Z",
                "deletionTimestamp": "2026-11-27T12:00:00Z", "deletionGracePeriodSeconds": 30,
                "managedFields": [{"manager": "kubectl", "operation": "Update", "fieldsType": "FieldsV1",
                                   "fieldsV1": {"f:metadata": {"f:labels": {"f:app": {}}}}}]
            },
            "spec": {
                "nodeName": "node-1", "hostNetwork": false,
                "containers": [
                    {"name": "app", "image": "img", "ports": [{"name": "http", "containerPort": 8080}],
                     "env": [{"name": "A", "value": "b"}]},
                    {"name": "sidecar", "image": "img2"}
                ],
                "volumes": [{"name": "v", "emptyDir": {}}]
            },
            "status": {"phase": "Running", "podIP": "10.0.0.5",
                       "containerStatuses": [
                           {"name": "app", "image": "img", "imageID": "sha", "ready": true, "restartCount": 0,
                            "state": {"running": {"startedAt": "2026-11-27T11:00:00Z"}}},
                           {"name": "sidecar", "image": "img2", "imageID": "sha2", "ready": false,
                            "restartCount": 3, "state": {"terminated": {"exitCode": 1}}}
                       ]}
        })
    }

    /// Read from the API server's JSON or converted from a `Pod`, the same value: what the front end and
    /// the policy compiler read, and nothing of managedFields or kubectl's copy.
    #[test]
    fn a_pod_read_slim_is_the_pod_converted() {
        let read: SlimPod = serde_json::from_value(pod_json()).expect("parses");
        let pod: Pod = serde_json::from_value(pod_json()).expect("parses");
        assert_eq!(read, SlimPod::from(pod));
        let m = &read.metadata;
        assert!(m.managed_fields.is_none());
        assert_eq!(m.annotations.as_ref().map(BTreeMap::len), Some(1));
        assert_eq!(
            m.labels.as_ref().and_then(|l| l.get("app")).map(String::as_str),
            Some("web")
        );
        assert_eq!(m.deletion_grace_period_seconds, Some(30));
        assert_eq!(m.owner_references.as_ref().map(Vec::len), Some(1));
        let spec = read.spec.as_ref().expect("spec");
        assert_eq!(spec.node_name.as_deref(), Some("node-1"));
        assert_eq!(spec.containers.len(), 2);
        let port = &spec.containers[0].ports.as_ref().expect("ports")[0];
        assert_eq!((port.name.as_deref(), port.container_port), (Some("http"), 8080));
        assert_eq!(
            read.status.as_ref().and_then(|s| s.phase.as_deref()),
            Some("Running")
        );
        assert!(read.runs_a_container());
        let serialized = serde_json::to_value(&read).expect("serializes");
        assert_eq!(
            serde_json::from_value::<SlimPod>(serialized).expect("parses"),
            read
        );
    }

    #[test]
    fn a_pod_without_a_running_container_says_so() {
        let mut json = pod_json();
        json["status"]["containerStatuses"][0]["state"] = serde_json::json!({"waiting": {"reason": "x"}});
        let read: SlimPod = serde_json::from_value(json).expect("parses");
        assert!(!read.runs_a_container());
        let bare: SlimPod =
            serde_json::from_value(serde_json::json!({"metadata": {"name": "p"}})).expect("parses");
        assert!(!bare.runs_a_container() && bare.spec.is_none());
    }
}
