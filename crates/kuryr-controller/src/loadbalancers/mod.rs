//! The KuryrLoadBalancer controller: under `kuryr.openstack.org/kuryrloadbalancer-finalizers`, `apply`
//! makes Octavia match the spec — one fully-populated create, then, each time the tree is ACTIVE, the next
//! planned write (`kuryr_core::lb::plan`) — replaces load balancers in ERROR or PENDING_* past the limit,
//! handles the floating IP, and records every Octavia id in the status; `cleanup` releases it all.

pub mod fip;
pub mod octavia;
pub mod status;

use std::sync::Arc;
use std::time::Duration;

use kube::runtime::controller::Action;
use kube::runtime::events::EventType;
use kube::runtime::finalizer::{finalizer, Event as Finalizer};
use kuryr_api::loadbalancer::{KuryrLoadBalancerStatus, ServiceType};
use kuryr_api::{finalizers, Api, KuryrLoadBalancer, ObjectReference, Resource, ResourceExt};
use kuryr_core::lb::{assess, desired_lb, enforce, plan, Assessment, OctaviaCaps, Op, Problem};
use kuryr_openstack::neutron::ports;
use kuryr_openstack::octavia::{loadbalancers, status as tree};
use kuryr_openstack::{waiter, Owner, WaitOptions};
use tracing::{info, instrument, warn};

use crate::errors::{Error, Result};
use crate::services::LbContext;
use octavia::Done;

pub const CONTROLLER: &str = "kuryrloadbalancer";
/// Ownership tag kind of everything made for a Service.
pub const OWNER_KIND: &str = "service";

#[instrument(skip(klb, ctx), fields(namespace = klb.namespace(), name = klb.name_any()))]
pub async fn reconcile(klb: Arc<KuryrLoadBalancer>, ctx: Arc<LbContext>) -> Result<Action> {
    ctx.metrics.reconciled(CONTROLLER);
    let ns = klb.namespace().ok_or(Error::MissingField("metadata.namespace"))?;
    let api: Api<KuryrLoadBalancer> = Api::namespaced(ctx.client.clone(), &ns);
    let uid = klb.uid().unwrap_or_default();
    let result = finalizer(&api, finalizers::KURYRLOADBALANCER, klb.clone(), |event| async {
        match event {
            Finalizer::Apply(klb) => apply(&api, &klb, &ctx).await,
            Finalizer::Cleanup(klb) => cleanup(&klb, &ctx).await,
        }
    })
    .await;
    let result = match result {
        // Already gone: an earlier round removed the finalizer and the object went.
        Err(kube::runtime::finalizer::Error::RemoveFinalizer(kube::Error::Api(s))) if s.code == 404 => {
            Ok(Action::await_change())
        }
        other => other.map_err(|e| Error::Finalizer(Box::new(e))),
    };
    match &result {
        Ok(_) => ctx.succeeded(&uid),
        Err(e) => report(&api, &klb, &ctx, e).await,
    }
    result
}

/// The Service's ownership: its uid (from the owner reference), else the KuryrLoadBalancer's.
pub fn owner(ctx: &LbContext, klb: &KuryrLoadBalancer) -> Owner {
    let uid = klb
        .owner_references()
        .iter()
        .find(|o| o.kind == "Service")
        .map(|o| o.uid.clone())
        .or_else(|| klb.uid())
        .unwrap_or_default();
    Owner::new(&ctx.cluster_id, OWNER_KIND, uid)
}

fn service_ref(klb: &KuryrLoadBalancer) -> ObjectReference {
    ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Service".into()),
        name: klb.metadata.name.clone(),
        namespace: klb.metadata.namespace.clone(),
        uid: klb
            .owner_references()
            .iter()
            .find(|o| o.kind == "Service")
            .map(|o| o.uid.clone()),
        ..ObjectReference::default()
    }
}

