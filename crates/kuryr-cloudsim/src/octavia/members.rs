//! Members, including the batch replace (`PUT /pools/{id}/members`) matched on (address, port).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Extension;
use serde_json::{Map, Value};

use super::model::{IdRef, Member, Pool, ACTIVE, OFFLINE, PENDING_CREATE, PENDING_DELETE, PENDING_UPDATE};
use super::pools::pool_not_found;
use super::provisioning::{listeners_of_pool, lock_for_child, schedule};
use super::{
    b, body_obj, created, int, invalid_field, list_response_at, missing_field, ok, parse, s, tags, to_json,
};
use crate::errors::{ApiError, ApiResult};
use crate::faults::LbPhase;
use crate::ipam::parse_ip;
use crate::query::{project, Query};
use crate::state::{Ctx, Shared};
use crate::util::{new_id, octavia_now};
use crate::world::World;

fn member_not_found(id: &str) -> ApiError {
    ApiError::oct_not_found("Member", id)
}

fn duplicate(address: &str, port: u16) -> ApiError {
    ApiError::octavia(
        StatusCode::CONFLICT,
        format!("Another member on this pool is already using ip {address} on protocol_port {port}"),
    )
}

/// A new member (PENDING_CREATE) of `pool` from a request body; no duplicate checks.
pub fn build(w: &World, pool: &Pool, provider: &str, m: &Map<String, Value>) -> ApiResult<Member> {
    let address = s(m, "address").ok_or_else(|| missing_field("address"))?;
    if parse_ip(&address).is_none() {
        return Err(invalid_field("address", &Value::String(address)));
    }
    let port = int(m, "protocol_port")?.ok_or_else(|| missing_field("protocol_port"))?;
    let port = u16::try_from(port)
        .ok()
        .filter(|p| *p >= 1)
        .ok_or_else(|| invalid_field("protocol_port", &Value::from(port)))?;
    let subnet_id = s(m, "subnet_id");
    if let Some(sid) = &subnet_id {
        if !w.subnets.contains_key(sid) {
            return Err(ApiError::octavia(
                StatusCode::BAD_REQUEST,
                format!("Subnet {sid} not found."),
            ));
        }
    }
    let weight = int(m, "weight")?.unwrap_or(1);
    let weight = u32::try_from(weight)
        .ok()
        .filter(|w| *w <= 256)
        .ok_or_else(|| invalid_field("weight", &Value::from(weight)))?;
    let monitor_address = s(m, "monitor_address");
    let monitor_port = int(m, "monitor_port")?.and_then(|p| u16::try_from(p).ok());
    if provider == "ovn" && (monitor_address.is_some() || monitor_port.is_some()) {
        return Err(ApiError::unsupported_option(
            provider,
            "OVN Load Balancer does not support different member monitor address or port.",
        ));
    }
    Ok(Member {
        id: new_id(),
        name: s(m, "name").unwrap_or_default(),
        operating_status: OFFLINE.to_owned(),
        provisioning_status: PENDING_CREATE.to_owned(),
        admin_state_up: b(m, "admin_state_up")?.unwrap_or(true),
        address,
        protocol_port: port,
        weight,
        backup: b(m, "backup")?.unwrap_or(false),
        subnet_id,
        project_id: pool.project_id.clone(),
        created_at: octavia_now(),
        updated_at: None,
        monitor_address,
        monitor_port,
        tags: tags(m)?.unwrap_or_default(),
        vnic_type: "normal".to_owned(),
        pool_id: pool.id.clone(),
    })
}

pub fn insert(w: &mut World, m: Member) {
    if let Some(p) = w.pools.get_mut(&m.pool_id) {
        p.members.push(IdRef::new(&m.id));
    }
    w.members.insert(m.id.clone(), m);
}

fn provider_of(w: &World, pool: &Pool) -> String {
    w.lbs
        .get(&pool.lb_id)
        .map(|l| l.provider.clone())
        .unwrap_or_default()
}

/// A pool must itself be ACTIVE before its members change.
fn mutable_pool(w: &World, pool_id: &str) -> ApiResult<Pool> {
    let pool = w.pools.get(pool_id).ok_or_else(|| pool_not_found(pool_id))?;
    if pool.provisioning_status != ACTIVE {
        return Err(ApiError::immutable("Pool", pool_id));
    }
    Ok(pool.clone())
}

