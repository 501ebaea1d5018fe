//! The Octavia v2 subset: version document, providers, load balancers (fully-populated create,
//! status tree, cascade delete), listeners, pools, members (batch replace), health monitors, with
//! provisioning-status transitions timed per provider and 409 while the load balancer is PENDING_*.

pub mod filters;
pub mod healthmonitors;
pub mod listeners;
pub mod loadbalancers;
pub mod members;
pub mod model;
pub mod pools;
pub mod provisioning;
pub mod quotas;
pub mod status;

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State;
use axum::handler::Handler;
use axum::http::{Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde_json::{json, Map, Value};

use crate::errors::{ApiError, ApiResult};
use crate::query::{ListParams, Query};
use crate::routes::{Routes, OCTAVIA, S};
use crate::state::{Ctx, Shared};

fn both<H: Handler<T, S> + Clone, T: 'static>(r: &mut Routes, m: Method, path: &str, op: &'static str, h: H) {
    r.add(OCTAVIA, m.clone(), &format!("/v2{path}"), op, h.clone());
    r.add(OCTAVIA, m, &format!("/v2.0{path}"), op, h);
}

pub fn register(r: &mut Routes) {
    both(r, M::GET, "/lbaas/quotas", "octavia.quotas.list", quotas::list);
    both(
        r,
        M::GET,
        "/lbaas/quotas/{project}",
        "octavia.quotas.show",
        quotas::show,
    );
    both(
        r,
        M::PUT,
        "/lbaas/quotas/{project}",
        "octavia.quotas.update",
        quotas::update,
    );
    both(
        r,
        M::DELETE,
        "/lbaas/quotas/{project}",
        "octavia.quotas.reset",
        quotas::reset,
    );
    use Method as M;
    r.get(&["/load-balancer"], "/", "octavia.versions", versions);
    r.get(&[""], "/load-balancer/", "octavia.versions", versions);
    both(r, M::GET, "/lbaas/providers", "octavia.providers.list", providers);

    both(
        r,
        M::GET,
        "/lbaas/loadbalancers",
        "octavia.loadbalancers.list",
        loadbalancers::list,
    );
    both(
        r,
        M::POST,
        "/lbaas/loadbalancers",
        "octavia.loadbalancers.create",
        loadbalancers::create,
    );
    both(
        r,
        M::GET,
        "/lbaas/loadbalancers/{id}",
        "octavia.loadbalancers.show",
        loadbalancers::show,
    );
    both(
        r,
        M::PUT,
        "/lbaas/loadbalancers/{id}",
        "octavia.loadbalancers.update",
        loadbalancers::update,
    );
    both(
        r,
        M::DELETE,
        "/lbaas/loadbalancers/{id}",
        "octavia.loadbalancers.delete",
        loadbalancers::delete,
    );
    both(
        r,
        M::GET,
        "/lbaas/loadbalancers/{id}/status",
        "octavia.loadbalancers.status",
        status::tree,
    );
    both(
        r,
        M::GET,
        "/lbaas/loadbalancers/{id}/statuses",
        "octavia.loadbalancers.status",
        status::tree,
    );
    both(
        r,
        M::GET,
        "/lbaas/loadbalancers/{id}/stats",
        "octavia.loadbalancers.stats",
        status::lb_stats,
    );

    both(
        r,
        M::GET,
        "/lbaas/listeners",
        "octavia.listeners.list",
        listeners::list,
    );
    both(
        r,
        M::POST,
        "/lbaas/listeners",
        "octavia.listeners.create",
        listeners::create,
    );
    both(
        r,
        M::GET,
        "/lbaas/listeners/{id}",
        "octavia.listeners.show",
        listeners::show,
    );
    both(
        r,
        M::PUT,
        "/lbaas/listeners/{id}",
        "octavia.listeners.update",
        listeners::update,
    );
    both(
        r,
        M::DELETE,
        "/lbaas/listeners/{id}",
        "octavia.listeners.delete",
        listeners::delete,
    );
    both(
        r,
        M::GET,
        "/lbaas/listeners/{id}/stats",
        "octavia.listeners.stats",
        status::listener_stats,
    );

    both(r, M::GET, "/lbaas/pools", "octavia.pools.list", pools::list);
    both(r, M::POST, "/lbaas/pools", "octavia.pools.create", pools::create);
    both(r, M::GET, "/lbaas/pools/{id}", "octavia.pools.show", pools::show);
    both(
        r,
        M::PUT,
        "/lbaas/pools/{id}",
        "octavia.pools.update",
        pools::update,
    );
    both(
        r,
        M::DELETE,
        "/lbaas/pools/{id}",
        "octavia.pools.delete",
        pools::delete,
    );

    both(
        r,
        M::GET,
        "/lbaas/pools/{pool_id}/members",
        "octavia.members.list",
        members::list,
    );
    both(
        r,
        M::POST,
        "/lbaas/pools/{pool_id}/members",
        "octavia.members.create",
        members::create,
    );
    both(
        r,
        M::PUT,
        "/lbaas/pools/{pool_id}/members",
        "octavia.members.batch_update",
        members::batch_update,
    );
    both(
        r,
        M::GET,
        "/lbaas/pools/{pool_id}/members/{id}",
        "octavia.members.show",
        members::show,
    );
    both(
        r,
        M::PUT,
        "/lbaas/pools/{pool_id}/members/{id}",
        "octavia.members.update",
        members::update,
    );
    both(
        r,
        M::DELETE,
        "/lbaas/pools/{pool_id}/members/{id}",
        "octavia.members.delete",
        members::delete,
    );

    both(
        r,
        M::GET,
        "/lbaas/healthmonitors",
        "octavia.healthmonitors.list",
        healthmonitors::list,
    );
    both(
        r,
        M::POST,
        "/lbaas/healthmonitors",
        "octavia.healthmonitors.create",
        healthmonitors::create,
    );
    both(
        r,
        M::GET,
        "/lbaas/healthmonitors/{id}",
        "octavia.healthmonitors.show",
        healthmonitors::show,
    );
    both(
        r,
        M::PUT,
        "/lbaas/healthmonitors/{id}",
        "octavia.healthmonitors.update",
        healthmonitors::update,
    );
    both(
        r,
        M::DELETE,
        "/lbaas/healthmonitors/{id}",
        "octavia.healthmonitors.delete",
        healthmonitors::delete,
    );
}

