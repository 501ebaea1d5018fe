//! What the KuryrPort side keeps in memory per object: the status this controller last wrote (the watch
//! cache may not show it yet), and each pod's wiring clock and ACTIVE polls.

use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use kube::runtime::reflector::Store;
use kuryr_api::{KuryrPort, KuryrPortStatus};
use kuryr_core::backoff::poll_delay;

use crate::ports::cached::CachedKp;
use crate::toolkit::{lock, Uid};

#[derive(Default)]
pub struct PortBook {
    /// Status this controller last wrote per KuryrPort uid: the watch cache may not show it yet when the
    /// next reconcile runs, and acting on the older copy would allocate a second port.
    written: Mutex<HashMap<Uid, KuryrPortStatus>>,
    /// Per pod uid: when first seen (time-to-wire) and how many ACTIVE polls so far.
    wiring: Mutex<HashMap<Uid, Wiring>>,
}

#[derive(Clone, Copy, Debug)]
struct Wiring {
    since: Instant,
    polls: u32,
    /// When the Pod front end created the pod's KuryrPort, until the port is wired.
    kuryrport_created: Option<Instant>,
}

impl PortBook {
    /// The freshest status known for `kp`: the one in the object, unless this controller wrote a newer one
    /// the watch has not delivered yet.
    ///
    /// Once the object shows exactly what was written, the copy is dropped: at 10k pods, a copy of every
    /// status held for the life of its KuryrPort was ~10 % of the controller's memory.
    pub fn status_of(&self, kp: &KuryrPort) -> KuryrPortStatus {
        let seen = kp.status.clone().unwrap_or_default();
        let uid = Uid::of(kp);
        let mut written = lock(&self.written);
        if written.get(&uid).is_some_and(|mine| *mine == seen) {
            written.remove(&uid);
            return seen;
        }
        freshest(seen, written.get(&uid))
    }

    pub fn wrote_status(&self, uid: &Uid, status: &KuryrPortStatus) {
        lock(&self.written).insert(uid.clone(), status.clone());
    }

    /// The KuryrPort (`uid`) of pod `pod_uid` is gone: drop everything kept for both.
    pub fn forget(&self, uid: &Uid, pod_uid: &Uid) {
        lock(&self.written).remove(uid);
        lock(&self.wiring).remove(pod_uid);
    }

    /// Ports named by any KuryrPort status (the synced cache, plus statuses written it has not shown yet).
    pub fn ports_in_use(&self, kuryrports: &Store<CachedKp>) -> BTreeSet<String> {
        let mut ids = BTreeSet::new();
        for kp in kuryrports.state() {
            ids.extend(kp.summary().iter().map(str::to_owned));
        }
        ids.extend(
            lock(&self.written)
                .values()
                .flat_map(|st| st.vifs.values().map(|v| v.vif.port_id.clone())),
        );
        ids
    }

    /// Whether a KuryrPort other than `uid` names `port_id` in its status.
    pub fn port_named_elsewhere(&self, kuryrports: &Store<CachedKp>, port_id: &str, uid: &Uid) -> bool {
        let named = |st: &KuryrPortStatus| st.vifs.values().any(|v| v.vif.port_id == port_id);
        kuryrports
            .state()
            .iter()
            .any(|kp| kp.summary().contains(port_id) && &Uid::of(kp.as_ref()) != uid)
            || lock(&self.written)
                .iter()
                .any(|(other, st)| other != uid && named(st))
    }

    /// Starts the pod's wiring clock (the Pod front end sees it first; the KuryrPort controller after a
    /// restart); when it started. It is also the rank of the pod's cloud calls: the pods begun first are
    /// finished first ([`kuryr_openstack::work_started`]).
    pub fn first_seen(&self, pod_uid: &Uid) -> Instant {
        lock(&self.wiring)
            .entry(pod_uid.clone())
            .or_insert(Wiring {
                since: Instant::now(),
                polls: 0,
                kuryrport_created: None,
            })
            .since
    }

    /// The Pod front end created the KuryrPort of pod `pod_uid`.
    pub fn kuryrport_created(&self, pod_uid: &Uid) {
        if let Some(w) = lock(&self.wiring).get_mut(pod_uid) {
            w.kuryrport_created = Some(Instant::now());
        }
    }

