//! The KuryrPort controller: under `kuryr.openstack.org/kuryrport-finalizer`, `apply` allocates the pod's
//! port and waits for it to go ACTIVE, `cleanup` gives it back. Failures become a Warning Event and a
//! `Ready=False` condition, and are retried with backoff (see [`crate::toolkit::error_policy`]).

use std::sync::Arc;
use std::time::Duration;

use kube::runtime::controller::Action;
use kube::runtime::events::EventType;
use kube::runtime::finalizer::{finalizer, Event as Finalizer};
use kuryr_api::port::DEFAULT_IFNAME;
use kuryr_api::{finalizers, Api, KuryrPort, KuryrPortStatus, Resource, ResourceExt, Vif, VifType};
use kuryr_core::kuryrport::{facts, set_vif};
use kuryr_core::vif::PodFacts;
use tracing::{info, instrument, warn};

use crate::context::Context;
use crate::errors::{Error, Result};
use crate::metrics;
use crate::ports::{active, allocate, podport, pool, release, status};
use crate::toolkit::{Reconciled, Uid};

pub const CONTROLLER: &str = "kuryrport";

impl Reconciled for KuryrPort {
    const CONTROLLER: &'static str = CONTROLLER;
}
/// Periodic re-check of a wired KuryrPort.
const RESYNC: Duration = Duration::from_secs(600);

#[instrument(skip(kp, ctx), fields(namespace = kp.namespace(), name = kp.name_any()))]
pub async fn reconcile(kp: Arc<KuryrPort>, ctx: Arc<Context>) -> Result<Action> {
    ctx.metrics.reconciled(CONTROLLER);
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
            Finalizer::Cleanup(kp) => cleanup(&kp, &ctx).await,
        }
    })
    .await
    .map_err(|e| Error::Finalizer(Box::new(e)));
    match &result {
        Ok(_) => ctx.ledger.succeeded(&uid),
        Err(e) => report(&kp, &ctx, e).await,
    }
    result
}

/// Allocate when there is no port yet, else poll it until ACTIVE.
async fn apply(kp: &KuryrPort, ctx: &Arc<Context>) -> Result<Action> {
    let pod_uid = pod_uid(kp);
    ctx.book.first_seen(&pod_uid);
    let mut st = ctx.book.status_of(kp);
    if st.vifs.is_empty() {
        return wire(kp, ctx, &pod_uid, st).await;
    }
    if st.all_active() {
        if ready_is_stale(kp, &st) {
            status::write(ctx, kp, &mut st, None).await?;
        }
        return Ok(Action::requeue(RESYNC));
    }
    if !active::poll(ctx, &mut st).await? {
        return Ok(Action::requeue(next_poll(ctx, &pod_uid)));
    }
    status::write(ctx, kp, &mut st, None).await?;
    if st.all_active() {
        return Ok(wired(ctx, kp));
    }
    Ok(Action::requeue(next_poll(ctx, &pod_uid)))
}

/// The pod's first ports: allocated, settled and named in the status. Whatever fails once a port was made
/// gives back every port made in this round: here, the one rollback of the wiring.
async fn wire(kp: &KuryrPort, ctx: &Arc<Context>, pod_uid: &Uid, mut st: KuryrPortStatus) -> Result<Action> {
    let vif_type = allocate::vif_type(ctx, kp)?;
    let project = crate::projects::recorded(ctx, kp.spec.project_id.as_deref());
    let sgs = allocate::pod_security_groups(ctx, kp, project).await?;
    let pod = facts(kp, project, sgs)?;
    let (vif, calls) = metrics::counting_calls(allocate::allocate(ctx, vif_type, &pod)).await;
    let vif = vif?;
    // A pool port stays out of the loose-port scan's reach until the status names it or it went back.
    let _lent = pool::Lent::new(ctx, &vif.port_id);
    ctx.metrics.calls_per_op("wire", calls);
    let mut made = vec![(DEFAULT_IFNAME.to_owned(), vif)];
    if let Err(e) = record(kp, ctx, vif_type, &pod, &mut made, &mut st).await {
        // Nobody will know of the ports: give them back now rather than leak them.
        release::undo_all(ctx, &made, &kp.spec.pod_node_name).await;
        return Err(e);
    }
    if st.all_active() {
        return Ok(wired(ctx, kp));
    }
    Ok(Action::requeue(next_poll(ctx, pod_uid)))
}

/// After the default port: its duplicates gone, settled, the extra networks' ports, then the status that
/// names them all. `made` holds every port made so far, for [`wire`] to give back on failure.
async fn record(
    kp: &KuryrPort,
    ctx: &Arc<Context>,
    vif_type: VifType,
    pod: &PodFacts,
    made: &mut Vec<(String, Vif)>,
    st: &mut KuryrPortStatus,
) -> Result<()> {
    if let Some((_, vif)) = made.first_mut() {
        // A port of its own: earlier attempts cut short may have left others tagged for this pod.
        if !pool::is_pool_port(ctx, &vif.port_id) {
            let trunk = vif.trunk_id.as_deref();
            podport::delete_duplicates(ctx, &kp.spec.pod_uid, &vif.port_id, trunk).await?;
        }
        *vif = active::settle(ctx, vif.clone()).await;
    }
    // Extra networks: a port of its own each.
    let mut extra = kp.spec.additional_networks.as_slice();
    if !extra.is_empty() && !allocate::additional_supported(vif_type) {
        // The pod is served on its default network; the rest is told.
        let msg = format!(
            "{} additional network(s) not attached: VIF type {vif_type} gives a pod one port only \
             (nested-vlan and neutron-vif give more)",
            extra.len()
        );
        extra = &[];
        told(ctx, kp, "AdditionalNetworksUnsupported", msg).await;
    }
    if vif_type == VifType::NestedMacvlan && ctx.config.dual_stack() {
        let msg = "dual-stack: wired with the pod subnet's family only (nested-macvlan pairs one \
                   address per pod on the VM's port; nested-vlan and neutron-vif give both)";
        told(ctx, kp, "DualStackUnsupported", msg.to_owned()).await;
    }
    for net in extra {
        let v = allocate::allocate_additional(ctx, vif_type, pod, &net.subnet_id).await?;
        made.push((net.interface.clone(), active::settle(ctx, v).await));
    }
    for (ifname, v) in made.iter() {
        set_vif(st, ifname, v.clone());
    }
    status::write(ctx, kp, st, None).await
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
fn wired(ctx: &Context, kp: &KuryrPort) -> Action {
    if let Some(took) = ctx.book.wired(&pod_uid(kp)) {
        ctx.metrics.wired(took);
        info!(took_ms = took.as_millis(), "port ACTIVE");
    }
    Action::requeue(RESYNC)
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

/// What the pod is wired without, as a log line and a Warning Event on its KuryrPort.
async fn told(ctx: &Context, kp: &KuryrPort, reason: &str, msg: String) {
    warn!("{msg}");
    ctx.events
        .publish(&kp.object_ref(&()), EventType::Warning, reason, "Wire", msg)
        .await;
}
