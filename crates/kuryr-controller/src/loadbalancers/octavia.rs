//! Octavia reads and writes of the KuryrLoadBalancer controller: [`observe`] turns a load balancer into the
//! core's [`ObservedLb`] (and [`observed_from_graph`] a create's answer, [`from_tree`] an earlier one plus
//! a fresh status tree, without further reads); [`execute`] carries out one planned [`Op`]; everything
//! created is tagged with the Service's ownership tags.

use std::collections::BTreeMap;

use kuryr_api::loadbalancer::LbProtocol;
use kuryr_core::lb::{
    DesiredHm, DesiredLb, DesiredListener, DesiredPool, Fit, ListenerKey, MemberKey, MemberSubnets,
    ObservedHm, ObservedLb, ObservedListener, ObservedPool, Op, PersistenceKind,
    SessionPersistence as Persistence,
};
use kuryr_openstack::octavia::healthmonitors::{self, CreateHealthMonitor, HealthMonitor};
use kuryr_openstack::octavia::listeners::{self, CreateListener, Listener, UpdateListener};
use kuryr_openstack::octavia::loadbalancers::{self, CreateLoadBalancer, Graph, LoadBalancer};
use kuryr_openstack::octavia::members::{self, CreateMember};
use kuryr_openstack::octavia::pools::{self, CreatePool, SessionPersistence, UpdatePool};
use kuryr_openstack::octavia::status::{PoolStatus, StatusTree};
use kuryr_openstack::{fit, Cloud, Owner, Request, Service as OsService};
use serde_json::json;

use crate::errors::Result;

fn protocol(s: &str) -> Option<LbProtocol> {
    kuryr_core::lb::endpoints::protocol(Some(s))
}

/// Load balancers carrying `owner`'s tags.
pub async fn find_tagged(cloud: &Cloud, owner: &Owner) -> Result<Vec<LoadBalancer>> {
    let tags = owner.filter().join(",");
    Ok(loadbalancers::list(cloud, vec![("tags".to_owned(), tags)]).await?)
}

/// A pool as [`assemble`] needs it, from a read or from a create's answer.
struct PoolParts {
    id: String,
    name: String,
    lb_algorithm: String,
    session_persistence: Option<Persistence>,
    listener_ids: Vec<String>,
    members: BTreeMap<MemberKey, String>,
    health_monitor: Option<ObservedHm>,
}

impl PoolParts {
    /// A pool as a read or a list answered it.
    fn read(
        p: pools::Pool,
        members: BTreeMap<MemberKey, String>,
        health_monitor: Option<ObservedHm>,
    ) -> Self {
        Self {
            id: p.id,
            name: p.name,
            lb_algorithm: p.lb_algorithm,
            session_persistence: observed_persistence(p.session_persistence.as_ref()),
            listener_ids: p.listeners.into_iter().map(|l| l.id).collect(),
            members,
            health_monitor,
        }
    }
}

fn observed_hm(h: HealthMonitor) -> ObservedHm {
    ObservedHm {
        id: h.id,
        spec: DesiredHm {
            kind: h.kind,
            delay: h.delay,
            timeout: h.timeout,
            max_retries: h.max_retries,
            max_retries_down: h.max_retries_down,
            url_path: h.url_path,
            expected_codes: h.expected_codes,
        },
    }
}

