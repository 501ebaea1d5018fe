//! What the Service front end and the KuryrLoadBalancer controller share: clients, settings, the caches
//! fed by watches, and in-memory bookkeeping (since when an LB is pending, endpoint bursts being
//! coalesced, problems already reported, retry counts, the Octavia trees last read, when each object is
//! next due and when its stray load balancers were last looked for).

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use kube::runtime::events::{EventType, Recorder, Reporter};
use kube::runtime::reflector::{ObjectRef, Store};
use kuryr_api::k8s_openapi::api::discovery::v1::EndpointSlice;
use kuryr_api::{KuryrLoadBalancer, ObjectReference};
use kuryr_core::lb::ObservedLb;
use kuryr_openstack::Cloud;

use super::member_subnets::SubnetBook;
use super::ServicesConfig;
use crate::context::{lock, poll_delay, publish, retry_delay, REPORTER};
use crate::metrics::Metrics;

pub struct LbContext {
    pub client: kube::Client,
    pub cloud: Cloud,
    pub cluster_id: String,
    /// Project to create load balancers in; `None`: the token's.
    pub project_id: Option<String>,
    pub config: ServicesConfig,
    pub metrics: Metrics,
    pub recorder: Recorder,
    /// Every EndpointSlice in scope, fed by a watch.
    pub slices: Store<EndpointSlice>,
    pub klbs: Store<KuryrLoadBalancer>,
    /// Neutron's subnets, for the subnet members are declared on.
    pub subnets: SubnetBook,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// Per KLB uid: since when its tree has been pending without a break, and polls so far.
    pending: HashMap<String, (Instant, u32)>,
    /// Per KLB uid: the spec generation being coalesced, when it was first and last seen changing, and
    /// the generation last acted on.
    bursts: HashMap<String, Burst>,
    /// Per object uid: the problems last reported (so each is an Event once, not every reconcile).
    told: HashMap<String, Vec<String>>,
    /// Load balancers given up on while stuck PENDING_* (their VIP port freed); deleted once Octavia lets go.
    abandoned: HashSet<String>,
    failures: HashMap<String, u32>,
    /// Per LB id: its listeners, pools and health monitors as last read in full (or as the create answered),
    /// and when. Reused while the status tree shows the same objects, so a poll is one read.
    observed: HashMap<String, (Instant, ObservedLb)>,
    /// Per KLB uid: what the last round left and when the next look is due.
    looks: HashMap<String, Look>,
    /// Per KLB uid: when its tagged load balancers were last listed.
    listed: HashMap<String, Instant>,
    /// KLB uids with (possibly) stray load balancers to delete.
    sweep_wanted: HashSet<String>,
}

/// The object as the last round left it: the resourceVersion of its status write (or of the object it
/// read) and the spec generation it acted on. The two differ in time when the spec changed while the
/// round ran: the status write then answers with the newer generation, which the round never saw.
#[derive(Clone, Debug, PartialEq)]
struct Look {
    resource_version: String,
    generation: Option<i64>,
    due: Instant,
}

impl Look {
    /// How long until the next look, if the object is exactly what the round left and acted on.
    fn wait(
        &self,
        resource_version: Option<&str>,
        generation: Option<i64>,
        now: Instant,
    ) -> Option<Duration> {
        if Some(self.resource_version.as_str()) != resource_version || self.generation != generation {
            return None;
        }
        Some(self.due.saturating_duration_since(now)).filter(|d| !d.is_zero())
    }
}

#[derive(Clone, Copy, Debug)]
struct Burst {
    generation: i64,
    first: Instant,
    last: Instant,
    applied: Option<i64>,
}

