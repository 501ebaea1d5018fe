//! Label keys Kuryr puts on objects.

/// Domain prefix of Kuryr's own label and finalizer keys.
pub const KURYR_FQDN: &str = "kuryr.openstack.org";

/// On a KuryrPort: the node its pod runs on. The CNI daemon on each node watches only KuryrPorts with
/// its own node name, so this label (not `spec.podNodeName`) is what scopes the daemon's watch.
pub const NODE_NAME: &str = "kuryr.openstack.org/nodeName";

/// Label selector string matching the KuryrPorts of one node, for a node-scoped watch.
pub fn node_name_selector(node: &str) -> String {
    format!("{NODE_NAME}={node}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_selector_uses_upstream_label_key() {
        assert_eq!(
            node_name_selector("worker-1"),
            "kuryr.openstack.org/nodeName=worker-1"
        );
    }
}
