//! Warm port pools, cloud side. `kuryr_core::pool` decides (take, plan, release); this carries it out.
//!
//! One pool per (trunk or host, network, project), keyed by NETWORK: whatever subnet selector picks the
//! pod's subnet, its network names the pool. A pod takes a free port (its SGs set by one update, only if they
//! differ) and the pod path makes no create; an empty pool is refilled right there with a surge covering every
//! pod waiting on it. A refill is ONE bulk create + (nested) ONE `add_subports` per batch, its batches at
//! once. Refills of one pool run side by side: each takes on only the demand the creates in flight do not
//! cover ([`kuryr_core::Pool::reserve`]); a pod whose demand is covered waits for those creates to land.
//! Released ports go back (SGs reset) unless the pool is above its high watermark.
//!
//! Crash safety: pool ports carry the ownership tags `kuryr.kind=pool`; after a restart [`ensure_rebuilt`]
//! rebuilds the pools from the tagged ports no KuryrPort status names (a port taken but never written to a
//! status goes back to its pool) and deletes tagged ports attached nowhere (a refill cut short). While
//! running, every upkeep round lists the pool ports once and adopts or deletes the loose ones (a bulk create
//! that outlived its caller: [`kuryr_core::pool::loose`]); a port seen loose is acted on at a later round,
//! once every pool operation begun before it was seen has ended.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use kuryr_api::Vif;
use kuryr_core::neutron::{NeutronPort, SUBPORT_DEVICE_OWNER};
use kuryr_core::pool::loose::{decide, Held, LooseAction};
use kuryr_core::pool::{rebuild, PoolKey, PoolParent, Taken};
use kuryr_core::pool_sizing::batches;
use kuryr_core::vif::{Attachment, PodFacts, PortOwner, PortParams};
use kuryr_core::{OwnerKind, VifDriver};
use kuryr_openstack::neutron::{ports, security_groups, trunks, Filter};
use kuryr_openstack::Owner;
use tracing::{debug, info, warn};

use crate::config::networks::SubnetMode;
use crate::context::Context;
use crate::errors::{Error, Result};
use crate::ports::node_vif;
pub use crate::ports::pool_state::{PoolState, Target};
use crate::toolkit::lock;
use kuryr_convert as convert;

/// Rounds of "take, else refill, else wait" before a pod gives up for this reconcile (others may take what a
/// refill made; the surge sizing makes more than one round rare).
const ACQUIRE_ROUNDS: u32 = 4;
/// How long a pod waits for creates in flight before it looks again (a create outliving this is unusual:
/// each call has its own timeout and retries).
const WAIT_FOR_CREATES: Duration = Duration::from_secs(60);

pub fn owner(ctx: &Context) -> Owner {
    Owner::new(
        &ctx.config.cluster_id,
        OwnerKind::Pool.as_str(),
        &ctx.config.cluster_id,
    )
}

/// The SGs of a pod port unless its KuryrPort names others: `--pod-security-groups`, else the project's
/// `default` group (looked up once, so a pool port's SGs compare equal to what a pod asks for).
pub async fn default_sgs(ctx: &Context) -> Result<BTreeSet<String>> {
    let sgs = ctx
        .pools
        .default_sgs
        .get_or_try_init(|| async {
            if !ctx.config.pod_security_groups.is_empty() {
                return Ok::<_, Error>(ctx.config.pod_security_groups.iter().cloned().collect());
            }
            lookup_default_sg(ctx, &ctx.project_id, "the project's default security group").await
        })
        .await?;
    Ok(sgs.clone())
}

/// The `default` security group of `project` (a namespace's own), looked up once per project.
pub async fn project_default_sg(ctx: &Context, project: &str) -> Result<BTreeSet<String>> {
    if let Some(sgs) = lock(&ctx.pools.project_default_sgs).get(project) {
        return Ok(sgs.clone());
    }
    let missing = format!("the default security group of project {project}");
    let sgs = lookup_default_sg(ctx, project, &missing).await?;
    lock(&ctx.pools.project_default_sgs).insert(project.to_owned(), sgs.clone());
    Ok(sgs)
}

