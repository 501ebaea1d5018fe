//! The floor of the services scenario: a minimal controller inside kuryr-bench that does only what a
//! Service cannot be served without, so kuryr-rs's and upstream's Service figures read as × the least this
//! machine, this API server and this cloud allow.
//!
//! Per Service, seen by a watch on the session's namespace (its Endpoints, which the harness writes just
//! before the Service, already cached by a second watch): one fully-populated load balancer create (VIP =
//! the clusterIP, one listener, its pool with every endpoint as a member: a perfect plan, one Octavia write)
//! and the KuryrLoadBalancer create + status write naming those members, written at once: the harness itself
//! waits until the cloud has the whole tree ACTIVE, so the floor waits for nothing. Per Endpoints change of a
//! built Service: one batch member replace, then the status write. Nothing else: no finalizer, no
//! observer, no limit to learn (the client's concurrency is fixed). The session's emulated cloud is dropped
//! with the session, so nothing is deleted.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

use kube::runtime::watcher;
use kuryr_api::conditions::{Condition, ConditionStatus, READY};
use kuryr_api::k8s_openapi::api::core::v1::{Endpoints, Service};
use kuryr_api::loadbalancer::LbMember;
use kuryr_api::{
    Api, Client, KuryrLoadBalancer, KuryrLoadBalancerSpec, Patch, PatchParams, PostParams, ResourceExt,
};
use kuryr_openstack::octavia::listeners::CreateListener;
use kuryr_openstack::octavia::loadbalancers::{self, CreateLoadBalancer};
use kuryr_openstack::octavia::members::{self, CreateMember};
use kuryr_openstack::octavia::pools::CreatePool;
use kuryr_openstack::Cloud;
use serde_json::json;
use tokio::task::{JoinHandle, JoinSet};

use crate::cloud::BenchCloud;
use crate::lock;

/// Cloud calls in flight and Services worked on at once: fixed, high enough that neither is what 200
/// Services created at once wait for (the harness creates 32 at a time).
const IN_FLIGHT: usize = 64;

/// One Service's state: its KuryrLoadBalancer once created, its pool once built, the members last written.
#[derive(Default)]
struct Built {
    klb: bool,
    pool_id: Option<String>,
    members: BTreeSet<(String, u32)>,
}

/// What every task needs (the same for every Service of the session).
struct Ctx {
    klbs: Api<KuryrLoadBalancer>,
    cloud: Cloud,
    ns: String,
    provider: String,
    service_subnet_id: String,
    member_subnet_id: String,
    project_id: String,
    tag: String,
    /// Endpoints by Service name: (address, port) of every ready address.
    endpoints: Mutex<HashMap<String, BTreeSet<(String, u32)>>>,
    /// Per Service, one task at a time (a build and an update of one load balancer never overlap).
    services: Mutex<HashMap<String, Arc<tokio::sync::Mutex<Built>>>>,
    /// clusterIP by Service name.
    cluster_ips: Mutex<HashMap<String, String>>,
    last_error: Mutex<Option<String>>,
}

/// The running floor (stopped, with every task it spawned, when dropped).
pub struct ServicesFloor {
    tasks: Vec<JoinHandle<()>>,
    ctx: Arc<Ctx>,
}

impl ServicesFloor {
    pub async fn start(
        client: &Client,
        ns: &str,
        cloud: &BenchCloud,
        cluster_id: &str,
        provider: &str,
    ) -> anyhow::Result<ServicesFloor> {
        let os = crate::floor::connect_fixed(cloud, IN_FLIGHT).await?;
        let ctx = Arc::new(Ctx {
            klbs: Api::namespaced(client.clone(), ns),
            cloud: os,
            ns: ns.to_string(),
            provider: provider.to_string(),
            service_subnet_id: cloud.service_subnet_id.clone(),
            member_subnet_id: cloud.subnet_id.clone(),
            project_id: cloud.project_id.clone(),
            tag: format!("kuryr.cluster={cluster_id}"),
            endpoints: Mutex::default(),
            services: Mutex::default(),
            cluster_ips: Mutex::default(),
            last_error: Mutex::default(),
        });
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel::<String>();
        let eps: Api<Endpoints> = Api::namespaced(client.clone(), ns);
        let svcs: Api<Service> = Api::namespaced(client.clone(), ns);
        let tasks = vec![
            tokio::spawn(watch_endpoints(eps, ctx.clone(), tx.clone())),
            tokio::spawn(watch_services(svcs, ctx.clone(), tx)),
            tokio::spawn(work(rx, ctx.clone())),
        ];
        Ok(ServicesFloor { tasks, ctx })
    }

