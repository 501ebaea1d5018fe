//! The compiler: cluster state + NetworkPolicies → desired security groups, address groups and
//! per-pod SG sets. Pure and deterministic (sorted maps everywhere), so the same input always yields
//! the same names, rules and order.

use std::collections::{BTreeMap, BTreeSet};

use kuryr_api::policy::{EtherType, SecurityGroupRule, SgRuleDirection};

use super::cidr::{Cidr, Family};
use super::k8s_eval::rule_matches;
use super::model::{
    Cluster, Endpoint, NamespaceMatch, Peer, Pod, PodKey, Policy, PolicyKey, PortSpec, Protocol,
};
use super::selectors::LabelSelector;
use super::{stable_hash, CompileOptions, PeerMode, PolicyError};

/// Key of the permissive ingress SG (pods no policy isolates for ingress).
pub const ALLOW_INGRESS_KEY: &str = "allow/ingress";
/// Key of the permissive egress SG.
pub const ALLOW_EGRESS_KEY: &str = "allow/egress";
/// Key of the SG letting worker nodes reach ingress-isolated pods.
pub const ALLOW_FROM_NODES_KEY: &str = "allow/from-nodes";

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Direction {
    Ingress,
    Egress,
}

/// What a rule matches on the far side of the connection.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Remote {
    Any,
    Prefix(Cidr),
    /// `remote_group_id`: in desired state the group's key, in observed state its Neutron id.
    Group(String),
    /// `remote_address_group_id`: key (desired) or id (observed), as for `Group`.
    AddressGroup(String),
}

/// One Neutron security group rule.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Rule {
    pub direction: Direction,
    pub family: Family,
    /// `None`: any protocol.
    pub protocol: Option<Protocol>,
    /// Inclusive port range; `None`: every port.
    pub ports: Option<(u16, u16)>,
    pub remote: Remote,
}

impl Rule {
    /// The rule in Neutron API form (as kept in KuryrNetworkPolicy), with group keys mapped to ids by
    /// `id_of`. `None` when a group has no id yet or the rule names an address group, which that
    /// type can't carry: dropping the remote would turn the rule into "from anywhere".
    pub fn to_api(&self, id_of: impl Fn(&str) -> Option<String>) -> Option<SecurityGroupRule> {
        let (remote_ip_prefix, remote_group_id) = match &self.remote {
            Remote::Any => (None, None),
            Remote::Prefix(c) => (Some(c.to_string()), None),
            Remote::Group(k) => (None, Some(id_of(k)?)),
            Remote::AddressGroup(_) => return None,
        };
        Some(SecurityGroupRule {
            direction: match self.direction {
                Direction::Ingress => SgRuleDirection::Ingress,
                Direction::Egress => SgRuleDirection::Egress,
            },
            ethertype: match self.family {
                Family::V4 => EtherType::IPv4,
                Family::V6 => EtherType::IPv6,
            },
            protocol: self.protocol.map(|p| p.neutron().to_owned()),
            port_range_min: self.ports.map(|(a, _)| i32::from(a)),
            port_range_max: self.ports.map(|(_, b)| i32::from(b)),
            remote_ip_prefix,
            remote_group_id,
            ..SecurityGroupRule::default()
        })
    }
}

/// A security group kuryr wants to exist, with exactly these rules.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DesiredSg {
    /// Stable identity inside kuryr (e.g. `np/<ns>/<name>`, `sel/<ns match>/<pod selector>`).
    pub key: String,
    /// Neutron name, derived from the key (unique per key; how observed groups are matched).
    pub name: String,
    pub description: String,
    pub rules: BTreeSet<Rule>,
}

impl DesiredSg {
    /// The namespace a group with `key` belongs to (a NetworkPolicy's and its rule groups, namespace
    /// isolation's): it is made in that namespace's project. `None` for selector groups, which may hold
    /// pods of several namespaces: those stay in the controller's project.
    pub fn namespace_of_key(key: &str) -> Option<&str> {
        if let Some(rest) = key.strip_prefix("np/") {
            return rest.split('/').next().filter(|ns| !ns.is_empty());
        }
        key.strip_prefix("nsiso/").filter(|ns| !ns.is_empty())
    }
}

/// A Neutron address group holding the IPs of the pods one selector matches.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DesiredAddressGroup {
    pub key: String,
    pub name: String,
    pub description: String,
    pub addresses: BTreeSet<Cidr>,
}

/// A policy compiled fail-closed: its pods are isolated as it declares, with nothing allowed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RejectedPolicy {
    pub policy: PolicyKey,
    pub error: PolicyError,
}

