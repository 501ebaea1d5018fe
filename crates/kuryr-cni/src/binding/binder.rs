//! The netlink [`Binder`]: picks the driver by VIF type, creates the device straight into the pod namespace,
//! then configures addresses, link state and routes there.

use std::path::{Path, PathBuf};

use kuryr_api::{Vif, VifType};
use rtnetlink::packet_route::link::LinkMessage;
use rtnetlink::{Handle, LinkUnspec};
use tracing::{debug, info};

use super::parent;
use super::stale::{remove_stale_children, StaleMatch};
use super::{
    addr, ethtool, host_link, link, macvlan, netns, ovsdb, route, veth, vlan, BindError, Binder, Bound, Netns,
};

#[derive(Clone, Debug)]
pub struct NetlinkBinderConfig {
    /// Namespace holding the parent NICs and bridges; `None` is the daemon's own (the node's).
    pub host_netns: Option<PathBuf>,
    /// This node's pin of the nested VIFs' parent NIC (upstream's `[binding] link_iface`); when unset or
    /// absent, the VIF's `parentIfname`, then the link with its `parentMac` ([`parent::choose`]).
    pub link_iface: Option<String>,
    /// Bridge for neutron-vif VIFs without `bridgeName`.
    pub bridge: String,
    /// Namespace holding that bridge and the veths' host ends, when it is not `host_netns` (the lab's
    /// nested nodes: a VM's NIC in the VM's namespace, the integration bridge in the machine's).
    pub bridge_netns: Option<PathBuf>,
    /// The ovsdb-server socket a neutron-vif host end is plugged through when the bridge is Open vSwitch's.
    pub ovsdb: PathBuf,
    /// Where runtimes keep sandbox namespaces; searched for stale devices.
    pub netns_dir: PathBuf,
    /// Give the node a way to its own nested-macvlan pods ([`host_link`]).
    pub macvlan_host_link: bool,
}

impl Default for NetlinkBinderConfig {
    fn default() -> Self {
        Self {
            host_netns: None,
            link_iface: None,
            bridge: "br-int".into(),
            bridge_netns: None,
            ovsdb: PathBuf::from(ovsdb::DEFAULT_SOCKET),
            netns_dir: PathBuf::from("/var/run/netns"),
            macvlan_host_link: true,
        }
    }
}

/// A driver's pure request builder: `(ifname, parent index, vif, pod netns fd)`.
type BuildFn = fn(&str, u32, &Vif, i32) -> Result<LinkMessage, BindError>;

pub struct NetlinkBinder {
    cfg: NetlinkBinderConfig,
}

impl NetlinkBinder {
    pub fn new(cfg: NetlinkBinderConfig) -> Self {
        Self { cfg }
    }

    async fn host(&self) -> Result<Handle, BindError> {
        match &self.cfg.host_netns {
            Some(p) => Netns::open(p)?.connect().await,
            None => netns::connect_current(),
        }
    }

    /// The namespace of the neutron-vif bridge and host ends.
    async fn bridge_host(&self) -> Result<Handle, BindError> {
        match &self.cfg.bridge_netns {
            Some(p) => Netns::open(p)?.connect().await,
            None => self.host().await,
        }
    }

