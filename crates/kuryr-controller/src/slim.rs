//! What the watch caches keep of an object. A reflector store holds every watched object for the life of
//! the process, and a reconcile is handed the cached object: each watch maps its stream through one of these
//! before the store, and every field a reader here uses must be kept (the tests below pin them).
//! `managedFields` (one entry per writer, often the largest part of an object) and kubectl's last-applied
//! copy are read by nobody; of a Pod, the Pod front end and the policy compiler read a few fields only
//! (see [`pod`]), and likewise of a Service ([`service`], [`policy_service`]) and an EndpointSlice
//! ([`endpoint_slice`], read as `SlimEndpointSlice`). Writes never send a cached Pod, Service or
//! EndpointSlice back (finalizers are JSON patches that test the list, a Service's status is a merge patch of
//! its ingress alone), so nothing dropped here can be erased on the server. Every part of a KuryrLoadBalancer
//! is read: its cache keeps it whole but packed instead (`crate::packed`). Services and EndpointSlices are
//! also compacted (`compact`): parsing leaves slack.
//!
//! Measured per object in `tests/footprint.rs` (docs/BENCHMARKS.md, "Scale").

use std::fmt::Debug;

use kube::runtime::controller::Controller;
use kube::runtime::{reflector, watcher, WatchStreamExt};
use kuryr_api::k8s_openapi::api::core::v1::{Node, Service, ServicePort, ServiceSpec};
use kuryr_api::{Api, KuryrPort, ObjectMeta, Resource, SlimEndpointSlice, SlimPod};
use serde::de::DeserializeOwned;

/// Any kind: drops `metadata.managedFields` and `kubectl apply`'s last-applied annotation.
pub fn meta<K: Resource>(o: &mut K) {
    kuryr_api::slim_meta::trim_meta(o.meta_mut());
}

/// A Pod as it is read here ([`SlimPod`]: parsed from the API server's answers with only the fields the
/// Pod front end and the policy compiler read), compacted: parsing leaves lists with slack.
pub fn pod(p: &mut SlimPod) {
    compact(p);
}

/// A Service as the Service front end reads it (`services::frontend`, `kuryr_core::lb::service_spec`): its
/// metadata but labels and owners (name, namespace, uid, resourceVersion, creation and deletion times,
/// finalizers, annotations), and of its spec the type, clusterIP(s), ports (name, protocol, port,
/// targetPort, nodePort), selector, sessionAffinity(Config), internal and external traffic policies,
/// loadBalancerIP and SourceRanges, publishNotReadyAddresses. The status (written, never read), IP
/// families, externalIPs, appProtocol and the rest go.
pub fn service(s: &mut Service) {
    trim_service(s);
    compact(s);
}

fn trim_service(s: &mut Service) {
    meta(s);
    s.metadata.labels = None;
    s.metadata.owner_references = None;
    s.status = None;
    if let Some(spec) = s.spec.take() {
        s.spec = Some(ServiceSpec {
            type_: spec.type_,
            cluster_ip: spec.cluster_ip,
            cluster_ips: spec.cluster_ips,
            ports: spec.ports.map(|ports| ports.into_iter().map(port).collect()),
            selector: spec.selector,
            session_affinity: spec.session_affinity,
            session_affinity_config: spec.session_affinity_config,
            internal_traffic_policy: spec.internal_traffic_policy,
            external_traffic_policy: spec.external_traffic_policy,
            load_balancer_ip: spec.load_balancer_ip,
            load_balancer_source_ranges: spec.load_balancer_source_ranges,
            publish_not_ready_addresses: spec.publish_not_ready_addresses,
            ..ServiceSpec::default()
        });
    }
}

/// A Service port without its `appProtocol` (nobody reads it).
fn port(p: ServicePort) -> ServicePort {
    ServicePort {
        app_protocol: None,
        ..p
    }
}

/// A Service as the policy compiler reads it (`kuryr_core::policy::Service::from_k8s`): its identity (name,
/// namespace, uid, resourceVersion), clusterIP(s), selector and the ports' protocol, port and targetPort.
/// The policy loop keeps a cache of its own, so it need not hold what only the front end reads.
pub fn policy_service(s: &mut Service) {
    trim_service(s);
    s.metadata = ObjectMeta {
        name: s.metadata.name.take(),
        namespace: s.metadata.namespace.take(),
        uid: s.metadata.uid.take(),
        resource_version: s.metadata.resource_version.take(),
        ..ObjectMeta::default()
    };
    if let Some(spec) = s.spec.take() {
        s.spec = Some(ServiceSpec {
            cluster_ip: spec.cluster_ip,
            cluster_ips: spec.cluster_ips,
            selector: spec.selector,
            ports: spec.ports.map(|ports| {
                ports
                    .into_iter()
                    .map(|p| ServicePort {
                        protocol: p.protocol,
                        port: p.port,
                        target_port: p.target_port,
                        ..ServicePort::default()
                    })
                    .collect()
            }),
            ..ServiceSpec::default()
        });
    }
    compact(s);
}

