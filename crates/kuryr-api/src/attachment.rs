//! NetworkAttachmentDefinition (`k8s.cni.cncf.io/v1`, the Network Plumbing WG's multi-network CRD, which
//! Multus installs): kuryr-rs only reads it. A pod's `k8s.v1.cni.cncf.io/networks` names these; each one
//! kuryr-rs serves carries the Neutron subnet in the `openstack.org/kuryr-config` annotation, as upstream
//! Kuryr's NPWG driver read it: `{"subnetId": "<id>"}`.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// On a NetworkAttachmentDefinition: `{"subnetId": "<Neutron subnet id>"}`.
pub const KURYR_CONFIG: &str = "openstack.org/kuryr-config";

/// The Network Plumbing WG's spec: an optional CNI config (kuryr-rs does not read it).
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "k8s.cni.cncf.io",
    version = "v1",
    kind = "NetworkAttachmentDefinition",
    plural = "network-attachment-definitions",
    shortname = "net-attach-def",
    namespaced
)]
pub struct NetworkAttachmentDefinitionSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<String>,
}