impl LbContext {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        client: kube::Client,
        cloud: Cloud,
        cluster_id: String,
        project_id: Option<String>,
        config: ServicesConfig,
        metrics: Metrics,
        slices: Store<EndpointSlice>,
        klbs: Store<KuryrLoadBalancer>,
    ) -> Self {
        let reporter = Reporter {
            controller: REPORTER.into(),
            instance: std::env::var("POD_NAME").ok(),
        };
        Self {
            recorder: Recorder::new(client.clone(), reporter),
            client,
            cloud,
            cluster_id,
            project_id,
            config,
            metrics,
            slices,
            klbs,
            subnets: SubnetBook::default(),
            state: Mutex::default(),
        }
    }

    pub fn klb(&self, namespace: &str, name: &str) -> Option<std::sync::Arc<KuryrLoadBalancer>> {
        self.klbs.get(&ObjectRef::new(name).within(namespace))
    }

    // === pending tracking ===

    /// The tree is pending: how long without a break (0 the first time), and the delay to the next look.
    pub fn pending(&self, uid: &str) -> (Duration, Duration) {
        let mut st = lock(&self.state);
        let e = st.pending.entry(uid.to_owned()).or_insert((Instant::now(), 0));
        e.1 = e.1.saturating_add(1);
        let delay = poll_delay(self.config.poll_min, self.config.poll_max, e.1 - 1);
        (e.0.elapsed(), delay)
    }

    /// We just wrote: the LB goes pending now.
    pub fn wrote(&self, uid: &str) {
        lock(&self.state)
            .pending
            .insert(uid.to_owned(), (Instant::now(), 0));
    }

    pub fn settled(&self, uid: &str) {
        lock(&self.state).pending.remove(uid);
    }

    // === endpoint bursts ===

    /// Whether to act on `generation` now, or how long to let further changes gather first.
    pub fn coalesce(&self, uid: &str, generation: i64) -> Option<Duration> {
        let window = self.config.coalesce;
        let now = Instant::now();
        let mut st = lock(&self.state);
        let b = st.bursts.entry(uid.to_owned()).or_insert(Burst {
            generation,
            first: now,
            last: now,
            applied: None,
        });
        if b.applied == Some(generation) {
            return None;
        }
        if b.generation != generation {
            if b.applied == Some(b.generation) {
                b.first = now;
            }
            b.generation = generation;
            b.last = now;
        }
        // Quiet for a window, or gathering for five: go.
        let quiet = now.duration_since(b.last);
        let gathering = now.duration_since(b.first);
        if quiet >= window || gathering >= window * 5 {
            b.applied = Some(generation);
            None
        } else {
            Some(window - quiet)
        }
    }

    // === problems ===

    /// Whether `problems` differ from what was last reported for `uid` (and remembers them).
    pub fn news(&self, uid: &str, problems: Vec<String>) -> bool {
        let mut st = lock(&self.state);
        if st.told.get(uid) == Some(&problems) {
            return false;
        }
        st.told.insert(uid.to_owned(), problems);
        true
    }

    // === abandoned ===

    pub fn abandon(&self, lb_id: &str) {
        lock(&self.state).abandoned.insert(lb_id.to_owned());
    }

    pub fn is_abandoned(&self, lb_id: &str) -> bool {
        lock(&self.state).abandoned.contains(lb_id)
    }

    pub fn forget_abandoned(&self, lb_id: &str) {
        lock(&self.state).abandoned.remove(lb_id);
    }

    // === the Octavia tree last read ===

    /// The tree of `lb_id` read (or created) less than `max_age` ago.
    pub fn observed(&self, lb_id: &str, max_age: Duration) -> Option<ObservedLb> {
        let st = lock(&self.state);
        st.observed
            .get(lb_id)
            .filter(|(at, _)| at.elapsed() < max_age)
            .map(|(_, o)| o.clone())
    }

    pub fn remember_observed(&self, obs: ObservedLb) {
        lock(&self.state)
            .observed
            .insert(obs.id.clone(), (Instant::now(), obs));
    }

    pub fn forget_observed(&self, lb_id: &str) {
        lock(&self.state).observed.remove(lb_id);
    }

    // === next look ===

    /// How long until the next look at `uid` is due, when the object is still exactly as the last round
    /// left it (`resource_version`) with the spec it acted on (`generation`): the watch event of our own
    /// status write, or a resync, needs no Octavia reads. `None`: look now.
    pub fn not_due(
        &self,
        uid: &str,
        resource_version: Option<&str>,
        generation: Option<i64>,
    ) -> Option<Duration> {
        lock(&self.state)
            .looks
            .get(uid)?
            .wait(resource_version, generation, Instant::now())
    }

    /// The round acted on `generation` and left `uid` at `resource_version`; the next look is due `after`
    /// from now.
    pub fn due_in(&self, uid: &str, resource_version: String, generation: Option<i64>, after: Duration) {
        let look = Look {
            resource_version,
            generation,
            due: Instant::now() + after,
        };
        lock(&self.state).looks.insert(uid.to_owned(), look);
    }

    pub fn look_now(&self, uid: &str) {
        lock(&self.state).looks.remove(uid);
    }

    // === stray load balancers ===

    /// The tagged load balancers of `uid` were just listed.
    pub fn listed(&self, uid: &str) {
        lock(&self.state).listed.insert(uid.to_owned(), Instant::now());
    }

    /// There are (or may be) stray load balancers of `uid` to delete.
    pub fn want_sweep(&self, uid: &str) {
        lock(&self.state).sweep_wanted.insert(uid.to_owned());
    }

    /// Whether to list `uid`'s tagged load balancers for strays: one is known or may be (an abandoned LB,
    /// a list that showed others), this process has not listed them yet (strays of a previous one), or
    /// the last list is older than `every`.
    pub fn sweep_due(&self, uid: &str, every: Duration) -> bool {
        let st = lock(&self.state);
        st.sweep_wanted.contains(uid) || st.listed.get(uid).is_none_or(|at| at.elapsed() >= every)
    }

    /// A sweep listed `uid`'s load balancers; `clean`: none is left to delete.
    pub fn swept(&self, uid: &str, clean: bool) {
        let mut st = lock(&self.state);
        st.listed.insert(uid.to_owned(), Instant::now());
        if clean {
            st.sweep_wanted.remove(uid);
        } else {
            st.sweep_wanted.insert(uid.to_owned());
        }
    }

    // === failures ===

    pub fn failed(&self, uid: &str, permanent: bool) -> Duration {
        let mut st = lock(&self.state);
        let n = st.failures.entry(uid.to_owned()).or_insert(0);
        *n = n.saturating_add(1);
        retry_delay(*n, permanent)
    }

    pub fn succeeded(&self, uid: &str) {
        lock(&self.state).failures.remove(uid);
    }

    /// The object is gone: drop what was kept for it.
    pub fn forget(&self, uid: &str) {
        let mut st = lock(&self.state);
        st.pending.remove(uid);
        st.bursts.remove(uid);
        // Keys of this object: its uid, and `uid/...` for the other kinds of news (annotations, fip).
        st.told
            .retain(|k, _| k != uid && !k.starts_with(&format!("{uid}/")));
        st.failures.remove(uid);
        st.looks.remove(uid);
        st.listed.remove(uid);
        st.sweep_wanted.remove(uid);
    }

    /// Publishes an Event; a failure to do so is only logged.
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

