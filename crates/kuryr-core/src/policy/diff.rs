//! Desired vs observed Neutron state → the fewest calls that converge: one create per missing group,
//! one bulk rule create per group that gains rules (Neutron's bulk create takes rules of one group
//! only), one delete per surplus rule (there is no bulk delete), one update per port whose SG set
//! changes, one address-group add/remove per group whose addresses change.
//!
//! Calls are ordered make-before-break: creations and additions, then port updates, then removals.
//! In between, a port has at most the union of its old and new access, and a pod newly isolated
//! loses its permissive group in the same port update that gives it its policy groups.

use std::collections::{BTreeMap, BTreeSet};

use super::cidr::Family;
use super::compile::{CompiledPolicy, Direction, Remote, Rule};
use super::model::PodKey;
use super::Cidr;

/// An observed rule; `Remote::Group` / `Remote::AddressGroup` hold Neutron ids here.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CurrentRule {
    pub id: String,
    pub rule: Rule,
}

/// An observed kuryr-owned security group (found by kuryr's tag; matched to desired ones by name).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CurrentSg {
    pub id: String,
    pub name: String,
    pub rules: Vec<CurrentRule>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CurrentAddressGroup {
    pub id: String,
    pub name: String,
    pub addresses: BTreeSet<Cidr>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CurrentPort {
    pub id: String,
    /// Neutron ids of the SGs on the port.
    pub security_groups: BTreeSet<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CurrentState {
    pub security_groups: Vec<CurrentSg>,
    pub address_groups: Vec<CurrentAddressGroup>,
    /// Ports of pods that have one; pods without a port yet get their SGs when the port is created.
    pub ports: BTreeMap<PodKey, CurrentPort>,
}

/// A group in a plan: one that exists, or one the plan creates (resolved to its id once created).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum GroupRef {
    Existing(String),
    New(String),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewGroup {
    pub key: String,
    pub name: String,
    pub description: String,
}

/// Rules to create in one group, in one bulk call. Remotes name groups by key (as in the desired
/// state): the executor maps keys to ids.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RuleAdds {
    pub group: GroupRef,
    pub rules: Vec<Rule>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PortUpdate {
    pub pod: PodKey,
    pub port_id: String,
    /// The complete new SG list of the port.
    pub security_groups: Vec<GroupRef>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AddressChange {
    pub group: GroupRef,
    pub addresses: Vec<Cidr>,
}

/// Neutron calls, in execution order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Plan {
    /// Ids of existing security groups by key, to resolve keys in rules to add (not calls).
    pub sg_ids: BTreeMap<String, String>,
    /// Ids of existing address groups by key.
    pub ag_ids: BTreeMap<String, String>,
    /// Each created with its addresses (one call).
    pub create_address_groups: Vec<(NewGroup, Vec<Cidr>)>,
    pub create_security_groups: Vec<NewGroup>,
    pub add_rules: Vec<RuleAdds>,
    pub add_addresses: Vec<AddressChange>,
    pub port_updates: Vec<PortUpdate>,
    pub remove_addresses: Vec<AddressChange>,
    /// Ids of observed rules to delete.
    pub delete_rules: Vec<String>,
    /// Rules Neutron put into a group this plan creates that the desired state doesn't have (the
    /// executor finds their ids in the create response).
    pub delete_default_rules: Vec<(String, Rule)>,
    pub delete_security_groups: Vec<String>,
    pub delete_address_groups: Vec<String>,
}

impl Plan {
    /// Neutron API calls the plan takes.
    pub fn api_calls(&self) -> usize {
        self.create_address_groups.len()
            + self.create_security_groups.len()
            + self.add_rules.len()
            + self.add_addresses.len()
            + self.port_updates.len()
            + self.remove_addresses.len()
            + self.delete_rules.len()
            + self.delete_default_rules.len()
            + self.delete_security_groups.len()
            + self.delete_address_groups.len()
    }

    pub fn rules_created(&self) -> usize {
        self.add_rules.iter().map(|a| a.rules.len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.api_calls() == 0
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DiffOptions {
    /// Rules Neutron adds to every new SG (by default egress to anywhere, IPv4 and IPv6).
    pub new_sg_default_rules: Vec<Rule>,
}

impl Default for DiffOptions {
    fn default() -> Self {
        let any = |family| Rule {
            direction: Direction::Egress,
            family,
            protocol: None,
            ports: None,
            remote: Remote::Any,
        };
        Self {
            new_sg_default_rules: vec![any(Family::V4), any(Family::V6)],
        }
    }
}

/// Calls that turn `current` into `desired`.
pub fn diff(desired: &CompiledPolicy, current: &CurrentState, opts: &DiffOptions) -> Plan {
    let mut plan = Plan::default();
    // Observed objects are matched to desired ones by name (names are derived from keys).
    let sg_by_name: BTreeMap<&str, &CurrentSg> = current
        .security_groups
        .iter()
        .map(|sg| (sg.name.as_str(), sg))
        .collect();
    let ag_by_name: BTreeMap<&str, &CurrentAddressGroup> = current
        .address_groups
        .iter()
        .map(|ag| (ag.name.as_str(), ag))
        .collect();
    let mut key_of_id: BTreeMap<&str, &str> = BTreeMap::new();
    let mut sg_ref: BTreeMap<&str, GroupRef> = BTreeMap::new();
    for sg in &desired.security_groups {
        match sg_by_name.get(sg.name.as_str()) {
            Some(cur) => {
                key_of_id.insert(cur.id.as_str(), sg.key.as_str());
                plan.sg_ids.insert(sg.key.clone(), cur.id.clone());
                sg_ref.insert(sg.key.as_str(), GroupRef::Existing(cur.id.clone()));
            }
            None => {
                sg_ref.insert(sg.key.as_str(), GroupRef::New(sg.key.clone()));
            }
        }
    }
    let mut ag_key_of_id: BTreeMap<&str, &str> = BTreeMap::new();
    for ag in &desired.address_groups {
        if let Some(cur) = ag_by_name.get(ag.name.as_str()) {
            ag_key_of_id.insert(cur.id.as_str(), ag.key.as_str());
            plan.ag_ids.insert(ag.key.clone(), cur.id.clone());
        }
    }

    // Address groups first: SG rules may name them.
    for ag in &desired.address_groups {
        match ag_by_name.get(ag.name.as_str()) {
            None => plan.create_address_groups.push((
                NewGroup {
                    key: ag.key.clone(),
                    name: ag.name.clone(),
                    description: ag.description.clone(),
                },
                ag.addresses.iter().copied().collect(),
            )),
            Some(cur) => {
                let add: Vec<Cidr> = ag.addresses.difference(&cur.addresses).copied().collect();
                let remove: Vec<Cidr> = cur.addresses.difference(&ag.addresses).copied().collect();
                if !add.is_empty() {
                    plan.add_addresses.push(AddressChange {
                        group: GroupRef::Existing(cur.id.clone()),
                        addresses: add,
                    });
                }
                if !remove.is_empty() {
                    plan.remove_addresses.push(AddressChange {
                        group: GroupRef::Existing(cur.id.clone()),
                        addresses: remove,
                    });
                }
            }
        }
    }

    for sg in &desired.security_groups {
        match sg_by_name.get(sg.name.as_str()) {
            None => {
                plan.create_security_groups.push(NewGroup {
                    key: sg.key.clone(),
                    name: sg.name.clone(),
                    description: sg.description.clone(),
                });
                let defaults: BTreeSet<&Rule> = opts.new_sg_default_rules.iter().collect();
                let add: Vec<Rule> = sg
                    .rules
                    .iter()
                    .filter(|r| !defaults.contains(r))
                    .cloned()
                    .collect();
                if !add.is_empty() {
                    plan.add_rules.push(RuleAdds {
                        group: GroupRef::New(sg.key.clone()),
                        rules: add,
                    });
                }
                for d in &opts.new_sg_default_rules {
                    if !sg.rules.contains(d) {
                        plan.delete_default_rules.push((sg.key.clone(), d.clone()));
                    }
                }
            }
            Some(cur) => {
                // Observed rules in desired terms; a rule naming a group we don't know can't be desired.
                let mut seen: BTreeSet<Rule> = BTreeSet::new();
                for cr in &cur.rules {
                    match to_keys(&cr.rule, &key_of_id, &ag_key_of_id) {
                        Some(r) if sg.rules.contains(&r) && !seen.contains(&r) => {
                            seen.insert(r);
                        }
                        // Surplus, foreign or duplicate (upstream bug abc679c9 left duplicates).
                        _ => plan.delete_rules.push(cr.id.clone()),
                    }
                }
                let add: Vec<Rule> = sg.rules.iter().filter(|r| !seen.contains(*r)).cloned().collect();
                if !add.is_empty() {
                    plan.add_rules.push(RuleAdds {
                        group: GroupRef::Existing(cur.id.clone()),
                        rules: add,
                    });
                }
            }
        }
    }

    for (pod, keys) in &desired.memberships {
        let Some(port) = current.ports.get(pod) else {
            continue;
        };
        let observed: Option<BTreeSet<&str>> = port
            .security_groups
            .iter()
            .map(|id| key_of_id.get(id.as_str()).copied())
            .collect();
        let wanted: BTreeSet<&str> = keys.iter().map(String::as_str).collect();
        if observed.as_ref() != Some(&wanted) {
            plan.port_updates.push(PortUpdate {
                pod: pod.clone(),
                port_id: port.id.clone(),
                security_groups: keys
                    .iter()
                    .filter_map(|k| sg_ref.get(k.as_str()).cloned())
                    .collect(),
            });
        }
    }

    let desired_sg_names: BTreeSet<&str> = desired
        .security_groups
        .iter()
        .map(|sg| sg.name.as_str())
        .collect();
    for sg in &current.security_groups {
        if !desired_sg_names.contains(sg.name.as_str()) {
            // Deleting a group deletes its rules and rules naming it: no per-rule calls.
            plan.delete_security_groups.push(sg.id.clone());
        }
    }
    let desired_ag_names: BTreeSet<&str> = desired.address_groups.iter().map(|ag| ag.name.as_str()).collect();
    for ag in &current.address_groups {
        if !desired_ag_names.contains(ag.name.as_str()) {
            plan.delete_address_groups.push(ag.id.clone());
        }
    }
    plan
}

fn to_keys(r: &Rule, sg_keys: &BTreeMap<&str, &str>, ag_keys: &BTreeMap<&str, &str>) -> Option<Rule> {
    let remote = match &r.remote {
        Remote::Group(id) => Remote::Group((*sg_keys.get(id.as_str())?).to_owned()),
        Remote::AddressGroup(id) => Remote::AddressGroup((*ag_keys.get(id.as_str())?).to_owned()),
        other => other.clone(),
    };
    Some(Rule { remote, ..r.clone() })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::compile::{CompiledPolicy, DesiredSg};
    use crate::policy::Protocol;

    fn rule(port: u16, remote: Remote) -> Rule {
        Rule {
            direction: Direction::Ingress,
            family: Family::V4,
            protocol: Some(Protocol::Tcp),
            ports: Some((port, port)),
            remote,
        }
    }

    fn desired() -> CompiledPolicy {
        CompiledPolicy {
            security_groups: vec![
                DesiredSg {
                    key: "np/x/p".into(),
                    name: "kuryr-np-p".into(),
                    description: String::new(),
                    rules: [rule(80, Remote::Group("sel/a".into())), rule(81, Remote::Any)].into(),
                },
                DesiredSg {
                    key: "sel/a".into(),
                    name: "kuryr-sel-a".into(),
                    description: String::new(),
                    rules: BTreeSet::new(),
                },
            ],
            memberships: [(
                PodKey::new("x", "a"),
                ["np/x/p".to_string(), "sel/a".to_string()].into(),
            )]
            .into(),
            ..CompiledPolicy::default()
        }
    }

    #[test]
    fn from_nothing_groups_are_created_with_one_bulk_call_each_and_defaults_removed() {
        let current = CurrentState {
            ports: [(
                PodKey::new("x", "a"),
                CurrentPort {
                    id: "port-a".into(),
                    security_groups: BTreeSet::new(),
                },
            )]
            .into(),
            ..CurrentState::default()
        };
        let plan = diff(&desired(), &current, &DiffOptions::default());
        assert_eq!(plan.create_security_groups.len(), 2);
        assert_eq!(plan.add_rules.len(), 1);
        assert_eq!(plan.rules_created(), 2);
        assert_eq!(plan.delete_default_rules.len(), 4);
        assert_eq!(plan.port_updates.len(), 1);
        assert_eq!(plan.api_calls(), 2 + 1 + 4 + 1);
    }

    #[test]
    fn duplicate_foreign_and_surplus_rules_are_deleted_and_missing_ones_added() {
        let sg = |id: &str, name: &str, rules: Vec<CurrentRule>| CurrentSg {
            id: id.into(),
            name: name.into(),
            rules,
        };
        let cr = |id: &str, r: Rule| CurrentRule {
            id: id.into(),
            rule: r,
        };
        let current = CurrentState {
            security_groups: vec![
                sg(
                    "sg-p",
                    "kuryr-np-p",
                    vec![
                        cr("r1", rule(80, Remote::Group("sg-a".into()))),
                        cr("r2", rule(80, Remote::Group("sg-a".into()))),
                        cr("r3", rule(80, Remote::Group("sg-unknown".into()))),
                        cr("r4", rule(99, Remote::Any)),
                    ],
                ),
                sg("sg-a", "kuryr-sel-a", vec![]),
                sg("sg-old", "kuryr-np-old", vec![]),
            ],
            ports: [(
                PodKey::new("x", "a"),
                CurrentPort {
                    id: "port-a".into(),
                    security_groups: ["sg-p".to_string(), "sg-a".to_string()].into(),
                },
            )]
            .into(),
            ..CurrentState::default()
        };
        let plan = diff(&desired(), &current, &DiffOptions::default());
        assert_eq!(
            plan.delete_rules,
            vec!["r2".to_string(), "r3".to_string(), "r4".to_string()]
        );
        assert_eq!(plan.add_rules[0].rules, vec![rule(81, Remote::Any)]);
        assert_eq!(plan.delete_security_groups, vec!["sg-old".to_string()]);
        assert!(plan.port_updates.is_empty());
        assert!(plan.create_security_groups.is_empty());
    }

    #[test]
    fn a_port_carrying_an_unknown_group_is_updated_to_exactly_the_desired_set() {
        let current = CurrentState {
            security_groups: vec![
                CurrentSg {
                    id: "sg-p".into(),
                    name: "kuryr-np-p".into(),
                    rules: vec![],
                },
                CurrentSg {
                    id: "sg-a".into(),
                    name: "kuryr-sel-a".into(),
                    rules: vec![],
                },
            ],
            ports: [(
                PodKey::new("x", "a"),
                CurrentPort {
                    id: "port-a".into(),
                    security_groups: ["sg-p".to_string(), "sg-a".to_string(), "default".to_string()].into(),
                },
            )]
            .into(),
            ..CurrentState::default()
        };
        let plan = diff(&desired(), &current, &DiffOptions::default());
        assert_eq!(plan.port_updates.len(), 1);
        assert_eq!(
            plan.port_updates[0].security_groups,
            vec![
                GroupRef::Existing("sg-p".into()),
                GroupRef::Existing("sg-a".into())
            ]
        );
    }
}