pub async fn list(
    State(sh): State<Arc<Shared>>,
    Extension(ctx): Extension<Ctx>,
    Path(pool_id): Path<String>,
    RawQuery(q): RawQuery,
) -> ApiResult<Response> {
    let items = {
        let w = sh.world();
        let pool = w.pools.get(&pool_id).ok_or_else(|| pool_not_found(&pool_id))?;
        pool.members
            .iter()
            .filter_map(|m| w.members.get(&m.id))
            .map(to_json)
            .collect()
    };
    let path = format!("pools/{pool_id}/members");
    Ok(list_response_at(&ctx, q, "members", &path, items))
}

pub async fn show(
    State(sh): State<Arc<Shared>>,
    Path((pool_id, id)): Path<(String, String)>,
    RawQuery(q): RawQuery,
) -> ApiResult<Response> {
    let w = sh.world();
    let m = w
        .members
        .get(&id)
        .filter(|m| m.pool_id == pool_id)
        .ok_or_else(|| member_not_found(&id))?;
    Ok(ok("member", project(to_json(m), &Query::parse(q.as_deref()))))
}

pub async fn create(
    State(sh): State<Arc<Shared>>,
    Path(pool_id): Path<String>,
    body: Bytes,
) -> ApiResult<Response> {
    let m = body_obj(&body, "member")?;
    sh.mutate(|w, jobs| {
        let pool = mutable_pool(w, &pool_id)?;
        let member = build(w, &pool, &provider_of(w, &pool), &m)?;
        if pool
            .members
            .iter()
            .filter_map(|r| w.members.get(&r.id))
            .any(|x| x.address == member.address && x.protocol_port == member.protocol_port)
        {
            return Err(duplicate(&member.address, member.protocol_port));
        }
        let listeners = listeners_of_pool(w, &pool_id);
        lock_for_child(w, &pool.lb_id, &listeners)?;
        let v = to_json(&member);
        insert(w, member);
        schedule(&sh, w, jobs, &pool.lb_id, LbPhase::Update, 0);
        Ok(created("member", v))
    })
}

pub async fn update(
    State(sh): State<Arc<Shared>>,
    Path((pool_id, id)): Path<(String, String)>,
    body: Bytes,
) -> ApiResult<Response> {
    let m = body_obj(&body, "member")?;
    refuse_fixed(&m, "member_.member", &["address", "protocol_port", "subnet_id"])?;
    sh.mutate(|w, jobs| {
        let pool = mutable_pool(w, &pool_id)?;
        if w.members.get(&id).is_none_or(|x| x.pool_id != pool_id) {
            return Err(member_not_found(&id));
        }
        let listeners = listeners_of_pool(w, &pool_id);
        lock_for_child(w, &pool.lb_id, &listeners)?;
        let x = w.members.get_mut(&id).ok_or_else(|| member_not_found(&id))?;
        apply_update(x, &m)?;
        let v = to_json(&*x);
        schedule(&sh, w, jobs, &pool.lb_id, LbPhase::Update, 0);
        Ok(ok("member", v))
    })
}

/// Octavia's `MemberPUT` has no address, port or subnet: 400 "Unknown attribute" (seen on Octavia 19).
pub(super) fn refuse_fixed(m: &Map<String, Value>, wrapper: &str, keys: &[&str]) -> ApiResult<()> {
    match keys.iter().find(|k| m.contains_key(**k)) {
        Some(k) => Err(ApiError::octavia(
            StatusCode::BAD_REQUEST,
            format!("Unknown attribute for argument {wrapper}: {k}"),
        )),
        None => Ok(()),
    }
}

fn apply_update(x: &mut Member, m: &Map<String, Value>) -> ApiResult<()> {
    if let Some(v) = s(m, "name") {
        x.name = v;
    }
    if let Some(v) = b(m, "admin_state_up")? {
        x.admin_state_up = v;
    }
    if let Some(v) = b(m, "backup")? {
        x.backup = v;
    }
    if let Some(v) = int(m, "weight")? {
        x.weight = u32::try_from(v)
            .ok()
            .filter(|w| *w <= 256)
            .ok_or_else(|| invalid_field("weight", &Value::from(v)))?;
    }
    if let Some(v) = tags(m)? {
        x.tags = v;
    }
    x.provisioning_status = PENDING_UPDATE.to_owned();
    x.updated_at = Some(octavia_now());
    Ok(())
}

