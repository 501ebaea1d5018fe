//! What the caches' own types (`SlimPod`, `SlimEndpointSlice`) share: their metadata, read without
//! `managedFields` and trimmed as every cache here trims it, and their `kube::Resource` impl, which names the
//! Kubernetes kind whose API answers they are read from.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use serde::{Deserialize, Deserializer};

use crate::annotations::LAST_APPLIED;

/// `impl kube::Resource for $slim` as the k8s-openapi kind `$kind` (its group, version, kind and plural):
/// the cache's type is read from that kind's API answers and watched under its name.
macro_rules! resource_as {
    ($slim:ty, $kind:ty) => {
        impl kube::Resource for $slim {
            type DynamicType = ();
            type Scope = <$kind as k8s_openapi::Resource>::Scope;

            fn kind(_: &()) -> std::borrow::Cow<'_, str> {
                <$kind as k8s_openapi::Resource>::KIND.into()
            }
            fn group(_: &()) -> std::borrow::Cow<'_, str> {
                <$kind as k8s_openapi::Resource>::GROUP.into()
            }
            fn version(_: &()) -> std::borrow::Cow<'_, str> {
                <$kind as k8s_openapi::Resource>::VERSION.into()
            }
            fn api_version(_: &()) -> std::borrow::Cow<'_, str> {
                <$kind as k8s_openapi::Resource>::API_VERSION.into()
            }
            fn plural(_: &()) -> std::borrow::Cow<'_, str> {
                <$kind as k8s_openapi::Resource>::URL_PATH_SEGMENT.into()
            }
            fn meta(&self) -> &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                &self.metadata
            }
            fn meta_mut(&mut self) -> &mut k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                &mut self.metadata
            }
        }
    };
}
pub(crate) use resource_as;

/// `ObjectMeta` as the API server sends it, but for `managedFields` (a JSON document per writer, parsed
/// into a tree of maps only to be dropped) and `selfLink`, which are skipped unparsed.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct LeanMeta {
    annotations: Option<BTreeMap<String, String>>,
    creation_timestamp: Option<Time>,
    deletion_grace_period_seconds: Option<i64>,
    deletion_timestamp: Option<Time>,
    finalizers: Option<Vec<String>>,
    generate_name: Option<String>,
    generation: Option<i64>,
    labels: Option<BTreeMap<String, String>>,
    name: Option<String>,
    namespace: Option<String>,
    owner_references: Option<Vec<OwnerReference>>,
    resource_version: Option<String>,
    uid: Option<String>,
}

/// Deserializes an object's metadata as [`LeanMeta`], then [`trim_meta`].
pub(crate) fn lean_meta<'de, D: Deserializer<'de>>(d: D) -> Result<ObjectMeta, D::Error> {
    let m = LeanMeta::deserialize(d)?;
    let mut meta = ObjectMeta {
        annotations: m.annotations,
        creation_timestamp: m.creation_timestamp,
        deletion_grace_period_seconds: m.deletion_grace_period_seconds,
        deletion_timestamp: m.deletion_timestamp,
        finalizers: m.finalizers,
        generate_name: m.generate_name,
        generation: m.generation,
        labels: m.labels,
        name: m.name,
        namespace: m.namespace,
        owner_references: m.owner_references,
        resource_version: m.resource_version,
        uid: m.uid,
        managed_fields: None,
        self_link: None,
    };
    trim_meta(&mut meta);
    Ok(meta)
}

/// What no cache here keeps of any object's metadata: `managedFields` (one JSON document per writer) and
/// `kubectl apply`'s copy of the whole object.
pub fn trim_meta(m: &mut ObjectMeta) {
    m.managed_fields = None;
    if let Some(a) = m.annotations.as_mut() {
        a.remove(LAST_APPLIED);
    }
}