/// `project`'s `default` group, as a set of one; `missing` names it in the error when there is none.
async fn lookup_default_sg(ctx: &Context, project: &str, missing: &str) -> Result<BTreeSet<String>> {
    let found = security_groups::list(&ctx.cloud, Filter::new().name("default").project(project)).await?;
    let sg = found
        .into_iter()
        .next()
        .ok_or_else(|| Error::CloudObjectMissing(missing.to_owned()))?;
    Ok(BTreeSet::from([sg.id]))
}

/// Rebuilds the pools from Neutron once per process, after the KuryrPort cache has synced (a port named in
/// a status is in use, not free). Tagged pool ports attached nowhere (a refill cut short before
/// `add_subports`, a release cut short between detach and delete) are deleted.
pub async fn ensure_rebuilt(ctx: &Context) -> Result<()> {
    ctx.pools
        .rebuilt
        .get_or_try_init(|| async {
            let _ = ctx.kuryrports.wait_until_ready().await;
            let defaults = default_sgs(ctx).await?;
            let owner = owner(ctx);
            let tagged = ports::list(&ctx.cloud, Filter::new().tags(&owner.filter())).await?;
            let trunk_list = if tagged.is_empty() {
                Vec::new()
            } else {
                trunks::list(&ctx.cloud, Filter::new()).await?
            };
            let trunk_list: Vec<_> = trunk_list.iter().map(convert::trunk).collect();
            let neutron: Vec<NeutronPort> = tagged.iter().map(convert::port).collect();
            let in_use = ctx.book.ports_in_use(&ctx.kuryrports);
            let found = rebuild(&neutron, &trunk_list, &in_use, &owner.tags()?, &defaults);
            for t in trunk_list.iter().filter(|t| {
                t.subports
                    .iter()
                    .any(|s| neutron.iter().any(|p| p.id == s.port_id))
            }) {
                ctx.trunks.learn(t);
            }
            for p in neutron {
                ctx.pools.remember(p);
            }
            for id in &found.orphans {
                warn!(
                    port = id,
                    "pool port attached nowhere (a refill or a release cut short): deleting"
                );
                if let Err(e) = ports::delete(&ctx.cloud, id).await {
                    warn!(
                        port = id,
                        error = &e as &dyn std::error::Error,
                        "orphan delete failed"
                    );
                }
                ctx.pools.forget_port(id);
            }
            let free: usize = found.pools.iter().map(|p| p.free_ports().count()).sum();
            info!(
                pools = found.pools.len(),
                free,
                orphans = found.orphans.len(),
                "pools rebuilt from Neutron"
            );
            ctx.pools.with(|pools| *pools = found.pools);
            publish(ctx);
            Ok::<_, Error>(())
        })
        .await?;
    Ok(())
}

/// A port from the pool of `target` for `pod`, with `sgs`; refills the pool when it is empty, or waits for
/// the creates in flight when they cover this pod.
pub async fn acquire(
    ctx: &Arc<Context>,
    pod: &PodFacts,
    driver: &(dyn VifDriver + Send + Sync),
    target: &Target,
    sgs: &BTreeSet<String>,
) -> Result<Vif> {
    ensure_rebuilt(ctx).await?;
    let defaults = default_sgs(ctx).await?;
    ctx.pools.set_target(target);
    let changes = ctx.pools.changes(&target.key);
    // However this ends (a port, an error, the reconcile dropped), the pod leaves the line.
    let in_line = InLine {
        ctx,
        key: &target.key,
        pod_uid: &pod.uid,
    };
    let began = std::time::Instant::now();
    let mut rounds = 0;
    while rounds < ACQUIRE_ROUNDS {
        // Listening before looking: a create that lands between the look and the wait still wakes us.
        let landed = changes.notified();
        tokio::pin!(landed);
        landed.as_mut().enable();
        if let Some(taken) = take(ctx, target, &pod.uid, sgs, &defaults) {
            spawn_top_up(ctx, target.clone());
            rounds += 1;
            let waited = began.elapsed();
            match hand_out(ctx, driver, target, taken).await? {
                Some(vif) => {
                    debug!(
                        waited_ms = waited.as_millis(),
                        hand_out_ms = (began.elapsed() - waited).as_millis(),
                        rounds,
                        active = vif.active,
                        "pool port handed out"
                    );
                    return Ok(vif);
                }
                None => continue,
            }
        }
        let reserved = reserve(ctx, target);
        if reserved > 0 {
            rounds += 1;
            let _refilling = in_line.refilling();
            refill(ctx, driver, target, reserved, &defaults).await?;
            continue;
        }
        // Covered by creates in flight: wait for them to land (or fail).
        if tokio::time::timeout(WAIT_FOR_CREATES, landed).await.is_err() {
            rounds += 1;
        }
    }
    Err(Error::PoolEmpty(format!("{:?}", target.key.parent)))
}

