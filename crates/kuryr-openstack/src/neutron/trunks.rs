//! Trunks (extension `trunk`): a VM's parent port carries pods' ports as VLAN subports. The SDK has no
//! create/add/remove for these, so they are plain calls here.

use reqwest::Method;
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::tagging::{create_tagged, taggable, Resource};
use super::Filter;
use crate::client::{take, Request};
use crate::errors::{Result, Service};
use crate::Cloud;

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(default)]
pub struct SubPort {
    pub port_id: String,
    pub segmentation_type: String,
    pub segmentation_id: u32,
}

impl SubPort {
    pub fn vlan(port_id: impl Into<String>, vlan_id: u32) -> Self {
        Self {
            port_id: port_id.into(),
            segmentation_type: "vlan".to_owned(),
            segmentation_id: vlan_id,
        }
    }
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(default)]
pub struct Trunk {
    pub id: String,
    pub name: String,
    pub port_id: String,
    pub project_id: String,
    pub status: String,
    pub admin_state_up: bool,
    pub sub_ports: Vec<SubPort>,
    pub tags: Vec<String>,
    pub revision_number: u64,
}

taggable!(Trunk);

#[derive(Debug, Clone, Default, Serialize)]
pub struct CreateTrunk {
    pub port_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub sub_ports: Vec<SubPort>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub project_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub admin_state_up: Option<bool>,
}

async fn require_trunk(cloud: &Cloud, op: &'static str) -> Result<()> {
    cloud.neutron_features().await?.require(op, "trunk")
}

pub async fn create(cloud: &Cloud, req: &CreateTrunk, tags: &[String]) -> Result<Trunk> {
    let op = "neutron.trunks.create";
    require_trunk(cloud, op).await?;
    create_tagged(cloud, Resource::Trunks, op, req, tags).await
}

pub async fn get(cloud: &Cloud, id: &str) -> Result<Trunk> {
    cloud
        .get_one(
            Service::Network,
            "neutron.trunks.show",
            format!("trunks/{id}"),
            "trunk",
        )
        .await
}

pub async fn list(cloud: &Cloud, filter: Filter) -> Result<Vec<Trunk>> {
    cloud
        .list(
            Service::Network,
            "neutron.trunks.list",
            "trunks",
            "trunks",
            filter.into_query(),
        )
        .await
}

/// A 404 counts as deleted. Neutron refuses (409) to delete a trunk whose parent is bound to a VM.
pub async fn delete(cloud: &Cloud, id: &str) -> Result<()> {
    cloud
        .delete_path(
            Service::Network,
            "neutron.trunks.delete",
            format!("trunks/{id}"),
            Vec::new(),
        )
        .await
}

fn decode_trunk(v: serde_json::Value, op: &'static str) -> Result<Trunk> {
    // add/remove_subports answer with the trunk itself, not wrapped in {"trunk": ...}.
    let v = match v.get("trunk") {
        Some(inner) => inner.clone(),
        None => v,
    };
    crate::client::decode(v, Service::Network, op)
}

/// `PUT /trunks/{id}/add_subports`. A VLAN id already used on this trunk is a 409 (not retried).
pub async fn add_subports(cloud: &Cloud, trunk_id: &str, subports: &[SubPort]) -> Result<Trunk> {
    let op = "neutron.trunks.add_subports";
    let resp = cloud
        .execute(
            Request::new(
                Service::Network,
                op,
                Method::PUT,
                format!("trunks/{trunk_id}/add_subports"),
            )
            .json(json!({ "sub_ports": subports })),
        )
        .await?;
    decode_trunk(resp.json(Service::Network, op)?, op)
}

/// `PUT /trunks/{id}/remove_subports`.
pub async fn remove_subports(cloud: &Cloud, trunk_id: &str, port_ids: &[String]) -> Result<Trunk> {
    let op = "neutron.trunks.remove_subports";
    let body: Vec<_> = port_ids.iter().map(|p| json!({ "port_id": p })).collect();
    let resp = cloud
        .execute(
            Request::new(
                Service::Network,
                op,
                Method::PUT,
                format!("trunks/{trunk_id}/remove_subports"),
            )
            .json(json!({ "sub_ports": body })),
        )
        .await?;
    decode_trunk(resp.json(Service::Network, op)?, op)
}

/// `GET /trunks/{id}/get_subports`.
pub async fn get_subports(cloud: &Cloud, trunk_id: &str) -> Result<Vec<SubPort>> {
    let op = "neutron.trunks.get_subports";
    let resp = cloud
        .execute(Request::new(
            Service::Network,
            op,
            Method::GET,
            format!("trunks/{trunk_id}/get_subports"),
        ))
        .await?;
    take(
        resp.json(Service::Network, op)?,
        "sub_ports",
        Service::Network,
        op,
    )
}

/// VLAN ids in use on a trunk.
pub fn used_vlans(trunk: &Trunk) -> std::collections::BTreeSet<u32> {
    trunk
        .sub_ports
        .iter()
        .filter(|s| s.segmentation_type == "vlan")
        .map(|s| s.segmentation_id)
        .collect()
}
