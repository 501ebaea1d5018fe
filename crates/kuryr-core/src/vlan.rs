//! VLAN ids of one trunk's subports.
//!
//! Upstream kept the ids it handed out in a process-global set: lost on restart, shared across trunks, never
//! released when a bulk create failed. Here the trunk's subports in Neutron are the truth: an allocator is
//! built from them ([`VlanAllocator::from_trunk`]), and after a restart or a leader change the new leader
//! simply builds it again. On top of the truth it keeps *reservations* for ids sent in an `add_subports`
//! whose answer is not in yet, so such an id is not handed out twice; the caller commits or releases every
//! reservation on every path. Ids are picked lowest-free-first, so two replicas looking at the same trunk
//! pick the same ids, and a 409 ("segmentation id in use") is repaired by [`VlanAllocator::resync`].

use std::collections::BTreeMap;

use crate::error::CoreError;
use crate::neutron::{Subport, Trunk};

/// Lowest and highest VLAN id 802.1Q allows on a trunk.
pub const VLAN_MIN: u16 = 1;
pub const VLAN_MAX: u16 = 4094;

/// The VLAN ids Kuryr may hand out on a trunk (a sub-range lets operators keep ids for other uses).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VlanRange {
    first: u16,
    last: u16,
}

impl Default for VlanRange {
    fn default() -> Self {
        Self {
            first: VLAN_MIN,
            last: VLAN_MAX,
        }
    }
}

impl VlanRange {
    pub fn new(first: u16, last: u16) -> Result<Self, CoreError> {
        if first < VLAN_MIN || last > VLAN_MAX || first > last {
            return Err(CoreError::InvalidVlanRange { first, last });
        }
        Ok(Self { first, last })
    }

    pub fn first(&self) -> u16 {
        self.first
    }

    pub fn last(&self) -> u16 {
        self.last
    }

    pub fn contains(&self, id: u16) -> bool {
        (self.first..=self.last).contains(&id)
    }

    pub fn len(&self) -> usize {
        usize::from(self.last - self.first) + 1
    }

    pub fn is_empty(&self) -> bool {
        false
    }
}

/// VLAN ids of one trunk: the committed ones (subports Neutron has) and the reserved ones (in flight).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VlanAllocator {
    trunk_id: String,
    range: VlanRange,
    /// id → subport port id, as Neutron has (or, after a commit, will show) it.
    committed: BTreeMap<u16, String>,
    /// id → port id whose `add_subports` is in flight.
    reserved: BTreeMap<u16, String>,
}

impl VlanAllocator {
    /// Builds the allocator from the trunk's subports. Subports outside `range` still block their id: they
    /// may belong to someone else.
    pub fn from_trunk(trunk: &Trunk, range: VlanRange) -> Self {
        Self {
            trunk_id: trunk.id.clone(),
            range,
            committed: subports_by_id(trunk),
            reserved: BTreeMap::new(),
        }
    }

    pub fn trunk_id(&self) -> &str {
        &self.trunk_id
    }

    pub fn range(&self) -> VlanRange {
        self.range
    }

    /// Reserves the lowest free id for `port_id`. Asking again for a port that already holds an id (reserved
    /// or committed) returns that id, so a retried reconcile does not leak one.
    pub fn reserve(&mut self, port_id: &str) -> Result<u16, CoreError> {
        if let Some(id) = self.vlan_of(port_id) {
            return Ok(id);
        }
        let id = self.lowest_free().ok_or_else(|| self.exhausted())?;
        self.reserved.insert(id, port_id.to_owned());
        Ok(id)
    }

    /// Reserves ids for a whole batch (one `add_subports` call): all of them or, when the range runs out,
    /// none (reservations made by this call are undone).
    pub fn reserve_many(&mut self, port_ids: &[String]) -> Result<Vec<Subport>, CoreError> {
        let before = self.reserved.clone();
        let mut out = Vec::with_capacity(port_ids.len());
        for port_id in port_ids {
            match self.reserve(port_id) {
                Ok(segmentation_id) => out.push(Subport {
                    port_id: port_id.clone(),
                    segmentation_id,
                }),
                Err(e) => {
                    self.reserved = before;
                    return Err(e);
                }
            }
        }
        Ok(out)
    }

    /// `add_subports` succeeded for `port_id`: its reserved id becomes committed. Returns the id, or `None`
    /// when the port held no reservation (already committed ids stay as they are).
    pub fn commit(&mut self, port_id: &str) -> Option<u16> {
        let id = find(&self.reserved, port_id)?;
        self.reserved.remove(&id);
        self.committed.insert(id, port_id.to_owned());
        Some(id)
    }

