//! Ports: IPAM, bulk create (all or nothing), indexed list filters, `If-Match` revision checks,
//! binding and the trunk deletion rules.

use std::collections::BTreeSet;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde::Deserialize;
use serde_json::{json, Map, Value};

use super::missing::{net_not_found, port_not_found};
use super::model::{AddressPair, FixedIp, Port, Std};
use super::{body_tags, check_revision, if_match, ok, parse_json};
use crate::errors::{ApiError, ApiResult};
use crate::ipam::{parse_ip, AllocError, Cidr};
use crate::profile::{IpamConflictKind, Profile};
use crate::query::{list_body, page_links, project, ListParams, Query};
use crate::state::{Ctx, Jobs, Shared};
use crate::world::{FixedIpFilter, World};

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct FixedIpReq {
    subnet_id: Option<String>,
    ip_address: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct PairReq {
    ip_address: String,
    mac_address: Option<String>,
}

/// The attributes a port create or update may carry.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct PortReq {
    name: Option<String>,
    description: Option<String>,
    network_id: Option<String>,
    admin_state_up: Option<bool>,
    mac_address: Option<String>,
    fixed_ips: Option<Vec<FixedIpReq>>,
    device_id: Option<String>,
    device_owner: Option<String>,
    security_groups: Option<Vec<String>>,
    allowed_address_pairs: Option<Vec<PairReq>>,
    port_security_enabled: Option<bool>,
    #[serde(rename = "binding:host_id")]
    host_id: Option<String>,
    #[serde(rename = "binding:vnic_type")]
    vnic_type: Option<String>,
    #[serde(rename = "binding:profile")]
    binding_profile: Option<Map<String, Value>>,
    dns_name: Option<String>,
    extra_dhcp_opts: Option<Vec<Value>>,
    propagate_uplink_status: Option<bool>,
}

fn parse_req(m: &Map<String, Value>) -> ApiResult<PortReq> {
    serde_json::from_value(Value::Object(m.clone()))
        .map_err(|e| ApiError::bad_request(format!("Invalid input for operation: {e}.")))
}

// === list / show ===

fn fixed_ip_filter(q: &Query) -> FixedIpFilter {
    let mut f = FixedIpFilter::default();
    for v in q.all("fixed_ips") {
        match v.split_once('=') {
            Some(("ip_address", ip)) => f.ip_addresses.push(ip.to_owned()),
            Some(("subnet_id", s)) => f.subnet_ids.push(s.to_owned()),
            Some(("ip_address_substr", s)) => f.ip_substr.push(s.to_owned()),
            _ => {}
        }
    }
    f
}

/// A port attribute read straight from the struct, so filters and `fields` need no rendering.
enum Attr<'a> {
    S(&'a str),
    B(bool),
    N(u64),
    L(&'a [String]),
}

fn attr<'a>(p: &'a Port, key: &str) -> Option<Attr<'a>> {
    Some(match key {
        "id" => Attr::S(&p.std.id),
        "name" => Attr::S(&p.std.name),
        "description" => Attr::S(&p.std.description),
        "project_id" | "tenant_id" => Attr::S(&p.std.project_id),
        "network_id" => Attr::S(&p.network_id),
        "status" => Attr::S(&p.status),
        "mac_address" => Attr::S(&p.mac_address),
        "device_id" => Attr::S(&p.device_id),
        "device_owner" => Attr::S(&p.device_owner),
        "binding:host_id" => Attr::S(&p.host_id),
        "binding:vnic_type" => Attr::S(&p.vnic_type),
        "binding:vif_type" => Attr::S(&p.vif_type),
        "admin_state_up" => Attr::B(p.admin_state_up),
        "port_security_enabled" => Attr::B(p.port_security_enabled),
        "revision_number" => Attr::N(p.std.revision_number),
        "security_groups" => Attr::L(&p.security_groups),
        _ => return None,
    })
}