/// Where the compiled state allows less than Kubernetes would (never more): surfaced as warnings.
/// Neutron checks the source's egress against the VIP before the load balancer picks a backend, so a
/// VIP port can only be open to all of its backends or to none.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Narrowing {
    /// The policy's egress allows some but not all backends of a Service port: the VIP stays closed.
    ServicePartiallyAllowed {
        policy: PolicyKey,
        service: PodKey,
        port: u16,
    },
    /// A selected pod backs the Service and the policy allows none of the other backends: the pod
    /// can't reach itself through the VIP (hairpin), which Kubernetes would allow.
    HairpinBlocked {
        policy: PolicyKey,
        service: PodKey,
        port: u16,
    },
}

impl Narrowing {
    /// (policy, Service, Service port) the narrowing is about.
    pub fn subject(&self) -> (&PolicyKey, &PodKey, u16) {
        match self {
            Narrowing::ServicePartiallyAllowed {
                policy,
                service,
                port,
            }
            | Narrowing::HairpinBlocked {
                policy,
                service,
                port,
            } => (policy, service, *port),
        }
    }
}

/// The desired Neutron state for a whole cluster.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CompiledPolicy {
    /// Sorted by key.
    pub security_groups: Vec<DesiredSg>,
    /// Sorted by key; empty unless [`PeerMode::AddressGroups`].
    pub address_groups: Vec<DesiredAddressGroup>,
    /// Every pod → the keys of the SGs its port must carry (exactly these).
    pub memberships: BTreeMap<PodKey, BTreeSet<String>>,
    pub rejected: Vec<RejectedPolicy>,
    pub narrowings: Vec<Narrowing>,
}

impl CompiledPolicy {
    pub fn rule_count(&self) -> usize {
        self.security_groups.iter().map(|sg| sg.rules.len()).sum()
    }

    pub fn security_group(&self, key: &str) -> Option<&DesiredSg> {
        self.security_groups
            .binary_search_by(|sg| sg.key.as_str().cmp(key))
            .ok()
            .map(|i| &self.security_groups[i])
    }

    /// The SG set for a port several pods' traffic is enforced on (nested-macvlan: the VM's port,
    /// which carries the pods' IPs as allowed-address pairs). Exact only when every one of those
    /// pods needs the same set; otherwise one pod would get another's access, so it is an error.
    pub fn shared_port_security_groups<'a>(
        &self,
        pods: impl IntoIterator<Item = &'a PodKey>,
    ) -> Result<BTreeSet<String>, PolicyError> {
        let mut shared: Option<(&PodKey, &BTreeSet<String>)> = None;
        for pod in pods {
            let Some(set) = self.memberships.get(pod) else {
                continue;
            };
            match shared {
                None => shared = Some((pod, set)),
                Some((first, s)) if s != set => {
                    return Err(PolicyError::SharedPortConflict {
                        first: first.to_string(),
                        second: pod.to_string(),
                    })
                }
                Some(_) => {}
            }
        }
        Ok(shared.map(|(_, s)| s.clone()).unwrap_or_default())
    }

    pub fn address_group(&self, key: &str) -> Option<&DesiredAddressGroup> {
        self.address_groups
            .binary_search_by(|ag| ag.key.as_str().cmp(key))
            .ok()
            .map(|i| &self.address_groups[i])
    }
}

/// Peer selector of a selector group; `port` narrows it to pods whose named port resolves to a number.
#[derive(Clone, Debug, PartialEq, Eq)]
struct GroupDef {
    namespaces: NamespaceMatch,
    pods: LabelSelector,
    port: Option<(Protocol, String, u16)>,
}

impl GroupDef {
    fn matches(&self, cluster: &Cluster, pod: &Pod) -> bool {
        self.namespaces
            .matches(&pod.namespace, &cluster.namespace_labels(&pod.namespace))
            && self.pods.matches(&pod.labels)
            && self
                .port
                .as_ref()
                .is_none_or(|(proto, name, n)| pod.resolve_port(name, *proto) == Some(*n))
    }
}

