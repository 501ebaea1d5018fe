//! Subnets (pods' addresses; from a subnet pool with the namespace driver).

use reqwest::Method;
use serde::{Deserialize, Serialize};

use super::tagging::{create_tagged, taggable, Resource};
use super::Filter;
use crate::errors::{Result, Service};
use crate::Cloud;

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(default)]
pub struct AllocationPool {
    pub start: String,
    pub end: String,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(default)]
pub struct Subnet {
    pub id: String,
    pub name: String,
    pub network_id: String,
    pub project_id: String,
    pub cidr: String,
    pub ip_version: u8,
    pub gateway_ip: Option<String>,
    pub enable_dhcp: bool,
    pub subnetpool_id: Option<String>,
    pub allocation_pools: Vec<AllocationPool>,
    pub dns_nameservers: Vec<String>,
    pub tags: Vec<String>,
    /// ISO 8601; empty where the server does not say (the garbage collector's age).
    pub created_at: String,
    pub revision_number: u64,
}

taggable!(Subnet);

#[derive(Debug, Clone, Default, Serialize)]
pub struct CreateSubnet {
    pub network_id: String,
    pub ip_version: u8,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Absent when allocating from `subnetpool_id`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cidr: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subnetpool_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prefixlen: Option<u8>,
    /// `Some(None)` sends `"gateway_ip": null` (no gateway).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gateway_ip: Option<Option<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enable_dhcp: Option<bool>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub allocation_pools: Vec<AllocationPool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub project_id: Option<String>,
}

impl CreateSubnet {
    /// An IPv4 subnet with a CIDR, no DHCP (kuryr configures pod addresses itself).
    pub fn v4(network_id: impl Into<String>, cidr: impl Into<String>) -> Self {
        Self {
            network_id: network_id.into(),
            ip_version: 4,
            cidr: Some(cidr.into()),
            enable_dhcp: Some(false),
            ..Self::default()
        }
    }
}

pub async fn create(cloud: &Cloud, req: &CreateSubnet, tags: &[String]) -> Result<Subnet> {
    create_tagged(cloud, Resource::Subnets, "neutron.subnets.create", req, tags).await
}

pub async fn get(cloud: &Cloud, id: &str) -> Result<Subnet> {
    cloud
        .get_one(
            Service::Network,
            "neutron.subnets.show",
            format!("subnets/{id}"),
            "subnet",
        )
        .await
}

pub async fn list(cloud: &Cloud, filter: Filter) -> Result<Vec<Subnet>> {
    cloud
        .list(
            Service::Network,
            "neutron.subnets.list",
            "subnets",
            "subnets",
            filter.into_query(),
        )
        .await
}

pub async fn delete(cloud: &Cloud, id: &str) -> Result<()> {
    cloud
        .delete_path(
            Service::Network,
            "neutron.subnets.delete",
            format!("subnets/{id}"),
            Vec::new(),
        )
        .await
}

/// What `PUT /subnets/{id}` changes here. `cidr`, `ip_version` and `network_id` are read-only (400).
#[derive(Debug, Clone, Default, Serialize)]
pub struct UpdateSubnet {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enable_dhcp: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dns_nameservers: Option<Vec<String>>,
    /// `Some(None)` sends `"gateway_ip": null` (removes the gateway).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gateway_ip: Option<Option<String>>,
}

pub async fn update(cloud: &Cloud, id: &str, req: &UpdateSubnet) -> Result<Subnet> {
    cloud
        .send_one(
            Service::Network,
            "neutron.subnets.update",
            Method::PUT,
            format!("subnets/{id}"),
            "subnet",
            req,
        )
        .await
}
