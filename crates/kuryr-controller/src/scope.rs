//! Which namespaces the namespace and NetworkPolicy controllers handle: all, the one of `--namespace`, or
//! those matching `--namespace-selector`. Namespaced objects are watched cluster-wide (or in the one
//! namespace) and kept only when their namespace is in the watched set.

use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;
use kuryr_api::{Api, Namespace};

use crate::config::Config;

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

/// Api for namespaced objects: the one namespace, or all (filter with [`in_scope`]).
pub fn namespaced<K>(client: &kube::Client, config: &Config) -> Api<K>
where
    K: kube::Resource<Scope = kube::core::NamespaceResourceScope, DynamicType = ()>,
{
    match &config.namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    }
}

/// Whether objects of `namespace` are ours: its Namespace is in the (filtered) namespace cache.
pub fn in_scope(namespaces: &Store<Namespace>, namespace: &str) -> bool {
    namespaces.get(&ObjectRef::new(namespace)).is_some()
}
