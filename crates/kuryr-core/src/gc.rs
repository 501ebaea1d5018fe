//! Garbage collection decisions: which tagged cloud objects no live Kubernetes object owns, and when one of
//! them may be deleted. The controller's sweeper and `kuryrctl gc` both decide here, on what
//! kuryr-openstack's `owned` lists and the live owners kuryr-api's `owners` finds; deleting is the
//! controller's.
//!
//! An object is an orphan when its ownership tags name a kind we know maps to Kubernetes objects and its uid
//! is the uid of no live object of any of those kinds (the union is used because a port tagged
//! `kind=KuryrPort` carries its pod's uid, and other drivers may tag with either the Kubernetes object's or
//! the Kuryr CRD's uid). Kinds we do not know (e.g. a cluster-wide router tagged with a cluster id) are
//! never collected. An orphan is deleted only once it has been seen orphaned in two sweeps and is older
//! than the grace period, so a create whose owner is not in the cache yet is never raced.
//!
//! The cloud's resource type is a parameter `R` (kuryr-openstack's `TaggedResource`, which this crate
//! cannot name): decisions need only its order, which is the deletion order (dependents first), and reports
//! its label.

use std::collections::{BTreeMap, HashSet};
use std::time::{Duration, Instant};

use serde::Serialize;

/// Owner kinds (lower-cased) whose uid is a Kubernetes object's: the only ones ever collected.
/// Pool ports (`kind=pool`) and node-level objects are left out: their uid need not be a Kubernetes uid.
pub const COLLECTABLE_KINDS: [&str; 9] = [
    "pod",
    "kuryrport",
    "service",
    "endpoints",
    "kuryrloadbalancer",
    "namespace",
    "kuryrnetwork",
    "networkpolicy",
    "kuryrnetworkpolicy",
];

/// One tagged cloud object as listed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tagged<R> {
    pub resource: R,
    pub id: String,
    pub name: String,
    /// `kuryr.kind=` tag.
    pub owner_kind: String,
    /// `kuryr.uid=` tag.
    pub owner_uid: String,
    /// Time since the cloud created it, when the cloud says.
    pub age: Option<Duration>,
}

impl<R> Tagged<R> {
    /// From a listed object's parts (its owner from its `kuryr.kind=` / `kuryr.uid=` tags).
    pub fn new(
        resource: R,
        id: &str,
        name: &str,
        owner_kind: &str,
        owner_uid: &str,
        age: Option<Duration>,
    ) -> Self {
        Self {
            resource,
            id: id.to_owned(),
            name: name.to_owned(),
            owner_kind: owner_kind.to_owned(),
            owner_uid: owner_uid.to_owned(),
            age,
        }
    }
}

/// What one object is, on one sweep.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Its owner is alive.
    Owned,
    /// Its kind is not one we can check: kept.
    UnknownKind,
    /// Orphaned, first sighting (or not yet old enough): kept until confirmed.
    Suspect,
    /// Orphaned on two sweeps and older than the grace period: delete.
    Collect,
}

impl Verdict {
    pub fn label(self) -> &'static str {
        match self {
            Verdict::Owned => "owned",
            Verdict::UnknownKind => "unknown_kind",
            Verdict::Suspect => "suspect",
            Verdict::Collect => "collect",
        }
    }
}

/// Is the owner of `obj` among `live` uids (or not checkable)?
pub fn classify<R>(obj: &Tagged<R>, live: &HashSet<String>) -> Verdict {
    let kind = obj.owner_kind.to_ascii_lowercase();
    if !COLLECTABLE_KINDS.contains(&kind.as_str()) {
        Verdict::UnknownKind
    } else if live.contains(&obj.owner_uid) {
        Verdict::Owned
    } else {
        Verdict::Suspect
    }
}

/// Whether an orphan is old enough: by the cloud's creation time when known, else by how long we have
/// seen it orphaned.
fn old_enough(age: Option<Duration>, suspected_for: Duration, grace: Duration) -> bool {
    age.unwrap_or(suspected_for) >= grace
}

#[derive(Debug, Clone, Copy)]
struct Sighting {
    first: Instant,
    sweeps: u32,
}

/// The collector's memory between sweeps: orphans seen so far.
#[derive(Debug, Clone)]
pub struct GcBook<R> {
    grace: Duration,
    seen: BTreeMap<(R, String), Sighting>,
}

impl<R: Copy + Ord> GcBook<R> {
    pub fn new(grace: Duration) -> Self {
        Self {
            grace,
            seen: BTreeMap::new(),
        }
    }