/// A pod in pool `key`'s line ([`kuryr_core::Pool::take`]) until dropped: then it leaves it (a no-op once
/// it took a port), and the pods behind it are woken, as a free port may now be theirs.
struct InLine<'a> {
    ctx: &'a Context,
    key: &'a PoolKey,
    pod_uid: &'a str,
}

impl InLine<'_> {
    /// The pod runs a refill of its own until the guard is dropped ([`kuryr_core::Pool::set_refilling`]):
    /// the ports that land meanwhile go to the pods behind it, who are woken as one may be theirs now.
    fn refilling(&self) -> Refilling<'_, '_> {
        self.set_refilling(true);
        self.ctx.pools.changed(self.key);
        Refilling(self)
    }

    fn set_refilling(&self, on: bool) {
        self.ctx.pools.with(|p| {
            p.get_mut(self.key)
                .map(|pool| pool.set_refilling(self.pod_uid, on))
        });
    }
}

impl Drop for InLine<'_> {
    fn drop(&mut self) {
        let left = self
            .ctx
            .pools
            .with(|p| p.get_mut(self.key).is_some_and(|pool| pool.forget(self.pod_uid)));
        if left {
            self.ctx.pools.changed(self.key);
        }
    }
}

/// See [`InLine::refilling`].
struct Refilling<'l, 'a>(&'l InLine<'a>);

impl Drop for Refilling<'_, '_> {
    fn drop(&mut self) {
        self.0.set_refilling(false);
    }
}

/// Takes on what pool `target`'s plan asks to create now ([`kuryr_core::Pool::reserve`]); nothing for a
/// pool that does not exist (a pod's `take` made its pool; a top-up never makes one).
fn reserve(ctx: &Context, target: &Target) -> u32 {
    let limits = ctx.config.pool_limits;
    let n = ctx
        .pools
        .with(|p| p.get_mut(&target.key).map_or(0, |pool| pool.reserve(limits)));
    if n > 0 {
        publish(ctx);
    }
    n
}

fn take(
    ctx: &Context,
    target: &Target,
    pod_uid: &str,
    sgs: &BTreeSet<String>,
    defaults: &BTreeSet<String>,
) -> Option<Taken> {
    let taken = ctx.pools.take(&target.key, defaults, pod_uid, sgs);
    publish(ctx);
    taken
}

/// A port taken from a pool for a pod, until the pod's status names it or it went back (or was deleted):
/// while it lives the loose-port scan leaves the port alone. The KuryrPort controller holds one from the
/// allocation to the end of the status write (or the undo after a failed one).
pub struct Lent {
    ctx: Arc<Context>,
    port_id: String,
}

impl Lent {
    pub fn new(ctx: &Arc<Context>, port_id: &str) -> Self {
        Self {
            ctx: ctx.clone(),
            port_id: port_id.to_owned(),
        }
    }
}

impl Drop for Lent {
    fn drop(&mut self) {
        self.ctx.pools.unmark(&self.port_id);
    }
}

