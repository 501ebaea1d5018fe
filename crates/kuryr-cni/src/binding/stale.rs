//! Leftovers from sandboxes the runtime never cleaned up (upstream ce9bac5b): a VLAN child with the same tag,
//! or a macvlan child with the same MAC, of the same parent NIC, sitting in another (stale) namespace. The
//! kernel then refuses the new device (EEXIST / EADDRINUSE) and ADD would fail forever. The tag and the VRRP
//! MAC are allocated to exactly one port, so a same-parent child carrying them can only be stale.

use std::path::Path;

use futures::TryStreamExt;
use rtnetlink::packet_route::link::{InfoData, InfoKind, InfoVlan, LinkAttribute, LinkInfo, LinkMessage};
use tracing::{info, warn};

use super::{link, BindError, Netns};

/// What identifies the leftover among the parent's children.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StaleMatch {
    Vlan(u16),
    Mac(Vec<u8>),
}

/// A child of `parent` (an ifindex in another namespace, hence the link-netnsid) matching `what`.
pub fn is_stale_child(m: &LinkMessage, parent: u32, what: &StaleMatch) -> bool {
    let attrs = &m.attributes;
    let foreign_parent = attrs.contains(&LinkAttribute::Link(parent))
        && attrs.iter().any(|a| matches!(a, LinkAttribute::LinkNetNsId(_)));
    if !foreign_parent {
        return false;
    }
    let infos = attrs.iter().find_map(|a| match a {
        LinkAttribute::LinkInfo(i) => Some(i.as_slice()),
        _ => None,
    });
    match what {
        // Only macvlans: a VM's own veth also has a foreign-namespace parent.
        StaleMatch::Mac(mac) => {
            attrs.contains(&LinkAttribute::Address(mac.clone()))
                && infos.is_some_and(|i| i.contains(&LinkInfo::Kind(InfoKind::MacVlan)))
        }
        StaleMatch::Vlan(id) => infos.is_some_and(|i| {
            i.iter()
                .any(|x| matches!(x, LinkInfo::Data(InfoData::Vlan(v)) if v.contains(&InfoVlan::Id(*id))))
        }),
    }
}

/// Deletes matching children in every namespace under `netns_dir` (the runtimes' `/var/run/netns`).
/// Returns how many were removed. Unreadable namespaces are skipped with a warning.
pub async fn remove_stale_children(
    netns_dir: &Path,
    parent: u32,
    what: &StaleMatch,
) -> Result<usize, BindError> {
    let Ok(entries) = std::fs::read_dir(netns_dir) else {
        return Ok(0);
    };
    let mut removed = 0;
    for entry in entries.flatten() {
        let path = entry.path();
        let ns = match Netns::open(&path) {
            Ok(ns) => ns,
            Err(e) => {
                warn!(error = %e, "skipping namespace while looking for stale interfaces");
                continue;
            }
        };
        let h = match ns.connect().await {
            Ok(h) => h,
            Err(e) => {
                warn!(error = %e, "skipping namespace while looking for stale interfaces");
                continue;
            }
        };
        let links: Vec<LinkMessage> = match h.link().get().execute().try_collect().await {
            Ok(l) => l,
            Err(e) => {
                warn!(netns = %path.display(), error = %e, "cannot list links");
                continue;
            }
        };
        for m in links.iter().filter(|m| is_stale_child(m, parent, what)) {
            let name = m
                .attributes
                .iter()
                .find_map(|a| match a {
                    LinkAttribute::IfName(n) => Some(n.clone()),
                    _ => None,
                })
                .unwrap_or_default();
            info!(netns = %path.display(), ifname = %name, ?what, "removing stale interface in the way of ADD");
            if link::delete_by_name(&h, &name).await? {
                removed += 1;
            }
        }
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use rtnetlink::LinkUnspec;

    use super::*;

    fn child(parent: u32, netnsid: bool, vlan: Option<u16>, mac: &[u8]) -> LinkMessage {
        let mut m = LinkUnspec::new_with_name("eth0")
            .link(parent)
            .address(mac.to_vec())
            .build();
        if netnsid {
            m.attributes.push(LinkAttribute::LinkNetNsId(0));
        }
        let info = match vlan {
            Some(id) => vec![
                LinkInfo::Kind(InfoKind::Vlan),
                LinkInfo::Data(InfoData::Vlan(vec![InfoVlan::Id(id)])),
            ],
            None => vec![LinkInfo::Kind(InfoKind::MacVlan)],
        };
        m.attributes.push(LinkAttribute::LinkInfo(info));
        m
    }

    #[test]
    fn a_veth_with_the_same_mac_is_not_taken_for_a_stale_macvlan() {
        let mac = vec![0, 0, 0x5e, 0, 1, 9];
        let mut veth = LinkUnspec::new_with_name("eth0")
            .link(4)
            .address(mac.clone())
            .build();
        veth.attributes.push(LinkAttribute::LinkNetNsId(0));
        veth.attributes
            .push(LinkAttribute::LinkInfo(vec![LinkInfo::Kind(InfoKind::Veth)]));
        assert!(!is_stale_child(&veth, 4, &StaleMatch::Mac(mac)));
    }

    #[test]
    fn only_foreign_children_of_the_parent_with_the_same_tag_or_mac_match() {
        let mac = vec![0, 0, 0x5e, 0, 1, 9];
        assert!(is_stale_child(
            &child(4, true, Some(100), &mac),
            4,
            &StaleMatch::Vlan(100)
        ));
        assert!(!is_stale_child(
            &child(4, true, Some(101), &mac),
            4,
            &StaleMatch::Vlan(100)
        ));
        assert!(!is_stale_child(
            &child(5, true, Some(100), &mac),
            4,
            &StaleMatch::Vlan(100)
        ));
        assert!(!is_stale_child(
            &child(4, false, Some(100), &mac),
            4,
            &StaleMatch::Vlan(100)
        ));
        assert!(is_stale_child(
            &child(4, true, None, &mac),
            4,
            &StaleMatch::Mac(mac.clone())
        ));
        assert!(!is_stale_child(
            &child(4, true, None, &[1, 2, 3, 4, 5, 6]),
            4,
            &StaleMatch::Mac(mac)
        ));
    }
}
