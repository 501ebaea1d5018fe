//! The admin API under `/_sim` (never authenticated, faulted, delayed or logged): call log,
//! faults, profile, reset, state summary, token expiry and LB state overrides.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{json, Value};

use crate::errors::{ApiError, ApiResult, Service};
use crate::faults::Faults;
use crate::profile::Profile;
use crate::query::Query;
use crate::state::{lock, Shared};

pub fn router() -> Router<Arc<Shared>> {
    Router::new()
        .route("/_sim/health", get(|| async { "ok" }))
        .route("/_sim/calls", get(calls).delete(clear_calls))
        .route("/_sim/calls/summary", get(summary))
        .route(
            "/_sim/faults",
            get(get_faults)
                .put(put_faults)
                .post(add_faults)
                .delete(clear_faults),
        )
        .route(
            "/_sim/profile",
            get(get_profile).put(put_profile).patch(patch_profile),
        )
        .route("/_sim/reset", post(reset))
        .route("/_sim/state", get(state))
        .route("/_sim/tokens/expire", post(expire_tokens))
        .route("/_sim/loadbalancers/{id}/status", post(force_lb))
}

fn bad(msg: impl Into<String>) -> ApiError {
    ApiError::new(Service::Sim, StatusCode::BAD_REQUEST, "BadRequest", msg)
}

/// `GET /_sim/calls?since=SEQ&op=PATTERN&limit=N`.
async fn calls(State(sh): State<Arc<Shared>>, RawQuery(q): RawQuery) -> Response {
    let q = Query::parse(q.as_deref());
    let since = q.first("since").and_then(|s| s.parse().ok()).unwrap_or(0);
    let limit = q
        .first("limit")
        .and_then(|s| s.parse().ok())
        .unwrap_or(usize::MAX);
    let log = lock(&sh.calls);
    let calls = log.query(since, q.first("op"), limit);
    Json(json!({"calls": calls, "last_seq": log.last_seq()})).into_response()
}

async fn clear_calls(State(sh): State<Arc<Shared>>) -> StatusCode {
    lock(&sh.calls).clear();
    StatusCode::NO_CONTENT
}

/// `GET /_sim/calls/summary?since=SEQ`: count, errors and latency percentiles per op.
async fn summary(State(sh): State<Arc<Shared>>, RawQuery(q): RawQuery) -> Response {
    let since = Query::parse(q.as_deref())
        .first("since")
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let log = lock(&sh.calls);
    Json(json!({"ops": log.summary(since), "last_seq": log.last_seq()})).into_response()
}

async fn get_faults(State(sh): State<Arc<Shared>>) -> Response {
    Json(lock(&sh.faults).clone()).into_response()
}

fn parse_faults(body: &Bytes) -> ApiResult<Faults> {
    serde_json::from_slice(body).map_err(|e| bad(format!("invalid faults: {e}")))
}

/// Replaces every rule.
async fn put_faults(State(sh): State<Arc<Shared>>, body: Bytes) -> ApiResult<Response> {
    let f = parse_faults(&body)?;
    *lock(&sh.faults) = f.clone();
    Ok(Json(f).into_response())
}

/// Appends rules (same body shape as PUT).
async fn add_faults(State(sh): State<Arc<Shared>>, body: Bytes) -> ApiResult<Response> {
    let f = parse_faults(&body)?;
    let mut cur = lock(&sh.faults);
    cur.faults.extend(f.faults);
    cur.lb_faults.extend(f.lb_faults);
    Ok(Json(cur.clone()).into_response())
}

async fn clear_faults(State(sh): State<Arc<Shared>>) -> StatusCode {
    *lock(&sh.faults) = Faults::default();
    StatusCode::NO_CONTENT
}

async fn get_profile(State(sh): State<Arc<Shared>>) -> Response {
    Json(&*sh.profile()).into_response()
}

fn apply_profile(sh: &Shared, p: Profile) {
    {
        let mut w = sh.world();
        let fresh = crate::world::World::new(&p.neutron.quotas);
        w.quota_defaults = fresh.quota_defaults;
    }
    *lock(&sh.faults) = Faults {
        faults: p.faults.clone(),
        lb_faults: p.lb_faults.clone(),
    };
    sh.set_profile(p);
}

