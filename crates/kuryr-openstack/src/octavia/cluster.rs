//! Everything of one cluster in Octavia, in one list call per kind: load balancers, listeners, pools and
//! health monitors carrying a tag (`?tags=kuryr.cluster=<id>`), however many load balancers there are.
//! Members are per pool in Octavia (no cluster-wide list); a pool lists its members' ids.
//!
//! Checked against Octavia 19 (the lab): `tags` (all of), `tags-any` and single-valued attribute filters
//! work on all four; a repeated attribute key (`?id=a&id=b`, `?provisioning_status=A&provisioning_status=B`)
//! is a 500 (the value reaches SQL as a row), so several objects cannot be named in one call; an unknown
//! filter is a 400. A list pages at `pagination_max_limit` (1000), and the `next` link Octavia writes
//! keeps `limit` and the marker but **drops the filters**: following it lists the whole project. The
//! client's `list` therefore asks each page with the filters and the link's paging.

use serde::de::DeserializeOwned;

use super::healthmonitors::HealthMonitor;
use super::listeners::Listener;
use super::loadbalancers::LoadBalancer;
use super::pools::Pool;
use crate::errors::{Result, Service};
use crate::Cloud;

/// What the lists showed, each kind as Octavia answered.
#[derive(Debug, Clone, Default)]
pub struct Listing {
    pub loadbalancers: Vec<LoadBalancer>,
    pub listeners: Vec<Listener>,
    pub pools: Vec<Pool>,
    pub healthmonitors: Vec<HealthMonitor>,
}

/// Lists the four kinds carrying `tag`. Health monitors only when a listed pool has one (they are the
/// pools' children: none to list otherwise).
pub async fn list(cloud: &Cloud, tag: &str) -> Result<Listing> {
    let filter = || vec![("tags".to_owned(), tag.to_owned())];
    let loadbalancers = tagged(cloud, "octavia.loadbalancers.list", "loadbalancers", filter()).await?;
    let listeners = tagged(cloud, "octavia.listeners.list", "listeners", filter()).await?;
    let pools: Vec<Pool> = tagged(cloud, "octavia.pools.list", "pools", filter()).await?;
    let monitored = pools
        .iter()
        .any(|p| p.healthmonitor_id.as_deref().is_some_and(|h| !h.is_empty()));
    let healthmonitors = if monitored {
        tagged(cloud, "octavia.healthmonitors.list", "healthmonitors", filter()).await?
    } else {
        Vec::new()
    };
    Ok(Listing {
        loadbalancers,
        listeners,
        pools,
        healthmonitors,
    })
}

/// `GET /lbaas/{kind}?{filters}`, every page, the filters repeated on each (see the module doc).
pub async fn tagged<T: DeserializeOwned>(
    cloud: &Cloud,
    op: &'static str,
    kind: &str,
    filters: Vec<(String, String)>,
) -> Result<Vec<T>> {
    cloud
        .list(Service::LoadBalancer, op, &format!("lbaas/{kind}"), kind, filters)
        .await
}
