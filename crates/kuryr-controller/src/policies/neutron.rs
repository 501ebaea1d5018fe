//! Observed state (kuryr-tagged SGs with their rules, the pod ports' SG lists: two list calls) and running
//! a [`Plan`] in its make-before-break order. A plan is never resumed: after a failure the next sync
//! observes again and diffs afresh (the diff is idempotent).

use std::collections::{BTreeMap, BTreeSet};

use kuryr_core::policy::compile::{DesiredSg, Remote};
use kuryr_core::policy::diff::GroupRef;
use kuryr_core::policy::{
    Cidr, CompiledPolicy, CurrentPort, CurrentRule, CurrentSg, CurrentState, Direction, Family, Plan, PodKey,
    Protocol, Rule,
};
use kuryr_core::OwnerKind;
use kuryr_openstack::neutron::security_groups::{self, CreateRule, CreateSecurityGroup, SecurityGroupRule};
use kuryr_openstack::neutron::{ports, Filter};
use kuryr_openstack::{ownership, Cloud, Owner};
use tracing::{info, warn};

use crate::errors::{Error, Result};

/// Who owns what: the cluster id and project the groups are made in (a namespace's own project for the
/// groups of that namespace, `namespace_projects`).
#[derive(Clone, Debug)]
pub struct Target<'a> {
    pub cloud: &'a Cloud,
    pub cluster_id: &'a str,
    pub project_id: &'a str,
    /// Namespaces whose project is not the controller's.
    pub namespace_projects: &'a BTreeMap<String, String>,
}

impl Target<'_> {
    /// The project a group with `key` is made in.
    fn project_of(&self, key: &str) -> &str {
        DesiredSg::namespace_of_key(key)
            .and_then(|ns| self.namespace_projects.get(ns))
            .map_or(self.project_id, String::as_str)
    }
}

fn kind_filter(cluster_id: &str) -> Vec<String> {
    let mut f = Owner::cluster_filter(cluster_id);
    f.push(format!("{}={}", ownership::KIND, OwnerKind::NetworkPolicySg));
    f
}

/// A Neutron rule in the compiler's terms (`Remote::Group` holding the Neutron id). Rules the compiler
/// never writes (ICMP, other protocols, address groups) come back with an unmatchable remote, so that
/// the diff deletes them.
pub fn rule_of(r: &SecurityGroupRule) -> Rule {
    let foreign = Remote::Group(format!("foreign-rule:{}", r.id));
    let protocol = match r.protocol.as_deref() {
        None => None,
        Some("tcp" | "6") => Some(Protocol::Tcp),
        Some("udp" | "17") => Some(Protocol::Udp),
        Some("sctp" | "132") => Some(Protocol::Sctp),
        Some(_) => None,
    };
    let known_proto = r.protocol.is_none() || protocol.is_some();
    let remote = match (&r.remote_ip_prefix, &r.remote_group_id) {
        (Some(p), None) => match p.parse::<Cidr>() {
            Ok(c) if c.prefix_len() == 0 => Remote::Any,
            Ok(c) => Remote::Prefix(c),
            Err(_) => foreign.clone(),
        },
        (None, Some(g)) => Remote::Group(g.clone()),
        (None, None) => Remote::Any,
        _ => foreign.clone(),
    };
    let ports = match (r.port_range_min, r.port_range_max) {
        (Some(a), Some(b)) => u16::try_from(a).ok().zip(u16::try_from(b).ok()),
        _ => None,
    };
    Rule {
        direction: if r.direction == "egress" {
            Direction::Egress
        } else {
            Direction::Ingress
        },
        family: if r.ethertype == "IPv6" {
            Family::V6
        } else {
            Family::V4
        },
        protocol,
        ports,
        remote: if known_proto { remote } else { foreign },
    }
}