/// Listeners keyed by protocol and port, each with its pool; pools no listener of ours has are orphans.
fn assemble(lb: &LoadBalancer, found: Vec<Listener>, pools: Vec<PoolParts>) -> ObservedLb {
    let mut listeners = BTreeMap::new();
    let mut by_listener: BTreeMap<String, ListenerKey> = BTreeMap::new();
    for l in found {
        let Some(proto) = protocol(&l.protocol) else {
            continue;
        };
        let key = ListenerKey::new(proto, l.protocol_port);
        by_listener.insert(l.id.clone(), key);
        // Boxed: a map's node has room for 11 entries, and a listener inline is 352 bytes (a 4 KB node
        // for one or two listeners, per load balancer the observer's listing holds).
        listeners.insert(
            key,
            Box::new(ObservedListener {
                id: l.id,
                name: l.name,
                timeout_client_data: l.timeout_client_data,
                timeout_member_data: l.timeout_member_data,
                allowed_cidrs: l.allowed_cidrs.unwrap_or_default(),
                pool: None,
            }),
        );
    }
    let mut orphan_pools = Vec::new();
    for p in pools {
        let key = p.listener_ids.iter().find_map(|l| by_listener.get(l)).copied();
        let Some(l) = key.and_then(|k| listeners.get_mut(&k)) else {
            orphan_pools.push(p.id);
            continue;
        };
        if l.pool.is_some() {
            orphan_pools.push(p.id);
            continue;
        }
        l.pool = Some(ObservedPool {
            id: p.id,
            name: p.name,
            lb_algorithm: p.lb_algorithm,
            session_persistence: p.session_persistence,
            members: p.members,
            health_monitor: p.health_monitor,
        });
    }
    ObservedLb {
        id: lb.id.clone(),
        provider: lb.provider.clone(),
        vip_address: lb.vip_address.clone(),
        vip_port_id: lb.vip_port_id.clone(),
        additional_vips: additional_vips(lb),
        listeners,
        orphan_pools,
    }
}

/// A pool's members as the status tree lists them; `None` when the tree leaves out which backend a
/// member is (then they must be listed).
fn tree_members(p: &PoolStatus) -> Option<BTreeMap<MemberKey, String>> {
    p.members
        .iter()
        // A removed member lingers PENDING_DELETE on ovn: it is not part of the pool any more.
        .filter(|m| m.node.provisioning_status != "PENDING_DELETE")
        .map(|m| {
            (!m.address.is_empty() && m.protocol_port != 0)
                .then(|| ((m.address.clone(), m.protocol_port), m.node.id.clone()))
        })
        .collect()
}

/// Reads `lb`'s listeners, pools and health monitors (`lb` from a fresh GET: its pool list also names
/// pools no listener has); members come from `tree` (read this round) where it names them.
pub async fn observe(cloud: &Cloud, lb: &LoadBalancer, tree: &StatusTree) -> Result<ObservedLb> {
    let in_tree: BTreeMap<&str, &PoolStatus> = tree
        .loadbalancer
        .listeners
        .iter()
        .flat_map(|l| l.pools.iter())
        .map(|p| (p.node.id.as_str(), p))
        .collect();
    let mut found = Vec::new();
    for r in &lb.listeners {
        match listeners::get(cloud, &r.id).await {
            Ok(l) => found.push(l),
            Err(e) if e.is_not_found() => continue,
            Err(e) => return Err(e.into()),
        }
    }
    let mut parts = Vec::new();
    for r in &lb.pools {
        let p = match pools::get(cloud, &r.id).await {
            Ok(p) => p,
            Err(e) if e.is_not_found() => continue,
            Err(e) => return Err(e.into()),
        };
        let members = match in_tree.get(p.id.as_str()).and_then(|t| tree_members(t)) {
            Some(m) => m,
            None => members::list(cloud, &p.id)
                .await?
                .into_iter()
                .filter(|m| m.provisioning_status != "PENDING_DELETE")
                .map(|m| ((m.address, m.protocol_port), m.id))
                .collect(),
        };
        let health_monitor = match &p.healthmonitor_id {
            Some(id) if !id.is_empty() => match healthmonitors::get(cloud, id).await {
                Ok(h) => Some(observed_hm(h)),
                Err(e) if e.is_not_found() => None,
                Err(e) => return Err(e.into()),
            },
            _ => None,
        };
        parts.push(PoolParts::read(p, members, health_monitor));
    }
    Ok(assemble(lb, found, parts))
}

/// `lb`'s tree from the cluster-wide lists (`listeners`, `pools`, `monitors`: this load balancer's), members
/// left for [`from_tree`] to fill (a pool lists member ids only). `None` when the lists miss something
/// the load balancer names (an object without our tags): then it is read in full.
pub fn observed_from_lists(
    lb: &LoadBalancer,
    listeners: Vec<Listener>,
    pools: Vec<pools::Pool>,
    monitors: &BTreeMap<String, HealthMonitor>,
) -> Option<ObservedLb> {
    let complete = lb
        .listeners
        .iter()
        .all(|r| listeners.iter().any(|l| l.id == r.id))
        && lb.pools.iter().all(|r| pools.iter().any(|p| p.id == r.id));
    if !complete {
        return None;
    }
    let mut parts = Vec::new();
    for p in pools {
        let health_monitor = match p.healthmonitor_id.as_deref().filter(|h| !h.is_empty()) {
            Some(id) => Some(observed_hm(monitors.get(id)?.clone())),
            None => None,
        };
        parts.push(PoolParts::read(p, BTreeMap::new(), health_monitor));
    }
    Some(assemble(lb, listeners, parts))
}