/// Applies the pod's SGs (one update, only if they differ), else reads the port once (its status, and that
/// it is still there and attached). `None`: the port was gone or detached; it is dropped, take another.
async fn hand_out(
    ctx: &Context,
    driver: &(dyn VifDriver + Send + Sync),
    target: &Target,
    taken: Taken,
) -> Result<Option<Vif>> {
    let id = taken.port_id.clone();
    let fresh = match &taken.sg_update {
        Some(sgs) => {
            let list: Vec<String> = sgs.iter().cloned().collect();
            ports::set_security_groups(&ctx.cloud, &id, &list).await
        }
        None => ctx.port_reads.get(&id).await,
    };
    let port = match fresh {
        Ok(p) => p,
        Err(e) if e.is_not_found() => {
            warn!(port = id, "pool port vanished from Neutron; taking another");
            ctx.pools.forget_port(&id);
            return Ok(None);
        }
        Err(e) => {
            give_back(ctx, target, &id);
            return Err(e.into());
        }
    };
    let port = convert::port(&port);
    if let Some(missing) = target
        .subnets
        .iter()
        .find(|s| !port.fixed_ips.iter().any(|ip| ip.subnet_id == s.id))
    {
        // Made before the pool's subnets changed (dual-stack turned on): the pod would miss an address.
        warn!(
            port = id,
            subnet = missing.id,
            "pool port has no address on one of the pool's subnets; deleting it"
        );
        if let Some(parent) = target
            .parent
            .as_ref()
            .filter(|_| port.device_owner == SUBPORT_DEVICE_OWNER)
        {
            if let Err(e) = ctx.trunks.detach(&ctx.cloud, &parent.trunk_id, &id).await {
                warn!(port = id, error = &e as &dyn std::error::Error, "detach failed");
            }
        }
        if let Err(e) = ports::delete(&ctx.cloud, &id).await {
            warn!(port = id, error = &e as &dyn std::error::Error, "delete failed");
        }
        ctx.pools.forget_port(&id);
        return Ok(None);
    }
    ctx.pools.remember(port.clone());
    let attachment = match &target.parent {
        Some(parent) => {
            let vlan = if port.device_owner == SUBPORT_DEVICE_OWNER {
                match ctx.trunks.vlan_of(&ctx.cloud, &parent.trunk_id, &id).await {
                    Ok(v) => v,
                    Err(e) => {
                        give_back(ctx, target, &id);
                        return Err(e);
                    }
                }
            } else {
                None
            };
            let Some(vlan_id) = vlan else {
                warn!(
                    port = id,
                    trunk = parent.trunk_id,
                    "pool port is no subport; deleting it"
                );
                if let Err(e) = ports::delete(&ctx.cloud, &id).await {
                    warn!(port = id, error = &e as &dyn std::error::Error, "delete failed");
                }
                ctx.pools.forget_port(&id);
                return Ok(None);
            };
            Attachment::Vlan {
                trunk_id: parent.trunk_id.clone(),
                parent_port_id: parent.port_id.clone(),
                parent_mac: parent.mac.clone(),
                vlan_id,
            }
        }
        None => Attachment::Bridge,
    };
    match driver.vif(&port, &target.subnets, &attachment) {
        Ok(vif) => Ok(Some(vif)),
        Err(e) => {
            give_back(ctx, target, &id);
            Err(e.into())
        }
    }
}

/// A taken port goes back as it is (its SGs as Neutron last showed them).
pub fn give_back(ctx: &Context, target: &Target, port_id: &str) {
    let sgs = ctx
        .pools
        .detail(port_id)
        .map(|p| p.security_groups)
        .unwrap_or_default();
    ctx.pools.with(|p| {
        if let Some(pool) = p.get_mut(&target.key) {
            pool.add_free(port_id, sgs);
        }
    });
    ctx.pools.unmark(port_id);
    ctx.pools.changed(&target.key);
    publish(ctx);
}

/// A released port (`vif`) goes back to its pool: recorded so the next take needs no list.
pub fn returned(ctx: &Context, key: &PoolKey, vif: &Vif, sgs: BTreeSet<String>) {
    let mut port = ctx.pools.detail(&vif.port_id).unwrap_or_else(|| NeutronPort {
        id: vif.port_id.clone(),
        network_id: vif.network_id.clone(),
        mac_address: vif.mac.clone(),
        fixed_ips: vif
            .ips
            .iter()
            .map(|ip| kuryr_core::neutron::FixedIp {
                subnet_id: ip.subnet_id.clone().unwrap_or_default(),
                ip_address: ip.address.clone(),
            })
            .collect(),
        ..NeutronPort::default()
    });
    port.security_groups = sgs.clone();
    ctx.pools.remember(port);
    let defaults = ctx.pools.default_sgs.get().cloned().unwrap_or_default();
    ctx.pools
        .with(|p| p.entry(key.clone(), &defaults).add_free(&vif.port_id, sgs));
    ctx.pools.changed(key);
    publish(ctx);
}

