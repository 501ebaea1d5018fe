//! The tree matches the spec: the floating IP (LoadBalancer Services, when an external network or a
//! requested IP allows one), its address published on the Service, strays swept when due, then Ready.

use std::time::{Duration, Instant};

use kuryr_api::loadbalancer::ServiceType;
use kuryr_api::ResourceExt;
use kuryr_openstack::octavia::loadbalancers::LoadBalancer;

use super::fip;
use super::repair::sweep;
use super::round::{Next, Round};
use super::status;
use crate::errors::Result;
use crate::toolkit::Topic;

/// Without a known reason, a Service's tagged load balancers are listed for strays every this many drift
/// checks (an hour at the default 5 minutes): strays come from abandons this process records, or from
/// a previous process (listed once per Service after a start).
const SWEEP_EVERY_DRIFT_CHECKS: u32 = 12;

/// A settled load balancer's next look of its own while the observer lists: a safety net only (the
/// observer wakes it on any change), so that its reads stay a fraction of one per Service a day.
pub const RESYNC: Duration = Duration::from_secs(24 * 3600);

pub async fn expose(round: &mut Round<'_>, lb: &LoadBalancer) -> Result<Next> {
    let ctx = round.ctx;
    let spec = &round.enforced.spec;
    let want_fip = spec.service_type == Some(ServiceType::LoadBalancer)
        && round.desired.expose
        && !round.enforced.fip_refused
        && (ctx.config.external_network_id.is_some() || spec.lb_ip.is_some());
    let lb_ip = spec.lb_ip.clone();
    let had = round.st.service_pub_ip_info.as_ref().map(|f| f.ip_addr.clone());
    let fip_refused = fip::ensure(
        ctx,
        &round.owner,
        &mut round.st,
        want_fip,
        lb_ip.as_deref(),
        &lb.vip_port_id,
        &round.allow,
    )
    .await?;
    let mut refused = round.enforced.refused.clone();
    refused.extend(fip_refused.iter().cloned());
    status::allowed(&mut round.st, round.generation, &refused);
    round.tell(Topic::FloatingIp, fip_refused.as_slice()).await;
    let now = round.st.service_pub_ip_info.as_ref().map(|f| f.ip_addr.clone());
    if had != now || now.is_some() {
        let ns = round.klb.namespace().unwrap_or_default();
        fip::publish(ctx, &ns, &round.klb.name_any(), now.as_deref()).await?;
    }
    // Strays (an abandoned stuck LB) are looked for when there is reason to, not every round; with the
    // observer listing, only when it saw some (its listing has every tagged load balancer).
    let observing = ctx.observer.observing();
    let every = ctx.config.drift_interval * SWEEP_EVERY_DRIFT_CHECKS;
    let due = if observing {
        ctx.schedule().sweep_wanted(round.uid.as_str())
    } else {
        ctx.schedule()
            .sweep_due(round.uid.as_str(), every, Instant::now())
    };
    if due {
        sweep(round, &lb.id).await;
    }
    // Active: Octavia has the desired tree, so its member count is the desired one.
    let members: usize = round
        .desired
        .listeners
        .values()
        .map(|l| l.pool.members.len())
        .sum();
    let mut active = format!("load balancer {} ACTIVE, {members} members", lb.id);
    if members > status::STATUS_MEMBERS_MAX {
        active.push_str(&format!(" (the status lists {})", status::STATUS_MEMBERS_MAX));
    }
    // Drift is the observer's to notice; without it, each load balancer is looked at per drift interval.
    let after = if observing {
        RESYNC
    } else {
        ctx.config.drift_interval
    };
    round.finish(after, true, "Active", active).await
}
