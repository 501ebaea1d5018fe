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
use kuryr_api::loadbalancer::{KuryrLoadBalancerStatus, LbLoadBalancer, ServiceType};
use kuryr_api::{finalizers, Api, KuryrLoadBalancer, ObjectReference, Resource, ResourceExt};
use kuryr_core::lb::{assess, desired_lb, enforce, plan, Assessment, OctaviaCaps, Op, Problem};
use kuryr_openstack::neutron::ports;
use kuryr_openstack::octavia::{loadbalancers, status as tree, IdRef};
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
    let uid = klb.uid().ok_or(Error::MissingField("metadata.uid"))?;
    // The watch event of our own status write (or a resync) before the next look is due: nothing
    // changed, and reading Octavia again would only spend the client's rate budget.
    if let Some(wait) = ctx.not_due(&uid, klb.resource_version().as_deref(), klb.metadata.generation) {
        return Ok(Action::requeue(wait));
    }
    ctx.look_now(&uid);
    let (after, written) = apply_round(api, klb, ctx, &uid).await?;
    if let Some(rv) = written.or_else(|| klb.resource_version()) {
        ctx.due_in(&uid, rv, klb.metadata.generation, after);
    }
    Ok(Action::requeue(after))
}

/// When the next round is due and the resourceVersion of our status write, if one was made.
type Round = (Duration, Option<String>);

