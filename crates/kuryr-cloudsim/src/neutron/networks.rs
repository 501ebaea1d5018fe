//! Networks.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use axum::Extension;

use super::missing::net_not_found;
use super::model::{to_json, Network, Std};
use super::{
    bool_field, check_revision, created, if_match, list_all, ok, refuse_body_tags, resource_body, str_field,
};
use crate::errors::{ApiError, ApiResult};
use crate::state::{Ctx, Shared};
use crate::world::World;

pub async fn list(
    State(sh): State<Arc<Shared>>,
    Extension(ctx): Extension<Ctx>,
    RawQuery(q): RawQuery,
) -> Response {
    list_all(&sh, &ctx, q.as_deref(), "networks", |w| &w.networks)
}

pub async fn show(
    State(sh): State<Arc<Shared>>,
    Path(id): Path<String>,
    RawQuery(q): RawQuery,
) -> ApiResult<Response> {
    sh.show_json(|w| &w.networks, &id, "network", net_not_found, q.as_deref())
}

pub async fn create(
    State(sh): State<Arc<Shared>>,
    Extension(ctx): Extension<Ctx>,
    body: Bytes,
) -> ApiResult<Response> {
    let m = resource_body(&body, "network")?;
    let profile = sh.profile();
    let project = ctx.project_for(&m, &profile.keystone.default_project)?;
    let tags = refuse_body_tags(&m)?;
    let external = bool_field(&m, "router:external")?.unwrap_or(false);
    let mut w = sh.world();
    w.check_quota(&project, "network", 1)?;
    let mut std = Std::new(&project, str_field(&m, "name"), str_field(&m, "description"));
    if profile.neutron.has_extension("standard-attr-tag") {
        std.tags = tags.unwrap_or_default().into_iter().collect();
    }
    w.segmentation_counter += 1;
    let net = Network {
        std,
        admin_state_up: bool_field(&m, "admin_state_up")?.unwrap_or(true),
        status: "ACTIVE".to_owned(),
        shared: bool_field(&m, "shared")?.unwrap_or(false),
        mtu: m
            .get("mtu")
            .and_then(serde_json::Value::as_u64)
            .and_then(|v| u32::try_from(v).ok())
            .unwrap_or(profile.neutron.network_mtu),
        external,
        port_security_enabled: bool_field(&m, "port_security_enabled")?.unwrap_or(true),
        network_type: str_field(&m, "provider:network_type").unwrap_or_else(|| "geneve".to_owned()),
        physical_network: str_field(&m, "provider:physical_network"),
        segmentation_id: m
            .get("provider:segmentation_id")
            .and_then(serde_json::Value::as_u64)
            .and_then(|v| u32::try_from(v).ok())
            .or(Some(w.segmentation_counter)),
        subnets: Vec::new(),
        availability_zone_hints: Vec::new(),
        availability_zones: Vec::new(),
        ipv4_address_scope: None,
        ipv6_address_scope: None,
        is_default: bool_field(&m, "is_default")?.unwrap_or(false),
        l2_adjacency: true,
        qos_policy_id: None,
        dns_domain: str_field(&m, "dns_domain").unwrap_or_default(),
    };
    let v = to_json(&net);
    w.add_usage(&project, "network", 1);
    w.networks.insert(net.std.id.clone(), net);
    Ok(created("network", v))
}

pub async fn update(
    State(sh): State<Arc<Shared>>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> ApiResult<Response> {
    let m = resource_body(&body, "network")?;
    let expected = if_match(&headers)?;
    super::read_only(&m, &["status", "subnets", "id", "project_id", "tenant_id"])?;
    let max_mtu = sh.profile().neutron.network_mtu;
    let mut w = sh.world();
    let net = w.networks.get_mut(&id).ok_or_else(|| net_not_found(&id))?;
    check_revision(expected, net.std.revision_number)?;
    if let Some(v) = str_field(&m, "name") {
        net.std.name = v;
    }
    if let Some(v) = str_field(&m, "description") {
        net.std.description = v;
    }
    if let Some(v) = bool_field(&m, "admin_state_up")? {
        net.admin_state_up = v;
    }
    if let Some(v) = bool_field(&m, "port_security_enabled")? {
        net.port_security_enabled = v;
    }
    if let Some(v) = bool_field(&m, "router:external")? {
        net.external = v;
    }
    if let Some(v) = bool_field(&m, "shared")? {
        net.shared = v;
    }
    if let Some(v) = m
        .get("mtu")
        .and_then(serde_json::Value::as_u64)
        .and_then(|v| u32::try_from(v).ok())
    {
        if v > max_mtu {
            return Err(ApiError::invalid_input(format!(
                "Requested MTU is too big, maximum is {max_mtu}."
            )));
        }
        net.mtu = v;
    }
    if let Some(v) = str_field(&m, "dns_domain") {
        net.dns_domain = v;
    }
    net.std.touch();
    Ok(ok("network", to_json(&*net)))
}

pub async fn delete(State(sh): State<Arc<Shared>>, Path(id): Path<String>) -> ApiResult<StatusCode> {
    let mut w = sh.world();
    delete_network(&mut w, &id)?;
    Ok(StatusCode::NO_CONTENT)
}

pub fn delete_network(w: &mut World, id: &str) -> ApiResult<()> {
    let net = w.networks.get(id).ok_or_else(|| net_not_found(id))?;
    if w.port_idx.on_network(id).next().is_some() {
        return Err(ApiError::conflict(
            "NetworkInUse",
            format!(
                "Unable to complete operation on network {id}. There are one or more ports still in use on the network."
            ),
        ));
    }
    for subnet in net.subnets.clone() {
        super::subnets::remove_subnet(w, &subnet);
    }
    if let Some(net) = w.networks.remove(id) {
        w.add_usage(&net.std.project_id, "network", -1);
    }
    Ok(())
}
