//! Wiring: the Node cache, the KuryrPort controller, the Pod front end, readiness and shutdown.

use std::collections::BTreeSet;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use futures::{FutureExt, StreamExt};
use kube::runtime::controller::{self, Controller};
use kube::runtime::{reflector, watcher, WatchStreamExt};
use kuryr_api::{scoped, Api, KuryrNetwork, KuryrPort, Node, ResourceExt, SlimPod, VifType};
use kuryr_core::pool::PoolParent;
use kuryr_openstack::Cloud;
use tracing::{info, info_span, warn, Instrument};

use crate::config::Config;
use crate::context::Context;
use crate::metrics::Metrics;
use crate::networks::{self, SubnetMode};
use crate::pods::frontend;
use crate::policies;
use crate::ports::cached::CachedKp;
use crate::ports::{macvlan, node_vif, pool, reconcile};
use crate::shutdown::run_controller;

/// Pod front-end reconciles in flight at most: each is two apiserver writes at most.
const POD_CONCURRENCY: u16 = 128;
/// KuryrPort reconciles in flight at most. A reconcile in flight holds a future and, while it waits on the
/// apiserver, an HTTP/1 connection of its own: after a restart every KuryrPort and Pod is due at once, and
/// unbounded, a restart at 2,000 pods / 400 Services opened ~2,040 connections and held 212.7 MiB against
/// 107.0 MiB with this cap (docs/BENCHMARKS.md, "Scale").
/// Cloud calls are bounded by the client's own limit anyway, and reads of many reconciles share a list.
const KURYRPORT_CONCURRENCY: u16 = 256;

/// Everything [`run`] needs besides the shutdown trigger.
pub struct Runtime {
    pub client: kube::Client,
    pub cloud: Cloud,
    pub config: Config,
    pub metrics: Metrics,
    /// Set once every watch cache has synced (`/readyz`).
    pub ready: Arc<AtomicBool>,
}

impl Runtime {
    pub fn new(client: kube::Client, cloud: Cloud, config: Config) -> Self {
        Self {
            client,
            cloud,
            config,
            metrics: Metrics::default(),
            ready: Arc::default(),
        }
    }
}

/// Runs both controllers until `shutdown` completes (in-flight reconciles are allowed to finish).
pub async fn run(rt: Runtime, shutdown: impl Future<Output = ()> + Send + 'static) -> anyhow::Result<()> {
    let Runtime {
        client,
        cloud,
        config,
        metrics,
        ready,
    } = rt;
    let project_id = match config.project_id.clone().or_else(|| cloud.project_id()) {
        Some(p) => p,
        None => anyhow::bail!("no project: pass --project-id or use a project-scoped cloud"),
    };
    let shutdown = shutdown.boxed().shared();
    let ns = config.namespace.clone();
    let wc = watcher::Config::default();

    // Nodes: only their InternalIPs are read (parent port lookup), from this cache.
    let (nodes, node_writer) = reflector::store();
    let node_watch = watcher(Api::<Node>::all(client.clone()), wc.clone())
        .default_backoff()
        .modify(crate::slim::node)
        .reflect(node_writer)
        .touched_objects()
        .for_each(|r| {
            if let Err(e) = r {
                warn!(error = &e as &dyn std::error::Error, "node watch");
            }
            futures::future::ready(())
        });

    // Services → Octavia, when a service subnet is configured.
    let services = {
        let (c, cl, cf, m, s) = (
            client.clone(),
            cloud.clone(),
            config.clone(),
            metrics.clone(),
            shutdown.clone(),
        );
        async move {
            if cf.services.is_some() {
                // Boxed: the Services controllers' future is large, and held inline it overflowed the 2 MiB
                // stack of a test's runtime thread (the lab tests run this in-process).
                if let Err(e) = Box::pin(crate::services::run(c, cl, cf, m, s)).await {
                    warn!(error = %e, "services controllers");
                }
            }
        }
    };

    let kp_api: Api<KuryrPort> = scoped(&client, ns.as_deref());
    let pod_api: Api<SlimPod> = scoped(&client, ns.as_deref());
    // One KuryrPort and one Pod per pod in the caches: most of the controller's memory at scale. Pods are
    // kept slim (`slim`), KuryrPorts packed (`ports::cached`; tests/footprint.rs has the figures).
    let kp_controller = Controller::new(scoped::<CachedKp>(&client, ns.as_deref()), wc.clone())
        .with_config(controller::Config::default().concurrency(KURYRPORT_CONCURRENCY));
    let pod_controller = crate::slim::controller(pod_api, wc.clone(), crate::slim::pod)
        .owns(kp_api, wc)
        .with_config(controller::Config::default().concurrency(POD_CONCURRENCY));
    let nodes_for_pools = nodes.clone();
    let ctx = Arc::new(Context::new(
        client,
        cloud,
        config,
        project_id,
        metrics,
        nodes.clone(),
        kp_controller.store(),
    ));

    let readiness = {
        let (kps, pods) = (kp_controller.store(), pod_controller.store());
        async move {
            let synced = tokio::join!(
                nodes.wait_until_ready(),
                kps.wait_until_ready(),
                pods.wait_until_ready()
            );
            if let (Ok(()), Ok(()), Ok(())) = synced {
                ready.store(true, Ordering::Relaxed);
                info!("caches synced; ready");
            }
        }
    };

    let extra = extra_controllers(ctx.clone(), shutdown.clone());
    let pairs_upkeep = macvlan_pairs_upkeep(ctx.clone(), nodes_for_pools.clone())
        .instrument(info_span!("macvlan_pairs_upkeep"));
    let upkeep = pool_upkeep(ctx.clone(), nodes_for_pools).instrument(info_span!("pool_upkeep"));

    let kp_run = run_controller(
        kp_controller,
        reconcile::reconcile,
        crate::toolkit::error_policy,
        ctx.clone(),
        shutdown.clone(),
    )
    .instrument(info_span!("kuryrport_controller"));
    let pod_run = run_controller(
        pod_controller,
        frontend::reconcile,
        crate::toolkit::error_policy,
        ctx.clone(),
        shutdown.clone(),
    )
    .instrument(info_span!("pod_controller"));

    // The node watch never ends by itself: stop it with the controllers.
    tokio::select! {
        _ = async { tokio::join!(kp_run, pod_run, readiness, extra, services) } => {}
        _ = node_watch.instrument(info_span!("node_watch")) => {}
        _ = upkeep => {}
        _ = pairs_upkeep => {}
    }
    info!("controllers stopped");
    Ok(())
}

