//! Load balancers: VIP port in Neutron, fully-populated create (validated like Octavia's graph
//! create), update, and (cascade) delete.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;
use axum::response::Response;
use axum::Extension;
use serde_json::{json, Map, Value};

use super::model::{
    is_pending, IdRef, LoadBalancer, ACTIVE, ERROR, OFFLINE, PENDING_CREATE, PENDING_DELETE, PENDING_UPDATE,
};
use super::provisioning::{lb_not_found, schedule};
use super::{b, body_obj, created, list_response, ok, s, tags, to_json};
use crate::errors::{ApiError, ApiResult};
use crate::faults::LbPhase;
use crate::ipam::parse_ip;
use crate::profile::Profile;
use crate::query::Query;
use crate::state::{Ctx, Jobs, Shared};
use crate::util::{new_id, octavia_now};
use crate::world::World;

pub async fn list(
    State(sh): State<Arc<Shared>>,
    Extension(ctx): Extension<Ctx>,
    RawQuery(q): RawQuery,
) -> Response {
    let items = sh.all_json(|w| &w.lbs);
    list_response(&ctx, q, "loadbalancers", items)
}

pub async fn show(
    State(sh): State<Arc<Shared>>,
    Path(id): Path<String>,
    RawQuery(q): RawQuery,
) -> ApiResult<Response> {
    sh.show_json(|w| &w.lbs, &id, "loadbalancer", lb_not_found, q.as_deref())
}

/// The create response: listeners and pools as full objects (members, health monitor inline).
fn full(w: &World, lb_id: &str) -> Value {
    let Some(lb) = w.lbs.get(lb_id) else {
        return Value::Null;
    };
    let mut v = to_json(lb);
    let listeners: Vec<Value> = lb
        .listeners
        .iter()
        .filter_map(|l| w.listeners.get(&l.id))
        .map(to_json)
        .collect();
    let pools: Vec<Value> = lb
        .pools
        .iter()
        .filter_map(|p| w.pools.get(&p.id))
        .map(|p| {
            let mut pv = to_json(p);
            let members: Vec<Value> = p
                .members
                .iter()
                .filter_map(|m| w.members.get(&m.id))
                .map(to_json)
                .collect();
            let hm = p
                .healthmonitor_id
                .as_ref()
                .and_then(|h| w.healthmonitors.get(h))
                .map(to_json);
            if let Value::Object(m) = &mut pv {
                m.insert("members".into(), Value::Array(members));
                m.insert("healthmonitor".into(), hm.unwrap_or(Value::Null));
            }
            pv
        })
        .collect();
    if let Value::Object(m) = &mut v {
        m.insert("listeners".into(), Value::Array(listeners));
        m.insert("pools".into(), Value::Array(pools));
    }
    v
}

pub async fn create(
    State(sh): State<Arc<Shared>>,
    Extension(ctx): Extension<Ctx>,
    body: Bytes,
) -> ApiResult<Response> {
    let m = body_obj(&body, "loadbalancer")?;
    let profile = sh.profile();
    // Octavia's answer to a member naming another project is its policy refusal.
    let project = ctx
        .project_for(&m, &profile.keystone.default_project)
        .map_err(|_| {
            ApiError::octavia(
                StatusCode::FORBIDDEN,
                "Policy does not allow this request to be performed.",
            )
        })?;
    let provider = s(&m, "provider").unwrap_or_else(|| profile.octavia.default_provider.clone());
    if !profile.octavia.providers.contains_key(&provider) {
        return Err(ApiError::octavia(
            StatusCode::BAD_REQUEST,
            format!("Provider '{provider}' is not enabled."),
        ));
    }
    let additional: Vec<Map<String, Value>> = match m.get("additional_vips") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(a)) => a
            .iter()
            .map(|v| {
                v.as_object()
                    .cloned()
                    .ok_or_else(|| ApiError::oct_validation("additional_vips: a list of objects"))
            })
            .collect::<ApiResult<_>>()?,
        Some(_) => return Err(ApiError::oct_validation("additional_vips: a list of objects")),
    };
    if !additional.is_empty() {
        if version_below(&profile.octavia.max_version, (2, 26)) {
            return Err(ApiError::oct_validation(
                "Invalid input for field/attribute loadbalancer. Value: unknown attribute additional_vips",
            ));
        }
        if profile
            .octavia
            .providers
            .get(&provider)
            .is_some_and(|p| p.no_additional_vips)
        {
            return Err(ApiError::octavia(
                StatusCode::NOT_IMPLEMENTED,
                format!("Provider '{provider}' does not support a requested option: additional_vips"),
            ));
        }
    }
    sh.mutate(|w, jobs| {
        super::quotas::check_load_balancer(w, &project)?;
        create_lb(&sh, w, jobs, &profile, &project, &provider, &m, &additional)
    })
}