    pub fn grace(&self) -> Duration {
        self.grace
    }

    /// One sweep over everything listed: a verdict per object, in deletion order. Objects no longer
    /// listed or no longer orphaned are forgotten, so an owner reappearing resets the count.
    pub fn sweep(
        &mut self,
        now: Instant,
        listed: &[Tagged<R>],
        live: &HashSet<String>,
    ) -> Vec<(Tagged<R>, Verdict)> {
        let mut out = Vec::with_capacity(listed.len());
        let mut keep = BTreeMap::new();
        for obj in listed {
            let key = (obj.resource, obj.id.clone());
            let verdict = match classify(obj, live) {
                Verdict::Suspect => {
                    let prev = self.seen.get(&key).copied();
                    let s = Sighting {
                        first: prev.map_or(now, |p| p.first),
                        sweeps: prev.map_or(1, |p| p.sweeps.saturating_add(1)),
                    };
                    keep.insert(key, s);
                    let suspected_for = now.saturating_duration_since(s.first);
                    if s.sweeps >= 2 && old_enough(obj.age, suspected_for, self.grace) {
                        Verdict::Collect
                    } else {
                        Verdict::Suspect
                    }
                }
                other => other,
            };
            out.push((obj.clone(), verdict));
        }
        self.seen = keep;
        out.sort_by(|a, b| a.0.resource.cmp(&b.0.resource).then_with(|| a.0.id.cmp(&b.0.id)));
        out
    }

    /// The object was deleted (or found gone): stop tracking it.
    pub fn collected(&mut self, resource: R, id: &str) {
        self.seen.remove(&(resource, id.to_owned()));
    }

    /// How many orphans are being tracked.
    pub fn suspects(&self) -> usize {
        self.seen.len()
    }
}

/// What a dry run reports for an orphan: whether the collector would delete it on its next confirming
/// sweep (old enough) or is still inside the grace period.
pub fn dry_run<R: Copy + Ord>(
    listed: &[Tagged<R>],
    live: &HashSet<String>,
    grace: Duration,
) -> Vec<(Tagged<R>, Verdict)> {
    let mut out: Vec<_> = listed
        .iter()
        .map(|o| {
            let v = match classify(o, live) {
                Verdict::Suspect if o.age.is_some_and(|a| a >= grace) => Verdict::Collect,
                v => v,
            };
            (o.clone(), v)
        })
        .collect();
    out.sort_by(|a, b| a.0.resource.cmp(&b.0.resource).then_with(|| a.0.id.cmp(&b.0.id)));
    out
}

/// One line of a sweep report (`kuryrctl gc -o json`, the controller's log).
#[derive(Debug, Clone, Serialize)]
pub struct ReportLine {
    pub resource: &'static str,
    pub id: String,
    pub name: String,
    pub owner_kind: String,
    pub owner_uid: String,
    pub age_seconds: Option<u64>,
    pub verdict: &'static str,
}

