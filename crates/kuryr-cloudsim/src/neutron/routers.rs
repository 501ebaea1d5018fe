//! Routers: external gateway, add/remove interface (by subnet or port).

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde_json::{json, Map, Value};

use super::missing::net_not_found;
use super::missing::port_not_found;
use super::missing::subnet_not_found;
use super::model::{to_json, ExternalFixedIp, FixedIp, GatewayInfo, Port, Router, Std};
use super::{
    bool_field, check_revision, created, if_match, list_all, ok, parse_json, refuse_body_tags, resource_body,
    str_field,
};
use crate::errors::{ApiError, ApiResult};
use crate::ipam::AllocError;
use crate::state::{Ctx, Shared};
use crate::world::World;

fn router_not_found(id: &str) -> ApiError {
    ApiError::not_found("RouterNotFound", format!("Router {id} could not be found"))
}

pub async fn list(
    State(sh): State<Arc<Shared>>,
    Extension(ctx): Extension<Ctx>,
    RawQuery(q): RawQuery,
) -> Response {
    list_all(&sh, &ctx, q.as_deref(), "routers", |w| &w.routers)
}

pub async fn show(
    State(sh): State<Arc<Shared>>,
    Path(id): Path<String>,
    RawQuery(q): RawQuery,
) -> ApiResult<Response> {
    sh.show_json(|w| &w.routers, &id, "router", router_not_found, q.as_deref())
}

/// A port owned by no project (router gateways, floating IPs) on `net`, with one address.
pub fn infra_port(
    w: &mut World,
    net: &str,
    subnet: Option<&str>,
    ip: Option<&str>,
    owner: &str,
    device_id: &str,
) -> ApiResult<Port> {
    let network = w.networks.get(net).ok_or_else(|| net_not_found(net))?;
    let subnets: Vec<String> = match subnet {
        Some(s) => vec![s.to_owned()],
        None => network
            .subnets
            .iter()
            .filter(|s| w.subnets.get(*s).is_some_and(|x| !x.ipam.cidr.v6))
            .cloned()
            .collect(),
    };
    let mut std = Std::new("", None, None);
    std.project_id.clear();
    std.tenant_id.clear();
    let id = std.id.clone();
    let mut fixed = None;
    for sid in &subnets {
        let s = w.subnets.get_mut(sid).ok_or_else(|| subnet_not_found(sid))?;
        let got = match ip {
            Some(ip) => {
                let v = crate::ipam::parse_ip(ip)
                    .map(|(v, _)| v)
                    .ok_or_else(|| ApiError::bad_request(format!("Invalid IP {ip}")))?;
                match s.ipam.allocate(v, &id) {
                    Ok(()) => Some(v),
                    Err(AllocError::Taken(_)) => {
                        return Err(ApiError::conflict(
                            "IpAddressAlreadyAllocated",
                            format!("IP address {ip} already allocated in subnet {sid}"),
                        ))
                    }
                    Err(AllocError::NotInSubnet) => None,
                }
            }
            None => s.ipam.allocate_any(&id),
        };
        if let Some(v) = got {
            fixed = Some(FixedIp {
                subnet_id: sid.clone(),
                ip_address: s.ipam.cidr.ip(v).to_string(),
            });
            break;
        }
    }
    let fixed = fixed.ok_or_else(|| {
        ApiError::conflict(
            "IpAddressGenerationFailure",
            format!("No more IP addresses available on network {net}."),
        )
    })?;
    let mac = w.next_mac();
    Ok(Port {
        std,
        network_id: net.to_owned(),
        admin_state_up: true,
        status: "ACTIVE".to_owned(),
        mac_address: mac,
        fixed_ips: vec![fixed],
        device_id: device_id.to_owned(),
        device_owner: owner.to_owned(),
        security_groups: Vec::new(),
        allowed_address_pairs: Vec::new(),
        port_security_enabled: false,
        host_id: String::new(),
        vif_type: "ovs".to_owned(),
        vnic_type: "normal".to_owned(),
        binding_profile: Map::new(),
        vif_details: Map::new(),
        extra_dhcp_opts: Vec::new(),
        dns_name: String::new(),
        propagate_uplink_status: false,
        ip_allocation: "immediate".to_owned(),
        qos_policy_id: None,
        qos_network_policy_id: None,
        resource_request: None,
        bind_epoch: 0,
    })
}

