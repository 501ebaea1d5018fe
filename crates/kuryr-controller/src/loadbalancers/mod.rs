//! The KuryrLoadBalancer controller: under `kuryr.openstack.org/kuryrloadbalancer-finalizers`, `apply`
//! makes Octavia match the spec — one fully-populated create, then, each time the tree is ACTIVE, the next
//! planned write (`kuryr_core::lb::plan`) — replaces load balancers in ERROR or PENDING_* past the limit,
//! handles the floating IP, and records every Octavia id in the status; `cleanup` releases it all.
//!
//! A round is a chain of steps ([`round`]): [`locate`], [`create`], [`converge`], [`expose`]; when the
//! next one is due is `kuryr_core::lb::Schedule`'s decision.

pub mod converge;
pub mod create;
pub mod expose;
pub mod fip;
pub mod locate;
pub mod observer;
pub mod octavia;
pub mod refusals;
pub mod repair;
pub mod round;
pub mod service;
pub mod sightings;
pub mod status;
pub mod ticks;
pub mod vip_leak;

use std::sync::Arc;
use std::time::Instant;

use kube::runtime::controller::Action;
use kube::runtime::finalizer::{finalizer, Event as Finalizer};
use kuryr_api::{finalizers, Api, KuryrLoadBalancer, Resource, ResourceExt};
use kuryr_core::lb::{cleanup_hold, ProvisioningStatus};
use kuryr_openstack::octavia::loadbalancers;
use kuryr_openstack::waiter;
use tracing::{info, instrument, warn};

use converge::{converge, Converged};
use create::create;
use expose::expose;
use locate::{locate, Located};
use round::Next;
pub use service::owner;

use crate::errors::{Error, Result};
use crate::packed::Packed;
use crate::services::context::LbContext;
use crate::toolkit::{Reconciled, Uid};

pub const CONTROLLER: &str = "kuryrloadbalancer";
/// Next look at a KuryrLoadBalancer of a namespace this controller does not select (it may be labelled in).
const OTHERS_RESYNC: std::time::Duration = std::time::Duration::from_secs(600);

/// A KuryrLoadBalancer as its cache holds it: packed (crate::packed), unpacked by each reconcile and by the
/// front end's spec comparison.
pub type CachedKlb = Packed<KuryrLoadBalancer>;

impl Reconciled for CachedKlb {
    const CONTROLLER: &'static str = CONTROLLER;
}

#[instrument(skip(cached, ctx), fields(namespace = cached.namespace(), name = cached.name_any()))]
pub async fn reconcile(cached: Arc<CachedKlb>, ctx: Arc<LbContext>) -> Result<Action> {
    ctx.metrics.reconciled(CONTROLLER);
    let klb = Arc::new(cached.unpack()?);
    let ns = klb.namespace().ok_or(Error::MissingField("metadata.namespace"))?;
    if !ctx.serves(&ns, &klb.name_any()).await? {
        // Another controller's namespace (`--namespace-selector`): no load balancer, status or finalizer.
        return Ok(Action::requeue(OTHERS_RESYNC));
    }
    let api: Api<KuryrLoadBalancer> = Api::namespaced(ctx.client.clone(), &ns);
    let uid = Uid::of(klb.as_ref());
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
        other => crate::toolkit::finalizer::outcome(other),
    };
    match &result {
        Ok(_) => ctx.ledger.succeeded(&uid),
        Err(e) => report(&api, &klb, &ctx, e).await,
    }
    result
}

async fn apply(api: &Api<KuryrLoadBalancer>, klb: &KuryrLoadBalancer, ctx: &LbContext) -> Result<Action> {
    let uid = Uid::of(klb);
    if uid.as_str().is_empty() {
        return Err(Error::MissingField("metadata.uid"));
    }
    if klb.namespace().is_some_and(|ns| ctx.namespace_terminating(&ns)) {
        // Deleted with its namespace next: a write now would hold the cascade delete up (409s).
        info!("namespace being deleted: no more load balancer writes");
        return Ok(Action::await_change());
    }
    // The watch event of our own status write (or a resync) before the next look is due: nothing
    // changed, and reading Octavia again would only spend the client's rate budget.
    let rv = klb.resource_version();
    let generation = klb.metadata.generation;
    let not_due = ctx
        .schedule()
        .not_due(uid.as_str(), rv.as_deref(), generation, Instant::now());
    if let Some(wait) = not_due {
        return Ok(Action::requeue(wait));
    }
    if ctx.schedule().behind(uid.as_str(), rv.as_deref()) {
        return Ok(Action::requeue(ctx.config.poll_min));
    }
    let start = ctx
        .schedule()
        .start_round(uid.as_str(), generation, Instant::now());
    // Boxed: the round's future is large, and one more layer of it overflowed 2 MiB test threads.
    let round = Box::pin(run(api, klb, ctx, uid.clone()));
    let next = kuryr_openstack::work_started(start.began.into(), round).await?;
    if let Some(rv) = next.written.or(rv) {
        ctx.schedule()
            .due_in(uid.as_str(), start, rv, generation, next.after, Instant::now());
    }
    Ok(Action::requeue(next.after))
}

