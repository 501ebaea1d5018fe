//! What the controller keeps of its warm pools (see [`crate::ports::pool`]): the pools, Neutron's view of
//! their ports, one change signal per pool and each pool's target, and what the loose-port scan needs: the
//! ports an operation has in hand, the operations running and the loose ports seen.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use kuryr_core::neutron::{NeutronPort, Subnet};
use kuryr_core::pool::loose::LooseBook;
use kuryr_core::pool::{PoolKey, Taken};
use kuryr_core::Pools;
use tokio::sync::{Notify, OnceCell};

use crate::ports::trunk::Parent;
use crate::toolkit::lock;

/// What a pool's port is created for and attached to.
#[derive(Clone, Debug)]
pub struct Target {
    pub key: PoolKey,
    pub node_name: String,
    /// nested-vlan: the trunk the ports become subports of; `None` for neutron-vif (bound to the host).
    pub parent: Option<Parent>,
    /// The pool's subnets: one, or one of each IP family (dual-stack), as its ports are made on.
    pub subnets: Vec<Subnet>,
}

/// The pools and what the controller knows of their ports.
#[derive(Default)]
pub struct PoolState {
    pub(super) pools: Mutex<Pools>,
    /// Neutron's view of each pool port (MAC, IPs, SGs), so taking one needs no list.
    pub(super) details: Mutex<HashMap<String, NeutronPort>>,
    /// Per pool: signalled when creates land or fail, for the pods waiting on ports in flight.
    pub(super) changes: Mutex<HashMap<PoolKey, Arc<Notify>>>,
    /// Target of each pool (for top-ups and drains without a pod at hand).
    pub(super) targets: Mutex<BTreeMap<PoolKey, Target>>,
    pub(super) rebuilt: OnceCell<()>,
    pub(super) default_sgs: OnceCell<BTreeSet<String>>,
    /// The `default` group of each namespace project (ports made outside the controller's project).
    pub(super) project_default_sgs: Mutex<HashMap<String, BTreeSet<String>>>,
    /// Ports out of their pool that an operation has in hand: taken for a pod whose status is not written
    /// yet, or being deleted. Locked before `pools` where both are held.
    busy: Mutex<BTreeSet<String>>,
    /// Pool operations running (refills, deletes): id → the scan number current when each began.
    ops: Mutex<BTreeMap<u64, u64>>,
    next_op: AtomicU64,
    /// Loose-port scans begun so far.
    scans: AtomicU64,
    pub(super) loose: Mutex<LooseBook>,
}

/// A pool operation running; it ends when this is dropped.
pub struct Op<'a> {
    state: &'a PoolState,
    id: u64,
}

impl Drop for Op<'_> {
    fn drop(&mut self) {
        lock(&self.state.ops).remove(&self.id);
    }
}

impl PoolState {
    pub fn with<R>(&self, f: impl FnOnce(&mut Pools) -> R) -> R {
        f(&mut lock(&self.pools))
    }

    /// The signal of pool `key`'s creates landing or failing.
    pub(super) fn changes(&self, key: &PoolKey) -> Arc<Notify> {
        lock(&self.changes).entry(key.clone()).or_default().clone()
    }

    /// Wakes every pod waiting on pool `key`'s creates in flight.
    pub(super) fn changed(&self, key: &PoolKey) {
        if let Some(n) = lock(&self.changes).get(key) {
            n.notify_waiters();
        }
    }

    pub(super) fn detail(&self, port_id: &str) -> Option<NeutronPort> {
        lock(&self.details).get(port_id).cloned()
    }

    pub(super) fn remember(&self, port: NeutronPort) {
        lock(&self.details).insert(port.id.clone(), port);
    }

    pub(super) fn forget_port(&self, port_id: &str) {
        lock(&self.details).remove(port_id);
        lock(&self.busy).remove(port_id);
    }

    /// A port of pool `key` for a pod ([`kuryr_core::Pool::take`]), marked busy in the same step so that
    /// it is never out of the pool and unmarked at once.
    pub(super) fn take(
        &self,
        key: &PoolKey,
        defaults: &BTreeSet<String>,
        pod_uid: &str,
        sgs: &BTreeSet<String>,
    ) -> Option<Taken> {
        let mut busy = lock(&self.busy);
        let taken = lock(&self.pools).entry(key.clone(), defaults).take(pod_uid, sgs);
        if let Some(t) = &taken {
            busy.insert(t.port_id.clone());
        }
        taken
    }

    /// Ports an operation has in hand now (also while taken out of their pool to be deleted).
    pub(super) fn mark_busy(&self, port_ids: &[String]) {
        lock(&self.busy).extend(port_ids.iter().cloned());
    }

    /// The port is in a pool again, named by a written status, or gone.
    pub(super) fn unmark(&self, port_id: &str) {
        lock(&self.busy).remove(port_id);
    }

    /// Every port a pool holds or an operation has in hand, read at one instant.
    pub(super) fn held(&self) -> BTreeSet<String> {
        let busy = lock(&self.busy);
        let mut held = lock(&self.pools).free_port_ids();
        held.extend(busy.iter().cloned());
        held
    }

    /// A pool operation begins (its ports are not loose until it ends).
    pub(super) fn op(&self) -> Op<'_> {
        let id = self.next_op.fetch_add(1, Ordering::Relaxed);
        let scan = self.scans.load(Ordering::SeqCst);
        lock(&self.ops).insert(id, scan);
        Op { state: self, id }
    }

    /// A loose-port scan begins: its number.
    pub(super) fn begin_scan(&self) -> u64 {
        self.scans.fetch_add(1, Ordering::SeqCst) + 1
    }

    /// The scan number current when the oldest running operation began.
    pub(super) fn oldest_op(&self) -> Option<u64> {
        lock(&self.ops).values().min().copied()
    }

    pub(super) fn target(&self, key: &PoolKey) -> Option<Target> {
        lock(&self.targets).get(key).cloned()
    }

    pub fn targets(&self) -> Vec<Target> {
        lock(&self.targets).values().cloned().collect()
    }

    pub(super) fn set_target(&self, target: &Target) {
        lock(&self.targets).insert(target.key.clone(), target.clone());
    }

    pub(super) fn drop_target(&self, key: &PoolKey) {
        lock(&self.targets).remove(key);
        lock(&self.changes).remove(key);
    }
}