/// Whether `port_id` was made for a pool (created by a refill, or listed with the pool tags at rebuild).
pub fn is_pool_port(ctx: &Context, port_id: &str) -> bool {
    ctx.pools.detail(port_id).is_some()
}

/// The pool's load now (for [`kuryr_core::kuryrport::release_plan`]).
pub fn pool_snapshot(ctx: &Context, key: &PoolKey) -> kuryr_core::Pool {
    let defaults = ctx.pools.default_sgs.get().cloned().unwrap_or_default();
    ctx.pools.with(|p| p.entry(key.clone(), &defaults).clone())
}

/// Creates the `reserved` ports, its batches at once: a surge of pods waiting on one node wants several
/// batches, and one after the other they made the last pod wait for every round trip (a 500-pod burst on 10
/// nodes: p99 14 s with the limiter off). The batches are independent bulk creates; their `add_subports`
/// calls reserve VLANs from the trunk's book, made for concurrent attaches. Partial success counts: the
/// ports made are handed out, the failure shows again on the next refill. Every reserved port ends up
/// created or failed, and the pool's waiters are woken either way.
async fn refill(
    ctx: &Context,
    driver: &(dyn VifDriver + Send + Sync),
    target: &Target,
    reserved: u32,
    defaults: &BTreeSet<String>,
) -> Result<u32> {
    let limits = ctx.config.pool_limits;
    let results = futures::future::join_all(
        batches(reserved, limits).map(|n| create_batch(ctx, driver, target, n, defaults)),
    )
    .await;
    let mut made = 0;
    let mut first_err = None;
    for r in results {
        match r {
            Ok(n) => made += n,
            Err(e) => {
                warn!(error = &e as &dyn std::error::Error, "a refill batch failed");
                first_err.get_or_insert(e);
            }
        }
    }
    match first_err {
        Some(e) if made == 0 => Err(e),
        _ => Ok(made),
    }
}

/// One reserved batch; when Neutron refuses it for want of addresses or quota, one port is tried alone (a
/// smaller batch may fit where the whole did not).
async fn create_batch(
    ctx: &Context,
    driver: &(dyn VifDriver + Send + Sync),
    target: &Target,
    n: u32,
    defaults: &BTreeSet<String>,
) -> Result<u32> {
    match create_batch_once(ctx, driver, target, n, defaults).await {
        Err(Error::OpenStack(e)) if n > 1 && (e.is_over_quota() || e.is_out_of_addresses()) => {
            warn!(batch = n, error = %e, "batch refused for want of addresses or quota; trying one port");
            ctx.pools.with(|p| {
                p.entry(target.key.clone(), defaults).begin_create(1);
            });
            create_batch_once(ctx, driver, target, 1, defaults).await
        }
        other => other,
    }
}

/// Creates `n` ports the pool counts as in flight already; settles them as created or failed.
async fn create_batch_once(
    ctx: &Context,
    driver: &(dyn VifDriver + Send + Sync),
    target: &Target,
    n: u32,
    defaults: &BTreeSet<String>,
) -> Result<u32> {
    // Counted in flight since the reserve: settled as created below, else as failed when this ends
    // early, however (an error, or the future dropped).
    let in_flight = InFlight {
        ctx,
        key: &target.key,
        n,
    };
    let tags: BTreeSet<String> = owner(ctx).tags()?.into_iter().collect();
    let host = super::node_vif::neutron_host(ctx, &target.node_name);
    let req = driver.port_request(PortParams {
        owner: PortOwner::Pool {
            node_name: &target.node_name,
        },
        subnets: &target.subnets,
        project_id: &ctx.project_id,
        security_groups: defaults,
        tags: &tags,
        neutron_host: host.as_deref(),
    });
    let body = convert::create_port(&req);
    let reqs = vec![body; n as usize];
    // Until the ports are in the pool (or rolled back), the loose-port scan must not take them.
    let _op = ctx.pools.op();
    let created = ports::bulk_create(&ctx.cloud, &reqs).await?;
    let ids: Vec<String> = created.iter().map(|p| p.id.clone()).collect();
    if let Some(parent) = &target.parent {
        if let Err(e) = ctx
            .trunks
            .attach_many(&ctx.cloud, &target.node_name, parent, &ids)
            .await
        {
            for id in &ids {
                if let Err(e) = ports::delete(&ctx.cloud, id).await {
                    warn!(
                        port = id,
                        error = &e as &dyn std::error::Error,
                        "refill rollback: delete failed"
                    );
                }
            }
            return Err(e);
        }
    }
    for p in &created {
        ctx.pools.remember(convert::port(p));
    }
    in_flight.landed(&ids);
    info!(node = target.node_name, ports = ids.len(), "pool refilled");
    Ok(u32::try_from(ids.len()).unwrap_or(u32::MAX))
}

