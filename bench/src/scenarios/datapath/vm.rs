//! The two datapaths between two VM nodes (`lab/lab vms up` with `KURYR_LAB_VM_NODES=2`: qemu guests whose
//! NICs are bound to Neutron trunk parents on the lab's OVN), built and torn down through the guests' agent
//! (`lab/lab vms exec`):
//!
//! - **nested-vlan** (Kuryr's default): per VM a pod namespace holding a VLAN device of the guest's NIC with
//!   the MAC and address of its own Neutron port, a subport of the VM's trunk at that VLAN (the project's
//!   default security group). Packets: pod → 802.1Q tag → OVN (the tag selects the subport) → pod.
//! - **overlay** (flannel-style VXLAN inside the VMs, double encapsulation): per VM a pod namespace on a veth
//!   to the guest, which routes its pod /24 and the peer's through a point-to-point VXLAN device between the
//!   VMs' addresses (VNI 4242, UDP 4789), MTU 50 bytes below the NIC's. Packets: pod → veth → guest routing →
//!   VXLAN → NIC → OVN → NIC → VXLAN → routing → veth → pod.
//!
//! The guests are ours: their `ip_forward` is set for the overlay. Names carry [`NETNS_PREFIX`] /
//! [`LINK_PREFIX`] and the ports the [`OWNER_CLUSTER`] tag, as on the namespace VMs.

use std::path::Path;

use anyhow::{bail, ensure, Context as _};
use kuryr_openstack::neutron::ports::{self, CreatePort, FixedIpRequest};
use kuryr_openstack::neutron::trunks::{self, SubPort};
use lab_tests::Lab;
use serde::Deserialize;

use super::net::{lab_script, Ctx, Pod, LINK_PREFIX, NETNS_PREFIX, VXLAN_ID, VXLAN_PORT};

/// VLAN ids of the bench's subports: the top of the range, away from the controller's (it takes the lowest).
const VLANS: [u32; 2] = [4090, 4091];
const OVERLAY_NETS: [&str; 2] = ["10.244.243", "10.244.244"];
const VXLAN_NET: &str = "10.244.245";

/// A VM node as `lab/lab vms up` records it (`vm-nodes/<name>/vm.json`).
#[derive(Debug, Clone, Deserialize)]
pub struct VmNode {
    pub name: String,
    pub port_id: String,
    pub mac: String,
    pub ip: String,
    pub trunk_id: String,
}

/// The running VM nodes, by name.
pub fn nodes(lab: &Lab) -> anyhow::Result<Vec<VmNode>> {
    let dir = lab.state_dir.join("vm-nodes");
    if let Ok(why) = std::fs::read_to_string(dir.join("unavailable")) {
        bail!("this machine cannot run the lab's VM nodes: {}", why.trim());
    }
    let mut out = Vec::new();
    for entry in std::fs::read_dir(&dir).with_context(|| format!("{} (lab/lab vms up)", dir.display()))? {
        let path = entry?.path().join("vm.json");
        if !path.exists() || !running(&path) {
            continue;
        }
        out.push(serde_json::from_str(&std::fs::read_to_string(&path)?)?);
    }
    out.sort_by(|a: &VmNode, b| a.name.cmp(&b.name));
    Ok(out)
}

/// Whether the VM of `vm.json` is up: its guest reported `running`.
fn running(vm_json: &Path) -> bool {
    vm_json
        .parent()
        .map(|d| d.join("log/state"))
        .and_then(|s| std::fs::read_to_string(s).ok())
        .is_some_and(|s| s.trim() == "running")
}

/// `line` run as root in VM `vm`; its output, which must come with exit code 0.
pub async fn exec(vm: &str, line: &str) -> anyhow::Result<String> {
    let out = tokio::process::Command::new(lab_script())
        .args(["vms", "exec", vm, line])
        .output()
        .await
        .with_context(|| format!("lab/lab vms exec {vm}"))?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    ensure!(
        out.status.success(),
        "on {vm}: `{line}` failed ({}): {}{}",
        out.status,
        text.trim(),
        String::from_utf8_lossy(&out.stderr).trim()
    );
    Ok(text)
}

