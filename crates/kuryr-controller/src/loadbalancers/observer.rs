//! What the one Octavia observer of the KuryrLoadBalancer controller keeps between its ticks
//! ([`super::ticks`]): the `kuryr_core::lb::LbIndex` of the cluster's load balancers, the trees the last
//! listing showed, and the channel that wakes reconciles. Reconciles no longer poll their own load balancer:
//! the reads per tick do not grow with the number of Services (docs/services.md). Held in
//! [`crate::services::LbContext`], so it takes nothing from it.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use futures::channel::mpsc::{unbounded, UnboundedReceiver, UnboundedSender};
use kube::runtime::reflector::ObjectRef;
use kuryr_api::KuryrLoadBalancer;
use kuryr_core::lb::{IndexConfig, LbIndex, ObservedLb, Wake};
use tokio::sync::Notify;

use super::sightings::Cut;
use crate::toolkit::lock;

/// Which reconcile a load balancer belongs to: the object to requeue and its uid (the schedule's key).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct LbKey {
    pub obj: ObjectRef<KuryrLoadBalancer>,
    pub uid: String,
}

impl LbKey {
    pub fn of(klb: &KuryrLoadBalancer, uid: &str) -> Self {
        Self {
            obj: ObjectRef::from_obj(klb),
            uid: uid.to_owned(),
        }
    }
}

pub struct Observer {
    index: Mutex<LbIndex<LbKey>>,
    /// Per load balancer id: its tree as the last listing showed it.
    observed: Mutex<HashMap<String, ObservedLb>>,
    wake: Mutex<Option<UnboundedSender<ObjectRef<KuryrLoadBalancer>>>>,
    /// A reconcile began waiting: the observer may be in an idle sleep of a whole drift interval.
    waiting: Notify,
    /// The first look after a wait begins.
    poll_min: Duration,
}

impl Observer {
    pub fn new(config: IndexConfig) -> Self {
        Self {
            index: Mutex::new(LbIndex::new(config)),
            observed: Mutex::new(HashMap::new()),
            wake: Mutex::new(None),
            waiting: Notify::new(),
            poll_min: config.poll_min,
        }
    }

    /// The stream of objects to reconcile (`Controller::reconcile_on`); one per observer.
    pub fn wakes(&self) -> UnboundedReceiver<ObjectRef<KuryrLoadBalancer>> {
        let (tx, rx) = unbounded();
        *lock(&self.wake) = Some(tx);
        rx
    }

    /// The index; never hold the guard across an await.
    pub fn index(&self) -> MutexGuard<'_, LbIndex<LbKey>> {
        lock(&self.index)
    }

    /// `key`'s reconcile waits for `lb_id` to settle (after its own write: `wrote`); the observer's next
    /// listing comes within the first poll, even if it was sleeping a whole drift interval.
    pub fn await_settle(&self, lb_id: &str, key: LbKey, wrote: bool) {
        self.index().await_settle(lb_id, key, wrote, Instant::now());
        self.waiting.notify_one();
    }

    /// Whether ticks run: reconciles then wait to be woken instead of polling.
    pub fn observing(&self) -> bool {
        self.index().observing()
    }

    /// `lb_id`'s listeners, pools and health monitors from a listing begun after our last write to it.
    pub fn current(&self, lb_id: &str) -> Option<ObservedLb> {
        self.index().current(lb_id)?;
        lock(&self.observed).get(lb_id).cloned()
    }

    /// A listing begun at `started`, cut into sightings: the index takes them, the trees are kept; the
    /// reconciles to wake.
    pub fn record(&self, cut: Cut, started: Instant) -> Vec<Wake<LbKey>> {
        let wakes = self.index().apply(cut.sightings, started);
        *lock(&self.observed) = cut.observed;
        wakes
    }

    /// Where wakes go, once [`Observer::wakes`] was called.
    pub fn waker(&self) -> Option<UnboundedSender<ObjectRef<KuryrLoadBalancer>>> {
        lock(&self.wake).clone()
    }

    /// Resolves when a reconcile begins waiting.
    pub async fn waiting(&self) {
        self.waiting.notified().await
    }

    /// The first look after a wait begins.
    pub fn poll_min(&self) -> Duration {
        self.poll_min
    }
}