    /// Commits every port of a batch whose `add_subports` succeeded.
    pub fn commit_many<'a>(&mut self, port_ids: impl IntoIterator<Item = &'a str>) {
        for port_id in port_ids {
            self.commit(port_id);
        }
    }

    /// Releases every port of a batch whose `add_subports` failed (or whose ports were never created).
    pub fn release_many<'a>(&mut self, port_ids: impl IntoIterator<Item = &'a str>) {
        for port_id in port_ids {
            self.release(port_id);
        }
    }

    /// Frees the id `port_id` holds: a failed `add_subports` (reserved) or a done `remove_subports`
    /// (committed). Returns the freed id.
    pub fn release(&mut self, port_id: &str) -> Option<u16> {
        if let Some(id) = find(&self.reserved, port_id) {
            self.reserved.remove(&id);
            return Some(id);
        }
        let id = find(&self.committed, port_id)?;
        self.committed.remove(&id);
        Some(id)
    }

    /// Re-reads the truth after a conflict (409) or a periodic check: committed ids become exactly the
    /// trunk's subports. A reservation whose port now shows on the trunk is committed (the call went through
    /// after all); one whose id the trunk gives to another port is dropped, and its port returned so the
    /// caller reserves again.
    pub fn resync(&mut self, trunk: &Trunk) -> Vec<String> {
        self.committed = subports_by_id(trunk);
        let mut displaced = Vec::new();
        let reserved = std::mem::take(&mut self.reserved);
        for (id, port_id) in reserved {
            if find(&self.committed, &port_id).is_some() {
                continue;
            }
            if self.committed.contains_key(&id) {
                displaced.push(port_id);
            } else {
                self.reserved.insert(id, port_id);
            }
        }
        displaced
    }

    /// The id `port_id` holds, reserved or committed.
    pub fn vlan_of(&self, port_id: &str) -> Option<u16> {
        find(&self.reserved, port_id).or_else(|| find(&self.committed, port_id))
    }

    /// The committed ids as subports, in id order: what the trunk should show.
    pub fn committed(&self) -> Vec<Subport> {
        self.committed
            .iter()
            .map(|(id, port_id)| Subport {
                port_id: port_id.clone(),
                segmentation_id: *id,
            })
            .collect()
    }

    /// The in-flight reservations as subports, in id order.
    pub fn reserved(&self) -> Vec<Subport> {
        self.reserved
            .iter()
            .map(|(id, port_id)| Subport {
                port_id: port_id.clone(),
                segmentation_id: *id,
            })
            .collect()
    }

    /// Ids of the range still free to hand out.
    pub fn free_count(&self) -> usize {
        let used = |m: &BTreeMap<u16, String>| m.keys().filter(|id| self.range.contains(**id)).count();
        self.range.len() - used(&self.committed) - used(&self.reserved)
    }

    fn lowest_free(&self) -> Option<u16> {
        (self.range.first..=self.range.last)
            .find(|id| !self.committed.contains_key(id) && !self.reserved.contains_key(id))
    }

    fn exhausted(&self) -> CoreError {
        CoreError::VlanRangeExhausted {
            trunk_id: self.trunk_id.clone(),
            first: self.range.first,
            last: self.range.last,
        }
    }
}

/// The allocators of every trunk the controller works with, each built from its trunk on first use.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct VlanBook {
    range: VlanRange,
    trunks: BTreeMap<String, VlanAllocator>,
}

impl VlanBook {
    pub fn new(range: VlanRange) -> Self {
        Self {
            range,
            trunks: BTreeMap::new(),
        }
    }

    /// The allocator of `trunk`, built from its subports if this is the first time it is needed (after a
    /// restart or leader change, that is every trunk).
    pub fn for_trunk(&mut self, trunk: &Trunk) -> &mut VlanAllocator {
        let range = self.range;
        self.trunks
            .entry(trunk.id.clone())
            .or_insert_with(|| VlanAllocator::from_trunk(trunk, range))
    }

    /// The allocator of a trunk already known.
    pub fn get_mut(&mut self, trunk_id: &str) -> Option<&mut VlanAllocator> {
        self.trunks.get_mut(trunk_id)
    }

    /// Forgets a trunk (its node is gone, or to force a rebuild from Neutron on next use).
    pub fn forget(&mut self, trunk_id: &str) -> Option<VlanAllocator> {
        self.trunks.remove(trunk_id)
    }
}

fn subports_by_id(trunk: &Trunk) -> BTreeMap<u16, String> {
    trunk
        .subports
        .iter()
        .map(|s| (s.segmentation_id, s.port_id.clone()))
        .collect()
}

fn find(map: &BTreeMap<u16, String>, port_id: &str) -> Option<u16> {
    map.iter().find(|(_, p)| p.as_str() == port_id).map(|(id, _)| *id)
}

#[cfg(test)]
mod tests;
