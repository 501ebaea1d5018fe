//! Kuryr's Kubernetes API: the four `openstack.org/v1` CRDs (KuryrPort, KuryrNetwork, KuryrLoadBalancer,
//! KuryrNetworkPolicy) with upstream Kuryr's names and JSON field names, plus status subresources, typed
//! status and conditions; the finalizer, label and annotation keys; and the kube / k8s-openapi types the
//! other crates use, re-exported so they all import them from here.
//!
//! With the `client` feature, also what talks to an API server: `Api`/`Client`, [`kubeconfig`], [`scoped`]
//! and [`owners`]. Without it this crate is plain types, and so is kuryr-core, which depends on it.

#![forbid(unsafe_code)]

pub mod annotations;
pub mod attachment;
pub mod conditions;
pub mod crds;
pub mod finalizers;
pub mod kube_version;
#[cfg(feature = "client")]
pub mod kubeconfig;
pub mod labels;
pub mod loadbalancer;
pub mod network;
pub mod ovo;
#[cfg(feature = "client")]
pub mod owners;
pub mod policy;
pub mod port;
mod schema;
#[cfg(feature = "client")]
mod scope;
pub mod slim_meta;
pub mod slim_pod;
pub mod slim_slice;
pub mod vif;

pub use attachment::{NetworkAttachmentDefinition, NetworkAttachmentDefinitionSpec};
pub use conditions::{Condition, ConditionStatus};
pub use loadbalancer::{KuryrLoadBalancer, KuryrLoadBalancerSpec, KuryrLoadBalancerStatus};
pub use network::{KuryrNetwork, KuryrNetworkSpec, KuryrNetworkStatus};
pub use policy::{KuryrNetworkPolicy, KuryrNetworkPolicySpec, KuryrNetworkPolicyStatus};
pub use port::{AdditionalNetwork, KuryrPort, KuryrPortSpec, KuryrPortStatus, PodVif};
#[cfg(feature = "client")]
pub use scope::scoped;
pub use slim_pod::SlimPod;
pub use slim_slice::SlimEndpointSlice;
pub use vif::{Vif, VifIp, VifType};

// === Re-exports ===
// Other crates depend on these through `kuryr_api` so the kube / k8s-openapi versions and k8s-openapi's
// API-level feature are chosen in one place.
pub use k8s_openapi;
pub use kube;

pub use k8s_openapi::api::coordination::v1::Lease;
pub use k8s_openapi::api::core::v1::{
    Endpoints, Event, Namespace, Node, ObjectReference, Pod, Service, ServicePort,
};
pub use k8s_openapi::api::networking::v1::NetworkPolicy;
pub use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
pub use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, OwnerReference, Time};
// Request parameters are plain types (kube-core): there with or without the client.
pub use kube::core::params::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
#[cfg(feature = "client")]
pub use kube::{Api, Client};
pub use kube::{CustomResourceExt, Resource, ResourceExt};

/// API group of every Kuryr CRD.
pub const GROUP: &str = "openstack.org";
/// API version of every Kuryr CRD.
pub const VERSION: &str = "v1";
/// `apiVersion` of every Kuryr object.
pub const API_VERSION: &str = "openstack.org/v1";

/// Errors of this crate.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Rendering a CRD as YAML failed.
    #[error("serializing CRD to YAML: {0}")]
    Yaml(#[from] serde_yaml::Error),
    /// A JSON value did not have the expected typed shape.
    #[error("decoding: {0}")]
    Json(#[from] serde_json::Error),
    /// An upstream os-vif VIF primitive could not be read.
    #[error("upstream os-vif VIF object: {0}")]
    LegacyVif(String),
}
