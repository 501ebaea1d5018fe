//! Quotas: per-project limits over the profile's defaults, and usage details.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Map, Value};

use super::resource_body;
use crate::errors::{ApiError, ApiResult};
use crate::state::Shared;
use crate::world::{World, QUOTA_DEFAULTS};

fn limits(w: &World, project: &str) -> Map<String, Value> {
    w.quota_defaults
        .keys()
        .map(|k| (k.clone(), json!(w.quota_limit(project, k))))
        .collect()
}

pub async fn list(State(sh): State<Arc<Shared>>) -> Response {
    let w = sh.world();
    let quotas: Vec<Value> = w
        .quota_overrides
        .keys()
        .map(|p| {
            let mut m = limits(&w, p);
            m.insert("project_id".into(), json!(p));
            m.insert("tenant_id".into(), json!(p));
            Value::Object(m)
        })
        .collect();
    Json(json!({ "quotas": quotas })).into_response()
}

pub async fn show(State(sh): State<Arc<Shared>>, Path(project): Path<String>) -> Response {
    let w = sh.world();
    Json(json!({ "quota": limits(&w, &project) })).into_response()
}

pub async fn default(State(sh): State<Arc<Shared>>) -> Response {
    let w = sh.world();
    Json(json!({ "quota": w.quota_defaults })).into_response()
}

pub async fn details(State(sh): State<Arc<Shared>>, Path(project): Path<String>) -> Response {
    let w = sh.world();
    let detail: Map<String, Value> = QUOTA_DEFAULTS
        .iter()
        .map(|(k, _)| {
            (
                (*k).to_owned(),
                json!({"limit": w.quota_limit(&project, k), "used": w.used(&project, k), "reserved": 0}),
            )
        })
        .collect();
    Json(json!({ "quota": detail })).into_response()
}

pub async fn update(
    State(sh): State<Arc<Shared>>,
    Path(project): Path<String>,
    body: Bytes,
) -> ApiResult<Response> {
    let m = resource_body(&body, "quota")?;
    let mut w = sh.world();
    let mut set = BTreeMap::new();
    for (k, v) in &m {
        if !w.quota_defaults.contains_key(k) {
            return Err(ApiError::bad_request(format!("Unrecognized attribute(s) '{k}'")));
        }
        let n = v
            .as_i64()
            .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
            .filter(|n| *n >= -1)
            .ok_or_else(|| {
                ApiError::bad_request(format!("Invalid input for {k}. Reason: '{v}' is not an integer."))
            })?;
        set.insert(k.clone(), n);
    }
    w.quota_overrides.entry(project.clone()).or_default().extend(set);
    Ok(Json(json!({ "quota": limits(&w, &project) })).into_response())
}

pub async fn delete(State(sh): State<Arc<Shared>>, Path(project): Path<String>) -> StatusCode {
    sh.world().quota_overrides.remove(&project);
    StatusCode::NO_CONTENT
}
