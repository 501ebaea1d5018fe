//! Networks (one per namespace with the namespace subnet driver).

use reqwest::Method;
use serde::{Deserialize, Serialize};

use super::tagging::{create_tagged, taggable, Resource};
use super::Filter;
use crate::errors::{Result, Service};
use crate::Cloud;

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(default)]
pub struct Network {
    pub id: String,
    pub name: String,
    pub description: String,
    pub status: String,
    pub project_id: String,
    pub admin_state_up: bool,
    pub mtu: Option<u32>,
    pub shared: bool,
    #[serde(rename = "router:external")]
    pub router_external: bool,
    pub port_security_enabled: Option<bool>,
    #[serde(rename = "provider:network_type")]
    pub network_type: Option<String>,
    pub subnets: Vec<String>,
    pub tags: Vec<String>,
    /// ISO 8601; empty where the server does not say (the garbage collector's age).
    pub created_at: String,
    pub revision_number: u64,
}

taggable!(Network);

#[derive(Debug, Clone, Default, Serialize)]
pub struct CreateNetwork {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub project_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub admin_state_up: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mtu: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub port_security_enabled: Option<bool>,
    #[serde(rename = "router:external", skip_serializing_if = "Option::is_none")]
    pub router_external: Option<bool>,
    #[serde(rename = "provider:network_type", skip_serializing_if = "Option::is_none")]
    pub network_type: Option<String>,
    #[serde(rename = "provider:physical_network", skip_serializing_if = "Option::is_none")]
    pub physical_network: Option<String>,
}

impl CreateNetwork {
    pub fn named(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            ..Self::default()
        }
    }
}

/// Creates a network and tags it (deleting it again if tagging fails).
pub async fn create(cloud: &Cloud, req: &CreateNetwork, tags: &[String]) -> Result<Network> {
    create_tagged(cloud, Resource::Networks, "neutron.networks.create", req, tags).await
}

pub async fn get(cloud: &Cloud, id: &str) -> Result<Network> {
    cloud
        .get_one(
            Service::Network,
            "neutron.networks.show",
            format!("networks/{id}"),
            "network",
        )
        .await
}

pub async fn list(cloud: &Cloud, filter: Filter) -> Result<Vec<Network>> {
    cloud
        .list(
            Service::Network,
            "neutron.networks.list",
            "networks",
            "networks",
            filter.into_query(),
        )
        .await
}

/// A 404 counts as deleted.
pub async fn delete(cloud: &Cloud, id: &str) -> Result<()> {
    cloud
        .delete_path(
            Service::Network,
            "neutron.networks.delete",
            format!("networks/{id}"),
            Vec::new(),
        )
        .await
}

/// What `PUT /networks/{id}` changes here. Read-only attributes (`status`, …) are 400 "Cannot update
/// read-only attribute"; an MTU above the overlay's maximum is 400 `InvalidInput`.
#[derive(Debug, Clone, Default, Serialize)]
pub struct UpdateNetwork {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub admin_state_up: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mtu: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub port_security_enabled: Option<bool>,
}

pub async fn update(cloud: &Cloud, id: &str, req: &UpdateNetwork) -> Result<Network> {
    cloud
        .send_one(
            Service::Network,
            "neutron.networks.update",
            Method::PUT,
            format!("networks/{id}"),
            "network",
            req,
        )
        .await
}