/// The request creating `rule` in group `sg_id`, remote group keys resolved by `ids`.
fn create_rule(sg_id: &str, rule: &Rule, ids: &BTreeMap<String, String>) -> Result<CreateRule> {
    let (remote_ip_prefix, remote_group_id) = match &rule.remote {
        Remote::Any => (None, None),
        Remote::Prefix(c) => (Some(c.to_string()), None),
        Remote::Group(k) => (None, Some(ids.get(k).cloned().ok_or_else(|| unresolved(k))?)),
        Remote::AddressGroup(_) => {
            return Err(Error::Unsupported("address-group peers (nested-macvlan)".into()))
        }
    };
    Ok(CreateRule {
        security_group_id: sg_id.to_owned(),
        direction: match rule.direction {
            Direction::Ingress => "ingress",
            Direction::Egress => "egress",
        }
        .to_owned(),
        ethertype: match rule.family {
            Family::V4 => "IPv4",
            Family::V6 => "IPv6",
        }
        .to_owned(),
        protocol: rule.protocol.map(|p| p.neutron().to_owned()),
        port_range_min: rule.ports.map(|(a, _)| u32::from(a)),
        port_range_max: rule.ports.map(|(_, b)| u32::from(b)),
        remote_ip_prefix,
        remote_group_id,
        ..CreateRule::default()
    })
}

fn unresolved(key: &str) -> Error {
    Error::Unexpected(format!("security group {key} has no id (plan out of order)"))
}

/// The kuryr-owned SGs of the cluster and the SG lists of `pod_ports` (pod → port id).
pub async fn observe(t: &Target<'_>, pod_ports: &BTreeMap<PodKey, String>) -> Result<CurrentState> {
    let sgs = security_groups::list(t.cloud, Filter::new().tags(&kind_filter(t.cluster_id))).await?;
    let security_groups = sgs
        .into_iter()
        .map(|sg| CurrentSg {
            rules: sg
                .security_group_rules
                .iter()
                .map(|r| CurrentRule {
                    id: r.id.clone(),
                    rule: rule_of(r),
                })
                .collect(),
            id: sg.id,
            name: sg.name,
        })
        .collect();
    let mut by_id: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    if !pod_ports.is_empty() {
        // Pod ports carry the cluster tag: one list answers for all of them.
        let listed = ports::list(t.cloud, Filter::new().tags(&Owner::cluster_filter(t.cluster_id))).await?;
        for p in listed {
            by_id.insert(p.id, p.security_groups.into_iter().collect());
        }
    }
    let mut ports_state = BTreeMap::new();
    for (pod, port_id) in pod_ports {
        let groups = match by_id.remove(port_id) {
            Some(g) => g,
            // Not tagged (made by an older release?): read it alone. Gone: nothing to update.
            None => match ports::get(t.cloud, port_id).await {
                Ok(p) => p.security_groups.into_iter().collect(),
                Err(e) if e.is_not_found() => continue,
                Err(e) => return Err(e.into()),
            },
        };
        ports_state.insert(
            pod.clone(),
            CurrentPort {
                id: port_id.clone(),
                security_groups: groups,
            },
        );
    }
    Ok(CurrentState {
        security_groups,
        address_groups: Vec::new(),
        ports: ports_state,
    })
}

/// What running a plan did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Applied {
    /// Every SG the compiled state names → its Neutron id.
    pub sg_ids: BTreeMap<String, String>,
    pub groups_created: usize,
    pub rules_created: usize,
    pub rules_deleted: usize,
    pub ports_updated: usize,
    pub groups_deleted: usize,
    /// Groups of gone policies still on a port that is not a pool port: left for a later sync.
    pub groups_in_use: usize,
}

