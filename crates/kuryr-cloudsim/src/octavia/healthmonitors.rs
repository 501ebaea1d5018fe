//! Health monitors (one per pool).

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;
use axum::response::Response;
use axum::Extension;
use serde_json::{Map, Value};

use super::model::{HealthMonitor, IdRef, Pool, OFFLINE, PENDING_CREATE, PENDING_DELETE, PENDING_UPDATE};
use super::pools::pool_not_found;
use super::provisioning::{listeners_of_pool, lock_for_child, schedule};
use super::{b, body_obj, created, int, invalid_field, list_response, missing_field, ok, s, tags, to_json};
use crate::errors::{ApiError, ApiResult};
use crate::faults::LbPhase;
use crate::state::{Ctx, Shared};
use crate::util::{new_id, octavia_now};
use crate::world::World;

const TYPES: &[&str] = &["HTTP", "HTTPS", "PING", "TCP", "TLS-HELLO", "UDP-CONNECT", "SCTP"];

fn hm_not_found(id: &str) -> ApiError {
    ApiError::oct_not_found("Health Monitor", id)
}

fn small(m: &Map<String, Value>, k: &str, default: Option<u32>) -> ApiResult<u32> {
    match int(m, k)? {
        Some(v) => u32::try_from(v).map_err(|_| invalid_field(k, &Value::from(v))),
        None => default.ok_or_else(|| missing_field(k)),
    }
}

/// A new health monitor (PENDING_CREATE) for `pool`.
pub fn build(pool: &Pool, provider: &str, m: &Map<String, Value>) -> ApiResult<HealthMonitor> {
    let kind = s(m, "type").ok_or_else(|| missing_field("type"))?;
    if !TYPES.contains(&kind.as_str()) {
        return Err(invalid_field("type", &Value::String(kind)));
    }
    if provider == "ovn" && kind != "TCP" && kind != "UDP-CONNECT" {
        return Err(ApiError::unsupported_option(
            provider,
            format!(
                "OVN provider does not support {kind} health monitor type. Supported types: UDP-CONNECT, TCP"
            ),
        ));
    }
    let delay = small(m, "delay", None)?;
    let timeout = small(m, "timeout", None)?;
    let max_retries = small(m, "max_retries", None)?;
    let max_retries_down = small(m, "max_retries_down", Some(3))?;
    if !(1..=10).contains(&max_retries) {
        return Err(invalid_field("max_retries", &Value::from(max_retries)));
    }
    let http = kind == "HTTP" || kind == "HTTPS";
    Ok(HealthMonitor {
        id: new_id(),
        name: s(m, "name").unwrap_or_default(),
        kind,
        delay,
        timeout,
        max_retries,
        max_retries_down,
        http_method: s(m, "http_method").or_else(|| http.then(|| "GET".to_owned())),
        url_path: s(m, "url_path").or_else(|| http.then(|| "/".to_owned())),
        expected_codes: s(m, "expected_codes").or_else(|| http.then(|| "200".to_owned())),
        admin_state_up: b(m, "admin_state_up")?.unwrap_or(true),
        project_id: pool.project_id.clone(),
        pools: vec![IdRef::new(&pool.id)],
        provisioning_status: PENDING_CREATE.to_owned(),
        operating_status: OFFLINE.to_owned(),
        created_at: octavia_now(),
        updated_at: None,
        tags: tags(m)?.unwrap_or_default(),
        http_version: m.get("http_version").and_then(Value::as_f64),
        domain_name: s(m, "domain_name"),
        pool_id: pool.id.clone(),
    })
}

pub fn insert(w: &mut World, h: HealthMonitor) {
    if let Some(p) = w.pools.get_mut(&h.pool_id) {
        p.healthmonitor_id = Some(h.id.clone());
    }
    w.healthmonitors.insert(h.id.clone(), h);
}

pub fn duplicate() -> ApiError {
    ApiError::octavia(StatusCode::CONFLICT, "This pool already has a health monitor")
}

pub async fn list(
    State(sh): State<Arc<Shared>>,
    Extension(ctx): Extension<Ctx>,
    RawQuery(q): RawQuery,
) -> Response {
    let items = sh.all_json(|w| &w.healthmonitors);
    list_response(&ctx, q, "healthmonitors", items)
}

pub async fn show(
    State(sh): State<Arc<Shared>>,
    Path(id): Path<String>,
    RawQuery(q): RawQuery,
) -> ApiResult<Response> {
    sh.show_json(
        |w| &w.healthmonitors,
        &id,
        "healthmonitor",
        hm_not_found,
        q.as_deref(),
    )
}

