//! Trunks and subports, with the trunk plugin's rules: a port is in at most one trunk (as parent or
//! subport), a segmentation id is unique per trunk, subports get device_owner `trunk:subport`.

use std::collections::HashSet;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde_json::{json, Map, Value};

use super::missing::port_not_found;
use super::model::{to_json, Std, SubPort, Trunk};
use super::{
    bool_field, check_revision, created, if_match, list_all, not_found, ok, parse_json, refuse_body_tags,
    resource_body, str_field,
};
use crate::errors::{ApiError, ApiResult};
use crate::state::{Ctx, Jobs, Shared};
use crate::world::World;

fn trunk_not_found(id: &str) -> ApiError {
    not_found("TrunkNotFound", "Trunk", id)
}

/// Without the `trunk` extension the whole /trunks collection doesn't exist.
fn require_extension(sh: &Shared) -> ApiResult<()> {
    if sh.profile().neutron.has_extension("trunk") {
        Ok(())
    } else {
        Err(ApiError::not_found(
            "HTTPNotFound",
            "The resource could not be found.",
        ))
    }
}

pub async fn list(
    State(sh): State<Arc<Shared>>,
    Extension(ctx): Extension<Ctx>,
    RawQuery(q): RawQuery,
) -> ApiResult<Response> {
    require_extension(&sh)?;
    Ok(list_all(&sh, &ctx, q.as_deref(), "trunks", |w| &w.trunks))
}

pub async fn show(
    State(sh): State<Arc<Shared>>,
    Path(id): Path<String>,
    RawQuery(q): RawQuery,
) -> ApiResult<Response> {
    require_extension(&sh)?;
    sh.show_json(|w| &w.trunks, &id, "trunk", trunk_not_found, q.as_deref())
}

fn parse_subports(v: Option<&Value>) -> ApiResult<Vec<SubPort>> {
    let Some(v) = v else { return Ok(Vec::new()) };
    let arr = v
        .as_array()
        .ok_or_else(|| ApiError::invalid_input("Invalid data format for subports"))?;
    arr.iter()
        .map(|s| {
            let port_id = s
                .get("port_id")
                .and_then(Value::as_str)
                .ok_or_else(|| ApiError::invalid_input(format!("Invalid subport details '{s}': missing port_id")))?;
            let (st, sid) = (s.get("segmentation_type"), s.get("segmentation_id"));
            let (Some(st), Some(sid)) = (st, sid) else {
                return Err(ApiError::invalid_input(format!(
                    "Invalid subport details '{s}': missing segmentation information. Must specify both segmentation_id and segmentation_type"
                )));
            };
            let st = st.as_str().unwrap_or_default();
            if st != "vlan" {
                return Err(ApiError::invalid_input(format!("Unknown segmentation_type '{st}'")));
            }
            let sid_num = sid.as_u64().or_else(|| sid.as_str().and_then(|x| x.parse().ok())).ok_or_else(|| {
                ApiError::invalid_input(format!("Invalid subport details: segmentation_id '{sid}' is not an integer"))
            })?;
            if !(1..=4094).contains(&sid_num) {
                return Err(ApiError::invalid_input(format!("Segmentation ID '{sid_num}' is not in range")));
            }
            Ok(SubPort { port_id: port_id.to_owned(), segmentation_type: st.to_owned(), segmentation_id: sid_num as u32 })
        })
        .collect()
}

/// Checks every subport before any is added, so a batch is all or nothing.
fn validate_subports(
    w: &World,
    trunk_id: &str,
    parent: &str,
    existing: &[SubPort],
    new: &[SubPort],
) -> ApiResult<()> {
    let mut seg_ids: HashSet<u32> = existing.iter().map(|s| s.segmentation_id).collect();
    let mut ports: HashSet<&str> = HashSet::new();
    for s in new {
        let port = w
            .ports
            .get(&s.port_id)
            .ok_or_else(|| port_not_found(&s.port_id))?;
        if s.port_id == parent || w.trunk_by_parent.contains_key(&s.port_id) {
            return Err(ApiError::conflict(
                "ParentPortInUse",
                format!(
                    "Port {} is currently in use and is not eligible for use as a parent port.",
                    s.port_id
                ),
            ));
        }
        if w.trunk_by_subport.contains_key(&s.port_id) || !ports.insert(s.port_id.as_str()) {
            return Err(ApiError::conflict(
                "TrunkPortInUse",
                format!("Port {} is in use by another trunk.", s.port_id),
            ));
        }
        if !port.device_id.is_empty() {
            return Err(ApiError::conflict(
                "PortInUse",
                format!(
                    "Unable to complete operation on port {} for network {}. Port already has an attached device {}.",
                    s.port_id, port.network_id, port.device_id
                ),
            ));
        }
        if !seg_ids.insert(s.segmentation_id) {
            return Err(ApiError::conflict(
                "DuplicateSubPort",
                format!(
                    "segmentation_type {} and segmentation_id {} already in use on trunk {trunk_id}.",
                    s.segmentation_type, s.segmentation_id
                ),
            ));
        }
    }
    Ok(())
}