/// Compiles `policies` for `cluster`. Policies that can't be expressed exactly are compiled
/// fail-closed and listed in `rejected`; exceeding the quota fails the whole compilation (the
/// controller then keeps the current state and reports).
pub fn compile(
    cluster: &Cluster,
    policies: &[Policy],
    opts: &CompileOptions,
) -> Result<CompiledPolicy, PolicyError> {
    if opts.namespace_isolation && opts.pod_cidrs.is_empty() {
        return Err(PolicyError::InvalidOptions(
            "namespace isolation needs the pod CIDRs".into(),
        ));
    }
    // Egress to "anywhere" and ipBlocks must leave VIPs out (see `Builder::prefixes`): a VIP outside
    // the configured Service ranges would be opened on every port, whatever its backends allow.
    for svc in &cluster.services {
        for vip in svc.vips() {
            if !opts.service_cidrs.iter().any(|c| c.contains(&vip)) {
                return Err(PolicyError::InvalidOptions(format!(
                    "Service {} has VIP {vip} outside the configured Service CIDRs",
                    svc.key()
                )));
            }
        }
    }
    let mut b = Builder::new(cluster, opts);
    for p in policies {
        match check_expressible(p) {
            Ok(()) => b.policy(p),
            Err(error) => {
                b.rejected.push(RejectedPolicy {
                    policy: p.key(),
                    error,
                });
                b.policy(&Policy {
                    ingress: Vec::new(),
                    egress: Vec::new(),
                    ..p.clone()
                });
            }
        }
    }
    b.permissive();
    b.finish()
}

/// Rejects what would need per-pod rules or open more than written.
fn check_expressible(p: &Policy) -> Result<(), PolicyError> {
    if !p.isolates_egress {
        return Ok(());
    }
    for rule in &p.egress {
        let named = rule.ports.iter().find_map(|pm| match &pm.port {
            PortSpec::Named(n) => Some(n),
            _ => None,
        });
        let block = rule.peers.iter().any(|peer| matches!(peer, Peer::IpBlock { .. }));
        if let (Some(name), true) = (named, block) {
            return Err(PolicyError::UnsupportedPeer(format!(
                "policy {}: egress to an ipBlock on named port {name:?} (the number depends on the destination pod)",
                p.key()
            )));
        }
    }
    Ok(())
}

type PortSet = (Option<Protocol>, Option<(u16, u16)>);

/// Splits a rule's ports into what Neutron takes literally and the named ones to resolve.
fn split_ports(ports: &[super::model::PortMatch]) -> (Vec<PortSet>, Vec<(Protocol, String)>) {
    if ports.is_empty() {
        return (vec![(None, None)], Vec::new());
    }
    let mut fixed = Vec::new();
    let mut named = Vec::new();
    for pm in ports {
        match &pm.port {
            PortSpec::All => fixed.push((Some(pm.protocol), None)),
            PortSpec::Range(a, b) => fixed.push((Some(pm.protocol), Some((*a, *b)))),
            PortSpec::Named(n) => named.push((pm.protocol, n.clone())),
        }
    }
    (fixed, named)
}

/// A Neutron name for a key: readable part (sanitised, bounded) plus a hash of the key so that
/// different keys never share a name.
fn object_name(kind: &str, readable: &str, key: &str) -> String {
    let readable: String = readable
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .take(160)
        .collect();
    let hash = stable_hash(key) & 0xffff_ffff_ffff;
    if readable.is_empty() {
        format!("kuryr-{kind}-{hash:012x}")
    } else {
        format!("kuryr-{kind}-{readable}-{hash:012x}")
    }
}

struct Builder<'a> {
    cluster: &'a Cluster,
    opts: &'a CompileOptions,
    sgs: BTreeMap<String, DesiredSg>,
    groups: BTreeMap<String, GroupDef>,
    memberships: BTreeMap<PodKey, BTreeSet<String>>,
    ingress_isolated: BTreeSet<PodKey>,
    egress_isolated: BTreeSet<PodKey>,
    rejected: Vec<RejectedPolicy>,
    narrowings: Vec<Narrowing>,
}

impl<'a> Builder<'a> {
    fn new(cluster: &'a Cluster, opts: &'a CompileOptions) -> Self {
        let memberships = cluster.pods.iter().map(|p| (p.key(), BTreeSet::new())).collect();
        Self {
            cluster,
            opts,
            sgs: BTreeMap::new(),
            groups: BTreeMap::new(),
            memberships,
            ingress_isolated: BTreeSet::new(),
            egress_isolated: BTreeSet::new(),
            rejected: Vec::new(),
            narrowings: Vec::new(),
        }
    }

    fn sg(&mut self, key: &str, name: String, description: String) {
        self.sgs.entry(key.to_owned()).or_insert_with(|| DesiredSg {
            key: key.to_owned(),
            name,
            description,
            rules: BTreeSet::new(),
        });
    }

    fn attach(&mut self, pod: PodKey, key: &str) {
        self.memberships.entry(pod).or_default().insert(key.to_owned());
    }