/// Sets (or with `None` clears) the router's gateway.
fn set_gateway(w: &mut World, router_id: &str, info: Option<&Map<String, Value>>) -> ApiResult<()> {
    if let Some(old) = w.routers.get_mut(router_id).and_then(|r| {
        r.external_gateway_info = None;
        r.gw_port_id.take()
    }) {
        w.remove_port(&old);
    }
    let Some(info) = info else { return Ok(()) };
    let net = str_field(info, "network_id").ok_or_else(|| {
        ApiError::bad_request("Invalid input for external_gateway_info: network_id required")
    })?;
    // Real Neutron refuses an explicit null here (found by the kuryr-openstack conformance suite).
    if info.get("enable_snat").is_some_and(Value::is_null) {
        return Err(ApiError::invalid_input("'None' cannot be converted to boolean"));
    }
    let network = w.networks.get(&net).ok_or_else(|| net_not_found(&net))?;
    if !network.external {
        return Err(ApiError::bad_request(format!(
            "Bad router request: Network {net} is not a valid external network."
        )));
    }
    let requested = info
        .get("external_fixed_ips")
        .and_then(Value::as_array)
        .and_then(|a| a.first())
        .cloned();
    let (subnet, ip) = (
        requested
            .as_ref()
            .and_then(|r| r.get("subnet_id"))
            .and_then(Value::as_str)
            .map(str::to_owned),
        requested
            .as_ref()
            .and_then(|r| r.get("ip_address"))
            .and_then(Value::as_str)
            .map(str::to_owned),
    );
    let port = infra_port(
        w,
        &net,
        subnet.as_deref(),
        ip.as_deref(),
        "network:router_gateway",
        router_id,
    )?;
    let fixed = port.fixed_ips.clone();
    let port_id = port.std.id.clone();
    w.insert_port(port);
    let snat = bool_field(info, "enable_snat")?.unwrap_or(true);
    if let Some(r) = w.routers.get_mut(router_id) {
        r.gw_port_id = Some(port_id);
        r.external_gateway_info = Some(GatewayInfo {
            network_id: net,
            enable_snat: snat,
            external_fixed_ips: fixed
                .into_iter()
                .map(|f| ExternalFixedIp {
                    subnet_id: f.subnet_id,
                    ip_address: f.ip_address,
                })
                .collect(),
        });
    }
    Ok(())
}

pub async fn create(
    State(sh): State<Arc<Shared>>,
    Extension(ctx): Extension<Ctx>,
    body: Bytes,
) -> ApiResult<Response> {
    let m = resource_body(&body, "router")?;
    let profile = sh.profile();
    let project = ctx.project_for(&m, &profile.keystone.default_project)?;
    let tags = refuse_body_tags(&m)?;
    let mut w = sh.world();
    w.check_quota(&project, "router", 1)?;
    let mut std = Std::new(&project, str_field(&m, "name"), str_field(&m, "description"));
    std.tags = tags.unwrap_or_default().into_iter().collect();
    let id = std.id.clone();
    let router = Router {
        std,
        admin_state_up: bool_field(&m, "admin_state_up")?.unwrap_or(true),
        status: "ACTIVE".to_owned(),
        external_gateway_info: None,
        routes: Vec::new(),
        distributed: false,
        ha: false,
        flavor_id: None,
        availability_zone_hints: Vec::new(),
        availability_zones: Vec::new(),
        gw_port_id: None,
        interfaces: Default::default(),
    };
    w.routers.insert(id.clone(), router);
    if let Some(Value::Object(gw)) = m.get("external_gateway_info") {
        if let Err(e) = set_gateway(&mut w, &id, Some(gw)) {
            w.routers.remove(&id);
            return Err(e);
        }
    }
    w.add_usage(&project, "router", 1);
    let v = w.routers.get(&id).map(to_json).unwrap_or(Value::Null);
    Ok(created("router", v))
}

