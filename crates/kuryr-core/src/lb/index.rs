//! The cluster's load balancers as a few periodic list calls show them (every load balancer, listener,
//! pool and health monitor carrying the cluster's tag), and which KuryrLoadBalancer reconciles that
//! changes: one shared observer instead of one status poll per load balancer per round.
//!
//! The controller lists, turns each load balancer into a [`Sighting`] and hands the whole listing to
//! [`LbIndex::apply`], which answers with the [`Wake`]s to send:
//!
//! - a load balancer a reconcile waits on ([`LbIndex::await_settle`], after a write or while pending)
//!   is woken by the first listing begun after the wait that shows it settled (nothing listed
//!   PENDING_*) or gone;
//! - any other watched load balancer is woken when a settled sighting differs from the one before it
//!   (something deleted, added or changed behind our back: drift) or when it is gone;
//! - a watched load balancer is woken when other settled load balancers carrying its owner appear
//!   (strays to sweep).
//!
//! Every decision takes the listing's start time from the caller: the index is tested without a clock
//! or a cloud.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::hash::Hash;
use std::time::{Duration, Instant};

use super::health::ProvisioningStatus;
use crate::backoff::poll_delay;

/// One object of a load balancer's tree as listed: its provisioning status and what the controller
/// plans from (`attrs`: a digest of a canonical rendering of its attributes, ids of its children included;
/// the operating status is left out, it moves with traffic).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Part {
    pub status: ProvisioningStatus,
    pub attrs: AttrsDigest,
}

/// A 64-bit digest of an object's canonical rendering: only ever compared with the last listing's, so a
/// listing is kept as its digests (the renderings were ~3 KB a load balancer, 6 MB at 2,000 Services). Two
/// renderings that differ share a digest once in 2^64 comparisons: that change goes unseen until the next.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct AttrsDigest(u64);

impl AttrsDigest {
    pub fn of(rendering: &[u8]) -> Self {
        use std::hash::Hasher;
        // SipHash with fixed keys: the same rendering has the same digest for the life of the process.
        let mut h = std::hash::DefaultHasher::new();
        h.write(rendering);
        Self(h.finish())
    }
}

/// One load balancer as the cluster-wide lists show it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sighting {
    pub id: String,
    /// The owner uid its ownership tags name, if any.
    pub owner: Option<String>,
    /// The load balancer itself.
    pub lb: Part,
    /// Its listeners, pools and health monitors, keyed `kind/id`.
    pub parts: BTreeMap<String, Part>,
}

impl Sighting {
    /// Nothing listed of it is PENDING_*: a reconcile can act on it (ERROR counts as settled).
    pub fn settled(&self) -> bool {
        !self.lb.status.is_pending() && self.parts.values().all(|p| !p.status.is_pending())
    }
}

/// Why a reconcile is woken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WakeReason {
    /// The load balancer it waited on settled.
    Settled,
    /// It changed while nobody waited on it: drift.
    Changed,
    /// The listing no longer has it.
    Gone,
    /// Other load balancers carry its owner's tags.
    Strays,
}

impl WakeReason {
    /// The metric label.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Settled => "settled",
            Self::Changed => "changed",
            Self::Gone => "gone",
            Self::Strays => "strays",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Wake<K> {
    pub key: K,
    pub lb_id: String,
    pub reason: WakeReason,
}

/// Tick timing: fast while some reconcile waits, then the drift interval.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IndexConfig {
    /// First tick after a wait begins; the ticks grow by half up to `poll_max`.
    pub poll_min: Duration,
    pub poll_max: Duration,
    /// Tick period when nothing waits: how late drift is noticed at most.
    pub drift_interval: Duration,
}

#[derive(Clone, Debug)]
struct Watcher<K> {
    key: K,
    /// Since when: a listing begun earlier may not show a load balancer just created.
    since: Instant,
    /// A reconcile waits for it to settle (since then).
    awaiting: Option<Instant>,
    /// The last write to it: what a listing begun earlier shows of it is out of date.
    wrote: Option<Instant>,
}

/// The observer's state: the last listing, and which reconcile watches which load balancer.
#[derive(Debug)]
pub struct LbIndex<K> {
    config: IndexConfig,
    seen: HashMap<String, Sighting>,
    /// When the last listing applied began; `None` before the first.
    listed_at: Option<Instant>,
    watchers: HashMap<String, Watcher<K>>,
    /// Per watched load balancer: the other settled load balancers of its owner last told.
    strays_told: HashMap<String, BTreeSet<String>>,
    /// Fast ticks since a wait began.
    fast_ticks: u32,
}

impl<K: Clone + Eq + Hash> LbIndex<K> {
    pub fn new(config: IndexConfig) -> Self {
        Self {
            config,
            seen: HashMap::new(),
            listed_at: None,
            watchers: HashMap::new(),
            strays_told: HashMap::new(),
            fast_ticks: 0,
        }
    }