/// `GET /load-balancer/`: unauthenticated version list, newest CURRENT.
pub async fn versions(State(sh): State<Arc<Shared>>, Extension(ctx): Extension<Ctx>) -> Response {
    let max = sh.profile().octavia.max_version.clone();
    let max_minor: u32 = max.split('.').nth(1).and_then(|m| m.parse().ok()).unwrap_or(0);
    let href = format!("{}/load-balancer/v2", ctx.base_url);
    let versions: Vec<Value> = (0..=max_minor)
        .map(|i| {
            json!({
                "id": format!("v2.{i}"),
                "status": if i == max_minor { "CURRENT" } else { "SUPPORTED" },
                "updated": "2016-12-11T00:00:00Z",
                "links": [{"href": href, "rel": "self"}],
            })
        })
        .collect();
    Json(json!({ "versions": versions })).into_response()
}

pub async fn providers(State(sh): State<Arc<Shared>>) -> Response {
    let list: Vec<Value> = sh
        .profile()
        .octavia
        .providers
        .iter()
        .map(|(name, t)| json!({"name": name, "description": t.description}))
        .collect();
    Json(json!({ "providers": list })).into_response()
}

// === helpers ===

pub fn parse(body: &Bytes) -> ApiResult<Value> {
    serde_json::from_slice(body)
        .map_err(|e| ApiError::octavia(StatusCode::BAD_REQUEST, format!("Invalid JSON body: {e}")))
}

/// The object under `key`; Octavia (wsme) names the missing mandatory field.
pub fn body_obj(body: &Bytes, key: &str) -> ApiResult<Map<String, Value>> {
    match parse(body)?.get_mut(key).map(Value::take) {
        Some(Value::Object(m)) => Ok(m),
        _ => Err(missing_field(key)),
    }
}

pub fn missing_field(key: &str) -> ApiError {
    ApiError::octavia(
        StatusCode::BAD_REQUEST,
        format!("Invalid input for field/attribute {key}. Value: 'None'. Mandatory field missing."),
    )
}

