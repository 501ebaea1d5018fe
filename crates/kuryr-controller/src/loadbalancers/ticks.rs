//! The ticks of the one Octavia observer ([`super::observer`]): each lists the cluster's load balancers,
//! listeners, pools (and health monitors, when a pool has one) with one tag-filtered call each
//! (`kuryr_openstack::octavia::cluster`), feeds the listing to the observer's index, and wakes the
//! reconciles it names (settled after a wait, drift, gone, strays).

use std::sync::Arc;
use std::time::{Duration, Instant};

use kuryr_core::lb::{Wake, WakeReason};
use kuryr_openstack::octavia::cluster;
use kuryr_openstack::Owner;
use tracing::{debug, warn};

use super::observer::LbKey;
use super::sightings;
use crate::errors::Result;
use crate::services::context::LbContext;

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
    let wakes = ctx.observer.record(sightings::cut(listing), started);
    let tx = ctx.observer.waker();
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
                _ = ctx.observer.waiting() => {
                    due = due.min(tokio::time::Instant::now() + ctx.observer.poll_min());
                }
            }
        }
    }
}
