//! The VIF type of a node's pods, as the KuryrPorts, the pools and the upkeep loops read it.

use kuryr_api::{Node, VifType};

use crate::context::Context;
use crate::errors::{Error, Result};

/// [`of`] for the node of this name in the controller's Node cache.
pub fn of_node(ctx: &Context, node: &str) -> Result<VifType> {
    let node = ctx
        .node(node)
        .ok_or_else(|| Error::NodeNotFound(node.to_owned()))?;
    of(ctx, &node)
}

/// Neutron's name of node `node`'s host, when its label names one other than the node's own.
pub fn neutron_host(ctx: &Context, node: &str) -> Option<String> {
    let node = ctx.node(node)?;
    kuryr_core::node_vif::neutron_host(node.metadata.labels.as_ref()).map(str::to_owned)
}

/// Its `kuryr.openstack.org/pod-vif` label's (or upstream's `pod_vif`), else the controller's
/// `--vif-driver`. A label naming no driver is the operator's to fix: an error that says so.
pub fn of(ctx: &Context, node: &Node) -> Result<VifType> {
    let labelled = kuryr_core::node_vif::node_vif_type(node.metadata.labels.as_ref())
        .map_err(|e| Error::Config(e.to_string()))?;
    Ok(labelled.unwrap_or(ctx.config.vif_type))
}
