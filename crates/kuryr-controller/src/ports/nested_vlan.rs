//! nested-vlan, cloud side: create the pod's port, make it a VLAN subport of the node VM's trunk, and undo
//! both. VLAN ids come from the per-trunk `VlanBook` (rebuilt from the trunk's subports on first use, so
//! Neutron stays the truth); every path that does not end in a committed subport releases its id.

use kuryr_api::Vif;
use kuryr_core::neutron::{Subnet, Subport};
use kuryr_core::vif::{Attachment, PodFacts};
use kuryr_core::{NestedVlan, VifDriver};
use kuryr_openstack::neutron::trunks::{self, SubPort};
use tracing::{info, warn};

use crate::context::{Context, Parent};
use crate::convert;
use crate::errors::{Error, Result};
use crate::ports::podport;
pub use crate::ports::podport::OWNER_KIND;

/// `add_subports` tries per port: a 409 means another writer took the id; re-read the trunk and go again.
const ATTACH_TRIES: u32 = 3;

/// Creates the pod's port and attaches it; returns its VIF (`active: false` until Neutron says ACTIVE).
/// Nothing is left behind on failure: the port is detached and deleted, its VLAN released.
pub async fn allocate(ctx: &Context, facts: &PodFacts, parent: &Parent, subnet: &Subnet) -> Result<Vif> {
    let driver = NestedVlan {
        link_iface: ctx.config.driver.link_iface.clone(),
    };
    let port = podport::create(ctx, &driver, facts, subnet).await?;
    let vlan_id = match attach(ctx, &facts.node_name, parent, &port.id).await {
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
    match driver.vif(&convert::port(&port), std::slice::from_ref(subnet), &attachment) {
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
            release(ctx, &parent.trunk_id, &port.id).await;
            Err(e.into())
        }
    }
}

/// Reserves a VLAN on the trunk and adds the port as subport; returns the committed id.
async fn attach(ctx: &Context, node: &str, parent: &Parent, port_id: &str) -> Result<u16> {
    let ids = [port_id.to_owned()];
    let vlans = attach_many(ctx, node, parent, &ids).await?;
    vlans
        .first()
        .map(|(_, vlan)| *vlan)
        .ok_or(Error::MissingField("VLAN of the attached port"))
}

/// Reserves a VLAN per port and adds them all as subports in ONE `add_subports` (Neutron validates the
/// whole batch before changing anything: all or none); returns (port, VLAN) in `port_ids` order. On a 409
/// the trunk is re-read: a lost answer (the ports are subports now) is a success; ids another writer took
/// are reserved again; a 409 not about VLANs is returned. Every id is released on every failure.
pub async fn attach_many(
    ctx: &Context,
    node: &str,
    parent: &Parent,
    port_ids: &[String],
) -> Result<Vec<(String, u16)>> {
    let trunk_id = parent.trunk_id.as_str();
    let mut tries = 0;
    loop {
        tries += 1;
        let reserved = reserve_many(ctx, trunk_id, port_ids).await?;
        let body: Vec<SubPort> = reserved
            .iter()
            .map(|s| SubPort::vlan(&s.port_id, u32::from(s.segmentation_id)))
            .collect();
        match trunks::add_subports(&ctx.cloud, trunk_id, &body).await {
            Ok(_) => {
                if let Some(a) = ctx.vlans_lock().get_mut(trunk_id) {
                    a.commit_many(port_ids.iter().map(String::as_str));
                }
                return Ok(reserved
                    .into_iter()
                    .map(|s| (s.port_id, s.segmentation_id))
                    .collect());
            }
            Err(e) if e.is_conflict() && tries < ATTACH_TRIES => {
                warn!(trunk = trunk_id, ports = port_ids.len(), error = %e, "add_subports refused (409); re-reading the trunk");
                let trunk = match trunks::get(&ctx.cloud, trunk_id).await {
                    Ok(t) => convert::trunk(&t),
                    Err(e) => {
                        release_vlans(ctx, trunk_id, port_ids);
                        return Err(e.into());
                    }
                };
                let mut book = ctx.vlans_lock();
                let alloc = book.for_trunk(&trunk);
                let displaced = alloc.resync(&trunk);
                // The call went through after all (a lost answer): the ports are subports now.
                let on_trunk: Option<Vec<(String, u16)>> = port_ids
                    .iter()
                    .map(|id| {
                        trunk
                            .subports
                            .iter()
                            .find(|s| &s.port_id == id)
                            .map(|s| (id.clone(), s.segmentation_id))
                    })
                    .collect();
                if let Some(done) = on_trunk {
                    return Ok(done);
                }
                alloc.release_many(port_ids.iter().map(String::as_str));
                // Our ids were free after all: the 409 is about a port (in use elsewhere), not the VLANs.
                if !displaced.iter().any(|p| port_ids.contains(p)) {
                    return Err(e.into());
                }
            }
            Err(e) => {
                release_vlans(ctx, trunk_id, port_ids);
                if e.is_not_found() {
                    // The trunk is gone (VM recreated?): find the node's parent again next time.
                    ctx.forget_parent(node);
                }
                return Err(e.into());
            }
        }
    }
}

