//! Listeners.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;
use axum::response::Response;
use axum::Extension;
use serde_json::{Map, Value};

use super::model::{IdRef, Listener, LoadBalancer, OFFLINE, PENDING_CREATE, PENDING_DELETE, PENDING_UPDATE};
use super::provisioning::{lb_not_found, lock_for_child, schedule};
use super::{b, body_obj, created, int, invalid_field, list_response, missing_field, ok, s, tags, to_json};
use crate::errors::{ApiError, ApiResult};
use crate::faults::LbPhase;
use crate::ipam::Cidr;
use crate::state::{Ctx, Shared};
use crate::util::{new_id, octavia_now};
use crate::world::World;

pub const PROTOCOLS: &[&str] = &[
    "HTTP",
    "HTTPS",
    "TCP",
    "TERMINATED_HTTPS",
    "UDP",
    "SCTP",
    "PROMETHEUS",
];
const OVN_PROTOCOLS: &[&str] = &["TCP", "UDP", "SCTP"];

pub fn listener_not_found(id: &str) -> ApiError {
    ApiError::oct_not_found("Listener", id)
}

/// Which pool protocols a listener protocol accepts (Octavia's VALID_LISTENER_POOL_PROTOCOL_MAP).
pub fn check_protocols(listener: &str, pool: &str) -> ApiResult<()> {
    let ok = match listener {
        "TCP" => matches!(pool, "TCP" | "HTTP" | "PROXY" | "PROXYV2"),
        "HTTP" | "TERMINATED_HTTPS" => matches!(pool, "HTTP" | "PROXY" | "PROXYV2"),
        "HTTPS" => matches!(pool, "HTTPS" | "PROXY" | "PROXYV2" | "TCP"),
        "UDP" => pool == "UDP",
        "SCTP" => pool == "SCTP",
        _ => false,
    };
    if ok {
        Ok(())
    } else {
        Err(ApiError::oct_validation(format!(
            "The pool protocol '{pool}' is invalid while the listener protocol is '{listener}'."
        )))
    }
}

fn check_provider(provider: &str, protocol: &str, allowed_cidrs: &Option<Vec<String>>) -> ApiResult<()> {
    if provider == "ovn" {
        if !OVN_PROTOCOLS.contains(&protocol) {
            return Err(ApiError::unsupported_option(
                provider,
                format!("OVN provider does not support {protocol} protocol"),
            ));
        }
        if allowed_cidrs.as_ref().is_some_and(|c| !c.is_empty()) {
            return Err(ApiError::unsupported_option(
                provider,
                "OVN provider does not support allowed_cidrs option",
            ));
        }
    }
    Ok(())
}

fn parse_cidrs(m: &Map<String, Value>) -> ApiResult<Option<Vec<String>>> {
    match m.get("allowed_cidrs") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Array(a)) => a
            .iter()
            .map(|c| {
                c.as_str()
                    .and_then(Cidr::parse)
                    .map(|x| x.to_string())
                    .ok_or_else(|| invalid_field("allowed_cidrs", c))
            })
            .collect::<ApiResult<Vec<_>>>()
            .map(Some),
        Some(v) => Err(invalid_field("allowed_cidrs", v)),
    }
}

fn duplicate(protocol: &str, port: u16) -> ApiError {
    ApiError::octavia(
        StatusCode::CONFLICT,
        format!("Another Listener on this Load Balancer is already using protocol {protocol} and protocol_port {port}"),
    )
}