impl ReportLine {
    pub fn new<R: Copy + Into<&'static str>>(obj: &Tagged<R>, verdict: Verdict) -> Self {
        Self {
            resource: obj.resource.into(),
            id: obj.id.clone(),
            name: obj.name.clone(),
            owner_kind: obj.owner_kind.clone(),
            owner_uid: obj.owner_uid.clone(),
            age_seconds: obj.age.map(|a| a.as_secs()),
            verdict: verdict.label(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The cloud's resource types as the collector sees them: ordered for deletion, labelled.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
    enum CloudResource {
        LoadBalancer,
        Port,
        SecurityGroup,
        Subnet,
        Network,
    }

    impl From<CloudResource> for &'static str {
        fn from(r: CloudResource) -> Self {
            match r {
                CloudResource::Port => "port",
                _ => "other",
            }
        }
    }

    fn obj(
        resource: CloudResource,
        id: &str,
        kind: &str,
        uid: &str,
        age_s: Option<u64>,
    ) -> Tagged<CloudResource> {
        Tagged::new(resource, id, "", kind, uid, age_s.map(Duration::from_secs))
    }

    fn live(uids: &[&str]) -> HashSet<String> {
        uids.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn an_orphan_is_collected_only_on_its_second_sighting_once_past_grace() {
        let grace = Duration::from_secs(60);
        let mut book = GcBook::new(grace);
        let t0 = Instant::now();
        let listed = vec![obj(CloudResource::Port, "p1", "KuryrPort", "gone", Some(3600))];
        let v1 = book.sweep(t0, &listed, &live(&[]));
        assert_eq!(v1[0].1, Verdict::Suspect);
        let v2 = book.sweep(t0 + Duration::from_secs(30), &listed, &live(&[]));
        assert_eq!(v2[0].1, Verdict::Collect);
    }

    #[test]
    fn a_young_orphan_waits_for_the_grace_period_even_when_seen_twice() {
        let grace = Duration::from_secs(60);
        let mut book = GcBook::new(grace);
        let t0 = Instant::now();
        let young = vec![obj(CloudResource::Port, "p1", "pod", "new", Some(5))];
        book.sweep(t0, &young, &live(&[]));
        assert_eq!(
            book.sweep(t0 + Duration::from_secs(10), &young, &live(&[]))[0].1,
            Verdict::Suspect
        );
        // No creation time from the cloud: time since first suspected counts.
        let mut book = GcBook::new(grace);
        let unknown_age = vec![obj(CloudResource::Port, "p2", "pod", "new", None)];
        book.sweep(t0, &unknown_age, &live(&[]));
        assert_eq!(
            book.sweep(t0 + Duration::from_secs(10), &unknown_age, &live(&[]))[0].1,
            Verdict::Suspect
        );
        assert_eq!(
            book.sweep(t0 + Duration::from_secs(61), &unknown_age, &live(&[]))[0].1,
            Verdict::Collect
        );
    }

    #[test]
    fn an_owner_showing_up_between_sweeps_resets_the_count() {
        let mut book = GcBook::new(Duration::ZERO);
        let t0 = Instant::now();
        let listed = vec![obj(
            CloudResource::SecurityGroup,
            "sg",
            "NetworkPolicy",
            "u1",
            Some(100),
        )];
        assert_eq!(book.sweep(t0, &listed, &live(&[]))[0].1, Verdict::Suspect);
        assert_eq!(book.sweep(t0, &listed, &live(&["u1"]))[0].1, Verdict::Owned);
        assert_eq!(book.suspects(), 0);
        assert_eq!(book.sweep(t0, &listed, &live(&[]))[0].1, Verdict::Suspect);
    }

    #[test]
    fn unknown_kinds_and_live_owners_are_never_collected() {
        let mut book = GcBook::new(Duration::ZERO);
        let t0 = Instant::now();
        let listed = vec![
            obj(CloudResource::Network, "n", "cluster", "c1", Some(1000)),
            obj(CloudResource::Port, "p", "KuryrPort", "alive", Some(1000)),
        ];
        for _ in 0..3 {
            let v = book.sweep(t0, &listed, &live(&["alive"]));
            assert!(v.iter().all(|(_, v)| *v != Verdict::Collect), "{v:?}");
        }
    }

    #[test]
    fn verdicts_come_in_deletion_order() {
        let mut book = GcBook::new(Duration::ZERO);
        let listed = vec![
            obj(CloudResource::Network, "n", "namespace", "x", Some(9)),
            obj(CloudResource::Port, "p", "pod", "x", Some(9)),
            obj(CloudResource::LoadBalancer, "lb", "service", "x", Some(9)),
            obj(CloudResource::Subnet, "s", "namespace", "x", Some(9)),
        ];
        let order: Vec<_> = book
            .sweep(Instant::now(), &listed, &live(&[]))
            .into_iter()
            .map(|(o, _)| o.id)
            .collect();
        assert_eq!(order, vec!["lb", "p", "s", "n"]);
    }

    #[test]
    fn dry_run_marks_old_orphans_for_collection_and_keeps_young_ones_suspect() {
        let listed = vec![
            obj(CloudResource::Port, "old", "pod", "x", Some(600)),
            obj(CloudResource::Port, "young", "pod", "x", Some(1)),
            obj(CloudResource::Port, "mine", "pod", "alive", Some(600)),
        ];
        let v = dry_run(&listed, &live(&["alive"]), Duration::from_secs(120));
        let by_id: BTreeMap<_, _> = v.iter().map(|(o, v)| (o.id.as_str(), *v)).collect();
        assert_eq!(by_id["old"], Verdict::Collect);
        assert_eq!(by_id["young"], Verdict::Suspect);
        assert_eq!(by_id["mine"], Verdict::Owned);
    }

    #[test]
    fn a_report_line_names_the_resource_by_its_label() {
        let line = ReportLine::new(
            &obj(CloudResource::Port, "p", "pod", "u", Some(90)),
            Verdict::Suspect,
        );
        assert_eq!(
            (
                line.resource,
                line.owner_kind.as_str(),
                line.age_seconds,
                line.verdict
            ),
            ("port", "pod", Some(90), "suspect")
        );
    }
}