fn attr_matches(a: &Attr<'_>, want: &str) -> bool {
    match a {
        Attr::S(s) => *s == want,
        Attr::B(b) => {
            want.eq_ignore_ascii_case(if *b { "true" } else { "false" }) || want == if *b { "1" } else { "0" }
        }
        Attr::N(n) => n.to_string() == want,
        Attr::L(l) => l.iter().any(|x| x == want),
    }
}

fn attr_json(a: Attr<'_>) -> Value {
    match a {
        Attr::S(s) => json!(s),
        Attr::B(b) => json!(b),
        Attr::N(n) => json!(n),
        Attr::L(l) => json!(l),
    }
}

/// Some(verdict) when every filter names a known attribute; None when the rendered port is needed.
fn fast_filter(p: &Port, params: &ListParams) -> Option<bool> {
    let mut unknown = false;
    for (k, vals) in &params.filters {
        match attr(p, k) {
            Some(a) => {
                if !vals.iter().any(|v| attr_matches(&a, v)) {
                    return Some(false);
                }
            }
            None => unknown = true,
        }
    }
    (!unknown).then_some(true)
}

pub async fn list(
    State(sh): State<Arc<Shared>>,
    Extension(ctx): Extension<Ctx>,
    RawQuery(q): RawQuery,
) -> Response {
    let q = Query::parse(q.as_deref());
    let params = ListParams::from_query(&q, &["fixed_ips"]);
    let fip = fixed_ip_filter(&q);
    // In id order without sorting, a page can stop at limit + 1 matches after the marker.
    let early = params.sort.is_empty() && !params.page_reverse;
    let cap = if early {
        params.limit.map_or(usize::MAX, |l| l + 1)
    } else {
        usize::MAX
    };
    let after = if early { params.marker.clone() } else { None };
    let fast_fields = !params.fields.is_empty()
        && params
            .fields
            .iter()
            .all(|f| f == "fixed_ips" || f == "tags" || is_attr(f));
    let w = sh.world();
    let render = |p: &Port| -> Value {
        if fast_fields {
            let mut m = Map::new();
            for f in &params.fields {
                let v = match f.as_str() {
                    "fixed_ips" => json!(p.fixed_ips),
                    "tags" => json!(p.std.tags),
                    other => attr(p, other).map(attr_json).unwrap_or(Value::Null),
                };
                m.insert(f.clone(), v);
            }
            Value::Object(m)
        } else {
            w.render_port(p)
        }
    };
    let keep = |p: &&Port| -> bool {
        if !fip.matches(p) {
            return false;
        }
        if params.has_tag_filters() {
            let tags: Vec<&str> = p.std.tags.iter().map(String::as_str).collect();
            if !params.tags_match(&tags) {
                return false;
            }
        }
        fast_filter(p, &params).unwrap_or_else(|| params.matches(&w.render_port(p)))
    };
    let from = match &after {
        Some(m) => std::ops::Bound::Excluded(m.clone()),
        None => std::ops::Bound::Unbounded,
    };
    let ports: Vec<&Port> = match w.port_idx.candidates(&params, &fip) {
        Some(ids) => ids
            .range((from, std::ops::Bound::Unbounded))
            .filter_map(|id| w.ports.get(id))
            .filter(keep)
            .take(cap)
            .collect(),
        None => w
            .ports
            .range((from, std::ops::Bound::Unbounded))
            .map(|(_, p)| p)
            .filter(keep)
            .take(cap)
            .collect(),
    };
    let url = format!("{}/v2.0/ports", ctx.base_url);
    if early && params.fields.is_empty() {
        // The common case: serialize straight into the body, no intermediate JSON tree.
        let more = params.limit.is_some_and(|l| ports.len() > l);
        let page = &ports[..params.limit.map_or(ports.len(), |l| l.min(ports.len()))];
        let links = page_links(
            &params,
            more,
            page.first().map(|p| p.std.id.as_str()),
            page.last().map(|p| p.std.id.as_str()),
            &url,
        );
        let mut buf = Vec::with_capacity(64 + page.len() * 1200);
        buf.extend_from_slice(b"{\"ports\":[");
        for (i, p) in page.iter().enumerate() {
            if i > 0 {
                buf.push(b',');
            }
            let _ = serde_json::to_writer(&mut buf, &w.port_out(p));
        }
        buf.push(b']');
        if !links.is_empty() {
            buf.extend_from_slice(b",\"ports_links\":");
            let _ = serde_json::to_writer(&mut buf, &links);
        }
        buf.push(b'}');
        drop(w);
        return ([(axum::http::header::CONTENT_TYPE, "application/json")], buf).into_response();
    }
    let items: Vec<Value> = ports.into_iter().map(render).collect();
    drop(w);
    let (page, more) = params.page(items);
    Json(list_body("ports", page, more, &params, &url)).into_response()
}

