//! Label keys Kuryr puts on objects.

/// Domain prefix of Kuryr's own label and finalizer keys.
pub const KURYR_FQDN: &str = "kuryr.openstack.org";

/// On a KuryrPort: the node its pod runs on. The CNI daemon on each node watches only KuryrPorts with
/// its own node name, so this label (not `spec.podNodeName`) is what scopes the daemon's watch.
pub const NODE_NAME: &str = "kuryr.openstack.org/nodeName";

/// On a Node: the VIF driver that wires its pods (`neutron-vif`, `nested-vlan`, `nested-macvlan`), over the
/// controller's `--vif-driver`. For clusters that mix kinds of nodes: VMs booted on trunk ports beside
/// bare-metal nodes, or VMs without 802.1Q.
pub const POD_VIF: &str = "kuryr.openstack.org/pod-vif";

/// On a Node whose pods are neutron-vif: Neutron's name of its host (`binding:host_id`, the OVN chassis or OVS
/// agent host) when that is not the Node's name (a short hostname beside an FQDN node name, or several
/// nodes on one hypervisor, as the lab's).
pub const NEUTRON_HOST: &str = "kuryr.openstack.org/neutron-host";

/// On an EndpointSlice: the name of the Service it belongs to (Kubernetes' own label).
pub const SERVICE_NAME: &str = "kubernetes.io/service-name";

/// Upstream Kuryr's node label of the same meaning (its multi pool driver), honoured so that nodes
/// labelled for upstream keep their driver after a migration.
pub const UPSTREAM_POD_VIF: &str = "pod_vif";

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
