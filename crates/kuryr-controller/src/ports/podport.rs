//! A port made for one pod (no pool, or a driver that does not pool): created tagged with the pod's
//! ownership tags, so whatever a crash leaves is found by the tag scan of the KuryrPort's cleanup.

use std::collections::BTreeSet;

use kuryr_core::neutron::Subnet;
use kuryr_core::vif::{PodFacts, PortOwner, PortParams};
use kuryr_core::VifDriver;
use kuryr_openstack::neutron::ports::{self, Port};
use kuryr_openstack::neutron::{trunks, Filter};
use kuryr_openstack::Owner;
use tracing::warn;

use crate::context::Context;
use crate::convert;
use crate::errors::{Error, Result};
use crate::ports::nested_vlan;

/// Ownership tags' kind for pod ports.
pub const OWNER_KIND: &str = "KuryrPort";
/// `device_owner` Neutron gives a port once it is a trunk subport.
pub use kuryr_core::neutron::SUBPORT_DEVICE_OWNER as SUBPORT_OWNER;

pub fn owner(ctx: &Context, pod_uid: &str) -> Owner {
    Owner::new(&ctx.config.cluster_id, OWNER_KIND, pod_uid)
}

/// Creates the pod's port as `driver` asks for it. A bulk create of one: Neutron takes tags in a bulk body
/// (tag-ports-during-bulk-creation) but not in a single create's, which would cost a second call.
pub async fn create(
    ctx: &Context,
    driver: &(dyn VifDriver + Send + Sync),
    facts: &PodFacts,
    subnet: &Subnet,
) -> Result<Port> {
    let tags: BTreeSet<String> = owner(ctx, &facts.uid).tags()?.into_iter().collect();
    let req = driver.port_request(PortParams {
        owner: PortOwner::Pod(facts),
        subnet,
        project_id: &ctx.project_id,
        security_groups: &facts.security_groups,
        tags: &tags,
    });
    ports::bulk_create(&ctx.cloud, &[convert::create_port(&req)])
        .await?
        .pop()
        .ok_or(Error::MissingField("port in the bulk create answer"))
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
    let owner = owner(ctx, pod_uid);
    let left = ports::list(&ctx.cloud, Filter::new().tags(&owner.filter())).await?;
    if left.iter().any(|p| p.device_owner == SUBPORT_OWNER) {
        // ML2/OVN leaves a subport's device_id empty: find its trunk by listing.
        for trunk in trunks::list(&ctx.cloud, Filter::new()).await? {
            for s in trunk
                .sub_ports
                .iter()
                .filter(|s| left.iter().any(|p| p.id == s.port_id))
            {
                nested_vlan::detach(ctx, &trunk.id, &s.port_id).await?;
            }
        }
    }
    for port in &left {
        ports::delete(&ctx.cloud, &port.id).await?;
    }
    Ok(left.len())
}
