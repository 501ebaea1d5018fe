//! Neutron tags (`standard-attr-tag`): replace, add, remove, read. Neutron 29 refuses `tags` in create
//! bodies (400 "Attribute 'tags' not allowed in POST") except on ports with
//! `tag-ports-during-bulk-creation`, so creates here are followed by a tag call.

use reqwest::Method;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::client::Request;
use crate::errors::{Result, Service};
use crate::Cloud;

/// Taggable Neutron collections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resource {
    Networks,
    Subnets,
    SubnetPools,
    Ports,
    Routers,
    SecurityGroups,
    FloatingIps,
    Trunks,
}

impl Resource {
    pub fn collection(self) -> &'static str {
        match self {
            Resource::Networks => "networks",
            Resource::Subnets => "subnets",
            Resource::SubnetPools => "subnetpools",
            Resource::Ports => "ports",
            Resource::Routers => "routers",
            Resource::SecurityGroups => "security-groups",
            Resource::FloatingIps => "floatingips",
            Resource::Trunks => "trunks",
        }
    }

    /// The key one object of the collection is sent and answered under.
    pub fn member(self) -> &'static str {
        match self {
            Resource::Networks => "network",
            Resource::Subnets => "subnet",
            Resource::SubnetPools => "subnetpool",
            Resource::Ports => "port",
            Resource::Routers => "router",
            Resource::SecurityGroups => "security_group",
            Resource::FloatingIps => "floatingip",
            Resource::Trunks => "trunk",
        }
    }
}

/// A Neutron object that takes its tags after its create (see [`create_tagged`]).
pub(crate) trait Taggable {
    fn id(&self) -> &str;
    fn set_tags(&mut self, tags: Vec<String>);
}

/// `impl Taggable` for wire types with `id` and `tags` fields.
macro_rules! taggable {
    ($($t:ty),+) => {
        $(impl $crate::neutron::tagging::Taggable for $t {
            fn id(&self) -> &str {
                &self.id
            }
            fn set_tags(&mut self, tags: Vec<String>) {
                self.tags = tags;
            }
        })+
    };
}
pub(crate) use taggable;

/// `POST /{collection}` with `req`, then the tags: the one create of every taggable object. Nothing is left
/// untagged: when tagging fails the object is deleted again ([`tag_or_delete`]).
pub(crate) async fn create_tagged<B: Serialize, T: DeserializeOwned + Taggable>(
    cloud: &Cloud,
    res: Resource,
    op: &'static str,
    req: &B,
    tags: &[String],
) -> Result<T> {
    let mut made: T = cloud
        .send_one(
            Service::Network,
            op,
            Method::POST,
            res.collection().into(),
            res.member(),
            req,
        )
        .await?;
    if !tags.is_empty() {
        let tags = tag_or_delete(cloud, res, made.id(), tags).await?;
        made.set_tags(tags);
    }
    Ok(made)
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct Tags {
    tags: Vec<String>,
}

/// `PUT /{collection}/{id}/tags`: the object's tags become exactly `tags`.
pub async fn replace(cloud: &Cloud, res: Resource, id: &str, tags: &[String]) -> Result<Vec<String>> {
    for t in tags {
        crate::ownership::validate(t)?;
    }
    let op = "neutron.tags.replace";
    let resp = cloud
        .execute(
            Request::new(
                Service::Network,
                op,
                Method::PUT,
                format!("{}/{id}/tags", res.collection()),
            )
            .json(json!({ "tags": tags })),
        )
        .await?;
    let parsed: Tags = serde_json::from_value(resp.json(Service::Network, op)?).unwrap_or_default();
    Ok(parsed.tags)
}

/// `GET /{collection}/{id}/tags`.
pub async fn get(cloud: &Cloud, res: Resource, id: &str) -> Result<Vec<String>> {
    cloud
        .get_one(
            Service::Network,
            "neutron.tags.list",
            format!("{}/{id}/tags", res.collection()),
            "tags",
        )
        .await
}

/// `PUT /{collection}/{id}/tags/{tag}`.
pub async fn add(cloud: &Cloud, res: Resource, id: &str, tag: &str) -> Result<()> {
    crate::ownership::validate(tag)?;
    cloud
        .execute(Request::new(
            Service::Network,
            "neutron.tags.add",
            Method::PUT,
            format!("{}/{id}/tags/{tag}", res.collection()),
        ))
        .await
        .map(|_| ())
}

/// `DELETE /{collection}/{id}/tags/{tag}`; a missing tag is fine.
pub async fn remove(cloud: &Cloud, res: Resource, id: &str, tag: &str) -> Result<()> {
    crate::ownership::validate(tag)?;
    cloud
        .delete_path(
            Service::Network,
            "neutron.tags.remove",
            format!("{}/{id}/tags/{tag}", res.collection()),
            Vec::new(),
        )
        .await
}

/// Tags a just-created object; if that fails the object is deleted again, so nothing untagged (and so
/// invisible to garbage collection) is left behind.
async fn tag_or_delete(cloud: &Cloud, res: Resource, id: &str, tags: &[String]) -> Result<Vec<String>> {
    if tags.is_empty() {
        return Ok(Vec::new());
    }
    match replace(cloud, res, id, tags).await {
        Ok(t) => Ok(t),
        Err(e) => {
            let del_op = "neutron.tags.rollback_delete";
            if let Err(d) = cloud
                .delete_path(
                    Service::Network,
                    del_op,
                    format!("{}/{id}", res.collection()),
                    Vec::new(),
                )
                .await
            {
                tracing::error!(id, error = %d, "could not delete an object whose tagging failed");
            }
            Err(e)
        }
    }
}
