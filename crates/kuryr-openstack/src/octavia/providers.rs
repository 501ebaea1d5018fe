//! Enabled Octavia providers (API 2.6+).

use serde::Deserialize;

use crate::errors::{Result, Service};
use crate::Cloud;

#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
#[serde(default)]
pub struct Provider {
    pub name: String,
    pub description: String,
}

pub async fn list(cloud: &Cloud) -> Result<Vec<Provider>> {
    cloud
        .list(
            Service::LoadBalancer,
            "octavia.providers.list",
            "lbaas/providers",
            "providers",
            Vec::new(),
        )
        .await
}