/// A new listener (PENDING_CREATE) from a request body; duplicates against the LB's listeners.
pub fn build(w: &World, lb: &LoadBalancer, m: &Map<String, Value>) -> ApiResult<Listener> {
    let protocol = s(m, "protocol").ok_or_else(|| missing_field("protocol"))?;
    if !PROTOCOLS.contains(&protocol.as_str()) {
        return Err(invalid_field("protocol", &Value::String(protocol)));
    }
    let port = int(m, "protocol_port")?.ok_or_else(|| missing_field("protocol_port"))?;
    let port = u16::try_from(port)
        .ok()
        .filter(|p| *p >= 1)
        .ok_or_else(|| invalid_field("protocol_port", &Value::from(port)))?;
    let allowed_cidrs = parse_cidrs(m)?;
    check_provider(&lb.provider, &protocol, &allowed_cidrs)?;
    if lb
        .listeners
        .iter()
        .filter_map(|l| w.listeners.get(&l.id))
        .any(|l| l.protocol == protocol && l.protocol_port == port)
    {
        return Err(duplicate(&protocol, port));
    }
    let timeout = |k: &str, d: i64| -> ApiResult<i64> { Ok(int(m, k)?.unwrap_or(d)) };
    Ok(Listener {
        id: new_id(),
        name: s(m, "name").unwrap_or_default(),
        description: s(m, "description").unwrap_or_default(),
        provisioning_status: PENDING_CREATE.to_owned(),
        operating_status: OFFLINE.to_owned(),
        admin_state_up: b(m, "admin_state_up")?.unwrap_or(true),
        protocol,
        protocol_port: port,
        connection_limit: int(m, "connection_limit")?.unwrap_or(-1),
        default_tls_container_ref: s(m, "default_tls_container_ref"),
        sni_container_refs: Vec::new(),
        project_id: lb.project_id.clone(),
        default_pool_id: None,
        l7policies: Vec::new(),
        insert_headers: m
            .get("insert_headers")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default(),
        created_at: octavia_now(),
        updated_at: None,
        loadbalancers: vec![IdRef::new(&lb.id)],
        timeout_client_data: timeout("timeout_client_data", 50_000)?,
        timeout_member_connect: timeout("timeout_member_connect", 5_000)?,
        timeout_member_data: timeout("timeout_member_data", 50_000)?,
        timeout_tcp_inspect: timeout("timeout_tcp_inspect", 0)?,
        tags: tags(m)?.unwrap_or_default(),
        client_ca_tls_container_ref: None,
        client_authentication: "NONE".to_owned(),
        client_crl_container_ref: None,
        allowed_cidrs,
        tls_ciphers: None,
        tls_versions: None,
        alpn_protocols: None,
        hsts_max_age: None,
        hsts_include_subdomains: false,
        hsts_preload: false,
        lb_id: lb.id.clone(),
    })
}

/// Stores a listener and links it to its LB (and default pool).
pub fn insert(w: &mut World, l: Listener) {
    if let Some(lb) = w.lbs.get_mut(&l.lb_id) {
        lb.listeners.push(IdRef::new(&l.id));
    }
    if let Some(p) = l.default_pool_id.as_ref().and_then(|p| w.pools.get_mut(p)) {
        p.listeners.push(IdRef::new(&l.id));
    }
    w.listeners.insert(l.id.clone(), l);
}

/// Checks a pool can be this listener's default pool.
fn check_default_pool(
    w: &World,
    lb_id: &str,
    listener_id: &str,
    pool_id: &str,
    protocol: &str,
) -> ApiResult<()> {
    let pool = w
        .pools
        .get(pool_id)
        .filter(|p| p.lb_id == lb_id)
        .ok_or_else(|| ApiError::octavia(StatusCode::NOT_FOUND, format!("Pool {pool_id} not found.")))?;
    if pool.listeners.iter().any(|l| l.id != listener_id) {
        return Err(ApiError::octavia(
            StatusCode::CONFLICT,
            "This listener already has a default pool",
        ));
    }
    check_protocols(protocol, &pool.protocol)
}

pub async fn list(
    State(sh): State<Arc<Shared>>,
    Extension(ctx): Extension<Ctx>,
    RawQuery(q): RawQuery,
) -> Response {
    let items = sh.all_json(|w| &w.listeners);
    list_response(&ctx, q, "listeners", items)
}

pub async fn show(
    State(sh): State<Arc<Shared>>,
    Path(id): Path<String>,
    RawQuery(q): RawQuery,
) -> ApiResult<Response> {
    sh.show_json(
        |w| &w.listeners,
        &id,
        "listener",
        listener_not_found,
        q.as_deref(),
    )
}