pub async fn create(State(sh): State<Arc<Shared>>, body: Bytes) -> ApiResult<Response> {
    let m = body_obj(&body, "healthmonitor")?;
    let pool_id = s(&m, "pool_id").ok_or_else(|| missing_field("pool_id"))?;
    sh.mutate(|w, jobs| {
        let pool = w
            .pools
            .get(&pool_id)
            .ok_or_else(|| pool_not_found(&pool_id))?
            .clone();
        if pool.healthmonitor_id.is_some() {
            return Err(duplicate());
        }
        let provider = w
            .lbs
            .get(&pool.lb_id)
            .map(|l| l.provider.clone())
            .unwrap_or_default();
        let hm = build(&pool, &provider, &m)?;
        let listeners = listeners_of_pool(w, &pool_id);
        lock_for_child(w, &pool.lb_id, &listeners)?;
        let v = to_json(&hm);
        insert(w, hm);
        schedule(&sh, w, jobs, &pool.lb_id, LbPhase::Update, 0);
        Ok(created("healthmonitor", v))
    })
}

pub async fn update(
    State(sh): State<Arc<Shared>>,
    Path(id): Path<String>,
    body: Bytes,
) -> ApiResult<Response> {
    let m = body_obj(&body, "healthmonitor")?;
    super::members::refuse_fixed(&m, "health_monitor_.healthmonitor", &["type", "pool_id"])?;
    sh.mutate(|w, jobs| {
        let h = w.healthmonitors.get(&id).ok_or_else(|| hm_not_found(&id))?;
        let pool_id = h.pool_id.clone();
        let pool = w.pools.get(&pool_id).ok_or_else(|| pool_not_found(&pool_id))?;
        // Octavia 19 answers "Pool {id} is immutable" while the pool is pending, as for members.
        if pool.provisioning_status != super::model::ACTIVE {
            return Err(ApiError::immutable("Pool", &pool_id));
        }
        let lb_id = pool.lb_id.clone();
        let listeners = listeners_of_pool(w, &pool_id);
        lock_for_child(w, &lb_id, &listeners)?;
        let x = w.healthmonitors.get_mut(&id).ok_or_else(|| hm_not_found(&id))?;
        if let Some(v) = s(&m, "name") {
            x.name = v;
        }
        for (k, f) in [
            ("delay", &mut x.delay),
            ("timeout", &mut x.timeout),
            ("max_retries", &mut x.max_retries),
            ("max_retries_down", &mut x.max_retries_down),
        ] {
            if let Some(v) = int(&m, k)? {
                *f = u32::try_from(v).map_err(|_| invalid_field(k, &Value::from(v)))?;
            }
        }
        if let Some(v) = b(&m, "admin_state_up")? {
            x.admin_state_up = v;
        }
        for (k, f) in [
            ("http_method", &mut x.http_method),
            ("url_path", &mut x.url_path),
            ("expected_codes", &mut x.expected_codes),
        ] {
            if let Some(v) = s(&m, k) {
                *f = Some(v);
            }
        }
        if let Some(v) = tags(&m)? {
            x.tags = v;
        }
        x.provisioning_status = PENDING_UPDATE.to_owned();
        x.updated_at = Some(octavia_now());
        let v = to_json(&*x);
        schedule(&sh, w, jobs, &lb_id, LbPhase::Update, 0);
        Ok(ok("healthmonitor", v))
    })
}

pub async fn delete(State(sh): State<Arc<Shared>>, Path(id): Path<String>) -> ApiResult<StatusCode> {
    sh.mutate(|w, jobs| {
        let pool_id = w
            .healthmonitors
            .get(&id)
            .map(|h| h.pool_id.clone())
            .ok_or_else(|| hm_not_found(&id))?;
        let lb_id = w
            .pools
            .get(&pool_id)
            .map(|p| p.lb_id.clone())
            .ok_or_else(|| pool_not_found(&pool_id))?;
        let listeners = listeners_of_pool(w, &pool_id);
        lock_for_child(w, &lb_id, &listeners)?;
        if let Some(x) = w.healthmonitors.get_mut(&id) {
            x.provisioning_status = PENDING_DELETE.to_owned();
        }
        schedule(&sh, w, jobs, &lb_id, LbPhase::Update, 0);
        Ok(StatusCode::NO_CONTENT)
    })
}
