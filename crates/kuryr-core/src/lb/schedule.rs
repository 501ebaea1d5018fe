//! When the KuryrLoadBalancer controller looks at a load balancer again, on top of kube's requeue: polls
//! that back off while the tree is PENDING_*, endpoint bursts gathered into one write, the watch echo of
//! its own status write skipped, and stray load balancers listed only when there is reason to. Also the
//! Octavia trees last read (reused while the status tree shows the same objects) and the load balancers
//! given up on while stuck.
//!
//! Every decision takes `now` from the caller: the schedule is tested without a clock.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use super::model::ObservedLb;
use crate::backoff::poll_delay;

/// The timings the schedule works with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ScheduleConfig {
    /// First poll of a pending tree; the polls grow by half up to `poll_max`.
    pub poll_min: Duration,
    pub poll_max: Duration,
    /// Quiet time that ends an endpoints burst (a burst is cut at five times this).
    pub coalesce: Duration,
}

/// Per-object schedule state, keyed by the KuryrLoadBalancer's uid (load balancer ids for the Octavia side).
#[derive(Debug)]
pub struct Schedule {
    config: ScheduleConfig,
    /// Since when the tree has been pending without a break, and polls so far.
    pending: HashMap<String, (Instant, u32)>,
    /// Objects the write the tree is pending on makes or changes ([`super::Op::objects`]: a provider may
    /// take time per listener, pool and member).
    in_flight: HashMap<String, usize>,
    bursts: HashMap<String, Burst>,
    looks: HashMap<String, Look>,
    /// Per object: the spec generation being worked on and when its first round began.
    began: HashMap<String, (Option<i64>, Instant)>,
    /// Wakes from the observer so far: a round compares the count at its end with its start.
    wakes: HashMap<String, u64>,
    /// When the object's tagged load balancers were last listed.
    listed: HashMap<String, Instant>,
    /// Objects with (possibly) stray load balancers to delete.
    sweep_wanted: HashSet<String>,
    /// Load balancers given up on while stuck PENDING_* (their VIP port freed); deleted once Octavia lets go.
    abandoned: HashSet<String>,
    /// Per LB id: its listeners, pools and health monitors as last read in full (or as the create answered).
    observed: HashMap<String, (Instant, ObservedLb)>,
    /// Objects this process sent a create for: a create that timed out or whose status write was lost may
    /// have made one that no listing has shown yet.
    created: HashSet<String>,
}

/// An endpoints burst: the spec generation being gathered, when it was first and last seen changing, and
/// the generation last acted on.
#[derive(Clone, Copy, Debug)]
struct Burst {
    generation: i64,
    first: Instant,
    last: Instant,
    applied: Option<i64>,
}

/// What a round takes from its start: the rank of its calls, and the mark [`Schedule::due_in`] needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RoundStart {
    /// When the work on the object's current spec generation began (its first round), however many
    /// rounds it takes: the rank of the round's calls when the cloud's calls queue, so a Service's change
    /// under way finishes before the first calls of newer ones (`kuryr_openstack::work_started`).
    pub began: Instant,
    wakes: u64,
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

impl Schedule {
    pub fn new(config: ScheduleConfig) -> Self {
        Self {
            config,
            pending: HashMap::new(),
            in_flight: HashMap::new(),
            bursts: HashMap::new(),
            looks: HashMap::new(),
            wakes: HashMap::new(),
            began: HashMap::new(),
            listed: HashMap::new(),
            sweep_wanted: HashSet::new(),
            abandoned: HashSet::new(),
            observed: HashMap::new(),
            created: HashSet::new(),
        }
    }

    // === pending trees ===

    /// The tree is pending: how long without a break (0 the first time), and the delay to the next poll.
    pub fn pending(&mut self, uid: &str, now: Instant) -> (Duration, Duration) {
        let e = self.pending.entry(uid.to_owned()).or_insert((now, 0));
        e.1 = e.1.saturating_add(1);
        let delay = poll_delay(self.config.poll_min, self.config.poll_max, e.1 - 1);
        (now.saturating_duration_since(e.0), delay)
    }

    /// We just wrote to Octavia, touching `objects` objects: the tree goes pending now, polls start from
    /// the minimum again.
    pub fn wrote(&mut self, uid: &str, now: Instant, objects: usize) {
        self.pending.insert(uid.to_owned(), (now, 0));
        self.in_flight.insert(uid.to_owned(), objects);
    }