async fn apply(api: &Api<KuryrLoadBalancer>, klb: &KuryrLoadBalancer, ctx: &LbContext) -> Result<Action> {
    let ns = klb.namespace().unwrap_or_default();
    let name = klb.name_any();
    let uid = klb.uid().ok_or(Error::MissingField("metadata.uid"))?;
    let generation = klb.metadata.generation;
    let owner = owner(ctx, klb);
    let tags = owner.tags()?;
    let features = ctx.cloud.octavia_features().await?;
    // Held to the operator's allow-lists first: nothing outside them reaches the cloud.
    let project = ctx.project_id.clone().or_else(|| ctx.cloud.project_id());
    let allow = ctx.config.allow_list(project);
    let enforced = enforce(&klb.spec, &allow);
    let spec = &enforced.spec;
    let caps = OctaviaCaps {
        version: features.version,
        provider: spec
            .provider
            .clone()
            .unwrap_or_else(|| ctx.config.default_provider.clone()),
    };
    let (desired, problems) = desired_lb(&ns, &name, spec, &caps, ctx.config.member_subnet_id.as_deref());
    let mut st = klb.status.clone().unwrap_or_default();
    status::supported(&mut st, generation, &problems);
    status::allowed(&mut st, generation, &enforced.refused);
    let told: Vec<Problem> = enforced.refused.iter().chain(&problems).cloned().collect();
    tell(ctx, klb, &uid, &told).await;

    // Which load balancer is ours: the status's, else one found by tags (a create whose status write was
    // lost, or a status cache that has not caught up).
    let lb = match st.loadbalancer.as_ref().map(|l| l.id.clone()) {
        Some(id) => match loadbalancers::get(&ctx.cloud, &id).await {
            Ok(lb) => Some(lb),
            Err(e) if e.is_not_found() => {
                repaired(
                    ctx,
                    klb,
                    "lost",
                    format!("load balancer {id} is gone; building it again"),
                )
                .await;
                None
            }
            Err(e) => return Err(e.into()),
        },
        None => adopt(ctx, &owner).await?,
    };
    let Some(lb) = lb else {
        // Nothing in Octavia yet: one fully-populated create, once the endpoints burst has settled.
        if let Some(wait) = ctx.coalesce(&uid, generation.unwrap_or_default()) {
            return Ok(Action::requeue(wait));
        }
        st.loadbalancer = None;
        st.listeners.clear();
        st.pools.clear();
        st.members.clear();
        let op = Op::CreateLoadBalancer(desired);
        let Done::Created(lb) =
            octavia::execute(&ctx.cloud, "", &op, ctx.project_id.as_deref(), &tags).await?
        else {
            return Err(Error::Unsupported(
                "create answered without a load balancer".into(),
            ));
        };
        ctx.metrics
            .lb_ops
            .get_or_create(&[("op", op.kind().to_owned())])
            .inc();
        ctx.wrote(&uid);
        info!(lb_id = lb.id, provider = lb.provider, "load balancer created");
        status::record(&mut st, &lb, None, ctx.config.member_subnet_id.as_deref());
        status::ready(
            &mut st,
            generation,
            false,
            "Creating",
            format!("load balancer {} created", lb.id),
        );
        status::write(api, klb, &st).await?;
        return Ok(Action::requeue(ctx.config.poll_min));
    };

    let states = match tree::get(&ctx.cloud, &lb.id).await {
        Ok(t) => t
            .provisioning_states()
            .into_iter()
            .map(str::to_owned)
            .collect::<Vec<_>>(),
        Err(e) if e.is_not_found() => return Ok(Action::requeue(Duration::ZERO)),
        Err(e) => return Err(e.into()),
    };
    let pending = states.iter().any(|s| s.starts_with("PENDING_"));
    let (pending_for, next_poll) = if pending {
        ctx.pending(&uid)
    } else {
        (Duration::ZERO, Duration::ZERO)
    };
    match assess(&states, pending_for, ctx.config.pending_limit) {
        Assessment::Repair { reason } => {
            replace(ctx, klb, &lb, &reason, &mut st).await?;
            status::ready(&mut st, generation, false, "Repairing", reason);
            status::write(api, klb, &st).await?;
            return Ok(Action::requeue(Duration::ZERO));
        }
        Assessment::Wait { status: s } => {
            status::record(&mut st, &lb, None, ctx.config.member_subnet_id.as_deref());
            status::ready(
                &mut st,
                generation,
                false,
                "Provisioning",
                format!("load balancer tree {s}"),
            );
            status::write(api, klb, &st).await?;
            return Ok(Action::requeue(next_poll));
        }
        Assessment::Active => ctx.settled(&uid),
    }

    let observed = octavia::observe(&ctx.cloud, &lb).await?;
    status::record(
        &mut st,
        &lb,
        Some(&observed),
        ctx.config.member_subnet_id.as_deref(),
    );
    let ops = plan(&desired, Some(&observed));
    if let Some(op) = ops.first() {
        if let Some(wait) = ctx.coalesce(&uid, generation.unwrap_or_default()) {
            status::write(api, klb, &st).await?;
            return Ok(Action::requeue(wait));
        }
        if let Op::Recreate { reason } = op {
            replace(ctx, klb, &lb, reason, &mut st).await?;
        } else {
            octavia::execute(&ctx.cloud, &lb.id, op, ctx.project_id.as_deref(), &tags).await?;
            ctx.metrics
                .lb_ops
                .get_or_create(&[("op", op.kind().to_owned())])
                .inc();
            ctx.wrote(&uid);
            info!(op = op.kind(), left = ops.len() - 1, "octavia write");
        }
        status::ready(
            &mut st,
            generation,
            false,
            "Updating",
            format!("{} ({} to go)", op.kind(), ops.len()),
        );
        status::write(api, klb, &st).await?;
        return Ok(Action::requeue(ctx.config.poll_min));
    }

    // The tree matches the spec: the floating IP, then Ready.
    let want_fip = spec.service_type == Some(ServiceType::LoadBalancer)
        && desired.expose
        && !enforced.fip_refused
        && (ctx.config.external_network_id.is_some() || spec.lb_ip.is_some());
    let had = st.service_pub_ip_info.as_ref().map(|f| f.ip_addr.clone());
    let fip_refused = fip::ensure(
        ctx,
        &owner,
        &mut st,
        want_fip,
        spec.lb_ip.as_deref(),
        &lb.vip_port_id,
        &allow,
    )
    .await?;
    let mut refused = enforced.refused.clone();
    refused.extend(fip_refused.iter().cloned());
    status::allowed(&mut st, generation, &refused);
    tell(ctx, klb, &format!("{uid}/fip"), fip_refused.as_slice()).await;
    let now = st.service_pub_ip_info.as_ref().map(|f| f.ip_addr.clone());
    if had != now || now.is_some() {
        fip::publish(ctx, &ns, &name, now.as_deref()).await?;
    }
    sweep(ctx, &owner, &lb.id).await;
    status::ready(
        &mut st,
        generation,
        true,
        "Active",
        format!("load balancer {} ACTIVE", lb.id),
    );
    status::write(api, klb, &st).await?;
    Ok(Action::requeue(ctx.config.drift_interval))
}

