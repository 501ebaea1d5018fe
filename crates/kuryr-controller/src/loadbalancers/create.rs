//! Nothing in Octavia yet: one fully-populated create (load balancer, listeners, pools, members and health
//! monitors in one call, as many members as fit its body), once the endpoints burst has settled.

use std::time::Instant;

use kuryr_core::lb::create_op;
use tracing::info;

use super::octavia::{self, Done};
use super::refusals;
use super::round::{Next, Round};
use super::status;
use super::vip_leak;
use crate::errors::{Error, Result};

pub async fn create(round: &mut Round<'_>) -> Result<Next> {
    if let Some(wait) = round.coalesce() {
        return Ok(Next::wait(wait));
    }
    let ctx = round.ctx;
    status::forget_lb(&mut round.st);
    // As much of the tree as one request carries; what is left follows as writes to the new tree.
    let fit = octavia::BodyFit::new(&ctx.cloud, ctx.project_id.as_deref(), &round.tags);
    let op = create_op(&round.desired, &fit);
    // From here a load balancer may exist that no listing has shown: its tag list is no longer answered
    // by the observer's index (`locate`).
    ctx.creating(round.uid.as_str());
    let done = octavia::execute(&ctx.cloud, "", &op, ctx.project_id.as_deref(), &round.tags).await;
    if let Err(Error::OpenStack(e)) = &done {
        refusals::learn(ctx, &round.desired, e);
        if vip_leak::is_vip_taken(e) && vip_leak::free(ctx, &round.desired).await > 0 {
            // The address is free again: the next round's create can have it.
            return Ok(Next::wait(ctx.config.poll_min));
        }
    }
    let Done::Created(created) = done? else {
        return Err(Error::Unexpected(
            "the create answered without a load balancer".into(),
        ));
    };
    let (lb, graph) = *created;
    {
        let mut schedule = ctx.schedule();
        // What the create made is known from its answer: the poll that finds it ACTIVE reads nothing else.
        if let Some(obs) = octavia::observed_from_graph(&lb, &graph) {
            schedule.remember_observed(obs, Instant::now());
        }
        schedule.wrote(round.uid.as_str(), Instant::now(), op.objects());
    }
    ctx.metrics.lb_op(op.kind());
    info!(lb_id = lb.id, provider = lb.provider, "load balancer created");
    status::record(&mut round.st, &lb, None, round.member_subnet.as_deref());
    let created = format!("load balancer {} created", lb.id);
    let limit = ctx.schedule().pending_limit(
        round.uid.as_str(),
        ctx.config.pending_limit,
        ctx.config.pending_per_object,
    );
    let after = round.pending_look(&lb.id, true, ctx.config.poll_min, limit);
    round.finish(after, false, "Creating", created).await
}