/// The namespace-network controllers (namespace subnet mode) and the NetworkPolicy controller (enabled),
/// as configured; finishes when they all stop. Public so that a test can run them without the pod path.
pub fn extra_controllers(
    ctx: Arc<Context>,
    shutdown: impl Future<Output = ()> + Clone + Send + Sync + 'static,
) -> impl Future<Output = ()> {
    let mut runs: Vec<futures::future::BoxFuture<'static, ()>> = Vec::new();
    if ctx.config.networks.mode == SubnetMode::Namespace {
        let wc = watcher::Config::default();
        let (ns_api, ns_wc) = crate::scope::namespace_watch(&ctx.client, &ctx.config);
        let kn_api: Api<KuryrNetwork> = scoped(&ctx.client, ctx.config.namespace.as_deref());
        runs.push(
            run_controller(
                Controller::new(kn_api, wc),
                networks::reconcile::reconcile,
                crate::toolkit::error_policy,
                ctx.clone(),
                shutdown.clone(),
            )
            .instrument(info_span!("kuryrnetwork_controller"))
            .boxed(),
        );
        runs.push(
            run_controller(
                Controller::new(ns_api, ns_wc),
                networks::reconcile::namespace,
                crate::toolkit::error_policy,
                ctx.clone(),
                shutdown.clone(),
            )
            .instrument(info_span!("namespace_controller"))
            .boxed(),
        );
    }
    if ctx.config.policy.enabled {
        runs.push(policies::controller::run(ctx, shutdown).boxed());
    }
    futures::future::join_all(runs).map(|_| ())
}

/// nested-macvlan: the node VM ports' address pairs whose pod port is gone are dropped once the node cache
/// has synced, then every `pairs_sweep_interval` (see [`macvlan::sweep_stale_pairs`]). Never ends by itself.
async fn macvlan_pairs_upkeep(ctx: Arc<Context>, nodes: reflector::Store<Node>) {
    if nodes.wait_until_ready().await.is_err() {
        return std::future::pending().await;
    }
    loop {
        // Only nodes whose pods are nested-macvlan (the controller's driver, or a node's pod-vif label).
        let macvlan_nodes = nodes
            .state()
            .into_iter()
            .filter(|n| node_vif::of(&ctx, n).ok() == Some(VifType::NestedMacvlan));
        for node in macvlan_nodes {
            let swept = async {
                let vm_port = macvlan::vm_port_of(&ctx, &node.name_any()).await?;
                macvlan::sweep_stale_pairs(&ctx, &vm_port).await
            };
            if let Err(e) = swept.await {
                if !e.is_permanent() {
                    warn!(
                        node = node.name_any(),
                        error = &e as &dyn std::error::Error,
                        "address pairs sweep"
                    );
                }
            }
        }
        if ctx.config.pairs_sweep_interval.is_zero() {
            return std::future::pending().await;
        }
        tokio::time::sleep(ctx.config.pairs_sweep_interval).await;
    }
}

/// Pool upkeep every `pool_sync_interval` once the node cache has synced: pools of nodes no longer in it
/// are drained, the others trimmed and topped up (see [`pool::maintain`]). Never ends by itself.
async fn pool_upkeep(ctx: Arc<Context>, nodes: reflector::Store<Node>) {
    if !ctx.config.pools_enabled || nodes.wait_until_ready().await.is_err() {
        return std::future::pending().await;
    }
    let mut tick = tokio::time::interval(ctx.config.pool_sync_interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let mut live = BTreeSet::new();
        let mut unsure = false;
        for node in nodes.state() {
            let name = node.name_any();
            live.insert(PoolParent::Host(name.clone()));
            if let Some(p) = ctx.trunks.parent(&name) {
                live.insert(PoolParent::Trunk(p.trunk_id));
            } else if node_vif::of(&ctx, &node).ok() == Some(VifType::NestedVlan) {
                // Not looked up yet (e.g. pools rebuilt after a restart): find it, or its pools look dead.
                match ctx.trunks.parent_of(&ctx.cloud, &node).await {
                    Ok(p) => {
                        live.insert(PoolParent::Trunk(p.trunk_id));
                    }
                    // A node without trunk has no pools; one we could not look up might.
                    Err(e) => unsure |= !e.is_permanent(),
                }
            }
        }
        if unsure {
            continue;
        }
        ctx.trunks
            .forget_parents_except(&nodes.state().iter().map(|n| n.name_any()).collect());
        if let Err(e) = pool::maintain(&ctx, &live).await {
            warn!(error = &e as &dyn std::error::Error, "pool upkeep");
        }
    }
}