pub async fn delete(
    State(sh): State<Arc<Shared>>,
    Path((pool_id, id)): Path<(String, String)>,
) -> ApiResult<StatusCode> {
    sh.mutate(|w, jobs| {
        let pool = mutable_pool(w, &pool_id)?;
        if w.members.get(&id).is_none_or(|x| x.pool_id != pool_id) {
            return Err(member_not_found(&id));
        }
        let listeners = listeners_of_pool(w, &pool_id);
        lock_for_child(w, &pool.lb_id, &listeners)?;
        if let Some(x) = w.members.get_mut(&id) {
            x.provisioning_status = PENDING_DELETE.to_owned();
        }
        schedule(&sh, w, jobs, &pool.lb_id, LbPhase::Update, 0);
        Ok(StatusCode::NO_CONTENT)
    })
}

/// `PUT /pools/{id}/members?additive_only=`: the body is the pool's whole member set. New
/// (address, port) pairs are created, known ones updated, missing ones deleted (kept with
/// `additive_only=true`). A no-op batch changes nothing; answers 202 with no body.
pub async fn batch_update(
    State(sh): State<Arc<Shared>>,
    Path(pool_id): Path<String>,
    RawQuery(q): RawQuery,
    body: Bytes,
) -> ApiResult<Response> {
    let additive_only = Query::parse(q.as_deref()).flag("additive_only");
    let v = parse(&body)?;
    let items: Vec<Map<String, Value>> = v
        .get("members")
        .and_then(Value::as_array)
        .ok_or_else(|| missing_field("members"))?
        .iter()
        .map(|m| m.as_object().cloned().ok_or_else(|| invalid_field("members", m)))
        .collect::<ApiResult<_>>()?;
    sh.mutate(|w, jobs| {
        let pool = mutable_pool(w, &pool_id)?;
        let provider = provider_of(w, &pool);
        let old: HashMap<(String, u16), String> = pool
            .members
            .iter()
            .filter_map(|r| w.members.get(&r.id))
            .map(|m| ((m.address.clone(), m.protocol_port), m.id.clone()))
            .collect();
        let mut new_members = Vec::new();
        let mut updates: Vec<(String, &Map<String, Value>)> = Vec::new();
        let mut seen: HashSet<(String, u16)> = HashSet::new();
        for m in &items {
            let member = build(w, &pool, &provider, m)?;
            let key = (member.address.clone(), member.protocol_port);
            if !seen.insert(key.clone()) {
                return Err(match old.contains_key(&key) {
                    true => ApiError::oct_validation("Member must be updated only once in the same request."),
                    false => duplicate(&key.0, key.1),
                });
            }
            match old.get(&key) {
                Some(id) => updates.push((id.clone(), m)),
                None => new_members.push(member),
            }
        }
        let deleted: Vec<String> = if additive_only {
            Vec::new()
        } else {
            old.iter()
                .filter(|(k, _)| !seen.contains(*k))
                .map(|(_, id)| id.clone())
                .collect()
        };
        if new_members.is_empty() && updates.is_empty() && deleted.is_empty() {
            return Ok(StatusCode::ACCEPTED.into_response());
        }
        let listeners = listeners_of_pool(w, &pool_id);
        lock_for_child(w, &pool.lb_id, &listeners)?;
        let changed = new_members.len() + updates.len() + deleted.len();
        for member in new_members {
            insert(w, member);
        }
        for (id, m) in updates {
            if let Some(x) = w.members.get_mut(&id) {
                apply_update(x, m)?;
            }
        }
        for id in deleted {
            if let Some(x) = w.members.get_mut(&id) {
                x.provisioning_status = PENDING_DELETE.to_owned();
            }
        }
        schedule(&sh, w, jobs, &pool.lb_id, LbPhase::Update, changed);
        Ok(StatusCode::ACCEPTED.into_response())
    })
}
