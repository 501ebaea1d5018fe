//! NetworkPolicy → Neutron security groups, as a pure function from cluster state to desired cloud state.
//!
//! The scheme (docs/network-policy.md has the reasoning and a worked example):
//! - one **selector group** per distinct peer selector (namespace match × pod selector, plus a port name
//!   filter for named egress ports). In [`PeerMode::SecurityGroups`] it is an SG without rules that pods
//!   matching the selector carry as a membership marker; in [`PeerMode::AddressGroups`] it is a Neutron
//!   address group holding those pods' IPs (needed when the pod IP rides on another port as an
//!   allowed-address pair, where `remote_group_id` doesn't see it);
//! - one **policy SG** per NetworkPolicy, attached to the pods its `podSelector` selects, whose rules
//!   reference selector groups (`remote_group_id` / `remote_address_group_id`), ipBlock prefixes or the
//!   Service VIPs; named ingress ports add one SG per resolved (protocol, port);
//! - **permissive SGs** (`kuryr-allow-all-ingress`, `kuryr-allow-all-egress`) for pods no policy isolates
//!   in that direction (Neutron has no deny rules: isolating a pod means leaving those out), or, with
//!   namespace isolation on, a per-namespace SG instead of the ingress one; ingress-isolated pods
//!   also get `kuryr-allow-from-nodes` (kubelet probes), when node CIDRs are configured.
//!
//! Rule count is bounded by the policies' text and the distinct named-port numbers, never by pods:
//! a pod appearing or changing labels changes memberships (one port update), not rules.
//!
//! [`compile`] produces a [`CompiledPolicy`]; [`diff`] turns it and the observed state into the fewest
//! Neutron calls; [`NeutronEvaluator`] answers reachability as Neutron enforces the compiled state and
//! [`K8sEvaluator`] as the NetworkPolicy spec says — the tests check that both agree.

pub mod cidr;
pub mod compile;
pub mod diff;
pub mod k8s_eval;
pub mod model;
pub mod neutron_eval;
pub mod selectors;

pub use cidr::{Cidr, Family};
pub use compile::{
    compile, CompiledPolicy, DesiredAddressGroup, DesiredSg, Direction, Narrowing, RejectedPolicy, Remote,
    Rule,
};
pub use diff::{
    diff, CurrentAddressGroup, CurrentPort, CurrentRule, CurrentSg, CurrentState, DiffOptions, Plan,
};
pub use k8s_eval::K8sEvaluator;
pub use model::{
    Cluster, Endpoint, NamedPort, Namespace, NamespaceMatch, Peer, Pod, PodKey, Policy, PolicyKey,
    PolicyRule, PortMatch, PortSpec, Protocol, Service, ServicePort, TargetPort,
};
pub use neutron_eval::NeutronEvaluator;
pub use selectors::{LabelSelector, Labels, Requirement};

/// Why a policy (or the whole compiled state) can't be put into Neutron as written.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    #[error("invalid NetworkPolicy: {0}")]
    Invalid(String),
    #[error("invalid label selector: {0}")]
    InvalidSelector(String),
    #[error("invalid CIDR {0:?}")]
    InvalidCidr(String),
    #[error("invalid port number {0}")]
    InvalidPort(i32),
    #[error("protocol {0} is not supported by NetworkPolicy")]
    UnsupportedProtocol(String),
    /// A peer Neutron rules can't express exactly; compiling it would open more than the policy says.
    #[error("peer not expressible exactly in Neutron security groups: {0}")]
    UnsupportedPeer(String),
    #[error("the compiled policies need {needed} security group rules, the quota allows {limit} (largest group {largest})")]
    TooManyRules {
        needed: usize,
        limit: usize,
        largest: String,
    },
    #[error("the compiled policies need {needed} security groups, the quota allows {limit}")]
    TooManySecurityGroups { needed: usize, limit: usize },
    /// Pods enforced on one shared port (nested-macvlan) need different security groups.
    #[error("pods {first} and {second} share a port but need different security groups")]
    SharedPortConflict { first: String, second: String },
    #[error("invalid compile options: {0}")]
    InvalidOptions(String),
}

/// How rules name peer pods.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PeerMode {
    /// `remote_group_id` of a rule-less membership SG attached to the peer pods' ports. Works when
    /// the pod's IP is its own port's fixed IP (neutron-vif, nested-vlan).
    #[default]
    SecurityGroups,
    /// `remote_address_group_id` of an address group listing the peer pods' IPs. Needed for the
    /// nested-macvlan layout, where the pod IP is an allowed-address pair on the VM port.
    AddressGroups,
}

/// Project quotas the compiled state must fit in (what is left for kuryr, not the raw quota).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Quota {
    pub security_groups: Option<usize>,
    pub security_group_rules: Option<usize>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CompileOptions {
    /// Ethertypes rules without a prefix (any peer, selector groups) are written for.
    pub families: Vec<Family>,
    pub peer_mode: PeerMode,
    /// Upstream's namespace isolation: a pod no ingress policy selects accepts traffic only from pods
    /// of its own namespace and from addresses outside `pod_cidrs`. Off by default (Kubernetes
    /// semantics: everything reaches everything).
    pub namespace_isolation: bool,
    /// Where pod IPs come from; needed by namespace isolation to tell pods from the outside.
    pub pod_cidrs: Vec<Cidr>,
    /// Service (VIP) ranges; must cover every Service VIP. Egress to "anywhere" and egress ipBlocks
    /// exclude them: Kubernetes matches egress after DNAT, so a VIP inside such a rule must not open
    /// the Service; Service access is granted per Service instead.
    pub service_cidrs: Vec<Cidr>,
    /// Worker node addresses. Kubernetes doesn't let a pod block its node (kubelet probes), so
    /// ingress-isolated pods still accept these, through the shared `allow/from-nodes` group
    /// (upstream allowed `worker_nodes_subnets` likewise).
    pub node_cidrs: Vec<Cidr>,
    pub quota: Quota,
}

impl Default for CompileOptions {
    fn default() -> Self {
        Self {
            families: vec![Family::V4],
            peer_mode: PeerMode::default(),
            namespace_isolation: false,
            pod_cidrs: Vec::new(),
            service_cidrs: Vec::new(),
            node_cidrs: Vec::new(),
            quota: Quota::default(),
        }
    }
}

/// FNV-1a: names of Neutron objects must not change between releases, so no `DefaultHasher`.
pub(crate) fn stable_hash(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}
