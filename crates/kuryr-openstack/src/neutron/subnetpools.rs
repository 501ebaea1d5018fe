//! Subnet pools (the namespace subnet driver carves each namespace's subnet out of one).

use serde::{Deserialize, Serialize};

use super::tagging::{create_tagged, taggable, Resource};
use super::Filter;
use crate::errors::{Result, Service};
use crate::Cloud;

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(default)]
pub struct SubnetPool {
    pub id: String,
    pub name: String,
    pub project_id: String,
    pub prefixes: Vec<String>,
    // Neutron answers prefix lengths as strings ("28"), cloudsim as numbers: both are taken.
    #[serde(deserialize_with = "prefixlen")]
    pub default_prefixlen: Option<u8>,
    #[serde(deserialize_with = "prefixlen")]
    pub min_prefixlen: Option<u8>,
    #[serde(deserialize_with = "prefixlen")]
    pub max_prefixlen: Option<u8>,
    pub ip_version: u8,
    pub shared: bool,
    pub tags: Vec<String>,
}

taggable!(SubnetPool);

#[derive(Debug, Clone, Default, Serialize)]
pub struct CreateSubnetPool {
    pub name: String,
    pub prefixes: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub default_prefixlen: Option<u8>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_prefixlen: Option<u8>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_prefixlen: Option<u8>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shared: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub project_id: Option<String>,
}

fn prefixlen<'de, D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Option<u8>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum NumOrText {
        Num(u8),
        Text(String),
    }
    match Option::<NumOrText>::deserialize(d)? {
        None => Ok(None),
        Some(NumOrText::Num(n)) => Ok(Some(n)),
        Some(NumOrText::Text(t)) => t.parse().map(Some).map_err(serde::de::Error::custom),
    }
}

pub async fn create(cloud: &Cloud, req: &CreateSubnetPool, tags: &[String]) -> Result<SubnetPool> {
    create_tagged(
        cloud,
        Resource::SubnetPools,
        "neutron.subnetpools.create",
        req,
        tags,
    )
    .await
}

pub async fn get(cloud: &Cloud, id: &str) -> Result<SubnetPool> {
    cloud
        .get_one(
            Service::Network,
            "neutron.subnetpools.show",
            format!("subnetpools/{id}"),
            "subnetpool",
        )
        .await
}

pub async fn list(cloud: &Cloud, filter: Filter) -> Result<Vec<SubnetPool>> {
    cloud
        .list(
            Service::Network,
            "neutron.subnetpools.list",
            "subnetpools",
            "subnetpools",
            filter.into_query(),
        )
        .await
}

pub async fn delete(cloud: &Cloud, id: &str) -> Result<()> {
    cloud
        .delete_path(
            Service::Network,
            "neutron.subnetpools.delete",
            format!("subnetpools/{id}"),
            Vec::new(),
        )
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_lengths_decode_from_neutron_strings_and_numbers() {
        let real: SubnetPool = serde_json::from_value(serde_json::json!({
            "id": "p", "default_prefixlen": "28", "min_prefixlen": "8", "max_prefixlen": "32"
        }))
        .unwrap();
        assert_eq!(
            (real.default_prefixlen, real.min_prefixlen, real.max_prefixlen),
            (Some(28), Some(8), Some(32))
        );
        let sim: SubnetPool =
            serde_json::from_value(serde_json::json!({"id": "p", "default_prefixlen": 24})).unwrap();
        assert_eq!((sim.default_prefixlen, sim.min_prefixlen), (Some(24), None));
    }
}
