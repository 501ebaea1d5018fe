//! Per-object bookkeeping every controller keeps: consecutive failures (the retry backoff) and the
//! problems last told in Events (so each is told once, not every reconcile).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use kuryr_core::backoff::retry_delay;

use super::{lock, Uid};

/// What a told problem is about, so one object's different kinds of news are remembered apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Topic {
    /// The object's spec: unsupported or refused parts, why it gets no load balancer.
    Spec,
    /// Annotations that are not honoured.
    Annotations,
    /// The floating IP asked for.
    FloatingIp,
    /// The project a Namespace asked for (told by the pod path when no namespace controller runs).
    Project,
    /// A pod's extra networks that are refused.
    Networks,
}

#[derive(Default)]
pub struct Ledger {
    failures: Mutex<HashMap<Uid, u32>>,
    told: Mutex<HashMap<(Uid, Topic), Vec<String>>>,
}

impl Ledger {
    /// Records a failure of `uid`; returns how long to wait before the next try.
    pub fn failed(&self, uid: &Uid, permanent: bool) -> Duration {
        let mut failures = lock(&self.failures);
        let n = failures.entry(uid.clone()).or_insert(0);
        *n = n.saturating_add(1);
        retry_delay(*n, permanent)
    }

    pub fn succeeded(&self, uid: &Uid) {
        lock(&self.failures).remove(uid);
    }

    /// Whether `messages` differ from what was told about `uid` on `topic` last time (then they are
    /// remembered). An empty list is never news, and forgets what was told.
    pub fn news(&self, uid: &Uid, topic: Topic, messages: Vec<String>) -> bool {
        let mut told = lock(&self.told);
        let key = (uid.clone(), topic);
        if messages.is_empty() {
            told.remove(&key);
            return false;
        }
        if told.get(&key) == Some(&messages) {
            return false;
        }
        told.insert(key, messages);
        true
    }

    /// The object is gone: drop everything kept for it.
    pub fn forget(&self, uid: &Uid) {
        lock(&self.failures).remove(uid);
        lock(&self.told).retain(|(u, _), _| u != uid);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_failure_in_a_row_waits_longer_and_a_success_starts_over() {
        let ledger = Ledger::default();
        let uid = Uid::from("u1");
        assert_eq!(ledger.failed(&uid, false), Duration::from_millis(500));
        assert_eq!(ledger.failed(&uid, false), Duration::from_secs(1));
        assert_eq!(ledger.failed(&Uid::from("u2"), false), Duration::from_millis(500));
        ledger.succeeded(&uid);
        assert_eq!(ledger.failed(&uid, false), Duration::from_millis(500));
        assert_eq!(ledger.failed(&uid, true), Duration::from_secs(60));
    }

    #[test]
    fn a_problem_is_news_once_per_topic_until_it_changes() {
        let ledger = Ledger::default();
        let uid = Uid::from("u1");
        let told = || vec!["OverQuota: no".to_owned()];
        assert!(ledger.news(&uid, Topic::Spec, told()));
        assert!(!ledger.news(&uid, Topic::Spec, told()));
        assert!(ledger.news(&uid, Topic::FloatingIp, told()));
        assert!(!ledger.news(&uid, Topic::Spec, Vec::new()), "nothing to tell");
        assert!(
            ledger.news(&uid, Topic::Spec, told()),
            "told again after it was fixed"
        );
    }

    #[test]
    fn forgetting_an_object_drops_its_failures_and_every_topic() {
        let ledger = Ledger::default();
        let uid = Uid::from("u1");
        ledger.failed(&uid, false);
        ledger.failed(&uid, false);
        ledger.news(&uid, Topic::Spec, vec!["x".into()]);
        ledger.news(&uid, Topic::Annotations, vec!["y".into()]);
        ledger.forget(&uid);
        assert_eq!(ledger.failed(&uid, false), Duration::from_millis(500));
        assert!(ledger.news(&uid, Topic::Spec, vec!["x".into()]));
        assert!(ledger.news(&uid, Topic::Annotations, vec!["y".into()]));
    }
}
