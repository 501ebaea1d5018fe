//! What every reconcile shares: clients, settings, metrics, the Event recorder, the caches fed by watches,
//! and the controller's in-memory bookkeeping (VLANs, node parents, poll and retry state).

use std::collections::{BTreeSet, HashMap};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::reflector::{ObjectRef, Store};
use kuryr_api::{KuryrPort, KuryrPortStatus, Node, ObjectReference};
use kuryr_core::neutron::Subnet;
use kuryr_core::VlanBook;
use kuryr_openstack::neutron::ports::PortReads;
use kuryr_openstack::Cloud;
use tokio::sync::OnceCell;

use crate::config::Config;
use crate::metrics::Metrics;
use crate::ports::macvlan::MacvlanState;
use crate::ports::pool::PoolState;

/// Name under which Events are reported.
pub const REPORTER: &str = "kuryr-controller";

/// A node VM's own port and its trunk.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Parent {
    pub port_id: String,
    pub trunk_id: String,
    /// The port's MAC: recorded in each VIF so the node's CNI daemon finds the NIC by it.
    pub mac: String,
}

pub struct Context {
    pub client: kube::Client,
    pub cloud: Cloud,
    /// Port reads of the hot paths (ACTIVE polls, pool hand-outs), coalesced into lists under a burst.
    pub port_reads: PortReads,
    pub config: Config,
    /// `config.project_id`, or the token's project.
    pub project_id: String,
    pub metrics: Metrics,
    pub recorder: Recorder,
    pub nodes: Store<Node>,
    pub kuryrports: Store<KuryrPort>,
    /// VLAN ids per trunk, each rebuilt from Neutron on first use. Never held across an await.
    pub vlans: Mutex<VlanBook>,
    parents: Mutex<HashMap<String, Parent>>,
    pub(crate) subnet: OnceCell<Subnet>,
    /// Namespace subnets and per-namespace locks (namespace subnet mode).
    pub networks: crate::networks::State,
    /// Status this controller last wrote per KuryrPort uid: the watch cache may not show it yet when the
    /// next reconcile runs, and acting on the older copy would allocate a second port.
    written: Mutex<HashMap<String, KuryrPortStatus>>,
    /// Per pod uid: when first seen (time-to-wire) and how many ACTIVE polls so far.
    wiring: Mutex<HashMap<String, Wiring>>,
    /// Consecutive failures per object uid, for the retry backoff.
    failures: Mutex<HashMap<String, u32>>,
    /// Per object uid: the refusals last told in Events (annotations not honoured), so each is told once.
    told: Mutex<HashMap<String, Vec<String>>>,
    /// Warm port pools (see [`crate::ports::pool`]).
    pub pools: PoolState,
    /// nested-macvlan's VM ports and VRRP MACs.
    pub macvlan: MacvlanState,
    /// `--namespace-selector` answers per namespace (see [`crate::scope::selected`]).
    pub selected_namespaces: crate::scope::SelectedCache,
}

#[derive(Clone, Copy, Debug)]
struct Wiring {
    since: Instant,
    polls: u32,
}

