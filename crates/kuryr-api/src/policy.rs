//! KuryrNetworkPolicy (`knp`): one per NetworkPolicy, same name and namespace. The policy handler
//! translates the NetworkPolicy into Neutron security group rules in spec; the KNP handler creates the
//! security group and rules and records them in status. Field names are upstream's.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::conditions::Condition;

/// Desired security group rules of a NetworkPolicy.
// Every `printcolumn(...)` repeats keys like `type_`, which clippy takes for duplicated attributes.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "openstack.org",
    version = "v1",
    kind = "KuryrNetworkPolicy",
    plural = "kuryrnetworkpolicies",
    shortname = "knp",
    namespaced,
    category = "kuryr",
    status = "KuryrNetworkPolicyStatus",
    derive = "PartialEq",
    doc = "Neutron security group implementing one NetworkPolicy: desired rules in spec, created ones in status.",
    printcolumn(
        name = "SG-ID",
        type_ = "string",
        json_path = ".status.securityGroupId",
        description = "The ID of the SG associated to the policy"
    ),
    printcolumn(name = "Policy-Types", type_ = "string", json_path = ".spec.policyTypes"),
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].status"
    ),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp")
)]
#[serde(rename_all = "camelCase")]
pub struct KuryrNetworkPolicySpec {
    #[serde(default)]
    pub ingress_sg_rules: Vec<SgRuleSpec>,
    #[serde(default)]
    pub egress_sg_rules: Vec<SgRuleSpec>,
    /// The NetworkPolicy's `podSelector`: pods whose ports get this security group.
    #[serde(default)]
    pub pod_selector: LabelSelector,
    #[serde(default)]
    pub policy_types: Vec<PolicyType>,
}

/// NetworkPolicy `policyTypes` entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum PolicyType {
    Ingress,
    Egress,
}

/// One desired rule and where it came from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SgRuleSpec {
    pub sg_rule: SecurityGroupRule,
    /// Namespace of the peer the rule was derived from (namespaceSelector peers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Peer pods whose IPs the rule covers (upstream made one rule per peer pod IP).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub affected_pods: Vec<AffectedPod>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct AffectedPod {
    #[serde(rename = "podIP")]
    #[schemars(length(min = 1))]
    pub pod_ip: String,
    #[serde(rename = "podNamespace")]
    #[schemars(length(min = 1))]
    pub pod_namespace: String,
}

/// A Neutron security group rule, Neutron field names. In spec `id`/`security_group_id` are absent; in
/// status they name the created rule.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct SecurityGroupRule {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    pub direction: SgRuleDirection,
    #[serde(default)]
    pub ethertype: EtherType,
    /// Lowest port (ICMP: type).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 65535))]
    pub port_range_min: Option<i32>,
    /// Highest port (ICMP: code).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 65535))]
    pub port_range_max: Option<i32>,
    /// Neutron protocol: a name (`tcp`, `udp`, `sctp`, `icmp`...) or an IP protocol number; absent means any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote_ip_prefix: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote_group_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub security_group_id: Option<String>,
}

impl SecurityGroupRule {
    /// Same rule as Neutron sees it (ignores id, description and owning group), for diffing desired vs
    /// existing rules.
    pub fn same_rule(&self, other: &Self) -> bool {
        self.direction == other.direction
            && self.ethertype == other.ethertype
            && self.port_range_min == other.port_range_min
            && self.port_range_max == other.port_range_max
            && self.protocol == other.protocol
            && self.remote_ip_prefix == other.remote_ip_prefix
            && self.remote_group_id == other.remote_group_id
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum SgRuleDirection {
    #[default]
    Ingress,
    Egress,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum EtherType {
    #[default]
    IPv4,
    IPv6,
}

/// The security group that exists for the policy.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KuryrNetworkPolicyStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub security_group_id: Option<String>,
    /// Rules created in the group.
    #[serde(default)]
    pub security_group_rules: Vec<SecurityGroupRule>,
    /// Pod selector the group was last applied for (pods matching the old one need their ports updated).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_selector: Option<LabelSelector>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}
