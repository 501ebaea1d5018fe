//! The node VM's parent port and trunk (nested-vlan), from the Node's InternalIPs; cached per node, since
//! a VM keeps its port for life. The pod subnet is cached too.

use kuryr_core::neutron::Subnet;
use kuryr_core::parent::{find_trunk_parent, internal_ips};
use kuryr_openstack::neutron::{networks, ports, subnets, Filter};

use crate::context::{Context, Parent};
use crate::convert;
use crate::errors::{Error, Result};

/// The parent of `node_name`'s pods: cached, else found by listing the ports that carry the node's
/// InternalIPs (one filtered list per address, once per node).
pub async fn parent_of(ctx: &Context, node_name: &str) -> Result<Parent> {
    if let Some(p) = ctx.parent(node_name) {
        return Ok(p);
    }
    let node = ctx
        .node(node_name)
        .ok_or_else(|| Error::NodeNotFound(node_name.to_owned()))?;
    let mut candidates = Vec::new();
    for ip in internal_ips(&node) {
        let found = ports::list(&ctx.cloud, Filter::new().fixed_ip(ip)).await?;
        candidates.extend(found.iter().map(convert::port));
    }
    let (port, trunk_id) = find_trunk_parent(&node, &candidates)?;
    let parent = Parent {
        port_id: port.id.clone(),
        trunk_id: trunk_id.to_owned(),
        mac: port.mac_address.clone(),
    };
    tracing::info!(
        node = node_name,
        port = parent.port_id,
        trunk = parent.trunk_id,
        mac = parent.mac,
        "node parent found"
    );
    ctx.remember_parent(node_name, parent.clone());
    Ok(parent)
}

/// The configured pod subnet with its network's MTU, read once.
pub async fn pod_subnet(ctx: &Context) -> Result<Subnet> {
    let s = ctx
        .subnet
        .get_or_try_init(|| async {
            let s = subnets::get(&ctx.cloud, &ctx.config.pod_subnet_id).await?;
            let n = networks::get(&ctx.cloud, &s.network_id).await?;
            Ok::<_, Error>(convert::subnet(&s, &n))
        })
        .await?;
    Ok(s.clone())
}
