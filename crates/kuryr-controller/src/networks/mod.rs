//! Namespace networks (upstream's `namespace` subnet driver): each Namespace gets a Neutron network, a
//! subnet carved from a subnet pool and an interface on the pod router, recorded in a KuryrNetwork named
//! after the namespace. Pods then take their IP from their namespace's subnet.
//!
//! - [`driver`]: the Neutron side (find by ownership tags, create, delete while ports drain);
//! - [`selector`]: which subnet a pod's port goes on (`default` or `namespace` mode);
//! - [`reconcile`]: the KuryrNetwork controller (finalizer) and the Namespace front end (eager creation,
//!   label sync).
//!
//! See docs/namespaces.md.

pub mod driver;
pub mod reconcile;
pub mod selector;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kuryr_core::neutron::Subnet;

pub use crate::config::networks::{NetworksConfig, SubnetMode};
use crate::toolkit::lock;

/// In-memory state: the default pod subnet, subnets known per namespace (published by the KuryrNetwork
/// controller, waited for by pods), and one lock per namespace for the KuryrNetwork controller's create and
/// delete of its network.
#[derive(Default)]
pub struct State {
    /// `Config::pod_subnet_id` (and the secondary pod subnet) with its network's MTU, read once.
    default_subnets: tokio::sync::OnceCell<Vec<Subnet>>,
    /// Each namespace's subnets: one, or one of each IP family (dual-stack), the primary first.
    subnets: Mutex<HashMap<String, Vec<Subnet>>>,
    /// Extra networks' subnets by id.
    additional: Mutex<HashMap<String, Subnet>>,
    locks: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    /// Woken at each `remember`.
    published: tokio::sync::Notify,
    pool: tokio::sync::OnceCell<String>,
    router: tokio::sync::OnceCell<String>,
}

impl State {
    pub fn additional(&self, subnet_id: &str) -> Option<Subnet> {
        lock(&self.additional).get(subnet_id).cloned()
    }

    /// The extra network subnet (read earlier) on `network_id`, if any.
    pub fn additional_on(&self, network_id: &str) -> Option<Subnet> {
        lock(&self.additional)
            .values()
            .find(|s| s.network_id == network_id)
            .cloned()
    }

    pub fn remember_additional(&self, subnet_id: &str, subnet: Subnet) {
        lock(&self.additional).insert(subnet_id.to_owned(), subnet);
    }

    pub fn subnets(&self, namespace: &str) -> Option<Vec<Subnet>> {
        lock(&self.subnets).get(namespace).cloned()
    }

    /// The namespace's network exists: pods waiting for it go on.
    pub fn remember(&self, namespace: &str, subnets: Vec<Subnet>) {
        lock(&self.subnets).insert(namespace.to_owned(), subnets);
        self.published.notify_waiters();
    }

    /// The namespace's subnets once the KuryrNetwork controller has made them; `None` after `timeout`.
    pub async fn wait_subnets(&self, namespace: &str, timeout: Duration) -> Option<Vec<Subnet>> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            // Registered before the look, so a `remember` in between is not missed.
            let published = self.published.notified();
            tokio::pin!(published);
            published.as_mut().enable();
            if let Some(s) = self.subnets(namespace) {
                return Some(s);
            }
            tokio::time::timeout_at(deadline, published).await.ok()?;
        }
    }

    /// The known subnets (a namespace's) on `network_id`, if any.
    pub fn subnets_on(&self, network_id: &str) -> Option<Vec<Subnet>> {
        lock(&self.subnets)
            .values()
            .find(|s| s.first().is_some_and(|s| s.network_id == network_id))
            .cloned()
    }

    pub fn forget(&self, namespace: &str) {
        lock(&self.subnets).remove(namespace);
    }

    /// The namespace's lock (held across the Neutron calls that create or delete its network).
    pub fn lock_for(&self, namespace: &str) -> Arc<tokio::sync::Mutex<()>> {
        lock(&self.locks).entry(namespace.to_owned()).or_default().clone()
    }
}