/// The tree a fully-populated create made, from its answer: `None` when the answer names ids only.
pub fn observed_from_graph(lb: &LoadBalancer, graph: &Graph) -> Option<ObservedLb> {
    if !graph.is_complete() {
        return None;
    }
    let parts = graph
        .pools
        .iter()
        .map(|p| PoolParts {
            id: p.id.clone(),
            name: p.name.clone(),
            lb_algorithm: p.lb_algorithm.clone(),
            session_persistence: observed_persistence(p.session_persistence.as_ref()),
            listener_ids: p.listeners.iter().map(|l| l.id.clone()).collect(),
            members: p
                .members
                .iter()
                .map(|m| ((m.address.clone(), m.protocol_port), m.id.clone()))
                .collect(),
            health_monitor: p.healthmonitor.clone().map(observed_hm),
        })
        .collect();
    Some(assemble(lb, graph.listeners.clone(), parts))
}

/// `cached` (read earlier) brought up to date from `tree`: members as the tree lists them. `None` when the
/// tree shows other listeners, pools or health monitors than `cached` has (something was added or
/// deleted: read it all again), or does not name its members' backends.
pub fn from_tree(cached: &ObservedLb, lb: &LoadBalancer, tree: &StatusTree) -> Option<ObservedLb> {
    let t = &tree.loadbalancer;
    if t.node.id != cached.id || t.listeners.len() != cached.listeners.len() {
        return None;
    }
    let mut out = cached.clone();
    out.provider = lb.provider.clone();
    out.vip_address = lb.vip_address.clone();
    out.vip_port_id = lb.vip_port_id.clone();
    out.additional_vips = additional_vips(lb);
    for l in out.listeners.values_mut() {
        let tl = t.listeners.iter().find(|x| x.node.id == l.id)?;
        match (&mut l.pool, tl.pools.as_slice()) {
            (None, []) => {}
            (Some(p), [tp]) if tp.node.id == p.id => {
                let hm = tp.health_monitor.as_ref().map(|h| h.id.as_str());
                if p.health_monitor.as_ref().map(|h| h.id.as_str()) != hm {
                    return None;
                }
                p.members = tree_members(tp)?;
            }
            _ => return None,
        }
    }
    Some(out)
}

/// The load balancer's additional VIP addresses, sorted (as [`ObservedLb::additional_vips`] holds them).
fn additional_vips(lb: &LoadBalancer) -> Vec<String> {
    let mut out: Vec<String> = lb.additional_vips.iter().map(|v| v.ip_address.clone()).collect();
    out.sort_unstable();
    out
}

fn members_of(
    members: &BTreeMap<MemberKey, String>,
    subnets: &MemberSubnets,
    tags: &[String],
) -> Vec<CreateMember> {
    members
        .iter()
        .map(|((ip, port), name)| member(ip, *port, name, subnets.for_address(ip), tags))
        .collect()
}

fn member(ip: &str, port: u32, name: &str, subnet: Option<&String>, tags: &[String]) -> CreateMember {
    CreateMember {
        name: Some(name.to_owned()),
        subnet_id: subnet.cloned(),
        tags: tags.to_vec(),
        ..CreateMember::new(ip, port)
    }
}

fn health_monitor(hm: &DesiredHm, tags: &[String]) -> CreateHealthMonitor {
    CreateHealthMonitor {
        max_retries_down: hm.max_retries_down,
        url_path: hm.url_path.clone(),
        expected_codes: hm.expected_codes.clone(),
        http_method: hm.url_path.as_ref().map(|_| "GET".to_owned()),
        tags: tags.to_vec(),
        ..CreateHealthMonitor {
            kind: hm.kind.clone(),
            ..CreateHealthMonitor::tcp(hm.delay, hm.timeout, hm.max_retries)
        }
    }
}