/// Attributes `attr` can read.
fn is_attr(key: &str) -> bool {
    matches!(
        key,
        "id" | "name"
            | "description"
            | "project_id"
            | "tenant_id"
            | "network_id"
            | "status"
            | "mac_address"
            | "device_id"
            | "device_owner"
            | "binding:host_id"
            | "binding:vnic_type"
            | "binding:vif_type"
            | "admin_state_up"
            | "port_security_enabled"
            | "revision_number"
            | "security_groups"
    )
}

pub async fn show(
    State(sh): State<Arc<Shared>>,
    Path(id): Path<String>,
    RawQuery(q): RawQuery,
) -> ApiResult<Response> {
    let w = sh.world();
    let p = w.ports.get(&id).ok_or_else(|| port_not_found(&id))?;
    Ok(ok("port", project(w.render_port(p), &Query::parse(q.as_deref()))))
}

// === create ===

pub async fn create(
    State(sh): State<Arc<Shared>>,
    Extension(ctx): Extension<Ctx>,
    body: Bytes,
) -> ApiResult<Response> {
    let v = parse_json(&body)?;
    let profile = sh.profile();
    sh.mutate(|w, jobs| match (v.get("ports"), v.get("port")) {
        (Some(Value::Array(items)), _) => {
            let maps = items
                .iter()
                .map(|i| {
                    i.as_object()
                        .cloned()
                        .ok_or_else(|| ApiError::bad_request("Invalid port in bulk request"))
                })
                .collect::<ApiResult<Vec<_>>>()?;
            bulk_create(w, jobs, &profile, &ctx, &maps).map(|ids| {
                let ports: Vec<Value> = ids
                    .iter()
                    .filter_map(|id| w.ports.get(id))
                    .map(|p| w.render_port(p))
                    .collect();
                (StatusCode::CREATED, Json(json!({ "ports": ports }))).into_response()
            })
        }
        (_, Some(Value::Object(m))) => {
            let project = ctx.project_for(m, &profile.keystone.default_project)?;
            w.check_quota(&project, "port", 1).and_then(|()| {
                let id = create_one(w, jobs, &profile, &ctx, m, ctx.ipam_conflict)?;
                let p = w.ports.get(&id).ok_or_else(|| port_not_found(&id))?;
                Ok((StatusCode::CREATED, Json(json!({ "port": w.render_port(p) }))).into_response())
            })
        }
        _ => Err(ApiError::bad_request("Unable to find 'port' in request body")),
    })
}

/// All ports or none: quota for the whole batch first, then each; any failure removes those made.
fn bulk_create(
    w: &mut World,
    jobs: &mut Jobs,
    profile: &Profile,
    ctx: &Ctx,
    items: &[Map<String, Value>],
) -> ApiResult<Vec<String>> {
    let mut per_project: std::collections::BTreeMap<String, i64> = std::collections::BTreeMap::new();
    for m in items {
        *per_project
            .entry(ctx.project_for(m, &profile.keystone.default_project)?)
            .or_default() += 1;
    }
    for (project, n) in &per_project {
        w.check_quota(project, "port", *n)?;
    }
    let mut made = Vec::with_capacity(items.len());
    for (i, m) in items.iter().enumerate() {
        match create_one(w, jobs, profile, ctx, m, ctx.ipam_conflict && i == 0) {
            Ok(id) => made.push(id),
            Err(e) => {
                for id in &made {
                    w.remove_port(id);
                }
                return Err(e);
            }
        }
    }
    Ok(made)
}

