//! Routers: namespace subnets are attached to the cluster router; the ovn Octavia provider needs one on
//! the VIP subnet.

use reqwest::Method;
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::tagging::{create_tagged, taggable, Resource};
use super::Filter;
use crate::client::Request;
use crate::errors::{Result, Service};
use crate::Cloud;

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(default)]
pub struct GatewayInfo {
    pub network_id: String,
    /// Never sent as null: Neutron refuses `"enable_snat": null` (400).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enable_snat: Option<bool>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(default)]
pub struct Router {
    pub id: String,
    pub name: String,
    pub project_id: String,
    pub status: String,
    pub admin_state_up: bool,
    pub external_gateway_info: Option<GatewayInfo>,
    pub tags: Vec<String>,
}

taggable!(Router);

#[derive(Debug, Clone, Default, Serialize)]
pub struct CreateRouter {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub external_gateway_info: Option<GatewayInfo>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub project_id: Option<String>,
}

/// What add/remove_router_interface answer.
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
#[serde(default)]
pub struct RouterInterface {
    pub id: String,
    pub subnet_id: String,
    pub port_id: String,
    pub network_id: String,
}

/// Which side of the interface to name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Interface {
    Subnet(String),
    Port(String),
}

impl Interface {
    fn body(&self) -> serde_json::Value {
        match self {
            Interface::Subnet(id) => json!({ "subnet_id": id }),
            Interface::Port(id) => json!({ "port_id": id }),
        }
    }
}

pub async fn create(cloud: &Cloud, req: &CreateRouter, tags: &[String]) -> Result<Router> {
    create_tagged(cloud, Resource::Routers, "neutron.routers.create", req, tags).await
}

pub async fn get(cloud: &Cloud, id: &str) -> Result<Router> {
    cloud
        .get_one(
            Service::Network,
            "neutron.routers.show",
            format!("routers/{id}"),
            "router",
        )
        .await
}

pub async fn list(cloud: &Cloud, filter: Filter) -> Result<Vec<Router>> {
    cloud
        .list(
            Service::Network,
            "neutron.routers.list",
            "routers",
            "routers",
            filter.into_query(),
        )
        .await
}

pub async fn delete(cloud: &Cloud, id: &str) -> Result<()> {
    cloud
        .delete_path(
            Service::Network,
            "neutron.routers.delete",
            format!("routers/{id}"),
            Vec::new(),
        )
        .await
}

/// `PUT /routers/{id}/add_router_interface`.
pub async fn add_interface(cloud: &Cloud, router_id: &str, iface: &Interface) -> Result<RouterInterface> {
    let op = "neutron.routers.add_interface";
    let resp = cloud
        .execute(
            Request::new(
                Service::Network,
                op,
                Method::PUT,
                format!("routers/{router_id}/add_router_interface"),
            )
            .json(iface.body()),
        )
        .await?;
    crate::client::decode(resp.json(Service::Network, op)?, Service::Network, op)
}

/// `PUT /routers/{id}/remove_router_interface`. A 404 (interface or router already gone) is success.
pub async fn remove_interface(cloud: &Cloud, router_id: &str, iface: &Interface) -> Result<()> {
    let op = "neutron.routers.remove_interface";
    match cloud
        .execute(
            Request::new(
                Service::Network,
                op,
                Method::PUT,
                format!("routers/{router_id}/remove_router_interface"),
            )
            .json(iface.body()),
        )
        .await
    {
        Ok(_) => Ok(()),
        Err(e) if e.is_not_found() => Ok(()),
        Err(e) => Err(e),
    }
}
