//! Which subnet a pod's port takes its IP from. Only the default subnet for now; a namespace-subnet selector
//! (one network per Namespace, from its KuryrNetwork status) comes with the Namespace work.

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

#[cfg(test)]
mod tests {
    use super::*;

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