/// `n` ports a pool counts as in flight, until [`InFlight::landed`] says which exist; dropped before
/// that, all `n` count as failed. Either way the pods waiting on the pool are woken.
struct InFlight<'a> {
    ctx: &'a Context,
    key: &'a PoolKey,
    n: u32,
}

impl InFlight<'_> {
    /// These ports exist (nested: and are subports); any others of the `n` will not come.
    fn landed(mut self, ids: &[String]) {
        let short = self
            .n
            .saturating_sub(u32::try_from(ids.len()).unwrap_or(u32::MAX));
        self.ctx.pools.with(|p| {
            if let Some(pool) = p.get_mut(self.key) {
                pool.created(ids);
                pool.create_failed(short);
            }
        });
        self.n = 0;
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        let n = self.n;
        if n > 0 {
            self.ctx.pools.with(|p| {
                if let Some(pool) = p.get_mut(self.key) {
                    pool.create_failed(n);
                }
            });
        }
        self.ctx.pools.changed(self.key);
        publish(self.ctx);
    }
}

/// Tops the pool up to its low watermark in the background: only what the creates in flight do not cover.
fn spawn_top_up(ctx: &Arc<Context>, target: Target) {
    let Ok(vif_type) = node_vif::of_node(ctx, &target.node_name) else {
        return;
    };
    let Some(driver) = kuryr_core::driver_for(vif_type, &ctx.config.driver) else {
        return;
    };
    let reserved = reserve(ctx, &target);
    if reserved == 0 {
        return;
    }
    let defaults = ctx.pools.default_sgs.get().cloned().unwrap_or_default();
    let ctx = ctx.clone();
    // The creates may cover pods waiting now: they keep the rank of the work that asked (a pod's), not that
    // of new work, which would wait behind every call begun before.
    let rank = kuryr_openstack::priority::rank();
    tokio::spawn(async move {
        let creates = refill(&ctx, driver.as_ref(), &target, reserved, &defaults);
        if let Err(e) = kuryr_openstack::work_started(rank, creates).await {
            warn!(
                node = target.node_name,
                error = &e as &dyn std::error::Error,
                "pool top-up failed"
            );
        }
    });
}

/// One round of pool upkeep: pools of nodes that are gone are drained (their free ports detached and
/// deleted); loose pool ports are adopted or deleted ([`sweep_loose`]); pools of networks that are gone
/// (a deleted namespace's) are forgotten once empty; every pool above its high watermark gives back the
/// excess (rebuilt ones too), and every pool below its low watermark whose node and subnet are known is
/// topped up (rebuilt ones too, without waiting for a pod). `live` are the parents of the nodes in the
/// (synced) node cache.
pub async fn maintain(ctx: &Arc<Context>, live: &BTreeSet<PoolParent>) -> Result<()> {
    ensure_rebuilt(ctx).await?;
    let drained = ctx.pools.with(|p| p.drain_dead_parents(live));
    for (key, ids) in drained {
        info!(parent = ?key.parent, ports = ids.len(), "node gone: draining its pool");
        delete_free(ctx, &key, &ids).await;
        if ctx.pools.with(|p| p.get(&key).is_none()) {
            ctx.pools.drop_target(&key);
        }
    }
    if let Err(e) = sweep_loose(ctx, live).await {
        warn!(error = &e as &dyn std::error::Error, "loose pool port scan");
    }
    forget_gone_networks(ctx).await;
    let limits = ctx.config.pool_limits;
    for key in ctx.pools.with(|p| p.keys()) {
        let excess = ctx.pools.with(|p| {
            p.get_mut(&key).map(|pool| {
                let plan = pool.plan(limits);
                pool.take_for_release(plan.release)
            })
        });
        if let Some(ids) = excess.filter(|ids| !ids.is_empty()) {
            info!(
                parent = ?key.parent,
                ports = ids.len(),
                "pool above its high watermark: releasing"
            );
            delete_free(ctx, &key, &ids).await;
        }
    }
    for key in ctx.pools.with(|p| p.keys()) {
        if let Some(target) = target_of(ctx, &key).await {
            spawn_top_up(ctx, target);
        }
    }
    publish(ctx);
    Ok(())
}

