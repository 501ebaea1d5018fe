//! nested-macvlan, cloud side, in the layout that works on modern ML2/OVN: the pod keeps a normal Neutron
//! port (its IP and SGs; unbound, it stays DOWN), and the node VM's port gets the allowed address pair
//! {pod IP, a VRRP MAC unique on the network}; the pod's macvlan device uses that VRRP MAC. (ML2/OVN refuses
//! a foreign MAC in address pairs unless it is a VRRP one, so upstream's layout — the pod port's own MAC
//! in the pair — fails there.)
//!
//! The VM port's pairs are replaced with `If-Match: revision_number=N`: a concurrent writer makes it 412,
//! and the port is read again and the change planned again, so no writer loses another's pair. Within this
//! controller the writes to one VM port are also serialized: Neutron 29's revision check is not atomic with
//! the update, and two pairings of one port in flight at once were both accepted on the lab's ML2/OVN — the
//! database kept both pairs, OVN's port security only the second, and the first pod was cut off.

use std::sync::Arc;

use kuryr_api::Vif;
use kuryr_core::neutron::{NeutronPort, PortStatus, Subnet};
use kuryr_core::parent::{find_vm_port, internal_ips};
use kuryr_core::vif::{Attachment, PodFacts};
use kuryr_core::vrrp::{
    add_pair, drop_stale_pairs, remove_pair, vrrp_paired_ips, AddressPairsUpdate, VrrpMacs,
};
use kuryr_core::{NestedMacvlan, VifDriver};
use kuryr_openstack::neutron::ports::{self, AddressPair};
use kuryr_openstack::neutron::Filter;
use tracing::{info, warn};

use crate::context::Context;
use crate::errors::{Error, Result};
pub use crate::ports::macvlan_state::MacvlanState;
use crate::ports::podport;
use crate::toolkit::lock;
use kuryr_convert as convert;

/// Read-modify-write rounds of the VM port's pairs before giving up for this reconcile.
const PAIR_TRIES: u32 = 5;

/// The lock a writer of `vm_port_id`'s address pairs holds from its read to its write.
fn writer_of(ctx: &Context, vm_port_id: &str) -> Arc<tokio::sync::Mutex<()>> {
    lock(&ctx.macvlan.writers)
        .entry(vm_port_id.to_owned())
        .or_default()
        .clone()
}

/// The node VM's own port (the one holding the Node's InternalIP), cached per node.
pub async fn vm_port_of(ctx: &Context, node_name: &str) -> Result<String> {
    if let Some(id) = lock(&ctx.macvlan.vm_ports).get(node_name) {
        return Ok(id.clone());
    }
    let node = ctx
        .node(node_name)
        .ok_or_else(|| Error::NodeNotFound(node_name.to_owned()))?;
    let mut candidates = Vec::new();
    for ip in internal_ips(&node) {
        let found = ports::list(&ctx.cloud, Filter::new().fixed_ip(ip)).await?;
        candidates.extend(found.iter().map(convert::port));
    }
    let id = find_vm_port(&node, &candidates)?.id.clone();
    lock(&ctx.macvlan.vm_ports).insert(node_name.to_owned(), id.clone());
    Ok(id)
}

/// The VRRP MAC book of `network_id`, rebuilt from the address pairs of the network's ports when unknown.
async fn ensure_book(ctx: &Context, network_id: &str) -> Result<()> {
    if lock(&ctx.macvlan.macs).contains_key(network_id) {
        return Ok(());
    }
    let on_net = ports::list(&ctx.cloud, Filter::new().eq("network_id", network_id)).await?;
    let on_net: Vec<NeutronPort> = on_net.iter().map(convert::port).collect();
    lock(&ctx.macvlan.macs)
        .entry(network_id.to_owned())
        .or_insert_with(|| VrrpMacs::from_ports(network_id, &on_net));
    Ok(())
}