/// A load balancer tagged for this Service that is not one we gave up on.
async fn adopt(ctx: &LbContext, owner: &Owner) -> Result<Option<loadbalancers::LoadBalancer>> {
    let mut found = octavia::find_tagged(&ctx.cloud, owner).await?;
    found.retain(|lb| !ctx.is_abandoned(&lb.id) && lb.provisioning_status != "PENDING_DELETE");
    if let Some(lb) = found.first() {
        info!(lb_id = lb.id, "load balancer found by its tags");
    }
    Ok(found.into_iter().next())
}

/// Deletes load balancers tagged for this Service other than `keep` (abandoned stuck ones, once Octavia
/// lets them go). Failures are only logged: the next round tries again.
async fn sweep(ctx: &LbContext, owner: &Owner, keep: &str) {
    let Ok(found) = octavia::find_tagged(&ctx.cloud, owner).await else {
        return;
    };
    for lb in found.iter().filter(|lb| lb.id != keep) {
        if lb.provisioning_status.starts_with("PENDING_") {
            continue;
        }
        match loadbalancers::delete(&ctx.cloud, &lb.id, true).await {
            Ok(()) => {
                info!(lb_id = lb.id, "stray load balancer of this Service deleted");
                ctx.forget_abandoned(&lb.id);
            }
            Err(e) => warn!(
                lb_id = lb.id,
                error = &e as &dyn std::error::Error,
                "cannot delete stray LB"
            ),
        }
    }
}

/// Replaces `lb`: cascade delete (wait for it) when Octavia allows; when it is stuck PENDING_*, which
/// Octavia refuses to delete, its VIP port is deleted instead (freeing the clusterIP) and the LB left for
/// [`sweep`]. The status is emptied so the next round creates a new one.
async fn replace(
    ctx: &LbContext,
    klb: &KuryrLoadBalancer,
    lb: &loadbalancers::LoadBalancer,
    reason: &str,
    st: &mut KuryrLoadBalancerStatus,
) -> Result<()> {
    let kind = if reason.contains("ERROR") {
        "error"
    } else if reason.contains("PENDING") {
        "stuck"
    } else {
        "changed"
    };
    repaired(
        ctx,
        klb,
        kind,
        format!("replacing load balancer {}: {reason}", lb.id),
    )
    .await;
    let stuck = loadbalancers::get(&ctx.cloud, &lb.id)
        .await
        .map(|l| l.provisioning_status.starts_with("PENDING_"))
        .unwrap_or(false);
    if stuck {
        ctx.abandon(&lb.id);
        if !lb.vip_port_id.is_empty() {
            match ports::delete(&ctx.cloud, &lb.vip_port_id).await {
                Err(e) if !e.is_not_found() => return Err(e.into()),
                _ => {}
            }
        }
    } else {
        loadbalancers::delete(&ctx.cloud, &lb.id, true).await?;
        let opts = WaitOptions {
            timeout: Duration::from_secs(120),
            ..WaitOptions::default()
        };
        waiter::wait_lb_deleted(&ctx.cloud, &lb.id, &opts).await?;
    }
    ctx.settled(&klb.uid().unwrap_or_default());
    st.loadbalancer = None;
    st.listeners.clear();
    st.pools.clear();
    st.members.clear();
    Ok(())
}