    fn add_rules(&mut self, key: &str, direction: Direction, remotes: &[Remote], ports: &[PortSet]) {
        let families = &self.opts.families;
        let Some(sg) = self.sgs.get_mut(key) else { return };
        for remote in remotes {
            let fams = match remote {
                Remote::Prefix(c) => vec![c.family()],
                _ => families.clone(),
            };
            for family in fams {
                for (protocol, range) in ports {
                    sg.rules.insert(Rule {
                        direction,
                        family,
                        protocol: *protocol,
                        ports: *range,
                        remote: remote.clone(),
                    });
                }
            }
        }
    }

    fn group(
        &mut self,
        namespaces: &NamespaceMatch,
        pods: &LabelSelector,
        port: Option<(Protocol, &str, u16)>,
    ) -> Remote {
        let mut key = format!("sel/{namespaces}/{pods}");
        if let Some((proto, name, n)) = port {
            key.push_str(&format!("/{proto}:{name}={n}"));
        }
        self.groups.entry(key.clone()).or_insert_with(|| GroupDef {
            namespaces: namespaces.clone(),
            pods: pods.clone(),
            port: port.map(|(p, name, n)| (p, name.to_owned(), n)),
        });
        match self.opts.peer_mode {
            PeerMode::SecurityGroups => Remote::Group(key),
            PeerMode::AddressGroups => Remote::AddressGroup(key),
        }
    }

    /// Egress to "anywhere" or to an ipBlock must not include Service VIPs: Kubernetes applies
    /// egress policy after DNAT, so VIPs are opened per Service in [`Builder::services`]. Always
    /// prefixes, never `Any`: `0.0.0.0/0` must not become "any family".
    fn prefixes(&self, cidr: &Cidr, except: &[Cidr], direction: Direction) -> Vec<Remote> {
        let mut except = except.to_vec();
        if direction == Direction::Egress {
            except.extend(self.opts.service_cidrs.iter().copied());
        }
        cidr.subtract(&except).into_iter().map(Remote::Prefix).collect()
    }

    fn remotes(&mut self, peers: &[Peer], direction: Direction) -> Vec<Remote> {
        if peers.is_empty() {
            if direction == Direction::Egress && !self.opts.service_cidrs.is_empty() {
                let fams = self.opts.families.clone();
                return fams
                    .iter()
                    .flat_map(|f| self.prefixes(&Cidr::any(*f), &[], direction))
                    .collect();
            }
            return vec![Remote::Any];
        }
        let mut out = Vec::new();
        for peer in peers {
            match peer {
                Peer::Pods { namespaces, pods } => out.push(self.group(namespaces, pods, None)),
                Peer::IpBlock { cidr, except } => out.extend(self.prefixes(cidr, except, direction)),
            }
        }
        out
    }

    fn policy(&mut self, p: &Policy) {
        let key = format!("np/{}/{}", p.namespace, p.name);
        let name = object_name("np", &format!("{}-{}", p.namespace, p.name), &key);
        self.sg(&key, name, format!("NetworkPolicy {}/{}", p.namespace, p.name));
        let cluster = self.cluster;
        let selected: Vec<&Pod> = cluster.pods.iter().filter(|x| p.selects(x)).collect();
        for pod in &selected {
            self.attach(pod.key(), &key);
            if p.isolates_ingress {
                self.ingress_isolated.insert(pod.key());
            }
            if p.isolates_egress {
                self.egress_isolated.insert(pod.key());
            }
        }
        if p.isolates_ingress {
            self.ingress(p, &key, &selected);
        }
        if p.isolates_egress {
            self.egress(p, &key, &selected);
        }
    }

    fn ingress(&mut self, p: &Policy, key: &str, selected: &[&Pod]) {
        for (ri, rule) in p.ingress.iter().enumerate() {
            let remotes = self.remotes(&rule.peers, Direction::Ingress);
            let (fixed, named) = split_ports(&rule.ports);
            self.add_rules(key, Direction::Ingress, &remotes, &fixed);
            // A named port resolves on each selected pod; pods resolving to the same number share an
            // SG, so opening 8080 for one pod never opens it on a pod whose name maps elsewhere.
            let mut by_number: BTreeMap<(Protocol, u16), Vec<PodKey>> = BTreeMap::new();
            for pod in selected {
                for (proto, name) in &named {
                    if let Some(n) = pod.resolve_port(name, *proto) {
                        by_number.entry((*proto, n)).or_default().push(pod.key());
                    }
                }
            }
            for ((proto, n), pods) in by_number {
                let vkey = format!("{key}/ingress{ri}/{proto}/{n}");
                let name = object_name(
                    "np",
                    &format!("{}-{}-in{ri}-{proto}{n}", p.namespace, p.name),
                    &vkey,
                );
                self.sg(
                    &vkey,
                    name,
                    format!(
                        "NetworkPolicy {}/{} ingress rule {ri}, {proto} {n}",
                        p.namespace, p.name
                    ),
                );
                self.add_rules(
                    &vkey,
                    Direction::Ingress,
                    &remotes,
                    &[(Some(proto), Some((n, n)))],
                );
                for pod in pods {
                    self.attach(pod, &vkey);
                }
            }
        }
        // Hairpin: a backend reaching itself through its Service arrives with the VIP as source
        // (OVN SNATs hairpin traffic to the VIP). Only hairpin traffic has that source, and
        // Kubernetes never blocks a pod from itself, so allowing it is exact.
        let cluster = self.cluster;
        for svc in &cluster.services {
            if !selected.iter().any(|pod| svc.selects(pod)) {
                continue;
            }
            for vip in svc.vips() {
                self.add_rules(
                    key,
                    Direction::Ingress,
                    &[Remote::Prefix(Cidr::host(vip))],
                    &[(None, None)],
                );
            }
        }
    }

