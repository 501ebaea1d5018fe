//! Octavia API version discovery and the feature gates that hang off it (same thresholds as upstream
//! kuryr: tags 2.5, providers 2.6, allowed_cidrs 2.12, same port with different protocols 2.13, SCTP 2.23;
//! and additive member batches 2.11).

use std::collections::BTreeSet;

use serde::Deserialize;

pub use super::features::{
    ApiVersion, OctaviaFeatures, ADDITIVE_MEMBERS, ALLOWED_CIDRS, PROVIDERS, SAME_PORT_DIFFERENT_PROTOCOL,
    SCTP, TAGS, UDP,
};
use super::listeners::CreateListener;
use super::loadbalancers::CreateLoadBalancer;
use crate::client::decode;
use crate::errors::{Error, Result, Service};
use crate::{Cloud, Request};

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Version {
    pub id: String,
    pub status: String,
}

/// `"v2.30"` -> `(2, 30)`.
pub fn parse_version(id: &str) -> Option<ApiVersion> {
    let (maj, min) = id.trim_start_matches('v').split_once('.')?;
    Some((maj.parse().ok()?, min.parse().ok()?))
}

/// The highest version the root document lists (CURRENT or SUPPORTED).
pub fn max_version(versions: &[Version]) -> Option<ApiVersion> {
    versions
        .iter()
        .filter(|v| v.status != "DEPRECATED")
        .filter_map(|v| parse_version(&v.id))
        .max()
}

impl OctaviaFeatures {
    /// Refuses, before any call, a listener this Octavia cannot take.
    pub fn check_listener(&self, op: &'static str, l: &CreateListener) -> Result<()> {
        match l.protocol.as_str() {
            "UDP" => self.gate(op, self.udp(), "UDP listeners", UDP)?,
            "SCTP" => self.gate(op, self.sctp(), "SCTP listeners", SCTP)?,
            _ => {}
        }
        if l.allowed_cidrs.is_some() {
            self.gate(op, self.allowed_cidrs(), "allowed_cidrs", ALLOWED_CIDRS)?;
        }
        let pool_tags = l.default_pool.as_ref().is_some_and(|p| !p.tags.is_empty());
        if !l.tags.is_empty() || pool_tags {
            self.gate(op, self.tags(), "tags", TAGS)?;
        }
        Ok(())
    }

    /// Refuses, before any call, a fully-populated load balancer this Octavia cannot take.
    pub fn check_loadbalancer(&self, op: &'static str, lb: &CreateLoadBalancer) -> Result<()> {
        if !lb.tags.is_empty() {
            self.gate(op, self.tags(), "tags", TAGS)?;
        }
        if let Some(p) = &lb.provider {
            if !self.providers.is_empty() && !self.has_provider(p) {
                return Err(Error::Unsupported {
                    service: Service::LoadBalancer,
                    op,
                    feature: format!("Octavia provider {p:?}"),
                });
            }
        }
        let mut ports = BTreeSet::new();
        let mut shared = false;
        for l in &lb.listeners {
            self.check_listener(op, l)?;
            shared |= !ports.insert(l.protocol_port);
        }
        if shared {
            self.gate(
                op,
                self.same_port_different_protocol(),
                "listeners on the same port with different protocols",
                SAME_PORT_DIFFERENT_PROTOCOL,
            )?;
        }
        Ok(())
    }
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct VersionDoc {
    versions: Vec<Version>,
}

/// `GET /` (the version document), retried on transport errors and 5xx like every other call: a
/// controller starting beside a busy Octavia API must not fail on one refused connection.
pub async fn get(cloud: &Cloud) -> Result<Vec<Version>> {
    let op = "octavia.versions";
    let resp = cloud
        .execute(Request::version_document(Service::LoadBalancer, op))
        .await?;
    let doc: VersionDoc = decode(resp.json(Service::LoadBalancer, op)?, Service::LoadBalancer, op)?;
    Ok(doc.versions)
}

impl Cloud {
    /// Octavia API version and providers, discovered once per handle.
    pub async fn octavia_features(&self) -> Result<&OctaviaFeatures> {
        self.octavia_cache().get_or_try_init(|| discover(self)).await
    }
}

async fn discover(cloud: &Cloud) -> Result<OctaviaFeatures> {
    let version = max_version(&get(cloud).await?).unwrap_or((2, 0));
    let providers = if version >= PROVIDERS {
        super::providers::list(cloud)
            .await?
            .into_iter()
            .map(|p| p.name)
            .collect()
    } else {
        BTreeSet::new()
    };
    Ok(OctaviaFeatures { version, providers })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::octavia::pools::CreatePool;

    fn feats(v: ApiVersion) -> OctaviaFeatures {
        OctaviaFeatures {
            version: v,
            providers: ["ovn".to_owned(), "amphora".to_owned()].into(),
        }
    }

    #[test]
    fn version_document_parsing() {
        assert_eq!(parse_version("v2.30"), Some((2, 30)));
        assert_eq!(parse_version("v2.0"), Some((2, 0)));
        assert_eq!(parse_version("v2"), None);
        let vs = vec![
            Version {
                id: "v2.0".into(),
                status: "SUPPORTED".into(),
            },
            Version {
                id: "v2.30".into(),
                status: "CURRENT".into(),
            },
            Version {
                id: "v2.9".into(),
                status: "SUPPORTED".into(),
            },
        ];
        assert_eq!(max_version(&vs), Some((2, 30)));
    }

    fn lb(listeners: Vec<CreateListener>) -> CreateLoadBalancer {
        CreateLoadBalancer {
            name: "x".into(),
            provider: Some("ovn".into()),
            listeners,
            ..CreateLoadBalancer::default()
        }
    }

    #[test]
    fn gates_refuse_what_old_apis_lack() {
        let tcp_udp = lb(vec![
            CreateListener::new("a", "TCP", 53),
            CreateListener::new("b", "UDP", 53),
        ]);
        assert!(feats((2, 30)).check_loadbalancer("op", &tcp_udp).is_ok());
        assert!(matches!(
            feats((2, 12)).check_loadbalancer("op", &tcp_udp),
            Err(Error::Unsupported { .. })
        ));
        let sctp = lb(vec![CreateListener::new("s", "SCTP", 9)]);
        assert!(feats((2, 22)).check_loadbalancer("op", &sctp).is_err());
        assert!(feats((2, 23)).check_loadbalancer("op", &sctp).is_ok());
        let mut cidrs = CreateListener::new("c", "TCP", 80);
        cidrs.allowed_cidrs = Some(vec!["10.0.0.0/8".into()]);
        assert!(feats((2, 11)).check_listener("op", &cidrs).is_err());
        let mut tagged =
            CreateListener::new("t", "TCP", 80).with_pool(CreatePool::new("p", "TCP", "ROUND_ROBIN"));
        if let Some(p) = tagged.default_pool.as_mut() {
            p.tags = vec!["kuryr.uid=1".into()];
        }
        assert!(feats((2, 4)).check_listener("op", &tagged).is_err());
        let mut unknown = lb(vec![]);
        unknown.provider = Some("f5".into());
        assert!(feats((2, 30)).check_loadbalancer("op", &unknown).is_err());
    }
}
