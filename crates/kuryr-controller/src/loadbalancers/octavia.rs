//! Octavia reads and writes of the KuryrLoadBalancer controller: [`observe`] turns a load balancer into the
//! core's [`ObservedLb`]; [`execute`] carries out one planned [`Op`]; everything created is tagged with the
//! Service's ownership tags.

use std::collections::BTreeMap;

use kuryr_api::loadbalancer::LbProtocol;
use kuryr_core::lb::{
    DesiredHm, DesiredLb, DesiredListener, DesiredPool, ListenerKey, MemberKey, ObservedHm, ObservedLb,
    ObservedListener, ObservedPool, Op,
};
use kuryr_openstack::octavia::healthmonitors::{self, CreateHealthMonitor};
use kuryr_openstack::octavia::listeners::{self, CreateListener, UpdateListener};
use kuryr_openstack::octavia::loadbalancers::{self, CreateLoadBalancer, LoadBalancer};
use kuryr_openstack::octavia::members::{self, CreateMember};
use kuryr_openstack::octavia::pools::{self, CreatePool, SessionPersistence, UpdatePool};
use kuryr_openstack::{Cloud, Owner, Request, Service as OsService};
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

/// Reads the load balancer, its listeners, pools, members and health monitors.
pub async fn observe(cloud: &Cloud, lb: &LoadBalancer) -> Result<ObservedLb> {
    let mut listeners = BTreeMap::new();
    let mut by_listener: BTreeMap<String, ListenerKey> = BTreeMap::new();
    for r in &lb.listeners {
        let l = match listeners::get(cloud, &r.id).await {
            Ok(l) => l,
            Err(e) if e.is_not_found() => continue,
            Err(e) => return Err(e.into()),
        };
        let Some(proto) = protocol(&l.protocol) else {
            continue;
        };
        let key = ListenerKey::new(proto, l.protocol_port);
        by_listener.insert(l.id.clone(), key);
        listeners.insert(
            key,
            ObservedListener {
                id: l.id,
                name: l.name,
                timeout_client_data: l.timeout_client_data,
                timeout_member_data: l.timeout_member_data,
                allowed_cidrs: l.allowed_cidrs.unwrap_or_default(),
                pool: None,
            },
        );
    }
    let mut orphan_pools = Vec::new();
    for r in &lb.pools {
        let p = match pools::get(cloud, &r.id).await {
            Ok(p) => p,
            Err(e) if e.is_not_found() => continue,
            Err(e) => return Err(e.into()),
        };
        let key = p.listeners.iter().find_map(|l| by_listener.get(&l.id)).copied();
        let Some(key) = key else {
            orphan_pools.push(p.id);
            continue;
        };
        let members = members::list(cloud, &p.id)
            .await?
            .into_iter()
            // A removed member lingers PENDING_DELETE on ovn: it is not part of the pool any more.
            .filter(|m| m.provisioning_status != "PENDING_DELETE")
            .map(|m| ((m.address, m.protocol_port), m.id))
            .collect();
        let health_monitor = match &p.healthmonitor_id {
            Some(id) if !id.is_empty() => match healthmonitors::get(cloud, id).await {
                Ok(h) => Some(ObservedHm {
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
                }),
                Err(e) if e.is_not_found() => None,
                Err(e) => return Err(e.into()),
            },
            _ => None,
        };
        if let Some(l) = listeners.get_mut(&key) {
            if l.pool.is_some() {
                orphan_pools.push(p.id);
                continue;
            }
            l.pool = Some(ObservedPool {
                id: p.id,
                name: p.name,
                lb_algorithm: p.lb_algorithm,
                session_persistence: p.session_persistence.map(|s| s.kind).filter(|k| !k.is_empty()),
                members,
                health_monitor,
            });
        }
    }
    Ok(ObservedLb {
        id: lb.id.clone(),
        provider: lb.provider.clone(),
        vip_address: lb.vip_address.clone(),
        vip_port_id: lb.vip_port_id.clone(),
        listeners,
        orphan_pools,
    })
}

fn members_of(
    members: &BTreeMap<MemberKey, String>,
    subnet: Option<&String>,
    tags: &[String],
) -> Vec<CreateMember> {
    members
        .iter()
        .map(|((ip, port), name)| CreateMember {
            name: Some(name.clone()),
            subnet_id: subnet.cloned(),
            tags: tags.to_vec(),
            ..CreateMember::new(ip.clone(), *port)
        })
        .collect()
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

fn persistence(p: &Option<String>) -> Option<SessionPersistence> {
    p.as_ref().map(|kind| SessionPersistence {
        kind: kind.clone(),
        cookie_name: None,
    })
}

fn pool(key: ListenerKey, p: &DesiredPool, tags: &[String], with_members: bool) -> CreatePool {
    CreatePool {
        session_persistence: persistence(&p.session_persistence),
        members: if with_members {
            members_of(&p.members, p.member_subnet_id.as_ref(), tags)
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

/// What an executed op left behind.
pub enum Done {
    /// A write was made: the LB is pending now.
    Wrote,
    /// A new load balancer.
    Created(Box<LoadBalancer>),
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
            let lb = loadbalancers::create(cloud, &create_request(d, project_id, tags)).await?;
            return Ok(Done::Created(Box::new(lb)));
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
                let req = UpdatePool {
                    lb_algorithm: Some(lb_algorithm.clone()),
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
                        .json(json!({"pool": {"lb_algorithm": lb_algorithm, "session_persistence": null}})),
                    )
                    .await?;
            }
        },
        Op::ReplaceMembers {
            pool_id,
            members: m,
            subnet_id,
        } => members::batch_replace(cloud, pool_id, &members_of(m, subnet_id.as_ref(), tags)).await?,
        Op::CreateHealthMonitor { pool_id, hm } => {
            let mut req = health_monitor(hm, tags);
            req.pool_id = Some(pool_id.clone());
            healthmonitors::create(cloud, &req).await?;
        }
    }
    Ok(Done::Wrote)
}