/// One round: prepare, then locate, create or converge, and expose.
async fn run(
    api: &Api<KuryrLoadBalancer>,
    klb: &KuryrLoadBalancer,
    ctx: &LbContext,
    uid: Uid,
) -> Result<Next> {
    let mut round = round::prepare(api, klb, ctx, uid).await?;
    let (lb, tree) = match locate(&mut round).await? {
        Located::Found(lb, tree) => (*lb, tree),
        Located::Missing => return create(&mut round).await,
        Located::Again(next) => return Ok(next),
    };
    match converge(&mut round, lb, &tree).await? {
        Converged::Active(lb) => expose(&mut round, &lb).await,
        Converged::Working(next) => Ok(next),
    }
}

/// Releases the floating IP and deletes every load balancer of the Service (cascade), waiting for them. In
/// a process younger than a request timeout, the finalizer is held and the list made again until a create
/// its killed predecessor sent cannot land any more, unless the status shows none was under way.
async fn cleanup(klb: &KuryrLoadBalancer, ctx: &LbContext) -> Result<Action> {
    let owner = owner(ctx, klb);
    let mut st = klb.status.clone().unwrap_or_default();
    fip::release(ctx, &owner, &mut st).await?;
    let tagged = octavia::find_tagged(&ctx.cloud, &owner).await?;
    let recorded = st.loadbalancer.as_ref().map(|l| l.id.as_str());
    let listed: Vec<(&str, ProvisioningStatus)> = tagged
        .iter()
        .map(|lb| (lb.id.as_str(), ProvisioningStatus::parse(&lb.provisioning_status)))
        .collect();
    let uid = Uid::of(klb);
    let hold = cleanup_hold(
        recorded,
        &listed,
        ctx.started.elapsed(),
        ctx.cloud.request_timeout(),
        ctx.created_young(uid.as_str()),
    );
    let mut ids: Vec<String> = recorded.map(str::to_owned).into_iter().collect();
    for lb in tagged {
        if !ids.contains(&lb.id) {
            ids.push(lb.id);
        }
    }
    for id in &ids {
        loadbalancers::delete(&ctx.cloud, id, true).await?;
    }
    for id in &ids {
        waiter::wait_lb_deleted(&ctx.cloud, id, &repair::delete_wait()).await?;
        ctx.schedule().forget_lb(id);
        ctx.observer.index().unwatch(id);
    }
    info!(deleted = ids.len(), "load balancers released");
    if let Some(wait) = hold {
        return Err(Error::CreateMayLand(wait));
    }
    ctx.schedule().forget(uid.as_str());
    ctx.ledger.forget(&uid);
    // The Service went before it (no finalizer of ours holds it): what was told about it goes too.
    for owner in klb.owner_references().iter().filter(|o| o.kind == "Service") {
        ctx.ledger.forget(&Uid::from(owner.uid.as_str()));
    }
    Ok(Action::await_change())
}

/// A failure becomes a Warning Event and, unless the object is going away, `Ready=False`; a wait (an error
/// with its own retry time) a Normal Event.
async fn report(api: &Api<KuryrLoadBalancer>, klb: &KuryrLoadBalancer, ctx: &LbContext, err: &Error) {
    ctx.events.failed(&klb.object_ref(&()), err).await;
    if klb.metadata.deletion_timestamp.is_some() {
        return;
    }
    let mut st = klb.status.clone().unwrap_or_default();
    status::ready(
        &mut st,
        klb.metadata.generation,
        false,
        err.reason(),
        err.to_string(),
    );
    if let Err(e) = status::write(api, klb, &st).await {
        warn!(
            error = &e as &dyn std::error::Error,
            "cannot record the failure in the status"
        );
    }
}
