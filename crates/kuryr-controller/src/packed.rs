//! A cached object kept packed: its name, namespace, uid and resourceVersion as they are, the rest (the whole
//! object but `managedFields`, as JSON) deflated, and unpacked whole by whoever reads it.
//!
//! For a cache whose objects are large, read whole and read rarely: the KuryrLoadBalancer, which carries a
//! Service's endpoints (its spec) and a row per Octavia member (its status), all of it read by the round
//! that reconciles it and by the front end comparing specs, each once per change. Held as parsed it was
//! 11.4 KB with ten members (`tests/footprint.rs`), most of a Service's share of the caches; its JSON is
//! ~6.5 KB and deflates to ~1.5 (the ids repeat: project, load balancer, pool, subnet). Unpacking is an
//! inflate and a parse, tens of microseconds, once per reconcile.
//!
//! What a cache is searched by, across all its objects, is kept beside the body as a [`Summary`] taken when
//! the object is packed (a KuryrPort's port ids), so a search unpacks nothing.

use std::borrow::Cow;
use std::fmt;
use std::io::Read;
use std::marker::PhantomData;

use flate2::read::DeflateDecoder;
use flate2::write::DeflateEncoder;
use flate2::Compression;
use kube::api::ObjectMeta;
use kube::Resource;
use serde::de::{DeserializeOwned, Error as _};
use serde::{Deserialize, Deserializer, Serialize};

/// `K` packed (see the module), with its summary `S`. Read as `K`'s API answers: `Api<Packed<K>>` watches
/// `K`'s kind.
pub struct Packed<K, S = ()> {
    /// Name, namespace, uid and resourceVersion: what the store, the controller's queue and logs use.
    metadata: ObjectMeta,
    summary: S,
    /// The object without `managedFields`, JSON, deflated.
    body: Box<[u8]>,
    kind: PhantomData<fn() -> K>,
}

/// What a packed cache's searches read of each object, taken from it when it is packed.
pub trait Summary<K>: Sized {
    fn of(obj: &K) -> Self;
}

impl<K> Summary<K> for () {
    fn of(_: &K) -> Self {}
}

/// A packed object that no longer reads as its kind (a bug: it was written from one).
#[derive(Debug, thiserror::Error)]
#[error("a packed {kind} does not unpack: {reason}")]
pub struct UnpackError {
    kind: String,
    reason: String,
}

impl<K, S> Packed<K, S>
where
    K: Resource<DynamicType = ()> + Serialize + DeserializeOwned,
    S: Summary<K>,
{
    /// `obj` packed, its `managedFields` dropped.
    pub fn pack(mut obj: K) -> Result<Self, serde_json::Error> {
        obj.meta_mut().managed_fields = None;
        let summary = S::of(&obj);
        let m = obj.meta();
        let metadata = ObjectMeta {
            name: m.name.clone(),
            namespace: m.namespace.clone(),
            uid: m.uid.clone(),
            resource_version: m.resource_version.clone(),
            ..Default::default()
        };
        let mut deflate = DeflateEncoder::new(Vec::new(), Compression::fast());
        serde_json::to_writer(&mut deflate, &obj)?;
        let body = deflate.finish().map_err(serde_json::Error::io)?;
        Ok(Self {
            metadata,
            summary,
            body: body.into_boxed_slice(),
            kind: PhantomData,
        })
    }

    /// What the object's summary took from it when it was packed.
    pub fn summary(&self) -> &S {
        &self.summary
    }

    /// The object as it was packed.
    pub fn unpack(&self) -> Result<K, UnpackError> {
        let fail = |reason: String| UnpackError {
            kind: K::kind(&()).into_owned(),
            reason,
        };
        let mut json = Vec::with_capacity(self.body.len() * 5);
        DeflateDecoder::new(&self.body[..])
            .read_to_end(&mut json)
            .map_err(|e| fail(e.to_string()))?;
        serde_json::from_slice(&json).map_err(|e| fail(e.to_string()))
    }

    /// Bytes the packed body holds.
    pub fn packed_len(&self) -> usize {
        self.body.len()
    }
}

impl<'de, K, S> Deserialize<'de> for Packed<K, S>
where
    K: Resource<DynamicType = ()> + Serialize + DeserializeOwned,
    S: Summary<K>,
{
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let obj = K::deserialize(d)?;
        Self::pack(obj).map_err(D::Error::custom)
    }
}

impl<K, S: Clone> Clone for Packed<K, S> {
    fn clone(&self) -> Self {
        Self {
            metadata: self.metadata.clone(),
            summary: self.summary.clone(),
            body: self.body.clone(),
            kind: PhantomData,
        }
    }
}

