//! What the controller keeps of its warm pools (see [`crate::ports::pool`]): the pools, Neutron's view of
//! their ports, one refill lock per pool and each pool's target.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

use kuryr_core::neutron::{NeutronPort, Subnet};
use kuryr_core::pool::PoolKey;
use kuryr_core::Pools;
use tokio::sync::OnceCell;

use crate::ports::trunk::Parent;
use crate::toolkit::lock;

/// What a pool's port is created for and attached to.
#[derive(Clone, Debug)]
pub struct Target {
    pub key: PoolKey,
    pub node_name: String,
    /// nested-vlan: the trunk the ports become subports of; `None` for neutron-vif (bound to the host).
    pub parent: Option<Parent>,
    pub subnet: Subnet,
}

/// The pools and what the controller knows of their ports.
#[derive(Default)]
pub struct PoolState {
    pub(super) pools: Mutex<Pools>,
    /// Neutron's view of each pool port (MAC, IPs, SGs), so taking one needs no list.
    pub(super) details: Mutex<HashMap<String, NeutronPort>>,
    /// One refill at a time per pool.
    pub(super) refills: Mutex<HashMap<PoolKey, Arc<tokio::sync::Mutex<()>>>>,
    /// Target of each pool (for top-ups and drains without a pod at hand).
    pub(super) targets: Mutex<BTreeMap<PoolKey, Target>>,
    pub(super) rebuilt: OnceCell<()>,
    pub(super) default_sgs: OnceCell<BTreeSet<String>>,
}

impl PoolState {
    pub fn with<R>(&self, f: impl FnOnce(&mut Pools) -> R) -> R {
        f(&mut lock(&self.pools))
    }

    pub(super) fn refill_lock(&self, key: &PoolKey) -> Arc<tokio::sync::Mutex<()>> {
        lock(&self.refills).entry(key.clone()).or_default().clone()
    }

    pub(super) fn detail(&self, port_id: &str) -> Option<NeutronPort> {
        lock(&self.details).get(port_id).cloned()
    }

    pub(super) fn remember(&self, port: NeutronPort) {
        lock(&self.details).insert(port.id.clone(), port);
    }

    pub(super) fn forget_port(&self, port_id: &str) {
        lock(&self.details).remove(port_id);
    }

    pub fn targets(&self) -> Vec<Target> {
        lock(&self.targets).values().cloned().collect()
    }

    pub(super) fn set_target(&self, target: &Target) {
        lock(&self.targets).insert(target.key.clone(), target.clone());
    }

    pub(super) fn drop_target(&self, key: &PoolKey) {
        lock(&self.targets).remove(key);
        lock(&self.refills).remove(key);
    }
}
