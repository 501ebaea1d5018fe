//! Which subnet a pod's port takes its IP from: one default subnet, or its namespace's (one network per
//! Namespace, from the KuryrNetwork statuses).

use std::collections::BTreeMap;

use crate::error::CoreError;
use crate::neutron::Subnet;
use crate::vif::PodFacts;

/// Picks a pod's subnet among the subnets the controller knows.
pub trait SubnetSelector {
    fn select<'a>(&self, pod: &PodFacts, known: &'a [Subnet]) -> Result<&'a Subnet, CoreError>;
}

/// Every pod on one configured subnet (upstream's `pod_subnets_driver = default`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DefaultSubnet {
    pub subnet_id: String,
}

impl SubnetSelector for DefaultSubnet {
    fn select<'a>(&self, pod: &PodFacts, known: &'a [Subnet]) -> Result<&'a Subnet, CoreError> {
        known
            .iter()
            .find(|s| s.id == self.subnet_id)
            .ok_or_else(|| CoreError::NoSubnet {
                namespace: pod.namespace.clone(),
                name: pod.name.clone(),
                reason: format!("default pod subnet {} not found", self.subnet_id),
            })
    }
}

/// Each pod on its namespace's subnet (upstream's `namespace` subnet driver): namespace → subnet id, as
/// recorded in the KuryrNetworks' status.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NamespaceSubnets {
    pub by_namespace: BTreeMap<String, String>,
}

impl SubnetSelector for NamespaceSubnets {
    fn select<'a>(&self, pod: &PodFacts, known: &'a [Subnet]) -> Result<&'a Subnet, CoreError> {
        let no_subnet = |reason: String| CoreError::NoSubnet {
            namespace: pod.namespace.clone(),
            name: pod.name.clone(),
            reason,
        };
        let id = self
            .by_namespace
            .get(&pod.namespace)
            .ok_or_else(|| no_subnet(format!("namespace {} has no network yet", pod.namespace)))?;
        known
            .iter()
            .find(|s| &s.id == id)
            .ok_or_else(|| no_subnet(format!("subnet {id} of namespace {} not found", pod.namespace)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pod_lands_on_its_namespace_subnet_and_never_on_another() {
        let known = vec![
            Subnet {
                id: "sub-a".into(),
                ..Subnet::default()
            },
            Subnet {
                id: "sub-b".into(),
                ..Subnet::default()
            },
        ];
        let sel = NamespaceSubnets {
            by_namespace: [
                ("a".to_string(), "sub-a".to_string()),
                ("b".into(), "sub-b".into()),
            ]
            .into(),
        };
        let pod = |ns: &str| PodFacts {
            namespace: ns.into(),
            name: "web".into(),
            ..PodFacts::default()
        };
        assert_eq!(sel.select(&pod("b"), &known).unwrap().id, "sub-b");
        assert_eq!(sel.select(&pod("a"), &known).unwrap().id, "sub-a");
        let err = sel.select(&pod("c"), &known).unwrap_err();
        assert_eq!(err.reason(), "NoSubnet");
        assert!(err.to_string().contains("c/web"), "{err}");
        // Known namespace whose subnet is not among the known ones: an error, not the default.
        assert!(sel.select(&pod("a"), &known[1..]).is_err());
    }

    #[test]
    fn the_default_subnet_is_picked_for_every_pod() {
        let known = vec![
            Subnet {
                id: "other".into(),
                ..Subnet::default()
            },
            Subnet {
                id: "pods".into(),
                ..Subnet::default()
            },
        ];
        let sel = DefaultSubnet {
            subnet_id: "pods".into(),
        };
        assert_eq!(sel.select(&PodFacts::default(), &known).unwrap().id, "pods");
    }

    #[test]
    fn a_missing_default_subnet_is_a_no_subnet_error() {
        let sel = DefaultSubnet {
            subnet_id: "pods".into(),
        };
        let pod = PodFacts {
            namespace: "ns".into(),
            name: "web".into(),
            ..PodFacts::default()
        };
        let err = sel.select(&pod, &[]).unwrap_err();
        assert_eq!(err.reason(), "NoSubnet");
        assert!(err.to_string().contains("ns/web"));
    }
}
