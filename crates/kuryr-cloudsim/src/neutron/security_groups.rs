//! Security groups and rules: default groups, rule validation, 409 on duplicate rules, atomic bulk
//! rule create.

use std::collections::{BTreeSet, HashSet};
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde_json::{json, Map, Value};

use super::model::{to_json, SecurityGroup, SgRule, Std};
use super::{
    bool_field, check_revision, created, if_match, list_response, ok, parse_json, refuse_body_tags,
    resource_body, str_field,
};
use crate::errors::{ApiError, ApiResult};
use crate::ipam::Cidr;
use crate::query::{project, ListParams, Query};
use crate::state::{Ctx, Shared};
use crate::util::{neutron_now, new_id};
use crate::world::World;

fn sg_not_found(id: &str) -> ApiError {
    ApiError::not_found(
        "SecurityGroupNotFound",
        format!("Security group {id} does not exist"),
    )
}

fn rule_not_found(id: &str) -> ApiError {
    ApiError::not_found(
        "SecurityGroupRuleNotFound",
        format!("Security group rule {id} does not exist"),
    )
}

pub fn render_sg(w: &World, sg: &SecurityGroup) -> Value {
    let mut v = to_json(sg);
    let rules: Vec<Value> = sg
        .rules
        .iter()
        .filter_map(|r| w.sg_rules.get(r))
        .map(to_json)
        .collect();
    if let Value::Object(m) = &mut v {
        m.insert("security_group_rules".into(), Value::Array(rules));
    }
    v
}

fn new_rule(
    project: &str,
    sg: &str,
    direction: &str,
    ethertype: &str,
    remote_group: Option<&str>,
    default: bool,
) -> SgRule {
    let now = neutron_now();
    SgRule {
        id: new_id(),
        project_id: project.to_owned(),
        tenant_id: project.to_owned(),
        security_group_id: sg.to_owned(),
        direction: direction.to_owned(),
        ethertype: ethertype.to_owned(),
        protocol: None,
        port_range_min: None,
        port_range_max: None,
        remote_ip_prefix: None,
        remote_group_id: remote_group.map(str::to_owned),
        remote_address_group_id: None,
        normalized_cidr: None,
        description: String::new(),
        tags: BTreeSet::new(),
        created_at: now.clone(),
        updated_at: now,
        revision_number: 0,
        belongs_to_default_sg: default,
    }
}

fn insert_rule(w: &mut World, rule: SgRule) {
    w.add_usage(&rule.project_id.clone(), "security_group_rule", 1);
    if let Some(sg) = w.security_groups.get_mut(&rule.security_group_id) {
        sg.rules.insert(rule.id.clone());
    }
    w.sg_rules.insert(rule.id.clone(), rule);
}

/// A new group with Neutron's default egress rules (plus ingress from itself for `default`).
fn new_group(w: &mut World, project: &str, name: &str, description: &str, default: bool) -> String {
    let mut std = Std::new(project, Some(name.to_owned()), Some(description.to_owned()));
    std.revision_number = 1;
    let id = std.id.clone();
    w.security_groups.insert(
        id.clone(),
        SecurityGroup {
            std,
            stateful: true,
            shared: false,
            rules: BTreeSet::new(),
            is_default: default,
        },
    );
    w.add_usage(project, "security_group", 1);
    for eth in ["IPv4", "IPv6"] {
        insert_rule(w, new_rule(project, &id, "egress", eth, None, default));
        if default {
            insert_rule(w, new_rule(project, &id, "ingress", eth, Some(&id), default));
        }
    }
    id
}

/// The project's `default` group, created on first use like Neutron does.
pub fn ensure_default_sg(w: &mut World, project: &str) -> ApiResult<String> {
    if let Some(id) = w.default_sg.get(project) {
        if w.security_groups.contains_key(id) {
            return Ok(id.clone());
        }
    }
    let id = new_group(w, project, "default", "Default security group", true);
    w.default_sg.insert(project.to_owned(), id.clone());
    Ok(id)
}

pub async fn list(
    State(sh): State<Arc<Shared>>,
    Extension(ctx): Extension<Ctx>,
    RawQuery(q): RawQuery,
) -> Response {
    let query = Query::parse(q.as_deref());
    // As Neutron does: a listing makes sure the project it is about (its filter's, else the caller's)
    // has its default group.
    let project = query
        .first("project_id")
        .or_else(|| query.first("tenant_id"))
        .map(str::to_owned)
        .or_else(|| ctx.project.clone());
    if let Some(p) = project {
        // A quota refusal only means the group is not made by this listing.
        let _ = ensure_default_sg(&mut sh.world(), &p);
    }
    let params = ListParams::from_query(&query, &[]);
    let items = sh.all_rendered(|w| &w.security_groups, render_sg);
    list_response(&ctx, &params, "security_groups", items)
}