pub async fn create(State(sh): State<Arc<Shared>>, body: Bytes) -> ApiResult<Response> {
    let m = body_obj(&body, "listener")?;
    let lb_id = s(&m, "loadbalancer_id").ok_or_else(|| missing_field("loadbalancer_id"))?;
    sh.mutate(|w, jobs| {
        let lb = w.lbs.get(&lb_id).ok_or_else(|| lb_not_found(&lb_id))?;
        let mut l = build(w, lb, &m)?;
        if let Some(pool) = s(&m, "default_pool_id") {
            check_default_pool(w, &lb_id, &l.id, &pool, &l.protocol)?;
            l.default_pool_id = Some(pool);
        }
        lock_for_child(w, &lb_id, &[])?;
        let v = to_json(&l);
        insert(w, l);
        schedule(&sh, w, jobs, &lb_id, LbPhase::Update, 0);
        Ok(created("listener", v))
    })
}

pub async fn update(
    State(sh): State<Arc<Shared>>,
    Path(id): Path<String>,
    body: Bytes,
) -> ApiResult<Response> {
    let m = body_obj(&body, "listener")?;
    sh.mutate(|w, jobs| {
        let l = w
            .listeners
            .get(&id)
            .ok_or_else(|| listener_not_found(&id))?
            .clone();
        let allowed_cidrs = if m.contains_key("allowed_cidrs") {
            parse_cidrs(&m)?
        } else {
            l.allowed_cidrs.clone()
        };
        let provider = w
            .lbs
            .get(&l.lb_id)
            .map(|lb| lb.provider.clone())
            .unwrap_or_default();
        check_provider(&provider, &l.protocol, &allowed_cidrs)?;
        let new_pool = match m.get("default_pool_id") {
            Some(Value::String(p)) => {
                check_default_pool(w, &l.lb_id, &id, p, &l.protocol)?;
                Some(Some(p.clone()))
            }
            Some(Value::Null) => Some(None),
            _ => None,
        };
        lock_for_child(w, &l.lb_id, &[])?;
        if let Some(p) = &new_pool {
            if let Some(old) = l.default_pool_id.as_ref().and_then(|o| w.pools.get_mut(o)) {
                old.listeners.retain(|r| r.id != id);
            }
            if let Some(new) = p.as_ref().and_then(|n| w.pools.get_mut(n)) {
                new.listeners.push(IdRef::new(&id));
            }
        }
        let x = w.listeners.get_mut(&id).ok_or_else(|| listener_not_found(&id))?;
        if let Some(v) = s(&m, "name") {
            x.name = v;
        }
        if let Some(v) = s(&m, "description") {
            x.description = v;
        }
        if let Some(v) = b(&m, "admin_state_up")? {
            x.admin_state_up = v;
        }
        if let Some(v) = int(&m, "connection_limit")? {
            x.connection_limit = v;
        }
        for (k, f) in [
            ("timeout_client_data", &mut x.timeout_client_data),
            ("timeout_member_connect", &mut x.timeout_member_connect),
            ("timeout_member_data", &mut x.timeout_member_data),
            ("timeout_tcp_inspect", &mut x.timeout_tcp_inspect),
        ] {
            if let Some(v) = int(&m, k)? {
                *f = v;
            }
        }
        if let Some(v) = tags(&m)? {
            x.tags = v;
        }
        if let Some(h) = m.get("insert_headers").and_then(Value::as_object) {
            x.insert_headers = h.clone();
        }
        if let Some(p) = new_pool {
            x.default_pool_id = p;
        }
        x.allowed_cidrs = allowed_cidrs;
        x.provisioning_status = PENDING_UPDATE.to_owned();
        x.updated_at = Some(octavia_now());
        let v = to_json(&*x);
        let lb_id = x.lb_id.clone();
        schedule(&sh, w, jobs, &lb_id, LbPhase::Update, 0);
        Ok(ok("listener", v))
    })
}

pub async fn delete(State(sh): State<Arc<Shared>>, Path(id): Path<String>) -> ApiResult<StatusCode> {
    sh.mutate(|w, jobs| {
        let lb_id = w
            .listeners
            .get(&id)
            .map(|l| l.lb_id.clone())
            .ok_or_else(|| listener_not_found(&id))?;
        lock_for_child(w, &lb_id, &[])?;
        if let Some(l) = w.listeners.get_mut(&id) {
            l.provisioning_status = PENDING_DELETE.to_owned();
        }
        schedule(&sh, w, jobs, &lb_id, LbPhase::Update, 0);
        Ok(StatusCode::NO_CONTENT)
    })
}
