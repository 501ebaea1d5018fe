//! Version documents and extension discovery (the list comes from the profile, so tests can drop
//! `trunk` or `tag-ports-during-bulk-creation`).

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde_json::{json, Value};

use crate::errors::{ApiError, ApiResult};
use crate::state::{Ctx, Shared};

/// `GET /networking/`: unauthenticated version list.
pub async fn versions(Extension(ctx): Extension<Ctx>) -> Response {
    Json(json!({"versions": [{
        "status": "CURRENT",
        "id": "v2.0",
        "links": [{"href": format!("{}/networking/v2.0/", ctx.base_url), "rel": "self"}],
    }]}))
    .into_response()
}

/// `GET /v2.0/`: the resource list.
pub async fn resources(Extension(ctx): Extension<Ctx>) -> Response {
    let names = [
        ("network", "networks"),
        ("subnet", "subnets"),
        ("subnetpool", "subnetpools"),
        ("port", "ports"),
        ("router", "routers"),
        ("floatingip", "floatingips"),
        ("security_group", "security-groups"),
        ("security_group_rule", "security-group-rules"),
        ("trunk", "trunks"),
        ("quota", "quotas"),
    ];
    let resources: Vec<Value> = names
        .iter()
        .map(|(name, coll)| {
            json!({"name": name, "collection": coll,
                   "links": [{"href": format!("{}/v2.0/{coll}", ctx.base_url), "rel": "self"}]})
        })
        .collect();
    Json(json!({ "resources": resources })).into_response()
}

fn describe(alias: &str) -> Value {
    let name = match alias {
        "trunk" => "Trunk Extension",
        "trunk-details" => "Trunk port details",
        "tag-ports-during-bulk-creation" => "Tag Ports During Bulk Creation",
        "standard-attr-tag" => "Tag support for resources with standard attribute: port, subnet, subnetpool, network, security_group, router, floatingip, policy, trunk, network_segment_range",
        "revision-if-match" => "If-Match constraints based on revision_number",
        "security-group" => "security-group",
        "router" => "Neutron L3 Router",
        "quotas" => "Quota management support",
        "quota_details" => "Quota details management support",
        other => other,
    };
    json!({
        "alias": alias,
        "name": name,
        "description": format!("{name}."),
        "updated": "2016-01-01T10:00:00-00:00",
        "links": [],
    })
}

pub async fn list(State(sh): State<Arc<Shared>>) -> Response {
    let exts: Vec<Value> = sh
        .profile()
        .neutron
        .extension_aliases()
        .iter()
        .map(|a| describe(a))
        .collect();
    Json(json!({ "extensions": exts })).into_response()
}

pub async fn show(State(sh): State<Arc<Shared>>, Path(alias): Path<String>) -> ApiResult<Response> {
    if !sh.profile().neutron.has_extension(&alias) {
        return Err(ApiError::not_found(
            "HTTPNotFound",
            format!("Extension with alias {alias} does not exist"),
        ));
    }
    Ok(Json(json!({ "extension": describe(&alias) })).into_response())
}
