//! The Neutron v2.0 subset: version documents, extensions, networks, subnets, subnet pools, ports
//! (bulk create, filters, revision If-Match), trunks, security groups and rules, routers, floating
//! IPs, quotas and tags.

pub mod extensions;
pub mod fips;
pub mod missing;
pub mod model;
pub mod networks;
pub mod ports;
pub mod quotas;
pub mod respond;
pub mod routers;
pub mod security_groups;
pub mod status;
pub mod subnetpools;
pub mod subnets;
pub mod tags;
pub mod trunks;

use std::collections::BTreeMap;

use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{Map, Value};

use crate::errors::{ApiError, ApiResult};
use crate::query::{list_body, ListParams, Query};
use crate::routes::{Routes, NEUTRON};
use crate::state::{Ctx, Shared};
use crate::world::World;

pub use missing::not_found;
pub use respond::{created, ok, wrap};

pub fn register(r: &mut Routes) {
    r.get(&["/networking"], "/", "neutron.versions", extensions::versions);
    r.get(NEUTRON, "/v2.0", "neutron.resources", extensions::resources);
    r.get(NEUTRON, "/v2.0/", "neutron.resources", extensions::resources);
    r.get(
        NEUTRON,
        "/v2.0/extensions",
        "neutron.extensions.list",
        extensions::list,
    );
    r.get(
        NEUTRON,
        "/v2.0/extensions/{alias}",
        "neutron.extensions.show",
        extensions::show,
    );

    r.get(NEUTRON, "/v2.0/networks", "neutron.networks.list", networks::list);
    r.post(
        NEUTRON,
        "/v2.0/networks",
        "neutron.networks.create",
        networks::create,
    );
    r.get(
        NEUTRON,
        "/v2.0/networks/{id}",
        "neutron.networks.show",
        networks::show,
    );
    r.put(
        NEUTRON,
        "/v2.0/networks/{id}",
        "neutron.networks.update",
        networks::update,
    );
    r.delete(
        NEUTRON,
        "/v2.0/networks/{id}",
        "neutron.networks.delete",
        networks::delete,
    );

    r.get(NEUTRON, "/v2.0/subnets", "neutron.subnets.list", subnets::list);
    r.post(
        NEUTRON,
        "/v2.0/subnets",
        "neutron.subnets.create",
        subnets::create,
    );
    r.get(
        NEUTRON,
        "/v2.0/subnets/{id}",
        "neutron.subnets.show",
        subnets::show,
    );
    r.put(
        NEUTRON,
        "/v2.0/subnets/{id}",
        "neutron.subnets.update",
        subnets::update,
    );
    r.delete(
        NEUTRON,
        "/v2.0/subnets/{id}",
        "neutron.subnets.delete",
        subnets::delete,
    );

    r.get(
        NEUTRON,
        "/v2.0/subnetpools",
        "neutron.subnetpools.list",
        subnetpools::list,
    );
    r.post(
        NEUTRON,
        "/v2.0/subnetpools",
        "neutron.subnetpools.create",
        subnetpools::create,
    );
    r.get(
        NEUTRON,
        "/v2.0/subnetpools/{id}",
        "neutron.subnetpools.show",
        subnetpools::show,
    );
    r.put(
        NEUTRON,
        "/v2.0/subnetpools/{id}",
        "neutron.subnetpools.update",
        subnetpools::update,
    );
    r.delete(
        NEUTRON,
        "/v2.0/subnetpools/{id}",
        "neutron.subnetpools.delete",
        subnetpools::delete,
    );

    r.get(NEUTRON, "/v2.0/ports", "neutron.ports.list", ports::list);
    // Single or bulk: the pipeline names a `{"ports": [...]}` body `neutron.ports.bulk_create`.
    r.post(NEUTRON, "/v2.0/ports", "neutron.ports.create", ports::create);
    r.get(NEUTRON, "/v2.0/ports/{id}", "neutron.ports.show", ports::show);
    r.put(NEUTRON, "/v2.0/ports/{id}", "neutron.ports.update", ports::update);
    r.delete(NEUTRON, "/v2.0/ports/{id}", "neutron.ports.delete", ports::delete);

    r.get(NEUTRON, "/v2.0/trunks", "neutron.trunks.list", trunks::list);
    r.post(NEUTRON, "/v2.0/trunks", "neutron.trunks.create", trunks::create);
    r.get(NEUTRON, "/v2.0/trunks/{id}", "neutron.trunks.show", trunks::show);
    r.put(
        NEUTRON,
        "/v2.0/trunks/{id}",
        "neutron.trunks.update",
        trunks::update,
    );
    r.delete(
        NEUTRON,
        "/v2.0/trunks/{id}",
        "neutron.trunks.delete",
        trunks::delete,
    );
    r.put(
        NEUTRON,
        "/v2.0/trunks/{id}/add_subports",
        "neutron.trunks.add_subports",
        trunks::add_subports,
    );
    r.put(
        NEUTRON,
        "/v2.0/trunks/{id}/remove_subports",
        "neutron.trunks.remove_subports",
        trunks::remove_subports,
    );
    r.get(
        NEUTRON,
        "/v2.0/trunks/{id}/get_subports",
        "neutron.trunks.get_subports",
        trunks::get_subports,
    );

    r.get(
        NEUTRON,
        "/v2.0/security-groups",
        "neutron.security_groups.list",
        security_groups::list,
    );
    r.post(
        NEUTRON,
        "/v2.0/security-groups",
        "neutron.security_groups.create",
        security_groups::create,
    );
    r.get(
        NEUTRON,
        "/v2.0/security-groups/{id}",
        "neutron.security_groups.show",
        security_groups::show,
    );
    r.put(
        NEUTRON,
        "/v2.0/security-groups/{id}",
        "neutron.security_groups.update",
        security_groups::update,
    );
    r.delete(
        NEUTRON,
        "/v2.0/security-groups/{id}",
        "neutron.security_groups.delete",
        security_groups::delete,
    );
    r.get(
        NEUTRON,
        "/v2.0/security-group-rules",
        "neutron.security_group_rules.list",
        security_groups::list_rules,
    );
    // Single or bulk (`{"security_group_rules": [...]}` -> `neutron.security_group_rules.bulk_create`).
    r.post(
        NEUTRON,
        "/v2.0/security-group-rules",
        "neutron.security_group_rules.create",
        security_groups::create_rules,
    );
    r.get(
        NEUTRON,
        "/v2.0/security-group-rules/{id}",
        "neutron.security_group_rules.show",
        security_groups::show_rule,
    );
    r.delete(
        NEUTRON,
        "/v2.0/security-group-rules/{id}",
        "neutron.security_group_rules.delete",
        security_groups::delete_rule,
    );

    r.get(NEUTRON, "/v2.0/routers", "neutron.routers.list", routers::list);
    r.post(
        NEUTRON,
        "/v2.0/routers",
        "neutron.routers.create",
        routers::create,
    );
    r.get(
        NEUTRON,
        "/v2.0/routers/{id}",
        "neutron.routers.show",
        routers::show,
    );
    r.put(
        NEUTRON,
        "/v2.0/routers/{id}",
        "neutron.routers.update",
        routers::update,
    );
    r.delete(
        NEUTRON,
        "/v2.0/routers/{id}",
        "neutron.routers.delete",
        routers::delete,
    );
    r.put(
        NEUTRON,
        "/v2.0/routers/{id}/add_router_interface",
        "neutron.routers.add_interface",
        routers::add_interface,
    );
    r.put(
        NEUTRON,
        "/v2.0/routers/{id}/remove_router_interface",
        "neutron.routers.remove_interface",
        routers::remove_interface,
    );

    r.get(
        NEUTRON,
        "/v2.0/floatingips",
        "neutron.floatingips.list",
        fips::list,
    );
    r.post(
        NEUTRON,
        "/v2.0/floatingips",
        "neutron.floatingips.create",
        fips::create,
    );
    r.get(
        NEUTRON,
        "/v2.0/floatingips/{id}",
        "neutron.floatingips.show",
        fips::show,
    );
    r.put(
        NEUTRON,
        "/v2.0/floatingips/{id}",
        "neutron.floatingips.update",
        fips::update,
    );
    r.delete(
        NEUTRON,
        "/v2.0/floatingips/{id}",
        "neutron.floatingips.delete",
        fips::delete,
    );

    r.get(NEUTRON, "/v2.0/quotas", "neutron.quotas.list", quotas::list);
    r.get(
        NEUTRON,
        "/v2.0/quotas/{project}",
        "neutron.quotas.show",
        quotas::show,
    );
    r.put(
        NEUTRON,
        "/v2.0/quotas/{project}",
        "neutron.quotas.update",
        quotas::update,
    );
    r.delete(
        NEUTRON,
        "/v2.0/quotas/{project}",
        "neutron.quotas.delete",
        quotas::delete,
    );
    r.get(
        NEUTRON,
        "/v2.0/quotas/{project}/details",
        "neutron.quotas.details",
        quotas::details,
    );
    r.get(
        NEUTRON,
        "/v2.0/quotas/{project}/default",
        "neutron.quotas.default",
        quotas::default,
    );

    tags::register(r);
}

