//! Warm port pools: ports created ahead of pods so a pod start does not wait for a Neutron create (and,
//! nested, an `add_subports`).
//!
//! One pool per (trunk or host, network, project). Upstream also keyed pools by the pod's security-group set,
//! which split every node's pool into as many pools as there were policy combinations; here a port's SGs are
//! set when a pod takes it (one port update, only if they differ) and reset when it comes back. The pool
//! remembers each free port's current SGs, so a port whose SGs already fit is preferred and costs no update.
//!
//! The pool holds no cloud handle: the controller asks it what to do ([`Pool::plan`], [`Pool::take`],
//! [`Pool::on_release`]), does it, and reports back ([`Pool::created`], [`Pool::create_failed`],
//! [`Pool::add_free`]). After a restart, [`rebuild`] recovers pools from the tagged ports Neutron lists.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use crate::neutron::{NeutronPort, Trunk, DEVICE_OWNER, SUBPORT_DEVICE_OWNER};
use crate::pool_sizing::{self, PoolLimits, PoolLoad, PoolPlan};

pub mod loose;

/// What a pool's ports hang off.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PoolParent {
    /// nested-vlan: the node VM's trunk (pool ports are already subports with their VLAN).
    Trunk(String),
    /// neutron-vif: the host the ports are bound to (`binding:host_id`).
    Host(String),
}

/// Identity of a pool.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PoolKey {
    pub parent: PoolParent,
    pub network_id: String,
    pub project_id: String,
}

/// A port ready to hand out, with the SGs it has in Neutron right now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FreePort {
    pub port_id: String,
    pub security_groups: BTreeSet<String>,
}

/// A port handed to a pod.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Taken {
    pub port_id: String,
    /// The SGs to set on the port before the pod uses it; `None` when it has them already.
    pub sg_update: Option<BTreeSet<String>>,
}

/// What to do with a port a pod gave back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReleaseDecision {
    /// Keep it: set these SGs first when `Some` (the pool's defaults), then [`Pool::add_free`].
    Recycle { sg_reset: Option<BTreeSet<String>> },
    /// The pool is full: delete the port (nested: remove the subport and release its VLAN first).
    Delete,
}

/// One pool.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pool {
    key: PoolKey,
    default_sgs: BTreeSet<String>,
    /// Oldest first: handing out the oldest spreads wear and lets new ones settle (OVN subports go ACTIVE).
    free: VecDeque<FreePort>,
    in_flight: u32,
    /// Pods (by UID) that asked and found no port for them, in the order they first asked: the surge demand
    /// of the next plan, and the order the ports that land are handed out in.
    waiting: VecDeque<String>,
    /// Waiting pods running a refill of their own: they keep their place, but the ports that land
    /// meanwhile go to the pods behind them (a pod awaiting its refill is not there to take one).
    refilling: BTreeSet<String>,
}

impl Pool {
    pub fn new(key: PoolKey, default_sgs: BTreeSet<String>) -> Self {
        Self {
            key,
            default_sgs,
            free: VecDeque::new(),
            in_flight: 0,
            waiting: VecDeque::new(),
            refilling: BTreeSet::new(),
        }
    }

    pub fn key(&self) -> &PoolKey {
        &self.key
    }

    pub fn default_sgs(&self) -> &BTreeSet<String> {
        &self.default_sgs
    }

    pub fn free_ports(&self) -> impl Iterator<Item = &FreePort> {
        self.free.iter()
    }

    pub fn load(&self) -> PoolLoad {
        PoolLoad {
            free: count(self.free.len()),
            in_flight: self.in_flight,
            pending: count(self.waiting.len()),
        }
    }

    /// The sizing decision; see [`pool_sizing::plan`].
    pub fn plan(&self, limits: PoolLimits) -> PoolPlan {
        pool_sizing::plan(self.load(), limits)
    }