/// Creates the pod's port and pairs its IP with a VRRP MAC on the VM's port. The VIF is active once the VM
/// port is (the pod port itself stays DOWN in this layout). On failure the port is deleted, the MAC freed.
/// One address per pod: the VM port's pairs give each IP a VRRP MAC of its own, so a dual-stack pod (two
/// IPs behind one macvlan MAC) cannot be paired; callers pass the primary subnet only (docs/dual-stack.md).
pub async fn allocate(ctx: &Context, facts: &PodFacts, subnets: &[Subnet]) -> Result<Vif> {
    let driver = NestedMacvlan {
        link_iface: ctx.config.driver.link_iface.clone(),
    };
    let vm_port_id = vm_port_of(ctx, &facts.node_name).await?;
    // Unbound: the VM's port carries the pod's address.
    let port = podport::create(ctx, &driver, facts, subnets, None).await?;
    let Some(ip) = port.ip().map(str::to_owned) else {
        podport::delete_quietly(ctx, &port.id).await;
        return Err(Error::Unexpected(
            "the pod port was created without a fixed IP".into(),
        ));
    };
    let (mac, vm) = match pair(ctx, &vm_port_id, &port.network_id, &ip).await {
        Ok(done) => done,
        Err(e) => {
            podport::delete_quietly(ctx, &port.id).await;
            return Err(e);
        }
    };
    let attachment = Attachment::Macvlan {
        parent_port_id: vm_port_id.clone(),
        // From the read `pair` just made: the node's CNI daemon finds the VM's NIC by this MAC.
        parent_mac: vm.mac_address.clone(),
        vrrp_mac: mac.clone(),
    };
    let mut vif = match driver.vif(&convert::port(&port), subnets, &attachment) {
        Ok(v) => v,
        Err(e) => {
            release(ctx, &vm_port_id, &port.network_id, &ip).await.ok();
            podport::delete_quietly(ctx, &port.id).await;
            return Err(e.into());
        }
    };
    vif.active = vm_port_up(&vm);
    info!(
        port = port.id,
        ip,
        mac,
        vm_port = vm_port_id,
        "pod IP paired on the VM port"
    );
    Ok(vif)
}

/// Whether the node VM's port carries the VM's traffic, and so its pods': administratively up and bound to a
/// host. Neutron's `status` is not asked when the binding is visible: on ML2/OVN it is a copy of OVN's
/// `Logical_Switch_Port.up`, written by neutron-server's OVSDB event thread, and every update of the port's
/// address pairs (each nested-macvlan pod that comes or goes) can leave it DOWN for as long as that thread
/// is behind — minutes on a busy Neutron — while OVN has the port up and it passes traffic
/// (docs/pod-networking.md, "nested-macvlan on ML2/OVN"). Without the binding fields (a non-admin
/// credential sees none, per Neutron's default policy) the status is all there is.
pub fn vm_port_up(vm: &ports::Port) -> bool {
    if !vm.admin_state_up {
        return false;
    }
    match vm.binding_vif_type.as_str() {
        "" => PortStatus::parse(&vm.status).is_active(),
        "unbound" | "binding_failed" => false,
        _ => !vm.binding_host_id.is_empty(),
    }
}

/// Adds {ip, VRRP MAC} to the VM port's pairs (read, plan, write If-Match; again on 412).
async fn pair(ctx: &Context, vm_port_id: &str, network_id: &str, ip: &str) -> Result<(String, ports::Port)> {
    let writer = writer_of(ctx, vm_port_id);
    let _one_writer = writer.lock().await;
    for _ in 0..PAIR_TRIES {
        // Learnt again when a failed write (here or in a pairing of another VM port) dropped it meanwhile.
        ensure_book(ctx, network_id).await?;
        let raw = ports::get(&ctx.cloud, vm_port_id).await?;
        let vm = convert::port(&raw);
        let mac = {
            let mut books = lock(&ctx.macvlan.macs);
            let book = books
                .get_mut(network_id)
                .ok_or_else(|| Error::Unexpected("VRRP MAC book of the network not built".into()))?;
            book.allocate(ip)?
        };
        let taken_here = vm.allowed_address_pairs.iter().any(|p| {
            p.ip_address != ip
                && p.mac_address
                    .as_deref()
                    .is_some_and(|m| m.eq_ignore_ascii_case(&mac))
        });
        if taken_here {
            // Another writer of the network's pairs (a second controller, an operator) gave this MAC to
            // another IP on this very port: the book is stale. Learn the network again and plan again.
            warn!(
                vm_port = vm_port_id,
                mac, "VRRP MAC already paired with another IP on the VM port; relearning the network"
            );
            lock(&ctx.macvlan.macs).remove(network_id);
            continue;
        }
        let Some(update) = add_pair(&vm, ip, &mac) else {
            return Ok((mac, raw));
        };
        match write(ctx, &update).await {
            Ok(p) => return Ok((mac, p)),
            Err(e) if e.status() == Some(412) => {
                warn!(
                    vm_port = vm_port_id,
                    "VM port changed under us (412); reading it again"
                );
            }
            Err(e) => {
                // The MAC may be taken by a writer we do not know of: learn the network again next time.
                lock(&ctx.macvlan.macs).remove(network_id);
                return Err(e.into());
            }
        }
    }
    if let Some(book) = lock(&ctx.macvlan.macs).get_mut(network_id) {
        book.release(ip);
    }
    Err(Error::Contended(format!(
        "allowed address pairs of port {vm_port_id}"
    )))
}

