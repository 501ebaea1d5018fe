//! The KuryrPort controller: under `kuryr.openstack.org/kuryrport-finalizer`, `apply` allocates the pod's
//! port and waits for it to go ACTIVE, `cleanup` gives it back. Failures become a Warning Event and a
//! `Ready=False` condition, and are retried with backoff (see [`crate::toolkit::error_policy`]).

use std::sync::Arc;
use std::time::Duration;

use kube::runtime::controller::Action;
use kube::runtime::finalizer::{finalizer, Event as Finalizer};
use kuryr_api::{finalizers, Api, KuryrPort, KuryrPortStatus, Resource, ResourceExt};
use kuryr_core::kuryrport::set_vif;
use tracing::{debug, info, instrument, warn};

use crate::context::Context;
use crate::errors::{Error, Result};
use crate::metrics;
use crate::ports::allocate::{self, Made};
use crate::ports::cached::CachedKp;
use crate::ports::{active, podport, pool, release, status};
use crate::toolkit::Uid;

pub const CONTROLLER: &str = "kuryrport";

/// Re-check of a KuryrPort in another controller's namespace (it may be relabelled into the selector). A
/// wired one here waits for a change instead: its reconcile reads only the caches, whose watches bring every
/// change, and a timer per object held ~1.2 KB in the controller's scheduler (10,000 pods: ~12 MB).
const RESYNC: Duration = Duration::from_secs(600);

#[instrument(skip(cached, ctx), fields(namespace = cached.namespace(), name = cached.name_any()))]
pub async fn reconcile(cached: Arc<CachedKp>, ctx: Arc<Context>) -> Result<Action> {
    ctx.metrics.reconciled(CONTROLLER);
    let kp = Arc::new(cached.unpack()?);
    let ns = kp.namespace().ok_or(Error::MissingField("metadata.namespace"))?;
    if !ctx.selected(&ns).await? {
        // Another controller's namespace: the KuryrPort finalizer's name is shared (upstream's), so acting
        // here would allocate or release a second time.
        return Ok(Action::requeue(RESYNC));
    }
    let api: Api<KuryrPort> = Api::namespaced(ctx.client.clone(), &ns);
    let uid = Uid::of(kp.as_ref());
    let result = finalizer(&api, finalizers::KURYRPORT, kp.clone(), |event| async {
        match event {
            Finalizer::Apply(kp) => {
                // The pod's calls rank by when it was first seen: the oldest pods of a burst are
                // finished before the first calls of the newest (docs/openstack-client.md).
                let began = ctx.book.first_seen(&pod_uid(&kp));
                // Boxed: the scope would otherwise hold the whole (large) apply future inline, and a debug
                // build copies it through each layer on the stack (a test thread's 2 MiB overflowed).
                kuryr_openstack::work_started(began.into(), Box::pin(apply(&kp, &ctx))).await
            }
            // Boxed too: held inline, the cleanup made every reconcile in flight 35 KB (4.5 KB boxed; up
            // to 256 in flight, all of them after a restart).
            Finalizer::Cleanup(kp) => Box::pin(cleanup(&kp, &ctx)).await,
        }
    })
    .await;
    let result = crate::toolkit::finalizer::outcome(result);
    match &result {
        Ok(_) => ctx.ledger.succeeded(&uid),
        Err(e) => report(&kp, &ctx, e).await,
    }
    result
}

/// Wires a KuryrPort that has no port yet, else polls its ports until ACTIVE.
async fn apply(kp: &KuryrPort, ctx: &Arc<Context>) -> Result<Action> {
    let pod_uid = pod_uid(kp);
    ctx.book.first_seen(&pod_uid);
    let mut st = ctx.book.status_of(kp);
    // Wired before (and timed then, or by a process since restarted): only a stale `Ready` is written.
    let wired_before = st.all_active();
    let mut made = Made::default();
    if let Err(e) = update(kp, ctx, &mut st, &mut made).await {
        // The one rollback: nobody will know of the ports made in this round, so give them back now rather
        // than leak them.
        release::undo_all(ctx, &made.ports, &kp.spec.pod_node_name).await;
        return Err(e);
    }
    if wired_before {
        return Ok(Action::await_change());
    }
    if st.all_active() {
        return Ok(wired(ctx, &pod_uid));
    }
    Ok(Action::requeue(next_poll(ctx, &pod_uid)))
}

/// Brings the status up to date and writes it when it changed: a stale `Ready`, the ports polled for
/// ACTIVE, or the pod's first ports (`made`, for [`apply`] to give back when anything fails).
async fn update(kp: &KuryrPort, ctx: &Arc<Context>, st: &mut KuryrPortStatus, made: &mut Made) -> Result<()> {
    let changed = if st.all_active() {
        ready_is_stale(kp, st)
    } else if st.vifs.is_empty() {
        wire(kp, ctx, st, made).await?;
        true
    } else {
        active::poll(ctx, st).await?
    };
    if changed {
        status::write(ctx, kp, st, None).await?;
    }
    Ok(())
}

