//! Which pods get Kuryr networking and what the Pod front end does about each: create or delete the pod's
//! KuryrPort, and take off a pod finalizer left by upstream Kuryr or an earlier kuryr-rs. Pure decisions on
//! the Pod (and its KuryrPort, if any); the controller carries them out.
//!
//! The pod itself carries no finalizer of ours: its KuryrPort is owned by it and holds the ports under its
//! own finalizer, so a pod that goes (deleted, force-deleted, or while the controller is down) leaves its
//! KuryrPort to Kubernetes' garbage collector, and the KuryrPort controller releases the ports. A finalizer
//! on the pod was one more apiserver write per pod (a quarter of the writes of a burst) and kept pods
//! Terminating for as long as the controller was away.

use std::collections::BTreeMap;

use kuryr_api::k8s_openapi::jiff::Timestamp;
use kuryr_api::{
    annotations, finalizers, labels, KuryrPort, KuryrPortSpec, ObjectMeta, OwnerReference, SlimPod,
};

use crate::error::CoreError;
use crate::vif::PodFacts;

/// Value of `kubernetes.io/config.source` on pods that came through the API server.
const CONFIG_SOURCE_API: &str = "api";
/// Set by the kubelet on the API server's mirror of a static pod.
const CONFIG_MIRROR: &str = "kubernetes.io/config.mirror";

/// What the pod needs from Kuryr.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PodDisposition {
    /// Uses the node's network namespace: not ours.
    HostNetwork,
    /// Not scheduled yet: wait for `spec.nodeName`, the port depends on the node.
    Unscheduled,
    /// Wire it on this node.
    Wire { node_name: String, static_pod: bool },
    /// Succeeded, Failed or being deleted: its ports go back.
    Release,
}

/// The pod front end's decision for one pod.
pub fn disposition(pod: &SlimPod) -> PodDisposition {
    if is_host_network(pod) {
        return PodDisposition::HostNetwork;
    }
    if is_deleting(pod) || is_terminal(pod) {
        return PodDisposition::Release;
    }
    match node_name(pod) {
        Some(node) => PodDisposition::Wire {
            node_name: node.to_owned(),
            static_pod: is_static(pod),
        },
        None => PodDisposition::Unscheduled,
    }
}

pub fn is_host_network(pod: &SlimPod) -> bool {
    pod.spec.as_ref().and_then(|s| s.host_network).unwrap_or(false)
}

pub fn node_name(pod: &SlimPod) -> Option<&str> {
    pod.spec.as_ref()?.node_name.as_deref().filter(|n| !n.is_empty())
}

/// Phase Succeeded or Failed: the containers are gone and will not come back (upstream released these).
pub fn is_terminal(pod: &SlimPod) -> bool {
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    matches!(phase, Some("Succeeded" | "Failed"))
}

pub fn is_deleting(pod: &SlimPod) -> bool {
    pod.metadata.deletion_timestamp.is_some()
}

/// How long a pod being deleted keeps its network: while a container of it still runs and its deletion
/// time (the end of its grace period) is ahead. A terminating pod still serves (Kubernetes sends it
/// traffic when a Service has no ready endpoint left) and its preStop hooks may talk; releasing its port
/// at the delete put the port back in its pool while the pod still used it. `None`: release now.
pub fn draining_for(pod: &SlimPod, now: Timestamp) -> Option<std::time::Duration> {
    let deadline = pod.metadata.deletion_timestamp.as_ref()?.0;
    if is_terminal(pod) || !pod.runs_a_container() {
        return None;
    }
    let left = now.duration_until(deadline);
    (left.is_positive()).then(|| std::time::Duration::try_from(left).unwrap_or_default())
}

/// A kubelet-manifest pod, seen through its mirror pod (upstream's `podStatic`).
pub fn is_static(pod: &SlimPod) -> bool {
    let Some(ann) = pod.metadata.annotations.as_ref() else {
        return false;
    };
    ann.contains_key(CONFIG_MIRROR)
        || ann
            .get(annotations::CONFIG_SOURCE)
            .is_some_and(|s| s != CONFIG_SOURCE_API)
}

fn has_pod_finalizer(pod: &SlimPod) -> bool {
    pod.metadata
        .finalizers
        .as_ref()
        .is_some_and(|f| f.iter().any(|f| f == finalizers::POD))
}

/// A change of the pod's finalizer: only ever the removal of one an earlier controller put there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FinalizerChange {
    None,
    Remove,
}

/// A change of the pod's KuryrPort.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KuryrPortChange {
    None,
    Create,
    Delete,
}