    async fn bind_nested(
        &self,
        ns: &Netns,
        ifname: &str,
        vif: &Vif,
        default: bool,
    ) -> Result<Bound, BindError> {
        let host = self.host().await?;
        let pod = ns.connect().await?;
        let links = link::list(&host).await?;
        let chosen = parent::choose(&links, vif, self.cfg.link_iface.as_deref())?;
        let (parent, parent_name) = (chosen.link.index, chosen.link.name.as_str());
        if chosen.absent_pins.is_empty() {
            debug!(parent = parent_name, by = ?chosen.by, "parent link");
        } else {
            // Told at info: a pin this node lacks is likely a configuration slip, harmless thanks to the MAC.
            info!(parent = parent_name, absent = ?chosen.absent_pins, "pinned link absent, parent found by MAC");
        }
        let (build, what): (BuildFn, StaleMatch) = match vif.vif_type {
            VifType::NestedVlan => (vlan::message, StaleMatch::Vlan(vif.vlan_id.unwrap_or(0))),
            _ => (
                macvlan::message,
                StaleMatch::Mac(link::parse_mac(macvlan::device_mac(vif))?),
            ),
        };
        // Created under a per-port temporary name, renamed in the pod: the kernel (6.1) checks a new VLAN
        // device's name in the parent's namespace too, where `eth0` is the parent itself (EEXIST).
        let tmp = link::temp_name(&vif.port_id);
        let attempt = || async {
            link::delete_by_name(&pod, ifname).await?;
            link::delete_by_name(&pod, &tmp).await?;
            host.link()
                .add(build(&tmp, parent, vif, ns.raw_fd())?)
                .execute()
                .await
                .map_err(BindError::netlink(format!(
                    "create {} {tmp} on {parent_name}",
                    vif.vif_type
                )))?;
            link::rename(&pod, &tmp, ifname).await?;
            configure_pod_side(&pod, ifname, vif, default).await
        };
        let mac = match attempt().await {
            Err(e) if e.is_conflict() => {
                let n = remove_stale_children(&self.cfg.netns_dir, parent, &what).await?;
                info!(removed = n, error = %e, "retrying after removing stale interfaces");
                attempt().await?
            }
            r => r?,
        };
        if vif.vif_type == VifType::NestedMacvlan && self.cfg.macvlan_host_link {
            let ips = addr::vif_addresses(vif)?.into_iter().map(|(ip, _)| ip);
            host_link::add(&host, parent, parent_name, ips).await?;
        }
        Ok(Bound {
            ifname: ifname.to_string(),
            mac,
            mtu: vif.mtu,
            host_ifname: None,
        })
    }

    async fn bind_veth(
        &self,
        ns: &Netns,
        ifname: &str,
        vif: &Vif,
        default: bool,
    ) -> Result<Bound, BindError> {
        let host = self.bridge_host().await?;
        let pod = ns.connect().await?;
        let host_name = veth::host_ifname(vif);
        // A host end left by an earlier sandbox of this port (its namespace kept alive) is in the way.
        if link::delete_by_name(&host, &host_name).await? {
            info!(ifname = %host_name, "removed leftover host end");
        }
        link::delete_by_name(&pod, ifname).await?;
        host.link()
            .add(veth::message(&host_name, ifname, vif, ns.raw_fd())?)
            .execute()
            .await
            .map_err(BindError::netlink(format!("create veth {host_name}/{ifname}")))?;
        let idx = link::index_of(&host, &host_name)
            .await?
            .ok_or_else(|| BindError::NotFound(format!("host end {host_name}")))?;
        let bridge = vif.bridge_name.as_deref().unwrap_or(&self.cfg.bridge);
        let ovs = ovsdb::Ovsdb::new(&self.cfg.ovsdb);
        if let Some(datapath) = ovs.bridge_datapath(bridge).await? {
            if datapath == "netdev" {
                // The userspace datapath does not complete a veth's partial checksums (ethtool.rs).
                let dev = ifname.to_owned();
                ns.run(move || ethtool::features_off(&dev, ethtool::TX_CHECKSUM))
                    .await?;
            }
            // Open vSwitch takes no netlink master: the port is a database row naming the Neutron port.
            link::set_up(&host, idx, &host_name).await?;
            let plug = ovsdb::PortPlug {
                bridge,
                name: &host_name,
                iface_id: &vif.port_id,
                mac: &vif.mac,
            };
            ovs.add_port(&plug).await?;
        } else {
            let br = link::index_of(&host, bridge)
                .await?
                .ok_or_else(|| BindError::NotFound(format!("bridge {bridge}")))?;
            host.link()
                .set(LinkUnspec::new_with_index(idx).controller(br).up().build())
                .execute()
                .await
                .map_err(BindError::netlink(format!("attach {host_name} to {bridge}")))?;
        }
        let mac = configure_pod_side(&pod, ifname, vif, default).await?;
        Ok(Bound {
            ifname: ifname.to_string(),
            mac,
            mtu: vif.mtu,
            host_ifname: Some(host_name),
        })
    }
}

