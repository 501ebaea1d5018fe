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
//!
//! Each thread keeps one deflate and one inflate state and a JSON buffer, reset per use: a fresh deflate
//! state is a few hundred KB allocated and zeroed, and the KuryrPort watch packs every event at scale.

use std::borrow::Cow;
use std::cell::RefCell;
use std::fmt;
use std::marker::PhantomData;

use flate2::{Compress, Compression, Decompress, FlushCompress, FlushDecompress, Status};
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
        let body = SCRATCH.with(|scratch| {
            let Scratch { deflate, json, .. } = &mut *scratch.borrow_mut();
            json.clear();
            serde_json::to_writer(&mut *json, &obj)?;
            let body = deflated_with(deflate, json).map_err(serde_json::Error::io);
            trim(json);
            body
        })?;
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
        SCRATCH.with(|scratch| {
            let Scratch { inflate, json, .. } = &mut *scratch.borrow_mut();
            let obj = inflated_into(inflate, &self.body, json)
                .map_err(fail)
                .and_then(|()| serde_json::from_slice(json).map_err(|e| fail(e.to_string())));
            trim(json);
            obj
        })
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

/// A thread's packing state (see the module).
struct Scratch {
    deflate: Compress,
    inflate: Decompress,
    json: Vec<u8>,
}

thread_local! {
    static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch {
        deflate: Compress::new(Compression::fast(), false),
        inflate: Decompress::new(false),
        json: Vec::new(),
    });
}

/// The JSON buffer a thread keeps between objects: one unusually large object does not stay resident.
const SCRATCH_KEPT: usize = 64 * 1024;

fn trim(json: &mut Vec<u8>) {
    if json.capacity() > SCRATCH_KEPT {
        json.clear();
        json.shrink_to(SCRATCH_KEPT);
    }
}

/// `json` deflated (raw deflate, no header) with a thread's state, reset first.
fn deflated_with(z: &mut Compress, json: &[u8]) -> std::io::Result<Vec<u8>> {
    z.reset();
    let mut out = Vec::with_capacity(json.len() / 3 + 64);
    loop {
        let read = usize::try_from(z.total_in())
            .unwrap_or(json.len())
            .min(json.len());
        match z.compress_vec(&json[read..], &mut out, FlushCompress::Finish) {
            Ok(Status::StreamEnd) => return Ok(out),
            // The output was full: room for as much again.
            Ok(Status::Ok | Status::BufError) => out.reserve(out.capacity().max(64)),
            Err(e) => return Err(std::io::Error::other(e)),
        }
    }
}

/// `body` inflated into `out` with a thread's state, reset first; a body that ends early is an error.
fn inflated_into(z: &mut Decompress, body: &[u8], out: &mut Vec<u8>) -> Result<(), String> {
    z.reset(false);
    out.clear();
    out.reserve(body.len() * 5);
    loop {
        let before = (z.total_in(), z.total_out());
        let read = usize::try_from(before.0).unwrap_or(body.len()).min(body.len());
        // Not `Finish`: miniz_oxide takes that as "the output holds it all" and fails a body that
        // does not fit the first guess.
        match z.decompress_vec(&body[read..], out, FlushDecompress::None) {
            Ok(Status::StreamEnd) => return Ok(()),
            Ok(_) if out.len() == out.capacity() => out.reserve(out.capacity()),
            Ok(_) if (z.total_in(), z.total_out()) == before => {
                return Err("the packed body ends early".into())
            }
            Ok(_) => {}
            Err(e) => return Err(e.to_string()),
        }
    }
}

/// `json` deflated as a packed body is.
#[cfg(test)]
fn deflated(json: &[u8]) -> Vec<u8> {
    deflated_with(&mut Compress::new(Compression::fast(), false), json).expect("in memory")
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
    fn one_thread_packs_and_unpacks_objects_of_every_size_with_its_one_state() {
        // Sizes around the output's first guess and far past the buffer a thread keeps.
        let sizes = [0usize, 10, 1_000, 40_000, 200_000, 3];
        let objects: Vec<KuryrLoadBalancer> = sizes
            .iter()
            .enumerate()
            .map(|(i, n)| {
                let mut k = klb();
                k.metadata.managed_fields = None;
                // Text that does not repeat, so its deflated form is large too.
                let noise: String = (0..*n)
                    .map(|j| char::from(b'a' + ((j * 7919 + i * 31) % 26) as u8))
                    .collect();
                k.metadata.annotations = Some([("noise".to_string(), noise)].into());
                k
            })
            .collect();
        let packed: Vec<Packed<KuryrLoadBalancer>> = objects
            .iter()
            .map(|k| Packed::pack(k.clone()).expect("packs"))
            .collect();
        for (k, p) in objects.iter().zip(&packed).rev() {
            assert_eq!(&p.unpack().expect("unpacks"), k);
        }
        SCRATCH.with(|s| assert!(s.borrow().json.capacity() <= SCRATCH_KEPT));
    }

    #[test]
    fn a_body_cut_short_says_so() {
        let mut packed: Packed<KuryrLoadBalancer> = Packed::pack(klb()).expect("packs");
        let half = packed.body.len() / 2;
        packed.body = packed.body[..half].into();
        let err = packed.unpack().expect_err("half a body");
        assert!(err.to_string().contains("ends early"), "{err}");
        // The thread's state is still good for the next object.
        let again: Packed<KuryrLoadBalancer> = Packed::pack(klb()).expect("packs");
        assert_eq!(
            again.unpack().expect("unpacks").metadata.name.as_deref(),
            Some("web")
        );
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
