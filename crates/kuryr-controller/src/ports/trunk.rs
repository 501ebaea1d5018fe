//! The node VMs' trunks (nested-vlan): each node's parent port and trunk, found from the Node's InternalIPs
//! and cached (a VM keeps its port for life), and the VLAN ids of each trunk's subports. The VLAN book of a
//! trunk is rebuilt from its subports on first use, so Neutron stays the truth; every path that does not end
//! in a committed subport releases its id. Every reconcile adds and removes subports here (the garbage
//! collector detaches the orphans it deletes on its own: it keeps no VLAN book).

use std::collections::{BTreeSet, HashMap};
use std::sync::{Mutex, MutexGuard};

use kuryr_api::Node;
use kuryr_core::neutron::{Subport, Trunk};
use kuryr_core::parent::{find_trunk_parent, internal_ips};
use kuryr_core::{VlanBook, VlanRange};
use kuryr_openstack::neutron::trunks::{self, SubPort};
use kuryr_openstack::neutron::{ports, Filter};
use kuryr_openstack::Cloud;
use tracing::{debug, info, warn};

use crate::errors::{Error, Result};
use crate::ports::attach_queue::{AttachQueues, Joined, Turn, Waiter};
use crate::toolkit::lock;
use kuryr_convert as convert;

/// `add_subports` tries per port: a 409 means another writer took the id; re-read the trunk and go again.
const ATTACH_TRIES: u32 = 3;

/// A node VM's own port and its trunk.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Parent {
    pub port_id: String,
    pub trunk_id: String,
    /// The port's MAC: recorded in each VIF so the node's CNI daemon finds the NIC by it.
    pub mac: String,
}

/// Parents per node and VLAN ids per trunk. Neither lock is held across an await.
pub struct Trunks {
    vlans: Mutex<VlanBook>,
    parents: Mutex<HashMap<String, Parent>>,
    /// Single-port attaches waiting for the call in flight to their trunk.
    queues: AttachQueues,
}

impl Trunks {
    pub fn new(range: VlanRange) -> Self {
        Self {
            vlans: Mutex::new(VlanBook::new(range)),
            parents: Mutex::default(),
            queues: AttachQueues::default(),
        }
    }

