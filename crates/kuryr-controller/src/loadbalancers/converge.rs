//! Making an existing load balancer match the spec: replace it when it is in ERROR or PENDING_* past the
//! limit, wait while it is pending, else carry out the next planned write (`kuryr_core::lb::plan`). Octavia
//! takes one change at a time, so a round makes at most one write and the next round polls for ACTIVE.

use std::time::{Duration, Instant};

use kuryr_core::lb::{assess, plan, Assessment, Op, ProvisioningStatus, RepairKind};
use kuryr_openstack::octavia::{loadbalancers::LoadBalancer, status::StatusTree};
use tracing::info;

use super::octavia;
use super::refusals;
use super::repair::replace;
use super::round::{Next, Round};
use super::status;
use crate::errors::{Error, Result};

pub enum Converged {
    /// The tree is ACTIVE and matches the spec (the LB as last read).
    Active(Box<LoadBalancer>),
    /// A write, a repair or a wait: the round ends here.
    Working(Next),
}

pub async fn converge(round: &mut Round<'_>, mut lb: LoadBalancer, tree: &StatusTree) -> Result<Converged> {
    let ctx = round.ctx;
    let uid = round.uid.as_str();
    let states: Vec<ProvisioningStatus> = tree
        .provisioning_states()
        .into_iter()
        .map(ProvisioningStatus::parse)
        .collect();
    let (pending_for, next_poll) = if states.iter().any(ProvisioningStatus::is_pending) {
        ctx.schedule().pending(uid, Instant::now())
    } else {
        (Duration::ZERO, Duration::ZERO)
    };
    let limit = ctx
        .schedule()
        .pending_limit(uid, ctx.config.pending_limit, ctx.config.pending_per_object);
    match assess(&states, pending_for, limit) {
        Assessment::Repair { kind, reason } => {
            replace(round, &lb, kind, &reason).await?;
            let next = round.finish(Duration::ZERO, false, "Repairing", reason).await?;
            return Ok(Converged::Working(next));
        }
        Assessment::Wait { status: s } => {
            status::record(&mut round.st, &lb, None, round.member_subnet.as_deref());
            let after = round.pending_look(&lb.id, false, next_poll, limit.saturating_sub(pending_for));
            let next = round
                .finish(after, false, "Provisioning", format!("load balancer tree {s}"))
                .await?;
            return Ok(Converged::Working(next));
        }
        Assessment::Active => ctx.schedule().settled(uid),
    }
    ctx.observer.index().watch(&lb.id, round.key(), Instant::now());

    // The listeners, pools and health monitors as the observer's last listing (begun after our last
    // write) or the last read (or create) showed them, while the tree shows the same ones, with its
    // members; read in full when it does not, and once per drift interval without an observer.
    let listed = ctx.observer.current(&lb.id);
    let read = || {
        ctx.schedule()
            .observed(&lb.id, ctx.config.drift_interval, Instant::now())
    };
    let from_listing = listed.and_then(|c| octavia::from_tree(&c, &lb, tree));
    if from_listing.is_some() {
        // The observer's listings hold this tree from now on: the copy the create or last read left goes
        // (kept, every load balancer's tree was held twice: ~5 KB a Service).
        ctx.schedule().forget_observed(&lb.id);
    }
    let cached = from_listing.or_else(|| read().and_then(|c| octavia::from_tree(&c, &lb, tree)));
    let observed = match cached {
        Some(o) => o,
        None => {
            lb = match kuryr_openstack::octavia::loadbalancers::get(&ctx.cloud, &lb.id).await {
                Ok(fresh) => fresh,
                Err(e) if e.is_not_found() => return Ok(Converged::Working(Next::now())),
                Err(e) => return Err(e.into()),
            };
            let o = octavia::observe(&ctx.cloud, &lb, tree).await?;
            ctx.schedule().remember_observed(o.clone(), Instant::now());
            o
        }
    };
    status::record(
        &mut round.st,
        &lb,
        Some(&observed),
        round.member_subnet.as_deref(),
    );
    let fit = octavia::BodyFit::new(&ctx.cloud, ctx.project_id.as_deref(), &round.tags);
    let ops = plan(&round.desired, Some(&observed), &fit);
    let Some(op) = ops.first() else {
        return Ok(Converged::Active(Box::new(lb)));
    };
    if let Some(wait) = round.coalesce() {
        return round.write(wait).await.map(Converged::Working);
    }
    let after = if let Op::Recreate { reason } = op {
        replace(round, &lb, RepairKind::Changed, reason).await?;
        // Gone: the next round creates anew at once.
        ctx.config.poll_min
    } else {
        // A member write leaves listeners, pools and monitors as they were (members come from the
        // tree); any other write changes what was read.
        if !op.members_only() {
            ctx.schedule().forget_observed(&lb.id);
        }
        let done = octavia::execute(&ctx.cloud, &lb.id, op, ctx.project_id.as_deref(), &round.tags).await;
        if let Err(Error::OpenStack(e)) = &done {
            refusals::learn(ctx, &round.desired, e);
        }
        done?;
        ctx.metrics.lb_op(op.kind());
        ctx.schedule().wrote(uid, Instant::now(), op.objects());
        info!(op = op.kind(), left = ops.len() - 1, "octavia write");
        let limit =
            ctx.schedule()
                .pending_limit(uid, ctx.config.pending_limit, ctx.config.pending_per_object);
        round.pending_look(&lb.id, true, ctx.config.poll_min, limit)
    };
    let progress = format!("{} ({} to go)", op.kind(), ops.len());
    round
        .finish(after, false, "Updating", progress)
        .await
        .map(Converged::Working)
}
