//! Health monitors (one per pool at most).

use reqwest::Method;
use serde::{Deserialize, Serialize};

use super::IdRef;
use crate::errors::{Result, Service};
use crate::Cloud;

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(default)]
pub struct HealthMonitor {
    pub id: String,
    pub name: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub delay: u32,
    pub timeout: u32,
    pub max_retries: u32,
    pub max_retries_down: Option<u32>,
    pub http_method: Option<String>,
    pub url_path: Option<String>,
    pub expected_codes: Option<String>,
    pub pools: Vec<IdRef>,
    pub provisioning_status: String,
    pub operating_status: String,
    pub tags: Vec<String>,
}

#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct CreateHealthMonitor {
    /// `TCP`, `HTTP`, `PING`, `UDP-CONNECT`, `SCTP`, ...
    #[serde(rename = "type")]
    pub kind: String,
    pub delay: u32,
    pub timeout: u32,
    pub max_retries: u32,
    /// Only for a standalone create (absent inside a fully-populated body).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pool_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_retries_down: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub http_method: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url_path: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expected_codes: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
}

impl CreateHealthMonitor {
    pub fn tcp(delay: u32, timeout: u32, max_retries: u32) -> Self {
        Self {
            kind: "TCP".to_owned(),
            delay,
            timeout,
            max_retries,
            ..Self::default()
        }
    }
}

pub async fn create(cloud: &Cloud, req: &CreateHealthMonitor) -> Result<HealthMonitor> {
    cloud
        .send_one(
            Service::LoadBalancer,
            "octavia.healthmonitors.create",
            Method::POST,
            "lbaas/healthmonitors".into(),
            "healthmonitor",
            req,
        )
        .await
}

pub async fn get(cloud: &Cloud, id: &str) -> Result<HealthMonitor> {
    cloud
        .get_one(
            Service::LoadBalancer,
            "octavia.healthmonitors.show",
            format!("lbaas/healthmonitors/{id}"),
            "healthmonitor",
        )
        .await
}

pub async fn delete(cloud: &Cloud, id: &str) -> Result<()> {
    cloud
        .delete_path(
            Service::LoadBalancer,
            "octavia.healthmonitors.delete",
            format!("lbaas/healthmonitors/{id}"),
            Vec::new(),
        )
        .await
}

/// What `PUT /healthmonitors/{id}` may change. `type` is fixed at creation (Octavia 19: 400 "Unknown
/// attribute … type").
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct UpdateHealthMonitor {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delay: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_retries: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_retries_down: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub admin_state_up: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tags: Option<Vec<String>>,
}

/// Updates a health monitor; 409 while its pool is not ACTIVE (retried as `pending`).
pub async fn update(cloud: &Cloud, id: &str, req: &UpdateHealthMonitor) -> Result<HealthMonitor> {
    cloud
        .send_one(
            Service::LoadBalancer,
            "octavia.healthmonitors.update",
            Method::PUT,
            format!("lbaas/healthmonitors/{id}"),
            "healthmonitor",
            req,
        )
        .await
}
