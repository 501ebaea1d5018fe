//! KuryrNetwork (`kns`): one per Namespace (namespace subnet driver), named after it and living in it. The
//! controller creates the namespace's Neutron network and subnet, plugs the subnet into the pod router and
//! records the IDs in status.

use std::collections::BTreeMap;

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::conditions::Condition;

/// Desired network of a namespace (upstream field names).
// Every `printcolumn(...)` repeats keys like `type_`, which clippy takes for duplicated attributes.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "openstack.org",
    version = "v1",
    kind = "KuryrNetwork",
    plural = "kuryrnetworks",
    shortname = "kns",
    namespaced,
    category = "kuryr",
    status = "KuryrNetworkStatus",
    derive = "PartialEq",
    doc = "Neutron network, subnet and router interface of one Namespace.",
    printcolumn(
        name = "Subnet-CIDR",
        type_ = "string",
        json_path = ".status.subnetCIDR",
        description = "The subnet CIDR allocated to the namespace"
    ),
    printcolumn(
        name = "Populated",
        type_ = "boolean",
        json_path = ".status.populated",
        description = "Port pools pre-filled for this network"
    ),
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].status"
    ),
    printcolumn(name = "Network", type_ = "string", json_path = ".status.netId", priority = 1),
    printcolumn(
        name = "Subnet",
        type_ = "string",
        json_path = ".status.subnetId",
        priority = 1
    ),
    printcolumn(
        name = "Router",
        type_ = "string",
        json_path = ".status.routerId",
        priority = 1
    ),
    printcolumn(
        name = "Project",
        type_ = "string",
        json_path = ".spec.projectId",
        priority = 1
    ),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp")
)]
#[serde(rename_all = "camelCase")]
pub struct KuryrNetworkSpec {
    /// The Namespace this network is for.
    #[schemars(length(min = 1))]
    pub ns_name: String,
    /// OpenStack project owning the network.
    #[schemars(length(min = 1))]
    pub project_id: String,
    /// The Namespace's labels (network policies select namespaces by them).
    #[serde(default)]
    pub ns_labels: BTreeMap<String, String>,
}

/// What exists in Neutron for the namespace.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KuryrNetworkStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub net_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subnet_id: Option<String>,
    /// Upstream spelling (`CIDR`, not `Cidr`).
    #[serde(rename = "subnetCIDR", default, skip_serializing_if = "Option::is_none")]
    pub subnet_cidr: Option<String>,
    /// Dual-stack: the namespace's subnet of the other IP family (from the secondary subnet pool).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secondary_subnet_id: Option<String>,
    #[serde(
        rename = "secondarySubnetCIDR",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub secondary_subnet_cidr: Option<String>,
    /// Router the subnet is plugged into.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub router_id: Option<String>,
    /// Port pools for this network have been pre-filled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub populated: Option<bool>,
    /// Namespace labels last acted upon (policies re-evaluated when they change).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ns_labels: Option<BTreeMap<String, String>>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}
