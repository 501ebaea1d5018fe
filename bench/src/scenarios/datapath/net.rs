//! The two datapaths between two lab VMs (network namespaces on OVN's br-int), built and torn down:
//!
//! - **direct** (Kuryr nested-macvlan): per VM a pod namespace holding a bridge-mode macvlan child of the
//!   VM's eth0; the pod has its own Neutron port on the lab's pod subnet (IP + the project's default
//!   security group, unbound), the VM's port gets the allowed-address pair {pod IP, VRRP MAC} and the
//!   macvlan carries that VRRP MAC (crates/kuryr-core/src/vrrp.rs). Packets: pod → VM NIC → OVN → pod.
//! - **overlay** (flannel-style VXLAN inside the VMs): per VM a pod namespace on a veth to the VM
//!   namespace, which routes its pod /24 and the peer's through a VXLAN device (VNI 4242, UDP 4789, local
//!   = the VM's IP, static FDB and neighbour for the peer). Packets: pod → veth → VM routing → VXLAN →
//!   VM NIC → OVN → VM → VXLAN → routing → veth → pod. MTU 50 bytes below the VM NIC's, as flannel does.
//!
//! Nothing is configured in the root namespace. In the VMs' namespaces only devices we create get
//! addresses, routes and `forwarding=1` (per device: the VMs' global `ip_forward` is left alone), and
//! deleting those devices removes all of it. Everything is named with [`NETNS_PREFIX`] / [`LINK_PREFIX`]
//! and the Neutron ports carry the [`OWNER_CLUSTER`] tag, so [`cleanup_leftovers`] finds what a killed
//! run left behind.

use std::process::Command;

use anyhow::{bail, ensure, Context as _};
use kuryr_openstack::neutron::ports::{self, AddressPair, CreatePort, FixedIpRequest};
use kuryr_openstack::neutron::Filter;
use kuryr_openstack::{Cloud, Owner};
use lab_tests::{Lab, LabVm};

/// Pod namespaces of this scenario: `kbdp-<run>-d1`, `kbdp-<run>-o2`, ...
pub const NETNS_PREFIX: &str = "kbdp-";
/// Devices created in the VMs' namespaces: `kbd<run>m1` (macvlan, moved out), `kbd<run>v1` (veth), `kbd<run>x`.
pub const LINK_PREFIX: &str = "kbd";
/// Ownership tag cluster of the pod ports (`kuryr.cluster=kuryr-bench-datapath`).
pub const OWNER_CLUSTER: &str = "kuryr-bench-datapath";
pub const VXLAN_ID: &str = "4242";
pub const VXLAN_PORT: &str = "4789";
/// The overlay's pod subnets, one /24 per VM (confined to our namespaces and devices).
const OVERLAY_NETS: [&str; 2] = ["10.244.241", "10.244.242"];
const VRRP_PREFIX: &str = "00:00:5e:00:01:";

/// One pod end: its namespace and address, and the VM node whose kernel holds the namespace (`None`: a
/// namespace of this machine, as the lab's namespace VMs are).
#[derive(Debug, Clone)]
pub struct Pod {
    pub ns: String,
    pub ip: String,
    pub vm: Option<String>,
}

impl Pod {
    /// `cmd args` in this pod's namespace: `ip netns exec` here, or through `lab/lab vms exec` in the VM.
    pub fn command(&self, cmd: &str, args: &[String]) -> tokio::process::Command {
        match &self.vm {
            None => {
                let mut c = tokio::process::Command::new("ip");
                c.args(["netns", "exec", &self.ns, cmd]).args(args);
                c
            }
            Some(vm) => {
                // Bounded in the guest too: a client the host gives up on must not keep the server busy.
                let mut c = tokio::process::Command::new(lab_script());
                c.args([
                    "vms",
                    "exec",
                    vm,
                    &format!(
                        "timeout {GUEST_LIMIT_S} ip netns exec {} {cmd} {}",
                        self.ns,
                        args.join(" ")
                    ),
                ]);
                c
            }
        }
    }
}