/// (network, subnet, address to request) of the VIP, from vip_subnet_id / vip_network_id / vip_address.
fn resolve_vip(w: &World, m: &Map<String, Value>) -> ApiResult<(String, String, Option<String>)> {
    let addr = s(m, "vip_address");
    if let Some(sid) = s(m, "vip_subnet_id") {
        let sub = w
            .subnets
            .get(&sid)
            .ok_or_else(|| ApiError::octavia(StatusCode::BAD_REQUEST, format!("Subnet {sid} not found.")))?;
        if let Some(net) = s(m, "vip_network_id") {
            if net != sub.network_id {
                return Err(ApiError::oct_validation(
                    "vip_subnet_id is not in vip_network_id.",
                ));
            }
        }
        return Ok((sub.network_id.clone(), sid, addr));
    }
    let net_id = s(m, "vip_network_id").ok_or_else(|| {
        ApiError::octavia(
            StatusCode::BAD_REQUEST,
            "Validation failure: VIP must contain one of: vip_port_id, vip_network_id, vip_subnet_id.",
        )
    })?;
    let net = w
        .networks
        .get(&net_id)
        .ok_or_else(|| ApiError::octavia(StatusCode::BAD_REQUEST, format!("Network {net_id} not found.")))?;
    let subnets: Vec<&crate::neutron::model::Subnet> =
        net.subnets.iter().filter_map(|s| w.subnets.get(s)).collect();
    let pick = match addr.as_deref().and_then(parse_ip) {
        Some((v, six)) => subnets
            .iter()
            .find(|s| s.ipam.cidr.v6 == six && s.ipam.cidr.contains(v))
            .ok_or_else(|| {
                ApiError::oct_validation(
                    "Supplied network does not contain a subnet for VIP address specified.",
                )
            })?,
        None => subnets
            .iter()
            .find(|s| !s.ipam.cidr.v6)
            .or(subnets.first())
            .ok_or_else(|| ApiError::oct_validation("Supplied network does not contain a subnet."))?,
    };
    Ok((net_id, pick.std.id.clone(), addr))
}

/// Whether API version `v` ("2.30") is older than `min`.
fn version_below(v: &str, min: (u32, u32)) -> bool {
    let mut parts = v.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
    let have = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    have < min
}

/// Where the additional VIPs of a new load balancer go.
struct VipPlace<'a> {
    lb_id: &'a str,
    provider: &'a str,
    project: &'a str,
    port_id: &'a str,
    network_id: &'a str,
    subnet_id: &'a str,
}