    fn egress(&mut self, p: &Policy, key: &str, selected: &[&Pod]) {
        let cluster = self.cluster;
        for rule in &p.egress {
            let (fixed, named) = split_ports(&rule.ports);
            if !fixed.is_empty() {
                let remotes = self.remotes(&rule.peers, Direction::Egress);
                self.add_rules(key, Direction::Egress, &remotes, &fixed);
            }
            // A named port resolves on the destination: one group per (selector, number), holding
            // the peer pods whose name maps to that number. Non-pod destinations never match.
            let everyone = [Peer::Pods {
                namespaces: NamespaceMatch::Selector(LabelSelector::everything()),
                pods: LabelSelector::everything(),
            }];
            let peers = if rule.peers.is_empty() {
                &everyone[..]
            } else {
                &rule.peers[..]
            };
            for (proto, name) in &named {
                for peer in peers {
                    let Peer::Pods { namespaces, pods } = peer else {
                        continue;
                    };
                    let numbers: BTreeSet<u16> = cluster
                        .pods
                        .iter()
                        .filter(|x| {
                            namespaces.matches(&x.namespace, &cluster.namespace_labels(&x.namespace))
                                && pods.matches(&x.labels)
                        })
                        .filter_map(|x| x.resolve_port(name, *proto))
                        .collect();
                    for n in numbers {
                        let remote = self.group(namespaces, pods, Some((*proto, name, n)));
                        self.add_rules(key, Direction::Egress, &[remote], &[(Some(*proto), Some((n, n)))]);
                    }
                }
            }
        }
        self.services(p, key, selected);
    }

    /// Opens a Service VIP port when the policy's egress allows every backend of it (after DNAT,
    /// on the target port), so that going through the VIP never reaches a backend the policy
    /// forbids. A selected pod that is the only forbidden backend still counts as allowed:
    /// reaching itself is always allowed.
    fn services(&mut self, p: &Policy, key: &str, selected: &[&Pod]) {
        let cluster = self.cluster;
        for svc in &cluster.services {
            let vips: Vec<Remote> = svc.vips().map(|v| Remote::Prefix(Cidr::host(v))).collect();
            if vips.is_empty() {
                continue;
            }
            for sp in &svc.ports {
                let backends: Vec<(&Pod, u16)> = cluster
                    .pods
                    .iter()
                    .filter_map(|b| svc.backend_port(sp, b).map(|t| (b, t)))
                    .collect();
                if backends.is_empty() || selected.is_empty() {
                    continue;
                }
                let forbidden: Vec<&Pod> = backends
                    .iter()
                    .filter(|(b, t)| {
                        !p.egress.iter().any(|r| {
                            rule_matches(cluster, r, &Endpoint::Pod(b.key()), sp.protocol, *t, Some(b))
                        })
                    })
                    .map(|(b, _)| *b)
                    .collect();
                let only_self =
                    forbidden.len() == 1 && selected.len() == 1 && selected[0].key() == forbidden[0].key();
                if forbidden.is_empty() || only_self {
                    let ports = [(Some(sp.protocol), Some((sp.port, sp.port)))];
                    self.add_rules(key, Direction::Egress, &vips, &ports);
                } else if forbidden.len() < backends.len() {
                    self.narrowings.push(Narrowing::ServicePartiallyAllowed {
                        policy: p.key(),
                        service: svc.key(),
                        port: sp.port,
                    });
                } else if selected
                    .iter()
                    .any(|s| backends.iter().any(|(b, _)| b.key() == s.key()))
                {
                    self.narrowings.push(Narrowing::HairpinBlocked {
                        policy: p.key(),
                        service: svc.key(),
                        port: sp.port,
                    });
                }
            }
        }
    }