pub fn invalid_field(key: &str, v: &Value) -> ApiError {
    ApiError::octavia(
        StatusCode::BAD_REQUEST,
        format!("Invalid input for field/attribute {key}. Value: '{v}'."),
    )
}

pub fn s(m: &Map<String, Value>, k: &str) -> Option<String> {
    m.get(k).and_then(Value::as_str).map(str::to_owned)
}

pub fn b(m: &Map<String, Value>, k: &str) -> ApiResult<Option<bool>> {
    match m.get(k) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(v)) => Ok(Some(*v)),
        Some(v) => Err(invalid_field(k, v)),
    }
}

pub fn int(m: &Map<String, Value>, k: &str) -> ApiResult<Option<i64>> {
    match m.get(k) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v.as_i64().map(Some).ok_or_else(|| invalid_field(k, v)),
    }
}

pub fn tags(m: &Map<String, Value>) -> ApiResult<Option<Vec<String>>> {
    match m.get("tags") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Array(a)) => a
            .iter()
            .map(|t| {
                t.as_str()
                    .map(str::to_owned)
                    .ok_or_else(|| invalid_field("tags", t))
            })
            .collect::<ApiResult<_>>()
            .map(Some),
        Some(v) => Err(invalid_field("tags", v)),
    }
}

/// Octavia's `[api_settings] pagination_max_limit` default: a list without `limit`, or with a larger one, is
/// cut into pages of this many.
pub const PAGINATION_MAX_LIMIT: usize = 1000;

/// Octavia list: filter (as Octavia does: [`filters`]), paginate, always with a `_links` list. As Octavia's
/// `PaginationHelper`: at most [`PAGINATION_MAX_LIMIT`] per page whatever was asked, a `next` link on every
/// full page (even the last), and page links that keep only `limit`, `marker` and the sort — the filters
/// are dropped, so a client following `next` as given lists everything after the marker (ours re-applies
/// its own query). Conformance scenario `lb_lifecycle_*` checks the links on both.
pub fn list_response(ctx: &Ctx, q: Option<String>, coll: &str, items: Vec<Value>) -> Response {
    list_response_at(ctx, q, coll, coll, items)
}

/// [`list_response`] of a collection below another (`pools/{id}/members`): `path` is where the links point.
pub fn list_response_at(ctx: &Ctx, q: Option<String>, coll: &str, path: &str, items: Vec<Value>) -> Response {
    let mut params = ListParams::from_query(&Query::parse(q.as_deref()), &[]);
    if let Err(e) = filters::check(&params, coll, &items) {
        return e.into_response();
    }
    params.limit = Some(
        params
            .limit
            .map_or(PAGINATION_MAX_LIMIT, |l| l.min(PAGINATION_MAX_LIMIT)),
    );
    params
        .carry
        .retain(|(k, _)| matches!(k.as_str(), "sort_key" | "sort_dir"));
    let lb = filters::loadbalancer_filter(&mut params);
    let filtered: Vec<Value> = items
        .into_iter()
        .filter(|v| params.matches(v) && lb.as_deref().is_none_or(|id| filters::belongs_to(v, id)))
        .collect();
    let (page, _) = params.page(filtered);
    // Octavia cannot tell a last full page from one with more behind it: a full page always has `next`.
    let more = params.limit.is_some_and(|l| page.len() >= l);
    let url = format!("{}/load-balancer/v2/lbaas/{path}", ctx.base_url);
    let mut body = crate::query::list_body(coll, page, more, &params, &url);
    if let Value::Object(m) = &mut body {
        m.entry(format!("{coll}_links")).or_insert_with(|| json!([]));
    }
    Json(body).into_response()
}

pub fn created(key: &str, v: Value) -> Response {
    (StatusCode::CREATED, Json(json!({ key: v }))).into_response()
}

pub fn ok(key: &str, v: Value) -> Response {
    Json(json!({ key: v })).into_response()
}

pub fn to_json<T: serde::Serialize>(v: &T) -> Value {
    serde_json::to_value(v).unwrap_or(Value::Null)
}
