//! Floating IPs (Services of type LoadBalancer get one on the external network).

use reqwest::Method;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::tagging::{create_tagged, taggable, Resource};
use super::Filter;
use crate::client::{take, Request};
use crate::errors::{Result, Service};
use crate::Cloud;

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(default)]
pub struct FloatingIp {
    pub id: String,
    pub floating_ip_address: String,
    pub floating_network_id: String,
    pub port_id: Option<String>,
    pub fixed_ip_address: Option<String>,
    pub router_id: Option<String>,
    pub status: String,
    pub description: String,
    pub project_id: String,
    pub tags: Vec<String>,
    /// ISO 8601; empty where the server does not say (the garbage collector's age).
    pub created_at: String,
}

taggable!(FloatingIp);

#[derive(Debug, Clone, Default, Serialize)]
pub struct CreateFloatingIp {
    pub floating_network_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub floating_ip_address: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subnet_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub port_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fixed_ip_address: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub project_id: Option<String>,
}

pub async fn create(cloud: &Cloud, req: &CreateFloatingIp, tags: &[String]) -> Result<FloatingIp> {
    create_tagged(
        cloud,
        Resource::FloatingIps,
        "neutron.floatingips.create",
        req,
        tags,
    )
    .await
}

pub async fn get(cloud: &Cloud, id: &str) -> Result<FloatingIp> {
    cloud
        .get_one(
            Service::Network,
            "neutron.floatingips.show",
            format!("floatingips/{id}"),
            "floatingip",
        )
        .await
}

pub async fn list(cloud: &Cloud, filter: Filter) -> Result<Vec<FloatingIp>> {
    cloud
        .list(
            Service::Network,
            "neutron.floatingips.list",
            "floatingips",
            "floatingips",
            filter.into_query(),
        )
        .await
}

async fn set_port(cloud: &Cloud, id: &str, port: Value, op: &'static str) -> Result<FloatingIp> {
    let resp = cloud
        .execute(
            Request::new(Service::Network, op, Method::PUT, format!("floatingips/{id}"))
                .json(json!({ "floatingip": port })),
        )
        .await?;
    take(
        resp.json(Service::Network, op)?,
        "floatingip",
        Service::Network,
        op,
    )
}

/// Points the FIP at a port (the port's network must be reachable from the external network via a router).
pub async fn associate(cloud: &Cloud, id: &str, port_id: &str, fixed_ip: Option<&str>) -> Result<FloatingIp> {
    let mut body = json!({ "port_id": port_id });
    if let Some(ip) = fixed_ip {
        body["fixed_ip_address"] = json!(ip);
    }
    set_port(cloud, id, body, "neutron.floatingips.associate").await
}

pub async fn disassociate(cloud: &Cloud, id: &str) -> Result<FloatingIp> {
    set_port(
        cloud,
        id,
        json!({ "port_id": null }),
        "neutron.floatingips.disassociate",
    )
    .await
}

pub async fn delete(cloud: &Cloud, id: &str) -> Result<()> {
    cloud
        .delete_path(
            Service::Network,
            "neutron.floatingips.delete",
            format!("floatingips/{id}"),
            Vec::new(),
        )
        .await
}
