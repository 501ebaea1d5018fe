//! Neutron v2.0: the objects kuryr manages and the calls it makes on them. One module per resource; each
//! has its types (responses lenient with `#[serde(default)]`, requests sending only what is set) and free
//! async functions taking the [`Cloud`](crate::Cloud).

pub mod extensions;
pub mod floating_ips;
pub mod networks;
pub mod ports;
pub mod quotas;
pub mod routers;
pub mod security_groups;
pub mod subnetpools;
pub mod subnets;
pub mod tagging;
pub mod trunks;

pub use extensions::NeutronFeatures;

use std::future::Future;

use reqwest::Method;
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::client::{take, Request};
use crate::errors::{Result, Service};
use crate::Cloud;

/// `POST <path> {"<key>": [...]}` in the fewest bodies that fit the cloud's request limit ([`crate::fit`]),
/// all or none: Neutron rolls a failed body back, and when a later body fails `undo` deletes what the
/// earlier ones made, by the id `id_of` names (its own failures are left to the garbage collector, as the
/// objects carry our tags).
pub(crate) async fn bulk_post<Req, Out, F, Fut>(
    cloud: &Cloud,
    op: &'static str,
    path: &str,
    key: &str,
    reqs: &[Req],
    id_of: fn(&Out) -> &str,
    undo: F,
) -> Result<Vec<Out>>
where
    Req: Serialize,
    Out: DeserializeOwned,
    F: Fn(String) -> Fut,
    Fut: Future<Output = Result<()>>,
{
    let runs = crate::fit::split(
        reqs,
        crate::fit::envelope(key),
        cloud.max_request_body(),
        Service::Network,
        op,
    )?;
    let mut made: Vec<Out> = Vec::with_capacity(reqs.len());
    for run in runs {
        let answer = async {
            let resp = cloud
                .execute(
                    Request::new(Service::Network, op, Method::POST, path)
                        .json(serde_json::json!({ key: run })),
                )
                .await?;
            take::<Vec<Out>>(resp.json(Service::Network, op)?, key, Service::Network, op)
        }
        .await;
        match answer {
            Ok(objects) => made.extend(objects),
            Err(e) => {
                futures::future::join_all(made.iter().map(|o| undo(id_of(o).to_owned()))).await;
                return Err(e);
            }
        }
    }
    Ok(made)
}

/// List filters: `?key=value` pairs, with helpers for tags and fixed IPs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Filter(pub Vec<(String, String)>);

impl Filter {
    pub fn new() -> Self {
        Self::default()
    }

    /// `key=value` (repeat the key to match any of several values).
    pub fn eq(mut self, key: &str, value: impl Into<String>) -> Self {
        self.0.push((key.to_owned(), value.into()));
        self
    }

    /// At most `n` objects a page; the list follows the `next` links (Neutron's pagination).
    pub fn limit(self, n: usize) -> Self {
        self.eq("limit", n.to_string())
    }

    /// Objects carrying all of these tags.
    pub fn tags<S: AsRef<str>>(self, tags: &[S]) -> Self {
        self.tag_list("tags", tags)
    }

    /// Objects carrying any of these tags.
    pub fn tags_any<S: AsRef<str>>(self, tags: &[S]) -> Self {
        self.tag_list("tags-any", tags)
    }

    /// Objects not carrying all of these tags.
    pub fn not_tags<S: AsRef<str>>(self, tags: &[S]) -> Self {
        self.tag_list("not-tags", tags)
    }

    fn tag_list<S: AsRef<str>>(mut self, key: &str, tags: &[S]) -> Self {
        if !tags.is_empty() {
            let joined: Vec<&str> = tags.iter().map(AsRef::as_ref).collect();
            self.0.push((key.to_owned(), joined.join(",")));
        }
        self
    }

    /// Ports holding this IP address.
    pub fn fixed_ip(self, ip: &str) -> Self {
        self.eq("fixed_ips", format!("ip_address={ip}"))
    }

    /// Ports with an address on this subnet.
    pub fn fixed_ip_subnet(self, subnet_id: &str) -> Self {
        self.eq("fixed_ips", format!("subnet_id={subnet_id}"))
    }

    pub fn name(self, name: impl Into<String>) -> Self {
        self.eq("name", name)
    }

    pub fn project(self, project_id: impl Into<String>) -> Self {
        self.eq("project_id", project_id)
    }

    pub fn into_query(self) -> Vec<(String, String)> {
        self.0
    }
}

/// `{"id": ...}` references in Neutron and Octavia bodies.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(default)]
pub struct IdRef {
    pub id: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filters_build_neutron_query_pairs() {
        let f = Filter::new()
            .eq("network_id", "n1")
            .tags(&["a=1", "b=2"])
            .not_tags(&["x"])
            .tags_any::<&str>(&[])
            .fixed_ip("198.18.0.5");
        assert_eq!(
            f.into_query(),
            vec![
                ("network_id".to_owned(), "n1".to_owned()),
                ("tags".to_owned(), "a=1,b=2".to_owned()),
                ("not-tags".to_owned(), "x".to_owned()),
                ("fixed_ips".to_owned(), "ip_address=198.18.0.5".to_owned()),
            ]
        );
    }
}