    /// A port for pod `pod_uid` that must have SGs `sgs`. Prefers a free port that already has them; else
    /// the oldest, with the update to make. `None` when no port is this pod's to take: the pod is then
    /// counted as waiting until it takes a port or is [forgotten](Pool::forget).
    ///
    /// First come, first served: the free ports are for the pods waiting longest, and a pod that asks while
    /// others wait queues behind them. Otherwise a burst's newest pods take each batch that lands before its
    /// oldest, woken by it, get there (500 pods: the oldest waited up to 2.5x the median). Pods running a
    /// refill of their own ([`Pool::set_refilling`]) are not counted ahead.
    pub fn take(&mut self, pod_uid: &str, sgs: &BTreeSet<String>) -> Option<Taken> {
        let queued = self.waiting.iter().position(|w| w == pod_uid);
        let ahead = self
            .waiting
            .iter()
            .take(queued.unwrap_or(self.waiting.len()))
            .filter(|w| !self.refilling.contains(*w))
            .count();
        if ahead >= self.free.len() {
            if queued.is_none() {
                self.waiting.push_back(pod_uid.to_owned());
            }
            return None;
        }
        let at = self
            .free
            .iter()
            .position(|p| &p.security_groups == sgs)
            .unwrap_or(0);
        let port = self.free.remove(at)?;
        if let Some(i) = queued {
            self.waiting.remove(i);
        }
        let sg_update = (&port.security_groups != sgs).then(|| sgs.clone());
        Some(Taken {
            port_id: port.port_id,
            sg_update,
        })
    }

    /// The pod went away before it got a port; whether it was waiting (those behind it move up).
    pub fn forget(&mut self, pod_uid: &str) -> bool {
        self.refilling.remove(pod_uid);
        let before = self.waiting.len();
        self.waiting.retain(|w| w != pod_uid);
        self.waiting.len() < before
    }

    /// Waiting pod `pod_uid` runs a refill of its own (`true`) or is back to take (`false`); see
    /// [`Pool::take`]. A pod not waiting is not marked.
    pub fn set_refilling(&mut self, pod_uid: &str, refilling: bool) {
        if !refilling {
            self.refilling.remove(pod_uid);
        } else if self.waiting.iter().any(|w| w == pod_uid) {
            self.refilling.insert(pod_uid.to_owned());
        }
    }

    /// Whether a port coming back from a pod (with SGs `current_sgs`) is kept or deleted.
    pub fn on_release(&self, current_sgs: &BTreeSet<String>, limits: PoolLimits) -> ReleaseDecision {
        if !pool_sizing::keep_released_port(self.load(), limits) {
            return ReleaseDecision::Delete;
        }
        let sg_reset = (current_sgs != &self.default_sgs).then(|| self.default_sgs.clone());
        ReleaseDecision::Recycle { sg_reset }
    }

    /// A port is ready to hand out (recycled, or found at rebuild) with these SGs.
    pub fn add_free(&mut self, port_id: &str, security_groups: BTreeSet<String>) {
        if !self.free.iter().any(|p| p.port_id == port_id) {
            self.free.push_back(FreePort {
                port_id: port_id.to_owned(),
                security_groups,
            });
        }
    }

    /// Takes on the creates the plan asks for now (they count as in flight from this moment) and says how many:
    /// a refill asked for while another is under way covers only the demand that one does not, so refills of
    /// one pool run side by side instead of each waiting for the last.
    pub fn reserve(&mut self, limits: PoolLimits) -> u32 {
        let n = self.plan(limits).create;
        self.begin_create(n);
        n
    }

    /// `n` ports are being created (one bulk create per batch).
    pub fn begin_create(&mut self, n: u32) {
        self.in_flight = self.in_flight.saturating_add(n);
    }

    /// A batch landed: these ports exist (nested: and are subports) with the pool's default SGs.
    pub fn created(&mut self, port_ids: &[String]) {
        self.in_flight = self.in_flight.saturating_sub(count(port_ids.len()));
        for id in port_ids {
            let sgs = self.default_sgs.clone();
            self.add_free(id, sgs);
        }
    }

