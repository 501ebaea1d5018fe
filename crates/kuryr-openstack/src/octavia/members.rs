//! Members: pods behind a pool. `batch_replace` sets a pool's whole member list in one call
//! (`PUT /pools/{id}/members`, API 2.1+), instead of upstream's one serialized call per member; `batch_add`
//! grows it without touching the rest, for member sets larger than one request body.

use reqwest::Method;
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::client::Request;
use crate::errors::{Result, Service};
use crate::Cloud;

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(default)]
pub struct Member {
    pub id: String,
    pub name: String,
    pub address: String,
    pub protocol_port: u32,
    pub subnet_id: Option<String>,
    pub weight: Option<u32>,
    pub backup: bool,
    pub monitor_address: Option<String>,
    pub monitor_port: Option<u32>,
    pub provisioning_status: String,
    pub operating_status: String,
    pub admin_state_up: bool,
    pub tags: Vec<String>,
}

#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct CreateMember {
    pub address: String,
    pub protocol_port: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subnet_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub weight: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backup: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub monitor_address: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub monitor_port: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub admin_state_up: Option<bool>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
}

impl CreateMember {
    pub fn new(address: impl Into<String>, port: u32) -> Self {
        Self {
            address: address.into(),
            protocol_port: port,
            ..Self::default()
        }
    }

    pub fn on_subnet(mut self, subnet_id: impl Into<String>) -> Self {
        self.subnet_id = Some(subnet_id.into());
        self
    }

    pub fn named(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }
}

pub async fn create(cloud: &Cloud, pool_id: &str, req: &CreateMember) -> Result<Member> {
    cloud
        .send_one(
            Service::LoadBalancer,
            "octavia.members.create",
            Method::POST,
            format!("lbaas/pools/{pool_id}/members"),
            "member",
            req,
        )
        .await
}

pub async fn get(cloud: &Cloud, pool_id: &str, id: &str) -> Result<Member> {
    cloud
        .get_one(
            Service::LoadBalancer,
            "octavia.members.show",
            format!("lbaas/pools/{pool_id}/members/{id}"),
            "member",
        )
        .await
}

pub async fn list(cloud: &Cloud, pool_id: &str) -> Result<Vec<Member>> {
    cloud
        .list(
            Service::LoadBalancer,
            "octavia.members.list",
            &format!("lbaas/pools/{pool_id}/members"),
            "members",
            Vec::new(),
        )
        .await
}

pub async fn delete(cloud: &Cloud, pool_id: &str, id: &str) -> Result<()> {
    cloud
        .delete_path(
            Service::LoadBalancer,
            "octavia.members.delete",
            format!("lbaas/pools/{pool_id}/members/{id}"),
            Vec::new(),
        )
        .await
}

/// Makes `members` the pool's exact member set (matched by address + port: existing ones are kept or
/// updated, missing ones created, others deleted). Answered with 202; the LB goes PENDING_UPDATE until the
/// provider is done — wait on the status tree.
pub async fn batch_replace(cloud: &Cloud, pool_id: &str, members: &[CreateMember]) -> Result<()> {
    cloud
        .execute(
            Request::new(
                Service::LoadBalancer,
                "octavia.members.batch_update",
                Method::PUT,
                format!("lbaas/pools/{pool_id}/members"),
            )
            .json(json!({ "members": members })),
        )
        .await
        .map(|_| ())
}

/// Adds or updates `members` and leaves the pool's other members alone (`PUT /pools/{id}/members
/// ?additive_only=true`, API 2.11+): how a member set too large for one body grows, a body at a time.
pub async fn batch_add(cloud: &Cloud, pool_id: &str, members: &[CreateMember]) -> Result<()> {
    let op = "octavia.members.batch_add";
    if !cloud.octavia_features().await?.additive_member_batch() {
        return Err(crate::Error::Unsupported {
            service: Service::LoadBalancer,
            op,
            feature: "additive_only member batch updates (Octavia API 2.11)".into(),
        });
    }
    cloud
        .execute(
            Request::new(
                Service::LoadBalancer,
                op,
                Method::PUT,
                format!("lbaas/pools/{pool_id}/members"),
            )
            .query(vec![("additive_only".to_owned(), "true".to_owned())])
            .json(json!({ "members": members })),
        )
        .await
        .map(|_| ())
}

/// What `PUT /pools/{pool_id}/members/{id}` may change. Octavia 19 refuses `address`, `protocol_port` and
/// `subnet_id` here (400 "Unknown attribute"); a weight above 256 is 400.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct UpdateMember {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub weight: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backup: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub admin_state_up: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tags: Option<Vec<String>>,
}

/// Updates one member. The LB goes PENDING_UPDATE; while the pool is not ACTIVE the call is 409 ("Pool … is
/// immutable"), which is retried as `pending`.
pub async fn update(cloud: &Cloud, pool_id: &str, id: &str, req: &UpdateMember) -> Result<Member> {
    cloud
        .send_one(
            Service::LoadBalancer,
            "octavia.members.update",
            Method::PUT,
            format!("lbaas/pools/{pool_id}/members/{id}"),
            "member",
            req,
        )
        .await
}
