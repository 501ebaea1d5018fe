//! Which driver wires a pod, from a pool or with a port of its own. Giving a port back is
//! [`crate::ports::release`]'s.

use std::collections::BTreeSet;
use std::sync::Arc;

use kuryr_api::{KuryrPort, Vif, VifType};
use kuryr_core::neutron::Subnet;
use kuryr_core::pool::{PoolKey, PoolParent};
use kuryr_core::vif::{Attachment, PodFacts};
use kuryr_core::{driver_for, VifDriver};

use crate::context::Context;
use crate::errors::{Error, Result};
use crate::ports::pool::{self, Target};
use crate::ports::trunk::Parent;
use crate::ports::{macvlan, nested_vlan, node_vif, podport};
use kuryr_convert as convert;

/// The VIF type of a KuryrPort: its spec's, else its node's ([`node_vif::of_node`]).
pub fn vif_type(ctx: &Context, kp: &KuryrPort) -> Result<VifType> {
    match kp.spec.vif_type {
        Some(t) => Ok(t),
        None => node_vif::of_node(ctx, &kp.spec.pod_node_name),
    }
}

fn driver(ctx: &Context, vif_type: VifType) -> Result<Box<dyn VifDriver + Send + Sync>> {
    driver_for(vif_type, &ctx.config.driver).ok_or_else(|| Error::Unsupported(format!("VIF type {vif_type}")))
}

/// The pod's SGs: its KuryrPort's when it names some, else the controller's defaults (resolved to ids, so
/// pool ports compare equal); in a namespace's own project, that project's `default` group (Neutron puts a
/// port only in groups of its own project).
pub async fn pod_security_groups(ctx: &Context, kp: &KuryrPort, project: &str) -> Result<BTreeSet<String>> {
    match &kp.spec.security_group_ids {
        Some(ids) if !ids.is_empty() => Ok(ids.iter().cloned().collect()),
        _ if project != ctx.project_id => pool::project_default_sg(ctx, project).await,
        _ => pool::default_sgs(ctx).await,
    }
}

/// Wires the pod's default interface on its pod subnet(s) ([`wire`]).
pub async fn allocate(ctx: &Arc<Context>, vif_type: VifType, facts: &PodFacts) -> Result<Vif> {
    let subnets = crate::networks::selector::pod_subnets(ctx, facts).await?;
    wire(ctx, vif_type, facts, subnets).await
}

/// Whether pods wired with `vif_type` can have extra interfaces.
pub fn additional_supported(vif_type: VifType) -> bool {
    matches!(vif_type, VifType::NestedVlan | VifType::NeutronVif)
}

/// An extra interface of the pod (`k8s.v1.cni.cncf.io/networks`) on `subnet_id`, wired like its default
/// one ([`wire`]: from that network's pool, or a port of its own): a subport of its node's trunk
/// (nested-vlan, its own VLAN) or a bound port (neutron-vif). nested-macvlan has only the VM's port, on the
/// pod network: no extra networks.
pub async fn allocate_additional(
    ctx: &Arc<Context>,
    vif_type: VifType,
    facts: &PodFacts,
    subnet_id: &str,
) -> Result<Vif> {
    if !additional_supported(vif_type) {
        return Err(Error::Unsupported(format!(
            "additional networks with VIF type {vif_type}: only nested-vlan and neutron-vif give a pod more ports"
        )));
    }
    let subnet = crate::networks::selector::additional_subnet(ctx, subnet_id).await?;
    wire(ctx, vif_type, facts, vec![subnet]).await
}

/// A port on `subnets` (one network): from the pool of (node, network, project) when pools are on and the
/// driver pools, else a port of its own. Pools hold the controller's project's ports: a pod of a namespace
/// in a project of its own gets a port of its own, made in that project.
async fn wire(ctx: &Arc<Context>, vif_type: VifType, facts: &PodFacts, subnets: Vec<Subnet>) -> Result<Vif> {
    let driver = driver(ctx, vif_type)?;
    let pooled = ctx.config.pools_enabled && driver.pools_ports() && facts.project_id == ctx.project_id;
    let node = facts.node_name.clone();
    let network_id = subnets.first().map(|s| s.network_id.clone()).unwrap_or_default();
    let key = |parent: PoolParent| PoolKey {
        parent,
        network_id: network_id.clone(),
        project_id: ctx.project_id.clone(),
    };
    match vif_type {
        VifType::NestedVlan => {
            let parent = node_parent(ctx, &node).await?;
            if !pooled {
                return nested_vlan::allocate(ctx, facts, &parent, &subnets).await;
            }
            let target = Target {
                key: key(PoolParent::Trunk(parent.trunk_id.clone())),
                node_name: node,
                parent: Some(parent),
                subnets,
            };
            pool::acquire(ctx, facts, driver.as_ref(), &target, &facts.security_groups).await
        }
        VifType::NeutronVif if pooled => {
            let target = Target {
                key: key(PoolParent::Host(node.clone())),
                node_name: node,
                parent: None,
                subnets,
            };
            pool::acquire(ctx, facts, driver.as_ref(), &target, &facts.security_groups).await
        }
        VifType::NeutronVif => bridged(ctx, driver.as_ref(), facts, &subnets).await,
        // One address per pod: see `macvlan::allocate`.
        VifType::NestedMacvlan => macvlan::allocate(ctx, facts, &subnets[..subnets.len().min(1)]).await,
        VifType::NestedDpdk => Err(Error::Unsupported("VIF type nested-dpdk".into())),
    }
}

/// The trunk parent of node `name` (nested-vlan).
async fn node_parent(ctx: &Context, name: &str) -> Result<Parent> {
    let node = ctx
        .node(name)
        .ok_or_else(|| Error::NodeNotFound(name.to_owned()))?;
    ctx.trunks.parent_of(&ctx.cloud, &node).await
}

/// A bound port of the pod's own (neutron-vif without a pool).
async fn bridged(
    ctx: &Context,
    driver: &(dyn VifDriver + Send + Sync),
    facts: &PodFacts,
    subnets: &[Subnet],
) -> Result<Vif> {
    let port = podport::create(ctx, driver, facts, subnets).await?;
    match driver.vif(&convert::port(&port), subnets, &Attachment::Bridge) {
        Ok(vif) => Ok(vif),
        Err(e) => {
            podport::delete_quietly(ctx, &port.id).await;
            Err(e.into())
        }
    }
}
