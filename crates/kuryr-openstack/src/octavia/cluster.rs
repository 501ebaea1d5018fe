//! Everything of one cluster in Octavia, in one list call per kind: load balancers, listeners, pools and
//! health monitors carrying a tag (`?tags=kuryr.cluster=<id>`), however many load balancers there are.
//! Members are per pool in Octavia (no cluster-wide list); a pool lists its members' ids.
//!
//! Checked against Octavia 19 (the lab): `tags` (all of), `tags-any` and single-valued attribute filters
//! work on all four; a repeated attribute key (`?id=a&id=b`, `?provisioning_status=A&provisioning_status=B`)
//! is a 500 (the value reaches SQL as a row), so several objects cannot be named in one call; an unknown
//! filter is a 400. A list pages at `pagination_max_limit` (1000), and the `next` link Octavia writes
//! keeps `limit` and the marker but **drops the filters**: following it lists the whole project. So the
//! pages are asked for here with the filters and `marker` = the last id.

use reqwest::Method;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::healthmonitors::HealthMonitor;
use super::listeners::Listener;
use super::loadbalancers::LoadBalancer;
use super::pools::Pool;
use crate::client::{decode, Request};
use crate::errors::{Result, Service};
use crate::Cloud;

/// Upper bound on pages one list follows (1000 objects each at Octavia's default).
const MAX_PAGES: usize = 1000;

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
    let path = format!("lbaas/{kind}");
    let mut out = Vec::new();
    let mut marker: Option<String> = None;
    for _ in 0..MAX_PAGES {
        let mut query = filters.clone();
        query.extend(marker.iter().map(|m| ("marker".to_owned(), m.clone())));
        let resp = cloud
            .execute(Request::new(Service::LoadBalancer, op, Method::GET, path.clone()).query(query))
            .await?;
        let mut body = resp.json(Service::LoadBalancer, op)?;
        let more = has_next(&body, kind);
        let page = body.get_mut(kind).map(Value::take).unwrap_or(Value::Null);
        let last = page
            .as_array()
            .and_then(|a| a.last())
            .and_then(|v| v.get("id"))
            .and_then(Value::as_str)
            .map(str::to_owned);
        let items: Vec<T> = decode(page, Service::LoadBalancer, op)?;
        out.extend(items);
        match last {
            Some(id) if more && marker.as_deref() != Some(id.as_str()) => marker = Some(id),
            _ => return Ok(out),
        }
    }
    Ok(out)
}

/// Whether `<kind>_links` has a `next` link (Octavia writes one whenever a page is full).
fn has_next(body: &Value, kind: &str) -> bool {
    body.get(format!("{kind}_links"))
        .and_then(Value::as_array)
        .is_some_and(|links| {
            links
                .iter()
                .any(|l| l.get("rel").and_then(Value::as_str) == Some("next"))
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_a_next_link_means_another_page() {
        assert!(has_next(
            &json!({"pools_links": [{"rel": "next", "href": "http://x/v2/lbaas/pools?limit=1000&marker=p9"}]}),
            "pools"
        ));
        assert!(!has_next(
            &json!({"pools_links": [{"rel": "previous", "href": "x"}]}),
            "pools"
        ));
        assert!(!has_next(&json!({"pools": []}), "pools"));
    }
}
