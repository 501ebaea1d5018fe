//! What the watch caches keep of an object. A reflector store holds every watched object for the life of
//! the process: at 10,000 pods the full objects — `managedFields` (one entry per writer, often the largest
//! part), container specs, volumes, tolerations, status conditions — are most of the controller's memory,
//! and nothing here reads them. Each watch stream is mapped through one of these before its store, and a
//! reconcile is handed the same slimmed object, so every field a controller reads must be kept: the tests
//! below pin what the Pod front end decides on. Writes never send a cached object back (finalizers are JSON
//! patches that test the list, statuses are server-side applies of their own bodies), so nothing dropped
//! here can be erased on the server.

use kuryr_api::k8s_openapi::api::core::v1::{Node, Pod, PodSpec, PodStatus};
use kuryr_api::Resource;

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

/// A Pod as the Pod front end reads it (`kuryr_core::pod`): its metadata (name, namespace, uid,
/// resourceVersion for Events, deletionTimestamp, finalizers, annotations: refused ones and the static-pod
/// markers), `spec.nodeName`, `spec.hostNetwork` and `status.phase`. The containers, volumes, tolerations
/// and the rest of the status go.
pub fn pod(p: &mut Pod) {
    meta(p);
    if let Some(spec) = p.spec.take() {
        p.spec = Some(PodSpec {
            node_name: spec.node_name,
            host_network: spec.host_network,
            ..PodSpec::default()
        });
    }
    if let Some(status) = p.status.take() {
        p.status = Some(PodStatus {
            phase: status.phase,
            ..PodStatus::default()
        });
    }
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
    use kuryr_api::k8s_openapi::api::core::v1::{
        Container, ContainerImage, NodeAddress, NodeStatus, Toleration, Volume,
    };
    use kuryr_api::k8s_openapi::apimachinery::pkg::apis::meta::v1::{ManagedFieldsEntry, Time};
    use kuryr_api::{annotations, finalizers, ObjectMeta};
    use kuryr_core::pod::{desired_kuryrport, disposition, pod_actions};
    use std::collections::BTreeMap;

    fn full_pod(phase: &str, host_network: bool, annotations: &[(&str, &str)]) -> Pod {
        let mut ann: BTreeMap<String, String> = annotations
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        ann.insert(LAST_APPLIED.into(), "{\"big\": \"copy of the pod\"}".into());
        Pod {
            metadata: ObjectMeta {
                name: Some("p".into()),
                namespace: Some("ns".into()),
                uid: Some("uid-1".into()),
                resource_version: Some("42".into()),
                labels: Some([("app".to_string(), "web".to_string())].into()),
                annotations: Some(ann),
                finalizers: Some(vec!["other/keep".into(), finalizers::POD.into()]),
                managed_fields: Some(vec![ManagedFieldsEntry {
                    manager: Some("kubectl".into()),
                    ..ManagedFieldsEntry::default()
                }]),
                ..ObjectMeta::default()
            },
            spec: Some(PodSpec {
                node_name: Some("node-1".into()),
                host_network: Some(host_network),
                containers: vec![Container {
                    name: "c".into(),
                    image: Some("registry.k8s.io/pause:3.9".into()),
                    ..Container::default()
                }],
                volumes: Some(vec![Volume {
                    name: "token".into(),
                    ..Volume::default()
                }]),
                tolerations: Some(vec![Toleration::default()]),
                ..PodSpec::default()
            }),
            status: Some(PodStatus {
                phase: Some(phase.into()),
                pod_ip: Some("10.0.0.5".into()),
                ..PodStatus::default()
            }),
        }
    }

    #[test]
    fn a_slim_pod_keeps_what_the_pod_front_end_reads() {
        for (phase, host, ann) in [
            ("Running", false, vec![]),
            ("Succeeded", false, vec![]),
            ("Pending", true, vec![]),
            ("Running", false, vec![(annotations::CONFIG_SOURCE, "file")]),
            ("Running", false, vec![(annotations::PROJECT, "other-tenant")]),
        ] {
            let full = full_pod(phase, host, &ann);
            let mut slim = full.clone();
            pod(&mut slim);
            assert_eq!(disposition(&slim), disposition(&full), "{phase} {host} {ann:?}");
            assert_eq!(pod_actions(&slim, None), pod_actions(&full, None));
            assert_eq!(desired_kuryrport(&slim), desired_kuryrport(&full));
            assert_eq!(
                kuryr_core::annotations::refused(slim.metadata.annotations.as_ref()),
                kuryr_core::annotations::refused(full.metadata.annotations.as_ref())
            );
            // Finalizer patches test the list as cached; Events name the object by uid and version.
            assert_eq!(slim.metadata.finalizers, full.metadata.finalizers);
            assert_eq!(slim.object_ref(&()), full.object_ref(&()));
            assert_eq!(slim.metadata.labels, full.metadata.labels);
        }
        let mut deleting = full_pod("Running", false, &[]);
        deleting.metadata.deletion_timestamp =
            Some(Time(kuryr_api::k8s_openapi::jiff::Timestamp::UNIX_EPOCH));
        let full = deleting.clone();
        pod(&mut deleting);
        assert_eq!(pod_actions(&deleting, None), pod_actions(&full, None));
        assert_eq!(
            deleting.metadata.deletion_timestamp,
            full.metadata.deletion_timestamp
        );
    }

    #[test]
    fn a_slim_pod_drops_what_nobody_reads() {
        let mut p = full_pod("Running", false, &[("keep", "me")]);
        pod(&mut p);
        assert!(p.metadata.managed_fields.is_none());
        let ann = p.metadata.annotations.as_ref().expect("annotations");
        assert!(!ann.contains_key(LAST_APPLIED));
        assert_eq!(ann.get("keep").map(String::as_str), Some("me"));
        let spec = p.spec.as_ref().expect("spec");
        assert!(spec.containers.is_empty() && spec.volumes.is_none() && spec.tolerations.is_none());
        assert!(p.status.as_ref().is_some_and(|s| s.pod_ip.is_none()));
        // A pod without spec or status stays without.
        let mut bare = Pod::default();
        pod(&mut bare);
        assert!(bare.spec.is_none() && bare.status.is_none());
    }

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
