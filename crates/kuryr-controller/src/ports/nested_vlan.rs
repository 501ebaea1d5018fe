//! nested-vlan, cloud side: create the pod's port and make it a VLAN subport of the node VM's trunk (see
//! [`crate::ports::trunk`]), and undo both.

use kuryr_api::Vif;
use kuryr_core::neutron::Subnet;
use kuryr_core::vif::{Attachment, PodFacts};
use kuryr_core::{NestedVlan, VifDriver};
use tracing::{info, warn};

use crate::context::Context;
use crate::errors::Result;
use crate::ports::podport;
use crate::ports::trunk::Parent;
use kuryr_convert as convert;

/// Creates the pod's port and attaches it; returns its VIF (`active: false` until Neutron says ACTIVE).
/// Nothing is left behind on failure: the port is detached and deleted, its VLAN released.
pub async fn create_subport(
    ctx: &Context,
    facts: &PodFacts,
    parent: &Parent,
    subnets: &[Subnet],
) -> Result<Vif> {
    let driver = NestedVlan {
        link_iface: ctx.config.driver.link_iface.clone(),
    };
    // A subport is bound with its trunk: no host of its own.
    let port = podport::create(ctx, &driver, facts, subnets, None).await?;
    let vlan_id = match ctx
        .trunks
        .attach(&ctx.cloud, &facts.node_name, parent, &port.id)
        .await
    {
        Ok(id) => id,
        Err(e) => {
            podport::delete_quietly(ctx, &port.id).await;
            return Err(e);
        }
    };
    let attachment = Attachment::Vlan {
        trunk_id: parent.trunk_id.clone(),
        parent_port_id: parent.port_id.clone(),
        parent_mac: parent.mac.clone(),
        vlan_id,
    };
    match driver.vif(&convert::port(&port), subnets, &attachment) {
        Ok(vif) => {
            info!(
                port = port.id,
                vlan = vlan_id,
                trunk = parent.trunk_id,
                "port created and attached"
            );
            Ok(vif)
        }
        Err(e) => {
            detach_and_delete(ctx, &parent.trunk_id, &port.id).await;
            Err(e.into())
        }
    }
}

/// Best-effort rollback of an attached port (errors are logged; the tag scan of the cleanup catches
/// whatever is left).
async fn detach_and_delete(ctx: &Context, trunk_id: &str, port_id: &str) {
    if let Err(e) = ctx.trunks.detach(&ctx.cloud, trunk_id, port_id).await {
        warn!(
            port = port_id,
            error = &e as &dyn std::error::Error,
            "rollback: remove_subports failed"
        );
    }
    podport::delete_quietly(ctx, port_id).await;
}