/// A pool's session persistence as Octavia reports it; `None` for an empty type.
fn observed_persistence(sp: Option<&SessionPersistence>) -> Option<Persistence> {
    let sp = sp?;
    Some(Persistence {
        kind: PersistenceKind::parse(&sp.kind)?,
        timeout_s: sp.persistence_timeout,
    })
}

fn persistence(p: &Option<Persistence>) -> Option<SessionPersistence> {
    p.as_ref().map(|p| SessionPersistence {
        kind: p.kind.as_str().to_owned(),
        persistence_timeout: p.timeout_s,
        cookie_name: None,
    })
}

fn pool(key: ListenerKey, p: &DesiredPool, tags: &[String], with_members: bool) -> CreatePool {
    CreatePool {
        session_persistence: persistence(&p.session_persistence),
        members: if with_members {
            members_of(&p.members, &p.member_subnets, tags)
        } else {
            Vec::new()
        },
        healthmonitor: if with_members {
            p.health_monitor.as_ref().map(|h| health_monitor(h, tags))
        } else {
            None
        },
        tags: tags.to_vec(),
        ..CreatePool::new(
            &p.name,
            kuryr_core::lb::names::protocol(key.protocol),
            &p.lb_algorithm,
        )
    }
}

fn listener(key: ListenerKey, l: &DesiredListener, tags: &[String]) -> CreateListener {
    CreateListener {
        timeout_client_data: l.timeout_client_data,
        timeout_member_data: l.timeout_member_data,
        allowed_cidrs: (!l.allowed_cidrs.is_empty()).then(|| l.allowed_cidrs.clone()),
        tags: tags.to_vec(),
        ..CreateListener::new(&l.name, kuryr_core::lb::names::protocol(key.protocol), key.port)
    }
}

/// The whole tree in one request.
pub fn create_request(d: &DesiredLb, project_id: Option<&str>, tags: &[String]) -> CreateLoadBalancer {
    CreateLoadBalancer {
        name: d.name.clone(),
        description: Some("kuryr-rs Service load balancer".into()),
        vip_subnet_id: d.vip_subnet_id.clone(),
        vip_address: d.vip_address.clone(),
        additional_vips: d
            .additional_vips
            .iter()
            .map(|v| loadbalancers::AdditionalVip {
                subnet_id: v.subnet_id.clone(),
                ip_address: v.ip_address.clone(),
            })
            .collect(),
        provider: d.provider.clone(),
        project_id: project_id.map(str::to_owned),
        tags: tags.to_vec(),
        listeners: d
            .listeners
            .iter()
            .map(|(k, l)| listener(*k, l, tags).with_pool(pool(*k, &l.pool, tags, true)))
            .collect(),
        ..CreateLoadBalancer::default()
    }
}

/// [`kuryr_core::lb::Fit`] measured on the bodies [`execute`] sends: the same request builders, serialized.
pub struct BodyFit<'a> {
    /// The cloud's limit less room for what the client may add (a noauth `project_id`).
    limit: usize,
    project_id: Option<&'a str>,
    tags: &'a [String],
}

impl<'a> BodyFit<'a> {
    /// Bytes kept free below the cloud's limit for what the client adds to a body after it is sized.
    const SLACK: usize = 1024;

    pub fn new(cloud: &Cloud, project_id: Option<&'a str>, tags: &'a [String]) -> Self {
        Self {
            limit: cloud.max_request_body().saturating_sub(Self::SLACK),
            project_id,
            tags,
        }
    }
}

impl Fit for BodyFit<'_> {
    fn create_fits(&self, lb: &DesiredLb) -> bool {
        let body = json!({ "loadbalancer": create_request(lb, self.project_id, self.tags) });
        fit::json_len(&body) <= self.limit
    }

    fn members_fitting(&self, members: &[(&MemberKey, &String)], subnets: &MemberSubnets) -> usize {
        // Lazily: only the members one body can hold are serialized.
        let sizes = members.iter().map(|((ip, port), name)| {
            fit::json_len(&member(ip, *port, name, subnets.for_address(ip), self.tags))
        });
        fit::prefix_fitting(sizes, fit::envelope("members"), self.limit)
    }
}