/// The allocator of `trunk_id` (built from the trunk's subports on first use) reserves an id per port.
async fn reserve_many(ctx: &Context, trunk_id: &str, port_ids: &[String]) -> Result<Vec<Subport>> {
    if let Some(a) = ctx.vlans_lock().get_mut(trunk_id) {
        return Ok(a.reserve_many(port_ids)?);
    }
    let trunk = convert::trunk(&trunks::get(&ctx.cloud, trunk_id).await?);
    Ok(ctx.vlans_lock().for_trunk(&trunk).reserve_many(port_ids)?)
}

/// The VLAN `port_id` holds on `trunk_id`, reading the trunk when its allocator is not built yet.
pub async fn vlan_of(ctx: &Context, trunk_id: &str, port_id: &str) -> Result<Option<u16>> {
    if let Some(a) = ctx.vlans_lock().get_mut(trunk_id) {
        if let Some(id) = a.vlan_of(port_id) {
            return Ok(Some(id));
        }
    }
    let trunk = convert::trunk(&trunks::get(&ctx.cloud, trunk_id).await?);
    let mut book = ctx.vlans_lock();
    let alloc = book.for_trunk(&trunk);
    alloc.resync(&trunk);
    Ok(alloc.vlan_of(port_id))
}

fn release_vlans(ctx: &Context, trunk_id: &str, port_ids: &[String]) {
    if let Some(a) = ctx.vlans_lock().get_mut(trunk_id) {
        a.release_many(port_ids.iter().map(String::as_str));
    }
}

fn release_vlan(ctx: &Context, trunk_id: &str, port_id: &str) {
    if let Some(a) = ctx.vlans_lock().get_mut(trunk_id) {
        a.release(port_id);
    }
}

/// Removes the subport (404: not one any more), releases its VLAN.
pub async fn detach(ctx: &Context, trunk_id: &str, port_id: &str) -> Result<()> {
    match trunks::remove_subports(&ctx.cloud, trunk_id, &[port_id.to_owned()]).await {
        Ok(_) => {}
        Err(e) if e.is_not_found() => {}
        Err(e) => return Err(e.into()),
    }
    release_vlan(ctx, trunk_id, port_id);
    Ok(())
}

/// Best-effort rollback of an attached port (errors are logged; the tag scan of the cleanup catches
/// whatever is left).
pub async fn release(ctx: &Context, trunk_id: &str, port_id: &str) {
    if let Err(e) = detach(ctx, trunk_id, port_id).await {
        warn!(
            port = port_id,
            error = &e as &dyn std::error::Error,
            "rollback: remove_subports failed"
        );
    }
    podport::delete_quietly(ctx, port_id).await;
}

impl Context {
    pub(crate) fn vlans_lock(&self) -> std::sync::MutexGuard<'_, kuryr_core::VlanBook> {
        self.vlans.lock().unwrap_or_else(|p| p.into_inner())
    }
}