    pub fn last_error(&self) -> Option<String> {
        lock(&self.ctx.last_error).clone()
    }
}

impl Drop for ServicesFloor {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// The ready addresses of `ep` with their ports.
fn addresses(ep: &Endpoints) -> BTreeSet<(String, u32)> {
    let mut out = BTreeSet::new();
    for subset in ep.subsets.iter().flatten() {
        let ports: Vec<u32> = subset
            .ports
            .iter()
            .flatten()
            .filter_map(|p| u32::try_from(p.port).ok())
            .collect();
        for a in subset.addresses.iter().flatten() {
            for port in &ports {
                out.insert((a.ip.clone(), *port));
            }
        }
    }
    out
}

async fn watch_endpoints(api: Api<Endpoints>, ctx: Arc<Ctx>, tx: tokio::sync::mpsc::UnboundedSender<String>) {
    crate::kubeenv::for_each_event(api, "services floor's endpoints", move |ev| {
        let ep = match ev {
            watcher::Event::Apply(e) | watcher::Event::InitApply(e) => e,
            _ => return,
        };
        let name = ep.name_any();
        let now = addresses(&ep);
        let changed = lock(&ctx.endpoints).insert(name.clone(), now.clone()) != Some(now);
        // Only a Service already seen has a load balancer to update.
        if changed && lock(&ctx.cluster_ips).contains_key(&name) {
            let _ = tx.send(name);
        }
    })
    .await;
}

async fn watch_services(api: Api<Service>, ctx: Arc<Ctx>, tx: tokio::sync::mpsc::UnboundedSender<String>) {
    crate::kubeenv::for_each_event(api, "services floor's services", move |ev| {
        let svc = match ev {
            watcher::Event::Apply(s) | watcher::Event::InitApply(s) => s,
            _ => return,
        };
        let ip = svc.spec.as_ref().and_then(|s| s.cluster_ip.clone());
        let Some(ip) = ip.filter(|ip| !ip.is_empty() && ip != "None") else {
            return;
        };
        let name = svc.name_any();
        if lock(&ctx.cluster_ips).insert(name.clone(), ip).is_none() {
            let _ = tx.send(name);
        }
    })
    .await;
}

/// Each named Service's work in a task of its own, at most `IN_FLIGHT` at once.
async fn work(mut rx: tokio::sync::mpsc::UnboundedReceiver<String>, ctx: Arc<Ctx>) {
    let gate = Arc::new(tokio::sync::Semaphore::new(IN_FLIGHT));
    let mut tasks = JoinSet::new();
    while let Some(name) = rx.recv().await {
        while tasks.try_join_next().is_some() {}
        let (ctx, gate) = (ctx.clone(), gate.clone());
        tasks.spawn(async move {
            let Ok(_permit) = gate.acquire_owned().await else {
                return;
            };
            if let Err(e) = apply(&ctx, &name).await {
                let msg = format!("{}/{name}: {e:#}", ctx.ns);
                tracing::warn!("services floor: {msg}");
                *lock(&ctx.last_error) = Some(msg);
            }
        });
    }
}

/// Builds the Service's load balancer, or brings its members to the Endpoints; then the status.
async fn apply(ctx: &Ctx, name: &str) -> anyhow::Result<()> {
    let state = lock(&ctx.services).entry(name.to_string()).or_default().clone();
    let mut built = state.lock().await;
    // The harness writes the Endpoints before the Service, but the two watches need not deliver them in
    // that order: a Service whose Endpoints are not seen yet is built when they are (a perfect plan makes
    // the load balancer once, with its members).
    let Some(want) = lock(&ctx.endpoints).get(name).cloned() else {
        return Ok(());
    };
    let member = |(ip, port): &(String, u32)| CreateMember {
        address: ip.clone(),
        protocol_port: *port,
        subnet_id: Some(ctx.member_subnet_id.clone()),
        ..CreateMember::default()
    };
    let pool_id = match &built.pool_id {
        Some(_) if built.members == want => return Ok(()),
        Some(pool_id) => {
            let ms: Vec<CreateMember> = want.iter().map(member).collect();
            members::batch_replace(&ctx.cloud, pool_id, &ms).await?;
            pool_id.clone()
        }
        None => {
            let lb_name = format!("{}/{name}", ctx.ns);
            let algorithm = if ctx.provider == "ovn" {
                "SOURCE_IP_PORT"
            } else {
                "ROUND_ROBIN"
            };
            let pool = CreatePool {
                members: want.iter().map(member).collect(),
                ..CreatePool::new(format!("{lb_name}:TCP:80"), "TCP", algorithm)
            };
            let req = CreateLoadBalancer {
                name: lb_name.clone(),
                vip_subnet_id: Some(ctx.service_subnet_id.clone()),
                vip_address: lock(&ctx.cluster_ips).get(name).cloned(),
                provider: Some(ctx.provider.clone()),
                tags: vec![ctx.tag.clone()],
                listeners: vec![CreateListener {
                    default_pool: Some(pool),
                    ..CreateListener::new(format!("{lb_name}:TCP:80"), "TCP", 80)
                }],
                ..CreateLoadBalancer::default()
            };
            let (klb, made) = tokio::join!(
                async {
                    if !built.klb {
                        let klb = KuryrLoadBalancer::new(name, KuryrLoadBalancerSpec::default());
                        match ctx.klbs.create(&PostParams::default(), &klb).await {
                            Ok(_) => {}
                            Err(kube::Error::Api(e)) if e.code == 409 => {}
                            Err(e) => return Err(anyhow::Error::from(e)),
                        }
                    }
                    anyhow::Ok(())
                },
                loadbalancers::create_graph(&ctx.cloud, &req)
            );
            klb?;
            built.klb = true;
            let (_, graph) = made?;
            graph
                .pools
                .first()
                .map(|p| p.id.clone())
                .ok_or_else(|| anyhow::anyhow!("{lb_name}: the create's answer names no pool"))?
        }
    };
    ctx.klbs
        .patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(&status(&want, &pool_id, ctx)),
        )
        .await?;
    built.pool_id = Some(pool_id);
    built.members = want;
    // Endpoints that changed while this ran: once more.
    if lock(&ctx.endpoints).get(name) != Some(&built.members) {
        drop(built);
        return Box::pin(apply(ctx, name)).await;
    }
    Ok(())
}