/// Event (on the KuryrLoadBalancer and the Service) + metric for a replaced load balancer.
async fn repaired(ctx: &LbContext, klb: &KuryrLoadBalancer, kind: &str, note: String) {
    warn!(kind, "{note}");
    ctx.metrics
        .lb_repairs
        .get_or_create(&[("reason", kind.to_owned())])
        .inc();
    for obj in [klb.object_ref(&()), service_ref(klb)] {
        ctx.event(
            &obj,
            EventType::Warning,
            "LoadBalancerReplaced",
            "Repair",
            note.clone(),
        )
        .await;
    }
}

/// Unsupported or refused parts of the Service: a Warning Event each on the KuryrLoadBalancer and its
/// Service, unless the same set was told under `key` last time.
async fn tell(ctx: &LbContext, klb: &KuryrLoadBalancer, key: &str, problems: &[Problem]) {
    let messages = problems
        .iter()
        .map(|p| format!("{}: {}", p.reason, p.message))
        .collect();
    if !ctx.news(key, messages) {
        return;
    }
    for p in &Problem::by_reason(problems) {
        for obj in [klb.object_ref(&()), service_ref(klb)] {
            ctx.event(
                &obj,
                EventType::Warning,
                p.reason,
                "BuildLoadBalancer",
                p.message.clone(),
            )
            .await;
        }
    }
}

/// Releases the floating IP and deletes every load balancer of the Service (cascade), waiting for them.
async fn cleanup(klb: &KuryrLoadBalancer, ctx: &LbContext) -> Result<Action> {
    let owner = owner(ctx, klb);
    let mut st = klb.status.clone().unwrap_or_default();
    fip::release(ctx, &owner, &mut st).await?;
    let mut ids: Vec<String> = st.loadbalancer.iter().map(|l| l.id.clone()).collect();
    for lb in octavia::find_tagged(&ctx.cloud, &owner).await? {
        if !ids.contains(&lb.id) {
            ids.push(lb.id);
        }
    }
    let opts = WaitOptions {
        timeout: Duration::from_secs(120),
        ..WaitOptions::default()
    };
    for id in &ids {
        loadbalancers::delete(&ctx.cloud, id, true).await?;
    }
    for id in &ids {
        waiter::wait_lb_deleted(&ctx.cloud, id, &opts).await?;
        ctx.forget_abandoned(id);
    }
    info!(deleted = ids.len(), "load balancers released");
    ctx.forget(&klb.uid().unwrap_or_default());
    Ok(Action::await_change())
}

/// A failure becomes a Warning Event and, unless the object is going away, `Ready=False`.
async fn report(api: &Api<KuryrLoadBalancer>, klb: &KuryrLoadBalancer, ctx: &LbContext, err: &Error) {
    let reason = reason(err);
    ctx.event(
        &klb.object_ref(&()),
        EventType::Warning,
        reason,
        "Reconcile",
        err.to_string(),
    )
    .await;
    if klb.metadata.deletion_timestamp.is_some() {
        return;
    }
    let mut st = klb.status.clone().unwrap_or_default();
    status::ready(&mut st, klb.metadata.generation, false, reason, err.to_string());
    if let Err(e) = status::write(api, klb, &st).await {
        warn!(
            error = &e as &dyn std::error::Error,
            "cannot record the failure in the status"
        );
    }
}

fn reason(err: &Error) -> &'static str {
    let os = match err {
        Error::OpenStack(e) => Some(e),
        Error::Finalizer(f) => match &**f {
            kube::runtime::finalizer::Error::ApplyFailed(Error::OpenStack(e))
            | kube::runtime::finalizer::Error::CleanupFailed(Error::OpenStack(e)) => Some(e),
            _ => None,
        },
        _ => None,
    };
    match os {
        Some(e) if e.is_over_quota() => "OverQuota",
        Some(_) => "OctaviaError",
        None => err.reason(),
    }
}

pub fn error_policy(klb: Arc<KuryrLoadBalancer>, err: &Error, ctx: Arc<LbContext>) -> Action {
    let delay = ctx.failed(&klb.uid().unwrap_or_default(), err.is_permanent());
    warn!(
        namespace = klb.namespace(),
        name = klb.name_any(),
        error = err as &dyn std::error::Error,
        retry_in = ?delay,
        "KuryrLoadBalancer reconcile failed"
    );
    ctx.metrics.failed(CONTROLLER, err.metric_label());
    Action::requeue(delay)
}
