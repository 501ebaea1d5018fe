//! Octavia quotas, as Octavia 19 answers them on the lab: `GET/PUT/DELETE /v2/lbaas/quotas/{project}`
//! (`/quotas/defaults` is a project named "defaults"), every limit -1 (unlimited) by default, both
//! spellings (`load_balancer` and `loadbalancer`, `health_monitor` and `healthmonitor`) in answers, PUT and
//! DELETE answered 202. A load balancer create over the limit is 403 "Quota has been met for resources:
//! Load Balancer". Only the load balancer limit is enforced here.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Map, Value};

use super::body_obj;
use crate::errors::{ApiError, ApiResult};
use crate::state::Shared;
use crate::world::World;

/// The resources (canonical names) and their aliases in answers.
const RESOURCES: [(&str, &str); 7] = [
    ("load_balancer", "loadbalancer"),
    ("listener", "listener"),
    ("member", "member"),
    ("pool", "pool"),
    ("health_monitor", "healthmonitor"),
    ("l7policy", "l7policy"),
    ("l7rule", "l7rule"),
];

fn canonical(key: &str) -> Option<&'static str> {
    RESOURCES
        .iter()
        .find(|(c, a)| *c == key || *a == key)
        .map(|(c, _)| *c)
}

fn limit(w: &World, project: &str, resource: &str) -> i64 {
    w.octavia_quotas
        .get(project)
        .and_then(|q| q.get(resource))
        .copied()
        .unwrap_or(-1)
}

fn body(w: &World, project: &str) -> Value {
    let mut m = Map::new();
    m.insert("project_id".into(), json!(project));
    for (c, a) in RESOURCES {
        let v = json!(limit(w, project, c));
        m.insert(c.into(), v.clone());
        m.insert(a.into(), v);
    }
    m.insert("tenant_id".into(), json!(project));
    json!({ "quota": m })
}

/// 403 when the project already has as many load balancers as its limit.
pub fn check_load_balancer(w: &World, project: &str) -> ApiResult<()> {
    let max = limit(w, project, "load_balancer");
    let used = w.lbs.values().filter(|l| l.project_id == project).count();
    if max >= 0 && i64::try_from(used).unwrap_or(i64::MAX) >= max {
        return Err(ApiError::octavia(
            StatusCode::FORBIDDEN,
            "Quota has been met for resources: Load Balancer",
        ));
    }
    Ok(())
}

pub async fn list(State(sh): State<Arc<Shared>>) -> Response {
    let w = sh.world();
    let quotas: Vec<Value> = w
        .octavia_quotas
        .keys()
        .map(|p| body(&w, p)["quota"].clone())
        .collect();
    Json(json!({ "quotas": quotas, "quotas_links": [] })).into_response()
}

pub async fn show(State(sh): State<Arc<Shared>>, Path(project): Path<String>) -> Response {
    Json(body(&sh.world(), &project)).into_response()
}

pub async fn update(
    State(sh): State<Arc<Shared>>,
    Path(project): Path<String>,
    raw: Bytes,
) -> ApiResult<Response> {
    let m = body_obj(&raw, "quota")?;
    let mut set = BTreeMap::new();
    for (k, v) in &m {
        let c = canonical(k).ok_or_else(|| {
            ApiError::octavia(
                StatusCode::BAD_REQUEST,
                format!("Unknown attribute for argument quotas.quota: {k}"),
            )
        })?;
        match v.as_i64() {
            Some(n) if n >= -1 => {
                set.insert(c.to_owned(), n);
            }
            _ => {
                return Err(ApiError::octavia(
                    StatusCode::BAD_REQUEST,
                    format!(
                        "Invalid input for field/attribute {k}. Value: '{v}'. Value should be greater or equal to -1"
                    ),
                ))
            }
        }
    }
    let mut w = sh.world();
    w.octavia_quotas.entry(project.clone()).or_default().extend(set);
    Ok((StatusCode::ACCEPTED, Json(body(&w, &project))).into_response())
}

pub async fn reset(State(sh): State<Arc<Shared>>, Path(project): Path<String>) -> StatusCode {
    sh.world().octavia_quotas.remove(&project);
    StatusCode::ACCEPTED
}
