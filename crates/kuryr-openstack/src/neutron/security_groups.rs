//! Security groups and rules (one SG per NetworkPolicy; rules created in bulk).

use reqwest::Method;
use serde::{Deserialize, Serialize};

use super::tagging::{create_tagged, taggable, Resource};
use super::Filter;
use crate::errors::{Result, Service};
use crate::Cloud;

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(default)]
pub struct SecurityGroupRule {
    pub id: String,
    pub security_group_id: String,
    pub direction: String,
    pub ethertype: String,
    pub protocol: Option<String>,
    pub port_range_min: Option<u32>,
    pub port_range_max: Option<u32>,
    pub remote_ip_prefix: Option<String>,
    pub remote_group_id: Option<String>,
    pub description: String,
    pub project_id: String,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(default)]
pub struct SecurityGroup {
    pub id: String,
    pub name: String,
    pub description: String,
    pub project_id: String,
    pub stateful: Option<bool>,
    pub security_group_rules: Vec<SecurityGroupRule>,
    pub tags: Vec<String>,
    /// ISO 8601; empty where the server does not say (the garbage collector's age).
    pub created_at: String,
    pub revision_number: u64,
}

taggable!(SecurityGroup);

#[derive(Debug, Clone, Default, Serialize)]
pub struct CreateSecurityGroup {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub project_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stateful: Option<bool>,
}

#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct CreateRule {
    pub security_group_id: String,
    /// `ingress` or `egress`.
    pub direction: String,
    /// `IPv4` or `IPv6`.
    pub ethertype: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub protocol: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub port_range_min: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub port_range_max: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub remote_ip_prefix: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub remote_group_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub project_id: Option<String>,
}

impl CreateRule {
    pub fn ingress(sg: impl Into<String>) -> Self {
        Self {
            security_group_id: sg.into(),
            direction: "ingress".to_owned(),
            ethertype: "IPv4".to_owned(),
            ..Self::default()
        }
    }

    pub fn egress(sg: impl Into<String>) -> Self {
        Self {
            direction: "egress".to_owned(),
            ..Self::ingress(sg)
        }
    }

    pub fn tcp(self, min: u32, max: u32) -> Self {
        self.proto("tcp", min, max)
    }

    pub fn udp(self, min: u32, max: u32) -> Self {
        self.proto("udp", min, max)
    }

    fn proto(mut self, p: &str, min: u32, max: u32) -> Self {
        self.protocol = Some(p.to_owned());
        self.port_range_min = Some(min);
        self.port_range_max = Some(max);
        self
    }

    pub fn from_cidr(mut self, cidr: impl Into<String>) -> Self {
        self.remote_ip_prefix = Some(cidr.into());
        self
    }
}

/// Creates a group (Neutron adds its two default egress rules) and tags it.
pub async fn create(cloud: &Cloud, req: &CreateSecurityGroup, tags: &[String]) -> Result<SecurityGroup> {
    create_tagged(
        cloud,
        Resource::SecurityGroups,
        "neutron.security_groups.create",
        req,
        tags,
    )
    .await
}

pub async fn get(cloud: &Cloud, id: &str) -> Result<SecurityGroup> {
    cloud
        .get_one(
            Service::Network,
            "neutron.security_groups.show",
            format!("security-groups/{id}"),
            "security_group",
        )
        .await
}

pub async fn list(cloud: &Cloud, filter: Filter) -> Result<Vec<SecurityGroup>> {
    cloud
        .list(
            Service::Network,
            "neutron.security_groups.list",
            "security-groups",
            "security_groups",
            filter.into_query(),
        )
        .await
}

/// A 404 counts as deleted; a group still used by ports is a 409.
pub async fn delete(cloud: &Cloud, id: &str) -> Result<()> {
    cloud
        .delete_path(
            Service::Network,
            "neutron.security_groups.delete",
            format!("security-groups/{id}"),
            Vec::new(),
        )
        .await
}

pub async fn create_rule(cloud: &Cloud, req: &CreateRule) -> Result<SecurityGroupRule> {
    cloud
        .send_one(
            Service::Network,
            "neutron.security_group_rules.create",
            Method::POST,
            "security-group-rules".into(),
            "security_group_rule",
            req,
        )
        .await
}

/// `POST /security-group-rules {"security_group_rules": [...]}`: all rules or none. A duplicate rule is a
/// 409 `SecurityGroupRuleExists`. A body over the cloud's size limit is split into the fewest calls that
/// fit ([`crate::fit`]); when a later call fails, the rules the earlier ones made are deleted again.
pub async fn bulk_create_rules(cloud: &Cloud, reqs: &[CreateRule]) -> Result<Vec<SecurityGroupRule>> {
    super::Bulk {
        cloud,
        op: "neutron.security_group_rules.bulk_create",
        path: "security-group-rules",
        key: "security_group_rules",
        id_of: |r: &SecurityGroupRule| r.id.as_str(),
        undo: |id: String| async move { delete_rule(cloud, &id).await },
        on_race: super::OnIpamRace::Retry,
    }
    .post_all(reqs)
    .await
}

pub async fn list_rules(cloud: &Cloud, filter: Filter) -> Result<Vec<SecurityGroupRule>> {
    cloud
        .list(
            Service::Network,
            "neutron.security_group_rules.list",
            "security-group-rules",
            "security_group_rules",
            filter.into_query(),
        )
        .await
}

pub async fn delete_rule(cloud: &Cloud, id: &str) -> Result<()> {
    cloud
        .delete_path(
            Service::Network,
            "neutron.security_group_rules.delete",
            format!("security-group-rules/{id}"),
            Vec::new(),
        )
        .await
}