/// What an executed op left behind.
pub enum Done {
    /// A write was made: the LB is pending now.
    Wrote,
    /// A new load balancer, and the graph its create answered with.
    Created(Box<(LoadBalancer, Graph)>),
}

/// Carries out one op (except [`Op::Recreate`], which the caller handles).
pub async fn execute(
    cloud: &Cloud,
    lb_id: &str,
    op: &Op,
    project_id: Option<&str>,
    tags: &[String],
) -> Result<Done> {
    match op {
        Op::CreateLoadBalancer(d) => {
            let created = loadbalancers::create_graph(cloud, &create_request(d, project_id, tags)).await?;
            return Ok(Done::Created(Box::new(created)));
        }
        Op::Recreate { .. } => {}
        Op::DeletePool { id } => pools::delete(cloud, id).await?,
        Op::DeleteListener { id } => listeners::delete(cloud, id).await?,
        Op::DeleteHealthMonitor { id } => healthmonitors::delete(cloud, id).await?,
        Op::CreateListener { key, listener: l } => {
            let mut req = listener(*key, l, tags);
            req.loadbalancer_id = Some(lb_id.to_owned());
            listeners::create(cloud, &req).await?;
        }
        Op::CreatePool {
            listener_id,
            key,
            pool: p,
        } => {
            let mut req = pool(*key, p, tags, false);
            req.listener_id = Some(listener_id.clone());
            pools::create(cloud, &req).await?;
        }
        Op::UpdateListener {
            id,
            timeout_client_data,
            timeout_member_data,
            allowed_cidrs,
        } => {
            let req = UpdateListener {
                timeout_client_data: *timeout_client_data,
                timeout_member_data: *timeout_member_data,
                allowed_cidrs: allowed_cidrs.clone(),
                ..UpdateListener::default()
            };
            listeners::update(cloud, id, &req).await?;
        }
        Op::UpdatePool {
            id,
            lb_algorithm,
            session_persistence,
        } => match session_persistence {
            Some(_) => {
                // admin_state_up: see UpdatePool (our pools are always up).
                let req = UpdatePool {
                    lb_algorithm: Some(lb_algorithm.clone()),
                    admin_state_up: Some(true),
                    session_persistence: persistence(session_persistence),
                    ..UpdatePool::default()
                };
                pools::update(cloud, id, &req).await?;
            }
            // Clearing needs an explicit null, which UpdatePool never sends.
            None => {
                cloud
                    .execute(
                        Request::new(
                            OsService::LoadBalancer,
                            "octavia.pools.update",
                            reqwest::Method::PUT,
                            format!("lbaas/pools/{id}"),
                        )
                        .json(
                            json!({"pool": {"lb_algorithm": lb_algorithm, "admin_state_up": true,
                            "session_persistence": null}}),
                        ),
                    )
                    .await?;
            }
        },
        Op::ReplaceMembers {
            pool_id,
            members: m,
            subnets,
            ..
        } => members::batch_replace(cloud, pool_id, &members_of(m, subnets, tags)).await?,
        Op::AddMembers {
            pool_id,
            members: m,
            subnets,
        } => members::batch_add(cloud, pool_id, &members_of(m, subnets, tags)).await?,
        Op::DeleteMember { pool_id, id } => members::delete(cloud, pool_id, id).await?,
        Op::CreateHealthMonitor { pool_id, hm } => {
            let mut req = health_monitor(hm, tags);
            req.pool_id = Some(pool_id.clone());
            healthmonitors::create(cloud, &req).await?;
        }
    }
    Ok(Done::Wrote)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn lb() -> LoadBalancer {
        LoadBalancer {
            id: "lb".into(),
            provider: "ovn".into(),
            vip_address: "10.0.0.10".into(),
            vip_port_id: "vip".into(),
            ..LoadBalancer::default()
        }
    }

    /// What a fully-populated create answers (as Octavia's `LoadBalancerFullResponse`).
    fn graph() -> Graph {
        serde_json::from_value(json!({
            "listeners": [{"id": "l1", "name": "ns/svc:TCP:80", "protocol": "TCP", "protocol_port": 80,
                           "default_pool_id": "p1", "timeout_client_data": 50000}],
            "pools": [{"id": "p1", "name": "ns/svc:TCP:80", "protocol": "TCP", "lb_algorithm": "SOURCE_IP_PORT",
                       "listeners": [{"id": "l1"}], "healthmonitor_id": null, "session_persistence": null,
                       "members": [{"id": "m1", "address": "10.1.0.5", "protocol_port": 8080},
                                   {"id": "m2", "address": "10.1.0.6", "protocol_port": 8080}],
                       "healthmonitor": null}]
        }))
        .expect("graph")
    }

    fn tree(members: serde_json::Value) -> StatusTree {
        serde_json::from_value(json!({"loadbalancer": {
            "id": "lb", "provisioning_status": "ACTIVE",
            "listeners": [{"id": "l1", "provisioning_status": "ACTIVE",
                "pools": [{"id": "p1", "provisioning_status": "ACTIVE", "members": members}]}]}}))
        .expect("tree")
    }

    #[test]
    fn a_create_answer_is_a_whole_observation() {
        let o = observed_from_graph(&lb(), &graph()).expect("complete graph");
        let key = ListenerKey::new(LbProtocol::Tcp, 80);
        let l = &o.listeners[&key];
        assert_eq!((l.id.as_str(), l.timeout_client_data), ("l1", Some(50000)));
        let p = l.pool.as_ref().expect("pool");
        assert_eq!(p.lb_algorithm, "SOURCE_IP_PORT");
        assert_eq!(p.members.len(), 2);
        assert_eq!(p.members[&("10.1.0.5".to_owned(), 8080)], "m1");
        assert!(o.orphan_pools.is_empty());
        // An answer with ids only is not one.
        let ids_only: Graph =
            serde_json::from_value(json!({"listeners": [{"id": "l1"}], "pools": [{"id": "p1"}]}))
                .expect("ids");
        assert!(observed_from_graph(&lb(), &ids_only).is_none());
    }

    #[test]
    fn the_tree_updates_members_of_an_earlier_observation() {
        let before = observed_from_graph(&lb(), &graph()).expect("complete graph");
        let t = tree(json!([
            {"id": "m2", "provisioning_status": "ACTIVE", "address": "10.1.0.6", "protocol_port": 8080},
            {"id": "m3", "provisioning_status": "ACTIVE", "address": "10.1.0.7", "protocol_port": 8080},
            {"id": "m1", "provisioning_status": "PENDING_DELETE", "address": "10.1.0.5", "protocol_port": 8080}
        ]));
        let now = from_tree(&before, &lb(), &t).expect("same shape");
        let key = ListenerKey::new(LbProtocol::Tcp, 80);
        let members = &now.listeners[&key].pool.as_ref().expect("pool").members;
        let ids: Vec<&str> = members.values().map(String::as_str).collect();
        assert_eq!(ids, vec!["m2", "m3"]);
        assert_eq!(now.listeners[&key].timeout_client_data, Some(50000));
    }

    #[test]
    fn a_changed_shape_or_anonymous_members_need_a_full_read() {
        let before = observed_from_graph(&lb(), &graph()).expect("complete graph");
        // Members without their backends.
        assert!(from_tree(
            &before,
            &lb(),
            &tree(json!([{"id": "m1", "provisioning_status": "ACTIVE"}]))
        )
        .is_none());
        // The pool went (deleted behind our back).
        let no_pool: StatusTree = serde_json::from_value(json!({"loadbalancer": {"id": "lb",
            "listeners": [{"id": "l1", "provisioning_status": "ACTIVE", "pools": []}]}}))
        .expect("tree");
        assert!(from_tree(&before, &lb(), &no_pool).is_none());
        // Another listener.
        let other: StatusTree = serde_json::from_value(json!({"loadbalancer": {"id": "lb",
            "listeners": [{"id": "l9", "provisioning_status": "ACTIVE", "pools": []}]}}))
        .expect("tree");
        assert!(from_tree(&before, &lb(), &other).is_none());
        // A health monitor appeared.
        let hm: StatusTree = serde_json::from_value(json!({"loadbalancer": {"id": "lb",
            "listeners": [{"id": "l1", "pools": [{"id": "p1", "members": [], "health_monitor": {"id": "h"}}]}]}}))
        .expect("tree");
        assert!(from_tree(&before, &lb(), &hm).is_none());
    }
}