/// One round of [`apply`].
async fn apply_round(
    api: &Api<KuryrLoadBalancer>,
    klb: &KuryrLoadBalancer,
    ctx: &LbContext,
    uid: &str,
) -> Result<Round> {
    let uid = uid.to_owned();
    let ns = klb.namespace().unwrap_or_default();
    let name = klb.name_any();
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
    // Pods go on the pod subnet; the API servers of default/kubernetes (and other non-pod backends) on the
    // subnet holding them.
    let addresses: Vec<&str> = spec
        .endpoint_slices
        .iter()
        .flat_map(|s| &s.endpoints)
        .flat_map(|e| e.addresses.iter().map(String::as_str))
        .collect();
    let member_subnet = ctx
        .subnets
        .member_subnet(&ctx.cloud, &addresses, ctx.config.member_subnet_id.as_deref())
        .await;
    let (desired, problems) = desired_lb(&ns, &name, spec, &caps, member_subnet.as_deref());
    let mut st = klb.status.clone().unwrap_or_default();
    status::supported(&mut st, generation, &problems);
    status::allowed(&mut st, generation, &enforced.refused);
    let told: Vec<Problem> = enforced.refused.iter().chain(&problems).cloned().collect();
    tell(ctx, klb, &uid, &told).await;

    // Which load balancer is ours: the status's, else one found by tags (a create whose status write was
    // lost, or a status cache that has not caught up). Its status tree is the one read a poll makes (it
    // 404s when the LB is gone); the LB object comes from the status, the create or the tag list.
    let found = match st.loadbalancer.clone() {
        Some(rec) => match tree::get(&ctx.cloud, &rec.id).await {
            Ok(t) => match from_status(&rec, &t) {
                Some(lb) => Some((lb, t)),
                // A status without the VIP or provider (written elsewhere): read the LB once.
                None => match loadbalancers::get(&ctx.cloud, &rec.id).await {
                    Ok(lb) => Some((lb, t)),
                    Err(e) if e.is_not_found() => return Ok((Duration::ZERO, None)),
                    Err(e) => return Err(e.into()),
                },
            },
            Err(e) if e.is_not_found() => {
                ctx.forget_observed(&rec.id);
                repaired(
                    ctx,
                    klb,
                    "lost",
                    format!("load balancer {} is gone; building it again", rec.id),
                )
                .await;
                None
            }
            Err(e) => return Err(e.into()),
        },
        None => {
            // Let a new Service's endpoints burst settle before the tag list, so it is made once.
            if let Some(wait) = ctx.coalesce(&uid, generation.unwrap_or_default()) {
                return Ok((wait, None));
            }
            match adopt(ctx, &uid, &owner).await? {
                Some(lb) => match tree::get(&ctx.cloud, &lb.id).await {
                    Ok(t) => Some((lb, t)),
                    // Gone since the list: build one.
                    Err(e) if e.is_not_found() => None,
                    Err(e) => return Err(e.into()),
                },
                None => None,
            }
        }
    };
    let Some((mut lb, tree)) = found else {
        // Nothing in Octavia yet: one fully-populated create, once the endpoints burst has settled.
        if let Some(wait) = ctx.coalesce(&uid, generation.unwrap_or_default()) {
            return Ok((wait, None));
        }
        st.loadbalancer = None;
        st.listeners.clear();
        st.pools.clear();
        st.members.clear();
        let op = Op::CreateLoadBalancer(desired);
        let Done::Created(created) =
            octavia::execute(&ctx.cloud, "", &op, ctx.project_id.as_deref(), &tags).await?
        else {
            return Err(Error::Unsupported(
                "create answered without a load balancer".into(),
            ));
        };
        let (lb, graph) = *created;
        // What the create made is known from its answer: the poll that finds it ACTIVE reads nothing else.
        if let Some(obs) = octavia::observed_from_graph(&lb, &graph) {
            ctx.remember_observed(obs);
        }
        ctx.metrics
            .lb_ops
            .get_or_create(&[("op", op.kind().to_owned())])
            .inc();
        ctx.wrote(&uid);
        info!(lb_id = lb.id, provider = lb.provider, "load balancer created");
        status::record(&mut st, &lb, None, member_subnet.as_deref());
        status::ready(
            &mut st,
            generation,
            false,
            "Creating",
            format!("load balancer {} created", lb.id),
        );
        let written = status::write(api, klb, &st).await?;
        return Ok((ctx.config.poll_min, written));
    };

    let states: Vec<String> = tree
        .provisioning_states()
        .into_iter()
        .map(str::to_owned)
        .collect();
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
            let written = status::write(api, klb, &st).await?;
            return Ok((Duration::ZERO, written));
        }
        Assessment::Wait { status: s } => {
            status::record(&mut st, &lb, None, member_subnet.as_deref());
            status::ready(
                &mut st,
                generation,
                false,
                "Provisioning",
                format!("load balancer tree {s}"),
            );
            let written = status::write(api, klb, &st).await?;
            return Ok((next_poll, written));
        }
        Assessment::Active => ctx.settled(&uid),
    }

    // The listeners, pools and health monitors as last read (or created) while the tree shows the same
    // ones, with its members; read in full when it does not, and once per drift interval.
    let cached = ctx
        .observed(&lb.id, ctx.config.drift_interval)
        .and_then(|c| octavia::from_tree(&c, &lb, &tree));
    let observed = match cached {
        Some(o) => o,
        None => {
            lb = match loadbalancers::get(&ctx.cloud, &lb.id).await {
                Ok(fresh) => fresh,
                Err(e) if e.is_not_found() => return Ok((Duration::ZERO, None)),
                Err(e) => return Err(e.into()),
            };
            let o = octavia::observe(&ctx.cloud, &lb, &tree).await?;
            ctx.remember_observed(o.clone());
            o
        }
    };
    status::record(&mut st, &lb, Some(&observed), member_subnet.as_deref());
    let ops = plan(&desired, Some(&observed));
    if let Some(op) = ops.first() {
        if let Some(wait) = ctx.coalesce(&uid, generation.unwrap_or_default()) {
            let written = status::write(api, klb, &st).await?;
            return Ok((wait, written));
        }
        if let Op::Recreate { reason } = op {
            replace(ctx, klb, &lb, reason, &mut st).await?;
        } else {
            // A member replace leaves listeners, pools and monitors as they were (members come from the
            // tree); any other write changes what was read.
            if !matches!(op, Op::ReplaceMembers { .. }) {
                ctx.forget_observed(&lb.id);
            }
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
        let written = status::write(api, klb, &st).await?;
        return Ok((ctx.config.poll_min, written));
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
    // Strays (an abandoned stuck LB) are looked for when there is reason to, not every round.
    if ctx.sweep_due(&uid, ctx.config.drift_interval * SWEEP_EVERY_DRIFT_CHECKS) {
        sweep(ctx, &uid, &owner, &lb.id).await;
    }
    status::ready(
        &mut st,
        generation,
        true,
        "Active",
        format!("load balancer {} ACTIVE", lb.id),
    );
    let written = status::write(api, klb, &st).await?;
    Ok((ctx.config.drift_interval, written))
}

/// Without a known reason, a Service's tagged load balancers are listed for strays every this many drift
/// checks (an hour at the default 5 minutes): strays come from abandons this process records, or from
/// a previous process (listed once per Service after a start).
const SWEEP_EVERY_DRIFT_CHECKS: u32 = 12;

/// The load balancer the status records, as far as the status and a fresh tree tell it (`None` when the
/// status lacks what the controller needs of it: VIP address and port, provider).
fn from_status(rec: &LbLoadBalancer, tree: &tree::StatusTree) -> Option<loadbalancers::LoadBalancer> {
    let provider = rec.provider.clone().filter(|p| !p.is_empty())?;
    if rec.ip.is_empty() || rec.port_id.is_empty() {
        return None;
    }
    let root = &tree.loadbalancer;
    let ids = |v: Vec<&str>| v.into_iter().map(|id| IdRef { id: id.to_owned() }).collect();
    Some(loadbalancers::LoadBalancer {
        id: rec.id.clone(),
        name: rec.name.clone(),
        project_id: rec.project_id.clone(),
        provider,
        vip_address: rec.ip.clone(),
        vip_port_id: rec.port_id.clone(),
        vip_subnet_id: rec.subnet_id.clone(),
        provisioning_status: root.node.provisioning_status.clone(),
        operating_status: root.node.operating_status.clone(),
        listeners: ids(root.listeners.iter().map(|l| l.node.id.as_str()).collect()),
        pools: ids(root
            .listeners
            .iter()
            .flat_map(|l| l.pools.iter().map(|p| p.node.id.as_str()))
            .collect()),
        ..loadbalancers::LoadBalancer::default()
    })
}

/// A load balancer tagged for this Service that is not one we gave up on.
async fn adopt(ctx: &LbContext, uid: &str, owner: &Owner) -> Result<Option<loadbalancers::LoadBalancer>> {
    let mut found = octavia::find_tagged(&ctx.cloud, owner).await?;
    let all = found.len();
    found.retain(|lb| !ctx.is_abandoned(&lb.id) && lb.provisioning_status != "PENDING_DELETE");
    // The list just made tells whether there are strays: no second list for them until there is reason.
    ctx.listed(uid);
    if all > 1 || all > found.len() {
        ctx.want_sweep(uid);
    }
    if let Some(lb) = found.first() {
        info!(lb_id = lb.id, "load balancer found by its tags");
    }
    Ok(found.into_iter().next())
}

/// Deletes load balancers tagged for this Service other than `keep` (abandoned stuck ones, once Octavia
/// lets them go). Failures are only logged: the next round tries again (the sweep stays wanted while a
/// stray is left).
async fn sweep(ctx: &LbContext, uid: &str, owner: &Owner, keep: &str) {
    let Ok(found) = octavia::find_tagged(&ctx.cloud, owner).await else {
        return;
    };
    let mut clean = true;
    for lb in found.iter().filter(|lb| lb.id != keep) {
        if lb.provisioning_status.starts_with("PENDING_") {
            clean = false;
            continue;
        }
        match loadbalancers::delete(&ctx.cloud, &lb.id, true).await {
            Ok(()) => {
                info!(lb_id = lb.id, "stray load balancer of this Service deleted");
                ctx.forget_abandoned(&lb.id);
                ctx.forget_observed(&lb.id);
            }
            Err(e) => {
                clean = false;
                warn!(
                    lb_id = lb.id,
                    error = &e as &dyn std::error::Error,
                    "cannot delete stray LB"
                )
            }
        }
    }
    ctx.swept(uid, clean);
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
    // `lb`'s state is this round's (the status tree's root, or a fresh GET).
    let stuck = lb.provisioning_status.starts_with("PENDING_");
    let uid = klb.uid().unwrap_or_default();
    ctx.forget_observed(&lb.id);
    if stuck {
        ctx.abandon(&lb.id);
        ctx.want_sweep(&uid);
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
    ctx.settled(&uid);
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
        ctx.forget_observed(id);
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
    match err.openstack() {
        Some(e) if e.is_over_quota() => "OverQuota",
        Some(e) if e.is_request_too_large() => "RequestTooLarge",
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
