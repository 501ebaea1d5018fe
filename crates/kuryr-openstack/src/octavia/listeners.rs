//! Listeners (one per Service port and protocol).

use reqwest::Method;
use serde::{Deserialize, Serialize};

use super::pools::CreatePool;
use super::IdRef;
use crate::errors::{Result, Service};
use crate::Cloud;

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(default)]
pub struct Listener {
    pub id: String,
    pub name: String,
    pub protocol: String,
    pub protocol_port: u32,
    pub loadbalancers: Vec<IdRef>,
    pub default_pool_id: Option<String>,
    pub timeout_client_data: Option<u64>,
    pub timeout_member_data: Option<u64>,
    pub connection_limit: Option<i64>,
    pub allowed_cidrs: Option<Vec<String>>,
    pub provisioning_status: String,
    pub operating_status: String,
    pub tags: Vec<String>,
}

#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct CreateListener {
    pub name: String,
    /// `TCP`, `UDP`, `SCTP`, `HTTP`, ...
    pub protocol: String,
    pub protocol_port: u32,
    /// Only for a standalone create (absent inside a fully-populated body).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub loadbalancer_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub default_pool: Option<CreatePool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub default_pool_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout_client_data: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout_member_data: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub connection_limit: Option<i64>,
    /// API 2.12+.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allowed_cidrs: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
}

impl CreateListener {
    pub fn new(name: impl Into<String>, protocol: impl Into<String>, port: u32) -> Self {
        Self {
            name: name.into(),
            protocol: protocol.into(),
            protocol_port: port,
            ..Self::default()
        }
    }

    pub fn with_pool(mut self, pool: CreatePool) -> Self {
        self.default_pool = Some(pool);
        self
    }
}

pub async fn create(cloud: &Cloud, req: &CreateListener) -> Result<Listener> {
    let f = cloud.octavia_features().await?;
    f.check_listener("octavia.listeners.create", req)?;
    cloud
        .send_one(
            Service::LoadBalancer,
            "octavia.listeners.create",
            Method::POST,
            "lbaas/listeners".into(),
            "listener",
            req,
        )
        .await
}

pub async fn get(cloud: &Cloud, id: &str) -> Result<Listener> {
    cloud
        .get_one(
            Service::LoadBalancer,
            "octavia.listeners.show",
            format!("lbaas/listeners/{id}"),
            "listener",
        )
        .await
}

pub async fn list(cloud: &Cloud, query: Vec<(String, String)>) -> Result<Vec<Listener>> {
    cloud
        .list(
            Service::LoadBalancer,
            "octavia.listeners.list",
            "lbaas/listeners",
            "listeners",
            query,
        )
        .await
}

pub async fn delete(cloud: &Cloud, id: &str) -> Result<()> {
    cloud
        .delete_path(
            Service::LoadBalancer,
            "octavia.listeners.delete",
            format!("lbaas/listeners/{id}"),
            Vec::new(),
        )
        .await
}

#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct UpdateListener {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub default_pool_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout_client_data: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout_member_data: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub connection_limit: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allowed_cidrs: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tags: Option<Vec<String>>,
}

/// `PUT /lbaas/listeners/{id}` (e.g. the per-Service timeout annotations). The LB goes PENDING_UPDATE.
pub async fn update(cloud: &Cloud, id: &str, req: &UpdateListener) -> Result<Listener> {
    cloud
        .send_one(
            Service::LoadBalancer,
            "octavia.listeners.update",
            Method::PUT,
            format!("lbaas/listeners/{id}"),
            "listener",
            req,
        )
        .await
}
