//! Load balancers: fully-populated create (one POST for the whole graph), cascade delete.

use reqwest::Method;
use serde::{Deserialize, Serialize};

use serde_json::Value;

use super::healthmonitors::HealthMonitor;
use super::listeners::{CreateListener, Listener};
use super::members::Member;
use super::pools::{CreatePool, SessionPersistence};
use super::IdRef;
use crate::client::decode;
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
    /// VIPs besides the first (API 2.26): dual-stack load balancers have one of the other IP family.
    pub additional_vips: Vec<AdditionalVip>,
    pub provisioning_status: String,
    pub operating_status: String,
    pub admin_state_up: bool,
    pub listeners: Vec<IdRef>,
    pub pools: Vec<IdRef>,
    pub tags: Vec<String>,
    /// ISO 8601; empty where the server does not say (the garbage collector's age).
    pub created_at: String,
}

/// One of a load balancer's `additional_vips`.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(default)]
pub struct AdditionalVip {
    pub subnet_id: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub ip_address: String,
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
    /// More VIPs on other subnets of the VIP's network (API 2.26; left out when empty).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub additional_vips: Vec<AdditionalVip>,
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

/// What a fully-populated create answers besides the load balancer itself: the graph it made (Octavia's
/// `LoadBalancerFullResponse`: listeners, pools with their members and health monitor), so the caller
/// knows every id and attribute without reading them back. A server that answers with ids only leaves
/// the attributes empty: see [`Graph::is_complete`].
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(default)]
pub struct Graph {
    pub listeners: Vec<Listener>,
    pub pools: Vec<GraphPool>,
}

#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(default)]
pub struct GraphPool {
    pub id: String,
    pub name: String,
    pub protocol: String,
    pub lb_algorithm: String,
    pub listeners: Vec<IdRef>,
    pub healthmonitor_id: Option<String>,
    pub session_persistence: Option<SessionPersistence>,
    pub members: Vec<Member>,
    pub healthmonitor: Option<HealthMonitor>,
}

impl Graph {
    /// Whether every object came with its attributes (not just its id).
    pub fn is_complete(&self) -> bool {
        self.listeners.iter().all(|l| !l.protocol.is_empty())
            && self.pools.iter().all(|p| {
                !p.lb_algorithm.is_empty()
                    && p.members.iter().all(|m| !m.address.is_empty())
                    && match (&p.healthmonitor_id, &p.healthmonitor) {
                        (Some(id), Some(h)) => h.id == *id && !h.kind.is_empty(),
                        (Some(id), None) => id.is_empty(),
                        (None, _) => true,
                    }
            })
    }
}

/// `POST /lbaas/loadbalancers` with the whole graph. Version gates (UDP, SCTP, tags, allowed_cidrs, one
/// port with two protocols, provider) are checked first, so an unsupported body never reaches a provider
/// that would leak its VIP port on the 400. The LB comes back PENDING_CREATE: wait with
/// [`crate::waiter::wait_lb_active`].
pub async fn create(cloud: &Cloud, req: &CreateLoadBalancer) -> Result<LoadBalancer> {
    Ok(create_graph(cloud, req).await?.0)
}

/// [`create`], also returning the graph the answer describes.
pub async fn create_graph(cloud: &Cloud, req: &CreateLoadBalancer) -> Result<(LoadBalancer, Graph)> {
    let op = "octavia.loadbalancers.create";
    for t in req.tags.iter() {
        crate::ownership::validate(t)?;
    }
    cloud.octavia_features().await?.check_loadbalancer(op, req)?;
    let v: Value = cloud
        .send_one(
            Service::LoadBalancer,
            op,
            Method::POST,
            "lbaas/loadbalancers".into(),
            "loadbalancer",
            req,
        )
        .await?;
    let lb: LoadBalancer = match decode(v.clone(), Service::LoadBalancer, op) {
        Ok(lb) => lb,
        Err(e) => {
            // As `send_one` does for a typed answer: not left behind unknown.
            if let Some(id) = v.get("id").and_then(Value::as_str) {
                tracing::error!(op, id, error = %e, "created but unreadable; deleting it again");
                let _ = delete(cloud, id, true).await;
            }
            return Err(e);
        }
    };
    // The graph is a bonus: an answer it cannot be read from still made the load balancer.
    let graph = decode(v, Service::LoadBalancer, op).unwrap_or_default();
    Ok((lb, graph))
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
