//! Which namespaces the controllers handle: all, the one of `--namespace`, or those matching
//! `--namespace-selector`. Namespaced objects are watched cluster-wide (or in the one namespace) and kept
//! only when their namespace is in the watched set (the namespace and NetworkPolicy controllers, through the
//! filtered Namespace cache) or [`Selection::selects`] it (the Pod, KuryrPort, KuryrNetwork, Service and
//! KuryrLoadBalancer controllers).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;
use kuryr_api::{Api, ListParams, Namespace};

use crate::config::Config;
use crate::errors::{Error, Result};
use crate::toolkit::lock;

/// How long an answer read off a Namespace ([`selected`], its project) is reused: a burst of pods in one
/// namespace asks once, and a namespace relabelled or re-annotated is seen within this.
const NAMESPACE_TTL: Duration = Duration::from_secs(10);

/// Answers read off Namespaces, per namespace, with when they were read.
pub struct NamespaceCache<T>(Mutex<HashMap<String, (T, Instant)>>);

impl<T> Default for NamespaceCache<T> {
    fn default() -> Self {
        Self(Mutex::new(HashMap::new()))
    }
}

impl<T: Clone> NamespaceCache<T> {
    pub fn get(&self, ns: &str, now: Instant) -> Option<T> {
        let map = lock(&self.0);
        map.get(ns)
            .filter(|(_, at)| now.duration_since(*at) < NAMESPACE_TTL)
            .map(|(v, _)| v.clone())
    }

    pub fn put(&self, ns: &str, value: T, now: Instant) {
        let mut map = lock(&self.0);
        map.insert(ns.to_owned(), (value, now));
    }
}

/// `--namespace-selector` and its answers, per namespace. Pods, KuryrPorts, KuryrNetworks, Services and
/// KuryrLoadBalancers are watched cluster-wide, so this is what keeps a controller off another controller's
/// namespaces (several clusters, or a test, sharing one API server): there it neither wires, nor builds load
/// balancers, nor releases, nor touches finalizers. A namespace being deleted keeps its labels, so it still
/// matches and its cleanup runs. A namespace relabelled out of the selector is left to whichever controller
/// selects it now.
#[derive(Default)]
pub struct Selection {
    selector: Option<String>,
    answers: NamespaceCache<bool>,
}

impl Selection {
    pub fn new(selector: Option<String>) -> Self {
        Self {
            selector,
            answers: NamespaceCache::default(),
        }
    }

    /// Whether namespace `ns` matches the selector (always, without one).
    pub async fn selects(&self, client: &kube::Client, ns: &str) -> Result<bool> {
        let Some(selector) = &self.selector else {
            return Ok(true);
        };
        if let Some(yes) = self.answers.get(ns, Instant::now()) {
            return Ok(yes);
        }
        let namespaces: Api<Namespace> = Api::all(client.clone());
        let params = ListParams::default()
            .labels(selector)
            .fields(&format!("metadata.name={ns}"));
        let found = namespaces
            .list_metadata(&params)
            .await
            .map_err(Error::kube("list_namespaces"))?;
        let yes = !found.items.is_empty();
        self.answers.put(ns, yes, Instant::now());
        Ok(yes)
    }
}

/// The Namespace watch: filtered by name or labels as configured.
pub fn namespace_watch(client: &kube::Client, config: &Config) -> (Api<Namespace>, watcher::Config) {
    let mut wc = watcher::Config::default();
    if let Some(ns) = &config.namespace {
        wc = wc.fields(&format!("metadata.name={ns}"));
    }
    if let Some(sel) = &config.namespace_selector {
        wc = wc.labels(sel);
    }
    (Api::all(client.clone()), wc)
}

/// Whether objects of `namespace` are ours: its Namespace is in the (filtered) namespace cache.
pub fn in_scope(namespaces: &Store<Namespace>, namespace: &str) -> bool {
    namespaces.get(&ObjectRef::new(namespace)).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selection_answers_are_reused_for_their_ttl_only() {
        let cache = NamespaceCache::<bool>::default();
        let t0 = Instant::now();
        assert_eq!(cache.get("a", t0), None);
        cache.put("a", false, t0);
        assert_eq!(cache.get("a", t0 + Duration::from_secs(9)), Some(false));
        assert_eq!(
            cache.get("a", t0 + NAMESPACE_TTL),
            None,
            "stale answers are read again"
        );
        assert_eq!(cache.get("b", t0), None);
    }
}