    /// How long the tree may stay pending before it counts as stuck: `base`, plus `per_object` for each
    /// object the last write touched (the ovn provider makes them one by one, seconds each on a busy
    /// host: a large batch is not a stuck one).
    pub fn pending_limit(&self, uid: &str, base: Duration, per_object: Duration) -> Duration {
        let objects = self.in_flight.get(uid).copied().unwrap_or(0);
        base.saturating_add(per_object.saturating_mul(u32::try_from(objects).unwrap_or(u32::MAX)))
    }

    /// The tree is ACTIVE (or was replaced).
    pub fn settled(&mut self, uid: &str) {
        self.pending.remove(uid);
        self.in_flight.remove(uid);
    }

    // === endpoint bursts ===

    /// Whether to act on `generation` now (`None`), or how long to let further changes gather first: go
    /// once the spec has been quiet for the window, or has been changing for five windows.
    pub fn coalesce(&mut self, uid: &str, generation: i64, now: Instant) -> Option<Duration> {
        let window = self.config.coalesce;
        let b = self.bursts.entry(uid.to_owned()).or_insert(Burst {
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
        let quiet = now.saturating_duration_since(b.last);
        let gathering = now.saturating_duration_since(b.first);
        if quiet >= window || gathering >= window * 5 {
            b.applied = Some(generation);
            None
        } else {
            Some(window - quiet)
        }
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
        now: Instant,
    ) -> Option<Duration> {
        let look = self.looks.get(uid)?;
        if Some(look.resource_version.as_str()) != resource_version || look.generation != generation {
            return None;
        }
        Some(look.due.saturating_duration_since(now)).filter(|d| !d.is_zero())
    }

    /// Whether the object given (`resource_version`) is older than the one the last round left: the
    /// cache has not yet caught up with our own status write (a requeue right after it), and a round on it
    /// would act on a status we already replaced (give up on a load balancer twice, or write the old one
    /// back). Our write's watch event wakes the object. resourceVersions are compared as numbers, as the
    /// API server makes them (etcd revisions); anything else is never called older.
    pub fn behind(&self, uid: &str, resource_version: Option<&str>) -> bool {
        let Some(look) = self.looks.get(uid) else {
            return false;
        };
        let parse = |rv: &str| rv.parse::<u64>().ok();
        match (resource_version.and_then(parse), parse(&look.resource_version)) {
            (Some(given), Some(left)) => given < left,
            _ => false,
        }
    }

    /// The round begun at `start` acted on `generation` and left `uid` at `resource_version`; the next
    /// look is due `after`, unless a wake came while the round ran (what woke it may be newer than what
    /// the round saw: the wake's own reconcile must look).
    pub fn due_in(
        &mut self,
        uid: &str,
        start: RoundStart,
        resource_version: String,
        generation: Option<i64>,
        after: Duration,
        now: Instant,
    ) {
        if self.wake_count(uid) != start.wakes {
            self.looks.remove(uid);
            return;
        }
        let look = Look {
            resource_version,
            generation,
            due: now + after,
        };
        self.looks.insert(uid.to_owned(), look);
    }

    /// A round on `generation` of `uid` starts at `now`: whatever it leaves decides the next look (give
    /// the mark to [`Self::due_in`]). Every round of one generation keeps the first one's `began`; a new
    /// spec is new work.
    pub fn start_round(&mut self, uid: &str, generation: Option<i64>, now: Instant) -> RoundStart {
        self.looks.remove(uid);
        let e = self.began.entry(uid.to_owned()).or_insert((generation, now));
        if e.0 != generation {
            *e = (generation, now);
        }
        RoundStart {
            began: e.1,
            wakes: self.wake_count(uid),
        }
    }

    /// The observer saw something for `uid`: its next round is due now, even if one is running (that one
    /// may have read the load balancer before the change).
    pub fn wake(&mut self, uid: &str) {
        self.looks.remove(uid);
        *self.wakes.entry(uid.to_owned()).or_default() += 1;
    }

    fn wake_count(&self, uid: &str) -> u64 {
        self.wakes.get(uid).copied().unwrap_or(0)
    }

    // === stray load balancers ===

    /// The tagged load balancers of `uid` were just listed; `strays`: the list showed more than ours.
    pub fn listed(&mut self, uid: &str, strays: bool, now: Instant) {
        self.listed.insert(uid.to_owned(), now);
        if strays {
            self.sweep_wanted.insert(uid.to_owned());
        }
    }

    /// There are (or may be) stray load balancers of `uid` to delete.
    pub fn want_sweep(&mut self, uid: &str) {
        self.sweep_wanted.insert(uid.to_owned());
    }

    /// Whether to list `uid`'s tagged load balancers for strays: one is known or may be, this process has
    /// not listed them yet (strays of a previous one), or the last list is older than `every`.
    pub fn sweep_due(&self, uid: &str, every: Duration, now: Instant) -> bool {
        self.sweep_wanted.contains(uid)
            || self
                .listed
                .get(uid)
                .is_none_or(|at| now.saturating_duration_since(*at) >= every)
    }

    /// This process sends a create for `uid`.
    pub fn creating(&mut self, uid: &str) {
        self.created.insert(uid.to_owned());
    }

    /// Whether this process ever sent a create for `uid` (whatever its answer).
    pub fn ever_created(&self, uid: &str) -> bool {
        self.created.contains(uid)
    }

    /// Whether a stray of `uid` is known or may be (an abandon, or the observer saw one).
    pub fn sweep_wanted(&self, uid: &str) -> bool {
        self.sweep_wanted.contains(uid)
    }

    /// A sweep listed `uid`'s load balancers; `clean`: none is left to delete.
    pub fn swept(&mut self, uid: &str, clean: bool, now: Instant) {
        self.listed.insert(uid.to_owned(), now);
        if clean {
            self.sweep_wanted.remove(uid);
        } else {
            self.sweep_wanted.insert(uid.to_owned());
        }
    }

    // === abandoned load balancers (by LB id) ===

    pub fn abandon(&mut self, lb_id: &str) {
        self.abandoned.insert(lb_id.to_owned());
    }

    pub fn is_abandoned(&self, lb_id: &str) -> bool {
        self.abandoned.contains(lb_id)
    }

    // === the Octavia tree last read (by LB id) ===

    /// The tree of `lb_id` read (or created) less than `max_age` ago.
    pub fn observed(&self, lb_id: &str, max_age: Duration, now: Instant) -> Option<ObservedLb> {
        self.observed
            .get(lb_id)
            .filter(|(at, _)| now.saturating_duration_since(*at) < max_age)
            .map(|(_, o)| o.clone())
    }

    pub fn remember_observed(&mut self, obs: ObservedLb, now: Instant) {
        self.observed.insert(obs.id.clone(), (now, obs));
    }

    /// A write changed the tree (or the LB is going): read it again next time.
    pub fn forget_observed(&mut self, lb_id: &str) {
        self.observed.remove(lb_id);
    }

    /// The load balancer is deleted: nothing is kept for it.
    pub fn forget_lb(&mut self, lb_id: &str) {
        self.abandoned.remove(lb_id);
        self.observed.remove(lb_id);
    }

    /// The KuryrLoadBalancer is gone: drop what was kept for it.
    pub fn forget(&mut self, uid: &str) {
        self.pending.remove(uid);
        self.in_flight.remove(uid);
        self.bursts.remove(uid);
        self.looks.remove(uid);
        self.wakes.remove(uid);
        self.began.remove(uid);
        self.listed.remove(uid);
        self.sweep_wanted.remove(uid);
        self.created.remove(uid);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    fn schedule() -> Schedule {
        Schedule::new(ScheduleConfig {
            poll_min: 100 * MS,
            poll_max: 2000 * MS,
            coalesce: 200 * MS,
        })
    }

    #[test]
    fn a_create_sent_is_remembered_until_the_object_is_gone() {
        let mut s = schedule();
        assert!(!s.ever_created("klb"));
        s.creating("klb");
        assert!(s.ever_created("klb"));
        assert!(!s.ever_created("other"));
        s.forget("klb");
        assert!(!s.ever_created("klb"));
    }

    #[test]
    fn an_object_older_than_our_status_write_is_behind_a_newer_or_odd_one_is_not() {
        let mut s = schedule();
        let t0 = Instant::now();
        assert!(!s.behind("klb", Some("5")), "no round yet");
        let start = s.start_round("klb", Some(1), t0);
        s.due_in("klb", start, "120".into(), Some(1), Duration::ZERO, t0);
        assert!(s.behind("klb", Some("119")));
        assert!(s.behind("klb", Some("7")));
        assert!(!s.behind("klb", Some("120")));
        assert!(!s.behind("klb", Some("121")));
        assert!(!s.behind("klb", Some("opaque")));
        assert!(!s.behind("klb", None));
    }

    #[test]
    fn a_pending_tree_is_polled_ever_more_slowly_and_says_how_long_it_has_waited() {
        let mut s = schedule();
        let t0 = Instant::now();
        assert_eq!(s.pending("klb", t0), (Duration::ZERO, 100 * MS));
        assert_eq!(s.pending("klb", t0 + 100 * MS), (100 * MS, 150 * MS));
        assert_eq!(s.pending("klb", t0 + 250 * MS).1, 225 * MS);
        s.settled("klb");
        assert_eq!(s.pending("klb", t0 + 900 * MS), (Duration::ZERO, 100 * MS));
    }

    #[test]
    fn our_own_write_restarts_the_pending_clock_and_the_polls() {
        let mut s = schedule();
        let t0 = Instant::now();
        s.pending("klb", t0);
        s.pending("klb", t0 + 500 * MS);
        s.wrote("klb", t0 + 600 * MS, 0);
        assert_eq!(s.pending("klb", t0 + 700 * MS), (100 * MS, 100 * MS));
    }

    #[test]
    fn a_burst_goes_once_the_endpoints_have_been_quiet_for_the_window() {
        let mut s = schedule();
        let t0 = Instant::now();
        assert_eq!(s.coalesce("klb", 1, t0), Some(200 * MS));
        assert_eq!(s.coalesce("klb", 2, t0 + 150 * MS), Some(200 * MS));
        assert_eq!(s.coalesce("klb", 2, t0 + 300 * MS), Some(50 * MS));
        assert_eq!(s.coalesce("klb", 2, t0 + 350 * MS), None);
        // Acted on: the same generation does not wait again.
        assert_eq!(s.coalesce("klb", 2, t0 + 360 * MS), None);
    }

    #[test]
    fn a_burst_that_never_goes_quiet_is_cut_at_five_windows() {
        let mut s = schedule();
        let t0 = Instant::now();
        let mut generation = 1;
        let mut verdict = s.coalesce("klb", generation, t0);
        let mut t = t0;
        while verdict.is_some() {
            generation += 1;
            t += 100 * MS;
            verdict = s.coalesce("klb", generation, t);
        }
        assert_eq!(t - t0, 1000 * MS, "five windows of 200 ms");
    }

    #[test]
    fn a_change_after_an_applied_burst_starts_a_new_window() {
        let mut s = schedule();
        let t0 = Instant::now();
        s.coalesce("klb", 1, t0);
        assert_eq!(s.coalesce("klb", 1, t0 + 200 * MS), None);
        // Long after: generation 2 gathers from now, not from the first burst.
        assert_eq!(s.coalesce("klb", 2, t0 + 5000 * MS), Some(200 * MS));
    }

    #[test]
    fn the_echo_of_our_own_status_write_is_not_due_until_the_next_look() {
        let mut s = schedule();
        let t0 = Instant::now();
        let start = s.start_round("klb", Some(2), t0);
        s.due_in("klb", start, "42".into(), Some(2), 60_000 * MS, t0);
        assert_eq!(s.not_due("klb", Some("42"), Some(2), t0), Some(60_000 * MS));
        assert_eq!(s.not_due("klb", Some("42"), Some(2), t0 + 60_000 * MS), None);
        s.wake("klb");
        assert_eq!(s.not_due("klb", Some("42"), Some(2), t0), None);
    }

    #[test]
    fn a_change_ranks_from_its_first_round_and_a_new_generation_from_its_own() {
        let mut s = schedule();
        let t0 = Instant::now();
        assert_eq!(s.start_round("klb", Some(1), t0).began, t0);
        // Later rounds of the same generation (waits, one write each) keep the rank.
        assert_eq!(s.start_round("klb", Some(1), t0 + 5000 * MS).began, t0);
        // A new spec is new work.
        let later = t0 + 6000 * MS;
        assert_eq!(s.start_round("klb", Some(2), later).began, later);
        s.forget("klb");
        let after = t0 + 7000 * MS;
        assert_eq!(s.start_round("klb", Some(2), after).began, after);
    }

    #[test]
    fn a_wake_while_the_round_ran_leaves_the_next_round_due_at_once() {
        // The observer saw the tree settle after the round's write but before the round wrote its status:
        // the round's own next look (the stuck check, minutes away) must not swallow the wake.
        let mut s = schedule();
        let t0 = Instant::now();
        let start = s.start_round("klb", Some(2), t0);
        s.wake("klb");
        s.due_in("klb", start, "42".into(), Some(2), 60_000 * MS, t0);
        assert_eq!(s.not_due("klb", Some("42"), Some(2), t0), None);
        // The next round, with no wake during it, sets its look as before.
        let start = s.start_round("klb", Some(2), t0);
        s.due_in("klb", start, "43".into(), Some(2), 60_000 * MS, t0);
        assert_eq!(s.not_due("klb", Some("43"), Some(2), t0), Some(60_000 * MS));
    }

    #[test]
    fn any_other_version_is_due_now() {
        let mut s = schedule();
        let t0 = Instant::now();
        let start = s.start_round("klb", Some(2), t0);
        s.due_in("klb", start, "42".into(), Some(2), 60_000 * MS, t0);
        assert_eq!(s.not_due("klb", Some("43"), Some(2), t0), None);
        assert_eq!(s.not_due("klb", None, Some(2), t0), None);
        assert_eq!(s.not_due("other", Some("42"), Some(2), t0), None);
    }

    #[test]
    fn a_spec_changed_while_the_round_ran_is_due_even_at_the_written_version() {
        // The round acted on generation 2; its status write answered resourceVersion 42 with generation
        // 3 (the Service front end patched the spec meanwhile). That object is not what the round saw.
        let mut s = schedule();
        let t0 = Instant::now();
        let start = s.start_round("klb", Some(2), t0);
        s.due_in("klb", start, "42".into(), Some(2), 60_000 * MS, t0);
        assert_eq!(s.not_due("klb", Some("42"), Some(3), t0), None);
    }

    #[test]
    fn strays_are_looked_for_after_a_start_when_known_and_otherwise_rarely() {
        let mut s = schedule();
        let t0 = Instant::now();
        let every = 3_600_000 * MS;
        assert!(s.sweep_due("klb", every, t0), "never listed by this process");
        s.listed("klb", false, t0);
        assert!(!s.sweep_due("klb", every, t0 + 1000 * MS));
        assert!(s.sweep_due("klb", every, t0 + every));
        s.want_sweep("klb");
        assert!(s.sweep_due("klb", every, t0 + 1000 * MS));
        s.swept("klb", false, t0 + 1000 * MS);
        assert!(s.sweep_due("klb", every, t0 + 2000 * MS), "a stray is left");
        s.swept("klb", true, t0 + 2000 * MS);
        assert!(!s.sweep_due("klb", every, t0 + 3000 * MS));
        s.listed("klb", true, t0 + 3000 * MS);
        assert!(
            s.sweep_due("klb", every, t0 + 3000 * MS),
            "the list showed others"
        );
    }

    #[test]
    fn an_observed_tree_is_reused_for_its_max_age_only() {
        let mut s = schedule();
        let t0 = Instant::now();
        let obs = ObservedLb {
            id: "lb1".into(),
            ..ObservedLb::default()
        };
        s.remember_observed(obs.clone(), t0);
        assert_eq!(s.observed("lb1", 1000 * MS, t0 + 999 * MS), Some(obs));
        assert_eq!(s.observed("lb1", 1000 * MS, t0 + 1000 * MS), None);
        s.forget_observed("lb1");
        assert_eq!(s.observed("lb1", 1000 * MS, t0), None);
    }

    #[test]
    fn a_write_of_many_members_may_stay_pending_longer_and_settling_resets_it() {
        let t0 = Instant::now();
        let mut s = schedule();
        let base = Duration::from_secs(300);
        let per = Duration::from_secs(3);
        assert_eq!(s.pending_limit("klb", base, per), base);
        s.wrote("klb", t0, 300);
        assert_eq!(s.pending_limit("klb", base, per), base + Duration::from_secs(900));
        s.settled("klb");
        assert_eq!(s.pending_limit("klb", base, per), base);
        s.wrote("klb", t0, 2);
        assert_eq!(s.pending_limit("klb", base, per), base + Duration::from_secs(6));
    }

    #[test]
    fn forgetting_an_object_leaves_nothing_behind() {
        let mut s = schedule();
        let t0 = Instant::now();
        s.pending("klb", t0);
        s.coalesce("klb", 1, t0);
        let start = s.start_round("klb", Some(1), t0);
        s.due_in("klb", start, "1".into(), Some(1), 1000 * MS, t0);
        s.wake("klb");
        s.listed("klb", true, t0);
        s.abandon("lb1");
        s.forget("klb");
        s.forget_lb("lb1");
        assert!(s.pending.is_empty() && s.in_flight.is_empty() && s.bursts.is_empty() && s.looks.is_empty());
        assert!(s.listed.is_empty() && s.sweep_wanted.is_empty());
        assert!(s.wakes.is_empty() && s.began.is_empty());
        assert!(!s.is_abandoned("lb1"));
    }
}
