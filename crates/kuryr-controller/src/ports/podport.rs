//! A port made for one pod (no pool, or a driver that does not pool): created tagged with the pod's
//! ownership tags, so whatever a crash leaves is found by the tag scan of the KuryrPort's cleanup.

use std::collections::BTreeSet;

use kuryr_api::Vif;
use kuryr_core::neutron::{Subnet, SUBPORT_DEVICE_OWNER};
use kuryr_core::vif::{Attachment, PodFacts, PortOwner, PortParams};
use kuryr_core::{NeutronVif, OwnerKind, VifDriver};
use kuryr_openstack::neutron::ports::{self, Port};
use kuryr_openstack::neutron::Filter;
use kuryr_openstack::Owner;
use tracing::warn;

use crate::context::Context;
use crate::errors::{Error, Result};
use kuryr_convert as convert;

pub fn owner(ctx: &Context, pod_uid: &str) -> Owner {
    Owner::new(&ctx.config.cluster_id, OwnerKind::KuryrPort.as_str(), pod_uid)
}

/// Creates the pod's port as `driver` asks for it; `neutron_host` is where a port bound to the node is bound
/// when Neutron names the node's host otherwise ([`super::node_vif::neutron_host`]). A bulk create of one:
/// Neutron takes tags in a bulk body (tag-ports-during-bulk-creation) but not in a single create's, which
/// would cost a second call.
pub async fn create(
    ctx: &Context,
    driver: &(dyn VifDriver + Send + Sync),
    facts: &PodFacts,
    subnets: &[Subnet],
    neutron_host: Option<&str>,
) -> Result<Port> {
    let tags: BTreeSet<String> = owner(ctx, &facts.uid).tags()?.into_iter().collect();
    let req = driver.port_request(PortParams {
        owner: PortOwner::Pod(facts),
        subnets,
        project_id: &facts.project_id,
        security_groups: &facts.security_groups,
        tags: &tags,
        neutron_host,
    });
    ports::bulk_create(&ctx.cloud, &[convert::create_port(&req)])
        .await?
        .pop()
        .ok_or_else(|| Error::Unexpected("bulk create answered without the port".into()))
}

/// A port of the pod's own bound to its node (neutron-vif without a pool); deleted again when no VIF can be
/// made of it.
pub async fn bound(
    ctx: &Context,
    facts: &PodFacts,
    subnets: &[Subnet],
    neutron_host: Option<&str>,
) -> Result<Vif> {
    let driver = NeutronVif {
        bridge: ctx.config.driver.bridge.clone(),
    };
    let port = create(ctx, &driver, facts, subnets, neutron_host).await?;
    match driver.vif(&convert::port(&port), subnets, &Attachment::Bridge) {
        Ok(vif) => Ok(vif),
        Err(e) => {
            delete_quietly(ctx, &port.id).await;
            Err(e.into())
        }
    }
}

/// Best-effort delete (rollbacks): errors are logged; the cleanup's tag scan catches what is left.
pub async fn delete_quietly(ctx: &Context, port_id: &str) {
    if let Err(e) = ports::delete(&ctx.cloud, port_id).await {
        warn!(
            port = port_id,
            error = &e as &dyn std::error::Error,
            "rollback: port delete failed"
        );
    }
}

/// Detaches and deletes every port still carrying this pod's ownership tags: a duplicate from a retried
/// create, or a port whose status write never happened. Returns how many were found.
pub async fn delete_tagged(ctx: &Context, pod_uid: &str) -> Result<usize> {
    delete_tagged_except(ctx, pod_uid, &[], None).await
}

/// Before the status names the ports of `keep` (this round's): any other port tagged for this pod is a
/// duplicate — a create whose process was killed before its status write (these were made by the restarted
/// controller), or a create whose answer was lost and that the client retried. Each holds an address and,
/// once attached, a VLAN; they go now, not when the pod does. Done before the status write, so a kill at any
/// point leaves at most ports that the next attempt's scan finds. `trunk`: the pod's node's trunk, where a
/// duplicate subport sits (no trunk listing then). Returns how many were deleted.
pub async fn delete_duplicates(
    ctx: &Context,
    pod_uid: &str,
    keep: &[&str],
    trunk: Option<&str>,
) -> Result<usize> {
    let n = delete_tagged_except(ctx, pod_uid, keep, trunk).await?;
    if n > 0 {
        warn!(
            duplicates = n,
            "deleted other ports tagged for this pod (a create cut short by a crash or retried)"
        );
    }
    Ok(n)
}

async fn delete_tagged_except(
    ctx: &Context,
    pod_uid: &str,
    keep: &[&str],
    trunk: Option<&str>,
) -> Result<usize> {
    let owner = owner(ctx, pod_uid);
    let mut left = ports::list(&ctx.cloud, Filter::new().tags(&owner.filter())).await?;
    left.retain(|p| !keep.contains(&p.id.as_str()));
    let subports: Vec<&str> = left
        .iter()
        .filter(|p| p.device_owner == SUBPORT_DEVICE_OWNER)
        .map(|p| p.id.as_str())
        .collect();
    match trunk {
        Some(trunk) => {
            for id in subports {
                ctx.trunks.detach(&ctx.cloud, trunk, id).await?;
            }
        }
        // ML2/OVN leaves a subport's device_id empty: find its trunk by listing.
        None => ctx.trunks.detach_anywhere(&ctx.cloud, &subports).await?,
    }
    for port in &left {
        ports::delete(&ctx.cloud, &port.id).await?;
    }
    Ok(left.len())
}
