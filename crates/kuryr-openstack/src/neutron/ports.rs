//! Ports: one per pod (a trunk subport in nested mode), created in bulk for the pools. Tags go into the
//! create body when the cloud has `tag-ports-during-bulk-creation` (one call); otherwise each port is tagged
//! right after, and a port whose tagging fails is deleted again.

use futures::future::join_all;
use reqwest::Method;
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::tagging::{create_tagged, taggable, Resource};
use super::trunks::SubPort;
use super::Filter;
use crate::batch::ReadBatcher;
use crate::client::{take, Request};
use crate::errors::{Result, Service};
use crate::Cloud;

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(default)]
pub struct FixedIp {
    pub subnet_id: String,
    pub ip_address: String,
}

/// A fixed IP request: on a subnet, optionally a given address.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct FixedIpRequest {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subnet_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ip_address: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(default)]
pub struct AddressPair {
    pub ip_address: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mac_address: Option<String>,
}

/// `trunk_details` on a trunk's parent port (extension `trunk-details`).
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(default)]
pub struct TrunkDetails {
    pub trunk_id: String,
    pub sub_ports: Vec<SubPortDetail>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(default)]
pub struct SubPortDetail {
    pub port_id: String,
    pub segmentation_type: String,
    pub segmentation_id: u32,
    pub mac_address: String,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(default)]
pub struct Port {
    pub id: String,
    pub name: String,
    pub description: String,
    pub network_id: String,
    pub project_id: String,
    pub mac_address: String,
    pub fixed_ips: Vec<FixedIp>,
    pub status: String,
    pub admin_state_up: bool,
    pub device_owner: String,
    pub device_id: String,
    pub security_groups: Vec<String>,
    pub allowed_address_pairs: Vec<AddressPair>,
    #[serde(rename = "binding:host_id")]
    pub binding_host_id: String,
    #[serde(rename = "binding:vif_type")]
    pub binding_vif_type: String,
    pub port_security_enabled: Option<bool>,
    pub trunk_details: Option<TrunkDetails>,
    pub tags: Vec<String>,
    pub revision_number: u64,
    pub created_at: String,
    pub updated_at: String,
}

taggable!(Port);

impl Port {
    /// First IPv4 (or any) address.
    pub fn ip(&self) -> Option<&str> {
        self.fixed_ips
            .iter()
            .find(|f| !f.ip_address.contains(':'))
            .or_else(|| self.fixed_ips.first())
            .map(|f| f.ip_address.as_str())
    }
}

#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct CreatePort {
    pub network_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub project_id: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub fixed_ips: Vec<FixedIpRequest>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mac_address: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device_owner: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device_id: Option<String>,
    /// `None` leaves Neutron's default group; `Some(vec![])` means none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub security_groups: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub admin_state_up: Option<bool>,
    #[serde(rename = "binding:host_id", skip_serializing_if = "Option::is_none")]
    pub binding_host_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub port_security_enabled: Option<bool>,
    /// Ownership and other tags; sent in the body only where the cloud accepts them there.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
}

impl CreatePort {
    pub fn on_network(network_id: impl Into<String>) -> Self {
        Self {
            network_id: network_id.into(),
            ..Self::default()
        }
    }

    pub fn on_subnet(network_id: impl Into<String>, subnet_id: impl Into<String>) -> Self {
        Self {
            network_id: network_id.into(),
            fixed_ips: vec![FixedIpRequest {
                subnet_id: Some(subnet_id.into()),
                ip_address: None,
            }],
            ..Self::default()
        }
    }

    pub fn tagged(mut self, tags: Vec<String>) -> Self {
        self.tags = tags;
        self
    }
}

#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct UpdatePort {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub security_groups: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device_owner: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device_id: Option<String>,
    #[serde(rename = "binding:host_id", skip_serializing_if = "Option::is_none")]
    pub binding_host_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub admin_state_up: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allowed_address_pairs: Option<Vec<AddressPair>>,
}

