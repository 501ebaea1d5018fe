//! Giving a pod's port back: to its pool, or detached and deleted. The KuryrPort's cleanup gives back every
//! port its status names; a failed wiring round gives back the ports it made ([`undo_all`]).

use std::collections::BTreeSet;

use kuryr_api::Vif;
use kuryr_core::kuryrport::{pool_key, release_plan, ReleaseStep};
use kuryr_openstack::neutron::ports;
use tracing::{info, warn};

use crate::context::Context;
use crate::errors::Result;
use crate::ports::{macvlan, pool};

/// Gives back every port of `made` (interface, VIF), which no status names: the rollback of a wiring round.
/// Errors are logged; the cleanup's tag scan catches whatever is left.
pub async fn undo_all(ctx: &Context, made: &[(String, Vif)], node_name: &str) {
    for (_, vif) in made {
        if let Err(e) = release(ctx, vif, node_name).await {
            warn!(
                port = vif.port_id,
                error = &e as &dyn std::error::Error,
                "undo failed"
            );
        }
    }
}

/// Gives the port of `vif` back: to its pool (SGs reset first when they differ) unless the pool is full,
/// pools are off or the port was not made for a pool, else detached (subport, address pair) and deleted. A
/// 404 counts as done.
pub async fn release(ctx: &Context, vif: &Vif, node_name: &str) -> Result<()> {
    // The NetworkPolicy controller sets pod ports' SGs without touching the VIF: the recorded ones can't be
    // trusted, so a recycled port always gets the pool's defaults back.
    let unrecorded;
    let vif = if ctx.config.policy.enabled {
        unrecorded = Vif {
            security_group_ids: Default::default(),
            ..vif.clone()
        };
        &unrecorded
    } else {
        vif
    };
    if ctx.config.pools_enabled {
        pool::ensure_rebuilt(ctx).await?;
    }
    // Only ports made for a pool go back to one: a pod's own port (pools off when it was made, or adopted
    // from upstream) carries the pod's ownership tags, which would mislead the GC once another pod used it.
    let key = pool_key(vif, node_name, &ctx.project_id)
        .filter(|_| ctx.config.pools_enabled && pool::is_pool_port(ctx, &vif.port_id));
    let pool = key.as_ref().map(|key| pool::pool_snapshot(ctx, key));
    let mut sgs: BTreeSet<String> = vif.security_group_ids.iter().cloned().collect();
    for step in release_plan(vif, pool.as_ref(), ctx.config.pool_limits) {
        match step {
            ReleaseStep::ResetSecurityGroups {
                port_id,
                security_groups,
            } => {
                let list: Vec<String> = security_groups.iter().cloned().collect();
                match ports::set_security_groups(&ctx.cloud, &port_id, &list).await {
                    Ok(_) => sgs = security_groups,
                    Err(e) if e.is_not_found() => return Ok(()),
                    Err(e) => return Err(e.into()),
                }
            }
            ReleaseStep::ReturnToPool { key, port_id } => {
                pool::returned(ctx, &key, vif, sgs.clone());
                info!(port = port_id, "port back in its pool");
            }
            ReleaseStep::RemoveSubport { trunk_id, port_id } => {
                ctx.trunks.detach(&ctx.cloud, &trunk_id, &port_id).await?;
            }
            ReleaseStep::RemoveAddressPair { vm_port_id, ip } => {
                macvlan::release(ctx, &vm_port_id, &vif.network_id, &ip).await?;
            }
            ReleaseStep::DeletePort { port_id } => ports::delete(&ctx.cloud, &port_id).await?,
        }
    }
    Ok(())
}