/// The guest's NIC (found by its MAC) and its MTU.
async fn nic(vm: &VmNode) -> anyhow::Result<(String, u32)> {
    let out = exec(
        &vm.name,
        &format!(
            "ip -o link | awk -v m={} 'index($0, m) {{ sub(\":\", \"\", $2); for (i = 1; i <= NF; i++) if ($i == \"mtu\") print $2, $(i+1); exit }}'",
            vm.mac
        ),
    )
    .await?;
    let mut it = out.split_whitespace();
    let (Some(name), Some(mtu)) = (it.next(), it.next()) else {
        bail!("{}: no NIC with MAC {}", vm.name, vm.mac);
    };
    Ok((name.to_owned(), mtu.parse()?))
}

/// What was made, for the teardown.
#[derive(Debug, Default)]
pub struct VmPlumbing {
    /// (VM, namespace).
    pub netns: Vec<(String, String)>,
    /// (VM, device in the guest's own namespace).
    pub links: Vec<(String, String)>,
    /// (trunk, port).
    pub subports: Vec<(String, String)>,
    pub ports: Vec<String>,
}

/// Both paths between `vms[0]` and `vms[1]`: `[[direct a, direct b], [overlay a, overlay b]]`, and the
/// setup as recorded.
pub async fn build(
    c: &Ctx<'_>,
    vms: [&VmNode; 2],
    run_id: &str,
    p: &mut VmPlumbing,
) -> anyhow::Result<([[Pod; 2]; 2], serde_json::Value)> {
    let lab = c.lab;
    let prefix = lab.pod_subnet_cidr.split('/').nth(1).unwrap_or("24");
    let mut nics = Vec::new();
    for vm in vms {
        nics.push(nic(vm).await?);
    }
    let mtu = nics[0].1.min(nics[1].1);
    ensure!(mtu >= 1330, "VM MTU {mtu} too small for a VXLAN overlay");
    let inner = mtu - 50;
    let mut direct = Vec::new();
    for (i, vm) in vms.iter().enumerate() {
        let ns = format!("{NETNS_PREFIX}{run_id}-v{}", i + 1);
        let link = format!("{LINK_PREFIX}{run_id}q{}", i + 1);
        let port = ports::create(
            c.cloud,
            &CreatePort {
                name: Some(format!("kuryr-bench-{ns}")),
                fixed_ips: vec![FixedIpRequest {
                    subnet_id: Some(lab.pod_subnet_id.clone()),
                    ip_address: None,
                }],
                tags: c.owner.tags()?,
                ..CreatePort::on_network(&lab.pod_network_id)
            },
        )
        .await?;
        p.ports.push(port.id.clone());
        let ip = port.ip().context("pod port without IP")?.to_owned();
        trunks::add_subports(
            c.cloud,
            &vm.trunk_id,
            &[SubPort {
                port_id: port.id.clone(),
                segmentation_type: "vlan".into(),
                segmentation_id: VLANS[i],
            }],
        )
        .await?;
        p.subports.push((vm.trunk_id.clone(), port.id.clone()));
        p.netns.push((vm.name.clone(), ns.clone()));
        let nic = &nics[i].0;
        exec(
            &vm.name,
            &format!(
                "set -e; ip netns add {ns}; ip link add link {nic} name {link} type vlan id {vlan}; \
                 ip link set {link} address {mac} netns {ns}; ip -n {ns} link set {link} name eth0; \
                 ip -n {ns} addr add {ip}/{prefix} dev eth0; ip -n {ns} link set lo up; ip -n {ns} link set eth0 up",
                vlan = VLANS[i],
                mac = port.mac_address,
            ),
        )
        .await?;
        direct.push(Pod {
            ns,
            ip,
            vm: Some(vm.name.clone()),
        });
    }
    let mut overlay = Vec::new();
    for (i, vm) in vms.iter().enumerate() {
        let peer = vms[1 - i];
        let ns = format!("{NETNS_PREFIX}{run_id}-w{}", i + 1);
        let veth = format!("{LINK_PREFIX}{run_id}w{}", i + 1);
        let vx = format!("{LINK_PREFIX}{run_id}y");
        let (net, peer_net) = (OVERLAY_NETS[i], OVERLAY_NETS[1 - i]);
        p.netns.push((vm.name.clone(), ns.clone()));
        p.links.push((vm.name.clone(), veth.clone()));
        p.links.push((vm.name.clone(), vx.clone()));
        // `ip link add … mtu` sets the named end only: the pod's end is set too, else its 1500-byte segments
        // are dropped at the guest's end (its RX `dropped`) and TCP streams stall while pings pass.
        exec(
            &vm.name,
            &format!(
                "set -e; ip netns add {ns}; \
                 ip link add {veth} mtu {inner} type veth peer name eth0 netns {ns}; \
                 ip -n {ns} link set eth0 mtu {inner}; \
                 ip addr add {net}.1/24 dev {veth}; ip link set {veth} up; \
                 ip -n {ns} addr add {net}.2/24 dev eth0; ip -n {ns} link set lo up; ip -n {ns} link set eth0 up; \
                 ip -n {ns} route add default via {net}.1; \
                 ip link add {vx} mtu {inner} type vxlan id {VXLAN_ID} local {me} remote {them} dstport {VXLAN_PORT} dev {nic}; \
                 ip addr add {VXLAN_NET}.{a}/24 dev {vx}; ip link set {vx} up; \
                 ip route add {peer_net}.0/24 via {VXLAN_NET}.{b} dev {vx}; \
                 sysctl -qw net.ipv4.ip_forward=1",
                me = vm.ip,
                them = peer.ip,
                nic = nics[i].0,
                a = i + 1,
                b = 2 - i,
            ),
        )
        .await?;
        overlay.push(Pod {
            ns,
            ip: format!("{net}.2"),
            vm: Some(vm.name.clone()),
        });
    }
    let setup = serde_json::json!({
        "vms": [vms[0].name, vms[1].name],
        "vm_addresses": [vms[0].ip, vms[1].ip],
        "nics": [nics[0].0, nics[1].0],
        "vm_mtu": mtu,
        "overlay_mtu": inner,
        "direct": {"pods": [direct[0].ip, direct[1].ip], "vlans": VLANS,
                   "wiring": "VLAN device of the guest's NIC with its own Neutron port's MAC and IP; the port a subport of the VM's trunk (default SG)"},
        "overlay": {"pods": [overlay[0].ip, overlay[1].ip], "vxlan_id": VXLAN_ID, "vxlan_port": VXLAN_PORT,
                    "wiring": "veth to the guest, routed per /24 through a point-to-point VXLAN device between the VMs' addresses"},
    });
    let [d0, d1] = <[Pod; 2]>::try_from(direct).map_err(|_| anyhow::anyhow!("two direct pods"))?;
    let [o0, o1] = <[Pod; 2]>::try_from(overlay).map_err(|_| anyhow::anyhow!("two overlay pods"))?;
    Ok(([[d0, d1], [o0, o1]], setup))
}

