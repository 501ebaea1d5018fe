//! Subnet pools and prefix allocation from them (per-namespace subnets come from one).

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use axum::Extension;
use serde_json::Value;

use super::model::{to_json, Std, SubnetPool};
use super::{
    bool_field, check_revision, created, if_match, list_all, not_found, ok, refuse_body_tags, resource_body,
    str_field,
};
use crate::errors::{ApiError, ApiResult};
use crate::ipam::Cidr;
use crate::state::{Ctx, Shared};
use crate::world::World;

fn pool_not_found(id: &str) -> ApiError {
    not_found("SubnetPoolNotFound", "Subnet pool", id)
}

pub async fn list(
    State(sh): State<Arc<Shared>>,
    Extension(ctx): Extension<Ctx>,
    RawQuery(q): RawQuery,
) -> Response {
    list_all(&sh, &ctx, q.as_deref(), "subnetpools", |w| &w.subnetpools)
}

pub async fn show(
    State(sh): State<Arc<Shared>>,
    Path(id): Path<String>,
    RawQuery(q): RawQuery,
) -> ApiResult<Response> {
    sh.show_json(
        |w| &w.subnetpools,
        &id,
        "subnetpool",
        pool_not_found,
        q.as_deref(),
    )
}

fn parse_prefixes(v: Option<&Value>) -> ApiResult<Vec<Cidr>> {
    let arr = v.and_then(Value::as_array).ok_or_else(|| {
        ApiError::bad_request("Failed to parse request. Required attribute 'prefixes' not specified")
    })?;
    arr.iter()
        .map(|p| {
            p.as_str().and_then(Cidr::parse).ok_or_else(|| {
                ApiError::bad_request(format!(
                    "Invalid input for prefixes. Reason: '{p}' is not a valid IP subnet."
                ))
            })
        })
        .collect()
}

fn u8_field(m: &serde_json::Map<String, Value>, k: &str) -> Option<u8> {
    m.get(k)
        .and_then(|v| v.as_u64().or_else(|| v.as_str().and_then(|s| s.parse().ok())))
        .and_then(|v| u8::try_from(v).ok())
}

pub async fn create(
    State(sh): State<Arc<Shared>>,
    Extension(ctx): Extension<Ctx>,
    body: Bytes,
) -> ApiResult<Response> {
    let m = resource_body(&body, "subnetpool")?;
    let profile = sh.profile();
    let project = ctx.project_for(&m, &profile.keystone.default_project)?;
    let prefixes = parse_prefixes(m.get("prefixes"))?;
    let v6 = prefixes.first().is_some_and(|c| c.v6);
    if prefixes.iter().any(|c| c.v6 != v6) {
        return Err(ApiError::bad_request(
            "Illegal subnetpool prefix bound: prefixes of mixed IP versions",
        ));
    }
    let bits = if v6 { 128 } else { 32 };
    let min = u8_field(&m, "min_prefixlen").unwrap_or(if v6 { 64 } else { 8 });
    let max = u8_field(&m, "max_prefixlen").unwrap_or(bits);
    let default = u8_field(&m, "default_prefixlen").unwrap_or(min);
    if !(min <= default && default <= max && max <= bits) {
        return Err(ApiError::bad_request(
            "Illegal prefix bounds: min_prefixlen <= default_prefixlen <= max_prefixlen",
        ));
    }
    let mut w = sh.world();
    w.check_quota(&project, "subnetpool", 1)?;
    let mut std = Std::new(&project, str_field(&m, "name"), str_field(&m, "description"));
    std.tags = refuse_body_tags(&m)?.unwrap_or_default().into_iter().collect();
    let pool = SubnetPool {
        std,
        prefixes: prefixes.iter().map(ToString::to_string).collect(),
        default_prefixlen: default,
        min_prefixlen: min,
        max_prefixlen: max,
        ip_version: if v6 { 6 } else { 4 },
        shared: bool_field(&m, "shared")?.unwrap_or(false),
        is_default: bool_field(&m, "is_default")?.unwrap_or(false),
        address_scope_id: str_field(&m, "address_scope_id"),
        default_quota: m.get("default_quota").and_then(Value::as_i64),
    };
    let v = to_json(&pool);
    w.add_usage(&project, "subnetpool", 1);
    w.subnetpools.insert(pool.std.id.clone(), pool);
    Ok(created("subnetpool", v))
}