    /// Pods no policy isolates keep Kubernetes' default: everything allowed in that direction (or,
    /// with namespace isolation, ingress from their namespace and from outside the pod network).
    fn permissive(&mut self) {
        let all: Vec<Remote> = vec![Remote::Any];
        let cluster = self.cluster;
        let nodes: Vec<Remote> = self.opts.node_cidrs.iter().copied().map(Remote::Prefix).collect();
        for pod in &cluster.pods {
            let k = pod.key();
            if self.ingress_isolated.contains(&k) && !nodes.is_empty() {
                self.sg(
                    ALLOW_FROM_NODES_KEY,
                    "kuryr-allow-from-nodes".into(),
                    "worker nodes (probes)".into(),
                );
                self.add_rules(ALLOW_FROM_NODES_KEY, Direction::Ingress, &nodes, &[(None, None)]);
                self.attach(k.clone(), ALLOW_FROM_NODES_KEY);
            }
            if !self.ingress_isolated.contains(&k) {
                if self.opts.namespace_isolation {
                    let key = format!("nsiso/{}", pod.namespace);
                    if !self.sgs.contains_key(&key) {
                        let name = object_name("ns", &pod.namespace, &key);
                        self.sg(&key, name, format!("namespace isolation of {}", pod.namespace));
                        let same_ns = self.group(
                            &NamespaceMatch::Exact(pod.namespace.clone()),
                            &LabelSelector::everything(),
                            None,
                        );
                        let mut remotes = vec![same_ns];
                        for f in self.opts.families.clone() {
                            let pod_cidrs: Vec<Cidr> = self
                                .opts
                                .pod_cidrs
                                .iter()
                                .filter(|c| c.family() == f)
                                .copied()
                                .collect();
                            remotes.extend(Cidr::any(f).subtract(&pod_cidrs).into_iter().map(Remote::Prefix));
                        }
                        self.add_rules(&key, Direction::Ingress, &remotes, &[(None, None)]);
                    }
                    self.attach(k.clone(), &key);
                } else {
                    self.sg(
                        ALLOW_INGRESS_KEY,
                        "kuryr-allow-all-ingress".into(),
                        "pods no policy isolates for ingress".into(),
                    );
                    self.add_rules(ALLOW_INGRESS_KEY, Direction::Ingress, &all, &[(None, None)]);
                    self.attach(k.clone(), ALLOW_INGRESS_KEY);
                }
            }
            if !self.egress_isolated.contains(&k) {
                self.sg(
                    ALLOW_EGRESS_KEY,
                    "kuryr-allow-all-egress".into(),
                    "pods no policy isolates for egress".into(),
                );
                self.add_rules(ALLOW_EGRESS_KEY, Direction::Egress, &all, &[(None, None)]);
                self.attach(k, ALLOW_EGRESS_KEY);
            }
        }
    }

