//! Loose pool ports, found while the controller runs.
//!
//! A pool port is *loose* when Neutron lists it with the pool's ownership tags but no pool in memory holds
//! it, no KuryrPort status names it and no operation of the controller has it in hand (taken by a pod
//! whose status is not written yet, landing from a create, being deleted). A bulk create that outlived its
//! caller leaves such ports: the controller killed while the create was in flight (the cloud finishes it
//! anyway, possibly after the next start's [`super::rebuild`]), or a lost answer the client retried.
//! [`super::rebuild`] adopts what it finds at start; this finds the rest while running.
//!
//! The upkeep scans every round ([`LooseBook::observe`]: one tag-filtered port list for the whole
//! cluster). A port is acted on only when
//! - it was loose at an earlier scan too, and is loose now, and
//! - no pool operation that began before that earlier scan is still running (`oldest_op`): a refill whose
//!   create was carried out but whose answer is still on its way would add the port to its pool, so
//!   stealing it would hand one port out twice; once every operation older than the first sighting has
//!   ended, whatever it made is in a pool, in a status, or truly loose.
//!
//! Then [`decide`] adopts it into its pool when it is usable (a subport of a live node's trunk, or bound to
//! a live host for neutron-vif) and the pool has room under its high watermark; else it is deleted
//! (detached first when it is a subport).

use std::collections::{BTreeMap, BTreeSet};

use crate::neutron::{NeutronPort, PortStatus, Trunk, DEVICE_OWNER, SUBPORT_DEVICE_OWNER};
use crate::pool::{PoolKey, PoolParent};
use crate::pool_sizing::{keep_released_port, PoolLimits, PoolLoad};

/// What the controller has in memory when a scan's list came back.
#[derive(Clone, Copy, Debug)]
pub struct Held<'a> {
    /// Ports a pool holds (free) or an operation has in hand.
    pub held: &'a BTreeSet<String>,
    /// Ports a KuryrPort status names (the synced cache plus statuses written it has not shown yet).
    pub in_use: &'a BTreeSet<String>,
    /// The scan number current when the oldest pool operation still running began (`None`: none runs).
    /// Scan numbers grow by one at the start of every scan, before its list.
    pub oldest_op: Option<u64>,
}

/// Loose ports seen so far, by the scan that first saw them loose.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LooseBook {
    first_seen: BTreeMap<String, u64>,
}

impl LooseBook {
    /// Records scan `scan` (listed after the scan began, `held` read after the list) and returns the ports
    /// to act on now, forgetting them (a port whose action fails is seen again as a new suspect).
    /// `ownership_tags` are the pool's; ports without them, or not made by Kuryr, are not looked at.
    pub fn observe(
        &mut self,
        scan: u64,
        listed: &[NeutronPort],
        ownership_tags: &[String],
        now: Held<'_>,
    ) -> Vec<NeutronPort> {
        let loose: BTreeMap<&str, &NeutronPort> = listed
            .iter()
            .filter(|p| is_ours(p, ownership_tags))
            .filter(|p| !now.held.contains(&p.id) && !now.in_use.contains(&p.id))
            .map(|p| (p.id.as_str(), p))
            .collect();
        // Anything not loose now (taken, adopted, deleted) starts again from scratch next time.
        self.first_seen.retain(|id, _| loose.contains_key(id.as_str()));
        let mut act = Vec::new();
        for (id, port) in loose {
            let first = *self.first_seen.entry(id.to_owned()).or_insert(scan);
            let settled = now.oldest_op.is_none_or(|op| op > first);
            if first < scan && settled {
                self.first_seen.remove(id);
                act.push(port.clone());
            }
        }
        act
    }

    /// Ports seen loose once, waiting for a confirming scan.
    pub fn suspects(&self) -> usize {
        self.first_seen.len()
    }
}

/// Kuryr made it (the same test as [`super::rebuild`]) and it carries every pool ownership tag.
fn is_ours(port: &NeutronPort, ownership_tags: &[String]) -> bool {
    let made_by_us = port.device_owner == DEVICE_OWNER
        || port.device_owner == SUBPORT_DEVICE_OWNER
        || port.device_owner.is_empty();
    made_by_us && port.has_tags(ownership_tags)
}

/// What to do with one loose port.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LooseAction {
    /// Put it in this pool's free list, with the SGs it has.
    Adopt {
        key: PoolKey,
        port_id: String,
        security_groups: BTreeSet<String>,
    },
    /// Delete it; remove it from `trunk_id` first when it is a subport there.
    Delete {
        port_id: String,
        trunk_id: Option<String>,
    },
}

/// Decides each of `ports` (from [`LooseBook::observe`]): adopted into the pool of the trunk it is a
/// subport of (or the host it is bound to) when that node is `live`, the port usable and the pool below
/// its high watermark (`loads` are the pools' loads now, a pool not in it counts as empty; adoptions count
/// as they are decided), else deleted.
pub fn decide(
    ports: &[NeutronPort],
    trunks: &[Trunk],
    live: &BTreeSet<PoolParent>,
    loads: &BTreeMap<PoolKey, PoolLoad>,
    limits: PoolLimits,
) -> Vec<LooseAction> {
    let trunk_of = crate::pool::trunk_of_subports(trunks);
    let mut loads = loads.clone();
    let mut out = Vec::new();
    for port in ports {
        let trunk = trunk_of.get(port.id.as_str()).map(|t| (*t).to_owned());
        let (parent, usable) = match &trunk {
            Some(t) => (
                Some(PoolParent::Trunk(t.clone())),
                port.device_owner == SUBPORT_DEVICE_OWNER,
            ),
            None if !port.binding_host_id.is_empty() => (
                Some(PoolParent::Host(port.binding_host_id.clone())),
                port.device_owner == DEVICE_OWNER,
            ),
            None => (None, false),
        };
        let usable = usable && port.status != PortStatus::Error;
        let key = parent
            .filter(|p| usable && live.contains(p))
            .map(|parent| PoolKey {
                parent,
                network_id: port.network_id.clone(),
                project_id: port.project_id.clone(),
            });
        if let Some(key) = key {
            let load = loads.entry(key.clone()).or_default();
            if keep_released_port(*load, limits) {
                load.free = load.free.saturating_add(1);
                out.push(LooseAction::Adopt {
                    key,
                    port_id: port.id.clone(),
                    security_groups: port.security_groups.clone(),
                });
                continue;
            }
        }
        out.push(LooseAction::Delete {
            port_id: port.id.clone(),
            trunk_id: trunk,
        });
    }
    out
}

#[cfg(test)]
mod tests;