pub async fn update(
    State(sh): State<Arc<Shared>>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> ApiResult<Response> {
    let m = resource_body(&body, "subnetpool")?;
    let expected = if_match(&headers)?;
    let mut w = sh.world();
    let p = w.subnetpools.get_mut(&id).ok_or_else(|| pool_not_found(&id))?;
    check_revision(expected, p.std.revision_number)?;
    if let Some(v) = str_field(&m, "name") {
        p.std.name = v;
    }
    if let Some(v) = str_field(&m, "description") {
        p.std.description = v;
    }
    if m.contains_key("prefixes") {
        // Prefixes can only grow.
        let new = parse_prefixes(m.get("prefixes"))?;
        for c in new {
            let s = c.to_string();
            if !p.prefixes.contains(&s) {
                p.prefixes.push(s);
            }
        }
    }
    if let Some(v) = u8_field(&m, "default_prefixlen") {
        p.default_prefixlen = v;
    }
    p.std.touch();
    Ok(ok("subnetpool", to_json(&*p)))
}

pub async fn delete(State(sh): State<Arc<Shared>>, Path(id): Path<String>) -> ApiResult<StatusCode> {
    let mut w = sh.world();
    if !w.subnetpools.contains_key(&id) {
        return Err(pool_not_found(&id));
    }
    if w.subnets
        .values()
        .any(|s| s.subnetpool_id.as_deref() == Some(id.as_str()))
    {
        return Err(ApiError::conflict(
            "SubnetPoolInUse",
            format!(
                "Unable to complete operation on subnet pool {id}. Subnets are allocated from this pool."
            ),
        ));
    }
    if let Some(p) = w.subnetpools.remove(&id) {
        w.add_usage(&p.std.project_id, "subnetpool", -1);
    }
    Ok(StatusCode::NO_CONTENT)
}

/// The first free, aligned block of `prefixlen` (default: the pool's) in the pool's prefixes.
pub fn allocate_from_pool(w: &World, pool_id: &str, prefixlen: Option<u8>) -> ApiResult<Cidr> {
    let pool = w
        .subnetpools
        .get(pool_id)
        .ok_or_else(|| pool_not_found(pool_id))?;
    let len = prefixlen.unwrap_or(pool.default_prefixlen);
    if len < pool.min_prefixlen {
        return Err(ApiError::neutron(
            StatusCode::BAD_REQUEST,
            "MinPrefixSubnetAllocationError",
            format!(
                "Unable to allocate subnet with prefix length {len}, minimum allowed prefix is {}.",
                pool.min_prefixlen
            ),
        ));
    }
    if len > pool.max_prefixlen {
        return Err(ApiError::neutron(
            StatusCode::BAD_REQUEST,
            "MaxPrefixSubnetAllocationError",
            format!(
                "Unable to allocate subnet with prefix length {len}, maximum allowed prefix is {}.",
                pool.max_prefixlen
            ),
        ));
    }
    let mut taken: Vec<Cidr> = w
        .subnets
        .values()
        .filter(|s| s.subnetpool_id.as_deref() == Some(pool_id))
        .map(|s| s.ipam.cidr)
        .collect();
    taken.sort_by_key(Cidr::first);
    for prefix in pool.prefixes.iter().filter_map(|p| Cidr::parse(p)) {
        if len < prefix.prefix {
            continue;
        }
        let block = Cidr {
            addr: prefix.first(),
            prefix: len,
            v6: prefix.v6,
        };
        let step = block.last() - block.first() + 1;
        let mut candidate = prefix.first();
        for t in &taken {
            if t.last() < candidate {
                continue;
            }
            if t.first() > candidate.saturating_add(step - 1) {
                break;
            }
            // Overlap: skip past the taken block, realigned.
            let next = t.last().saturating_add(1);
            candidate = next.div_ceil(step).saturating_mul(step);
        }
        if candidate.saturating_add(step - 1) <= prefix.last() && candidate >= prefix.first() {
            return Ok(Cidr {
                addr: candidate,
                prefix: len,
                v6: prefix.v6,
            });
        }
    }
    Err(ApiError::neutron(
        StatusCode::CONFLICT,
        "SubnetAllocationError",
        format!("Failed to allocate subnet: Insufficient prefix space to allocate subnet size /{len}."),
    ))
}