/// Addresses, up, routes; returns the interface's MAC as the kernel reports it.
async fn configure_pod_side(
    pod: &Handle,
    ifname: &str,
    vif: &Vif,
    default: bool,
) -> Result<String, BindError> {
    let m = link::get_by_name(pod, ifname)
        .await?
        .ok_or_else(|| BindError::NotFound(format!("{ifname} in the pod namespace")))?;
    let idx = m.header.index;
    addr::add_all(pod, idx, &addr::vif_addresses(vif)?).await?;
    link::set_up(pod, idx, ifname).await?;
    route::add_all(pod, idx, &route::vif_routes(vif, default)?).await?;
    Ok(link::mac_of(&m).unwrap_or_default())
}

fn expected_mac(vif: &Vif) -> &str {
    match vif.vif_type {
        VifType::NestedMacvlan => macvlan::device_mac(vif),
        _ => &vif.mac,
    }
}

impl Binder for NetlinkBinder {
    async fn bind(&self, netns: &Path, ifname: &str, vif: &Vif, default: bool) -> Result<Bound, BindError> {
        let ns = Netns::open(netns)?;
        match vif.vif_type {
            VifType::NestedMacvlan | VifType::NestedVlan => self.bind_nested(&ns, ifname, vif, default).await,
            VifType::NeutronVif => self.bind_veth(&ns, ifname, vif, default).await,
            VifType::NestedDpdk => Err(BindError::InvalidVif("nested-dpdk VIFs are not supported".into())),
        }
    }

    async fn unbind(
        &self,
        netns: Option<&Path>,
        ifname: &str,
        host_ifnames: &[String],
    ) -> Result<(), BindError> {
        // The interface's addresses, read before it goes: the node's routes to them go with it.
        let mut pod_ips = Vec::new();
        if let Some(path) = netns {
            match Netns::open(path) {
                Ok(ns) => {
                    let pod = ns.connect().await?;
                    if let Some(m) = link::get_by_name(&pod, ifname).await? {
                        pod_ips = addr::list(&pod, m.header.index).await?;
                    }
                    link::delete_by_name(&pod, ifname).await?;
                }
                // The sandbox is already gone: so is everything in it.
                Err(BindError::Netns { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
        if !host_ifnames.is_empty() {
            let bridges = self.bridge_host().await?;
            // A node with Open vSwitch: its ports of these names go too (a Linux bridge drops its own).
            let ovs = ovsdb::Ovsdb::new(&self.cfg.ovsdb);
            for name in host_ifnames {
                if ovs.socket().exists() {
                    ovs.delete_port(name).await?;
                }
                link::delete_by_name(&bridges, name).await?;
            }
        }
        if self.cfg.macvlan_host_link && pod_ips.iter().any(|ip| ip.is_ipv4()) {
            host_link::remove(&self.host().await?, pod_ips).await?;
        }
        Ok(())
    }

    async fn check(&self, netns: &Path, ifname: &str, vif: &Vif) -> Result<(), BindError> {
        let pod = Netns::open(netns)?.connect().await?;
        let m = link::get_by_name(&pod, ifname)
            .await?
            .ok_or_else(|| BindError::Check(format!("{ifname} is missing from {}", netns.display())))?;
        let mac = link::mac_of(&m).unwrap_or_default();
        if !mac.eq_ignore_ascii_case(expected_mac(vif)) {
            return Err(BindError::Check(format!(
                "{ifname} has MAC {mac}, expected {}",
                expected_mac(vif)
            )));
        }
        let have = addr::list(&pod, m.header.index).await?;
        for (ip, _) in addr::vif_addresses(vif)? {
            if !have.contains(&ip) {
                return Err(BindError::Check(format!("{ifname} lacks address {ip}")));
            }
        }
        Ok(())
    }
}
