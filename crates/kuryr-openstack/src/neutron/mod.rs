//! Neutron v2.0: the objects kuryr manages and the calls it makes on them. One module per resource; each
//! has its types (responses lenient with `#[serde(default)]`, requests sending only what is set) and free
//! async functions taking the [`Cloud`](crate::Cloud).

pub mod extensions;
pub mod floating_ips;
pub mod networks;
pub mod ports;
pub mod quotas;
pub(crate) mod races;
pub mod routers;
pub mod security_groups;
pub mod subnetpools;
pub mod subnets;
pub mod tagging;
pub mod trunks;

pub use extensions::NeutronFeatures;

use std::future::Future;
use std::time::Instant;

use futures::future::BoxFuture;
use reqwest::Method;
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::client::{take, Request};
use crate::errors::{Result, Service};
use crate::Cloud;
use tracing::debug;

/// What a bulk POST does when Neutron refuses a body for an address race (409 `IpAddressAlreadyAllocated`:
/// an address given to it was taken by a create beside it): the body was rolled back whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OnIpamRace {
    /// The client's retry: the same body again (objects that take no address never race).
    Retry,
    /// Two halves side by side, each halved again if it races too; a single object is retried by the
    /// client as usual. One racing address then costs a retry of half the objects, not all of them (a
    /// 10-port body at ~10 % per port races more often than not). `IpAddressGenerationFailure` (no address
    /// left, or a race for the last ones) is retried whole: halving a full subnet's body down to single
    /// ports would only multiply the refusals. The outcomes teach the cloud's [`races::RaceRate`], and a
    /// body larger than one that lands more often than not at that rate is posted as such parts at once.
    Halve,
}

/// A bulk POST, `POST <path> {"<key>": [...]}`: where it goes, how its answer is read and undone.
pub(crate) struct Bulk<'a, Out, F> {
    pub cloud: &'a Cloud,
    pub op: &'static str,
    pub path: &'a str,
    pub key: &'a str,
    /// The id `undo` deletes an object by.
    pub id_of: fn(&Out) -> &str,
    pub undo: F,
    pub on_race: OnIpamRace,
}

impl<Out, F, Fut> Bulk<'_, Out, F>
where
    Out: DeserializeOwned + Send,
    F: Fn(String) -> Fut + Sync,
    Fut: Future<Output = Result<()>> + Send,
{
    /// `reqs` in the fewest bodies that fit the cloud's request limit ([`crate::fit`]), all or none:
    /// Neutron rolls a failed body back, and when another body fails `undo` deletes what the ones before
    /// made (its own failures are left to the garbage collector, as the objects carry our tags).
    pub(crate) async fn post_all<Req: Serialize + Sync>(&self, reqs: &[Req]) -> Result<Vec<Out>> {
        let runs = crate::fit::split(
            reqs,
            crate::fit::envelope(self.key),
            self.cloud.max_request_body(),
            Service::Network,
            self.op,
        )?;
        let mut made: Vec<Out> = Vec::with_capacity(reqs.len());
        for run in runs {
            match self.post(run).await {
                Ok(objects) => made.extend(objects),
                Err(e) => {
                    self.undo_all(&made).await;
                    return Err(e);
                }
            }
        }
        Ok(made)
    }

    /// One body (halved on an IPAM race when asked: each half posted side by side, all or none; posted as
    /// parts at once from the start when the races seen lately say a body this large would likely be
    /// refused).
    fn post<'s, Req: Serialize + Sync>(&'s self, run: &'s [Req]) -> BoxFuture<'s, Result<Vec<Out>>> {
        Box::pin(async move {
            let halve = self.on_race == OnIpamRace::Halve && run.len() > 1;
            if halve {
                let part = self
                    .cloud
                    .address_races(|r| r.part_size(run.len(), Instant::now()));
                if part < run.len() {
                    debug!(
                        op = self.op,
                        objects = run.len(),
                        part,
                        "IPAM races seen lately: posting the body in parts"
                    );
                    return self.post_parts(run.chunks(part)).await;
                }
            }
            let mut req = Request::new(Service::Network, self.op, Method::POST, self.path)
                .json(serde_json::json!({ self.key: run }));
            if halve {
                req = req.address_race_final();
            }
            // Each outcome of a body that may be halved teaches the race rate: landed, or refused for a race.
            let learn = |refused: bool| {
                if halve {
                    self.cloud
                        .address_races(|r| r.record(run.len(), refused, Instant::now()));
                }
            };
            let answer = match self.cloud.execute(req).await {
                Ok(resp) => {
                    learn(false);
                    resp
                }
                Err(e) if halve && e.is_address_race() => {
                    learn(true);
                    self.cloud.metrics().record_retry(self.op, "ipam_conflict_halved");
                    debug!(
                        op = self.op,
                        objects = run.len(),
                        "IPAM race: posting the body as two halves"
                    );
                    let (a, b) = run.split_at(run.len() / 2);
                    return self.post_parts([a, b].into_iter()).await;
                }
                Err(e) => return Err(e),
            };
            take::<Vec<Out>>(
                answer.json(Service::Network, self.op)?,
                self.key,
                Service::Network,
                self.op,
            )
        })
    }

    /// `parts` of one body posted side by side, all or none: when one fails, what the others made is
    /// deleted and the first failure returned.
    async fn post_parts<'s, Req: Serialize + Sync + 's>(
        &'s self,
        parts: impl Iterator<Item = &'s [Req]>,
    ) -> Result<Vec<Out>> {
        let results = futures::future::join_all(parts.map(|p| self.post(p))).await;
        let mut made = Vec::new();
        let mut failed = None;
        for r in results {
            match r {
                Ok(objects) => made.extend(objects),
                Err(e) => {
                    failed.get_or_insert(e);
                }
            }
        }
        match failed {
            None => Ok(made),
            Some(e) => {
                self.undo_all(&made).await;
                Err(e)
            }
        }
    }

    /// Deletes what an all-or-none POST made before another part of it failed.
    fn undo_all(&self, made: &[Out]) -> impl Future<Output = ()> + Send + '_ {
        let ids: Vec<String> = made.iter().map(|o| (self.id_of)(o).to_owned()).collect();
        async move {
            futures::future::join_all(ids.into_iter().map(|id| (self.undo)(id))).await;
        }
    }
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
