//! Subnet pools (the namespace subnet driver carves each namespace's subnet out of one).

use reqwest::Method;
use serde::{Deserialize, Serialize};

use super::tags::{tag_or_delete, Resource};
use super::Filter;
use crate::errors::{Result, Service};
use crate::Cloud;

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(default)]
pub struct SubnetPool {
    pub id: String,
    pub name: String,
    pub project_id: String,
    pub prefixes: Vec<String>,
    pub default_prefixlen: Option<u8>,
    pub min_prefixlen: Option<u8>,
    pub max_prefixlen: Option<u8>,
    pub ip_version: u8,
    pub shared: bool,
    pub tags: Vec<String>,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct CreateSubnetPool {
    pub name: String,
    pub prefixes: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub default_prefixlen: Option<u8>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_prefixlen: Option<u8>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_prefixlen: Option<u8>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shared: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub project_id: Option<String>,
}

pub async fn create(cloud: &Cloud, req: &CreateSubnetPool, tags: &[String]) -> Result<SubnetPool> {
    let mut p: SubnetPool = cloud
        .send_one(
            Service::Network,
            "neutron.subnetpools.create",
            Method::POST,
            "subnetpools".into(),
            "subnetpool",
            req,
        )
        .await?;
    if !tags.is_empty() {
        p.tags = tag_or_delete(cloud, Resource::SubnetPools, &p.id, tags).await?;
    }
    Ok(p)
}

pub async fn get(cloud: &Cloud, id: &str) -> Result<SubnetPool> {
    cloud
        .get_one(
            Service::Network,
            "neutron.subnetpools.show",
            format!("subnetpools/{id}"),
            "subnetpool",
        )
        .await
}

pub async fn list(cloud: &Cloud, filter: Filter) -> Result<Vec<SubnetPool>> {
    cloud
        .list(
            Service::Network,
            "neutron.subnetpools.list",
            "subnetpools",
            "subnetpools",
            filter.into_query(),
        )
        .await
}

pub async fn delete(cloud: &Cloud, id: &str) -> Result<()> {
    cloud
        .delete_path(
            Service::Network,
            "neutron.subnetpools.delete",
            format!("subnetpools/{id}"),
            Vec::new(),
        )
        .await
}
