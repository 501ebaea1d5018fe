//! Replacing a load balancer, and the stray ones a replacement leaves: Octavia refuses to delete a load
//! balancer stuck PENDING_*, so such a one is given up on (its VIP port deleted, freeing the clusterIP) and
//! deleted by a later [`sweep`] once Octavia lets go.

use std::time::{Duration, Instant};

use kube::runtime::events::EventType;
use kuryr_api::Resource;
use kuryr_core::lb::{ProvisioningStatus, RepairKind};
use kuryr_openstack::neutron::ports;
use kuryr_openstack::octavia::loadbalancers::{self, LoadBalancer};
use kuryr_openstack::{waiter, WaitOptions};
use tracing::{info, warn};

use super::octavia;
use super::round::Round;
use super::service::service_ref;
use super::status;
use crate::errors::Result;

/// How long a replacement waits for the old load balancer's cascade delete.
const DELETE_WAIT: Duration = Duration::from_secs(120);

/// Replaces `lb`: cascade delete (wait for it) when Octavia allows; when it is stuck PENDING_*, its VIP port
/// is deleted instead and the LB left for [`sweep`]. The status is emptied so the next round creates anew.
pub async fn replace(round: &mut Round<'_>, lb: &LoadBalancer, kind: RepairKind, reason: &str) -> Result<()> {
    let ctx = round.ctx;
    repaired(
        round,
        kind,
        format!("replacing load balancer {}: {reason}", lb.id),
    )
    .await;
    // `lb`'s state is this round's (the status tree's root, or a fresh GET).
    let stuck = ProvisioningStatus::parse(&lb.provisioning_status).is_pending();
    ctx.schedule().forget_observed(&lb.id);
    ctx.observer.index().unwatch(&lb.id);
    if stuck {
        {
            let mut schedule = ctx.schedule();
            schedule.abandon(&lb.id);
            schedule.want_sweep(round.uid.as_str());
        }
        if !lb.vip_port_id.is_empty() {
            match ports::delete(&ctx.cloud, &lb.vip_port_id).await {
                Err(e) if !e.is_not_found() => return Err(e.into()),
                _ => {}
            }
        }
    } else {
        loadbalancers::delete(&ctx.cloud, &lb.id, true).await?;
        waiter::wait_lb_deleted(&ctx.cloud, &lb.id, &delete_wait()).await?;
    }
    ctx.schedule().settled(round.uid.as_str());
    status::forget_lb(&mut round.st);
    Ok(())
}

pub fn delete_wait() -> WaitOptions {
    WaitOptions {
        timeout: DELETE_WAIT,
        ..WaitOptions::default()
    }
}

/// Event (on the KuryrLoadBalancer and the Service) + metric for a replaced load balancer.
pub async fn repaired(round: &Round<'_>, kind: RepairKind, note: String) {
    warn!(kind = kind.as_str(), "{note}");
    round.ctx.metrics.lb_repair(kind.as_str());
    for obj in [round.klb.object_ref(&()), service_ref(round.klb)] {
        round
            .ctx
            .events
            .publish(
                &obj,
                EventType::Warning,
                "LoadBalancerReplaced",
                "Repair",
                note.clone(),
            )
            .await;
    }
}

/// Deletes load balancers tagged for this Service other than `keep` (abandoned stuck ones, once Octavia
/// lets them go). Failures are only logged: the sweep stays wanted while a stray is left.
pub async fn sweep(round: &Round<'_>, keep: &str) {
    let ctx = round.ctx;
    let Ok(found) = octavia::find_tagged(&ctx.cloud, &round.owner).await else {
        return;
    };
    let mut clean = true;
    for lb in found.iter().filter(|lb| lb.id != keep) {
        if ProvisioningStatus::parse(&lb.provisioning_status).is_pending() {
            clean = false;
            continue;
        }
        match loadbalancers::delete(&ctx.cloud, &lb.id, true).await {
            Ok(()) => {
                info!(lb_id = lb.id, "stray load balancer of this Service deleted");
                ctx.schedule().forget_lb(&lb.id);
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
    ctx.schedule().swept(round.uid.as_str(), clean, Instant::now());
}