fn create_one(
    w: &mut World,
    jobs: &mut Jobs,
    profile: &Profile,
    ctx: &Ctx,
    m: &Map<String, Value>,
    ipam_conflict: bool,
) -> ApiResult<String> {
    let req = parse_req(m)?;
    let project = ctx.project_for(m, &profile.keystone.default_project)?;
    let network_id = req.network_id.clone().ok_or_else(|| {
        ApiError::bad_request("Failed to parse request. Required attribute 'network_id' not specified")
    })?;
    super::check_uuid("network_id", &network_id)?;
    let net = w
        .networks
        .get(&network_id)
        .ok_or_else(|| net_not_found(&network_id))?;
    let port_security = req.port_security_enabled.unwrap_or(net.port_security_enabled);
    let tags = body_tags(m)?;

    let mac = match &req.mac_address {
        Some(mac) => {
            validate_mac(mac)?;
            let mac = mac.to_ascii_lowercase();
            if w.port_idx
                .on_network(&network_id)
                .any(|id| w.ports.get(id).is_some_and(|p| p.mac_address == mac))
            {
                return Err(ApiError::conflict(
                    "MacAddressInUse",
                    format!("Unable to complete operation for network {network_id}. The mac address {mac} is in use."),
                ));
            }
            mac
        }
        None => w.next_mac(),
    };

    let security_groups = match (&req.security_groups, port_security) {
        (Some(sgs), _) => {
            validate_sgs(w, sgs)?;
            sgs.clone()
        }
        (None, true) => vec![super::security_groups::ensure_default_sg(w, &project)?],
        (None, false) => Vec::new(),
    };
    if !port_security && !security_groups.is_empty() {
        return Err(ApiError::neutron(
            StatusCode::BAD_REQUEST,
            "PortSecurityAndIPRequiredForSecurityGroups",
            "Port security must be enabled and port must have an IP address in order to use security groups.",
        ));
    }
    let pairs = validate_pairs(
        req.allowed_address_pairs.as_deref().unwrap_or(&[]),
        &mac,
        port_security,
    )?;

    let mut std = Std::new(&project, req.name.clone(), req.description.clone());
    // Neutron 29 drops port tags from create bodies unless this extension is loaded.
    if profile.neutron.has_extension("tag-ports-during-bulk-creation") {
        std.tags = tags.unwrap_or_default().into_iter().collect::<BTreeSet<_>>();
    }
    let id = std.id.clone();
    let fixed_ips = allocate_ips(
        w,
        &network_id,
        req.fixed_ips.as_deref(),
        &id,
        ipam_conflict,
        profile,
    )?;
    let host_id = req.host_id.clone().unwrap_or_default();
    let port = Port {
        std,
        network_id,
        admin_state_up: req.admin_state_up.unwrap_or(true),
        status: "DOWN".to_owned(),
        mac_address: mac,
        fixed_ips,
        device_id: req.device_id.clone().unwrap_or_default(),
        device_owner: req.device_owner.clone().unwrap_or_default(),
        security_groups,
        allowed_address_pairs: pairs,
        port_security_enabled: port_security,
        vif_type: if host_id.is_empty() { "unbound" } else { "ovs" }.to_owned(),
        host_id,
        vnic_type: req.vnic_type.clone().unwrap_or_else(|| "normal".to_owned()),
        binding_profile: req.binding_profile.clone().unwrap_or_default(),
        vif_details: Map::new(),
        extra_dhcp_opts: req.extra_dhcp_opts.clone().unwrap_or_default(),
        dns_name: req.dns_name.clone().unwrap_or_default(),
        propagate_uplink_status: req.propagate_uplink_status.unwrap_or(false),
        ip_allocation: "immediate".to_owned(),
        qos_policy_id: None,
        qos_network_policy_id: None,
        resource_request: None,
        bind_epoch: 0,
    };
    let bound = !port.host_id.is_empty();
    w.insert_port(port);
    if bound {
        super::status::binding_changed(w, jobs, &id);
    }
    Ok(id)
}

