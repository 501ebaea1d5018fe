//! Project quotas (read for capacity metrics and readiness; written by operators and tests).

use std::collections::BTreeMap;

use reqwest::Method;
use serde::Deserialize;
use serde_json::Value;

use crate::errors::{Result, Service};
use crate::Cloud;

/// `{"port": 500, "network": 100, ...}`; `-1` is unlimited.
pub type Quota = BTreeMap<String, i64>;

#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
#[serde(default)]
pub struct QuotaDetail {
    pub limit: i64,
    pub used: i64,
    pub reserved: i64,
}

impl QuotaDetail {
    /// Free units, `None` when unlimited.
    pub fn free(&self) -> Option<i64> {
        (self.limit >= 0).then(|| (self.limit - self.used - self.reserved).max(0))
    }
}

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
            Service::Network,
            "neutron.quotas.show",
            format!("quotas/{project_id}"),
            "quota",
        )
        .await?;
    Ok(numbers(v))
}

/// Sets the given limits (others unchanged); returns the whole quota.
pub async fn update(cloud: &Cloud, project_id: &str, limits: &Quota) -> Result<Quota> {
    let v: Value = cloud
        .send_one(
            Service::Network,
            "neutron.quotas.update",
            Method::PUT,
            format!("quotas/{project_id}"),
            "quota",
            limits,
        )
        .await?;
    Ok(numbers(v))
}

/// Back to the defaults.
pub async fn reset(cloud: &Cloud, project_id: &str) -> Result<()> {
    cloud
        .delete_path(
            Service::Network,
            "neutron.quotas.reset",
            format!("quotas/{project_id}"),
            Vec::new(),
        )
        .await
}

/// Limit, used and reserved per resource (extension `quota_details`).
pub async fn details(cloud: &Cloud, project_id: &str) -> Result<BTreeMap<String, QuotaDetail>> {
    cloud
        .get_one(
            Service::Network,
            "neutron.quotas.details",
            format!("quotas/{project_id}/details"),
            "quota",
        )
        .await
}