/// The loose-port scan of one upkeep round: ONE list of this cluster's pool ports (plus one trunk list when
/// some port is to be acted on). Free ports Neutron no longer has leave their pools; a port loose at two
/// scans, with no pool operation begun before the first of them still running, is adopted into its pool
/// or deleted ([`kuryr_core::pool::loose`]).
async fn sweep_loose(ctx: &Context, live: &BTreeSet<PoolParent>) -> Result<()> {
    let owner = owner(ctx);
    let scan = ctx.pools.begin_scan();
    let free_before = ctx.pools.with(|p| p.free_port_ids());
    let listed = ports::list(&ctx.cloud, Filter::new().tags(&owner.filter())).await?;
    let neutron: Vec<NeutronPort> = listed.iter().map(convert::port).collect();
    let vanished = ctx.pools.with(|p| p.forget_vanished(&free_before, &neutron));
    for id in &vanished {
        ctx.pools.forget_port(id);
    }
    if !vanished.is_empty() {
        info!(
            ports = vanished.len(),
            "free pool ports gone from Neutron or detached from their trunk: forgotten"
        );
    }
    let held = ctx.pools.held();
    let in_use = ctx.book.ports_in_use(&ctx.kuryrports);
    let now = Held {
        held: &held,
        in_use: &in_use,
        oldest_op: ctx.pools.oldest_op(),
    };
    let act = lock(&ctx.pools.loose).observe(scan, &neutron, &owner.tags()?, now);
    let suspects = lock(&ctx.pools.loose).suspects();
    if act.is_empty() {
        if suspects > 0 {
            info!(
                suspects,
                "pool ports seen loose once: confirming at the next round"
            );
        }
        return Ok(());
    }
    let trunk_list: Vec<_> = trunks::list(&ctx.cloud, Filter::new())
        .await?
        .iter()
        .map(convert::trunk)
        .collect();
    let loads = ctx.pools.with(|p| p.loads());
    let defaults = default_sgs(ctx).await?;
    for action in decide(&act, &trunk_list, live, &loads, ctx.config.pool_limits) {
        match action {
            LooseAction::Adopt {
                key,
                port_id,
                security_groups,
            } => {
                if let Some(p) = act.iter().find(|p| p.id == port_id) {
                    ctx.pools.remember(p.clone());
                }
                ctx.pools.with(|p| {
                    p.entry(key.clone(), &defaults)
                        .add_free(&port_id, security_groups)
                });
                ctx.pools.changed(&key);
                warn!(port = port_id, parent = ?key.parent, "loose pool port adopted into its pool");
            }
            LooseAction::Delete { port_id, trunk_id } => {
                let _op = ctx.pools.op();
                ctx.pools.mark_busy(std::slice::from_ref(&port_id));
                warn!(port = port_id, trunk = ?trunk_id, "loose pool port: deleting");
                let detached = match &trunk_id {
                    Some(t) => ctx.trunks.detach(&ctx.cloud, t, &port_id).await,
                    None => Ok(()),
                };
                let deleted = match detached {
                    Ok(()) => match ports::delete(&ctx.cloud, &port_id).await {
                        Err(e) if !e.is_not_found() => Err(Error::from(e)),
                        _ => Ok(()),
                    },
                    Err(e) => Err(e),
                };
                if let Err(e) = deleted {
                    // Seen again (loose) at the next rounds, and tried again.
                    warn!(
                        port = port_id,
                        error = &e as &dyn std::error::Error,
                        "loose port delete failed"
                    );
                }
                ctx.pools.forget_port(&port_id);
            }
        }
    }
    publish(ctx);
    Ok(())
}