/// Runs `plan` (made from `desired`) in order. 404 on a delete is done; any other failure stops the run.
pub async fn execute(t: &Target<'_>, desired: &CompiledPolicy, plan: &Plan) -> Result<Applied> {
    if !plan.create_address_groups.is_empty() || !plan.add_addresses.is_empty() {
        return Err(Error::Unsupported("address-group peers (nested-macvlan)".into()));
    }
    let mut out = Applied {
        sg_ids: plan.sg_ids.clone(),
        ..Applied::default()
    };
    let mut created_rules: BTreeMap<String, Vec<SecurityGroupRule>> = BTreeMap::new();
    for g in &plan.create_security_groups {
        let req = CreateSecurityGroup {
            name: g.name.clone(),
            description: Some(g.description.clone()),
            project_id: Some(t.project_of(&g.key).to_owned()),
            ..CreateSecurityGroup::default()
        };
        let tags = Owner::new(t.cluster_id, OwnerKind::NetworkPolicySg.as_str(), &g.name).tags()?;
        let sg = security_groups::create(t.cloud, &req, &tags).await?;
        out.sg_ids.insert(g.key.clone(), sg.id.clone());
        created_rules.insert(g.key.clone(), sg.security_group_rules);
        out.groups_created += 1;
    }
    let resolve = |r: &GroupRef, ids: &BTreeMap<String, String>| -> Result<String> {
        match r {
            GroupRef::Existing(id) => Ok(id.clone()),
            GroupRef::New(key) => ids.get(key).cloned().ok_or_else(|| unresolved(key)),
        }
    };
    for adds in &plan.add_rules {
        let sg_id = resolve(&adds.group, &out.sg_ids)?;
        let reqs = adds
            .rules
            .iter()
            .map(|r| create_rule(&sg_id, r, &out.sg_ids))
            .collect::<Result<Vec<_>>>()?;
        security_groups::bulk_create_rules(t.cloud, &reqs).await?;
        out.rules_created += reqs.len();
    }
    for pu in &plan.port_updates {
        let groups = pu
            .security_groups
            .iter()
            .map(|g| resolve(g, &out.sg_ids))
            .collect::<Result<Vec<_>>>()?;
        match ports::set_security_groups(t.cloud, &pu.port_id, &groups).await {
            Ok(_) => out.ports_updated += 1,
            // The pod's port went away meanwhile: nothing to protect.
            Err(e) if e.is_not_found() => {}
            Err(e) => return Err(e.into()),
        }
    }
    for id in &plan.delete_rules {
        security_groups::delete_rule(t.cloud, id).await?;
        out.rules_deleted += 1;
    }
    for (key, rule) in &plan.delete_default_rules {
        let made = created_rules.get(key).map(Vec::as_slice).unwrap_or_default();
        if let Some(r) = made.iter().find(|r| rule_of(r) == *rule) {
            security_groups::delete_rule(t.cloud, &r.id).await?;
            out.rules_deleted += 1;
        }
    }
    for id in &plan.delete_security_groups {
        if delete_group(t, id).await? {
            out.groups_deleted += 1;
        } else {
            out.groups_in_use += 1;
        }
    }
    // Ids of groups that were neither observed nor created can't exist; check the desired set is complete.
    if let Some(sg) = desired
        .security_groups
        .iter()
        .find(|sg| !out.sg_ids.contains_key(&sg.key))
    {
        return Err(unresolved(&sg.key));
    }
    if out.groups_created + out.rules_created + out.rules_deleted + out.ports_updated + out.groups_deleted > 0
    {
        info!(
            created = out.groups_created,
            rules_created = out.rules_created,
            rules_deleted = out.rules_deleted,
            ports = out.ports_updated,
            deleted = out.groups_deleted,
            "security groups converged"
        );
    }
    Ok(out)
}