pub async fn show(
    State(sh): State<Arc<Shared>>,
    Path(id): Path<String>,
    RawQuery(q): RawQuery,
) -> ApiResult<Response> {
    sh.show_rendered(
        |w| &w.security_groups,
        &id,
        "security_group",
        sg_not_found,
        q.as_deref(),
        render_sg,
    )
}

pub async fn create(
    State(sh): State<Arc<Shared>>,
    Extension(ctx): Extension<Ctx>,
    body: Bytes,
) -> ApiResult<Response> {
    let m = resource_body(&body, "security_group")?;
    let profile = sh.profile();
    let project = ctx.project_for(&m, &profile.keystone.default_project)?;
    let tags = refuse_body_tags(&m)?;
    let mut w = sh.world();
    ensure_default_sg(&mut w, &project)?;
    w.check_quota(&project, "security_group", 1)?;
    w.check_quota(&project, "security_group_rule", 2)?;
    let name = str_field(&m, "name").unwrap_or_default();
    let id = new_group(
        &mut w,
        &project,
        &name,
        &str_field(&m, "description").unwrap_or_default(),
        false,
    );
    let stateful = bool_field(&m, "stateful")?.unwrap_or(true);
    if let Some(sg) = w.security_groups.get_mut(&id) {
        sg.stateful = stateful;
        if profile.neutron.has_extension("standard-attr-tag") {
            sg.std.tags = tags.unwrap_or_default().into_iter().collect();
        }
    }
    let v = w
        .security_groups
        .get(&id)
        .map(|sg| render_sg(&w, sg))
        .unwrap_or(Value::Null);
    Ok(created("security_group", v))
}

pub async fn update(
    State(sh): State<Arc<Shared>>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> ApiResult<Response> {
    let m = resource_body(&body, "security_group")?;
    let expected = if_match(&headers)?;
    let mut w = sh.world();
    let sg = w.security_groups.get_mut(&id).ok_or_else(|| sg_not_found(&id))?;
    check_revision(expected, sg.std.revision_number)?;
    if let Some(v) = str_field(&m, "name") {
        sg.std.name = v;
    }
    if let Some(v) = str_field(&m, "description") {
        sg.std.description = v;
    }
    if let Some(v) = bool_field(&m, "stateful")? {
        sg.stateful = v;
    }
    sg.std.touch();
    let v = w
        .security_groups
        .get(&id)
        .map(|sg| render_sg(&w, sg))
        .unwrap_or(Value::Null);
    Ok(ok("security_group", v))
}

pub async fn delete(State(sh): State<Arc<Shared>>, Path(id): Path<String>) -> ApiResult<StatusCode> {
    let mut w = sh.world();
    let sg = w.security_groups.get(&id).ok_or_else(|| sg_not_found(&id))?;
    let project = sg.std.project_id.clone();
    if w.ports.values().any(|p| p.security_groups.contains(&id)) {
        return Err(ApiError::conflict(
            "SecurityGroupInUse",
            format!("Security Group {id} in use."),
        ));
    }
    let own: Vec<String> = sg.rules.iter().cloned().collect();
    // Rules elsewhere that name this group as their remote group go with it (a DB cascade upstream).
    let referencing: Vec<String> = w
        .sg_rules
        .values()
        .filter(|r| r.remote_group_id.as_deref() == Some(id.as_str()))
        .map(|r| r.id.clone())
        .collect();
    for r in own.iter().chain(referencing.iter()) {
        remove_rule(&mut w, r);
    }
    w.security_groups.remove(&id);
    w.add_usage(&project, "security_group", -1);
    if w.default_sg.get(&project) == Some(&id) {
        w.default_sg.remove(&project);
    }
    Ok(StatusCode::NO_CONTENT)
}

// === rules ===

fn remove_rule(w: &mut World, id: &str) {
    if let Some(r) = w.sg_rules.remove(id) {
        if let Some(sg) = w.security_groups.get_mut(&r.security_group_id) {
            sg.rules.remove(id);
        }
        w.add_usage(&r.project_id, "security_group_rule", -1);
    }
}

pub async fn list_rules(
    State(sh): State<Arc<Shared>>,
    Extension(ctx): Extension<Ctx>,
    RawQuery(q): RawQuery,
) -> Response {
    let params = ListParams::from_query(&Query::parse(q.as_deref()), &[]);
    let items = {
        let w = sh.world();
        match params.filter_values("security_group_id") {
            // Rules of the asked groups only: no scan of every rule.
            Some(sgs) => sgs
                .iter()
                .filter_map(|sg| w.security_groups.get(sg))
                .flat_map(|sg| sg.rules.iter())
                .filter_map(|r| w.sg_rules.get(r))
                .map(to_json)
                .collect(),
            None => w.sg_rules.values().map(to_json).collect(),
        }
    };
    list_response(&ctx, &params, "security_group_rules", items)
}

pub async fn show_rule(
    State(sh): State<Arc<Shared>>,
    Path(id): Path<String>,
    RawQuery(q): RawQuery,
) -> ApiResult<Response> {
    let v = sh
        .world()
        .sg_rules
        .get(&id)
        .map(to_json)
        .ok_or_else(|| rule_not_found(&id))?;
    Ok(ok("security_group_rule", project(v, &Query::parse(q.as_deref()))))
}

pub async fn delete_rule(State(sh): State<Arc<Shared>>, Path(id): Path<String>) -> ApiResult<StatusCode> {
    let mut w = sh.world();
    if !w.sg_rules.contains_key(&id) {
        return Err(rule_not_found(&id));
    }
    remove_rule(&mut w, &id);
    Ok(StatusCode::NO_CONTENT)
}

fn proto_number(p: &str) -> String {
    match p {
        "tcp" => "6",
        "udp" => "17",
        "icmp" => "1",
        "icmpv6" | "ipv6-icmp" => "58",
        "sctp" => "132",
        "any" | "" => "",
        other => other,
    }
    .to_owned()
}

fn port_field(m: &Map<String, Value>, k: &str) -> ApiResult<Option<u32>> {
    match m.get(k) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_u64()
            .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
            .and_then(|n| u32::try_from(n).ok())
            .map(Some)
            .ok_or_else(|| {
                ApiError::bad_request(format!("Invalid input for {k}. Reason: '{v}' is not an integer."))
            }),
    }
}

