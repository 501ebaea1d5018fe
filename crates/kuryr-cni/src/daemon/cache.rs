//! The daemon's view of its node: KuryrPorts labelled for it and its Pods, fed by watch events (or by tests),
//! with a generation counter on a `watch` channel so waiting ADDs wake on every change.

use std::collections::HashMap;
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

use kuryr_api::{KuryrPort, Pod, ResourceExt};
use tokio::sync::watch;

/// What ADD needs of a Pod.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodState {
    pub uid: String,
    /// `deletionTimestamp` is set.
    pub deleting: bool,
}

impl PodState {
    pub fn from_pod(pod: &Pod) -> Self {
        Self {
            uid: pod.uid().unwrap_or_default(),
            deleting: pod.metadata.deletion_timestamp.is_some(),
        }
    }
}

/// Everything known about one pod at one moment.
#[derive(Clone, Debug, Default)]
pub struct Lookup {
    pub port: Option<Arc<KuryrPort>>,
    pub pod: Option<PodState>,
    /// The pod list is complete: a missing pod really is gone.
    pub pods_synced: bool,
}

type Key = (String, String);

#[derive(Default)]
struct Inner {
    ports: HashMap<Key, Arc<KuryrPort>>,
    pods: HashMap<Key, PodState>,
    ports_synced: bool,
    pods_synced: bool,
}

pub struct NodeCache {
    inner: RwLock<Inner>,
    changed: watch::Sender<u64>,
}

impl Default for NodeCache {
    fn default() -> Self {
        Self {
            inner: RwLock::default(),
            changed: watch::channel(0).0,
        }
    }
}

fn key_of<K: ResourceExt>(o: &K) -> Key {
    (o.namespace().unwrap_or_default(), o.name_any())
}

impl NodeCache {
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    // A panic while holding the lock leaves plain maps behind, still usable.
    fn read(&self) -> RwLockReadGuard<'_, Inner> {
        self.inner.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> RwLockWriteGuard<'_, Inner> {
        self.inner.write().unwrap_or_else(|e| e.into_inner())
    }

    fn bump(&self) {
        self.changed.send_modify(|g| *g = g.wrapping_add(1));
    }

    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.changed.subscribe()
    }

    pub fn lookup(&self, namespace: &str, name: &str) -> Lookup {
        let key = (namespace.to_string(), name.to_string());
        let inner = self.read();
        Lookup {
            port: inner.ports.get(&key).cloned(),
            pod: inner.pods.get(&key).cloned(),
            pods_synced: inner.pods_synced,
        }
    }

    pub fn is_synced(&self) -> bool {
        let inner = self.read();
        inner.ports_synced && inner.pods_synced
    }

    pub fn apply_port(&self, port: KuryrPort) {
        self.write().ports.insert(key_of(&port), Arc::new(port));
        self.bump();
    }

    pub fn delete_port(&self, port: &KuryrPort) {
        self.write().ports.remove(&key_of(port));
        self.bump();
    }

    /// Replaces every KuryrPort after a (re)list and marks the ports synced.
    pub fn reset_ports(&self, ports: impl IntoIterator<Item = KuryrPort>) {
        {
            let mut inner = self.write();
            inner.ports = ports.into_iter().map(|p| (key_of(&p), Arc::new(p))).collect();
            inner.ports_synced = true;
        }
        self.bump();
    }

    pub fn apply_pod(&self, pod: &Pod) {
        self.write().pods.insert(key_of(pod), PodState::from_pod(pod));
        self.bump();
    }

    pub fn delete_pod(&self, pod: &Pod) {
        self.write().pods.remove(&key_of(pod));
        self.bump();
    }

    /// Replaces every Pod after a (re)list and marks the pods synced.
    pub fn reset_pods<'a>(&self, pods: impl IntoIterator<Item = &'a Pod>) {
        {
            let mut inner = self.write();
            inner.pods = pods
                .into_iter()
                .map(|p| (key_of(p), PodState::from_pod(p)))
                .collect();
            inner.pods_synced = true;
        }
        self.bump();
    }

    /// Test/fake use: a pod known by key only.
    pub fn set_pod_state(&self, namespace: &str, name: &str, state: Option<PodState>) {
        {
            let mut inner = self.write();
            let key = (namespace.to_string(), name.to_string());
            match state {
                Some(s) => inner.pods.insert(key, s),
                None => inner.pods.remove(&key),
            };
            inner.pods_synced = true;
        }
        self.bump();
    }
}
