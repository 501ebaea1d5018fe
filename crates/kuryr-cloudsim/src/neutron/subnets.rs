//! Subnets: CIDR validation, gateway and allocation pools, allocation from subnet pools.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use axum::Extension;
use serde_json::Value;

use super::missing::{net_not_found, subnet_not_found};
use super::model::{to_json, AllocationPool, Std, Subnet};
use super::{
    bool_field, check_revision, created, if_match, list_all, ok, refuse_body_tags, resource_body, str_field,
};
use crate::errors::{ApiError, ApiResult};
use crate::ipam::{parse_ip, Cidr, SubnetIpam};
use crate::state::{Ctx, Shared};
use crate::world::World;

pub async fn list(
    State(sh): State<Arc<Shared>>,
    Extension(ctx): Extension<Ctx>,
    RawQuery(q): RawQuery,
) -> Response {
    list_all(&sh, &ctx, q.as_deref(), "subnets", |w| &w.subnets)
}

pub async fn show(
    State(sh): State<Arc<Shared>>,
    Path(id): Path<String>,
    RawQuery(q): RawQuery,
) -> ApiResult<Response> {
    sh.show_json(|w| &w.subnets, &id, "subnet", subnet_not_found, q.as_deref())
}

fn parse_pools(cidr: &Cidr, v: &Value) -> ApiResult<Vec<(u128, u128)>> {
    let arr = v
        .as_array()
        .ok_or_else(|| ApiError::bad_request("Invalid input for allocation_pools."))?;
    arr.iter()
        .map(|p| {
            let get = |k: &str| {
                p.get(k)
                    .and_then(Value::as_str)
                    .and_then(parse_ip)
                    .map(|(v, _)| v)
            };
            match (get("start"), get("end")) {
                (Some(s), Some(e)) if s <= e && cidr.contains(s) && cidr.contains(e) => Ok((s, e)),
                _ => Err(ApiError::bad_request(format!(
                    "The allocation pool {p} spans beyond the subnet cidr {cidr}."
                ))),
            }
        })
        .collect()
}

pub async fn create(
    State(sh): State<Arc<Shared>>,
    Extension(ctx): Extension<Ctx>,
    body: Bytes,
) -> ApiResult<Response> {
    let m = resource_body(&body, "subnet")?;
    let profile = sh.profile();
    let project = ctx.project_for(&m, &profile.keystone.default_project)?;
    let tags = refuse_body_tags(&m)?;
    let network_id = str_field(&m, "network_id").ok_or_else(|| {
        ApiError::bad_request("Failed to parse request. Required attribute 'network_id' not specified")
    })?;
    let mut w = sh.world();
    super::check_uuid("network_id", &network_id)?;
    if !w.networks.contains_key(&network_id) {
        return Err(net_not_found(&network_id));
    }
    w.check_quota(&project, "subnet", 1)?;
    let ip_version = m.get("ip_version").and_then(Value::as_u64);
    let pool_id = str_field(&m, "subnetpool_id");
    let cidr = match (str_field(&m, "cidr"), &pool_id) {
        (Some(c), _) => Cidr::parse(&c).ok_or_else(|| {
            ApiError::bad_request(format!(
                "Invalid input for cidr. Reason: '{c}' is not a valid IP subnet."
            ))
        })?,
        (None, Some(pool)) => {
            let prefixlen = m
                .get("prefixlen")
                .and_then(Value::as_u64)
                .and_then(|v| u8::try_from(v).ok());
            super::subnetpools::allocate_from_pool(&w, pool, prefixlen)?
        }
        (None, None) => {
            return Err(ApiError::bad_request(
                "Bad subnets request: a cidr or a subnetpool_id is required.",
            ))
        }
    };
    if let Some(v) = ip_version {
        if v != u64::from(cidr.version()) {
            return Err(ApiError::bad_request(format!(
                "Invalid input for operation: Cidr {cidr} does not match IP version {v}."
            )));
        }
    }
    let net = w
        .networks
        .get(&network_id)
        .ok_or_else(|| net_not_found(&network_id))?;
    for other in &net.subnets {
        if let Some(o) = w.subnets.get(other) {
            if o.ipam.cidr.overlaps(&cidr) {
                return Err(ApiError::invalid_input(format!(
                    "Requested subnet with cidr: {cidr} for network: {network_id} overlaps with another subnet"
                )));
            }
        }
    }
    let gateway = match m.get("gateway_ip") {
        None => cidr.default_gateway(),
        Some(Value::Null) => None,
        Some(Value::String(g)) => {
            let (v, _) = parse_ip(g)
                .filter(|(v, six)| *six == cidr.v6 && cidr.contains(*v))
                .ok_or_else(|| {
                    ApiError::bad_request(format!("Gateway IP {g} is not valid for subnet {cidr}."))
                })?;
            Some(v)
        }
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "Invalid input for gateway_ip: {other}"
            )))
        }
    };
    let pools = match m.get("allocation_pools") {
        Some(v) if !v.is_null() => parse_pools(&cidr, v)?,
        _ => cidr.default_pool(gateway),
    };
    if let Some(g) = gateway {
        if pools.iter().any(|(s, e)| g >= *s && g <= *e) {
            return Err(ApiError::conflict(
                "GatewayConflictWithAllocationPools",
                format!("Gateway ip {} conflicts with allocation pool.", cidr.ip(g)),
            ));
        }
    }
    let mut std = Std::new(&project, str_field(&m, "name"), str_field(&m, "description"));
    if profile.neutron.has_extension("standard-attr-tag") {
        std.tags = tags.unwrap_or_default().into_iter().collect();
    }
    let strings = |k: &str| -> Vec<String> {
        m.get(k)
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).map(str::to_owned).collect())
            .unwrap_or_default()
    };
    let subnet = Subnet {
        std,
        network_id: network_id.clone(),
        ip_version: cidr.version(),
        cidr: cidr.to_string(),
        gateway_ip: gateway.map(|g| cidr.ip(g).to_string()),
        allocation_pools: pools
            .iter()
            .map(|(s, e)| AllocationPool {
                start: cidr.ip(*s).to_string(),
                end: cidr.ip(*e).to_string(),
            })
            .collect(),
        enable_dhcp: bool_field(&m, "enable_dhcp")?.unwrap_or(true),
        dns_nameservers: strings("dns_nameservers"),
        host_routes: m
            .get("host_routes")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default(),
        ipv6_ra_mode: str_field(&m, "ipv6_ra_mode"),
        ipv6_address_mode: str_field(&m, "ipv6_address_mode"),
        subnetpool_id: pool_id,
        service_types: strings("service_types"),
        segment_id: None,
        dns_publish_fixed_ip: false,
        ipam: SubnetIpam::new(cidr, pools),
    };
    let v = to_json(&subnet);
    let id = subnet.std.id.clone();
    w.subnets.insert(id.clone(), subnet);
    if let Some(net) = w.networks.get_mut(&network_id) {
        net.subnets.push(id);
        net.std.touch();
    }
    w.add_usage(&project, "subnet", 1);
    Ok(created("subnet", v))
}

