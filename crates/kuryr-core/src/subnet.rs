//! Which subnet a pod's port takes its IP from: one default subnet, or its namespace's (one network per
//! Namespace, from the KuryrNetwork statuses).

use std::collections::BTreeMap;

use crate::error::CoreError;
use crate::neutron::Subnet;
use crate::policy::{Cidr, Family};
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

/// The IP family of a subnet, from its CIDR (`None`: not a CIDR).
pub fn family_of(subnet: &Subnet) -> Option<Family> {
    subnet.cidr.parse::<Cidr>().ok().map(|c| c.family())
}

/// Dual-stack pod subnets: at most one of each IP family, all on one network (a port's fixed IPs are on its
/// network). The message names what is wrong with the configuration.
pub fn check_dual_stack(subnets: &[Subnet]) -> Result<(), String> {
    let [first, rest @ ..] = subnets else {
        return Err("no pod subnet".into());
    };
    let family =
        |s: &Subnet| family_of(s).ok_or_else(|| format!("subnet {} has no valid CIDR ({:?})", s.id, s.cidr));
    let f = family(first)?;
    for s in rest {
        if s.network_id != first.network_id {
            return Err(format!(
                "secondary pod subnet {} is on network {}, the pod subnet {} on {}: both must be on one network",
                s.id, s.network_id, first.id, first.network_id
            ));
        }
        if family(s)? == f {
            return Err(format!(
                "secondary pod subnet {} is {} like the pod subnet {}: dual-stack needs one of each family",
                s.id,
                f.ethertype(),
                first.id
            ));
        }
    }
    if rest.len() > 1 {
        return Err("at most one secondary pod subnet (one per IP family)".into());
    }
    Ok(())
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

    #[test]
    fn dual_stack_subnets_are_one_of_each_family_on_one_network() {
        let mk = |id: &str, net: &str, cidr: &str| Subnet {
            id: id.into(),
            network_id: net.into(),
            cidr: cidr.into(),
            ..Subnet::default()
        };
        let v4 = mk("a", "n", "10.0.0.0/24");
        let v6 = mk("b", "n", "fd00::/64");
        assert_eq!(check_dual_stack(std::slice::from_ref(&v4)), Ok(()));
        assert_eq!(check_dual_stack(&[v6.clone(), v4.clone()]), Ok(()));
        assert_eq!(check_dual_stack(&[v4.clone(), v6.clone()]), Ok(()));
        let e = check_dual_stack(&[v4.clone(), mk("c", "n", "10.1.0.0/24")]).unwrap_err();
        assert!(e.contains("one of each family"), "{e}");
        let e = check_dual_stack(&[v4.clone(), mk("d", "other", "fd00::/64")]).unwrap_err();
        assert!(e.contains("one network"), "{e}");
        let e = check_dual_stack(&[v4.clone(), mk("e", "n", "nonsense")]).unwrap_err();
        assert!(e.contains("no valid CIDR"), "{e}");
        assert!(check_dual_stack(&[]).is_err());
    }
}