    /// `n` of the in-flight ports will not come (the caller deleted whatever was half made).
    pub fn create_failed(&mut self, n: u32) {
        self.in_flight = self.in_flight.saturating_sub(n);
    }

    /// Takes `n` free ports out to give back, newest first (the oldest are the ones surely ACTIVE).
    pub fn take_for_release(&mut self, n: u32) -> Vec<String> {
        let n = (n as usize).min(self.free.len());
        self.free
            .split_off(self.free.len() - n)
            .into_iter()
            .map(|p| p.port_id)
            .collect()
    }

    /// Takes every free port out, e.g. because the pool's node is gone.
    pub fn drain(&mut self) -> Vec<String> {
        self.free.drain(..).map(|p| p.port_id).collect()
    }
}

fn count(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// Every pool of the controller.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Pools {
    pools: BTreeMap<PoolKey, Pool>,
}

impl Pools {
    /// The pool of `key`, created with `default_sgs` on first use.
    pub fn entry(&mut self, key: PoolKey, default_sgs: &BTreeSet<String>) -> &mut Pool {
        self.pools
            .entry(key.clone())
            .or_insert_with(|| Pool::new(key, default_sgs.clone()))
    }

    pub fn get(&self, key: &PoolKey) -> Option<&Pool> {
        self.pools.get(key)
    }

    pub fn get_mut(&mut self, key: &PoolKey) -> Option<&mut Pool> {
        self.pools.get_mut(key)
    }

    pub fn iter(&self) -> impl Iterator<Item = &Pool> {
        self.pools.values()
    }

    pub fn len(&self) -> usize {
        self.pools.len()
    }

    pub fn is_empty(&self) -> bool {
        self.pools.is_empty()
    }

    /// The pool holding free port `port_id`, if any.
    pub fn pool_of_free_port(&self, port_id: &str) -> Option<&PoolKey> {
        self.pools
            .values()
            .find(|p| p.free.iter().any(|f| f.port_id == port_id))
            .map(|p| &p.key)
    }

    /// The ids of every free port of every pool.
    pub fn free_port_ids(&self) -> BTreeSet<String> {
        self.pools
            .values()
            .flat_map(|p| p.free.iter().map(|f| f.port_id.clone()))
            .collect()
    }

    /// Every pool's load, by key.
    pub fn loads(&self) -> BTreeMap<PoolKey, PoolLoad> {
        self.pools.iter().map(|(k, p)| (k.clone(), p.load())).collect()
    }

    /// Every pool's key.
    pub fn keys(&self) -> Vec<PoolKey> {
        self.pools.keys().cloned().collect()
    }

    /// Free ports that were free before a port list began (`before`) and that the list (`listed`) does not
    /// show are gone from Neutron (deleted with their namespace's network, or by hand); those it shows no
    /// longer a subport while in a trunk's pool were detached (a detach a killed controller process sent,
    /// landing after the port was given back). Both leave their pools, so no pod is handed a port that is
    /// not there or not wired; a detached one is then loose, for the loose-port scan. Returns them.
    pub fn forget_vanished(&mut self, before: &BTreeSet<String>, listed: &[NeutronPort]) -> Vec<String> {
        let shown: BTreeMap<&str, &NeutronPort> = listed.iter().map(|p| (p.id.as_str(), p)).collect();
        let mut gone = Vec::new();
        for (key, pool) in self.pools.iter_mut() {
            let on_trunk = matches!(key.parent, PoolParent::Trunk(_));
            pool.free.retain(|f| {
                let unfit = match shown.get(f.port_id.as_str()) {
                    None => true,
                    Some(p) => on_trunk && p.device_owner != SUBPORT_DEVICE_OWNER,
                };
                let leaves = unfit && before.contains(&f.port_id);
                if leaves {
                    gone.push(f.port_id.clone());
                }
                !leaves
            });
        }
        gone
    }

