//! nested-vlan, cloud side: create the pod's port, make it a VLAN subport of the node VM's trunk, and undo
//! both. VLAN ids come from the per-trunk `VlanBook` (rebuilt from the trunk's subports on first use, so
//! Neutron stays the truth); every path that does not end in a committed subport releases its id.

use std::collections::BTreeSet;

use kuryr_api::Vif;
use kuryr_core::vif::{Attachment, PodFacts, PortOwner, PortParams};
use kuryr_core::{NestedVlan, VifDriver};
use kuryr_openstack::neutron::trunks::{self, SubPort};
use kuryr_openstack::neutron::{ports, Filter};
use kuryr_openstack::Owner;
use tracing::{info, warn};

use crate::context::{Context, Parent};
use crate::convert;
use crate::errors::{Error, Result};
use crate::ports::parent;

/// Ownership tags' kind for pod ports.
pub const OWNER_KIND: &str = "KuryrPort";
/// `device_owner` Neutron gives a port once it is a trunk subport (its `device_id` is then the trunk).
const SUBPORT_OWNER: &str = "trunk:subport";
/// `add_subports` tries per port: a 409 means another writer took the id; re-read the trunk and go again.
const ATTACH_TRIES: u32 = 3;

pub fn owner(ctx: &Context, pod_uid: &str) -> Owner {
    Owner::new(&ctx.config.cluster_id, OWNER_KIND, pod_uid)
}

/// Creates and attaches the pod's port; returns its VIF (`active: false` until Neutron says ACTIVE).
/// Nothing is left behind on failure: the port is detached and deleted, its VLAN released.
pub async fn allocate(ctx: &Context, facts: &PodFacts) -> Result<Vif> {
    let parent = parent::parent_of(ctx, &facts.node_name).await?;
    let subnet = crate::networks::selector::pod_subnet(ctx, facts).await?;
    let tags: BTreeSet<String> = owner(ctx, &facts.uid).tags()?.into_iter().collect();
    let driver = NestedVlan {
        link_iface: ctx.config.driver.link_iface.clone(),
    };
    let req = driver.port_request(PortParams {
        owner: PortOwner::Pod(facts),
        subnet: &subnet,
        project_id: &ctx.project_id,
        security_groups: &facts.security_groups,
        tags: &tags,
    });
    // A bulk create of one: Neutron takes tags in a bulk body (tag-ports-during-bulk-creation) but not in a
    // single create's, which would cost a second call to tag the port.
    let port = ports::bulk_create(&ctx.cloud, &[convert::create_port(&req)])
        .await?
        .pop()
        .ok_or(Error::MissingField("port in the bulk create answer"))?;
    let vlan_id = match attach(ctx, &facts.node_name, &parent, &port.id).await {
        Ok(id) => id,
        Err(e) => {
            delete_port(ctx, &port.id).await;
            return Err(e);
        }
    };
    let attachment = Attachment::Vlan {
        trunk_id: parent.trunk_id.clone(),
        parent_port_id: parent.port_id.clone(),
        vlan_id,
    };
    match driver.vif(&convert::port(&port), std::slice::from_ref(&subnet), &attachment) {
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
    let trunk_id = parent.trunk_id.as_str();
    let mut tries = 0;
    loop {
        tries += 1;
        let vlan = reserve(ctx, trunk_id, port_id).await?;
        let sub = [SubPort::vlan(port_id, u32::from(vlan))];
        match trunks::add_subports(&ctx.cloud, trunk_id, &sub).await {
            Ok(_) => {
                if let Some(a) = ctx.vlans_lock().get_mut(trunk_id) {
                    a.commit(port_id);
                }
                return Ok(vlan);
            }
            Err(e) if e.is_conflict() && tries < ATTACH_TRIES => {
                warn!(trunk = trunk_id, vlan, error = %e, "add_subports refused (409); re-reading the trunk");
                let trunk = match trunks::get(&ctx.cloud, trunk_id).await {
                    Ok(t) => convert::trunk(&t),
                    Err(e) => {
                        release_vlan(ctx, trunk_id, port_id);
                        return Err(e.into());
                    }
                };
                let mut book = ctx.vlans_lock();
                let alloc = book.for_trunk(&trunk);
                let displaced = alloc.resync(&trunk);
                // The call went through after all (a lost answer): the port is a subport now.
                if trunk.subports.iter().any(|s| s.port_id == port_id) {
                    if let Some(id) = alloc.vlan_of(port_id) {
                        return Ok(id);
                    }
                }
                alloc.release(port_id);
                // Our id was free after all: the 409 is about the port (in use elsewhere), not the VLAN.
                if !displaced.iter().any(|p| p == port_id) {
                    return Err(e.into());
                }
            }
            Err(e) => {
                release_vlan(ctx, trunk_id, port_id);
                if e.is_not_found() {
                    // The trunk is gone (VM recreated?): find the node's parent again next time.
                    ctx.forget_parent(node);
                }
                return Err(e.into());
            }
        }
    }
}

/// The allocator of `trunk_id` (built from the trunk's subports on first use) reserves an id for the port.
async fn reserve(ctx: &Context, trunk_id: &str, port_id: &str) -> Result<u16> {
    if let Some(a) = ctx.vlans_lock().get_mut(trunk_id) {
        return Ok(a.reserve(port_id)?);
    }
    let trunk = convert::trunk(&trunks::get(&ctx.cloud, trunk_id).await?);
    Ok(ctx.vlans_lock().for_trunk(&trunk).reserve(port_id)?)
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
    delete_port(ctx, port_id).await;
}

async fn delete_port(ctx: &Context, port_id: &str) {
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
    for port in &left {
        if port.device_owner == SUBPORT_OWNER && !port.device_id.is_empty() {
            detach(ctx, &port.device_id, &port.id).await?;
        }
        ports::delete(&ctx.cloud, &port.id).await?;
    }
    Ok(left.len())
}

impl Context {
    pub(crate) fn vlans_lock(&self) -> std::sync::MutexGuard<'_, kuryr_core::VlanBook> {
        self.vlans.lock().unwrap_or_else(|p| p.into_inner())
    }
}