/// The pod's first ports: made, their duplicates gone, settled and named in `st`.
async fn wire(kp: &KuryrPort, ctx: &Arc<Context>, st: &mut KuryrPortStatus, made: &mut Made) -> Result<()> {
    let began = std::time::Instant::now();
    let (done, calls) = metrics::counting_calls(allocate::ports(ctx, kp, made)).await;
    done?;
    let allocated = began.elapsed();
    ctx.metrics.calls_per_op("wire", calls);
    let ports = &made.ports;
    if let Some((_, default)) = ports
        .first()
        .filter(|(_, v)| !pool::is_pool_port(ctx, &v.port_id))
    {
        // Ports of the pod's own: earlier attempts cut short may have left others tagged for this pod.
        let keep: Vec<&str> = ports.iter().map(|(_, v)| v.port_id.as_str()).collect();
        let trunk = default.trunk_id.as_deref();
        podport::delete_duplicates(ctx, &kp.spec.pod_uid, &keep, trunk).await?;
    }
    let settling = std::time::Instant::now();
    for (ifname, vif) in &mut made.ports {
        *vif = active::settle(ctx, vif.clone()).await;
        set_vif(st, ifname, vif.clone());
    }
    debug!(
        allocate_ms = allocated.as_millis(),
        settle_ms = settling.elapsed().as_millis(),
        active = st.all_active(),
        "ports made"
    );
    Ok(())
}

/// The uid of the KuryrPort's pod: its wiring clock and its Events are kept under it.
fn pod_uid(kp: &KuryrPort) -> Uid {
    Uid::from(kp.spec.pod_uid.as_str())
}

/// Delay before the pod's next ACTIVE poll.
fn next_poll(ctx: &Context, pod_uid: &Uid) -> std::time::Duration {
    ctx.book
        .next_poll(pod_uid, ctx.config.active_poll_min, ctx.config.active_poll_max)
}

/// Every port ACTIVE and written: record the time to wire (once per pod).
fn wired(ctx: &Context, pod_uid: &Uid) -> Action {
    if let Some(took) = ctx.book.wired(pod_uid) {
        ctx.metrics.wired(took);
        info!(took_ms = took.as_millis(), "port ACTIVE");
    }
    Action::await_change()
}

/// The object's `Ready` is not True although every port is ACTIVE (e.g. a failure was reported since).
fn ready_is_stale(kp: &KuryrPort, st: &kuryr_api::KuryrPortStatus) -> bool {
    use kuryr_api::conditions::{is_condition_true, READY};
    let seen = kp
        .status
        .as_ref()
        .map(|s| s.conditions.as_slice())
        .unwrap_or_default();
    st.all_active() && !is_condition_true(seen, READY)
}

/// Gives every port back (to its pool, or detached and deleted; 404 is done), then deletes whatever else
/// still carries the pod's ownership tags. A port another KuryrPort names now (it went back to a pool and was
/// taken again before this cleanup finished) is not touched.
async fn cleanup(kp: &KuryrPort, ctx: &Context) -> Result<Action> {
    let st = ctx.book.status_of(kp);
    let uid = Uid::of(kp);
    let mut calls = 0;
    for entry in st.vifs.values() {
        if ctx
            .book
            .port_named_elsewhere(&ctx.kuryrports, &entry.vif.port_id, &uid)
        {
            warn!(port = entry.vif.port_id, "port is another pod's now; leaving it");
            continue;
        }
        let (done, n) =
            metrics::counting_calls(release::release(ctx, &entry.vif, &kp.spec.pod_node_name)).await;
        done?;
        calls += n;
    }
    let leftovers = podport::delete_tagged(ctx, &kp.spec.pod_uid).await?;
    if leftovers > 0 {
        warn!(
            leftovers,
            "deleted ports tagged for this pod that the status did not name"
        );
    }
    ctx.metrics.calls_per_op("release", calls);
    info!("ports released");
    let pod_uid = pod_uid(kp);
    ctx.book.forget(&uid, &pod_uid);
    ctx.ledger.forget(&uid);
    ctx.ledger.forget(&pod_uid);
    Ok(Action::await_change())
}

/// A failure becomes a Warning Event and, unless the KuryrPort is going away, `Ready=False`.
async fn report(kp: &KuryrPort, ctx: &Context, err: &Error) {
    ctx.events.failed(&kp.object_ref(&()), err).await;
    if kp.metadata.deletion_timestamp.is_some() {
        return;
    }
    let mut st = ctx.book.status_of(kp);
    if let Err(e) = status::write(ctx, kp, &mut st, Some(err)).await {
        warn!(
            error = &e as &dyn std::error::Error,
            "cannot record the failure in the status"
        );
    }
}