/// An EndpointSlice as the front end reads it (`services::service_of`, `kuryr_core::lb::endpoints`), read
/// as [`SlimEndpointSlice`] (the Service's name, the address type, the endpoints in the KuryrLoadBalancer's
/// shape, the ports): of its metadata, name, namespace, uid and resourceVersion; compacted.
pub fn endpoint_slice(s: &mut SlimEndpointSlice) {
    let m = std::mem::take(&mut s.metadata);
    s.metadata = ObjectMeta {
        name: m.name,
        namespace: m.namespace,
        uid: m.uid,
        resource_version: m.resource_version,
        ..ObjectMeta::default()
    };
    compact(s);
}

/// A KuryrPort as the policy loop's cache keeps it (the KuryrPort controller's own cache packs them:
/// `ports::cached`): [`meta`], its labels (the node-name label selects a node's KuryrPorts for the CNI
/// daemon's watch, on the server; nothing here reads it back), compacted. The rest is read: the pods'
/// addresses and ports by the policy compiler.
pub fn kuryrport(k: &mut KuryrPort) {
    meta(k);
    k.metadata.labels = None;
    compact(k);
}

/// `o` again with every Vec and String at its length. Parsing grows a list by doubling (the JSON does not
/// say how long it is), and a cached object would keep that slack for its life: a fifth of a Service's
/// share, a quarter of a KuryrLoadBalancer with a ten-member status (`tests/footprint.rs`). A clone
/// allocates each at its length, for one copy of the object per watch event.
fn compact<K: Clone>(o: &mut K) {
    *o = o.clone();
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
    use kuryr_api::annotations::LAST_APPLIED;
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
        let mut p: SlimPod = serde_json::from_value(serde_json::json!({
            "metadata": {
                "name": "web-0", "namespace": "ns", "uid": "uid-1", "resourceVersion": "7",
                "labels": {"app": "web"},
                "annotations": {"kuryr.openstack.org/refused": "x", LAST_APPLIED: "{}"},
                "finalizers": ["kuryr.openstack.org/pod-finalizer"],
                "deletionTimestamp": "2026-11-27T12:00:00Z",
                "managedFields": [{"manager": "kubectl", "operation": "Update"}]
            },
            "spec": {"nodeName": "node-1", "containers": [
                {"name": "app", "ports": [{"name": "http", "containerPort": 8080}]}, {"name": "sidecar"}
            ]},
            "status": {"phase": "Running", "containerStatuses": [
                {"name": "app", "state": {"running": {}}}, {"name": "sidecar", "state": {"terminated": {}}}
            ]}
        }))
        .unwrap();
        pod(&mut p);
        // Half a minute into the default grace period of the deletion above: the front end's reads of
        // the pod as the watch caches it.
        let at = "2026-11-27T11:59:30Z".parse().unwrap();
        let release = kuryr_core::pod::PodActions {
            finalizer: kuryr_core::pod::FinalizerChange::Remove,
            kuryrport: kuryr_core::pod::KuryrPortChange::None,
        };
        assert_eq!(kuryr_core::pod::pod_actions(&p, None), release);
        assert!(!kuryr_core::pod::is_terminal(&p) && !kuryr_core::pod::is_static(&p));
        assert_eq!(
            kuryr_core::pod::draining_for(&p, at),
            Some(std::time::Duration::from_secs(30)),
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
        assert_eq!(spec.containers.len(), 2);
        assert_eq!(p.status.as_ref().unwrap().phase.as_deref(), Some("Running"));
    }

    /// A Service using every field a reader here reads, and some nobody reads.
    fn rich_service(kind: &str) -> Service {
        serde_json::from_value(serde_json::json!({
            "metadata": {
                "name": "web", "namespace": "ns", "uid": "uid-s", "resourceVersion": "9",
                "creationTimestamp": "2026-11-27T12:00:00Z",
                "deletionTimestamp": "2026-11-27T13:00:00Z",
                "finalizers": ["kuryr.openstack.org/service-finalizer"],
                "labels": {"app": "web"},
                "ownerReferences": [{"apiVersion": "v1", "kind": "X", "name": "x", "uid": "u"}],
                "annotations": {
                    "openstack.org/kuryr-timeout-client-data": "50000",
                    "openstack.org/kuryr-timeout-member-data": "x",
                    "openstack.org/kuryr-lb-provider": "ovn",
                    "openstack.org/kuryr-health-monitor": "http",
                    "openstack.org/kuryr-project": "other",
                    LAST_APPLIED: "{}"
                },
                "managedFields": [{"manager": "kubectl", "operation": "Update"}]
            },
            "spec": {
                "type": kind, "clusterIP": "10.96.0.10", "clusterIPs": ["10.96.0.10", "fd00::10"],
                "ipFamilies": ["IPv4", "IPv6"], "ipFamilyPolicy": "PreferDualStack",
                "internalTrafficPolicy": "Local", "externalTrafficPolicy": "Local",
                "externalIPs": ["192.0.2.1"], "allocateLoadBalancerNodePorts": true,
                "ports": [
                    {"name": "http", "port": 80, "targetPort": 8080, "protocol": "TCP", "nodePort": 30080,
                     "appProtocol": "http"},
                    {"name": "dns", "port": 53, "targetPort": "dns", "protocol": "UDP"},
                    {"name": "x", "port": 9, "protocol": "ICMP"}
                ],
                "selector": {"app": "web"},
                "sessionAffinity": "ClientIP",
                "sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 600}},
                "loadBalancerIP": "203.0.113.7",
                "loadBalancerSourceRanges": ["198.51.100.0/24"],
                "publishNotReadyAddresses": true
            },
            "status": {"loadBalancer": {"ingress": [{"ip": "203.0.113.7"}]}}
        }))
        .unwrap()
    }

    fn spec_of(
        svc: &Service,
    ) -> Result<(kuryr_api::KuryrLoadBalancerSpec, Vec<kuryr_core::lb::Problem>), kuryr_core::lb::Skip> {
        let defaults = kuryr_core::lb::SpecDefaults {
            subnet_id: Some("subnet".into()),
            ..Default::default()
        };
        kuryr_core::lb::service_spec(svc, Vec::new(), &defaults)
    }

    #[test]
    fn a_slim_service_gives_the_same_load_balancer_spec_and_keeps_what_the_front_end_reads() {
        for kind in ["LoadBalancer", "NodePort", "ClusterIP", "ExternalName"] {
            let mut s = rich_service(kind);
            let (before, owner) = (spec_of(&s), s.controller_owner_ref(&()));
            service(&mut s);
            assert_eq!(spec_of(&s), before, "{kind}");
            assert_eq!(s.controller_owner_ref(&()), owner);
        }
        let mut s = rich_service("ClusterIP");
        service(&mut s);
        let m = &s.metadata;
        assert_eq!(
            (m.uid.as_deref(), m.resource_version.as_deref()),
            (Some("uid-s"), Some("9"))
        );
        assert!(m.creation_timestamp.is_some() && m.deletion_timestamp.is_some());
        assert_eq!(m.finalizers.as_ref().map(Vec::len), Some(1));
        assert_eq!(m.annotations.as_ref().map(|a| a.len()), Some(5));
        assert!(m.labels.is_none() && m.owner_references.is_none() && m.managed_fields.is_none());
        let spec = s.spec.as_ref().unwrap();
        assert_eq!(spec.publish_not_ready_addresses, Some(true));
        assert!(spec.selector.as_ref().is_some_and(|s| !s.is_empty()));
        assert!(spec.ip_families.is_none() && spec.external_ips.is_none());
        assert!(spec.ports.iter().flatten().all(|p| p.app_protocol.is_none()));
        assert!(s.status.is_none());
    }

    #[test]
    fn a_policy_slim_service_models_the_same_and_keeps_nothing_else() {
        let mut s = rich_service("ClusterIP");
        // The policy model refuses the ICMP port: a Service it reads has TCP, UDP and SCTP ports.
        s.spec.as_mut().unwrap().ports.as_mut().unwrap().pop();
        let before = kuryr_core::policy::model::Service::from_k8s(&s).unwrap();
        policy_service(&mut s);
        assert_eq!(kuryr_core::policy::model::Service::from_k8s(&s).unwrap(), before);
        assert_eq!(s.metadata.uid.as_deref(), Some("uid-s"));
        assert!(s.metadata.annotations.is_none() && s.metadata.finalizers.is_none());
        let spec = s.spec.as_ref().unwrap();
        assert!(spec.type_.is_none() && spec.session_affinity.is_none());
        assert!(spec
            .ports
            .iter()
            .flatten()
            .all(|p| p.name.is_none() && p.node_port.is_none()));
    }

    #[test]
    fn a_slim_endpoint_slice_gives_the_same_backends_and_service() {
        use kuryr_api::loadbalancer::{LbEndpoint, LbEndpointConditions, LbTargetRef};
        use kuryr_api::slim_slice::SlimEndpointPort;
        // As `SlimEndpointSlice` reads it (kuryr-api's tests pin the reading), with metadata nobody reads.
        let endpoint = |ip: &str, ready: bool| LbEndpoint {
            addresses: vec![ip.into()],
            conditions: Some(LbEndpointConditions {
                ready: Some(ready),
                serving: Some(true),
                terminating: Some(!ready),
            }),
            target_ref: Some(LbTargetRef {
                kind: Some("Pod".into()),
                name: Some(format!("web-{ip}")),
                ..LbTargetRef::default()
            }),
            node_name: Some("node-1".into()),
            ..LbEndpoint::default()
        };
        let mut s = SlimEndpointSlice {
            metadata: ObjectMeta {
                name: Some("web-abcde".into()),
                namespace: Some("ns".into()),
                uid: Some("uid-e".into()),
                resource_version: Some("11".into()),
                generate_name: Some("web-".into()),
                annotations: Some([("a".to_string(), "b".to_string())].into()),
                owner_references: Some(vec![Default::default()]),
                ..ObjectMeta::default()
            },
            service_name: Some("web".into()),
            address_type: "IPv4".into(),
            endpoints: vec![endpoint("10.0.0.5", true), endpoint("10.0.0.6", false)],
            ports: vec![SlimEndpointPort {
                name: Some("http".into()),
                port: Some(8080),
                protocol: Some("TCP".into()),
            }],
        };
        let before = (
            kuryr_core::lb::endpoints::from_slices([&s], false),
            kuryr_core::lb::endpoints::from_slices([&s], true),
            crate::services::service_of(&s),
        );
        assert!(before.2.is_some());
        endpoint_slice(&mut s);
        assert_eq!(
            (
                kuryr_core::lb::endpoints::from_slices([&s], false),
                kuryr_core::lb::endpoints::from_slices([&s], true),
                crate::services::service_of(&s),
            ),
            before
        );
        let m = &s.metadata;
        assert_eq!(
            (m.uid.as_deref(), m.resource_version.as_deref()),
            (Some("uid-e"), Some("11"))
        );
        assert!(m.annotations.is_none() && m.owner_references.is_none() && m.generate_name.is_none());
    }

    #[test]
    fn compacted_lists_hold_no_slack() {
        let mut s = SlimEndpointSlice::default();
        s.endpoints.reserve(16);
        s.endpoints.push(Default::default());
        endpoint_slice(&mut s);
        assert_eq!((s.endpoints.len(), s.endpoints.capacity()), (1, 1));
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

    #[test]
    fn a_slim_kuryrport_keeps_its_identity_spec_status_and_finalizers() {
        let mut kp: KuryrPort = serde_json::from_value(serde_json::json!({
            "apiVersion": "openstack.org/v1", "kind": "KuryrPort",
            "metadata": {
                "name": "web-0", "namespace": "ns", "uid": "uid-1", "resourceVersion": "7", "generation": 2,
                "labels": {"kuryr.openstack.org/nodeName": "node-1"},
                "finalizers": ["kuryr.openstack.org/kuryrport-finalizer"],
                "deletionTimestamp": "2026-11-27T12:00:00Z",
                "managedFields": [{"manager": "kuryr-controller", "operation": "Apply"}]
            },
            "spec": {"podUid": "pod-1", "podNodeName": "node-1", "podStatic": false, "vifType": "nested-vlan",
                     "subnetIds": ["s-1"], "securityGroupIds": ["sg-1"]},
            "status": {
                "observedGeneration": 2,
                "conditions": [{"type": "Ready", "status": "True", "reason": "PortActive", "message": "m",
                                "lastTransitionTime": "2026-11-27T11:00:00Z"}],
                "vifs": {"eth0": {"default": true, "vif": {
                    "type": "nested-vlan", "portId": "port-1", "networkId": "net-1", "mac": "fa:16:3e:00:00:01",
                    "ips": [{"address": "10.0.0.5", "cidr": "10.0.0.0/24", "subnetId": "s-1"}],
                    "vlanId": 3018, "active": true}}}
            }
        }))
        .unwrap();
        let before = kp.clone();
        kuryrport(&mut kp);
        assert!(kp.metadata.labels.is_none());
        assert!(kp.metadata.managed_fields.is_none());
        let m = &kp.metadata;
        assert_eq!(
            (
                m.name.as_deref(),
                m.namespace.as_deref(),
                m.uid.as_deref(),
                m.resource_version.as_deref()
            ),
            (Some("web-0"), Some("ns"), Some("uid-1"), Some("7"))
        );
        assert_eq!(m.generation, Some(2));
        assert_eq!(m.finalizers, before.metadata.finalizers);
        assert_eq!(m.deletion_timestamp, before.metadata.deletion_timestamp);
        assert_eq!(kp.spec, before.spec);
        assert_eq!(kp.status, before.status);
    }
}
