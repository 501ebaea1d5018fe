//! Load balancers: fully-populated create (one POST for the whole graph), cascade delete.

use reqwest::Method;
use serde::{Deserialize, Serialize};

use super::listeners::CreateListener;
use super::pools::CreatePool;
use super::IdRef;
use crate::errors::{Result, Service};
use crate::Cloud;

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(default)]
pub struct LoadBalancer {
    pub id: String,
    pub name: String,
    pub description: String,
    pub project_id: String,
    pub provider: String,
    pub vip_address: String,
    pub vip_port_id: String,
    pub vip_subnet_id: String,
    pub vip_network_id: String,
    pub provisioning_status: String,
    pub operating_status: String,
    pub admin_state_up: bool,
    pub listeners: Vec<IdRef>,
    pub pools: Vec<IdRef>,
    pub tags: Vec<String>,
    /// ISO 8601; empty where the server does not say (the garbage collector's age).
    pub created_at: String,
}

#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct CreateLoadBalancer {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vip_subnet_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vip_network_id: Option<String>,
    /// A Service's clusterIP, when the service subnet is the cluster IP range.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vip_address: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vip_port_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub project_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub admin_state_up: Option<bool>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
    /// Listeners with their `default_pool` (members, health monitor): the fully-populated graph.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub listeners: Vec<CreateListener>,
    /// Extra pools not attached to a listener.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub pools: Vec<CreatePool>,
}

#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct UpdateLoadBalancer {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub admin_state_up: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tags: Option<Vec<String>>,
}

/// `POST /lbaas/loadbalancers` with the whole graph. Version gates (UDP, SCTP, tags, allowed_cidrs, one
/// port with two protocols, provider) are checked first, so an unsupported body never reaches a provider
/// that would leak its VIP port on the 400. The LB comes back PENDING_CREATE: wait with
/// [`crate::waiter::wait_lb_active`].
pub async fn create(cloud: &Cloud, req: &CreateLoadBalancer) -> Result<LoadBalancer> {
    let op = "octavia.loadbalancers.create";
    for t in req.tags.iter() {
        crate::tags::validate(t)?;
    }
    cloud.octavia_features().await?.check_loadbalancer(op, req)?;
    cloud
        .send_one(
            Service::LoadBalancer,
            op,
            Method::POST,
            "lbaas/loadbalancers".into(),
            "loadbalancer",
            req,
        )
        .await
}

pub async fn get(cloud: &Cloud, id: &str) -> Result<LoadBalancer> {
    cloud
        .get_one(
            Service::LoadBalancer,
            "octavia.loadbalancers.show",
            format!("lbaas/loadbalancers/{id}"),
            "loadbalancer",
        )
        .await
}

/// Filters as query pairs, e.g. `[("tags", "kuryr.cluster=c1")]`, `[("name", ...)]`.
pub async fn list(cloud: &Cloud, query: Vec<(String, String)>) -> Result<Vec<LoadBalancer>> {
    cloud
        .list(
            Service::LoadBalancer,
            "octavia.loadbalancers.list",
            "lbaas/loadbalancers",
            "loadbalancers",
            query,
        )
        .await
}

pub async fn update(cloud: &Cloud, id: &str, req: &UpdateLoadBalancer) -> Result<LoadBalancer> {
    cloud
        .send_one(
            Service::LoadBalancer,
            "octavia.loadbalancers.update",
            Method::PUT,
            format!("lbaas/loadbalancers/{id}"),
            "loadbalancer",
            req,
        )
        .await
}

/// `DELETE /lbaas/loadbalancers/{id}[?cascade=true]`: 204, then PENDING_DELETE until gone (wait with
/// [`crate::waiter::wait_lb_deleted`]). A 404 counts as deleted; PENDING_* (409) is retried.
pub async fn delete(cloud: &Cloud, id: &str, cascade: bool) -> Result<()> {
    let query = if cascade {
        vec![("cascade".to_owned(), "true".to_owned())]
    } else {
        Vec::new()
    };
    cloud
        .delete_path(
            Service::LoadBalancer,
            if cascade {
                "octavia.loadbalancers.cascade_delete"
            } else {
                "octavia.loadbalancers.delete"
            },
            format!("lbaas/loadbalancers/{id}"),
            query,
        )
        .await
}