/// The additional VIPs: each on a subnet of the VIP's network other than the VIP's own. Amphora puts them on
/// the VIP port; the ovn provider makes a port for each (`ovn-lb-vip-additional-<n>-<lb>`). Returns the
/// `additional_vips` answer and the ports made.
fn add_vips(
    w: &mut World,
    at: &VipPlace<'_>,
    additional: &[Map<String, Value>],
) -> ApiResult<(Vec<Value>, Vec<String>)> {
    let mut out = Vec::new();
    let mut made = Vec::new();
    for (n, a) in additional.iter().enumerate() {
        let sid = s(a, "subnet_id")
            .ok_or_else(|| ApiError::oct_validation("additional_vips: subnet_id is required"))?;
        let sub = w
            .subnets
            .get(&sid)
            .ok_or_else(|| ApiError::octavia(StatusCode::BAD_REQUEST, format!("Subnet {sid} not found.")))?;
        if sub.network_id != at.network_id {
            return Err(ApiError::oct_validation(
                "All VIP subnets must belong to the same network.",
            ));
        }
        if sid == at.subnet_id {
            return Err(ApiError::oct_validation(
                "Duplicate VIP subnet(s) specified. Only one IP can be bound per subnet.",
            ));
        }
        let want = s(a, "ip_address");
        let taken = |ip: &str| {
            ApiError::octavia(
                StatusCode::CONFLICT,
                format!("IP address {ip} already allocated in subnet {sid}."),
            )
        };
        let ip = if at.provider == "ovn" {
            let mut port = crate::neutron::routers::infra_port(
                w,
                at.network_id,
                Some(&sid),
                want.as_deref(),
                "ovn-lb-vip",
                &format!("lb-{}", at.lb_id),
            )
            .map_err(|e| match e.kind.as_str() {
                "IpAddressAlreadyAllocated" => taken(want.as_deref().unwrap_or_default()),
                _ => e.into_octavia(),
            })?;
            port.std.name = format!("ovn-lb-vip-additional-{}-{}", n + 1, at.lb_id);
            port.std.project_id = at.project.to_owned();
            port.std.tenant_id = at.project.to_owned();
            port.status = "DOWN".to_owned();
            let ip = port
                .fixed_ips
                .first()
                .map(|f| f.ip_address.clone())
                .unwrap_or_default();
            made.push(port.std.id.clone());
            w.insert_port(port);
            ip
        } else {
            let sub = w.subnets.get_mut(&sid).ok_or_else(|| {
                ApiError::octavia(StatusCode::BAD_REQUEST, format!("Subnet {sid} not found."))
            })?;
            let got = match &want {
                Some(ip) => {
                    let v = parse_ip(ip)
                        .map(|(v, _)| v)
                        .ok_or_else(|| ApiError::oct_validation(format!("Invalid IP address {ip}")))?;
                    sub.ipam.allocate(v, at.port_id).map_err(|_| taken(ip))?;
                    v
                }
                None => sub.ipam.allocate_any(at.port_id).ok_or_else(|| {
                    ApiError::octavia(
                        StatusCode::CONFLICT,
                        format!("No more IP addresses available on subnet {sid}."),
                    )
                })?,
            };
            let ip = sub.ipam.cidr.ip(got).to_string();
            if let Some(p) = w.ports.get_mut(at.port_id) {
                p.fixed_ips.push(crate::neutron::model::FixedIp {
                    subnet_id: sid.clone(),
                    ip_address: ip.clone(),
                });
            }
            ip
        };
        out.push(json!({"subnet_id": sid, "ip_address": ip}));
    }
    Ok((out, made))
}

