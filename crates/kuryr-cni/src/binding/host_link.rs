//! The VM's own way to its nested-macvlan pods: a macvlan of the parent NIC in the VM's namespace (bridge mode,
//! no address) and a /32 route per local pod through it.
//!
//! A macvlan parent never exchanges frames with its own children, and OVN does not send a frame back out of the
//! port it came in on, so without this the VM (its kubelet's HTTP/TCP probes, `hostNetwork` pods) reaches
//! every pod but its own. Bridge-mode macvlans of one parent do reach each other, so the node's packets to a
//! local pod leave through this sibling instead; the pod's ARP for the node's address is answered by it (the
//! kernel answers ARP for any local address, `arp_ignore=0`), so replies come back the same way. IPv4 only:
//! IPv6 neighbour discovery answers only for addresses on the receiving interface.

use std::net::{IpAddr, Ipv4Addr};

use rtnetlink::packet_route::link::{LinkMessage, MacVlanMode};
use rtnetlink::packet_route::route::{RouteMessage, RouteScope};
use rtnetlink::{Handle, LinkMacVlan, RouteMessageBuilder};
use tracing::info;

use super::error::errno;
use super::{addr, link, BindError};

/// Names of these links start with this; the rest is the parent's name (cut to fit 15 characters).
pub const PREFIX: &str = "kmv-";

pub fn name(parent: &str) -> String {
    let room = 15 - PREFIX.len();
    format!("{PREFIX}{}", parent.chars().take(room).collect::<String>())
}

/// The link: a bridge-mode macvlan of `parent`, up, with a MAC of the kernel's choosing.
pub fn message(name: &str, parent: u32) -> LinkMessage {
    LinkMacVlan::new(name, parent, MacVlanMode::Bridge).up().build()
}

/// `pod/32 dev <link> scope link [src <node>]`.
pub fn route(link: u32, pod: Ipv4Addr, src: Option<Ipv4Addr>) -> RouteMessage {
    let mut b = RouteMessageBuilder::<Ipv4Addr>::new()
        .destination_prefix(pod, 32)
        .output_interface(link)
        .scope(RouteScope::Link);
    if let Some(src) = src {
        b = b.pref_source(src);
    }
    b.build()
}

fn v4(ips: impl IntoIterator<Item = IpAddr>) -> Vec<Ipv4Addr> {
    ips.into_iter()
        .filter_map(|ip| match ip {
            IpAddr::V4(v) => Some(v),
            IpAddr::V6(_) => None,
        })
        .collect()
}

/// Makes the parent's link if missing, and routes `pods` through it (replacing a route left for the same
/// address by an earlier pod).
pub async fn add(
    host: &Handle,
    parent: u32,
    parent_name: &str,
    pods: impl IntoIterator<Item = IpAddr>,
) -> Result<(), BindError> {
    let name = name(parent_name);
    let index = match link::index_of(host, &name).await? {
        Some(i) => i,
        None => {
            let made = host.link().add(message(&name, parent)).execute().await;
            match made.map_err(BindError::netlink(format!("create {name} on {parent_name}"))) {
                Ok(()) => {
                    info!(link = %name, parent = parent_name, "made the node's link to its macvlan pods")
                }
                // Made by a concurrent ADD meanwhile.
                Err(e) if e.errno() == Some(errno::EEXIST) => {}
                Err(e) => return Err(e),
            }
            link::index_of(host, &name)
                .await?
                .ok_or_else(|| BindError::NotFound(format!("link {name}")))?
        }
    };
    // The node's own address as the source, so the pod answers the address the node's peers know it by.
    let src = v4(addr::list(host, parent).await?).into_iter().next();
    for pod in v4(pods) {
        host.route()
            .add(route(index, pod, src))
            .replace()
            .execute()
            .await
            .map_err(BindError::netlink(format!("add route {pod}/32 dev {name}")))?;
    }
    Ok(())
}

/// Removes the routes of `pods` through any such link of this namespace; absent ones are fine.
pub async fn remove(host: &Handle, pods: impl IntoIterator<Item = IpAddr>) -> Result<(), BindError> {
    let pods = v4(pods);
    if pods.is_empty() {
        return Ok(());
    }
    let links: Vec<u32> = link::list(host)
        .await?
        .into_iter()
        .filter(|l| l.name.starts_with(PREFIX))
        .map(|l| l.index)
        .collect();
    for index in links {
        for pod in &pods {
            match host.route().del(route(index, *pod, None)).execute().await {
                Ok(()) => {}
                Err(e) => {
                    let e = BindError::netlink(format!("delete route {pod}/32"))(e);
                    // ESRCH: no such route (this pod's address was never routed here, or is already gone).
                    if !matches!(e.errno(), Some(errno::ESRCH | errno::ENOENT | errno::ENODEV)) {
                        return Err(e);
                    }
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use rtnetlink::packet_route::link::{LinkAttribute, LinkFlags};
    use rtnetlink::packet_route::route::{RouteAddress, RouteAttribute};

    use super::*;

    #[test]
    fn the_name_carries_the_parent_and_fits_a_link_name() {
        assert_eq!(name("eth0"), "kmv-eth0");
        assert_eq!(name("enp0s31f6.1234"), "kmv-enp0s31f6.1");
        assert_eq!(name("enp0s31f6.1234").len(), 15);
    }

    #[test]
    fn the_link_is_an_up_bridge_mode_macvlan_of_the_parent_without_a_mac_of_ours() {
        let m = message("kmv-eth0", 7);
        let a = &m.attributes;
        assert!(a.contains(&LinkAttribute::IfName("kmv-eth0".into())));
        assert!(a.contains(&LinkAttribute::Link(7)));
        assert!(!a.iter().any(|x| matches!(x, LinkAttribute::Address(_))));
        assert!(m.header.flags.contains(LinkFlags::Up));
        assert!(crate::testing::is_bridge_macvlan(&m));
    }

    #[test]
    fn a_pod_route_is_a_host_route_on_the_link_from_the_node_address() {
        let pod: Ipv4Addr = "198.18.0.50".parse().unwrap();
        let node: Ipv4Addr = "198.18.0.11".parse().unwrap();
        let r = route(9, pod, Some(node));
        assert_eq!(r.header.destination_prefix_length, 32);
        assert_eq!(r.header.scope, RouteScope::Link);
        let a = &r.attributes;
        assert!(a.contains(&RouteAttribute::Destination(RouteAddress::Inet(pod))));
        assert!(a.contains(&RouteAttribute::Oif(9)));
        assert!(a.contains(&RouteAttribute::PrefSource(RouteAddress::Inet(node))));
        assert!(!a.iter().any(|x| matches!(x, RouteAttribute::Gateway(_))));
        assert!(!route(9, pod, None)
            .attributes
            .iter()
            .any(|x| matches!(x, RouteAttribute::PrefSource(_))));
    }

    #[test]
    fn only_ipv4_addresses_get_routes() {
        let ips: Vec<IpAddr> = vec!["198.18.0.50".parse().unwrap(), "fd42:18::50".parse().unwrap()];
        assert_eq!(v4(ips), vec!["198.18.0.50".parse::<Ipv4Addr>().unwrap()]);
    }
}