// === request helpers ===

pub fn parse_json(body: &Bytes) -> ApiResult<Value> {
    if body.is_empty() {
        return Err(ApiError::bad_request("Resource body required"));
    }
    serde_json::from_slice(body).map_err(|e| ApiError::bad_request(format!("Malformed request body: {e}")))
}

/// The object under `key` (`{"port": {...}}`).
pub fn resource_body(body: &Bytes, key: &str) -> ApiResult<Map<String, Value>> {
    match parse_json(body)?.get_mut(key).map(Value::take) {
        Some(Value::Object(m)) => Ok(m),
        _ => Err(ApiError::bad_request(format!(
            "Unable to find '{key}' in request body"
        ))),
    }
}

pub fn from_map<T: DeserializeOwned>(m: &Map<String, Value>) -> ApiResult<T> {
    serde_json::from_value(Value::Object(m.clone()))
        .map_err(|e| ApiError::bad_request(format!("Invalid input for operation: {e}.")))
}

/// `If-Match: revision_number=N` (Neutron's revision-if-match extension).
pub fn if_match(headers: &HeaderMap) -> ApiResult<Option<u64>> {
    let Some(h) = headers.get("if-match").and_then(|v| v.to_str().ok()) else {
        return Ok(None);
    };
    for tag in h.split(',').map(str::trim) {
        if let Some(n) = tag.strip_prefix("revision_number=") {
            return n
                .parse()
                .map(Some)
                .map_err(|_| ApiError::bad_request("If-Match header without revision_number=<int>"));
        }
    }
    Ok(None)
}