#[allow(clippy::too_many_arguments)]
fn create_lb(
    sh: &Shared,
    w: &mut World,
    jobs: &mut Jobs,
    profile: &Profile,
    project: &str,
    provider: &str,
    m: &Map<String, Value>,
    additional: &[Map<String, Value>],
) -> ApiResult<Response> {
    let id = new_id();
    let (vip_port_id, vip_address, vip_subnet, vip_net, vip_owned) = match s(m, "vip_port_id") {
        Some(pid) => {
            let p = w.ports.get(&pid).ok_or_else(|| {
                ApiError::octavia(StatusCode::BAD_REQUEST, format!("Port {pid} not found."))
            })?;
            let f = p
                .fixed_ips
                .first()
                .ok_or_else(|| ApiError::oct_validation(format!("Port {pid} has no fixed IPs.")))?;
            (
                pid.clone(),
                f.ip_address.clone(),
                f.subnet_id.clone(),
                p.network_id.clone(),
                false,
            )
        }
        None => {
            if s(m, "vip_subnet_id").is_none() && s(m, "vip_network_id").is_none() {
                return Err(ApiError::octavia(
                    StatusCode::BAD_REQUEST,
                    "Validation failure: VIP must contain one of: vip_port_id, vip_network_id, vip_subnet_id.",
                ));
            }
            let (net, subnet, addr) = resolve_vip(w, m)?;
            w.check_quota(project, "port", 1)
                .map_err(ApiError::into_octavia)?;
            let (owner, name) = if provider == "ovn" {
                ("ovn-lb-vip", format!("ovn-lb-vip-{id}"))
            } else {
                ("Octavia", format!("octavia-lb-{id}"))
            };
            let mut port = crate::neutron::routers::infra_port(
                w,
                &net,
                Some(&subnet),
                addr.as_deref(),
                owner,
                &format!("lb-{id}"),
            )
            .map_err(|e| match e.kind.as_str() {
                "IpAddressAlreadyAllocated" => ApiError::octavia(
                    StatusCode::CONFLICT,
                    format!(
                        "IP address {} already allocated in subnet {subnet}.",
                        addr.clone().unwrap_or_default()
                    ),
                ),
                _ => e.into_octavia(),
            })?;
            port.std.name = name;
            port.std.project_id = project.to_owned();
            port.std.tenant_id = project.to_owned();
            port.status = "DOWN".to_owned();
            let f =
                port.fixed_ips.first().cloned().ok_or_else(|| {
                    ApiError::octavia(StatusCode::INTERNAL_SERVER_ERROR, "VIP port without IP")
                })?;
            let pid = port.std.id.clone();
            w.insert_port(port);
            (pid, f.ip_address, f.subnet_id, net, true)
        }
    };
    // Octavia allocates the VIP port with all its addresses at once: a refused additional VIP leaves none.
    let place = VipPlace {
        lb_id: &id,
        provider,
        project,
        port_id: &vip_port_id,
        network_id: &vip_net,
        subnet_id: &vip_subnet,
    };
    let (additional_vips, additional_vip_ports) = match add_vips(w, &place, additional) {
        Ok(v) => v,
        Err(e) => {
            if vip_owned {
                w.remove_port(&vip_port_id);
            }
            return Err(e);
        }
    };
    let lb = LoadBalancer {
        id: id.clone(),
        name: s(m, "name").unwrap_or_default(),
        description: s(m, "description").unwrap_or_default(),
        provisioning_status: PENDING_CREATE.to_owned(),
        operating_status: OFFLINE.to_owned(),
        admin_state_up: b(m, "admin_state_up")?.unwrap_or(true),
        project_id: project.to_owned(),
        created_at: octavia_now(),
        updated_at: None,
        vip_address,
        vip_port_id: vip_port_id.clone(),
        vip_subnet_id: vip_subnet,
        vip_network_id: vip_net,
        vip_qos_policy_id: s(m, "vip_qos_policy_id"),
        vip_sg_ids: m
            .get("vip_sg_ids")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).map(str::to_owned).collect()),
        additional_vips,
        listeners: Vec::new(),
        pools: Vec::new(),
        provider: provider.to_owned(),
        flavor_id: s(m, "flavor_id"),
        availability_zone: s(m, "availability_zone"),
        tags: tags(m)?.unwrap_or_default(),
        vip_vnic_type: "normal".to_owned(),
        epoch: 0,
        vip_owned,
        additional_vip_ports,
    };
    w.lbs.insert(id.clone(), lb);
    // Real Octavia made the VIP port before validating the graph, and leaks it on a 400.
    if let Err(e) = build_graph(w, &id, m, super::pools::refuses_source_ip(profile, provider)) {
        let extra = w
            .lbs
            .remove(&id)
            .map(|lb| lb.additional_vip_ports)
            .unwrap_or_default();
        if vip_owned && !profile.octavia.leak_vip_port_on_graph_error {
            w.remove_port(&vip_port_id);
            for p in &extra {
                w.remove_port(p);
            }
        }
        return Err(e);
    }
    schedule(sh, w, jobs, &id, LbPhase::Create, 0);
    Ok(created("loadbalancer", full(w, &id)))
}

fn objects(m: &Map<String, Value>, key: &str) -> ApiResult<Vec<Map<String, Value>>> {
    match m.get(key) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(a)) => a
            .iter()
            .map(|o| o.as_object().cloned().ok_or_else(|| super::invalid_field(key, o)))
            .collect(),
        Some(v) => Err(super::invalid_field(key, v)),
    }
}

