//! The KuryrPort controller: under `kuryr.openstack.org/kuryrport-finalizer`, `apply` allocates the pod's
//! port and waits for it to go ACTIVE, `cleanup` gives it back. Failures become a Warning Event and a
//! `Ready=False` condition, and are retried with backoff (see [`error_policy`]).

use std::sync::Arc;
use std::time::Duration;

use kube::runtime::controller::Action;
use kube::runtime::events::EventType;
use kube::runtime::finalizer::{finalizer, Event as Finalizer};
use kuryr_api::port::DEFAULT_IFNAME;
use kuryr_api::{finalizers, Api, KuryrPort, Resource, ResourceExt, VifType};
use kuryr_core::kuryrport::{facts, release_plan, set_vif, ReleaseStep};
use kuryr_openstack::neutron::ports;
use tracing::{info, instrument, warn};

use crate::context::Context;
use crate::errors::{Error, Result};
use crate::ports::{nested_vlan, status};

pub const CONTROLLER: &str = "kuryrport";
/// Periodic re-check of a wired KuryrPort.
const RESYNC: Duration = Duration::from_secs(600);

#[instrument(skip(kp, ctx), fields(namespace = kp.namespace(), name = kp.name_any()))]
pub async fn reconcile(kp: Arc<KuryrPort>, ctx: Arc<Context>) -> Result<Action> {
    ctx.metrics.reconciled(CONTROLLER);
    let ns = kp.namespace().ok_or(Error::MissingField("metadata.namespace"))?;
    let api: Api<KuryrPort> = Api::namespaced(ctx.client.clone(), &ns);
    let uid = kp.metadata.uid.clone().unwrap_or_default();
    let result = finalizer(&api, finalizers::KURYRPORT, kp.clone(), |event| async {
        match event {
            Finalizer::Apply(kp) => apply(&kp, &ctx).await,
            Finalizer::Cleanup(kp) => cleanup(&kp, &ctx).await,
        }
    })
    .await
    .map_err(|e| Error::Finalizer(Box::new(e)));
    match &result {
        Ok(_) => ctx.succeeded(&uid),
        Err(e) => report(&kp, &ctx, e).await,
    }
    result
}

/// Allocate when there is no port yet, else poll it until ACTIVE.
async fn apply(kp: &KuryrPort, ctx: &Context) -> Result<Action> {
    let uid = kp
        .metadata
        .uid
        .clone()
        .ok_or(Error::MissingField("metadata.uid"))?;
    ctx.first_seen(&uid);
    let mut st = ctx.status_of(kp);
    if st.vifs.is_empty() {
        let vif_type = kp.spec.vif_type.unwrap_or(ctx.config.vif_type);
        if vif_type != VifType::NestedVlan {
            return Err(Error::Unsupported(format!("VIF type {vif_type}")));
        }
        let pod = facts(
            kp,
            &ctx.project_id,
            ctx.config.pod_security_groups.iter().cloned(),
        )?;
        let vif = nested_vlan::allocate(ctx, &pod).await?;
        let (trunk_id, port_id) = (vif.trunk_id.clone().unwrap_or_default(), vif.port_id.clone());
        set_vif(&mut st, DEFAULT_IFNAME, vif);
        status::mark(kp, &mut st);
        if let Err(e) = status::write(ctx, kp, &st).await {
            // Nobody will know of the port: give it back now rather than leak it.
            nested_vlan::release(ctx, &trunk_id, &port_id).await;
            return Err(e);
        }
        return Ok(Action::requeue(ctx.next_poll(&uid)));
    }
    if st.all_active() {
        if ready_is_stale(kp, &st) {
            status::mark(kp, &mut st);
            status::write(ctx, kp, &st).await?;
        }
        return Ok(Action::requeue(RESYNC));
    }
    // Waiting for ACTIVE: poll every port not ACTIVE yet.
    let mut changed = false;
    for entry in st.vifs.values_mut().filter(|v| !v.vif.active) {
        let port = ports::get(&ctx.cloud, &entry.vif.port_id).await?;
        if port.status == "ACTIVE" {
            entry.vif.active = true;
            changed = true;
        }
    }
    if !changed {
        return Ok(Action::requeue(ctx.next_poll(&uid)));
    }
    status::mark(kp, &mut st);
    status::write(ctx, kp, &st).await?;
    if st.all_active() {
        if let Some(took) = ctx.wired(&uid) {
            ctx.metrics.wired(took);
            info!(took_ms = took.as_millis(), "port ACTIVE");
        }
        return Ok(Action::requeue(RESYNC));
    }
    Ok(Action::requeue(ctx.next_poll(&uid)))
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

/// Gives every port back (detach, release the VLAN, delete; 404 is done), then deletes whatever else
/// still carries the pod's ownership tags.
async fn cleanup(kp: &KuryrPort, ctx: &Context) -> Result<Action> {
    let st = ctx.status_of(kp);
    for entry in st.vifs.values() {
        for step in release_plan(&entry.vif, None, ctx.config.pool_limits) {
            match step {
                ReleaseStep::RemoveSubport { trunk_id, port_id } => {
                    nested_vlan::detach(ctx, &trunk_id, &port_id).await?;
                }
                ReleaseStep::DeletePort { port_id } => ports::delete(&ctx.cloud, &port_id).await?,
                other => return Err(Error::Unsupported(format!("release step {other:?}"))),
            }
        }
    }
    let leftovers = nested_vlan::delete_tagged(ctx, &kp.spec.pod_uid).await?;
    if leftovers > 0 {
        warn!(
            leftovers,
            "deleted ports tagged for this pod that the status did not name"
        );
    }
    info!("ports released");
    ctx.forget(kp.metadata.uid.as_deref().unwrap_or_default());
    Ok(Action::await_change())
}

/// A failure becomes a Warning Event and, unless the KuryrPort is going away, `Ready=False`.
async fn report(kp: &KuryrPort, ctx: &Context, err: &Error) {
    ctx.event(
        &kp.object_ref(&()),
        EventType::Warning,
        err.reason(),
        "Reconcile",
        err.to_string(),
    )
    .await;
    if kp.metadata.deletion_timestamp.is_some() {
        return;
    }
    let mut st = ctx.status_of(kp);
    status::mark_failed(kp, &mut st, err);
    if let Err(e) = status::write(ctx, kp, &st).await {
        warn!(
            error = &e as &dyn std::error::Error,
            "cannot record the failure in the status"
        );
    }
}

pub fn error_policy(kp: Arc<KuryrPort>, err: &Error, ctx: Arc<Context>) -> Action {
    let delay = ctx.failed(kp.metadata.uid.as_deref().unwrap_or_default(), err.is_permanent());
    warn!(
        namespace = kp.namespace(),
        name = kp.name_any(),
        error = err as &dyn std::error::Error,
        retry_in = ?delay,
        "KuryrPort reconcile failed"
    );
    ctx.metrics.failed(CONTROLLER, err.metric_label());
    Action::requeue(delay)
}
