//! Real-cloud cleanup: ports carrying a session's cluster tag (ours: `kuryr.cluster=<id>`; upstream's
//! `resource_tags` is set to the same string), and the ports the session's KuryrPorts name (upstream on the
//! real cloud runs without `resource_tags`), each detached from any trunk first.

use kuryr_openstack::neutron::{ports, trunks, Filter};
use kuryr_openstack::Cloud;
use serde_json::Value;

pub async fn delete_tagged(cloud: &Cloud, cluster_id: &str) -> anyhow::Result<()> {
    let tag = format!("kuryr.cluster={cluster_id}");
    let tagged = ports::list(cloud, Filter::new().tags(&[tag])).await?;
    delete_detached(cloud, tagged.into_iter().map(|p| p.id).collect()).await
}

/// Upstream's own ports by name: `<namespace>/<pod>`, which its nested-vlan driver sets only with
/// `[kubernetes] port_debug = true` (the bench's kuryr.conf sets it).
pub async fn delete_named(cloud: &Cloud, network_id: &str, prefix: &str) -> anyhow::Result<()> {
    let ours: Vec<String> = ports::list(cloud, Filter::new().eq("network_id", network_id))
        .await?
        .into_iter()
        .filter(|p| p.name.starts_with(prefix))
        .map(|p| p.id)
        .collect();
    delete_detached(cloud, ours).await
}

/// Ports by id (read from the session's KuryrPorts before they were deleted): what a session that failed
/// before its drain leaves, whatever the port's name or tags.
pub async fn delete_ids(cloud: &Cloud, ids: Vec<String>) -> anyhow::Result<()> {
    delete_detached(cloud, ids).await
}

/// The Neutron port ids a KuryrPort's `status.vifs` names, in either shape: ours (`vif.portId`) or
/// upstream's os-vif primitive (`vif['versioned_object.data'].id`).
pub fn port_ids(kp: &Value) -> Vec<String> {
    let Some(vifs) = kp.pointer("/status/vifs").and_then(Value::as_object) else {
        return Vec::new();
    };
    vifs.values()
        .filter_map(|v| {
            let vif = &v["vif"];
            vif["portId"]
                .as_str()
                .or_else(|| vif["versioned_object.data"]["id"].as_str())
                .map(str::to_string)
        })
        .collect()
}

async fn delete_detached(cloud: &Cloud, ids: Vec<String>) -> anyhow::Result<()> {
    if ids.is_empty() {
        return Ok(());
    }
    // ML2/OVN leaves a subport's device_id empty: find its trunk by listing.
    for trunk in trunks::list(cloud, Filter::new()).await? {
        let subports: Vec<String> = trunk
            .sub_ports
            .iter()
            .filter(|s| ids.contains(&s.port_id))
            .map(|s| s.port_id.clone())
            .collect();
        if !subports.is_empty() {
            let _ = trunks::remove_subports(cloud, &trunk.id, &subports).await;
        }
    }
    for id in ids {
        let _ = ports::delete(cloud, &id).await;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    #[test]
    fn port_ids_are_read_in_both_shapes() {
        let ours =
            json!({"status": {"vifs": {"eth0": {"default": true, "vif": {"portId": "p1", "active": true}}}}});
        assert_eq!(super::port_ids(&ours), vec!["p1".to_string()]);
        let upstream = json!({"status": {"vifs": {"eth0": {"default": true, "vif": {
            "versioned_object.name": "VIFVlanNested",
            "versioned_object.data": {"id": "p2", "active": false}}}}}});
        assert_eq!(super::port_ids(&upstream), vec!["p2".to_string()]);
        assert!(super::port_ids(&json!({"status": {"vifs": {}}})).is_empty());
        assert!(super::port_ids(&json!({"spec": {}})).is_empty());
    }
}