pub fn check_revision(expected: Option<u64>, current: u64) -> ApiResult<()> {
    match expected {
        Some(e) if e != current => Err(ApiError::neutron(
            StatusCode::PRECONDITION_FAILED,
            "RevisionNumberConstraintFailed",
            format!("Constrained to {e}, but current revision is {current}"),
        )),
        _ => Ok(()),
    }
}

/// GET of a collection kept in one world map: every resource, filtered and paginated.
pub fn list_all<T: Serialize>(
    sh: &Shared,
    ctx: &Ctx,
    q: Option<&str>,
    collection: &str,
    map: impl FnOnce(&World) -> &BTreeMap<String, T>,
) -> Response {
    let params = ListParams::from_query(&Query::parse(q), &[]);
    let items = sh.all_json(map);
    list_response(ctx, &params, collection, items)
}

/// Filters, paginates and wraps rendered objects.
pub fn list_response(ctx: &Ctx, params: &ListParams, collection: &str, items: Vec<Value>) -> Response {
    let filtered: Vec<Value> = items.into_iter().filter(|v| params.matches(v)).collect();
    let (page, more) = params.page(filtered);
    let url = format!("{}/v2.0/{}", ctx.base_url, collection.replace('_', "-"));
    Json(list_body(collection, page, more, params, &url)).into_response()
}

/// Create bodies of everything but ports: real Neutron 29 answers 400 "Attribute 'tags' not allowed in
/// POST" (tags are set afterwards with `PUT .../tags`); found by the kuryr-openstack conformance suite.
pub fn refuse_body_tags(m: &Map<String, Value>) -> ApiResult<Option<Vec<String>>> {
    if m.contains_key("tags") {
        return Err(ApiError::bad_request("Attribute 'tags' not allowed in POST"));
    }
    Ok(None)
}

/// Neutron validates UUID-typed attributes before looking anything up: 400, not 404 (found by the
/// kuryr-openstack conformance suite).
pub fn check_uuid(field: &str, value: &str) -> ApiResult<()> {
    if uuid::Uuid::parse_str(value).is_ok() {
        Ok(())
    } else {
        Err(ApiError::bad_request(format!(
            "Invalid input for {field}. Reason: '{value}' is not a valid UUID."
        )))
    }
}

/// Tags in a (port) create body, validated.
pub fn body_tags(m: &Map<String, Value>) -> ApiResult<Option<Vec<String>>> {
    match m.get("tags") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Array(a)) => a
            .iter()
            .map(|t| match t.as_str() {
                Some(s) if !s.is_empty() && s.len() <= 255 => Ok(s.to_owned()),
                _ => Err(ApiError::bad_request(format!(
                    "Invalid input for tags. Reason: '{t}' is not a valid tag."
                ))),
            })
            .collect::<ApiResult<Vec<_>>>()
            .map(Some),
        Some(other) => Err(ApiError::bad_request(format!(
            "Invalid input for tags. Reason: '{other}' is not a list."
        ))),
    }
}

pub fn str_field(m: &Map<String, Value>, key: &str) -> Option<String> {
    m.get(key).and_then(Value::as_str).map(str::to_owned)
}

pub fn bool_field(m: &Map<String, Value>, key: &str) -> ApiResult<Option<bool>> {
    match m.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(Value::String(s)) if s.eq_ignore_ascii_case("true") => Ok(Some(true)),
        Some(Value::String(s)) if s.eq_ignore_ascii_case("false") => Ok(Some(false)),
        Some(v) => Err(ApiError::bad_request(format!(
            "Invalid input for {key}. Reason: '{v}' is not a valid boolean value."
        ))),
    }
}

/// An update naming a read-only attribute: 400 "Cannot update read-only attribute …" (Neutron 29).
pub fn read_only(m: &Map<String, Value>, keys: &[&str]) -> ApiResult<()> {
    match keys.iter().find(|k| m.contains_key(**k)) {
        Some(k) => Err(ApiError::bad_request(format!(
            "Cannot update read-only attribute {k}"
        ))),
        None => Ok(()),
    }
}