pub async fn update(
    State(sh): State<Arc<Shared>>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> ApiResult<Response> {
    let m = resource_body(&body, "router")?;
    let expected = if_match(&headers)?;
    let mut w = sh.world();
    let r = w.routers.get(&id).ok_or_else(|| router_not_found(&id))?;
    check_revision(expected, r.std.revision_number)?;
    match m.get("external_gateway_info") {
        Some(Value::Object(gw)) if !gw.is_empty() => set_gateway(&mut w, &id, Some(gw))?,
        Some(Value::Null) | Some(Value::Object(_)) => set_gateway(&mut w, &id, None)?,
        _ => {}
    }
    let r = w.routers.get_mut(&id).ok_or_else(|| router_not_found(&id))?;
    if let Some(v) = str_field(&m, "name") {
        r.std.name = v;
    }
    if let Some(v) = str_field(&m, "description") {
        r.std.description = v;
    }
    if let Some(v) = bool_field(&m, "admin_state_up")? {
        r.admin_state_up = v;
    }
    if let Some(Value::Array(routes)) = m.get("routes") {
        r.routes.clone_from(routes);
    }
    r.std.touch();
    Ok(ok("router", to_json(&*r)))
}

pub async fn delete(State(sh): State<Arc<Shared>>, Path(id): Path<String>) -> ApiResult<StatusCode> {
    let mut w = sh.world();
    let r = w.routers.get(&id).ok_or_else(|| router_not_found(&id))?;
    if !r.interfaces.is_empty() {
        return Err(ApiError::conflict(
            "RouterInUse",
            format!("Router {id} still has ports"),
        ));
    }
    if w.fips
        .values()
        .any(|f| f.router_id.as_deref() == Some(id.as_str()))
    {
        return Err(ApiError::conflict(
            "RouterInUse",
            format!("Router {id} still has floating IPs"),
        ));
    }
    let project = r.std.project_id.clone();
    set_gateway(&mut w, &id, None)?;
    w.routers.remove(&id);
    w.add_usage(&project, "router", -1);
    Ok(StatusCode::NO_CONTENT)
}

fn interface_body(router: &Router, port: &Port, subnets: &[String]) -> Value {
    json!({
        "id": router.std.id,
        "tenant_id": router.std.project_id,
        "project_id": router.std.project_id,
        "port_id": port.std.id,
        "network_id": port.network_id,
        "subnet_id": subnets.first(),
        "subnet_ids": subnets,
    })
}

/// `PUT /v2.0/routers/{id}/add_router_interface` with `subnet_id` or `port_id`.
pub async fn add_interface(
    State(sh): State<Arc<Shared>>,
    Path(id): Path<String>,
    body: Bytes,
) -> ApiResult<Response> {
    let m = match parse_json(&body)? {
        Value::Object(m) => m,
        _ => {
            return Err(ApiError::bad_request(
                "Bad router request: Either subnet_id or port_id must be specified",
            ))
        }
    };
    let mut w = sh.world();
    let router = w.routers.get(&id).ok_or_else(|| router_not_found(&id))?;
    let project = router.std.project_id.clone();
    let attached: Vec<String> = router.interfaces.values().flatten().cloned().collect();
    let (port_id, subnets) = match (str_field(&m, "subnet_id"), str_field(&m, "port_id")) {
        (Some(_), Some(_)) => {
            return Err(ApiError::bad_request(
                "Bad router request: Cannot specify both subnet-id and port-id",
            ))
        }
        (Some(sid), None) => {
            let s = w.subnets.get(&sid).ok_or_else(|| subnet_not_found(&sid))?;
            if attached.contains(&sid) {
                return Err(ApiError::bad_request(format!(
                    "Bad router request: Router already has a port on subnet {sid}."
                )));
            }
            let gw = s.gateway_ip.clone().ok_or_else(|| {
                ApiError::bad_request(
                    "Bad router request: Subnet for router interface must have a gateway IP.",
                )
            })?;
            let net = s.network_id.clone();
            let mut port = infra_port(
                &mut w,
                &net,
                Some(&sid),
                Some(&gw),
                "network:router_interface",
                &id,
            )?;
            port.std.project_id.clone_from(&project);
            port.std.tenant_id.clone_from(&project);
            let pid = port.std.id.clone();
            w.insert_port(port);
            (pid, vec![sid])
        }
        (None, Some(pid)) => {
            let port = w.ports.get(&pid).ok_or_else(|| port_not_found(&pid))?;
            if !port.device_id.is_empty() {
                return Err(ApiError::conflict(
                    "PortInUse",
                    format!(
                        "Unable to complete operation on port {pid} for network {}. Port already has an attached device {}.",
                        port.network_id, port.device_id
                    ),
                ));
            }
            let subnets: Vec<String> = port.fixed_ips.iter().map(|f| f.subnet_id.clone()).collect();
            if subnets.is_empty() {
                return Err(ApiError::bad_request(
                    "Bad router request: Router port must have at least one fixed IP.",
                ));
            }
            if let Some(dup) = subnets.iter().find(|s| attached.contains(s)) {
                return Err(ApiError::bad_request(format!(
                    "Bad router request: Router already has a port on subnet {dup}."
                )));
            }
            w.update_port(&pid, |p| {
                p.device_owner = "network:router_interface".to_owned();
                p.device_id.clone_from(&id);
                p.status = "ACTIVE".to_owned();
                p.std.touch();
            });
            (pid, subnets)
        }
        (None, None) => {
            return Err(ApiError::bad_request(
                "Bad router request: Either subnet_id or port_id must be specified",
            ))
        }
    };
    let r = w.routers.get_mut(&id).ok_or_else(|| router_not_found(&id))?;
    r.interfaces.insert(port_id.clone(), subnets.clone());
    r.std.touch();
    let body = match (w.routers.get(&id), w.ports.get(&port_id)) {
        (Some(r), Some(p)) => interface_body(r, p, &subnets),
        _ => Value::Null,
    };
    Ok(Json(body).into_response())
}

/// `PUT /v2.0/routers/{id}/remove_router_interface`.
pub async fn remove_interface(
    State(sh): State<Arc<Shared>>,
    Path(id): Path<String>,
    body: Bytes,
) -> ApiResult<Response> {
    let m = match parse_json(&body)? {
        Value::Object(m) => m,
        _ => {
            return Err(ApiError::bad_request(
                "Bad router request: Either subnet_id or port_id must be specified",
            ))
        }
    };
    let mut w = sh.world();
    let router = w.routers.get(&id).ok_or_else(|| router_not_found(&id))?;
    let (port_id, subnets) = match (str_field(&m, "subnet_id"), str_field(&m, "port_id")) {
        (_, Some(pid)) => {
            let subnets = router.interfaces.get(&pid).cloned().ok_or_else(|| {
                ApiError::not_found(
                    "RouterInterfaceNotFound",
                    format!("Router {id} does not have an interface with id {pid}"),
                )
            })?;
            (pid, subnets)
        }
        (Some(sid), None) => router
            .interfaces
            .iter()
            .find(|(_, s)| s.contains(&sid))
            .map(|(p, s)| (p.clone(), s.clone()))
            .ok_or_else(|| {
                ApiError::not_found(
                    "RouterInterfaceNotFoundForSubnet",
                    format!("Router {id} has no interface on subnet {sid}"),
                )
            })?,
        (None, None) => {
            return Err(ApiError::bad_request(
                "Bad router request: Either subnet_id or port_id must be specified",
            ))
        }
    };
    if w.fips.values().any(|f| {
        f.router_id.as_deref() == Some(id.as_str())
            && f.port_id
                .as_ref()
                .and_then(|p| w.ports.get(p))
                .is_some_and(|p| p.fixed_ips.iter().any(|x| subnets.contains(&x.subnet_id)))
    }) {
        return Err(ApiError::conflict(
            "RouterInterfaceInUseByFloatingIP",
            format!(
                "Router interface for subnet {} on router {id} cannot be deleted, as it is required by one or more floating IPs.",
                subnets.first().cloned().unwrap_or_default()
            ),
        ));
    }
    let body = match (w.routers.get(&id), w.ports.get(&port_id)) {
        (Some(r), Some(p)) => interface_body(r, p, &subnets),
        _ => Value::Null,
    };
    if let Some(r) = w.routers.get_mut(&id) {
        r.interfaces.remove(&port_id);
        r.std.touch();
    }
    w.remove_port(&port_id);
    Ok(Json(body).into_response())
}
