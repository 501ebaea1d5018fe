//! Finding the node VM's own Neutron port (the parent of nested pod ports): the pod's `spec.nodeName` gives
//! the Node, its InternalIP addresses give the port that carries one of them.

use kuryr_api::Node;

use crate::error::CoreError;
use crate::neutron::{NeutronPort, DEVICE_OWNER};

/// The node's InternalIP addresses, in the order the node reports them (dual-stack nodes have two).
pub fn internal_ips(node: &Node) -> Vec<&str> {
    node.status
        .as_ref()
        .and_then(|s| s.addresses.as_ref())
        .map(|addrs| {
            addrs
                .iter()
                .filter(|a| a.type_ == "InternalIP")
                .map(|a| a.address.as_str())
                .collect()
        })
        .unwrap_or_default()
}

/// The node VM's port: a port with one of the node's InternalIPs. Kuryr's own pod ports are never it (a pod
/// port may share the IP on another network); among the rest a trunk parent wins, then the first listed.
pub fn find_vm_port<'a>(node: &Node, ports: &'a [NeutronPort]) -> Result<&'a NeutronPort, CoreError> {
    let node_name = node.metadata.name.clone().unwrap_or_default();
    let ips = internal_ips(node);
    let Some(first_ip) = ips.first() else {
        return Err(CoreError::NoNodeAddress { node: node_name });
    };
    let candidates: Vec<&NeutronPort> = ports
        .iter()
        .filter(|p| p.device_owner != DEVICE_OWNER && ips.iter().any(|ip| p.has_ip(ip)))
        .collect();
    candidates
        .iter()
        .find(|p| p.trunk_id.is_some())
        .or_else(|| candidates.first())
        .copied()
        .ok_or_else(|| CoreError::NoParentPort {
            node: node_name,
            ip: (*first_ip).to_owned(),
        })
}

/// The node VM's port and its trunk, for nested-vlan.
pub fn find_trunk_parent<'a>(
    node: &Node,
    ports: &'a [NeutronPort],
) -> Result<(&'a NeutronPort, &'a str), CoreError> {
    let port = find_vm_port(node, ports)?;
    match port.trunk_id.as_deref() {
        Some(trunk) => Ok((port, trunk)),
        None => Err(CoreError::NoTrunkOnNode {
            node: node.metadata.name.clone().unwrap_or_default(),
            port_id: port.id.clone(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use kuryr_api::k8s_openapi::api::core::v1::{NodeAddress, NodeStatus};
    use kuryr_api::ObjectMeta;

    use super::*;
    use crate::neutron::FixedIp;

    fn mk_node(name: &str, addrs: &[(&str, &str)]) -> Node {
        Node {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..ObjectMeta::default()
            },
            status: Some(NodeStatus {
                addresses: Some(
                    addrs
                        .iter()
                        .map(|(t, a)| NodeAddress {
                            type_: (*t).into(),
                            address: (*a).into(),
                        })
                        .collect(),
                ),
                ..NodeStatus::default()
            }),
            ..Node::default()
        }
    }

    fn mk_port(id: &str, ip: &str, owner: &str, trunk: Option<&str>) -> NeutronPort {
        NeutronPort {
            id: id.into(),
            device_owner: owner.into(),
            fixed_ips: vec![FixedIp {
                subnet_id: "s".into(),
                ip_address: ip.into(),
            }],
            trunk_id: trunk.map(Into::into),
            ..NeutronPort::default()
        }
    }

    #[test]
    fn the_vm_port_is_found_by_the_nodes_internal_ip() {
        let node = mk_node(
            "w1",
            &[
                ("Hostname", "w1"),
                ("ExternalIP", "172.24.4.9"),
                ("InternalIP", "10.0.0.4"),
            ],
        );
        let ports = vec![
            mk_port("other", "10.0.0.5", "compute:nova", None),
            mk_port("fip-like", "172.24.4.9", "compute:nova", None),
            mk_port("vm", "10.0.0.4", "compute:nova", Some("trunk-1")),
        ];
        let (port, trunk) = find_trunk_parent(&node, &ports).unwrap();
        assert_eq!((port.id.as_str(), trunk), ("vm", "trunk-1"));
    }

    #[test]
    fn a_pod_port_sharing_the_node_ip_is_never_the_parent() {
        let node = mk_node("w1", &[("InternalIP", "10.0.0.4")]);
        let ports = vec![
            mk_port("pod", "10.0.0.4", DEVICE_OWNER, None),
            mk_port("vm", "10.0.0.4", "compute:nova", None),
        ];
        assert_eq!(find_vm_port(&node, &ports).unwrap().id, "vm");
    }

    #[test]
    fn a_dual_stack_node_matches_on_its_second_address_too() {
        let node = mk_node("w1", &[("InternalIP", "10.0.0.4"), ("InternalIP", "fd00::4")]);
        let ports = vec![mk_port("vm", "fd00::4", "compute:nova", Some("t"))];
        assert_eq!(find_vm_port(&node, &ports).unwrap().id, "vm");
    }

    #[test]
    fn a_vm_port_without_trunk_is_no_trunk_on_node() {
        let node = mk_node("w1", &[("InternalIP", "10.0.0.4")]);
        let ports = vec![mk_port("vm", "10.0.0.4", "compute:nova", None)];
        assert_eq!(
            find_trunk_parent(&node, &ports).unwrap_err(),
            CoreError::NoTrunkOnNode {
                node: "w1".into(),
                port_id: "vm".into()
            }
        );
    }

    #[test]
    fn a_node_without_internal_ip_or_port_says_which() {
        assert_eq!(
            find_vm_port(&mk_node("w1", &[]), &[]).unwrap_err().reason(),
            "NoNodeAddress"
        );
        let node = mk_node("w1", &[("InternalIP", "10.0.0.4")]);
        assert_eq!(
            find_vm_port(&node, &[]).unwrap_err(),
            CoreError::NoParentPort {
                node: "w1".into(),
                ip: "10.0.0.4".into()
            }
        );
    }
}
