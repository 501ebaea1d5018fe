//! Octavia project quotas (`/v2/lbaas/quotas/{project_id}`). Octavia 19 answers every resource under two
//! spellings (`load_balancer` and `loadbalancer`, …), -1 meaning unlimited. A create over the limit is 403
//! "Quota has been met for resources: Load Balancer": `Error::is_over_quota()`, retried with backoff up to
//! `retry.over_quota_attempts` like Neutron's OverQuota, since a delete elsewhere can free a slot.

use reqwest::Method;
use serde_json::Value;

use crate::errors::{Result, Service};
use crate::neutron::quotas::Quota;
use crate::Cloud;

fn numbers(v: Value) -> Quota {
    match v {
        Value::Object(m) => m
            .into_iter()
            .filter_map(|(k, v)| v.as_i64().map(|n| (k, n)))
            .collect(),
        _ => Quota::new(),
    }
}

pub async fn get(cloud: &Cloud, project_id: &str) -> Result<Quota> {
    let v: Value = cloud
        .get_one(
            Service::LoadBalancer,
            "octavia.quotas.show",
            format!("lbaas/quotas/{project_id}"),
            "quota",
        )
        .await?;
    Ok(numbers(v))
}

/// Sets the given limits (e.g. `load_balancer`), others unchanged; answered 202 with the whole quota.
pub async fn update(cloud: &Cloud, project_id: &str, limits: &Quota) -> Result<Quota> {
    let v: Value = cloud
        .send_one(
            Service::LoadBalancer,
            "octavia.quotas.update",
            Method::PUT,
            format!("lbaas/quotas/{project_id}"),
            "quota",
            limits,
        )
        .await?;
    Ok(numbers(v))
}

/// Back to the defaults (202).
pub async fn reset(cloud: &Cloud, project_id: &str) -> Result<()> {
    cloud
        .delete_path(
            Service::LoadBalancer,
            "octavia.quotas.reset",
            format!("lbaas/quotas/{project_id}"),
            Vec::new(),
        )
        .await
}