fn attach(w: &mut World, jobs: &mut Jobs, trunk_id: &str, parent: &str, subs: &[SubPort]) {
    for s in subs {
        w.trunk_by_subport.insert(s.port_id.clone(), trunk_id.to_owned());
        w.update_port(&s.port_id, |p| {
            p.device_owner = "trunk:subport".to_owned();
            p.binding_profile.insert("parent_name".into(), json!(parent));
            p.binding_profile.insert("tag".into(), json!(s.segmentation_id));
            p.vif_type = "ovs".to_owned();
            p.std.touch();
        });
        super::status::subport_added(w, jobs, &s.port_id);
    }
}

fn detach(w: &mut World, subs: &[SubPort]) {
    for s in subs {
        w.trunk_by_subport.remove(&s.port_id);
        w.update_port(&s.port_id, |p| {
            p.device_owner.clear();
            p.binding_profile.remove("parent_name");
            p.binding_profile.remove("tag");
            p.vif_type = "unbound".to_owned();
            p.std.touch();
        });
        super::status::subport_removed(w, &s.port_id);
    }
}

pub async fn create(
    State(sh): State<Arc<Shared>>,
    Extension(ctx): Extension<Ctx>,
    body: Bytes,
) -> ApiResult<Response> {
    require_extension(&sh)?;
    let m = resource_body(&body, "trunk")?;
    let profile = sh.profile();
    let project = ctx.project_for(&m, &profile.keystone.default_project)?;
    let parent = str_field(&m, "port_id").ok_or_else(|| {
        ApiError::bad_request("Failed to parse request. Required attribute 'port_id' not specified")
    })?;
    let subs = parse_subports(m.get("sub_ports"))?;
    sh.mutate(|w, jobs| create_trunk(w, jobs, &project, &parent, &m, subs))
}

fn create_trunk(
    w: &mut World,
    jobs: &mut Jobs,
    project: &str,
    parent: &str,
    m: &Map<String, Value>,
    subs: Vec<SubPort>,
) -> ApiResult<Response> {
    if !w.ports.contains_key(parent) {
        return Err(port_not_found(parent));
    }
    if w.trunk_by_subport.contains_key(parent) {
        return Err(ApiError::conflict(
            "TrunkPortInUse",
            format!("Port {parent} is in use by another trunk."),
        ));
    }
    if w.trunk_by_parent.contains_key(parent) {
        return Err(ApiError::conflict(
            "ParentPortInUse",
            format!("Port {parent} is currently in use and is not eligible for use as a parent port."),
        ));
    }
    let mut std = Std::new(project, str_field(m, "name"), str_field(m, "description"));
    std.tags = refuse_body_tags(m)?.unwrap_or_default().into_iter().collect();
    validate_subports(w, &std.id, parent, &[], &subs)?;
    let trunk = Trunk {
        std,
        port_id: parent.to_owned(),
        admin_state_up: bool_field(m, "admin_state_up")?.unwrap_or(true),
        // The OVN driver sets the trunk ACTIVE at once, even while its parent is DOWN.
        status: "ACTIVE".to_owned(),
        sub_ports: subs.clone(),
    };
    let id = trunk.std.id.clone();
    w.trunk_by_parent.insert(parent.to_owned(), id.clone());
    w.trunks.insert(id.clone(), trunk);
    attach(w, jobs, &id, parent, &subs);
    let v = w.trunks.get(&id).map(to_json).unwrap_or(Value::Null);
    Ok(created("trunk", v))
}