    fn book(&self) -> MutexGuard<'_, VlanBook> {
        lock(&self.vlans)
    }

    /// The cached parent of `node`'s pods.
    pub fn parent(&self, node: &str) -> Option<Parent> {
        lock(&self.parents).get(node).cloned()
    }

    /// The parent of `node` (its Node object from the watch cache): cached, else found by listing the ports
    /// that carry the node's InternalIPs (one filtered list per address, once per node).
    pub async fn parent_of(&self, cloud: &Cloud, node: &Node) -> Result<Parent> {
        let name = node.metadata.name.as_deref().unwrap_or_default();
        if let Some(p) = self.parent(name) {
            return Ok(p);
        }
        let mut candidates = Vec::new();
        for ip in internal_ips(node) {
            let found = ports::list(cloud, Filter::new().fixed_ip(ip)).await?;
            candidates.extend(found.iter().map(convert::port));
        }
        let (port, trunk_id) = find_trunk_parent(node, &candidates)?;
        let parent = Parent {
            port_id: port.id.clone(),
            trunk_id: trunk_id.to_owned(),
            mac: port.mac_address.clone(),
        };
        info!(
            node = name,
            port = parent.port_id,
            trunk = parent.trunk_id,
            mac = parent.mac,
            "node parent found"
        );
        lock(&self.parents).insert(name.to_owned(), parent.clone());
        Ok(parent)
    }

    /// The node whose cached parent has trunk `trunk_id`, with that parent.
    pub fn node_of_trunk(&self, trunk_id: &str) -> Option<(String, Parent)> {
        lock(&self.parents)
            .iter()
            .find(|(_, p)| p.trunk_id == trunk_id)
            .map(|(n, p)| (n.clone(), p.clone()))
    }

    /// The trunk went away: find the parent again next time and rebuild its VLANs from Neutron.
    pub fn forget_parent(&self, node: &str) {
        if let Some(p) = lock(&self.parents).remove(node) {
            self.book().forget(&p.trunk_id);
        }
    }

    /// Forgets the parents of nodes not in `nodes` (deleted nodes).
    pub fn forget_parents_except(&self, nodes: &BTreeSet<String>) {
        let gone: Vec<String> = lock(&self.parents)
            .keys()
            .filter(|n| !nodes.contains(*n))
            .cloned()
            .collect();
        for node in gone {
            self.forget_parent(&node);
        }
    }

    /// Builds the VLAN book of `trunk` from its subports, unless it is built already.
    pub fn learn(&self, trunk: &Trunk) {
        self.book().for_trunk(trunk);
    }

    /// Reserves a VLAN on the trunk and adds the port as subport; returns the committed id. While another
    /// call to the same trunk is in flight the port waits, then goes with every port that waited with it in
    /// one call ([`crate::ports::attach_queue`]).
    pub async fn attach(&self, cloud: &Cloud, node: &str, parent: &Parent, port_id: &str) -> Result<u16> {
        let trunk_id = parent.trunk_id.as_str();
        loop {
            let others = match self.queues.join(trunk_id, port_id) {
                Joined::Lead => Vec::new(),
                Joined::Wait(rx) => match rx.await {
                    Ok(Turn::Done(result)) => return result,
                    Ok(Turn::Lead(others)) => others,
                    // Its leader was cancelled holding this port's turn: queue again.
                    Err(_) => continue,
                },
            };
            let _turn = self.queues.turn(trunk_id);
            return self.attach_batch(cloud, node, parent, port_id, others).await;
        }
    }

    /// One call for `port_id` and the waiters' ports; each waiter is told its own outcome. Neutron takes a
    /// batch all or none, so when the batch fails each port is tried alone: one bad port fails only its pod.
    async fn attach_batch(
        &self,
        cloud: &Cloud,
        node: &str,
        parent: &Parent,
        port_id: &str,
        others: Vec<Waiter>,
    ) -> Result<u16> {
        if others.is_empty() {
            return self.attach_one(cloud, node, parent, port_id).await;
        }
        let ids: Vec<String> = std::iter::once(port_id.to_owned())
            .chain(others.iter().map(|w| w.port_id.clone()))
            .collect();
        debug!(
            trunk = parent.trunk_id,
            ports = ids.len(),
            "attaching waiting ports in one call"
        );
        match self.attach_many(cloud, node, parent, &ids).await {
            Ok(vlans) => {
                let mut vlans = vlans.into_iter().map(|(_, vlan)| vlan);
                let mine = vlans.next();
                for (w, vlan) in others.into_iter().zip(vlans) {
                    w.done(Ok(vlan));
                }
                mine.ok_or_else(|| Error::Unexpected("add_subports answered without the port".into()))
            }
            Err(e) => {
                warn!(trunk = parent.trunk_id, ports = ids.len(), error = %e, "batched add_subports failed; each port alone");
                for w in others {
                    let result = self.attach_one(cloud, node, parent, &w.port_id).await;
                    w.done(result);
                }
                self.attach_one(cloud, node, parent, port_id).await
            }
        }
    }

    async fn attach_one(&self, cloud: &Cloud, node: &str, parent: &Parent, port_id: &str) -> Result<u16> {
        let ids = [port_id.to_owned()];
        let vlans = self.attach_many(cloud, node, parent, &ids).await?;
        vlans
            .first()
            .map(|(_, vlan)| *vlan)
            .ok_or_else(|| Error::Unexpected("add_subports answered without the port".into()))
    }

    /// Reserves a VLAN per port and adds them all as subports in ONE `add_subports` (Neutron validates the
    /// whole batch before changing anything: all or none); returns (port, VLAN) in `port_ids` order. On a
    /// 409 the trunk is re-read: a lost answer (the ports are subports now) is a success; ids another writer
    /// took are reserved again; a 409 not about VLANs is returned. Every id is released on every failure.
    pub async fn attach_many(
        &self,
        cloud: &Cloud,
        node: &str,
        parent: &Parent,
        port_ids: &[String],
    ) -> Result<Vec<(String, u16)>> {
        let trunk_id = parent.trunk_id.as_str();
        let mut tries = 0;
        loop {
            tries += 1;
            let reserved = self.reserve_many(cloud, trunk_id, port_ids).await?;
            let body: Vec<SubPort> = reserved
                .iter()
                .map(|s| SubPort::vlan(&s.port_id, u32::from(s.segmentation_id)))
                .collect();
            match trunks::add_subports(cloud, trunk_id, &body).await {
                Ok(_) => {
                    if let Some(a) = self.book().get_mut(trunk_id) {
                        a.commit_many(port_ids.iter().map(String::as_str));
                    }
                    return Ok(reserved
                        .into_iter()
                        .map(|s| (s.port_id, s.segmentation_id))
                        .collect());
                }
                Err(e) if e.is_conflict() && tries < ATTACH_TRIES => {
                    warn!(trunk = trunk_id, ports = port_ids.len(), error = %e, "add_subports refused (409); re-reading the trunk");
                    let trunk = match trunks::get(cloud, trunk_id).await {
                        Ok(t) => convert::trunk(&t),
                        Err(e) => {
                            self.release_vlans(trunk_id, port_ids);
                            return Err(e.into());
                        }
                    };
                    let mut book = self.book();
                    let alloc = book.for_trunk(&trunk);
                    let displaced = alloc.resync(&trunk);
                    // The call went through after all (a lost answer): the ports are subports now.
                    let on_trunk: Option<Vec<(String, u16)>> = port_ids
                        .iter()
                        .map(|id| {
                            trunk
                                .subports
                                .iter()
                                .find(|s| &s.port_id == id)
                                .map(|s| (id.clone(), s.segmentation_id))
                        })
                        .collect();
                    if let Some(done) = on_trunk {
                        return Ok(done);
                    }
                    alloc.release_many(port_ids.iter().map(String::as_str));
                    // Our ids were free after all: the 409 is about a port (in use elsewhere), not the VLANs.
                    if !displaced.iter().any(|p| port_ids.contains(p)) {
                        return Err(e.into());
                    }
                }
                Err(e) => {
                    self.release_vlans(trunk_id, port_ids);
                    if e.is_not_found() {
                        // The trunk is gone (VM recreated?): find the node's parent again next time.
                        self.forget_parent(node);
                    }
                    return Err(e.into());
                }
            }
        }
    }

    /// The allocator of `trunk_id` (built from the trunk's subports on first use) reserves an id per port.
    async fn reserve_many(&self, cloud: &Cloud, trunk_id: &str, port_ids: &[String]) -> Result<Vec<Subport>> {
        if let Some(a) = self.book().get_mut(trunk_id) {
            return Ok(a.reserve_many(port_ids)?);
        }
        let trunk = convert::trunk(&trunks::get(cloud, trunk_id).await?);
        Ok(self.book().for_trunk(&trunk).reserve_many(port_ids)?)
    }

    /// The VLAN `port_id` holds on `trunk_id`, reading the trunk when its allocator is not built yet.
    pub async fn vlan_of(&self, cloud: &Cloud, trunk_id: &str, port_id: &str) -> Result<Option<u16>> {
        if let Some(id) = self.book().get_mut(trunk_id).and_then(|a| a.vlan_of(port_id)) {
            return Ok(Some(id));
        }
        let trunk = convert::trunk(&trunks::get(cloud, trunk_id).await?);
        let mut book = self.book();
        let alloc = book.for_trunk(&trunk);
        alloc.resync(&trunk);
        Ok(alloc.vlan_of(port_id))
    }

    fn release_vlans(&self, trunk_id: &str, port_ids: &[String]) {
        if let Some(a) = self.book().get_mut(trunk_id) {
            a.release_many(port_ids.iter().map(String::as_str));
        }
    }

    /// Removes the subports in one call (404: not subports any more) and releases their VLANs.
    pub async fn detach_many(&self, cloud: &Cloud, trunk_id: &str, port_ids: &[String]) -> Result<()> {
        match trunks::remove_subports(cloud, trunk_id, port_ids).await {
            Ok(_) => {}
            Err(e) if e.is_not_found() => {}
            Err(e) => return Err(e.into()),
        }
        self.release_vlans(trunk_id, port_ids);
        Ok(())
    }

    /// Removes the subport (404: not one any more) and releases its VLAN.
    pub async fn detach(&self, cloud: &Cloud, trunk_id: &str, port_id: &str) -> Result<()> {
        self.detach_many(cloud, trunk_id, &[port_id.to_owned()]).await
    }

    /// Removes each of `port_ids` from whichever trunk holds it. ML2/OVN leaves a subport's device_id
    /// empty, so the trunks are listed to find them (one list for all).
    pub async fn detach_anywhere(&self, cloud: &Cloud, port_ids: &[&str]) -> Result<()> {
        if port_ids.is_empty() {
            return Ok(());
        }
        for trunk in trunks::list(cloud, Filter::new()).await? {
            for s in trunk
                .sub_ports
                .iter()
                .filter(|s| port_ids.contains(&s.port_id.as_str()))
            {
                self.detach(cloud, &trunk.id, &s.port_id).await?;
            }
        }
        Ok(())
    }
}