fn validate_mac(mac: &str) -> ApiResult<()> {
    let parts: Vec<&str> = mac.split(':').collect();
    if parts.len() == 6
        && parts
            .iter()
            .all(|p| p.len() == 2 && u8::from_str_radix(p, 16).is_ok())
    {
        Ok(())
    } else {
        Err(ApiError::bad_request(format!(
            "Invalid input for mac_address. Reason: '{mac}' is not a valid MAC address."
        )))
    }
}

fn validate_sgs(w: &World, sgs: &[String]) -> ApiResult<()> {
    match sgs.iter().find(|sg| !w.security_groups.contains_key(*sg)) {
        Some(missing) => Err(ApiError::not_found(
            "SecurityGroupNotFound",
            format!("Security group {missing} does not exist"),
        )),
        None => Ok(()),
    }
}

/// Address pairs: valid IPs or CIDRs; on ML2/OVN a MAC other than the port's must be a VRRP MAC.
fn validate_pairs(pairs: &[PairReq], port_mac: &str, port_security: bool) -> ApiResult<Vec<AddressPair>> {
    if !pairs.is_empty() && !port_security {
        return Err(ApiError::conflict(
            "AddressPairAndPortSecurityRequired",
            "Port Security must be enabled in order to have allowed address pairs on a port.",
        ));
    }
    pairs
        .iter()
        .map(|p| {
            let cidr = Cidr::parse(&p.ip_address).ok_or_else(|| {
                ApiError::bad_request(format!("Invalid input for allowed_address_pairs. Reason: '{}' is not a valid IP address.", p.ip_address))
            })?;
            let mac = p.mac_address.clone().unwrap_or_else(|| port_mac.to_owned()).to_ascii_lowercase();
            validate_mac(&mac)?;
            let vrrp = if cidr.v6 { "00:00:5e:00:02:" } else { "00:00:5e:00:01:" };
            if mac != port_mac && !mac.starts_with(vrrp) {
                return Err(ApiError::neutron(
                    StatusCode::BAD_REQUEST,
                    "InvalidVirtualMACAddress",
                    format!(
                        "Virtual MAC address {mac} in allowed address pair does not belong to the RFC 5798 VRRP virtual MAC ranges (00:00:5e:00:01:XX for IPv4 or 00:00:5e:00:02:XX for IPv6)."
                    ),
                ));
            }
            Ok(AddressPair { ip_address: p.ip_address.clone(), mac_address: mac })
        })
        .collect()
}

fn generation_failure_network(net: &str) -> ApiError {
    ApiError::conflict(
        "IpAddressGenerationFailure",
        format!("No more IP addresses available on network {net}."),
    )
}

fn generation_failure_subnet(subnet: &str) -> ApiError {
    ApiError::conflict(
        "IpAddressGenerationFailure",
        format!("No more IP addresses available for subnet {subnet}."),
    )
}

fn already_allocated(ip: &str, subnet: &str) -> ApiError {
    ApiError::conflict(
        "IpAddressAlreadyAllocated",
        format!("IP address {ip} already allocated in subnet {subnet}"),
    )
}

/// The injected IPAM conflict, naming the address this port would have got.
fn conflict_error(w: &World, network_id: &str, subnet: Option<&str>, profile: &Profile) -> ApiError {
    let subnet_id = subnet.map(str::to_owned).or_else(|| {
        w.networks
            .get(network_id)
            .and_then(|n| n.subnets.first().cloned())
    });
    match (
        profile.ipam_conflict.error,
        subnet_id.as_deref().and_then(|s| w.subnets.get(s)),
    ) {
        (IpamConflictKind::AlreadyAllocated, Some(s)) => {
            let ip = s
                .ipam
                .peek_free()
                .map(|v| s.ipam.cidr.ip(v).to_string())
                .unwrap_or_else(|| s.cidr.clone());
            already_allocated(&ip, &s.std.id)
        }
        _ => generation_failure_network(network_id),
    }
}