pub async fn update(
    State(sh): State<Arc<Shared>>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> ApiResult<Response> {
    require_extension(&sh)?;
    let m = resource_body(&body, "trunk")?;
    let expected = if_match(&headers)?;
    let mut w = sh.world();
    let t = w.trunks.get_mut(&id).ok_or_else(|| trunk_not_found(&id))?;
    check_revision(expected, t.std.revision_number)?;
    if let Some(v) = str_field(&m, "name") {
        t.std.name = v;
    }
    if let Some(v) = str_field(&m, "description") {
        t.std.description = v;
    }
    if let Some(v) = bool_field(&m, "admin_state_up")? {
        t.admin_state_up = v;
    }
    t.std.touch();
    Ok(ok("trunk", to_json(&*t)))
}

pub async fn delete(State(sh): State<Arc<Shared>>, Path(id): Path<String>) -> ApiResult<StatusCode> {
    require_extension(&sh)?;
    let mut w = sh.world();
    let t = w.trunks.get(&id).ok_or_else(|| trunk_not_found(&id))?;
    if !t.admin_state_up {
        return Err(ApiError::conflict(
            "TrunkDisabled",
            format!("Trunk {id} is currently disabled."),
        ));
    }
    let subs = t.sub_ports.clone();
    let parent = t.port_id.clone();
    detach(&mut w, &subs);
    w.trunks.remove(&id);
    w.trunk_by_parent.remove(&parent);
    Ok(StatusCode::NO_CONTENT)
}

fn subports_body(body: &Bytes) -> ApiResult<Vec<SubPort>> {
    let v = parse_json(body)?;
    parse_subports(Some(v.get("sub_ports").ok_or_else(|| {
        ApiError::bad_request("Unable to find 'sub_ports' in request body")
    })?))
}

/// `PUT /v2.0/trunks/{id}/add_subports`: answers the trunk itself (not wrapped).
pub async fn add_subports(
    State(sh): State<Arc<Shared>>,
    Path(id): Path<String>,
    body: Bytes,
) -> ApiResult<Response> {
    require_extension(&sh)?;
    let subs = subports_body(&body)?;
    sh.mutate(|w, jobs| add(w, jobs, &id, subs))
}

fn add(w: &mut World, jobs: &mut Jobs, id: &str, subs: Vec<SubPort>) -> ApiResult<Response> {
    let t = w.trunks.get(id).ok_or_else(|| trunk_not_found(id))?;
    if !t.admin_state_up {
        return Err(ApiError::conflict(
            "TrunkDisabled",
            format!("Trunk {id} is currently disabled."),
        ));
    }
    let parent = t.port_id.clone();
    validate_subports(w, id, &parent, &t.sub_ports, &subs)?;
    if let Some(t) = w.trunks.get_mut(id) {
        t.sub_ports.extend(subs.iter().cloned());
        t.std.touch();
    }
    attach(w, jobs, id, &parent, &subs);
    Ok(Json(w.trunks.get(id).map(to_json).unwrap_or(Value::Null)).into_response())
}

/// `PUT /v2.0/trunks/{id}/remove_subports`: every named port must be a subport of this trunk.
pub async fn remove_subports(
    State(sh): State<Arc<Shared>>,
    Path(id): Path<String>,
    body: Bytes,
) -> ApiResult<Response> {
    require_extension(&sh)?;
    let v = parse_json(&body)?;
    let ids: Vec<String> = v
        .get("sub_ports")
        .and_then(Value::as_array)
        .ok_or_else(|| ApiError::bad_request("Unable to find 'sub_ports' in request body"))?
        .iter()
        .filter_map(|s| s.get("port_id").and_then(Value::as_str).map(str::to_owned))
        .collect();
    let mut w = sh.world();
    let t = w.trunks.get(&id).ok_or_else(|| trunk_not_found(&id))?;
    if !t.admin_state_up {
        return Err(ApiError::conflict(
            "TrunkDisabled",
            format!("Trunk {id} is currently disabled."),
        ));
    }
    let mut removed = Vec::new();
    for pid in &ids {
        match t.sub_ports.iter().find(|s| &s.port_id == pid) {
            Some(s) => removed.push(s.clone()),
            None => {
                return Err(ApiError::not_found(
                    "SubPortNotFound",
                    format!("SubPort {pid} on trunk {id} could not be found."),
                ))
            }
        }
    }
    if let Some(t) = w.trunks.get_mut(&id) {
        t.sub_ports.retain(|s| !ids.contains(&s.port_id));
        t.std.touch();
    }
    detach(&mut w, &removed);
    Ok(Json(w.trunks.get(&id).map(to_json).unwrap_or(Value::Null)).into_response())
}

pub async fn get_subports(State(sh): State<Arc<Shared>>, Path(id): Path<String>) -> ApiResult<Response> {
    require_extension(&sh)?;
    let w = sh.world();
    let t = w.trunks.get(&id).ok_or_else(|| trunk_not_found(&id))?;
    Ok(Json(json!({ "sub_ports": t.sub_ports })).into_response())
}