    fn finish(mut self) -> Result<CompiledPolicy, PolicyError> {
        let cluster = self.cluster;
        let mut address_groups = Vec::new();
        for (key, def) in std::mem::take(&mut self.groups) {
            let members: Vec<&Pod> = cluster.pods.iter().filter(|p| def.matches(cluster, p)).collect();
            match self.opts.peer_mode {
                PeerMode::SecurityGroups => {
                    let name = object_name("sel", "", &key);
                    self.sg(&key, name, key.clone());
                    for m in members {
                        self.attach(m.key(), &key);
                    }
                }
                PeerMode::AddressGroups => address_groups.push(DesiredAddressGroup {
                    name: object_name("sel", "", &key),
                    description: key.clone(),
                    addresses: members.iter().map(|m| Cidr::host(m.ip)).collect(),
                    key,
                }),
            }
        }
        let security_groups: Vec<DesiredSg> = self.sgs.into_values().collect();
        if let Some(limit) = self.opts.quota.security_groups {
            if security_groups.len() > limit {
                return Err(PolicyError::TooManySecurityGroups {
                    needed: security_groups.len(),
                    limit,
                });
            }
        }
        if let Some(limit) = self.opts.quota.security_group_rules {
            let needed: usize = security_groups.iter().map(|sg| sg.rules.len()).sum();
            if needed > limit {
                let largest = security_groups
                    .iter()
                    .max_by_key(|sg| sg.rules.len())
                    .map(|sg| sg.key.clone())
                    .unwrap_or_default();
                return Err(PolicyError::TooManyRules {
                    needed,
                    limit,
                    largest,
                });
            }
        }
        Ok(CompiledPolicy {
            security_groups,
            address_groups,
            memberships: self.memberships,
            rejected: self.rejected,
            narrowings: self.narrowings,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::model::{NamedPort, Namespace, PolicyRule, PortMatch};
    use crate::policy::Quota;

    fn pod(ns: &str, name: &str, app: &str, ip: &str) -> Pod {
        Pod {
            namespace: ns.into(),
            name: name.into(),
            labels: [("app".to_string(), app.to_string())].into(),
            ip: ip.parse().unwrap(),
            ports: vec![NamedPort {
                name: "http".into(),
                protocol: Protocol::Tcp,
                port: 80,
            }],
        }
    }

    fn cluster() -> Cluster {
        Cluster {
            namespaces: vec![Namespace {
                name: "x".into(),
                labels: Default::default(),
            }],
            pods: vec![pod("x", "a", "web", "10.0.0.1"), pod("x", "b", "db", "10.0.0.2")],
            services: Vec::new(),
        }
    }

    fn policy(ingress: Vec<PolicyRule>, egress: Vec<PolicyRule>) -> Policy {
        Policy {
            namespace: "x".into(),
            name: "p".into(),
            pod_selector: LabelSelector::from_labels([("app", "db")]),
            isolates_ingress: true,
            isolates_egress: !egress.is_empty(),
            ingress,
            egress,
        }
    }

    fn from_web() -> PolicyRule {
        PolicyRule {
            peers: vec![Peer::Pods {
                namespaces: NamespaceMatch::Exact("x".into()),
                pods: LabelSelector::from_labels([("app", "web")]),
            }],
            ports: vec![PortMatch {
                protocol: Protocol::Tcp,
                port: PortSpec::Range(5432, 5432),
            }],
        }
    }

    #[test]
    fn a_policy_becomes_one_sg_referencing_one_selector_group() {
        let c = compile(
            &cluster(),
            &[policy(vec![from_web()], vec![])],
            &CompileOptions::default(),
        )
        .unwrap();
        let sg = c.security_group("np/x/p").unwrap();
        assert_eq!(sg.rules.len(), 1);
        let rule = sg.rules.iter().next().unwrap();
        assert_eq!(rule.remote, Remote::Group("sel/ns=x/app=web".into()));
        assert_eq!(rule.ports, Some((5432, 5432)));
        // The peer carries the selector group; the selected pod the policy SG and no allow-all ingress.
        let a = &c.memberships[&PodKey::new("x", "a")];
        let b = &c.memberships[&PodKey::new("x", "b")];
        assert!(a.contains("sel/ns=x/app=web") && a.contains(ALLOW_INGRESS_KEY));
        assert!(b.contains("np/x/p") && !b.contains(ALLOW_INGRESS_KEY) && b.contains(ALLOW_EGRESS_KEY));
        assert!(c.security_group("sel/ns=x/app=web").unwrap().rules.is_empty());
    }

    #[test]
    fn a_policys_groups_belong_to_its_namespace_selector_and_shared_groups_to_none() {
        let c = compile(
            &cluster(),
            &[policy(vec![from_web()], vec![])],
            &CompileOptions::default(),
        )
        .unwrap();
        assert_eq!(DesiredSg::namespace_of_key("np/x/p"), Some("x"));
        assert_eq!(DesiredSg::namespace_of_key("np/x/p/ingress0/tcp/1"), Some("x"));
        assert_eq!(DesiredSg::namespace_of_key("nsiso/x"), Some("x"));
        assert_eq!(DesiredSg::namespace_of_key("sel/ns=x/app=web"), None);
        assert_eq!(DesiredSg::namespace_of_key(ALLOW_INGRESS_KEY), None);
        assert_eq!(DesiredSg::namespace_of_key("np//p"), None);
        // Every group the compiler makes is one or the other.
        assert!(c.security_groups.len() >= 2);
        for g in &c.security_groups {
            let ns = DesiredSg::namespace_of_key(&g.key);
            assert_eq!(ns.is_some(), g.key.starts_with("np/"), "{}: {ns:?}", g.key);
        }
    }

    #[test]
    fn address_group_mode_lists_peer_ips_instead_of_membership() {
        let opts = CompileOptions {
            peer_mode: PeerMode::AddressGroups,
            ..CompileOptions::default()
        };
        let c = compile(&cluster(), &[policy(vec![from_web()], vec![])], &opts).unwrap();
        let ag = c.address_group("sel/ns=x/app=web").unwrap();
        assert_eq!(ag.addresses, [Cidr::host("10.0.0.1".parse().unwrap())].into());
        assert!(!c.memberships[&PodKey::new("x", "a")].contains("sel/ns=x/app=web"));
    }

    #[test]
    fn egress_to_an_ip_block_on_a_named_port_is_rejected_and_compiled_fail_closed() {
        let rule = PolicyRule {
            peers: vec![Peer::IpBlock {
                cidr: "10.0.0.0/8".parse().unwrap(),
                except: vec![],
            }],
            ports: vec![PortMatch {
                protocol: Protocol::Tcp,
                port: PortSpec::Named("http".into()),
            }],
        };
        let c = compile(
            &cluster(),
            &[policy(vec![from_web()], vec![rule])],
            &CompileOptions::default(),
        )
        .unwrap();
        assert!(matches!(c.rejected[0].error, PolicyError::UnsupportedPeer(_)));
        // Fail closed: the pod is isolated both ways and its policy SG is empty.
        assert!(c.security_group("np/x/p").unwrap().rules.is_empty());
        let b = &c.memberships[&PodKey::new("x", "b")];
        assert!(!b.contains(ALLOW_INGRESS_KEY) && !b.contains(ALLOW_EGRESS_KEY));
    }

    #[test]
    fn exceeding_the_rule_quota_is_an_error_not_a_partial_state() {
        let opts = CompileOptions {
            quota: Quota {
                security_group_rules: Some(2),
                security_groups: None,
            },
            ..CompileOptions::default()
        };
        let err = compile(&cluster(), &[policy(vec![from_web()], vec![])], &opts).unwrap_err();
        assert!(
            matches!(
                err,
                PolicyError::TooManyRules {
                    needed: 3,
                    limit: 2,
                    ..
                }
            ),
            "{err}"
        );
        let opts = CompileOptions {
            quota: Quota {
                security_groups: Some(1),
                security_group_rules: None,
            },
            ..CompileOptions::default()
        };
        let err = compile(&cluster(), &[policy(vec![from_web()], vec![])], &opts).unwrap_err();
        assert!(
            matches!(err, PolicyError::TooManySecurityGroups { needed: 4, limit: 1 }),
            "{err}"
        );
    }

    #[test]
    fn namespace_isolation_needs_pod_cidrs_and_vips_must_lie_in_service_cidrs() {
        let opts = CompileOptions {
            namespace_isolation: true,
            ..CompileOptions::default()
        };
        assert!(matches!(
            compile(&cluster(), &[], &opts),
            Err(PolicyError::InvalidOptions(_))
        ));
        let mut c = cluster();
        c.services.push(crate::policy::Service {
            namespace: "x".into(),
            name: "s".into(),
            cluster_ip: Some("10.96.0.1".parse().unwrap()),
            other_cluster_ips: Vec::new(),
            selector: None,
            ports: Vec::new(),
        });
        assert!(matches!(
            compile(&c, &[], &CompileOptions::default()),
            Err(PolicyError::InvalidOptions(_))
        ));
    }

    #[test]
    fn pods_behind_one_shared_port_must_need_the_same_groups() {
        let c = compile(
            &cluster(),
            &[policy(vec![from_web()], vec![])],
            &CompileOptions::default(),
        )
        .unwrap();
        let (a, b) = (PodKey::new("x", "a"), PodKey::new("x", "b"));
        assert!(matches!(
            c.shared_port_security_groups([&a, &b]),
            Err(PolicyError::SharedPortConflict { .. })
        ));
        assert_eq!(c.shared_port_security_groups([&a]).unwrap(), c.memberships[&a]);
    }

    #[test]
    fn names_are_stable_and_distinct_per_key() {
        let a = object_name("np", "x-p", "np/x/p");
        assert_eq!(a, object_name("np", "x-p", "np/x/p"));
        assert_ne!(a, object_name("np", "x-p", "np/x-p/"));
        assert!(a.starts_with("kuryr-np-x-p-"));
    }

    #[test]
    fn api_form_maps_group_keys_to_ids_and_refuses_unknown_groups() {
        let rule = Rule {
            direction: Direction::Ingress,
            family: Family::V4,
            protocol: Some(Protocol::Tcp),
            ports: Some((80, 81)),
            remote: Remote::Group("sel/x".into()),
        };
        let api = rule
            .to_api(|k| (k == "sel/x").then(|| "uuid-1".to_string()))
            .unwrap();
        assert_eq!(api.remote_group_id.as_deref(), Some("uuid-1"));
        assert_eq!((api.port_range_min, api.port_range_max), (Some(80), Some(81)));
        assert_eq!(api.protocol.as_deref(), Some("tcp"));
        assert!(rule.to_api(|_| None).is_none());
    }
}
