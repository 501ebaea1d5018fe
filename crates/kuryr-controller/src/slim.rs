//! What the watch caches keep of an object. A reflector store holds every watched object for the life of
//! the process, and `managedFields` (one entry per writer, often the largest part of an object) and
//! kubectl's last-applied copy are read by nobody here. The Service, Endpoints, NetworkPolicy, namespace
//! and Node watches map their streams through these before the store. Writes never send a cached object
//! back (finalizers are JSON patches that test the list, statuses are applies of their own bodies), so
//! nothing dropped here can be erased on the server.
//!
//! The Pod and KuryrPort caches keep whole objects: trimming them needs their controllers built from
//! streams (`Controller::for_stream`), and that build left pods stuck in deletion under the chaos suite
//! (26 of 27, seed 9432020286797568058) where `Controller::new` passes.

use kuryr_api::k8s_openapi::api::core::v1::Node;
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