#[cfg(test)]
mod tests {
    use super::*;

    fn look(rv: &str, generation: i64) -> Look {
        Look {
            resource_version: rv.into(),
            generation: Some(generation),
            due: Instant::now() + Duration::from_secs(60),
        }
    }

    #[test]
    fn the_echo_of_our_own_status_write_is_not_due() {
        let l = look("42", 2);
        assert!(l.wait(Some("42"), Some(2), Instant::now()).is_some());
    }

    #[test]
    fn any_other_version_is_due() {
        let l = look("42", 2);
        assert_eq!(l.wait(Some("43"), Some(2), Instant::now()), None);
        assert_eq!(l.wait(None, Some(2), Instant::now()), None);
    }

    #[test]
    fn a_spec_changed_while_the_round_ran_is_due_even_at_the_written_version() {
        // The round acted on generation 2; its status write answered resourceVersion 42 with generation
        // 3 (the Service front end patched the spec meanwhile). That object is not what the round saw.
        let l = look("42", 2);
        assert_eq!(l.wait(Some("42"), Some(3), Instant::now()), None);
    }

    #[test]
    fn past_the_due_time_it_is_due() {
        let l = look("42", 2);
        assert_eq!(
            l.wait(Some("42"), Some(2), l.due + Duration::from_millis(1)),
            None
        );
    }
}