pub async fn update(
    State(sh): State<Arc<Shared>>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> ApiResult<Response> {
    let m = resource_body(&body, "subnet")?;
    let expected = if_match(&headers)?;
    super::read_only(
        &m,
        &[
            "cidr",
            "ip_version",
            "network_id",
            "id",
            "project_id",
            "tenant_id",
        ],
    )?;
    let mut w = sh.world();
    let s = w.subnets.get_mut(&id).ok_or_else(|| subnet_not_found(&id))?;
    check_revision(expected, s.std.revision_number)?;
    if let Some(v) = str_field(&m, "name") {
        s.std.name = v;
    }
    if let Some(v) = str_field(&m, "description") {
        s.std.description = v;
    }
    if let Some(v) = bool_field(&m, "enable_dhcp")? {
        s.enable_dhcp = v;
    }
    if let Some(a) = m.get("dns_nameservers").and_then(Value::as_array) {
        s.dns_nameservers = a.iter().filter_map(Value::as_str).map(str::to_owned).collect();
    }
    if let Some(a) = m.get("host_routes").and_then(Value::as_array) {
        s.host_routes = a.clone();
    }
    match m.get("gateway_ip") {
        Some(Value::Null) => s.gateway_ip = None,
        Some(Value::String(g)) => {
            let cidr = s.ipam.cidr;
            let ok_gw = parse_ip(g).is_some_and(|(v, six)| six == cidr.v6 && cidr.contains(v));
            if !ok_gw {
                return Err(ApiError::bad_request(format!(
                    "Gateway IP {g} is not valid for subnet {cidr}."
                )));
            }
            s.gateway_ip = Some(g.clone());
        }
        _ => {}
    }
    s.std.touch();
    Ok(ok("subnet", to_json(&*s)))
}

pub async fn delete(State(sh): State<Arc<Shared>>, Path(id): Path<String>) -> ApiResult<StatusCode> {
    let mut w = sh.world();
    if !w.subnets.contains_key(&id) {
        return Err(subnet_not_found(&id));
    }
    if w.port_idx.on_subnet(&id).next().is_some() {
        return Err(ApiError::conflict(
            "SubnetInUse",
            format!(
                "Unable to complete operation on subnet {id}: One or more ports have an IP allocation from this subnet."
            ),
        ));
    }
    remove_subnet(&mut w, &id);
    Ok(StatusCode::NO_CONTENT)
}

/// Drops a subnet that no port uses.
pub fn remove_subnet(w: &mut World, id: &str) {
    if let Some(s) = w.subnets.remove(id) {
        if let Some(net) = w.networks.get_mut(&s.network_id) {
            net.subnets.retain(|x| x != id);
        }
        w.add_usage(&s.std.project_id, "subnet", -1);
    }
}