    /// `key`'s reconcile owns `lb_id` (it recorded it). Idempotent; keeps a wait in place.
    pub fn watch(&mut self, lb_id: &str, key: K, now: Instant) {
        match self.watchers.get_mut(lb_id) {
            Some(w) if w.key == key => {}
            _ => {
                self.watchers.insert(
                    lb_id.to_owned(),
                    Watcher {
                        key,
                        since: now,
                        awaiting: None,
                        wrote: None,
                    },
                );
            }
        }
    }

    /// Nobody watches `lb_id` any more (deleted, replaced, released).
    pub fn unwatch(&mut self, lb_id: &str) {
        self.watchers.remove(lb_id);
        self.strays_told.remove(lb_id);
    }

    /// `key`'s reconcile waits for `lb_id` to settle (its tree is PENDING_*, maybe from its own write
    /// at `now`: `wrote`). Ticks go fast until it does.
    pub fn await_settle(&mut self, lb_id: &str, key: K, wrote: bool, now: Instant) {
        self.watch(lb_id, key, now);
        if let Some(w) = self.watchers.get_mut(lb_id) {
            if w.awaiting.is_none() {
                self.fast_ticks = 0;
            }
            w.awaiting = Some(now);
            if wrote {
                w.wrote = Some(now);
            }
        }
    }

    /// Whether a listing has been applied: the index is what tells reconciles to look.
    pub fn observing(&self) -> bool {
        self.listed_at.is_some()
    }

    /// Whether the last listing showed no load balancer of `owner` at all (`false` before the first). A
    /// listing is complete, so this answers the tag list a new object would otherwise make — for one this
    /// process never sent a create for (the caller knows: a create may land after the listing began).
    pub fn lists_none_of(&self, owner: &str) -> bool {
        self.listed_at.is_some() && !self.seen.values().any(|s| s.owner.as_deref() == Some(owner))
    }

    /// The sighting of `lb_id` from a listing begun after the last write to it; `None` if there is none
    /// that recent.
    pub fn current(&self, lb_id: &str) -> Option<&Sighting> {
        let at = self.listed_at?;
        let wrote = self.watchers.get(lb_id).and_then(|w| w.wrote);
        if wrote.is_some_and(|w| w >= at) {
            return None;
        }
        self.seen.get(lb_id)
    }

    /// How long until the next listing: fast (backing off) while a reconcile waits, else the drift
    /// interval.
    pub fn next_tick(&mut self) -> Duration {
        if self.watchers.values().any(|w| w.awaiting.is_some()) {
            let d = poll_delay(self.config.poll_min, self.config.poll_max, self.fast_ticks);
            self.fast_ticks = self.fast_ticks.saturating_add(1);
            d.min(self.config.drift_interval)
        } else {
            self.config.drift_interval
        }
    }

    /// A complete listing, begun at `started`: the reconciles to wake.
    pub fn apply(&mut self, listing: Vec<Sighting>, started: Instant) -> Vec<Wake<K>> {
        let first = self.listed_at.is_none();
        let fresh: HashMap<String, Sighting> = listing.into_iter().map(|s| (s.id.clone(), s)).collect();
        let mut by_owner: HashMap<&str, BTreeSet<String>> = HashMap::new();
        for s in fresh.values().filter(|s| s.settled()) {
            if let Some(o) = &s.owner {
                by_owner.entry(o.as_str()).or_default().insert(s.id.clone());
            }
        }
        let mut wakes = Vec::new();
        for (lb_id, w) in &mut self.watchers {
            let now = fresh.get(lb_id);
            let before = self.seen.get(lb_id);
            let reason = match (now, w.awaiting) {
                // Made after this listing began: nothing to tell of it yet.
                (None, _) if w.since > started => None,
                (None, _) if before.is_some() || w.awaiting.is_some_and(|a| a <= started) => {
                    Some(WakeReason::Gone)
                }
                (None, _) => None,
                (Some(s), Some(since)) if since <= started && s.settled() => Some(WakeReason::Settled),
                (Some(_), Some(_)) => None,
                (Some(s), None) if !first && s.settled() && before != Some(s) => Some(WakeReason::Changed),
                (Some(_), None) => None,
            };
            if reason.is_some() {
                w.awaiting = None;
            }
            let strays = now
                .and_then(|s| s.owner.as_deref())
                .and_then(|o| by_owner.get(o))
                .map(|ids| {
                    ids.iter()
                        .filter(|id| *id != lb_id)
                        .cloned()
                        .collect::<BTreeSet<_>>()
                })
                .unwrap_or_default();
            let told = self.strays_told.get(lb_id);
            let reason = match reason {
                None if !strays.is_empty() && told != Some(&strays) => Some(WakeReason::Strays),
                r => r,
            };
            if strays.is_empty() {
                self.strays_told.remove(lb_id);
            } else {
                self.strays_told.insert(lb_id.clone(), strays);
            }
            if let Some(reason) = reason {
                wakes.push(Wake {
                    key: w.key.clone(),
                    lb_id: lb_id.clone(),
                    reason,
                });
            }
        }
        wakes.sort_by(|a, b| a.lb_id.cmp(&b.lb_id));
        self.seen = fresh;
        self.listed_at = Some(started);
        wakes
    }
}

#[cfg(test)]
#[path = "index_tests.rs"]
mod tests;
