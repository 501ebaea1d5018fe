//! `GET /loadbalancers/{id}/status` (the whole tree, which is what "done" means with the ovn
//! provider) and the statistics endpoints.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Map, Value};

use super::listeners::listener_not_found;
use super::provisioning::lb_not_found;
use crate::errors::ApiResult;
use crate::state::Shared;
use crate::world::World;

fn pool_status(w: &World, pool_id: &str) -> Option<Value> {
    let p = w.pools.get(pool_id)?;
    let members: Vec<Value> = p
        .members
        .iter()
        .filter_map(|m| w.members.get(&m.id))
        .map(|m| {
            json!({
                "id": m.id, "name": m.name, "operating_status": m.operating_status,
                "provisioning_status": m.provisioning_status, "address": m.address, "protocol_port": m.protocol_port,
            })
        })
        .collect();
    let mut v: Map<String, Value> = Map::new();
    v.insert("id".into(), json!(p.id));
    v.insert("name".into(), json!(p.name));
    v.insert("provisioning_status".into(), json!(p.provisioning_status));
    v.insert("operating_status".into(), json!(p.operating_status));
    if let Some(h) = p.healthmonitor_id.as_ref().and_then(|h| w.healthmonitors.get(h)) {
        v.insert(
            "health_monitor".into(),
            json!({"id": h.id, "name": h.name, "type": h.kind,
                   "provisioning_status": h.provisioning_status, "operating_status": h.operating_status}),
        );
    }
    v.insert("members".into(), Value::Array(members));
    Some(Value::Object(v))
}

pub async fn tree(State(sh): State<Arc<Shared>>, Path(id): Path<String>) -> ApiResult<Response> {
    let w = sh.world();
    let lb = w.lbs.get(&id).ok_or_else(|| lb_not_found(&id))?;
    let listeners: Vec<Value> = lb
        .listeners
        .iter()
        .filter_map(|l| w.listeners.get(&l.id))
        .map(|l| {
            let pools: Vec<Value> = l
                .default_pool_id
                .iter()
                .filter_map(|p| pool_status(&w, p))
                .collect();
            json!({"id": l.id, "name": l.name, "operating_status": l.operating_status,
                   "provisioning_status": l.provisioning_status, "pools": pools})
        })
        .collect();
    Ok(Json(json!({"statuses": {"loadbalancer": {
        "id": lb.id, "name": lb.name, "operating_status": lb.operating_status,
        "provisioning_status": lb.provisioning_status, "listeners": listeners,
    }}}))
    .into_response())
}

fn zero_stats() -> Value {
    json!({"stats": {"active_connections": 0, "bytes_in": 0, "bytes_out": 0, "request_errors": 0, "total_connections": 0}})
}

pub async fn lb_stats(State(sh): State<Arc<Shared>>, Path(id): Path<String>) -> ApiResult<Response> {
    sh.world().lbs.get(&id).ok_or_else(|| lb_not_found(&id))?;
    Ok(Json(zero_stats()).into_response())
}

pub async fn listener_stats(State(sh): State<Arc<Shared>>, Path(id): Path<String>) -> ApiResult<Response> {
    sh.world()
        .listeners
        .get(&id)
        .ok_or_else(|| listener_not_found(&id))?;
    Ok(Json(zero_stats()).into_response())
}