/// What to do for a pod: the KuryrPort change, and the finalizer change once the KuryrPort is gone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PodActions {
    pub finalizer: FinalizerChange,
    pub kuryrport: KuryrPortChange,
}

impl PodActions {
    const NOTHING: Self = Self {
        finalizer: FinalizerChange::None,
        kuryrport: KuryrPortChange::None,
    };
}

/// Decides the pod front end's actions from the pod and its KuryrPort (same namespace and name), if any.
///
/// - Pods to wire get a KuryrPort. A KuryrPort left by an earlier pod of the same name (another UID, e.g. a
///   StatefulSet pod recreated) is deleted first; the new one is created once it is gone.
/// - Pods to release get their KuryrPort deleted (its own finalizer holds it until the ports are gone) and,
///   once it is gone, lose a pod finalizer an earlier controller left (upstream Kuryr put one on every pod).
pub fn pod_actions(pod: &SlimPod, kuryrport: Option<&KuryrPort>) -> PodActions {
    let kp_deleting = kuryrport.is_some_and(|kp| kp.metadata.deletion_timestamp.is_some());
    let kp_current =
        kuryrport.is_some_and(|kp| Some(kp.spec.pod_uid.as_str()) == pod.metadata.uid.as_deref());
    let release = || match kuryrport {
        Some(_) if kp_deleting => PodActions::NOTHING,
        Some(_) => PodActions {
            finalizer: FinalizerChange::None,
            kuryrport: KuryrPortChange::Delete,
        },
        None if has_pod_finalizer(pod) => PodActions {
            finalizer: FinalizerChange::Remove,
            kuryrport: KuryrPortChange::None,
        },
        None => PodActions::NOTHING,
    };
    match disposition(pod) {
        PodDisposition::HostNetwork | PodDisposition::Release => release(),
        PodDisposition::Unscheduled => PodActions::NOTHING,
        PodDisposition::Wire { .. } => {
            let kuryrport = match kuryrport {
                None => KuryrPortChange::Create,
                Some(_) if kp_deleting || kp_current => KuryrPortChange::None,
                Some(_) => KuryrPortChange::Delete,
            };
            PodActions {
                finalizer: FinalizerChange::None,
                kuryrport,
            }
        }
    }
}

/// The KuryrPort to create for a pod being wired: same namespace and name, owned by the pod, labelled with
/// its node for the CNI daemon's watch, held by the KuryrPort finalizer until its ports are released.
/// `None` for pods that are not to be wired or lack name, namespace or UID.
pub fn desired_kuryrport(pod: &SlimPod) -> Option<KuryrPort> {
    let PodDisposition::Wire {
        node_name,
        static_pod,
    } = disposition(pod)
    else {
        return None;
    };
    let name = pod.metadata.name.clone()?;
    let namespace = pod.metadata.namespace.clone()?;
    let uid = pod.metadata.uid.clone()?;
    let owner = OwnerReference {
        api_version: "v1".into(),
        kind: "Pod".into(),
        name: name.clone(),
        uid: uid.clone(),
        controller: Some(true),
        block_owner_deletion: None,
    };
    let spec = KuryrPortSpec {
        pod_uid: uid,
        pod_node_name: node_name.clone(),
        pod_static: static_pod,
        vif_type: None,
        project_id: None,
        subnet_ids: None,
        security_group_ids: None,
        additional_networks: Vec::new(),
    };
    let mut kp = KuryrPort::new(&name, spec);
    kp.metadata = ObjectMeta {
        name: Some(name),
        namespace: Some(namespace),
        labels: Some(BTreeMap::from([(labels::NODE_NAME.to_owned(), node_name)])),
        owner_references: Some(vec![owner]),
        finalizers: Some(vec![finalizers::KURYRPORT.to_owned()]),
        ..ObjectMeta::default()
    };
    Some(kp)
}

/// The pod's facts for the VIF drivers; the project and SGs come from the controller's drivers.
pub fn pod_facts(
    pod: &SlimPod,
    project_id: &str,
    security_groups: impl IntoIterator<Item = String>,
) -> Result<PodFacts, CoreError> {
    let namespace = pod.metadata.namespace.clone().unwrap_or_default();
    let name = pod.metadata.name.clone().unwrap_or_default();
    let Some(node_name) = node_name(pod).map(str::to_owned) else {
        return Err(CoreError::PodNotScheduled { namespace, name });
    };
    Ok(PodFacts {
        uid: pod.metadata.uid.clone().unwrap_or_default(),
        namespace,
        name,
        node_name,
        project_id: project_id.to_owned(),
        security_groups: security_groups.into_iter().collect(),
    })
}

#[cfg(test)]
mod tests;