/// Replaces the profile (YAML or JSON body); its faults replace the live ones.
async fn put_profile(State(sh): State<Arc<Shared>>, body: Bytes) -> ApiResult<Response> {
    let text = std::str::from_utf8(&body).map_err(|e| bad(e.to_string()))?;
    let p = Profile::from_yaml(text).map_err(|e| bad(format!("invalid profile: {e}")))?;
    apply_profile(&sh, p);
    Ok(Json(&*sh.profile()).into_response())
}

fn merge(base: &mut Value, patch: Value) {
    match (base, patch) {
        (Value::Object(b), Value::Object(p)) => {
            for (k, v) in p {
                if v.is_null() {
                    b.remove(&k);
                } else {
                    merge(b.entry(k).or_insert(Value::Null), v);
                }
            }
        }
        (b, p) => *b = p,
    }
}

/// JSON merge patch over the current profile, e.g. `{"time_scale": 0.01}`.
async fn patch_profile(State(sh): State<Arc<Shared>>, body: Bytes) -> ApiResult<Response> {
    let patch: Value = serde_json::from_slice(&body).map_err(|e| bad(e.to_string()))?;
    let mut cur = serde_json::to_value(&*sh.profile()).map_err(|e| bad(e.to_string()))?;
    merge(&mut cur, patch);
    let p: Profile = serde_json::from_value(cur).map_err(|e| bad(format!("invalid profile: {e}")))?;
    apply_profile(&sh, p);
    Ok(Json(&*sh.profile()).into_response())
}

async fn reset(State(sh): State<Arc<Shared>>) -> StatusCode {
    sh.reset();
    StatusCode::NO_CONTENT
}

async fn state(State(sh): State<Arc<Shared>>) -> Response {
    let w = sh.world();
    let mut port_status = std::collections::BTreeMap::<&str, usize>::new();
    for p in w.ports.values() {
        *port_status.entry(p.status.as_str()).or_default() += 1;
    }
    let body = json!({
        "networks": w.networks.len(),
        "subnets": w.subnets.len(),
        "subnetpools": w.subnetpools.len(),
        "ports": {"total": w.ports.len(), "by_status": port_status},
        "trunks": w.trunks.len(),
        "subports": w.trunk_by_subport.len(),
        "security_groups": w.security_groups.len(),
        "security_group_rules": w.sg_rules.len(),
        "routers": w.routers.len(),
        "floatingips": w.fips.len(),
        "loadbalancers": {"total": w.lbs.len(), "by_status": crate::octavia::loadbalancers::count_by_status(&w)},
        "listeners": w.listeners.len(),
        "pools": w.pools.len(),
        "members": w.members.len(),
        "healthmonitors": w.healthmonitors.len(),
        "tokens": lock(&sh.tokens).len(),
        "calls_logged": lock(&sh.calls).last_seq(),
    });
    Json(body).into_response()
}

async fn expire_tokens(State(sh): State<Arc<Shared>>) -> Response {
    let n = lock(&sh.tokens).expire_all();
    Json(json!({ "expired": n })).into_response()
}

/// `POST /_sim/loadbalancers/{id}/status {"provisioning_status": "ERROR"|"ACTIVE"|"PENDING_UPDATE"|..,
/// "operating_status": ..}`: ACTIVE settles the whole tree, ERROR fails it, others just set it.
async fn force_lb(State(sh): State<Arc<Shared>>, Path(id): Path<String>, body: Bytes) -> ApiResult<Response> {
    let v: Value = serde_json::from_slice(&body).map_err(|e| bad(e.to_string()))?;
    let prov = v
        .get("provisioning_status")
        .and_then(Value::as_str)
        .ok_or_else(|| bad("provisioning_status required"))?;
    let op = v.get("operating_status").and_then(Value::as_str);
    let mut w = sh.world();
    let lb = crate::octavia::provisioning::force(&mut w, &id, prov, op)?;
    Ok(Json(json!({ "loadbalancer": lb })).into_response())
}