/// The status the harness reads: the members (`ip`, `port`) and Ready, as kuryr-rs writes them.
fn status(members: &BTreeSet<(String, u32)>, pool_id: &str, ctx: &Ctx) -> serde_json::Value {
    // The members' ids are not read by anyone: the floor replaces a pool's members by address.
    let ms: Vec<LbMember> = members
        .iter()
        .map(|(ip, port)| LbMember {
            ip: ip.clone(),
            name: format!("{ip}:{port}"),
            pool_id: pool_id.to_string(),
            port: i32::try_from(*port).unwrap_or_default(),
            project_id: ctx.project_id.clone(),
            subnet_id: ctx.member_subnet_id.clone(),
            ..LbMember::default()
        })
        .collect();
    let ready = Condition::new(READY, ConditionStatus::True, "Floor", "");
    json!({"status": {"members": ms, "conditions": [ready]}})
}

#[cfg(test)]
mod tests {
    use super::*;
    use kuryr_api::k8s_openapi::api::core::v1::{EndpointAddress, EndpointPort, EndpointSubset};

    #[test]
    fn ready_addresses_with_every_port_of_their_subset() {
        let ep = Endpoints {
            subsets: Some(vec![EndpointSubset {
                addresses: Some(vec![
                    EndpointAddress {
                        ip: "198.18.72.1".into(),
                        ..EndpointAddress::default()
                    },
                    EndpointAddress {
                        ip: "198.18.72.2".into(),
                        ..EndpointAddress::default()
                    },
                ]),
                not_ready_addresses: Some(vec![EndpointAddress {
                    ip: "198.18.72.9".into(),
                    ..EndpointAddress::default()
                }]),
                ports: Some(vec![EndpointPort {
                    port: 8080,
                    ..EndpointPort::default()
                }]),
            }]),
            ..Endpoints::default()
        };
        let got: Vec<_> = addresses(&ep).into_iter().collect();
        assert_eq!(
            got,
            vec![
                ("198.18.72.1".to_string(), 8080),
                ("198.18.72.2".to_string(), 8080)
            ]
        );
    }
}