/// Octavia's `_graph_create`: listeners' inline default pools move to the pool list (named, unique),
/// name-only references must resolve; everything is validated before anything is stored.
fn build_graph(w: &mut World, lb_id: &str, m: &Map<String, Value>, sp_refused: bool) -> ApiResult<()> {
    let mut listeners = objects(m, "listeners")?;
    let mut pools = objects(m, "pools")?;
    if listeners.is_empty() && pools.is_empty() {
        return Ok(());
    }
    let mut required = Vec::new();
    for li in &mut listeners {
        let Some(Value::Object(dp)) = li.get("default_pool").cloned() else {
            continue;
        };
        let name = dp
            .get("name")
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty())
            .map(str::to_owned)
            .ok_or_else(|| {
                ApiError::oct_validation("Pools must be named when creating a fully populated loadbalancer.")
            })?;
        if dp.keys().any(|k| k != "name") {
            pools.push(dp);
            li.insert("default_pool".into(), json!({ "name": name }));
        } else {
            required.push(name);
        }
    }
    let names: Vec<Option<&str>> = pools
        .iter()
        .map(|p| p.get("name").and_then(Value::as_str))
        .collect();
    if names.iter().collect::<HashSet<_>>().len() != names.len() {
        return Err(ApiError::oct_validation(
            "Pool names must be unique when creating a fully populated loadbalancer.",
        ));
    }
    for r in &required {
        if !names.contains(&Some(r.as_str())) {
            return Err(ApiError::oct_validation(format!(
                "Pool '{r}' was referenced but no full definition was found."
            )));
        }
    }
    let lb = w.lbs.get(lb_id).cloned().ok_or_else(|| lb_not_found(lb_id))?;

    let mut built_pools = Vec::new();
    let mut built_members = Vec::new();
    let mut built_hms = Vec::new();
    let mut pool_ids: HashMap<String, usize> = HashMap::new();
    for p in &pools {
        let name = p.get("name").and_then(Value::as_str).unwrap_or_default();
        for attr in ["protocol", "lb_algorithm"] {
            if !p.contains_key(attr) {
                return Err(ApiError::oct_validation(format!(
                    "Pool definition for '{name}' missing required attribute: {attr}"
                )));
            }
        }
        let pool = super::pools::build(&lb, p, sp_refused)?;
        let mut seen = HashSet::new();
        for mm in objects(p, "members")? {
            let member = super::members::build(w, &pool, &lb.provider, &mm)?;
            if !seen.insert((member.address.clone(), member.protocol_port)) {
                return Err(ApiError::octavia(
                    StatusCode::CONFLICT,
                    format!(
                        "Another member on this pool is already using ip {} on protocol_port {}",
                        member.address, member.protocol_port
                    ),
                ));
            }
            built_members.push(member);
        }
        if let Some(Value::Object(hm)) = p.get("healthmonitor") {
            built_hms.push(super::healthmonitors::build(&pool, &lb.provider, hm)?);
        }
        pool_ids.insert(name.to_owned(), built_pools.len());
        built_pools.push(pool);
    }
    let mut built_listeners = Vec::new();
    let mut ports = HashSet::new();
    for li in &listeners {
        let mut l = super::listeners::build(w, &lb, li)?;
        if !ports.insert((l.protocol.clone(), l.protocol_port)) {
            return Err(ApiError::octavia(
                StatusCode::CONFLICT,
                format!(
                    "Another Listener on this Load Balancer is already using protocol {} and protocol_port {}",
                    l.protocol, l.protocol_port
                ),
            ));
        }
        if let Some(name) = li
            .get("default_pool")
            .and_then(|d| d.get("name"))
            .and_then(Value::as_str)
        {
            let idx = *pool_ids.get(name).ok_or_else(|| {
                ApiError::oct_validation(format!(
                    "Pool '{name}' was referenced but no full definition was found."
                ))
            })?;
            let pool = &mut built_pools[idx];
            super::listeners::check_protocols(&l.protocol, &pool.protocol)?;
            if !pool.listeners.is_empty() {
                return Err(ApiError::octavia(
                    StatusCode::CONFLICT,
                    "This listener already has a default pool",
                ));
            }
            pool.listeners.push(IdRef::new(&l.id));
            l.default_pool_id = Some(pool.id.clone());
        }
        built_listeners.push(l);
    }
    for l in built_listeners {
        super::listeners::insert(w, l);
    }
    for p in built_pools {
        super::pools::insert(w, p);
    }
    for mb in built_members {
        super::members::insert(w, mb);
    }
    for h in built_hms {
        super::healthmonitors::insert(w, h);
    }
    Ok(())
}