fn release(w: &mut World, ips: &[FixedIp]) {
    for f in ips {
        if let (Some(s), Some((v, _))) = (w.subnets.get_mut(&f.subnet_id), parse_ip(&f.ip_address)) {
            s.ipam.release(v);
        }
    }
}

/// Allocates the requested addresses (or one per IP version when none are requested).
fn allocate_ips(
    w: &mut World,
    network_id: &str,
    req: Option<&[FixedIpReq]>,
    owner: &str,
    conflict: bool,
    profile: &Profile,
) -> ApiResult<Vec<FixedIp>> {
    let subnets: Vec<String> = w
        .networks
        .get(network_id)
        .map(|n| n.subnets.clone())
        .unwrap_or_default();
    if conflict {
        let first = req.and_then(|r| r.first()).and_then(|f| f.subnet_id.as_deref());
        return Err(conflict_error(w, network_id, first, profile));
    }
    let mut out: Vec<FixedIp> = Vec::new();
    let result = (|| -> ApiResult<()> {
        match req {
            None => {
                // One IPv4 and one IPv6 address, from the first subnet of each version with room.
                for v6 in [false, true] {
                    let of_version: Vec<&String> = subnets
                        .iter()
                        .filter(|s| w.subnets.get(*s).is_some_and(|x| x.ipam.cidr.v6 == v6))
                        .collect();
                    if of_version.is_empty() {
                        continue;
                    }
                    let pick = of_version.iter().find_map(|sid| {
                        let s = w.subnets.get_mut(*sid)?;
                        let v = s.ipam.allocate_any(owner)?;
                        Some(FixedIp {
                            subnet_id: (*sid).clone(),
                            ip_address: s.ipam.cidr.ip(v).to_string(),
                        })
                    });
                    match pick {
                        Some(f) => out.push(f),
                        None => return Err(generation_failure_network(network_id)),
                    }
                }
                Ok(())
            }
            Some(reqs) => {
                for r in reqs {
                    let subnet_id = match (&r.subnet_id, &r.ip_address) {
                        (Some(s), _) => {
                            if !subnets.contains(s) {
                                return Err(if w.subnets.contains_key(s) {
                                    ApiError::invalid_input(format!(
                                        "Failed to create port on network {network_id}, because fixed_ips included invalid subnet {s}"
                                    ))
                                } else {
                                    super::missing::subnet_not_found(s)
                                });
                            }
                            s.clone()
                        }
                        (None, Some(ip)) => {
                            let (v, six) = parse_ip(ip).ok_or_else(|| {
                                ApiError::bad_request(format!(
                                    "Invalid input for fixed_ips. Reason: '{ip}' is not a valid IP address."
                                ))
                            })?;
                            subnets
                                .iter()
                                .find(|s| w.subnets.get(*s).is_some_and(|x| x.ipam.cidr.v6 == six && x.ipam.cidr.contains(v)))
                                .cloned()
                                .ok_or_else(|| {
                                    ApiError::neutron(
                                        StatusCode::BAD_REQUEST,
                                        "InvalidIpForNetwork",
                                        format!("IP address {ip} is not a valid IP for any of the subnets on the specified network."),
                                    )
                                })?
                        }
                        (None, None) => {
                            return Err(ApiError::bad_request(
                                "Invalid input for fixed_ips: subnet_id or ip_address required",
                            ))
                        }
                    };
                    let s = w
                        .subnets
                        .get_mut(&subnet_id)
                        .ok_or_else(|| super::missing::subnet_not_found(&subnet_id))?;
                    let ip = match &r.ip_address {
                        Some(ip) => {
                            let v = parse_ip(ip).map(|(v, _)| v).ok_or_else(|| {
                                ApiError::bad_request(format!(
                                    "Invalid input for fixed_ips. Reason: '{ip}' is not a valid IP address."
                                ))
                            })?;
                            match s.ipam.allocate(v, owner) {
                                Ok(()) => s.ipam.cidr.ip(v).to_string(),
                                Err(AllocError::Taken(_)) => return Err(already_allocated(ip, &subnet_id)),
                                Err(AllocError::NotInSubnet) => {
                                    return Err(ApiError::neutron(
                                        StatusCode::BAD_REQUEST,
                                        "InvalidIpForSubnet",
                                        format!(
                                            "IP address {ip} is not a valid IP for the specified subnet."
                                        ),
                                    ))
                                }
                            }
                        }
                        None => match s.ipam.allocate_any(owner) {
                            Some(v) => s.ipam.cidr.ip(v).to_string(),
                            None => return Err(generation_failure_subnet(&subnet_id)),
                        },
                    };
                    out.push(FixedIp {
                        subnet_id,
                        ip_address: ip,
                    });
                }
                Ok(())
            }
        }
    })();
    match result {
        Ok(()) => Ok(out),
        Err(e) => {
            release(w, &out);
            Err(e)
        }
    }
}