    /// Whether the pod's KuryrPort was created less than `window` ago: a cache without it is behind (the
    /// pod's next update, e.g. its status, triggers the next reconcile before the KuryrPort's event lands), and creating
    /// it again is a refused request per pod (measured: 40 creates for 20 pods, half answered 409).
    pub fn kuryrport_just_created(&self, pod_uid: &Uid, window: Duration) -> bool {
        lock(&self.wiring)
            .get(pod_uid)
            .and_then(|w| w.kuryrport_created)
            .is_some_and(|at| at.elapsed() < window)
    }

    /// The port went ACTIVE: how long since the pod was first seen (once per pod).
    pub fn wired(&self, pod_uid: &Uid) -> Option<Duration> {
        lock(&self.wiring).remove(pod_uid).map(|w| w.since.elapsed())
    }

    /// Delay before the next ACTIVE poll: `min`, growing by half per poll up to `max`.
    pub fn next_poll(&self, pod_uid: &Uid, min: Duration, max: Duration) -> Duration {
        let mut wiring = lock(&self.wiring);
        let polls = wiring.get(pod_uid).map_or(0, |w| w.polls);
        if let Some(w) = wiring.get_mut(pod_uid) {
            w.polls += 1;
        }
        poll_delay(min, max, polls)
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
            st.vifs
                .insert("eth0".into(), Box::new(PodVif { default: true, vif }));
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

    /// A KuryrPort without a status yet.
    fn kuryrport() -> KuryrPort {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "openstack.org/v1", "kind": "KuryrPort",
            "metadata": {"name": "p", "namespace": "ns", "uid": "kp"},
            "spec": {"podUid": "pod", "podNodeName": "node-1"}
        }))
        .unwrap()
    }

    #[test]
    fn a_written_status_is_kept_until_the_object_shows_it() {
        let book = PortBook::default();
        let mut kp = kuryrport();
        let mine = mk_status(Some(false));
        book.wrote_status(&Uid::of(&kp), &mine);
        // The cache is behind: ours is the status, and its port counts as in use.
        assert_eq!(book.status_of(&kp), mine);
        let (empty, _writer) = kube::runtime::reflector::store::<CachedKp>();
        assert!(book.port_named_elsewhere(&empty, "p1", &Uid::from("other")));
        // The object shows it: the copy goes, and the answer is the same.
        kp.status = Some(mine.clone());
        assert_eq!(book.status_of(&kp), mine);
        assert!(lock(&book.written).is_empty());
    }

    /// The copy goes once the watch brings the status back, conditions and all (the API server keeps
    /// their times to the second: stamped to the nanosecond, no status was ever recognised, and the book
    /// held one per KuryrPort for its life).
    #[test]
    fn a_written_status_with_conditions_goes_once_the_watch_brings_it_back() {
        use kuryr_api::conditions::{set_condition, Condition, ConditionStatus, READY};
        let book = PortBook::default();
        let mut kp = kuryrport();
        let mut mine = mk_status(Some(true));
        set_condition(
            &mut mine.conditions,
            Condition::new(READY, ConditionStatus::True, "Active", ""),
        );
        book.wrote_status(&Uid::of(&kp), &mine);
        kp.status = Some(serde_json::from_value(serde_json::to_value(&mine).unwrap()).unwrap());
        book.status_of(&kp);
        assert!(lock(&book.written).is_empty());
    }

    #[test]
    fn active_polls_of_a_pod_slow_down_until_it_is_wired() {
        let book = PortBook::default();
        let pod = Uid::from("pod");
        let (min, max) = (Duration::from_millis(100), Duration::from_secs(5));
        book.first_seen(&pod);
        assert_eq!(book.next_poll(&pod, min, max), min);
        assert_eq!(book.next_poll(&pod, min, max), Duration::from_millis(150));
        assert!(book.wired(&pod).is_some());
        assert!(book.wired(&pod).is_none(), "wired is measured once");
        assert_eq!(book.next_poll(&pod, min, max), min, "no clock, no growth");
    }
}
