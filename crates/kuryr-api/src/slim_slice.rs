//! An EndpointSlice as the Service front end keeps it: the fields `kuryr_core::lb::endpoints` reads,
//! deserialized straight from the API server's answers. Its endpoints are read in the KuryrLoadBalancer's
//! own endpoint shape ([`LbEndpoint`]: the same JSON paths), without the zone, hints and the target's
//! apiVersion and fieldPath that k8s-openapi's `Endpoint` also holds; the Service it belongs to is a field
//! of its own (its `kubernetes.io/service-name` label), not a map of labels (a one-entry `BTreeMap` is a
//! 540-byte node).

use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Deserializer};

use crate::labels::SERVICE_NAME;
use crate::loadbalancer::{LbEndpoint, LbEndpointConditions, LbTargetRef};
use crate::slim_meta::{lean_meta, trim_meta};

/// An EndpointSlice: its metadata (without `managedFields`, kubectl's last-applied copy and labels), the
/// Service it belongs to, its address type, endpoints and ports.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(from = "WireSlice")]
pub struct SlimEndpointSlice {
    pub metadata: ObjectMeta,
    /// Its `kubernetes.io/service-name` label.
    pub service_name: Option<String>,
    pub address_type: String,
    pub endpoints: Vec<LbEndpoint>,
    pub ports: Vec<SlimEndpointPort>,
}

/// The slice as the API server sends it (the fields read here).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireSlice {
    #[serde(default, deserialize_with = "lean_meta")]
    metadata: ObjectMeta,
    #[serde(default)]
    address_type: String,
    #[serde(default, deserialize_with = "null_as_empty")]
    endpoints: Vec<LbEndpoint>,
    #[serde(default, deserialize_with = "null_as_empty")]
    ports: Vec<SlimEndpointPort>,
}

impl From<WireSlice> for SlimEndpointSlice {
    fn from(w: WireSlice) -> Self {
        let mut metadata = w.metadata;
        let service_name = take_service(&mut metadata);
        Self {
            metadata,
            service_name,
            address_type: w.address_type,
            endpoints: w.endpoints,
            ports: w.ports,
        }
    }
}

/// A port of the slice's endpoints (its protocol as written: `kuryr_core` maps the ones it serves).
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
pub struct SlimEndpointPort {
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub port: Option<i32>,
    #[serde(default)]
    pub protocol: Option<String>,
}

crate::slim_meta::resource_as!(SlimEndpointSlice, EndpointSlice);

impl From<EndpointSlice> for SlimEndpointSlice {
    fn from(s: EndpointSlice) -> Self {
        let mut metadata = s.metadata;
        trim_meta(&mut metadata);
        let service_name = take_service(&mut metadata);
        Self {
            metadata,
            service_name,
            address_type: s.address_type,
            endpoints: s
                .endpoints
                .into_iter()
                .map(|e| LbEndpoint {
                    addresses: e.addresses,
                    conditions: e.conditions.map(|c| LbEndpointConditions {
                        ready: c.ready,
                        serving: c.serving,
                        terminating: c.terminating,
                    }),
                    hostname: e.hostname,
                    target_ref: e.target_ref.map(|r| LbTargetRef {
                        kind: r.kind,
                        name: r.name,
                        namespace: r.namespace,
                        resource_version: r.resource_version,
                        uid: r.uid,
                    }),
                    topology: None,
                    node_name: e.node_name,
                })
                .collect(),
            ports: s
                .ports
                .into_iter()
                .flatten()
                .map(|p| SlimEndpointPort {
                    name: p.name,
                    port: p.port,
                    protocol: p.protocol,
                })
                .collect(),
        }
    }
}

/// The Service's name out of the labels; the labels go (nothing here reads the others).
fn take_service(m: &mut ObjectMeta) -> Option<String> {
    m.labels.take().and_then(|mut l| l.remove(SERVICE_NAME))
}

/// A list the API server may send as `null` (Go's nil slice) as an empty one.
fn null_as_empty<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Vec<T>, D::Error> {
    Ok(Option::<Vec<T>>::deserialize(d)?.unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slice_json() -> serde_json::Value {
        serde_json::json!({
            "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {
                "name": "web-abcde", "namespace": "ns", "uid": "uid-e", "resourceVersion": "11",
                "generateName": "web-",
                "labels": {SERVICE_NAME: "web", "app": "web"},
                "ownerReferences": [{"apiVersion": "v1", "kind": "Service", "name": "web", "uid": "uid-s"}],
                "managedFields": [{"manager": "kube-controller-manager", "operation": "Update"}]
            },
            "addressType": "IPv4",
            "endpoints": [
                {"addresses": ["10.0.0.5"], "conditions": {"ready": true, "serving": true, "terminating": false},
                 "hostname": "web-0", "nodeName": "node-1", "zone": "az1",
                 "hints": {"forZones": [{"name": "az1"}]},
                 "targetRef": {"kind": "Pod", "name": "web-0", "namespace": "ns", "uid": "uid-p",
                               "resourceVersion": "3", "apiVersion": "v1", "fieldPath": "x"}},
                {"addresses": ["10.0.0.6"], "conditions": {"ready": false}, "nodeName": "node-2"}
            ],
            "ports": [{"name": "http", "port": 8080, "protocol": "TCP", "appProtocol": "http"}]
        })
    }

    /// Read from the API server's JSON or converted from an `EndpointSlice`, the same value.
    #[test]
    fn a_slice_read_slim_is_the_slice_converted() {
        let read: SlimEndpointSlice = serde_json::from_value(slice_json()).expect("parses");
        let whole: EndpointSlice = serde_json::from_value(slice_json()).expect("parses");
        assert_eq!(read, SlimEndpointSlice::from(whole));
        assert_eq!(read.service_name.as_deref(), Some("web"));
        let m = &read.metadata;
        assert!(m.labels.is_none() && m.managed_fields.is_none());
        assert_eq!(
            (m.uid.as_deref(), m.resource_version.as_deref()),
            (Some("uid-e"), Some("11"))
        );
        assert_eq!(read.endpoints.len(), 2);
        let t = read.endpoints[0].target_ref.as_ref().expect("target");
        assert_eq!(
            (t.name.as_deref(), t.uid.as_deref()),
            (Some("web-0"), Some("uid-p"))
        );
        assert_eq!(read.ports[0].protocol.as_deref(), Some("TCP"));
    }

    #[test]
    fn a_slice_without_endpoints_or_ports_reads_empty() {
        let read: SlimEndpointSlice = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "web-x", "namespace": "ns"}, "addressType": "IPv4",
            "endpoints": null, "ports": null
        }))
        .expect("parses");
        assert!(read.endpoints.is_empty() && read.ports.is_empty());
        assert_eq!(read.service_name, None);
    }
}
