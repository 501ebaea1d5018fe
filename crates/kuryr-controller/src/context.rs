//! What the pod-side controllers (Pod, KuryrPort, KuryrNetwork, Namespace, NetworkPolicy) share: clients,
//! settings, metrics, Events, per-object bookkeeping, the caches fed by watches, and the state each area
//! keeps (trunks and VLANs, written statuses, pools, nested-macvlan, namespace networks).
//!
//! Two of the crate's three imports that run back up the layers start here, on purpose: the state types
//! `ports/` defines (`PortBook`, `PoolState`, `MacvlanState`, `Trunks`) and `networks::State`. Each is
//! defined beside the code that gives it meaning (and keeps its fields private to it); held here, every
//! pod-side controller reaches all of it through the one `Context` it is given.

use kube::runtime::events::EventType;
use kube::runtime::reflector::{ObjectRef, Store};
use kuryr_api::{KuryrPort, Node, Resource};
use kuryr_core::lb::Problem;
use kuryr_openstack::neutron::ports::PortReads;
use kuryr_openstack::Cloud;

use crate::config::Config;
use crate::metrics::Metrics;
use crate::ports::book::PortBook;
use crate::ports::cached::CachedKp;
use crate::ports::macvlan_state::MacvlanState;
use crate::ports::pool_state::PoolState;
use crate::ports::trunk::Trunks;
use crate::toolkit::{Events, Ledger, Reconciler, Topic, Uid};

pub struct Context {
    pub client: kube::Client,
    pub cloud: Cloud,
    pub config: Config,
    /// `config.project_id`, or the token's project.
    pub project_id: String,
    pub metrics: Metrics,
    pub events: Events,
    /// Retry backoff and problems told, per object uid.
    pub ledger: Ledger,
    pub nodes: Store<Node>,
    /// Packed (`ports::cached`): unpacked one at a time, searched by the port ids beside each.
    pub kuryrports: Store<CachedKp>,
    /// Port reads of the hot paths (ACTIVE polls, pool hand-outs), coalesced into lists under a burst.
    pub port_reads: PortReads,
    /// Node parents and the VLAN ids of their trunks.
    pub trunks: Trunks,
    /// Statuses written and wiring clocks, per KuryrPort and pod.
    pub book: PortBook,
    /// Warm port pools (see [`crate::ports::pool`]).
    pub pools: PoolState,
    /// nested-macvlan's VM ports and VRRP MACs.
    pub macvlan: MacvlanState,
    /// The default pod subnet, namespace subnets and per-namespace locks.
    pub networks: crate::networks::State,
    /// `--namespace-selector` and its answers per namespace.
    pub selection: crate::scope::Selection,
    /// Namespaces' projects (see [`crate::projects::of_namespace`]).
    pub namespace_projects: crate::scope::NamespaceCache<String>,
}

impl Context {
    pub fn new(
        client: kube::Client,
        cloud: Cloud,
        config: Config,
        project_id: String,
        metrics: Metrics,
        nodes: Store<Node>,
        kuryrports: Store<CachedKp>,
    ) -> Self {
        Self {
            events: Events::new(client.clone()),
            trunks: Trunks::new(config.vlan_range),
            selection: crate::scope::Selection::new(config.namespace_selector.clone()),
            port_reads: PortReads::new(&cloud),
            client,
            cloud,
            config,
            project_id,
            metrics,
            ledger: Ledger::default(),
            nodes,
            kuryrports,
            book: PortBook::default(),
            pools: PoolState::default(),
            macvlan: MacvlanState::default(),
            networks: crate::networks::State::default(),
            namespace_projects: Default::default(),
        }
    }

    pub fn node(&self, name: &str) -> Option<std::sync::Arc<Node>> {
        self.nodes.get(&ObjectRef::new(name))
    }

    /// Whether namespace `ns` is this controller's (see [`crate::scope::Selection`]).
    pub async fn selected(&self, ns: &str) -> crate::errors::Result<bool> {
        self.selection.selects(&self.client, ns).await
    }

    /// The cached KuryrPort `namespace/name`, unpacked.
    pub fn kuryrport(&self, namespace: &str, name: &str) -> crate::errors::Result<Option<KuryrPort>> {
        let cached = self.kuryrports.get(&ObjectRef::new(name).within(namespace));
        Ok(cached.map(|kp| kp.unpack()).transpose()?)
    }

    /// `problems` as Warning Events on `obj` (one per reason), unless the same were told on `topic` last.
    pub async fn tell<K: Resource<DynamicType = ()>>(
        &self,
        obj: &K,
        topic: Topic,
        action: &str,
        problems: &[Problem],
    ) {
        let messages = problems.iter().map(|p| p.message.clone()).collect();
        if !self.ledger.news(&Uid::of(obj), topic, messages) {
            return;
        }
        for p in Problem::by_reason(problems) {
            tracing::warn!(reason = p.reason, "{}", p.message);
            self.events
                .publish(
                    &obj.object_ref(&()),
                    EventType::Warning,
                    p.reason,
                    action,
                    p.message,
                )
                .await;
        }
    }
}

impl Reconciler for Context {
    fn ledger(&self) -> &Ledger {
        &self.ledger
    }

    fn metrics(&self) -> &Metrics {
        &self.metrics
    }
}
