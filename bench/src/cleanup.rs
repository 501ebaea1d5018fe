//! Real-cloud cleanup: ports carrying a session's cluster tag (ours: `kuryr.cluster=<id>`; upstream's
//! `resource_tags` is set to the same string), detached from any trunk first.

use kuryr_openstack::neutron::{ports, trunks, Filter};
use kuryr_openstack::Cloud;

pub async fn delete_tagged(cloud: &Cloud, cluster_id: &str) -> anyhow::Result<()> {
    let tag = format!("kuryr.cluster={cluster_id}");
    let tagged = ports::list(cloud, Filter::new().tags(&[tag])).await?;
    delete_detached(cloud, tagged).await
}

/// Upstream's own ports on a real cloud (no resource_tags there: its parent lookup would demand them on
/// the shared lab VMs): named `<namespace>/<pod>` by its nested-vlan driver with pools off.
pub async fn delete_named(cloud: &Cloud, network_id: &str, prefix: &str) -> anyhow::Result<()> {
    let ours: Vec<ports::Port> = ports::list(cloud, Filter::new().eq("network_id", network_id))
        .await?
        .into_iter()
        .filter(|p| p.name.starts_with(prefix))
        .collect();
    delete_detached(cloud, ours).await
}

async fn delete_detached(cloud: &Cloud, tagged: Vec<ports::Port>) -> anyhow::Result<()> {
    if tagged.is_empty() {
        return Ok(());
    }
    // ML2/OVN leaves a subport's device_id empty: find its trunk by listing.
    for trunk in trunks::list(cloud, Filter::new()).await? {
        let ids: Vec<String> = trunk
            .sub_ports
            .iter()
            .filter(|s| tagged.iter().any(|p| p.id == s.port_id))
            .map(|s| s.port_id.clone())
            .collect();
        if !ids.is_empty() {
            let _ = trunks::remove_subports(cloud, &trunk.id, &ids).await;
        }
    }
    for port in tagged {
        let _ = ports::delete(cloud, &port.id).await;
    }
    Ok(())
}