/// Undoes `p` (all of it, whatever fails); the problems met.
pub async fn teardown(c: &Ctx<'_>, p: &VmPlumbing) -> Vec<String> {
    let mut problems = Vec::new();
    for (vm, ns) in &p.netns {
        if let Err(e) = exec(
            vm,
            &format!("ip netns pids {ns} | xargs -r kill; ip netns del {ns}"),
        )
        .await
        {
            problems.push(format!("{e:#}"));
        }
    }
    for (vm, link) in &p.links {
        // The veth went with its peer's namespace; the VXLAN device is the guest's own.
        let _ = exec(vm, &format!("ip link del {link} 2>/dev/null || true")).await;
    }
    for (trunk, port) in &p.subports {
        if let Err(e) = trunks::remove_subports(c.cloud, trunk, std::slice::from_ref(port)).await {
            problems.push(format!("remove subport {port}: {e}"));
        }
    }
    for port in &p.ports {
        match ports::delete(c.cloud, port).await {
            Err(e) if !e.is_not_found() => problems.push(format!("delete port {port}: {e}")),
            _ => {}
        }
    }
    problems
}

/// CPU seconds (user + system) this machine spent in the VMs' qemu processes so far.
pub fn qemu_cpu_seconds(lab: &Lab, vms: &[&VmNode]) -> Option<f64> {
    // USER_HZ is 100 on Linux.
    let mut ticks = 0u64;
    for vm in vms {
        let pid = std::fs::read_to_string(lab.state_dir.join(format!("pids/vm-{}.pid", vm.name))).ok()?;
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", pid.trim())).ok()?;
        let after_comm = &stat[stat.rfind(')')? + 2..];
        let f: Vec<&str> = after_comm.split_whitespace().collect();
        // Fields 14 and 15 of stat (utime, stime) are 12 and 13 after the command.
        ticks += f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?;
    }
    Some(ticks as f64 / 100.0)
}