/// Validates one rule body into a rule (not yet stored).
fn build_rule(w: &World, m: &Map<String, Value>, project: &str) -> ApiResult<SgRule> {
    let sg_id = str_field(m, "security_group_id").ok_or_else(|| {
        ApiError::bad_request("Failed to parse request. Required attribute 'security_group_id' not specified")
    })?;
    let sg = w
        .security_groups
        .get(&sg_id)
        .ok_or_else(|| sg_not_found(&sg_id))?;
    let direction = str_field(m, "direction").unwrap_or_default();
    if direction != "ingress" && direction != "egress" {
        return Err(ApiError::bad_request(format!(
            "Invalid input for direction. Reason: '{direction}' is not in ['ingress', 'egress']."
        )));
    }
    let ethertype = str_field(m, "ethertype").unwrap_or_else(|| "IPv4".to_owned());
    if ethertype != "IPv4" && ethertype != "IPv6" {
        return Err(ApiError::neutron(
            StatusCode::BAD_REQUEST,
            "SecurityGroupRuleInvalidEtherType",
            format!("Security group rule for ethertype '{ethertype}' not supported. Allowed values are ['IPv4', 'IPv6']."),
        ));
    }
    let protocol = match m.get("protocol") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if s.is_empty() || s.eq_ignore_ascii_case("any") => None,
        Some(Value::String(s)) => Some(s.to_ascii_lowercase()),
        Some(Value::Number(n)) => Some(n.to_string()),
        Some(v) => return Err(ApiError::bad_request(format!("Invalid input for protocol: {v}"))),
    };
    let (min, mut max) = (port_field(m, "port_range_min")?, port_field(m, "port_range_max")?);
    if (min.is_some() || max.is_some()) && protocol.is_none() {
        return Err(ApiError::neutron(
            StatusCode::BAD_REQUEST,
            "SecurityGroupProtocolRequiredWithPorts",
            "Must also specify protocol if port range is given.",
        ));
    }
    let pnum = protocol.as_deref().map(proto_number).unwrap_or_default();
    if matches!(pnum.as_str(), "6" | "17" | "132" | "33" | "136") {
        if min.is_some() && max.is_none() {
            max = min;
        }
        if let (Some(a), Some(b)) = (min, max) {
            if a == 0 || b > 65535 || a > b {
                return Err(ApiError::neutron(
                    StatusCode::BAD_REQUEST,
                    "SecurityGroupInvalidPortRange",
                    "For TCP/UDP protocols, port_range_min must be <= port_range_max",
                ));
            }
        }
    }
    let remote_ip_prefix = str_field(m, "remote_ip_prefix");
    let remote_group_id = str_field(m, "remote_group_id");
    if remote_ip_prefix.is_some() && remote_group_id.is_some() {
        return Err(ApiError::neutron(
            StatusCode::BAD_REQUEST,
            "SecurityGroupRemoteGroupAndRemoteIpPrefix",
            "Only remote_ip_prefix or remote_group_id may be provided.",
        ));
    }
    if let Some(rg) = &remote_group_id {
        if !w.security_groups.contains_key(rg) {
            return Err(sg_not_found(rg));
        }
    }
    let normalized = match &remote_ip_prefix {
        Some(p) => {
            let c = Cidr::parse(p).ok_or_else(|| {
                ApiError::bad_request(format!(
                    "Invalid input for remote_ip_prefix. Reason: '{p}' is not a valid IP subnet."
                ))
            })?;
            if (ethertype == "IPv6") != c.v6 {
                return Err(ApiError::neutron(
                    StatusCode::BAD_REQUEST,
                    "SecurityGroupRuleParameterConflict",
                    format!("Conflicting value ethertype {ethertype} for CIDR {p}"),
                ));
            }
            Some(c.to_string())
        }
        None => None,
    };
    let mut rule = new_rule(
        project,
        &sg_id,
        &direction,
        &ethertype,
        remote_group_id.as_deref(),
        sg.is_default,
    );
    rule.protocol = protocol;
    rule.port_range_min = min;
    rule.port_range_max = max;
    rule.remote_ip_prefix = remote_ip_prefix;
    rule.normalized_cidr = normalized;
    rule.description = str_field(m, "description").unwrap_or_default();
    Ok(rule)
}