/// Whether pools on `network_id` still have a subnet to be topped up on: always with the default subnet
/// driver; in namespace mode, the default pod network, a namespace network the KuryrNetwork controller
/// knows (a deleted namespace's is forgotten) or an extra network pods asked for.
async fn network_known(ctx: &Context, network_id: &str) -> bool {
    if ctx.config.networks.mode == SubnetMode::Default {
        return true;
    }
    if ctx.networks.subnets_on(network_id).is_some() || ctx.networks.additional_on(network_id).is_some() {
        return true;
    }
    match crate::networks::selector::default_subnets(ctx).await {
        Ok(s) => s.first().is_some_and(|s| s.network_id == network_id),
        // Unsure: keep it.
        Err(_) => true,
    }
}

/// Pools of networks that are gone (a deleted namespace's) stop being topped up, and are forgotten once
/// they hold nothing (their free ports went with the network: the scan saw them vanish).
async fn forget_gone_networks(ctx: &Context) {
    let mut gone = BTreeSet::new();
    for key in ctx.pools.with(|p| p.keys()) {
        if !network_known(ctx, &key.network_id).await {
            gone.insert(key);
        }
    }
    for key in gone.iter().filter(|k| ctx.pools.target(k).is_some()) {
        info!(parent = ?key.parent, network = key.network_id, "pool's network is gone: no more top-ups");
        ctx.pools.drop_target(key);
    }
    for key in ctx.pools.with(|p| p.drop_idle(|k| !gone.contains(k))) {
        info!(parent = ?key.parent, network = key.network_id, "empty pool of a gone network forgotten");
        ctx.pools.drop_target(&key);
    }
}

/// The pool's target: the one a pod set, else (a pool rebuilt after a restart) made from the node whose
/// trunk it is (or the host) and the subnet on its network, when both are known.
async fn target_of(ctx: &Context, key: &PoolKey) -> Option<Target> {
    if let Some(t) = ctx.pools.target(key) {
        return Some(t);
    }
    if !network_known(ctx, &key.network_id).await {
        return None;
    }
    let (node_name, parent) = match &key.parent {
        PoolParent::Trunk(trunk_id) => {
            let (node, parent) = ctx.trunks.node_of_trunk(trunk_id)?;
            (node, Some(parent))
        }
        PoolParent::Host(host) => (host.clone(), None),
    };
    let subnets = match ctx
        .networks
        .subnets_on(&key.network_id)
        .or_else(|| ctx.networks.additional_on(&key.network_id).map(|s| vec![s]))
    {
        Some(s) => s,
        None => crate::networks::selector::default_subnets(ctx)
            .await
            .ok()
            .filter(|s| s.first().is_some_and(|s| s.network_id == key.network_id))?,
    };
    let target = Target {
        key: key.clone(),
        node_name,
        parent,
        subnets,
    };
    ctx.pools.set_target(&target);
    Some(target)
}

/// Publishes every pool's load in the metrics.
fn publish(ctx: &Context) {
    ctx.pools.with(|p| ctx.metrics.pools(p));
}

/// Detaches (nested: one `remove_subports` for all) and deletes free ports taken out of a pool.
async fn delete_free(ctx: &Context, key: &PoolKey, ids: &[String]) {
    let _op = ctx.pools.op();
    ctx.pools.mark_busy(ids);
    if let PoolParent::Trunk(trunk_id) = &key.parent {
        if let Err(e) = ctx.trunks.detach_many(&ctx.cloud, trunk_id, ids).await {
            warn!(
                trunk = trunk_id,
                error = &e as &dyn std::error::Error,
                "remove_subports failed"
            );
        }
    }
    for id in ids {
        if let Err(e) = ports::delete(&ctx.cloud, id).await {
            warn!(
                port = id,
                error = &e as &dyn std::error::Error,
                "pool port delete failed"
            );
        }
        ctx.pools.forget_port(id);
    }
}