/// Deletes group `id`; whether it went. A group still on a port (409) is first taken off this cluster's
/// pool ports: a port given back to its pool while a sync set its pod's groups keeps them. One still on
/// another port is left for the next sync with a warning: the other policies' work must not wait for it
/// (a failed sync is retried with backoff, and every policy with it).
async fn delete_group(t: &Target<'_>, id: &str) -> Result<bool> {
    match security_groups::delete(t.cloud, id).await {
        Ok(_) => return Ok(true),
        Err(e) if e.is_not_found() => return Ok(true),
        Err(e) if !e.is_conflict() => return Err(e.into()),
        Err(_) => {}
    }
    let pool = Owner::new(t.cluster_id, OwnerKind::Pool.as_str(), t.cluster_id).tags()?;
    let holders = ports::list(t.cloud, Filter::new().eq("security_groups", id).tags(&pool)).await?;
    for port in &holders {
        let keep: Vec<String> = port
            .security_groups
            .iter()
            .filter(|g| *g != id)
            .cloned()
            .collect();
        match ports::set_security_groups(t.cloud, &port.id, &keep).await {
            Ok(_) => info!(group = id, port = port.id, "security group taken off a pool port"),
            Err(e) if e.is_not_found() => {}
            Err(e) => return Err(e.into()),
        }
    }
    match security_groups::delete(t.cloud, id).await {
        Ok(_) => Ok(true),
        Err(e) if e.is_not_found() => Ok(true),
        Err(e) if e.is_conflict() => {
            warn!(
                group = id,
                "security group of a gone policy still on a port that is not a pool port: left for the next sync"
            );
            Ok(false)
        }
        Err(e) => Err(e.into()),
    }
}

/// Deletes every SG this cluster's policy controller made (uninstall, tests): ports first lose them.
pub async fn delete_all(t: &Target<'_>) -> Result<usize> {
    let sgs = security_groups::list(t.cloud, Filter::new().tags(&kind_filter(t.cluster_id))).await?;
    for sg in &sgs {
        security_groups::delete(t.cloud, &sg.id).await?;
    }
    Ok(sgs.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api(
        direction: &str,
        proto: Option<&str>,
        prefix: Option<&str>,
        group: Option<&str>,
    ) -> SecurityGroupRule {
        SecurityGroupRule {
            id: "r1".into(),
            direction: direction.into(),
            ethertype: "IPv4".into(),
            protocol: proto.map(str::to_owned),
            port_range_min: proto.map(|_| 80),
            port_range_max: proto.map(|_| 81),
            remote_ip_prefix: prefix.map(str::to_owned),
            remote_group_id: group.map(str::to_owned),
            ..SecurityGroupRule::default()
        }
    }

    #[test]
    fn neutron_rules_map_to_compiler_rules_and_back() {
        let ids: BTreeMap<String, String> = [("sel/a".to_string(), "sg-a".to_string())].into();
        for rule in [
            Rule {
                direction: Direction::Ingress,
                family: Family::V4,
                protocol: Some(Protocol::Tcp),
                ports: Some((80, 81)),
                remote: Remote::Group("sel/a".into()),
            },
            Rule {
                direction: Direction::Egress,
                family: Family::V6,
                protocol: None,
                ports: None,
                remote: Remote::Any,
            },
            Rule {
                direction: Direction::Ingress,
                family: Family::V4,
                protocol: Some(Protocol::Udp),
                ports: None,
                remote: Remote::Prefix("10.1.0.0/16".parse().unwrap()),
            },
        ] {
            let req = create_rule("sg", &rule, &ids).unwrap();
            let back = SecurityGroupRule {
                direction: req.direction,
                ethertype: req.ethertype,
                protocol: req.protocol,
                port_range_min: req.port_range_min,
                port_range_max: req.port_range_max,
                remote_ip_prefix: req.remote_ip_prefix,
                remote_group_id: req.remote_group_id.map(|_| "sel/a".to_string()),
                ..SecurityGroupRule::default()
            };
            assert_eq!(rule_of(&back), rule);
        }
    }

    #[test]
    fn rules_the_compiler_never_writes_cannot_match_a_desired_rule() {
        let icmp = rule_of(&api("ingress", Some("icmp"), None, None));
        assert!(matches!(icmp.remote, Remote::Group(ref g) if g.starts_with("foreign-rule:")));
        let any = rule_of(&api("egress", None, Some("0.0.0.0/0"), None));
        assert_eq!(any.remote, Remote::Any);
        assert!(create_rule(
            "sg",
            &Rule {
                remote: Remote::Group("missing".into()),
                ..any
            },
            &BTreeMap::new()
        )
        .is_err());
    }
}