/// Removes every pair of `ip` from the VM port (If-Match, again on 412) and frees its MAC. A VM port that
/// is gone has no pairs left to remove.
pub async fn release(ctx: &Context, vm_port_id: &str, network_id: &str, ip: &str) -> Result<()> {
    let writer = writer_of(ctx, vm_port_id);
    let _one_writer = writer.lock().await;
    for _ in 0..PAIR_TRIES {
        let vm = match ports::get(&ctx.cloud, vm_port_id).await {
            Ok(p) => convert::port(&p),
            Err(e) if e.is_not_found() => break,
            Err(e) => return Err(e.into()),
        };
        let Some(update) = remove_pair(&vm, ip) else {
            break;
        };
        match write(ctx, &update).await {
            Ok(_) => break,
            Err(e) if e.status() == Some(412) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    if let Some(book) = lock(&ctx.macvlan.macs).get_mut(network_id) {
        book.release(ip);
    }
    Ok(())
}

/// Drops the pairs of VM port `vm_port_id` whose pod port is gone ([`drop_stale_pairs`]) and frees their
/// MACs; returns the IPs dropped. Under the port's writer lock, so no pairing of this controller is half
/// done meanwhile; a concurrent outside writer (412) leaves the leftovers to the next sweep.
pub async fn sweep_stale_pairs(ctx: &Context, vm_port_id: &str) -> Result<Vec<String>> {
    let writer = writer_of(ctx, vm_port_id);
    let _one_writer = writer.lock().await;
    let vm = convert::port(&ports::get(&ctx.cloud, vm_port_id).await?);
    let paired = vrrp_paired_ips(&vm);
    if paired.is_empty() {
        return Ok(Vec::new());
    }
    // One list: Neutron ORs repeated `fixed_ips=ip_address=` filters.
    let filter = paired
        .iter()
        .fold(Filter::new().eq("network_id", &vm.network_id), |f, ip| {
            f.fixed_ip(ip)
        });
    let held = ports::list(&ctx.cloud, filter)
        .await?
        .iter()
        .filter(|p| p.id != vm.id)
        .flat_map(|p| p.fixed_ips.iter().map(|f| f.ip_address.clone()))
        .filter(|ip| paired.contains(ip))
        .collect();
    let Some((update, dropped)) = drop_stale_pairs(&vm, &held) else {
        return Ok(Vec::new());
    };
    match write(ctx, &update).await {
        Ok(_) => {}
        Err(e) if e.status() == Some(412) => return Ok(Vec::new()),
        Err(e) => return Err(e.into()),
    }
    if let Some(book) = lock(&ctx.macvlan.macs).get_mut(&vm.network_id) {
        for ip in &dropped {
            book.release(ip);
        }
    }
    warn!(vm_port = vm_port_id, ips = ?dropped, "dropped address pairs whose pod port is gone");
    Ok(dropped)
}

async fn write(ctx: &Context, up: &AddressPairsUpdate) -> kuryr_openstack::Result<ports::Port> {
    let pairs: Vec<AddressPair> = up
        .pairs
        .iter()
        .map(|p| AddressPair {
            ip_address: p.ip_address.clone(),
            mac_address: p.mac_address.clone(),
        })
        .collect();
    ports::set_address_pairs_if_revision(&ctx.cloud, &up.port_id, &pairs, up.if_match_revision).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vm(status: &str, vif_type: &str, host: &str) -> ports::Port {
        ports::Port {
            status: status.into(),
            admin_state_up: true,
            binding_vif_type: vif_type.into(),
            binding_host_id: host.into(),
            ..ports::Port::default()
        }
    }

    #[test]
    fn a_bound_vm_port_is_up_whatever_its_neutron_status_says() {
        assert!(vm_port_up(&vm("ACTIVE", "ovs", "hv1")));
        // ML2/OVN's stale copy of OVN's `up` after an address-pair update.
        assert!(vm_port_up(&vm("DOWN", "ovs", "hv1")));
    }

    #[test]
    fn an_unbound_or_disabled_vm_port_is_not_up() {
        assert!(!vm_port_up(&vm("ACTIVE", "unbound", "")));
        assert!(!vm_port_up(&vm("DOWN", "binding_failed", "hv1")));
        assert!(!vm_port_up(&vm("DOWN", "ovs", "")));
        let mut off = vm("ACTIVE", "ovs", "hv1");
        off.admin_state_up = false;
        assert!(!vm_port_up(&off));
    }

    #[test]
    fn without_the_binding_fields_the_status_decides() {
        assert!(vm_port_up(&vm("ACTIVE", "", "")));
        assert!(!vm_port_up(&vm("DOWN", "", "")));
    }
}
