//! Floating IPs: allocation on an external network, association through `port_id` (which needs a
//! router between the port's subnet and that network), disassociation, delete.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use axum::Extension;
use serde_json::{json, Map, Value};

use super::missing::net_not_found;
use super::missing::port_not_found;
use super::model::{to_json, FloatingIp, Std};
use super::{
    check_revision, created, if_match, list_response, not_found, ok, refuse_body_tags, resource_body,
    str_field,
};
use crate::errors::{ApiError, ApiResult};
use crate::query::{ListParams, Query};
use crate::state::{Ctx, Shared};
use crate::world::World;

fn fip_not_found(id: &str) -> ApiError {
    not_found("FloatingIPNotFound", "Floating IP", id)
}

fn render(w: &World, f: &FloatingIp) -> Value {
    let mut v = to_json(f);
    let details = f.port_id.as_ref().and_then(|p| w.ports.get(p)).map(|p| {
        json!({
            "name": p.std.name, "network_id": p.network_id, "mac_address": p.mac_address,
            "admin_state_up": p.admin_state_up, "status": p.status, "device_id": p.device_id,
            "device_owner": p.device_owner,
        })
    });
    if let Value::Object(m) = &mut v {
        m.insert("port_details".into(), details.unwrap_or(Value::Null));
    }
    v
}

pub async fn list(
    State(sh): State<Arc<Shared>>,
    Extension(ctx): Extension<Ctx>,
    RawQuery(q): RawQuery,
) -> Response {
    let params = ListParams::from_query(&Query::parse(q.as_deref()), &[]);
    let items = sh.all_rendered(|w| &w.fips, render);
    list_response(&ctx, &params, "floatingips", items)
}

pub async fn show(
    State(sh): State<Arc<Shared>>,
    Path(id): Path<String>,
    RawQuery(q): RawQuery,
) -> ApiResult<Response> {
    sh.show_rendered(
        |w| &w.fips,
        &id,
        "floatingip",
        fip_not_found,
        q.as_deref(),
        render,
    )
}

/// Checks that `port_id` can take floating IP `fip_id` and returns (router, fixed IP).
fn association(
    w: &World,
    fip: &FloatingIp,
    port_id: &str,
    fixed: Option<&str>,
) -> ApiResult<(String, String)> {
    let port = w.ports.get(port_id).ok_or_else(|| port_not_found(port_id))?;
    let ip = match fixed {
        Some(ip) => port.fixed_ips.iter().find(|f| f.ip_address == ip),
        None => port.fixed_ips.iter().find(|f| !f.ip_address.contains(':')),
    }
    .ok_or_else(|| {
        ApiError::bad_request(format!(
            "Bad floatingip request: Port {port_id} does not have a suitable fixed IP."
        ))
    })?;
    let router = w
        .routers
        .values()
        .find(|r| {
            r.external_gateway_info.as_ref().is_some_and(|g| g.network_id == fip.floating_network_id)
                && r.interfaces.values().any(|s| s.contains(&ip.subnet_id))
        })
        .ok_or_else(|| {
            ApiError::not_found(
                "ExternalGatewayForFloatingIPNotFound",
                format!(
                    "External network {} is not reachable from subnet {}.  Therefore, cannot associate Port {port_id} with a Floating IP.",
                    fip.floating_network_id, ip.subnet_id
                ),
            )
        })?;
    if let Some(other) = w.fips.values().find(|f| {
        f.std.id != fip.std.id
            && f.port_id.as_deref() == Some(port_id)
            && f.fixed_ip_address.as_deref() == Some(ip.ip_address.as_str())
    }) {
        return Err(ApiError::conflict(
            "FloatingIPPortAlreadyAssociated",
            format!(
                "Cannot associate floating IP {} ({}) with port {port_id} using fixed IP {}, as that fixed IP already has a floating IP on external network {}.",
                fip.floating_ip_address, fip.std.id, ip.ip_address, other.floating_network_id
            ),
        ));
    }
    Ok((router.std.id.clone(), ip.ip_address.clone()))
}