// === update ===

pub async fn update(
    State(sh): State<Arc<Shared>>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> ApiResult<Response> {
    let m = super::resource_body(&body, "port")?;
    let req = parse_req(&m)?;
    let expected = if_match(&headers)?;
    let profile = sh.profile();
    sh.mutate(|w, jobs| {
        update_port(w, jobs, &profile, &id, &req, expected).map(|()| {
            let v = w.ports.get(&id).map(|p| w.render_port(p)).unwrap_or(Value::Null);
            ok("port", v)
        })
    })
}

fn update_port(
    w: &mut World,
    jobs: &mut Jobs,
    profile: &Profile,
    id: &str,
    req: &PortReq,
    expected: Option<u64>,
) -> ApiResult<()> {
    let cur = w.ports.get(id).ok_or_else(|| port_not_found(id))?.clone();
    check_revision(expected, cur.std.revision_number)?;
    if let Some(sgs) = &req.security_groups {
        validate_sgs(w, sgs)?;
    }
    let port_security = req.port_security_enabled.unwrap_or(cur.port_security_enabled);
    let sgs_after = req.security_groups.as_ref().unwrap_or(&cur.security_groups);
    if !port_security && !sgs_after.is_empty() {
        return Err(ApiError::conflict(
            "PortSecurityPortHasSecurityGroup",
            "Port has security group associated. Cannot disable port security or ip address until security group is removed",
        ));
    }
    let mac = match &req.mac_address {
        Some(mac) if mac.to_ascii_lowercase() != cur.mac_address => {
            validate_mac(mac)?;
            if !cur.host_id.is_empty() {
                return Err(ApiError::conflict(
                    "PortBound",
                    format!(
                        "Unable to complete operation on port {id}, port is already bound, port type: ovs, old_mac {}, new_mac {mac}.",
                        cur.mac_address
                    ),
                ));
            }
            mac.to_ascii_lowercase()
        }
        _ => cur.mac_address.clone(),
    };
    let pairs = match &req.allowed_address_pairs {
        Some(p) => Some(validate_pairs(p, &mac, port_security)?),
        None => {
            if !port_security && !cur.allowed_address_pairs.is_empty() {
                return Err(ApiError::conflict(
                    "AddressPairAndPortSecurityRequired",
                    "Port Security must be enabled in order to have allowed address pairs on a port.",
                ));
            }
            None
        }
    };
    // New fixed IPs: keep the ones asked for again, allocate the rest, then free what is dropped.
    let new_ips = match &req.fixed_ips {
        Some(reqs) => {
            let (kept, fresh): (Vec<&FixedIpReq>, Vec<&FixedIpReq>) = reqs.iter().partition(|r| {
                r.ip_address
                    .as_ref()
                    .is_some_and(|ip| cur.fixed_ips.iter().any(|f| &f.ip_address == ip))
            });
            let fresh: Vec<FixedIpReq> = fresh
                .into_iter()
                .map(|r| FixedIpReq {
                    subnet_id: r.subnet_id.clone(),
                    ip_address: r.ip_address.clone(),
                })
                .collect();
            let allocated = allocate_ips(w, &cur.network_id, Some(&fresh), id, false, profile)?;
            let mut ips: Vec<FixedIp> = cur
                .fixed_ips
                .iter()
                .filter(|f| {
                    kept.iter()
                        .any(|k| k.ip_address.as_deref() == Some(f.ip_address.as_str()))
                })
                .cloned()
                .collect();
            let dropped: Vec<FixedIp> = cur
                .fixed_ips
                .iter()
                .filter(|f| !ips.contains(f))
                .cloned()
                .collect();
            release(w, &dropped);
            ips.extend(allocated);
            Some(ips)
        }
        None => None,
    };
    let binding_changed = req.host_id.as_ref().is_some_and(|h| *h != cur.host_id);
    w.update_port(id, |p| {
        if let Some(v) = &req.name {
            p.std.name.clone_from(v);
        }
        if let Some(v) = &req.description {
            p.std.description.clone_from(v);
        }
        if let Some(v) = req.admin_state_up {
            p.admin_state_up = v;
        }
        if let Some(v) = &req.device_id {
            p.device_id.clone_from(v);
        }
        if let Some(v) = &req.device_owner {
            p.device_owner.clone_from(v);
        }
        if let Some(v) = &req.security_groups {
            p.security_groups.clone_from(v);
        }
        if let Some(v) = pairs {
            p.allowed_address_pairs = v;
        }
        if let Some(v) = new_ips {
            p.fixed_ips = v;
        }
        if let Some(v) = &req.host_id {
            p.host_id.clone_from(v);
            p.vif_type = if v.is_empty() { "unbound" } else { "ovs" }.to_owned();
        }
        if let Some(v) = &req.binding_profile {
            p.binding_profile.clone_from(v);
        }
        if let Some(v) = &req.vnic_type {
            p.vnic_type.clone_from(v);
        }
        if let Some(v) = &req.dns_name {
            p.dns_name.clone_from(v);
        }
        if let Some(v) = &req.extra_dhcp_opts {
            p.extra_dhcp_opts.clone_from(v);
        }
        if let Some(v) = req.propagate_uplink_status {
            p.propagate_uplink_status = v;
        }
        p.port_security_enabled = port_security;
        p.mac_address = mac;
        p.std.touch();
    });
    if binding_changed {
        super::status::binding_changed(w, jobs, id);
    }
    Ok(())
}

// === delete ===

pub async fn delete(State(sh): State<Arc<Shared>>, Path(id): Path<String>) -> ApiResult<StatusCode> {
    let mut w = sh.world();
    delete_port(&mut w, &id)?;
    Ok(StatusCode::NO_CONTENT)
}

pub fn delete_port(w: &mut World, id: &str) -> ApiResult<()> {
    let port = w.ports.get(id).ok_or_else(|| port_not_found(id))?;
    if let Some(t) = w.trunk_by_subport.get(id) {
        return Err(ApiError::conflict(
            "PortInUseAsSubPort",
            format!("Port {id} is currently a subport for trunk {t}."),
        ));
    }
    if let Some(t) = w.trunk_by_parent.get(id) {
        return Err(ApiError::conflict(
            "PortInUseAsTrunkParent",
            format!("Port {id} is currently a parent port for trunk {t}."),
        ));
    }
    if port.is_router_port() || port.device_owner == "network:floatingip" {
        return Err(ApiError::conflict(
            "L3PortInUse",
            format!(
                "Port {id} has owner {} and therefore cannot be deleted directly via the port API.",
                port.device_owner
            ),
        ));
    }
    super::fips::disassociate_port(w, id);
    w.remove_port(id);
    Ok(())
}