pub async fn update(
    State(sh): State<Arc<Shared>>,
    Path(id): Path<String>,
    body: Bytes,
) -> ApiResult<Response> {
    let m = body_obj(&body, "loadbalancer")?;
    sh.mutate(|w, jobs| {
        let lb = w.lbs.get_mut(&id).ok_or_else(|| lb_not_found(&id))?;
        if lb.provisioning_status != ACTIVE {
            return Err(ApiError::octavia(
                StatusCode::CONFLICT,
                format!(
                    "Invalid state {} of loadbalancer resource {id}",
                    lb.provisioning_status
                ),
            ));
        }
        if let Some(v) = s(&m, "name") {
            lb.name = v;
        }
        if let Some(v) = s(&m, "description") {
            lb.description = v;
        }
        if let Some(v) = b(&m, "admin_state_up")? {
            lb.admin_state_up = v;
        }
        if let Some(v) = tags(&m)? {
            lb.tags = v;
        }
        if m.contains_key("vip_qos_policy_id") {
            lb.vip_qos_policy_id = s(&m, "vip_qos_policy_id");
        }
        lb.provisioning_status = PENDING_UPDATE.to_owned();
        lb.updated_at = Some(octavia_now());
        lb.epoch += 1;
        let v = to_json(&*lb);
        schedule(&sh, w, jobs, &id, LbPhase::Update, 0);
        Ok(ok("loadbalancer", v))
    })
}

pub async fn delete(
    State(sh): State<Arc<Shared>>,
    Path(id): Path<String>,
    RawQuery(q): RawQuery,
) -> ApiResult<StatusCode> {
    let cascade = Query::parse(q.as_deref()).flag("cascade");
    sh.mutate(|w, jobs| {
        let lb = w.lbs.get(&id).ok_or_else(|| lb_not_found(&id))?;
        if (!lb.listeners.is_empty() || !lb.pools.is_empty()) && !cascade {
            return Err(ApiError::oct_validation(format!(
                "Cannot delete Load Balancer {id} - it has children"
            )));
        }
        if lb.provisioning_status != ACTIVE && lb.provisioning_status != ERROR {
            return Err(ApiError::octavia(
                StatusCode::CONFLICT,
                format!(
                    "Invalid state {} of loadbalancer resource {id}",
                    lb.provisioning_status
                ),
            ));
        }
        let listeners: Vec<String> = lb.listeners.iter().map(|l| l.id.clone()).collect();
        let pools: Vec<String> = lb.pools.iter().map(|p| p.id.clone()).collect();
        for l in &listeners {
            if let Some(l) = w.listeners.get_mut(l) {
                l.provisioning_status = PENDING_DELETE.to_owned();
            }
        }
        for p in &pools {
            let (members, hm) = match w.pools.get_mut(p) {
                Some(p) => {
                    p.provisioning_status = PENDING_DELETE.to_owned();
                    (p.members.clone(), p.healthmonitor_id.clone())
                }
                None => continue,
            };
            for m in members {
                if let Some(m) = w.members.get_mut(&m.id) {
                    m.provisioning_status = PENDING_DELETE.to_owned();
                }
            }
            if let Some(h) = hm.and_then(|h| w.healthmonitors.get_mut(&h)) {
                h.provisioning_status = PENDING_DELETE.to_owned();
            }
        }
        if let Some(lb) = w.lbs.get_mut(&id) {
            lb.provisioning_status = PENDING_DELETE.to_owned();
            lb.epoch += 1;
            lb.updated_at = Some(octavia_now());
        }
        schedule(&sh, w, jobs, &id, LbPhase::Delete, 0);
        Ok(StatusCode::NO_CONTENT)
    })
}

/// For `/_sim/state`.
pub fn count_by_status(w: &World) -> HashMap<String, usize> {
    let mut m = HashMap::new();
    for lb in w.lbs.values() {
        *m.entry(lb.provisioning_status.clone()).or_insert(0) += 1;
    }
    m
}

pub fn is_lb_pending(w: &World, id: &str) -> bool {
    w.lbs.get(id).is_some_and(|l| is_pending(&l.provisioning_status))
}
