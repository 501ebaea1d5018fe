//! The one Octavia observer of the KuryrLoadBalancer controller: each tick lists the cluster's load
//! balancers, listeners, pools (and health monitors, when a pool has one) with one tag-filtered call each
//! (`kuryr_openstack::octavia::cluster`), feeds the listing to `kuryr_core::lb::LbIndex`, and wakes the
//! reconciles it names (settled after a wait, drift, gone, strays). Reconciles no longer poll their own
//! load balancer: the reads per tick do not grow with the number of Services (docs/services.md).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use futures::channel::mpsc::{unbounded, UnboundedReceiver, UnboundedSender};
use kube::runtime::reflector::ObjectRef;
use kuryr_api::KuryrLoadBalancer;
use kuryr_core::lb::{IndexConfig, LbIndex, ObservedLb, Wake, WakeReason};
use kuryr_openstack::octavia::cluster;
use kuryr_openstack::Owner;
use tokio::sync::Notify;
use tracing::{debug, warn};

use super::sightings;
use crate::errors::Result;
use crate::services::context::LbContext;
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
}

/// How far behind pod and Service work the observer's lists rank when Octavia's calls queue
/// (`kuryr_openstack::work_started`): work begun up to this long after a list goes first, older work
/// after it. Never further back: a starved observer would leave every waiting Service unready.
const BACKGROUND_LAG: Duration = Duration::from_secs(5);

/// One tick: the lists, the index, the wakes (also returned, for tests that reconcile by hand).
pub async fn tick(ctx: &LbContext) -> Result<Vec<Wake<LbKey>>> {
    let started = Instant::now();
    let tag = Owner::cluster_filter(&ctx.cluster_id).join(",");
    let rank = tokio::time::Instant::now() + BACKGROUND_LAG;
    let listing = kuryr_openstack::work_started(rank, cluster::list(&ctx.cloud, &tag)).await;
    ctx.metrics.lb_observer_tick(listing.is_ok());
    let listing = listing?;
    let cut = sightings::cut(listing);
    let wakes = ctx.observer.index().apply(cut.sightings, started);
    *lock(&ctx.observer.observed) = cut.observed;
    let tx = lock(&ctx.observer.wake).clone();
    for w in &wakes {
        debug!(lb_id = w.lb_id, reason = ?w.reason, "waking the load balancer's reconcile");
        ctx.metrics.lb_observer_wake(w.reason);
        {
            let mut schedule = ctx.schedule();
            // Due now, whatever the last round said (or the one running will say).
            schedule.wake(&w.key.uid);
            if w.reason == WakeReason::Strays {
                schedule.want_sweep(&w.key.uid);
            }
        }
        if let Some(tx) = &tx {
            let _ = tx.unbounded_send(w.key.obj.clone());
        }
    }
    Ok(wakes)
}

/// Ticks until `shutdown`: fast while a reconcile waits, every drift interval otherwise. A failed listing
/// is logged and tried again at the next tick.
pub async fn run(ctx: Arc<LbContext>, shutdown: impl std::future::Future<Output = ()>) {
    tokio::pin!(shutdown);
    loop {
        if let Err(e) = tick(&ctx).await {
            warn!(
                error = &e as &dyn std::error::Error,
                "listing the cluster's load balancers failed"
            );
        }
        let mut due = tokio::time::Instant::now() + ctx.observer.index().next_tick();
        loop {
            tokio::select! {
                _ = &mut shutdown => return,
                _ = tokio::time::sleep_until(due) => break,
                // Without this, a write made during an idle sleep waited out the drift interval (15 s
                // per member write of a 100-port Service).
                _ = ctx.observer.waiting.notified() => {
                    due = due.min(tokio::time::Instant::now() + ctx.observer.poll_min);
                }
            }
        }
    }
}
