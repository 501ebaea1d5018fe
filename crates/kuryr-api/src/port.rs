//! KuryrPort (`kp`): one per Pod, same name and namespace, owned by the Pod. The controller allocates the
//! pod's Neutron port(s) and records them in `status.vifs`; the CNI daemon on `spec.podNodeName` wires them.

use std::collections::BTreeMap;

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::conditions::Condition;
use crate::vif::{Vif, VifType};

/// Interface name of a pod's default (first) interface; printer columns read this entry of `status.vifs`.
pub const DEFAULT_IFNAME: &str = "eth0";

/// Desired wiring of a pod. `podUid`, `podNodeName` and `podStatic` are upstream's; the rest are optional
/// requests that let a controller record its decisions (or an operator pin them) before ports exist.
// Every `printcolumn(...)` repeats keys like `type_`, which clippy takes for duplicated attributes.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "openstack.org",
    version = "v1",
    kind = "KuryrPort",
    plural = "kuryrports",
    shortname = "kp",
    namespaced,
    category = "kuryr",
    status = "KuryrPortStatus",
    derive = "PartialEq",
    doc = "Neutron port(s) of one Pod: requested in spec, allocated and reported in status.vifs.",
    printcolumn(
        name = "Node",
        type_ = "string",
        json_path = ".spec.podNodeName",
        description = "Node the pod runs on"
    ),
    printcolumn(
        name = "Type",
        type_ = "string",
        json_path = ".status.vifs.eth0.vif.type",
        description = "How eth0 is wired"
    ),
    printcolumn(
        name = "IP",
        type_ = "string",
        json_path = ".status.vifs.eth0.vif.ips[0].address",
        description = "First IP of eth0"
    ),
    printcolumn(
        name = "VLAN",
        type_ = "integer",
        json_path = ".status.vifs.eth0.vif.vlanId",
        description = "Trunk subport VLAN of eth0 (nested-vlan)"
    ),
    printcolumn(
        name = "Active",
        type_ = "boolean",
        json_path = ".status.vifs.eth0.vif.active",
        description = "Neutron port of eth0 is ACTIVE"
    ),
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].status"
    ),
    printcolumn(
        name = "Port",
        type_ = "string",
        json_path = ".status.vifs.eth0.vif.portId",
        description = "Neutron port of eth0",
        priority = 1
    ),
    printcolumn(
        name = "MAC",
        type_ = "string",
        json_path = ".status.vifs.eth0.vif.mac",
        priority = 1
    ),
    printcolumn(name = "Pod UID", type_ = "string", json_path = ".spec.podUid", priority = 1),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp")
)]
#[serde(rename_all = "camelCase")]
pub struct KuryrPortSpec {
    /// UID of the Pod; the CNI daemon refuses to wire a pod whose `K8S_POD_UID` differs (same-name
    /// StatefulSet pods).
    #[schemars(length(min = 1))]
    pub pod_uid: String,
    /// Node the pod is scheduled on (also in the `kuryr.openstack.org/nodeName` label).
    #[schemars(length(min = 1))]
    pub pod_node_name: String,
    /// Static (kubelet-manifest) pod: no finalizer can be set on it.
    #[serde(default)]
    pub pod_static: bool,
    /// Wiring to use; absent means the controller's configured default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vif_type: Option<VifType>,
    /// OpenStack project owning the port(s); absent means the controller's project driver decides.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project_id: Option<String>,
    /// Neutron subnets to take IPs from; absent means the namespace's / default pod subnet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subnet_ids: Option<Vec<String>>,
    /// Security groups the port must have; absent means the controller's security group driver decides.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub security_group_ids: Option<Vec<String>>,
    /// Networks besides the default one (the pod's `k8s.v1.cni.cncf.io/networks`, resolved through
    /// NetworkAttachmentDefinitions when the KuryrPort was made): one port and one interface each.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub additional_networks: Vec<AdditionalNetwork>,
}

/// One extra interface of a pod: its name in the pod, the Neutron subnet its port takes its IP from, and
/// the NetworkAttachmentDefinition (`namespace/name`) that asked for it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AdditionalNetwork {
    #[schemars(length(min = 1))]
    pub interface: String,
    #[schemars(length(min = 1))]
    pub subnet_id: String,
    #[serde(default)]
    pub attachment: String,
}

/// Allocated interfaces of the pod and how far wiring got.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KuryrPortStatus {
    /// Interfaces keyed by in-pod interface name (`eth0`, then additional networks).
    // Boxed: a map's node reserves room for 11 values and a `PodVif` is ~340 B, so a one-interface pod
    // held ~3.4 KB of empty slots in every cache of KuryrPorts (tests/footprint.rs in kuryr-controller).
    #[serde(default)]
    pub vifs: BTreeMap<String, Box<PodVif>>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
    /// `metadata.generation` this status was computed from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

/// One entry of `status.vifs` (upstream's `{default, vif}` pair).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PodVif {
    /// The pod's default-route interface.
    #[serde(default)]
    pub default: bool,
    /// Accepts upstream's os-vif blob as well as the typed form.
    #[serde(deserialize_with = "crate::ovo::deserialize_tolerant")]
    pub vif: Vif,
}

impl KuryrPortStatus {
    /// The default interface: the entry marked `default`, else `eth0`.
    pub fn default_vif(&self) -> Option<(&str, &Vif)> {
        self.vifs
            .iter()
            .find(|(_, v)| v.default)
            .or_else(|| self.vifs.get_key_value(DEFAULT_IFNAME))
            .map(|(name, v)| (name.as_str(), &v.vif))
    }

    /// All interfaces allocated and ACTIVE (false when none are allocated yet).
    pub fn all_active(&self) -> bool {
        !self.vifs.is_empty() && self.vifs.values().all(|v| v.vif.active)
    }
}
