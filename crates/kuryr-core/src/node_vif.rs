//! Which VIF driver wires the pods of a node. A cluster mixing kinds of nodes (VMs booted on trunk ports
//! beside bare-metal nodes, or VMs whose kernel has no 802.1Q) labels the odd ones with
//! `kuryr.openstack.org/pod-vif` (or upstream's `pod_vif`); a node with neither uses the controller's
//! `--vif-driver`.

use std::collections::BTreeMap;

use kuryr_api::{labels, VifType};

/// A node label that names no driver kuryr-rs creates ports for.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("Node label {key}={value:?} names no VIF driver kuryr-rs wires pods with (neutron-vif, nested-vlan, nested-macvlan)")]
pub struct BadPodVif {
    pub key: &'static str,
    pub value: String,
}

/// The driver a node's labels ask for; `None` when they ask for none. Our own label wins over upstream's.
pub fn node_vif_type(node_labels: Option<&BTreeMap<String, String>>) -> Result<Option<VifType>, BadPodVif> {
    let Some(node_labels) = node_labels else {
        return Ok(None);
    };
    for key in [labels::POD_VIF, labels::UPSTREAM_POD_VIF] {
        if let Some(value) = node_labels.get(key) {
            return VifType::creatable(value).map(Some).ok_or_else(|| BadPodVif {
                key,
                value: value.clone(),
            });
        }
    }
    Ok(None)
}

/// Neutron's name of the node's host when its label gives one (see [`labels::NEUTRON_HOST`]).
pub fn neutron_host(node_labels: Option<&BTreeMap<String, String>>) -> Option<&str> {
    node_labels?
        .get(labels::NEUTRON_HOST)
        .map(String::as_str)
        .filter(|h| !h.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn a_node_without_the_label_uses_the_controllers_driver() {
        assert_eq!(node_vif_type(None), Ok(None));
        assert_eq!(
            node_vif_type(Some(&labels(&[("kubernetes.io/os", "linux")]))),
            Ok(None)
        );
    }

    #[test]
    fn the_label_names_the_driver_and_ours_wins_over_upstreams() {
        let ours = labels(&[(labels::POD_VIF, "nested-vlan")]);
        assert_eq!(node_vif_type(Some(&ours)), Ok(Some(VifType::NestedVlan)));
        let upstream = labels(&[(labels::UPSTREAM_POD_VIF, "neutron-vif")]);
        assert_eq!(node_vif_type(Some(&upstream)), Ok(Some(VifType::NeutronVif)));
        let both = labels(&[
            (labels::POD_VIF, "nested-macvlan"),
            (labels::UPSTREAM_POD_VIF, "nested-vlan"),
        ]);
        assert_eq!(node_vif_type(Some(&both)), Ok(Some(VifType::NestedMacvlan)));
    }

    #[test]
    fn a_label_naming_no_driver_we_create_is_an_error_that_names_it() {
        for bad in ["nested-dpdk", "vlan", ""] {
            let err = node_vif_type(Some(&labels(&[(labels::POD_VIF, bad)]))).unwrap_err();
            assert_eq!(err.key, labels::POD_VIF);
            assert_eq!(err.value, bad);
            assert!(err.to_string().contains("kuryr.openstack.org/pod-vif"), "{err}");
        }
    }
}