/// How long a command in a VM node's pod may run (the longest client run, with room for emulation).
const GUEST_LIMIT_S: u64 = 60;

/// The lab's command (`lab/lab` of this checkout; `KURYR_LAB_SCRIPT` overrides it).
pub fn lab_script() -> String {
    std::env::var("KURYR_LAB_SCRIPT")
        .unwrap_or_else(|_| concat!(env!("CARGO_MANIFEST_DIR"), "/../lab/lab").to_owned())
}

/// What was made, for the teardown (filled as it is made, so a half-built setup is undone too).
#[derive(Debug, Default)]
pub struct Plumbing {
    pub netns: Vec<String>,
    /// (VM namespace, device).
    pub links: Vec<(String, String)>,
    /// (VM port id, pod IP).
    pub pairs: Vec<(String, String)>,
    pub ports: Vec<String>,
}

/// `cmd args...`, which must succeed; its stdout.
pub fn sh(cmd: &str, args: &[&str]) -> anyhow::Result<String> {
    let out = Command::new(cmd)
        .args(args)
        .output()
        .with_context(|| format!("running {cmd}"))?;
    ensure!(
        out.status.success(),
        "{cmd} {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr).trim()
    );
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn ip(args: &[&str]) -> anyhow::Result<String> {
    sh("ip", args)
}

/// `ethtool -K <dev> tx off` inside `ns` (userspace OVS conntrack drops partial L4 checksums).
fn tx_off(ns: &str, dev: &str) -> anyhow::Result<()> {
    sh("ip", &["netns", "exec", ns, "ethtool", "-K", dev, "tx", "off"]).map(|_| ())
}

/// The MTU of `dev` in `ns`.
pub fn mtu(ns: &str, dev: &str) -> anyhow::Result<u32> {
    let v: serde_json::Value = serde_json::from_str(&ip(&["-n", ns, "-j", "link", "show", "dev", dev])?)?;
    v[0]["mtu"]
        .as_u64()
        .and_then(|m| u32::try_from(m).ok())
        .with_context(|| format!("no MTU for {dev} in {ns}"))
}

/// `n` VRRP router ids unused on `network_id`, highest first (controllers allocate from the lowest).
pub async fn free_vrrp_ids(cloud: &Cloud, network_id: &str, n: usize) -> anyhow::Result<Vec<u8>> {
    let used: Vec<u8> = ports::list(cloud, Filter::new().eq("network_id", network_id))
        .await?
        .iter()
        .flat_map(|p| p.allowed_address_pairs.iter())
        .filter_map(|a| {
            let mac = a.mac_address.as_deref()?.to_ascii_lowercase();
            u8::from_str_radix(mac.strip_prefix(VRRP_PREFIX)?, 16).ok()
        })
        .collect();
    let free: Vec<u8> = (1..=u8::MAX)
        .rev()
        .filter(|i| !used.contains(i))
        .take(n)
        .collect();
    ensure!(
        free.len() == n,
        "fewer than {n} free VRRP MACs on network {network_id}"
    );
    Ok(free)
}

/// Edits a VM port's address pairs with `If-Match` on its revision, re-reading on a conflict.
async fn edit_pairs(
    cloud: &Cloud,
    port_id: &str,
    edit: impl Fn(&mut Vec<AddressPair>),
) -> anyhow::Result<()> {
    let mut last = None;
    for _ in 0..6 {
        let port = ports::get(cloud, port_id).await?;
        let mut pairs = port.allowed_address_pairs.clone();
        edit(&mut pairs);
        if pairs == port.allowed_address_pairs {
            return Ok(());
        }
        match ports::set_address_pairs_if_revision(cloud, port_id, &pairs, port.revision_number).await {
            Ok(_) => return Ok(()),
            Err(e) => last = Some(e),
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    Err(anyhow::anyhow!(
        "address pairs of port {port_id}: {}",
        last.map(|e| e.to_string()).unwrap_or_default()
    ))
}

/// Who builds: the cloud session, the lab and the owner tags of the pod ports.
pub struct Ctx<'a> {
    pub cloud: &'a Cloud,
    pub lab: &'a Lab,
    pub owner: &'a Owner,
}

/// The Kuryr-style pod on `vm` in namespace `ns`: Neutron port, address pair, macvlan `link` with the VRRP
/// MAC of router id `vrrp`.
pub async fn direct_pod(
    c: &Ctx<'_>,
    vm: &LabVm,
    (ns, link): (&str, &str),
    vrrp: u8,
    p: &mut Plumbing,
) -> anyhow::Result<Pod> {
    let (cloud, lab, owner) = (c.cloud, c.lab, c.owner);
    let port = ports::create(
        cloud,
        &CreatePort {
            name: Some(format!("kuryr-bench-{ns}")),
            fixed_ips: vec![FixedIpRequest {
                subnet_id: Some(lab.pod_subnet_id.clone()),
                ip_address: None,
            }],
            device_owner: Some("compute:kuryr".into()),
            // The project's default group: the pod IP joins its address set, which the VM ports' same-group
            // ingress rule admits.
            security_groups: None,
            tags: owner.tags()?,
            ..CreatePort::on_network(&lab.pod_network_id)
        },
    )
    .await?;
    p.ports.push(port.id.clone());
    let pod_ip = port.ip().context("pod port without IP")?.to_owned();
    let mac = format!("{VRRP_PREFIX}{vrrp:02x}");
    p.pairs.push((vm.port_id.clone(), pod_ip.clone()));
    let pair = AddressPair {
        ip_address: pod_ip.clone(),
        mac_address: Some(mac.clone()),
    };
    edit_pairs(cloud, &vm.port_id, |pairs| {
        if !pairs.contains(&pair) {
            pairs.push(pair.clone());
        }
    })
    .await?;
    let prefix = lab.pod_subnet_cidr.split('/').nth(1).unwrap_or("24");
    ip(&["netns", "add", ns])?;
    p.netns.push(ns.to_owned());
    ip(&[
        "-n", &vm.netns, "link", "add", "link", "eth0", "name", link, "address", &mac, "type", "macvlan",
        "mode", "bridge",
    ])?;
    p.links.push((vm.netns.clone(), link.to_owned()));
    ip(&["-n", &vm.netns, "link", "set", link, "netns", ns])?;
    ip(&["-n", ns, "link", "set", link, "name", "eth0"])?;
    ip(&[
        "-n",
        ns,
        "addr",
        "add",
        &format!("{pod_ip}/{prefix}"),
        "dev",
        "eth0",
    ])?;
    ip(&["-n", ns, "link", "set", "lo", "up"])?;
    ip(&["-n", ns, "link", "set", "eth0", "up"])?;
    tx_off(ns, "eth0")?;
    Ok(Pod {
        ns: ns.to_owned(),
        ip: pod_ip,
        vm: None,
    })
}

/// The overlay between `vms[0]` and `vms[1]`: pod namespaces `ns[i]`, devices named `<link>v<i>`/`<link>x`.
pub fn overlay(
    vms: [&LabVm; 2],
    ns: [&str; 2],
    link: &str,
    mtu: u32,
    p: &mut Plumbing,
) -> anyhow::Result<[Pod; 2]> {
    ensure!(mtu >= 1330, "VM MTU {mtu} too small for a VXLAN overlay");
    let inner_mtu = (mtu - 50).to_string();
    let vx = format!("{link}x");
    let vx_mac = |i: usize| format!("02:00:0a:f4:{:02x}:00", 241 + i);
    for (i, vm) in vms.iter().enumerate() {
        let routes = ip(&["-n", &vm.netns, "-4", "route", "show"])?;
        ensure!(
            !OVERLAY_NETS.iter().any(|n| routes.contains(&format!("{n}."))),
            "{} already routes an overlay subnet ({OVERLAY_NETS:?}.0/24): {routes}",
            vm.netns
        );
        let (net, veth) = (OVERLAY_NETS[i], format!("{link}v{}", i + 1));
        ip(&["netns", "add", ns[i]])?;
        p.netns.push(ns[i].to_owned());
        // The veth's VM end stays in the VM; the pod end is created in the pod namespace as eth0.
        ip(&[
            "-n", &vm.netns, "link", "add", &veth, "mtu", &inner_mtu, "type", "veth", "peer", "name", "eth0",
            "netns", ns[i],
        ])?;
        p.links.push((vm.netns.clone(), veth.clone()));
        ip(&[
            "-n",
            &vm.netns,
            "addr",
            "add",
            &format!("{net}.1/24"),
            "dev",
            &veth,
        ])?;
        ip(&["-n", &vm.netns, "link", "set", &veth, "up"])?;
        tx_off(&vm.netns, &veth)?;
        ip(&["-n", ns[i], "link", "set", "eth0", "mtu", &inner_mtu])?;
        ip(&["-n", ns[i], "addr", "add", &format!("{net}.2/24"), "dev", "eth0"])?;
        ip(&["-n", ns[i], "link", "set", "lo", "up"])?;
        ip(&["-n", ns[i], "link", "set", "eth0", "up"])?;
        ip(&["-n", ns[i], "route", "add", "default", "via", &format!("{net}.1")])?;
        tx_off(ns[i], "eth0")?;
        ip(&[
            "-n",
            &vm.netns,
            "link",
            "add",
            &vx,
            "type",
            "vxlan",
            "id",
            VXLAN_ID,
            "dstport",
            VXLAN_PORT,
            "local",
            &vm.ip,
            "dev",
            "eth0",
            "nolearning",
        ])?;
        p.links.push((vm.netns.clone(), vx.clone()));
        ip(&[
            "-n",
            &vm.netns,
            "link",
            "set",
            &vx,
            "address",
            &vx_mac(i),
            "mtu",
            &inner_mtu,
        ])?;
        ip(&["-n", &vm.netns, "addr", "add", &format!("{net}.0/32"), "dev", &vx])?;
        ip(&["-n", &vm.netns, "link", "set", &vx, "up"])?;
        let _ = tx_off(&vm.netns, &vx);
        for dev in [&veth, &vx] {
            sh(
                "ip",
                &[
                    "netns",
                    "exec",
                    &vm.netns,
                    "sysctl",
                    "-qw",
                    &format!("net.ipv4.conf.{dev}.forwarding=1"),
                ],
            )?;
        }
    }
    for (i, vm) in vms.iter().enumerate() {
        let j = 1 - i;
        let (peer_net, peer_mac) = (OVERLAY_NETS[j], vx_mac(j));
        let gw = format!("{peer_net}.0");
        ip(&[
            "-n",
            &vm.netns,
            "route",
            "add",
            &format!("{peer_net}.0/24"),
            "via",
            &gw,
            "dev",
            &vx,
            "onlink",
        ])?;
        ip(&[
            "-n",
            &vm.netns,
            "neigh",
            "add",
            &gw,
            "lladdr",
            &peer_mac,
            "dev",
            &vx,
            "nud",
            "permanent",
        ])?;
        sh(
            "bridge",
            &[
                "-n",
                &vm.netns,
                "fdb",
                "append",
                &peer_mac,
                "dev",
                &vx,
                "dst",
                &vms[j].ip,
                "self",
                "permanent",
            ],
        )?;
    }
    Ok([0, 1].map(|i| Pod {
        ns: ns[i].to_owned(),
        ip: format!("{}.2", OVERLAY_NETS[i]),
        vm: None,
    }))
}

/// `ping` from `from` to `to` (three tries): the path works at all.
pub async fn reachable(from: &Pod, to: &Pod) -> anyhow::Result<()> {
    let args = ["-c", "3", "-i", "0.3", "-W", "1", &to.ip].map(String::from);
    let out = from.command("ping", &args).output().await?;
    if !out.status.success() {
        bail!(
            "{} ({}) cannot ping {} ({}): {}",
            from.ns,
            from.ip,
            to.ns,
            to.ip,
            String::from_utf8_lossy(&out.stdout).trim()
        );
    }
    Ok(())
}

/// Undoes `p` (all of it, whatever fails); the problems met.
pub async fn teardown(cloud: Option<&Cloud>, p: &Plumbing) -> Vec<String> {
    let mut problems = Vec::new();
    for (ns, link) in p.links.iter().rev() {
        // Moved or already gone with its peer: only a device still there is a problem.
        let _ = ip(&["-n", ns, "link", "del", link]);
        if ip(&["-n", ns, "link", "show", link]).is_ok() {
            problems.push(format!("{link} still in {ns}"));
        }
    }
    for ns in &p.netns {
        if let Err(e) = ip(&["netns", "del", ns]) {
            problems.push(format!("{e:#}"));
        }
    }
    let Some(cloud) = cloud else {
        if !p.ports.is_empty() || !p.pairs.is_empty() {
            problems.push("no cloud session: ports and pairs left for `kuryr-bench cleanup`".into());
        }
        return problems;
    };
    for (port, pod_ip) in &p.pairs {
        if let Err(e) = edit_pairs(cloud, port, |pairs| pairs.retain(|a| &a.ip_address != pod_ip)).await {
            problems.push(format!("{e:#}"));
        }
    }
    for port in &p.ports {
        if let Err(e) = ports::delete(cloud, port).await {
            problems.push(format!("deleting port {port}: {e}"));
        }
    }
    problems
}

/// Whether a device name is one of ours: `kbd` + 4 hex digits + `x` / `v<n>` / `m<n>`.
pub fn is_our_link(name: &str) -> bool {
    let Some(rest) = name.strip_prefix(LINK_PREFIX) else {
        return false;
    };
    let (hex, kind) = rest.split_at(rest.len().min(4));
    hex.len() == 4
        && hex.chars().all(|c| c.is_ascii_hexdigit())
        && (kind == "x"
            || (kind.len() == 2
                && (kind.starts_with('v') || kind.starts_with('m'))
                && kind.ends_with(['1', '2'])))
}

/// Removes what an interrupted datapath run left: the pod namespaces and the processes in them, our devices
/// in the VMs, our pod ports and their address pairs on the VM ports.
pub async fn cleanup_leftovers(lab: &Lab, cloud: &Cloud) -> anyhow::Result<usize> {
    let mut n = 0;
    for ns in ip(&["netns", "list"])?
        .lines()
        .filter_map(|l| l.split_whitespace().next())
    {
        if ns.starts_with(NETNS_PREFIX) {
            // A killed run's servers outlive it (and keep the namespace alive): stop them first.
            for pid in ip(&["netns", "pids", ns])?.split_whitespace() {
                let _ = sh("kill", &[pid]);
            }
            ip(&["netns", "del", ns])?;
            n += 1;
        }
    }
    for vm in &lab.vms {
        let links: serde_json::Value = serde_json::from_str(&ip(&["-n", &vm.netns, "-j", "link", "show"])?)?;
        for l in links.as_array().into_iter().flatten() {
            if let Some(name) = l["ifname"].as_str().filter(|n| is_our_link(n)) {
                let _ = ip(&["-n", &vm.netns, "link", "del", name]);
                n += 1;
            }
        }
    }
    let ours = ports::list(cloud, Filter::new().tags(&Owner::cluster_filter(OWNER_CLUSTER))).await?;
    let ips: Vec<String> = ours.iter().filter_map(|p| p.ip().map(str::to_owned)).collect();
    for vm in &lab.vms {
        edit_pairs(cloud, &vm.port_id, |pairs| {
            pairs.retain(|a| !ips.contains(&a.ip_address))
        })
        .await?;
    }
    for port in &ours {
        ports::delete(cloud, &port.id).await?;
        n += 1;
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_our_device_names_are_ours() {
        for ours in ["kbd1a2fx", "kbd00ffv1", "kbdabcdm2"] {
            assert!(is_our_link(ours), "{ours}");
        }
        for not in [
            "eth0",
            "kbd",
            "kbd1a2f",
            "kbdzzzzx",
            "kbd1a2fv3",
            "kbd1a2fxx",
            "kbr-int",
        ] {
            assert!(!is_our_link(not), "{not}");
        }
    }
}
