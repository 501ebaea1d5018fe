//! An `Api` over one namespace or all of them: `--namespace` of the controller, `-n` of kuryrctl.

use kube::core::NamespaceResourceScope;
use kube::{Api, Client, Resource};

/// `Api::namespaced` when a namespace is given, else `Api::all`.
pub fn scoped<K>(client: &Client, namespace: Option<&str>) -> Api<K>
where
    K: Resource<Scope = NamespaceResourceScope, DynamicType = ()>,
{
    match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    }
}