/// What makes rules duplicates: protocol by number, 0.0.0.0/0 and ::/0 the same as no prefix.
fn rule_key(
    r: &SgRule,
) -> (
    String,
    String,
    String,
    String,
    Option<u32>,
    Option<u32>,
    String,
    String,
) {
    let mut k = r.identity();
    k.3 = proto_number(&k.3);
    if k.6 == "0.0.0.0/0" || k.6 == "::/0" {
        k.6.clear();
    }
    k
}

/// One rule or a bulk `{"security_group_rules": [...]}`: all validated, quota-checked and
/// duplicate-checked (against stored rules and within the batch) before any is stored.
pub async fn create_rules(
    State(sh): State<Arc<Shared>>,
    Extension(ctx): Extension<Ctx>,
    body: Bytes,
) -> ApiResult<Response> {
    let v = parse_json(&body)?;
    let profile = sh.profile();
    let (items, bulk) = match (v.get("security_group_rules"), v.get("security_group_rule")) {
        (Some(Value::Array(a)), _) => (a.clone(), true),
        (_, Some(o @ Value::Object(_))) => (vec![o.clone()], false),
        _ => {
            return Err(ApiError::bad_request(
                "Unable to find 'security_group_rule' in request body",
            ))
        }
    };
    let mut w = sh.world();
    let mut rules = Vec::with_capacity(items.len());
    for it in &items {
        let m = it
            .as_object()
            .ok_or_else(|| ApiError::bad_request("Invalid security group rule"))?;
        let project = ctx.project_for(m, &profile.keystone.default_project)?;
        rules.push(build_rule(&w, m, &project)?);
    }
    let mut seen: HashSet<_> = HashSet::new();
    for r in &rules {
        let key = rule_key(r);
        if let Some(existing) = w
            .security_groups
            .get(&r.security_group_id)
            .into_iter()
            .flat_map(|sg| sg.rules.iter())
            .filter_map(|id| w.sg_rules.get(id))
            .find(|e| rule_key(e) == key)
        {
            return Err(ApiError::conflict(
                "SecurityGroupRuleExists",
                format!("Security group rule already exists. Rule id is {}.", existing.id),
            ));
        }
        if !seen.insert(key) {
            return Err(ApiError::conflict(
                "DuplicateSecurityGroupRuleInPost",
                "Duplicate Security Group Rule in POST.",
            ));
        }
    }
    let mut per_project: std::collections::BTreeMap<String, i64> = std::collections::BTreeMap::new();
    for r in &rules {
        *per_project.entry(r.project_id.clone()).or_default() += 1;
    }
    for (p, n) in &per_project {
        w.check_quota(p, "security_group_rule", *n)?;
    }
    let out: Vec<Value> = rules.iter().map(to_json).collect();
    for r in rules {
        if let Some(sg) = w.security_groups.get_mut(&r.security_group_id) {
            sg.std.touch();
        }
        insert_rule(&mut w, r);
    }
    Ok(if bulk {
        (StatusCode::CREATED, Json(json!({ "security_group_rules": out }))).into_response()
    } else {
        created(
            "security_group_rule",
            out.into_iter().next().unwrap_or(Value::Null),
        )
    })
}