/// A mutex's guard, poisoned or not: every critical section here leaves its map consistent, so a panic in
/// one is no reason to stop serving.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Context {
    pub fn new(
        client: kube::Client,
        cloud: Cloud,
        config: Config,
        project_id: String,
        metrics: Metrics,
        nodes: Store<Node>,
        kuryrports: Store<KuryrPort>,
    ) -> Self {
        let reporter = Reporter {
            controller: REPORTER.into(),
            instance: std::env::var("POD_NAME").ok(),
        };
        Self {
            recorder: Recorder::new(client.clone(), reporter),
            vlans: Mutex::new(VlanBook::new(config.vlan_range)),
            port_reads: PortReads::new(&cloud),
            client,
            cloud,
            config,
            project_id,
            metrics,
            nodes,
            kuryrports,
            parents: Mutex::default(),
            subnet: OnceCell::new(),
            networks: crate::networks::State::default(),
            written: Mutex::default(),
            wiring: Mutex::default(),
            failures: Mutex::default(),
            told: Mutex::default(),
            pools: PoolState::default(),
            macvlan: MacvlanState::default(),
            selected_namespaces: Default::default(),
        }
    }

    pub fn node(&self, name: &str) -> Option<std::sync::Arc<Node>> {
        self.nodes.get(&ObjectRef::new(name))
    }

    pub fn kuryrport(&self, namespace: &str, name: &str) -> Option<std::sync::Arc<KuryrPort>> {
        self.kuryrports.get(&ObjectRef::new(name).within(namespace))
    }

    // === node parents ===

    pub fn parent(&self, node: &str) -> Option<Parent> {
        lock(&self.parents).get(node).cloned()
    }

    pub fn remember_parent(&self, node: &str, parent: Parent) {
        lock(&self.parents).insert(node.to_owned(), parent);
    }

    /// The trunk went away: find the parent again next time and rebuild its VLANs from Neutron.
    pub fn forget_parent(&self, node: &str) {
        if let Some(p) = lock(&self.parents).remove(node) {
            lock(&self.vlans).forget(&p.trunk_id);
        }
    }

    /// Forgets the parents of nodes not in `nodes` (deleted nodes).
    pub fn forget_parents_except(&self, nodes: &BTreeSet<String>) {
        let gone: Vec<String> = lock(&self.parents)
            .keys()
            .filter(|n| !nodes.contains(*n))
            .cloned()
            .collect();
        for node in gone {
            self.forget_parent(&node);
        }
    }

    // === written status ===

    /// The freshest status known for `kp`: the one in the object, unless this controller wrote a newer one
    /// the watch has not delivered yet.
    pub fn status_of(&self, kp: &KuryrPort) -> KuryrPortStatus {
        let seen = kp.status.clone().unwrap_or_default();
        let uid = kp.metadata.uid.as_deref().unwrap_or_default();
        freshest(seen, lock(&self.written).get(uid))
    }

    pub fn wrote_status(&self, uid: &str, status: &KuryrPortStatus) {
        lock(&self.written).insert(uid.to_owned(), status.clone());
    }

    /// The KuryrPort is gone: drop everything kept for it.
    pub fn forget(&self, uid: &str) {
        lock(&self.written).remove(uid);
        lock(&self.failures).remove(uid);
    }

    /// The pod's KuryrPort is gone: drop its wiring clock.
    pub fn forget_pod(&self, pod_uid: &str) {
        lock(&self.wiring).remove(pod_uid);
        lock(&self.told).remove(pod_uid);
    }

    /// Whether `messages` differ from what was told about `uid` last time (then they are remembered). An
    /// empty list is never news, and forgets what was told.
    pub fn news(&self, uid: &str, messages: Vec<String>) -> bool {
        let mut told = lock(&self.told);
        if messages.is_empty() {
            told.remove(uid);
            return false;
        }
        if told.get(uid) == Some(&messages) {
            return false;
        }
        told.insert(uid.to_owned(), messages);
        true
    }

    /// Ports named by any KuryrPort status (the synced cache, plus statuses written it has not shown yet).
    pub fn ports_in_use(&self) -> BTreeSet<String> {
        let mut ids: BTreeSet<String> = self
            .kuryrports
            .state()
            .iter()
            .filter_map(|kp| kp.status.as_ref())
            .flat_map(|st| st.vifs.values().map(|v| v.vif.port_id.clone()))
            .collect();
        ids.extend(
            lock(&self.written)
                .values()
                .flat_map(|st| st.vifs.values().map(|v| v.vif.port_id.clone())),
        );
        ids
    }

    /// Whether a KuryrPort other than `uid` names `port_id` in its status.
    pub fn port_named_elsewhere(&self, port_id: &str, uid: &str) -> bool {
        let named = |st: &KuryrPortStatus| st.vifs.values().any(|v| v.vif.port_id == port_id);
        self.kuryrports
            .state()
            .iter()
            .any(|kp| kp.metadata.uid.as_deref() != Some(uid) && kp.status.as_ref().is_some_and(named))
            || lock(&self.written)
                .iter()
                .any(|(other, st)| other != uid && named(st))
    }

    // === wiring time and ACTIVE polls ===

    /// Starts the pod's wiring clock (the Pod front end sees it first; the KuryrPort controller after a
    /// restart).
    pub fn first_seen(&self, uid: &str) {
        lock(&self.wiring).entry(uid.to_owned()).or_insert(Wiring {
            since: Instant::now(),
            polls: 0,
        });
    }

    /// The port went ACTIVE: how long since the KuryrPort was first seen (once per KuryrPort).
    pub fn wired(&self, uid: &str) -> Option<Duration> {
        lock(&self.wiring).remove(uid).map(|w| w.since.elapsed())
    }

    /// Delay before the next ACTIVE poll: the minimum, growing by half per poll up to the maximum.
    pub fn next_poll(&self, uid: &str) -> Duration {
        let mut wiring = lock(&self.wiring);
        let polls = wiring.get(uid).map_or(0, |w| w.polls);
        if let Some(w) = wiring.get_mut(uid) {
            w.polls += 1;
        }
        poll_delay(self.config.active_poll_min, self.config.active_poll_max, polls)
    }

    // === retry backoff ===

    /// Records a failure of object `uid`; returns how long to wait before the next try.
    pub fn failed(&self, uid: &str, permanent: bool) -> Duration {
        let mut failures = lock(&self.failures);
        let n = failures.entry(uid.to_owned()).or_insert(0);
        *n = n.saturating_add(1);
        retry_delay(*n, permanent)
    }

    pub fn succeeded(&self, uid: &str) {
        lock(&self.failures).remove(uid);
    }

    // === events ===

    /// Publishes an Event about `obj`; a failure to do so is only logged (it must not fail the reconcile).
    pub async fn event(
        &self,
        obj: &ObjectReference,
        type_: EventType,
        reason: &str,
        action: &str,
        note: String,
    ) {
        publish(&self.recorder, obj, type_, reason, action, note).await;
    }
}