impl<K, S> fmt::Debug for Packed<K, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Packed")
            .field("namespace", &self.metadata.namespace)
            .field("name", &self.metadata.name)
            .field("resource_version", &self.metadata.resource_version)
            .field("packed_bytes", &self.body.len())
            .finish()
    }
}

impl<K: Resource<DynamicType = ()>, S> Resource for Packed<K, S> {
    type DynamicType = ();
    type Scope = K::Scope;

    fn kind(dt: &()) -> Cow<'_, str> {
        K::kind(dt)
    }
    fn group(dt: &()) -> Cow<'_, str> {
        K::group(dt)
    }
    fn version(dt: &()) -> Cow<'_, str> {
        K::version(dt)
    }
    fn api_version(dt: &()) -> Cow<'_, str> {
        K::api_version(dt)
    }
    fn plural(dt: &()) -> Cow<'_, str> {
        K::plural(dt)
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

/// `json` deflated as a packed body is.
#[cfg(test)]
fn deflated(json: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut e = DeflateEncoder::new(Vec::new(), Compression::fast());
    e.write_all(json).expect("in memory");
    e.finish().expect("in memory")
}

#[cfg(test)]
mod tests {
    use super::*;
    use kuryr_api::{KuryrLoadBalancer, KuryrLoadBalancerSpec, ResourceExt};

    fn klb() -> KuryrLoadBalancer {
        let mut k = KuryrLoadBalancer::new(
            "web",
            KuryrLoadBalancerSpec {
                ip: Some("198.19.0.10".into()),
                ..Default::default()
            },
        );
        k.metadata.namespace = Some("shop".into());
        k.metadata.uid = Some("u-1".into());
        k.metadata.resource_version = Some("42".into());
        k.metadata.finalizers = Some(vec!["f".into()]);
        k.metadata.managed_fields = Some(vec![Default::default()]);
        k
    }

    #[test]
    fn an_object_unpacks_as_it_was_but_its_managed_fields() {
        let packed: Packed<KuryrLoadBalancer> = Packed::pack(klb()).expect("packs");
        let mut want = klb();
        want.metadata.managed_fields = None;
        assert_eq!(packed.unpack().expect("unpacks"), want);
        assert_eq!(packed.name_any(), "web");
        assert_eq!(packed.namespace().as_deref(), Some("shop"));
        assert_eq!(packed.resource_version().as_deref(), Some("42"));
        assert_eq!(packed.uid().as_deref(), Some("u-1"));
        assert!(
            packed.finalizers().is_empty(),
            "the rest of the metadata is packed"
        );
    }

    #[test]
    fn an_api_answer_is_read_straight_into_its_packed_form_spec_and_status_whole() {
        let answer = serde_json::json!({
            "apiVersion": "openstack.org/v1", "kind": "KuryrLoadBalancer",
            "metadata": {"name": "web", "namespace": "ns", "uid": "uid-k", "resourceVersion": "7",
                         "ownerReferences": [{"apiVersion": "v1", "kind": "Service", "name": "web", "uid": "uid-s"}],
                         "managedFields": [{"manager": "kuryr-controller", "operation": "Update"}]},
            "spec": {"ip": "10.96.0.10", "ports": [{"port": 80, "protocol": "TCP", "targetPort": "8080"}],
                     "endpointSlices": [{"endpoints": [{"addresses": ["10.0.0.5"]}], "ports": [{"port": 8080}]}]},
            "status": {"loadbalancer": {"id": "lb", "name": "ns/web", "ip": "10.96.0.10", "port_id": "p",
                                        "project_id": "pr", "subnet_id": "s"},
                       "members": [{"id": "m", "ip": "10.0.0.5", "name": "", "pool_id": "po", "port": 8080,
                                    "project_id": "pr", "subnet_id": "s"}],
                       "observedGeneration": 1}
        });
        let packed: Packed<KuryrLoadBalancer> = serde_json::from_value(answer.clone()).expect("reads");
        let mut want: KuryrLoadBalancer = serde_json::from_value(answer.clone()).expect("parses");
        want.metadata.managed_fields = None;
        assert!(want.status.as_ref().is_some_and(|s| s.members.len() == 1));
        assert_eq!(packed.unpack().expect("unpacks"), want);
        assert!(packed.packed_len() < answer.to_string().len());
    }

    #[test]
    fn a_body_that_is_not_its_kind_says_so() {
        let mut packed: Packed<KuryrLoadBalancer> = Packed::pack(klb()).expect("packs");
        packed.body = deflated(b"{\"spec\": 7}").into_boxed_slice();
        let err = packed.unpack().expect_err("not a KuryrLoadBalancer");
        assert!(
            err.to_string()
                .starts_with("a packed KuryrLoadBalancer does not unpack"),
            "{err}"
        );
    }
}
