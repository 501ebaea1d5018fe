//! The tree matches the spec: the floating IP (LoadBalancer Services, when an external network or a
//! requested IP allows one), its address published on the Service, strays swept when due, then Ready.

use std::time::Instant;

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
    // Strays (an abandoned stuck LB) are looked for when there is reason to, not every round.
    let every = ctx.config.drift_interval * SWEEP_EVERY_DRIFT_CHECKS;
    let due = ctx
        .schedule()
        .sweep_due(round.uid.as_str(), every, Instant::now());
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
    round
        .finish(ctx.config.drift_interval, true, "Active", active)
        .await
}
