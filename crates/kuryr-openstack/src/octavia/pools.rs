//! Pools (one per listener in kuryr; members are the pods).

use reqwest::Method;
use serde::{Deserialize, Serialize};

use super::healthmonitors::CreateHealthMonitor;
use super::members::CreateMember;
use super::IdRef;
use crate::errors::{Result, Service};
use crate::Cloud;

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(default)]
pub struct SessionPersistence {
    /// `SOURCE_IP`, `HTTP_COOKIE`, `APP_COOKIE`.
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cookie_name: Option<String>,
    /// Seconds; UDP and SCTP pools only (Octavia answers 400 on others). The ovn provider sets OVN's
    /// `affinity_timeout` from it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub persistence_timeout: Option<u32>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(default)]
pub struct Pool {
    pub id: String,
    pub name: String,
    pub protocol: String,
    pub lb_algorithm: String,
    pub listeners: Vec<IdRef>,
    pub loadbalancers: Vec<IdRef>,
    pub members: Vec<IdRef>,
    pub healthmonitor_id: Option<String>,
    pub session_persistence: Option<SessionPersistence>,
    pub provisioning_status: String,
    pub operating_status: String,
    pub tags: Vec<String>,
}

#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct CreatePool {
    /// The ovn provider refuses unnamed pools in a fully-populated create (and leaks the VIP port).
    pub name: String,
    pub protocol: String,
    /// `ROUND_ROBIN`, `LEAST_CONNECTIONS`, `SOURCE_IP`, `SOURCE_IP_PORT` (the only one ovn supports).
    pub lb_algorithm: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub listener_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub loadbalancer_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_persistence: Option<SessionPersistence>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub members: Vec<CreateMember>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub healthmonitor: Option<CreateHealthMonitor>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
}

impl CreatePool {
    pub fn new(
        name: impl Into<String>,
        protocol: impl Into<String>,
        lb_algorithm: impl Into<String>,
    ) -> Self {
        Self {
            name: name.into(),
            protocol: protocol.into(),
            lb_algorithm: lb_algorithm.into(),
            ..Self::default()
        }
    }
}

pub async fn create(cloud: &Cloud, req: &CreatePool) -> Result<Pool> {
    cloud
        .send_one(
            Service::LoadBalancer,
            "octavia.pools.create",
            Method::POST,
            "lbaas/pools".into(),
            "pool",
            req,
        )
        .await
}

pub async fn get(cloud: &Cloud, id: &str) -> Result<Pool> {
    cloud
        .get_one(
            Service::LoadBalancer,
            "octavia.pools.show",
            format!("lbaas/pools/{id}"),
            "pool",
        )
        .await
}

pub async fn list(cloud: &Cloud, query: Vec<(String, String)>) -> Result<Vec<Pool>> {
    cloud
        .list(
            Service::LoadBalancer,
            "octavia.pools.list",
            "lbaas/pools",
            "pools",
            query,
        )
        .await
}

pub async fn delete(cloud: &Cloud, id: &str) -> Result<()> {
    cloud
        .delete_path(
            Service::LoadBalancer,
            "octavia.pools.delete",
            format!("lbaas/pools/{id}"),
            Vec::new(),
        )
        .await
}

#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct UpdatePool {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lb_algorithm: Option<String>,
    /// The ovn provider fails an update that carries `session_persistence` without this (its handler reads
    /// it unconditionally): the pool ends in ERROR.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub admin_state_up: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_persistence: Option<SessionPersistence>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tags: Option<Vec<String>>,
}

/// `PUT /lbaas/pools/{id}` (e.g. sessionAffinity: ClientIP -> SOURCE_IP persistence).
pub async fn update(cloud: &Cloud, id: &str, req: &UpdatePool) -> Result<Pool> {
    cloud
        .send_one(
            Service::LoadBalancer,
            "octavia.pools.update",
            Method::PUT,
            format!("lbaas/pools/{id}"),
            "pool",
            req,
        )
        .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn persistence_timeout_is_sent_only_when_set_and_read_back() {
        let tcp = SessionPersistence {
            kind: "SOURCE_IP".into(),
            ..SessionPersistence::default()
        };
        assert_eq!(
            serde_json::to_value(&tcp).ok(),
            Some(json!({"type": "SOURCE_IP"}))
        );
        let udp = SessionPersistence {
            persistence_timeout: Some(600),
            ..tcp.clone()
        };
        assert_eq!(
            serde_json::to_value(&udp).ok(),
            Some(json!({"type": "SOURCE_IP", "persistence_timeout": 600}))
        );
        // As Octavia answers: every attribute, unset ones null.
        let read: SessionPersistence =
            serde_json::from_value(json!({"type": "SOURCE_IP", "cookie_name": null,
            "persistence_timeout": 600, "persistence_granularity": null}))
            .expect("session_persistence");
        assert_eq!(read, udp);
    }
}