    /// Removes the pools that hold nothing (no free port, no create in flight, no pod waiting) and that
    /// `keep` does not keep (e.g. the network of a deleted namespace); returns their keys.
    pub fn drop_idle(&mut self, keep: impl Fn(&PoolKey) -> bool) -> Vec<PoolKey> {
        let idle: Vec<PoolKey> = self
            .pools
            .iter()
            .filter(|(k, p)| p.free.is_empty() && p.in_flight == 0 && p.waiting.is_empty() && !keep(k))
            .map(|(k, _)| k.clone())
            .collect();
        for k in &idle {
            self.pools.remove(k);
        }
        idle
    }

    /// Removes the pools whose trunk or host is not in `live` (deleted nodes) and returns their free ports,
    /// which the caller deletes. Pools with creates in flight stay until those land.
    pub fn drain_dead_parents(&mut self, live: &BTreeSet<PoolParent>) -> Vec<(PoolKey, Vec<String>)> {
        let dead: Vec<PoolKey> = self
            .pools
            .keys()
            .filter(|k| !live.contains(&k.parent))
            .cloned()
            .collect();
        let mut out = Vec::new();
        for key in dead {
            if let Some(pool) = self.pools.get_mut(&key) {
                let ports = pool.drain();
                pool.waiting.clear();
                if pool.in_flight == 0 {
                    self.pools.remove(&key);
                }
                if !ports.is_empty() {
                    out.push((key, ports));
                }
            }
        }
        out
    }
}

/// Pools recovered from Neutron after a restart.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Rebuilt {
    pub pools: Pools,
    /// Kuryr's ports that are neither in use nor attached anywhere (a nested port whose `add_subports`
    /// never happened): the caller deletes them.
    pub orphans: Vec<String>,
}

/// Subport id → id of the trunk carrying it.
pub(crate) fn trunk_of_subports(trunks: &[Trunk]) -> BTreeMap<&str, &str> {
    trunks
        .iter()
        .flat_map(|t| {
            t.subports
                .iter()
                .map(move |s| (s.port_id.as_str(), t.id.as_str()))
        })
        .collect()
}

/// Rebuilds the pools from what Neutron lists. A port is a free pool port when Kuryr made it
/// (`device_owner` compute:kuryr — or trunk:subport, which Neutron sets once it is a subport, or none, which
/// Neutron leaves once it is removed from its trunk — and every one of `ownership_tags`) and no KuryrPort
/// status names it
/// (`in_use`, which must come from a synced KuryrPort cache). It belongs to the pool of the trunk it is a
/// subport of, else of the host it is bound to. New pools get `default_sgs`.
pub fn rebuild(
    ports: &[NeutronPort],
    trunks: &[Trunk],
    in_use: &BTreeSet<String>,
    ownership_tags: &[String],
    default_sgs: &BTreeSet<String>,
) -> Rebuilt {
    let trunk_of = trunk_of_subports(trunks);
    let mut out = Rebuilt::default();
    for port in ports {
        // A released port detached from its trunk whose delete never came (a crash in between) has no
        // device_owner left: still ours by its tags, and an orphan unless bound to a host.
        let ours = port.device_owner == DEVICE_OWNER
            || port.device_owner == SUBPORT_DEVICE_OWNER
            || port.device_owner.is_empty();
        if !ours || !port.has_tags(ownership_tags) || in_use.contains(&port.id) {
            continue;
        }
        let parent = match trunk_of.get(port.id.as_str()) {
            Some(trunk) => PoolParent::Trunk((*trunk).to_owned()),
            None if !port.binding_host_id.is_empty() => PoolParent::Host(port.binding_host_id.clone()),
            None => {
                out.orphans.push(port.id.clone());
                continue;
            }
        };
        let key = PoolKey {
            parent,
            network_id: port.network_id.clone(),
            project_id: port.project_id.clone(),
        };
        out.pools
            .entry(key, default_sgs)
            .add_free(&port.id, port.security_groups.clone());
    }
    out
}

#[cfg(test)]
mod tests;
