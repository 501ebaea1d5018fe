//! Extension discovery, so features are gated on what the cloud says, not assumed.

use std::collections::BTreeSet;

use serde::Deserialize;

use crate::errors::{Error, Result, Service};
use crate::Cloud;

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Extension {
    pub alias: String,
    pub name: String,
    pub description: String,
}

/// `GET /v2.0/extensions`.
pub async fn list(cloud: &Cloud) -> Result<Vec<Extension>> {
    cloud
        .list(
            Service::Network,
            "neutron.extensions.list",
            "extensions",
            "extensions",
            Vec::new(),
        )
        .await
}

/// What kuryr needs to know about a Neutron.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NeutronFeatures {
    pub aliases: BTreeSet<String>,
}

/// Aliases kuryr depends on (nested pods need trunks; ownership needs tags).
pub const REQUIRED: &[&str] = &["trunk", "standard-attr-tag", "security-group", "quotas"];

impl NeutronFeatures {
    pub fn from_aliases<I: IntoIterator<Item = S>, S: Into<String>>(aliases: I) -> Self {
        Self {
            aliases: aliases.into_iter().map(Into::into).collect(),
        }
    }

    pub fn has(&self, alias: &str) -> bool {
        self.aliases.contains(alias)
    }

    pub fn trunk(&self) -> bool {
        self.has("trunk")
    }

    pub fn trunk_details(&self) -> bool {
        self.has("trunk-details")
    }

    /// Tags on every standard resource (`PUT /{resource}/{id}/tags`).
    pub fn tags(&self) -> bool {
        self.has("standard-attr-tag") || self.has("tag-ext") || self.has("tag")
    }

    /// Tags accepted in port create bodies (single and bulk); without it Neutron drops or refuses them.
    pub fn tag_ports_during_bulk_creation(&self) -> bool {
        self.has("tag-ports-during-bulk-creation")
    }

    pub fn port_security(&self) -> bool {
        self.has("port-security")
    }

    pub fn quota_details(&self) -> bool {
        self.has("quota_details")
    }

    pub fn subnet_allocation(&self) -> bool {
        self.has("subnet_allocation")
    }

    /// Required aliases the cloud lacks.
    pub fn missing_required(&self) -> Vec<&'static str> {
        REQUIRED.iter().copied().filter(|a| !self.has(a)).collect()
    }

    /// Fails with `Unsupported` when `alias` is missing.
    pub fn require(&self, op: &'static str, alias: &str) -> Result<()> {
        if self.has(alias) {
            Ok(())
        } else {
            Err(Error::Unsupported {
                service: Service::Network,
                op,
                feature: format!("Neutron extension {alias}"),
            })
        }
    }
}

pub(crate) async fn discover(cloud: &Cloud) -> Result<NeutronFeatures> {
    let exts = list(cloud).await?;
    Ok(NeutronFeatures::from_aliases(exts.into_iter().map(|e| e.alias)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gates_follow_aliases() {
        let f = NeutronFeatures::from_aliases(["trunk", "standard-attr-tag", "security-group"]);
        assert!(f.trunk() && f.tags());
        assert!(!f.tag_ports_during_bulk_creation());
        assert_eq!(f.missing_required(), vec!["quotas"]);
        assert!(f.require("x", "trunk").is_ok());
        assert!(matches!(
            f.require("x", "trunk-details"),
            Err(Error::Unsupported { .. })
        ));
    }
}
