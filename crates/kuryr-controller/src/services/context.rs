//! What the Service front end and the KuryrLoadBalancer controller share: clients, settings, the caches
//! fed by watches, per-object bookkeeping, and the load balancer schedule (`kuryr_core::lb::Schedule`:
//! pending polls, endpoint bursts, next looks, stray sweeps, the Octavia trees last read), and the observer
//! that lists the cluster's load balancers for every reconcile.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Mutex, MutexGuard};
use std::time::Instant;

use kube::core::PartialObjectMeta;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kuryr_api::{KuryrLoadBalancer, Namespace, SlimEndpointSlice};
use kuryr_core::lb::{IndexConfig, ProviderFeature, Schedule, ScheduleConfig};
use kuryr_openstack::Cloud;

use super::member_subnets::SubnetBook;
use crate::config::services::{DefaultKubernetes, ServicesConfig};
use crate::errors::Result;
use crate::loadbalancers::observer::Observer;
use crate::loadbalancers::CachedKlb;
use crate::metrics::Metrics;
use crate::scope::Selection;
use crate::toolkit::{lock, Events, Ledger, Reconciler};

pub struct LbContext {
    pub client: kube::Client,
    pub cloud: Cloud,
    pub cluster_id: String,
    /// Project to create load balancers in; `None`: the token's.
    pub project_id: Option<String>,
    pub config: ServicesConfig,
    pub metrics: Metrics,
    pub events: Events,
    /// Retry backoff and problems told, per object uid.
    pub ledger: Ledger,
    /// Every EndpointSlice in scope, fed by a watch.
    pub slices: Store<SlimEndpointSlice>,
    pub klbs: Store<CachedKlb>,
    /// The Namespaces' metadata, fed by a watch: whether one is being deleted.
    namespaces: Store<PartialObjectMeta<Namespace>>,
    /// Neutron's subnets, for the subnet members are declared on.
    pub subnets: SubnetBook,
    /// The cluster's load balancers as the periodic lists show them; wakes the reconciles that changed.
    pub observer: Observer,
    /// When this process started: creates a killed predecessor sent may land until a request timeout later.
    pub started: Instant,
    /// The KuryrLoadBalancers (uids) this process sent a load balancer create for while younger than one
    /// request timeout: a create of its predecessor may land beside the one it recorded
    /// (`kuryr_core::lb::cleanup_hold`). Emptied once the process is older.
    young_creates: Mutex<BTreeSet<String>>,
    /// `--namespace-selector`: the namespaces whose Services this controller serves.
    pub selection: Selection,
    schedule: Mutex<Schedule>,
    /// Options each provider refused (see [`crate::loadbalancers::refusals`]).
    refusals: Mutex<BTreeMap<String, BTreeSet<ProviderFeature>>>,
}

impl LbContext {
    /// What `provider` refused before.
    pub fn refused_by(&self, provider: &str) -> BTreeSet<ProviderFeature> {
        lock(&self.refusals).get(provider).cloned().unwrap_or_default()
    }

    /// `provider` refused `feature`: from now on its load balancers are asked without it.
    pub fn learn_refusal(&self, provider: &str, feature: ProviderFeature) {
        lock(&self.refusals)
            .entry(provider.to_owned())
            .or_default()
            .insert(feature);
    }

    #[allow(clippy::too_many_arguments)]
    pub fn new(
        client: kube::Client,
        cloud: Cloud,
        cluster_id: String,
        project_id: Option<String>,
        config: ServicesConfig,
        metrics: Metrics,
        slices: Store<SlimEndpointSlice>,
        klbs: Store<CachedKlb>,
    ) -> Self {
        let schedule = Schedule::new(ScheduleConfig {
            poll_min: config.poll_min,
            poll_max: config.poll_max,
            coalesce: config.coalesce,
        });
        let observer = Observer::new(IndexConfig {
            poll_min: config.poll_min,
            poll_max: config.poll_max,
            drift_interval: config.drift_interval,
        });
        Self {
            events: Events::new(client.clone()),
            client,
            cloud,
            cluster_id,
            project_id,
            config,
            metrics,
            ledger: Ledger::default(),
            slices,
            klbs,
            namespaces: reflector::store().0,
            subnets: SubnetBook::default(),
            observer,
            started: Instant::now(),
            young_creates: Mutex::default(),
            selection: Selection::default(),
            schedule: Mutex::new(schedule),
            refusals: Mutex::default(),
        }
    }

    /// Knows which namespaces are being deleted from `namespaces` (without it: none is).
    pub fn with_namespaces(mut self, namespaces: Store<PartialObjectMeta<Namespace>>) -> Self {
        self.namespaces = namespaces;
        self
    }

    /// Whether namespace `ns` is being deleted: its Services and load balancers all go with it, so nothing
    /// is built or changed for them any more (a member write sent now only makes the cascade delete that
    /// follows meet 409s while the load balancer is PENDING_UPDATE).
    pub fn namespace_terminating(&self, ns: &str) -> bool {
        self.namespaces
            .get(&ObjectRef::new(ns))
            .is_some_and(|n| n.metadata.deletion_timestamp.is_some())
    }

    /// Serves only the Services of the namespaces `selection` selects.
    pub fn with_selection(mut self, selection: Selection) -> Self {
        self.selection = selection;
        self
    }

    /// Whether the Service (and KuryrLoadBalancer) `ns/name` is this controller's: its namespace is selected,
    /// or it is `default/kubernetes` and `--lb-default-kubernetes` says what to do with it whatever the
    /// selector (`always` serves it, `never` releases it).
    pub async fn serves(&self, ns: &str, name: &str) -> crate::errors::Result<bool> {
        if ns == "default"
            && name == "kubernetes"
            && self.config.default_kubernetes != DefaultKubernetes::Auto
        {
            return Ok(true);
        }
        self.selection.selects(&self.client, ns).await
    }

    /// The cached KuryrLoadBalancer, unpacked.
    pub fn klb(&self, namespace: &str, name: &str) -> Result<Option<KuryrLoadBalancer>> {
        let cached = self.klbs.get(&ObjectRef::new(name).within(namespace));
        Ok(cached.map(|k| k.unpack()).transpose()?)
    }

    /// A load balancer create is sent for the KuryrLoadBalancer `uid`: the schedule knows a load balancer
    /// may exist that no listing has shown, and a young process remembers it sent one.
    pub fn creating(&self, uid: &str) {
        self.schedule().creating(uid);
        if self.young() {
            lock(&self.young_creates).insert(uid.to_owned());
        }
    }

    /// Whether this process sent a create for `uid` while a create of its predecessor could still land.
    pub fn created_young(&self, uid: &str) -> bool {
        let mut creates = lock(&self.young_creates);
        if !self.young() {
            creates.clear();
        }
        creates.contains(uid)
    }

    fn young(&self) -> bool {
        self.started.elapsed() < self.cloud.request_timeout()
    }

    /// The load balancer schedule; never hold the guard across an await.
    pub fn schedule(&self) -> MutexGuard<'_, Schedule> {
        lock(&self.schedule)
    }
}

impl Reconciler for LbContext {
    fn ledger(&self) -> &Ledger {
        &self.ledger
    }

    fn metrics(&self) -> &Metrics {
        &self.metrics
    }
}