/// Publishes an Event about `obj` through `recorder`; a failure is only logged.
pub async fn publish(
    recorder: &Recorder,
    obj: &ObjectReference,
    type_: EventType,
    reason: &str,
    action: &str,
    note: String,
) {
    let ev = Event {
        type_,
        reason: reason.to_owned(),
        note: Some(note),
        action: action.to_owned(),
        secondary: None,
    };
    if let Err(e) = recorder.publish(&ev, obj).await {
        tracing::warn!(
            error = &e as &dyn std::error::Error,
            reason,
            "cannot publish Event"
        );
    }
}

/// The cache's status, unless ours is ahead of it: it names ports the cache does not show yet, or says ACTIVE
/// where the cache does not. (Ours never goes backwards, so it is never behind a status the cache shows.)
pub fn freshest(seen: KuryrPortStatus, mine: Option<&KuryrPortStatus>) -> KuryrPortStatus {
    match mine {
        Some(mine) if seen.vifs.is_empty() && !mine.vifs.is_empty() => mine.clone(),
        Some(mine) if !seen.all_active() && mine.all_active() => mine.clone(),
        _ => seen,
    }
}

/// `min * 1.5^polls`, capped at `max`.
pub fn poll_delay(min: Duration, max: Duration, polls: u32) -> Duration {
    let factor = 1.5f64.powi(i32::try_from(polls.min(64)).unwrap_or(64));
    min.mul_f64(factor).min(max)
}

/// 0.5 s doubling per consecutive failure, capped at 60 s; errors a retry will not fix soon wait 60 s.
pub fn retry_delay(failures: u32, permanent: bool) -> Duration {
    if permanent {
        return Duration::from_secs(60);
    }
    let exp = failures.saturating_sub(1).min(7);
    Duration::from_millis(500 * (1u64 << exp)).min(Duration::from_secs(60))
}

#[cfg(test)]
mod tests {
    use kuryr_api::PodVif;

    use super::*;

    fn mk_status(active: Option<bool>) -> KuryrPortStatus {
        let mut st = KuryrPortStatus::default();
        if let Some(active) = active {
            let vif = serde_json::from_value(serde_json::json!({
                "type": "nested-vlan", "portId": "p1", "networkId": "n1", "mac": "fa:16:3e:00:00:01",
                "active": active,
            }))
            .unwrap();
            st.vifs.insert("eth0".into(), PodVif { default: true, vif });
        }
        st
    }

    #[test]
    fn a_status_we_wrote_wins_over_a_cache_that_has_not_caught_up() {
        let mine = mk_status(Some(false));
        // The cache shows no port yet: acting on it would allocate a second one.
        assert_eq!(freshest(mk_status(None), Some(&mine)), mine);
        // ACTIVE written, cache still waiting.
        let active = mk_status(Some(true));
        assert_eq!(freshest(mk_status(Some(false)), Some(&active)), active);
        // The cache caught up (or nothing was written): the cache it is.
        assert_eq!(
            freshest(mk_status(Some(true)), Some(&mine)),
            mk_status(Some(true))
        );
        assert_eq!(freshest(mk_status(None), None), mk_status(None));
    }

    #[test]
    fn active_polls_start_fast_and_level_off_at_the_maximum() {
        let (min, max) = (Duration::from_millis(100), Duration::from_secs(5));
        assert_eq!(poll_delay(min, max, 0), min);
        assert_eq!(poll_delay(min, max, 1), Duration::from_millis(150));
        assert_eq!(poll_delay(min, max, 40), max);
    }

    #[test]
    fn retries_back_off_exponentially_up_to_a_minute() {
        assert_eq!(retry_delay(1, false), Duration::from_millis(500));
        assert_eq!(retry_delay(2, false), Duration::from_secs(1));
        assert_eq!(retry_delay(8, false), Duration::from_secs(60));
        assert_eq!(retry_delay(100, false), Duration::from_secs(60));
        assert_eq!(retry_delay(1, true), Duration::from_secs(60));
    }
}