/// Splits tags out of the requests when the cloud would drop or refuse them in the body.
async fn prepare(cloud: &Cloud, reqs: &[CreatePort]) -> Result<(Vec<CreatePort>, Option<Vec<Vec<String>>>)> {
    for t in reqs.iter().flat_map(|r| r.tags.iter()) {
        crate::ownership::validate(t)?;
    }
    let any_tags = reqs.iter().any(|r| !r.tags.is_empty());
    if !any_tags || cloud.neutron_features().await?.tag_ports_during_bulk_creation() {
        return Ok((reqs.to_vec(), None));
    }
    let later = reqs.iter().map(|r| r.tags.clone()).collect();
    let stripped = reqs
        .iter()
        .cloned()
        .map(|mut r| {
            r.tags.clear();
            r
        })
        .collect();
    Ok((stripped, Some(later)))
}

/// Tags ports after creation (clouds without tags in create bodies). All or nothing: if any port cannot
/// be tagged, every port of the call is deleted and the error returned.
async fn tag_after(cloud: &Cloud, ports: &mut [Port], tags: Vec<Vec<String>>) -> Result<()> {
    let results = join_all(
        ports
            .iter()
            .zip(tags.iter())
            .map(|(p, t)| super::tagging::replace(cloud, Resource::Ports, &p.id, t)),
    )
    .await;
    let mut first_err = None;
    for (p, r) in ports.iter_mut().zip(results) {
        match r {
            Ok(t) => p.tags = t,
            Err(e) => {
                first_err.get_or_insert(e);
            }
        }
    }
    if let Some(e) = first_err {
        join_all(ports.iter().map(|p| delete(cloud, &p.id))).await;
        return Err(e);
    }
    Ok(())
}

fn asks_for_addresses(reqs: &[CreatePort]) -> bool {
    reqs.iter()
        .flat_map(|r| r.fixed_ips.iter())
        .any(|f| f.ip_address.is_some())
}

/// Creates one port (with its tags).
pub async fn create(cloud: &Cloud, req: &CreatePort) -> Result<Port> {
    let (reqs, later) = prepare(cloud, std::slice::from_ref(req)).await?;
    let body = reqs.first().cloned().unwrap_or_default();
    // Op names keep "address taken" apart from an IPAM race (see retry::WITH_FIXED_IP).
    let op = if asks_for_addresses(&reqs) {
        "neutron.ports.create_with_ip"
    } else {
        "neutron.ports.create"
    };
    let tags = later.and_then(|mut t| t.pop()).unwrap_or_default();
    create_tagged(cloud, Resource::Ports, op, &body, &tags).await
}

/// `POST /ports {"ports": [...]}`: all ports or none. Neutron rolls a failed bulk back; a body over the
/// cloud's size limit is split into the fewest calls that fit ([`crate::fit`]), and when a later call fails
/// the ports the earlier ones made are deleted again, so the whole stays all-or-none.
pub async fn bulk_create(cloud: &Cloud, reqs: &[CreatePort]) -> Result<Vec<Port>> {
    if reqs.is_empty() {
        return Ok(Vec::new());
    }
    let (reqs, later) = prepare(cloud, reqs).await?;
    // A named address that is taken stays taken: no halving makes that body succeed.
    let (op, on_race) = if asks_for_addresses(&reqs) {
        ("neutron.ports.bulk_create_with_ip", super::OnIpamRace::Retry)
    } else {
        ("neutron.ports.bulk_create", super::OnIpamRace::Halve)
    };
    let mut made = super::Bulk {
        cloud,
        op,
        path: "ports",
        key: "ports",
        id_of: |p: &Port| p.id.as_str(),
        undo: |id: String| async move { delete(cloud, &id).await },
        on_race,
    }
    .post_all(&reqs)
    .await?;
    if let Some(tags) = later {
        tag_after(cloud, &mut made, tags).await?;
    }
    Ok(made)
}

pub async fn get(cloud: &Cloud, id: &str) -> Result<Port> {
    cloud
        .get_one(
            Service::Network,
            "neutron.ports.show",
            format!("ports/{id}"),
            "port",
        )
        .await
}

/// Port reads for hot paths (a pod's port until ACTIVE, a pool port handed out): concurrent reads are
/// made as one `GET /ports?id=…` list per round (see [`crate::batch`]); a port the list does not return is
/// read with a plain show (its 404).
#[derive(Clone)]
pub struct PortReads {
    cloud: Cloud,
    batch: ReadBatcher<Port>,
}