fn apply_association(w: &mut World, id: &str, m: &Map<String, Value>) -> ApiResult<()> {
    let fip = w.fips.get(id).ok_or_else(|| fip_not_found(id))?.clone();
    let assoc = match m.get("port_id") {
        Some(Value::String(port)) => Some(association(
            w,
            &fip,
            port,
            str_field(m, "fixed_ip_address").as_deref(),
        )?),
        Some(Value::Null) => None,
        _ => return Ok(()),
    };
    let f = w.fips.get_mut(id).ok_or_else(|| fip_not_found(id))?;
    match assoc {
        Some((router, fixed)) => {
            f.port_id = str_field(m, "port_id");
            f.router_id = Some(router);
            f.fixed_ip_address = Some(fixed);
            f.status = "ACTIVE".to_owned();
        }
        None => {
            f.port_id = None;
            f.router_id = None;
            f.fixed_ip_address = None;
            f.status = "DOWN".to_owned();
        }
    }
    Ok(())
}

pub async fn create(
    State(sh): State<Arc<Shared>>,
    Extension(ctx): Extension<Ctx>,
    body: Bytes,
) -> ApiResult<Response> {
    let m = resource_body(&body, "floatingip")?;
    let profile = sh.profile();
    let project = ctx.project_for(&m, &profile.keystone.default_project)?;
    let net = str_field(&m, "floating_network_id").ok_or_else(|| {
        ApiError::bad_request(
            "Failed to parse request. Required attribute 'floating_network_id' not specified",
        )
    })?;
    let tags = refuse_body_tags(&m)?;
    let mut w = sh.world();
    let network = w.networks.get(&net).ok_or_else(|| net_not_found(&net))?;
    if !network.external {
        return Err(ApiError::bad_request(format!(
            "Bad floatingip request: Network {net} is not a valid external network."
        )));
    }
    w.check_quota(&project, "floatingip", 1)?;
    let mut std = Std::new(&project, None, str_field(&m, "description"));
    std.tags = tags.unwrap_or_default().into_iter().collect();
    let id = std.id.clone();
    let port = super::routers::infra_port(
        &mut w,
        &net,
        str_field(&m, "subnet_id").as_deref(),
        str_field(&m, "floating_ip_address").as_deref(),
        "network:floatingip",
        &id,
    )?;
    let address = port
        .fixed_ips
        .first()
        .map(|f| f.ip_address.clone())
        .unwrap_or_default();
    let fip_port = port.std.id.clone();
    w.insert_port(port);
    w.fips.insert(
        id.clone(),
        FloatingIp {
            std,
            floating_ip_address: address,
            floating_network_id: net,
            router_id: None,
            port_id: None,
            fixed_ip_address: None,
            status: "DOWN".to_owned(),
            qos_policy_id: None,
            dns_domain: String::new(),
            dns_name: String::new(),
            port_forwardings: Vec::new(),
            fip_port_id: fip_port.clone(),
        },
    );
    if let Err(e) = apply_association(&mut w, &id, &m) {
        w.fips.remove(&id);
        w.remove_port(&fip_port);
        return Err(e);
    }
    w.add_usage(&project, "floatingip", 1);
    let v = w.fips.get(&id).map(|f| render(&w, f)).unwrap_or(Value::Null);
    Ok(created("floatingip", v))
}

pub async fn update(
    State(sh): State<Arc<Shared>>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> ApiResult<Response> {
    let m = resource_body(&body, "floatingip")?;
    let expected = if_match(&headers)?;
    let mut w = sh.world();
    let f = w.fips.get(&id).ok_or_else(|| fip_not_found(&id))?;
    check_revision(expected, f.std.revision_number)?;
    apply_association(&mut w, &id, &m)?;
    let f = w.fips.get_mut(&id).ok_or_else(|| fip_not_found(&id))?;
    if let Some(d) = str_field(&m, "description") {
        f.std.description = d;
    }
    f.std.touch();
    let v = w.fips.get(&id).map(|f| render(&w, f)).unwrap_or(Value::Null);
    Ok(ok("floatingip", v))
}

pub async fn delete(State(sh): State<Arc<Shared>>, Path(id): Path<String>) -> ApiResult<StatusCode> {
    let mut w = sh.world();
    let f = w.fips.remove(&id).ok_or_else(|| fip_not_found(&id))?;
    w.remove_port(&f.fip_port_id);
    w.add_usage(&f.std.project_id, "floatingip", -1);
    Ok(StatusCode::NO_CONTENT)
}

/// A port is going away: its floating IPs stay, unassociated (Neutron does the same).
pub fn disassociate_port(w: &mut World, port_id: &str) {
    for f in w
        .fips
        .values_mut()
        .filter(|f| f.port_id.as_deref() == Some(port_id))
    {
        f.port_id = None;
        f.router_id = None;
        f.fixed_ip_address = None;
        f.status = "DOWN".to_owned();
        f.std.touch();
    }
}