impl PortReads {
    pub fn new(cloud: &Cloud) -> Self {
        let lister = cloud.clone();
        Self {
            cloud: cloud.clone(),
            batch: ReadBatcher::new(
                move |ids: Vec<String>| {
                    let cloud = lister.clone();
                    async move {
                        let filter = ids.into_iter().fold(Filter::new(), |f, id| f.eq("id", id));
                        list(&cloud, filter).await
                    }
                },
                |p: &Port| p.id.as_str(),
            ),
        }
    }

    /// The port, as [`get`] answers (a missing port is its 404, read alone).
    pub async fn get(&self, id: &str) -> Result<Port> {
        match self.batch.read(id).await {
            Some(port) => Ok(port),
            None => get(&self.cloud, id).await,
        }
    }
}

pub async fn list(cloud: &Cloud, filter: Filter) -> Result<Vec<Port>> {
    cloud
        .list(
            Service::Network,
            "neutron.ports.list",
            "ports",
            "ports",
            filter.into_query(),
        )
        .await
}

pub async fn update(cloud: &Cloud, id: &str, req: &UpdatePort) -> Result<Port> {
    cloud
        .send_one(
            Service::Network,
            "neutron.ports.update",
            Method::PUT,
            format!("ports/{id}"),
            "port",
            req,
        )
        .await
}

/// Replaces a port's allowed address pairs only if the port is still at `revision` (`If-Match`); a 412
/// (`RevisionNumberConstraintFailed`) means another writer changed it: re-read and plan again.
pub async fn set_address_pairs_if_revision(
    cloud: &Cloud,
    id: &str,
    pairs: &[AddressPair],
    revision: u64,
) -> Result<Port> {
    let op = "neutron.ports.update";
    let body = json!({ "port": { "allowed_address_pairs": pairs } });
    let resp = cloud
        .execute(
            Request::new(Service::Network, op, Method::PUT, format!("ports/{id}"))
                .json(body)
                .if_match(format!("revision_number={revision}")),
        )
        .await?;
    take(resp.json(Service::Network, op)?, "port", Service::Network, op)
}

/// Sets a port's security groups (the per-pod NetworkPolicy SGs).
pub async fn set_security_groups(cloud: &Cloud, id: &str, groups: &[String]) -> Result<Port> {
    let req = UpdatePort {
        security_groups: Some(groups.to_vec()),
        ..UpdatePort::default()
    };
    update(cloud, id, &req).await
}

/// A 404 counts as deleted.
pub async fn delete(cloud: &Cloud, id: &str) -> Result<()> {
    cloud
        .delete_path(
            Service::Network,
            "neutron.ports.delete",
            format!("ports/{id}"),
            Vec::new(),
        )
        .await
}

/// The subports a parent port carries, from its `trunk_details`.
pub fn subports_of(port: &Port) -> Vec<SubPort> {
    port.trunk_details
        .as_ref()
        .map(|d| {
            d.sub_ports
                .iter()
                .map(|s| SubPort {
                    port_id: s.port_id.clone(),
                    segmentation_type: s.segmentation_type.clone(),
                    segmentation_id: s.segmentation_id,
                })
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn create_body_sends_only_what_is_set() {
        let p = CreatePort {
            device_owner: Some("compute:kuryr".into()),
            security_groups: Some(vec![]),
            ..CreatePort::on_subnet("n", "s")
        };
        let v = serde_json::to_value(&p).unwrap();
        assert_eq!(
            v,
            json!({"network_id": "n", "fixed_ips": [{"subnet_id": "s"}],
                   "device_owner": "compute:kuryr", "security_groups": []})
        );
    }

    #[test]
    fn port_parses_binding_and_trunk_details() {
        let p: Port = serde_json::from_value(json!({
            "id": "p", "binding:host_id": "h", "fixed_ips": [{"subnet_id": "s", "ip_address": "fd00::1"},
            {"subnet_id": "s4", "ip_address": "10.0.0.5"}],
            "trunk_details": {"trunk_id": "t", "sub_ports": [
                {"port_id": "c", "segmentation_type": "vlan", "segmentation_id": 101, "mac_address": "m"}]},
            "unknown_field": 1
        }))
        .unwrap();
        assert_eq!(p.binding_host_id, "h");
        assert_eq!(p.ip(), Some("10.0.0.5"));
        assert_eq!(subports_of(&p)[0].segmentation_id, 101);
    }
}
