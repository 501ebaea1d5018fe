#![allow(clippy::unwrap_used)] // test helpers outside #[test] fns
//! Lab: neutron-vif pods on Open vSwitch. Two Neutron ports on the lab's pod network, bound to the lab's
//! chassis as a hypervisor's pods are; `NetlinkBinder` wires each into a namespace of its own (a veth whose
//! host end it plugs into the real `br-int` through the lab's ovsdb-server), ovn-controller binds them, Neutron
//! says ACTIVE, and the pods reach each other through OVN: ping, and TCP (on the lab's userspace datapath
//! only once the binder turned the pod end's transmit checksum offload off: OVN's ACLs drop TCP with a
//! partial checksum, ICMP passes either way). Unbinding removes the OVS port and the host end.

mod common;

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{ensure, Context as _};
use common::TestNs;
use kuryr_api::Vif;
use kuryr_cni::binding::{Binder, NetlinkBinder, NetlinkBinderConfig};
use kuryr_core::vif::Attachment;
use kuryr_core::{NeutronVif, VifDriver};
use kuryr_openstack::neutron::ports::Port;
use kuryr_openstack::neutron::{networks, subnets};
use lab_tests::cloud::Cloud;
use lab_tests::Lab;
use serde_json::{json, Value};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_neutron_vif_pods_on_br_int_ping_each_other_through_ovn() {
    if !common::require_root("two_neutron_vif_pods_on_br_int_ping_each_other_through_ovn") {
        return;
    }
    let lab = Lab::require();
    let cloud = lab.cloud().await.unwrap();
    let mut ports = Vec::new();
    let res = exercise(&lab, &cloud, &mut ports).await;
    for p in &ports {
        let _ = cloud.delete(&format!("{}/ports/{p}", cloud.neutron)).await;
    }
    res.unwrap();
}

fn ovs_db(lab: &Lab) -> PathBuf {
    lab.state_dir.join("ovs/db.sock")
}

/// `ovs-vsctl` on the lab's database.
fn vsctl(lab: &Lab, args: &[&str]) -> String {
    let out = Command::new("ovs-vsctl")
        .arg(format!("--db=unix:{}", ovs_db(lab).display()))
        .args(args)
        .output()
        .expect("ovs-vsctl runs");
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

async fn exercise(lab: &Lab, cloud: &Cloud, ports: &mut Vec<String>) -> anyhow::Result<()> {
    let subnet = cloud
        .get(&format!("{}/subnets/{}", cloud.neutron, lab.pod_subnet_id))
        .await?["subnet"]
        .clone();
    let network = cloud
        .get(&format!("{}/networks/{}", cloud.neutron, lab.pod_network_id))
        .await?["network"]
        .clone();
    let binder = NetlinkBinder::new(NetlinkBinderConfig {
        bridge: "br-int".into(),
        ovsdb: ovs_db(lab),
        ..NetlinkBinderConfig::default()
    });
    let mut pods = Vec::new();
    for i in 0..2 {
        let port = cloud
            .post(
                &format!("{}/ports", cloud.neutron),
                json!({"port": {
                    "network_id": lab.pod_network_id,
                    "name": format!("kcni-nvif-{}-{i}", std::process::id()),
                    "fixed_ips": [{"subnet_id": lab.pod_subnet_id}],
                    "device_owner": "compute:kuryr",
                    "binding:host_id": lab.chassis,
                }}),
            )
            .await?["port"]
            .clone();
        let id = port["id"].as_str().context("port id")?.to_owned();
        ports.push(id.clone());
        let vif = vif_of(&port, &subnet, &network)?;
        let ns = TestNs::new("nvif");
        let bound = binder.bind(&ns.path(), "eth0", &vif, true).await?;
        let host_if = bound.host_ifname.clone().context("a veth host end")?;
        ensure!(
            vsctl(lab, &["get", "Interface", &host_if, "external_ids:iface-id"]) == format!("\"{id}\""),
            "br-int's port {host_if} names the Neutron port"
        );
        ensure!(
            vsctl(lab, &["port-to-br", &host_if]) == "br-int",
            "{host_if} is a port of br-int"
        );
        pods.push((ns, vif, host_if, id));
    }
    for (_, _, _, id) in &pods {
        wait_active(cloud, id).await?;
    }
    let (a, b) = (&pods[0], &pods[1]);
    let b_ip = &b.1.ips[0].address;
    ensure!(
        (0..15).any(|_| a.0.ping(b_ip)),
        "pod a cannot ping pod b ({b_ip}) through OVN"
    );
    ensure!(
        lab_datapath(lab) != "netdev" || tx_checksum(&a.0) == "off",
        "the pod end of a veth on a userspace datapath kept its transmit checksum offload"
    );
    let mut server = Command::new("ip")
        .args([
            "netns",
            "exec",
            &b.0.name,
            "socat",
            "TCP-LISTEN:8080,reuseaddr,fork",
            "SYSTEM:echo served",
        ])
        .spawn()?;
    let answered = (0..10).any(|_| {
        std::thread::sleep(Duration::from_millis(300));
        Command::new("ip")
            .args([
                "netns",
                "exec",
                &a.0.name,
                "socat",
                "-T",
                "3",
                "-",
                &format!("TCP:{b_ip}:8080,connect-timeout=3"),
            ])
            .stdin(std::process::Stdio::null())
            .output()
            .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("served"))
    });
    let _ = server.kill();
    let _ = server.wait();
    ensure!(
        answered,
        "pod a gets no TCP answer from pod b ({b_ip}:8080) through OVN"
    );
    // A second bind of the same port (a sandbox recreated) replaces the OVS port rather than adding one.
    binder.bind(&a.0.path(), "eth0", &a.1, true).await?;
    let named = vsctl(lab, &["--columns=name", "find", "Port", &format!("name={}", a.2)]);
    ensure!(
        named.lines().filter(|l| l.contains(&a.2)).count() == 1,
        "one OVS port {} after a rebind: {named}",
        a.2
    );
    for (ns, _, host_if, _) in &pods {
        binder
            .unbind(Some(&ns.path()), "eth0", std::slice::from_ref(host_if))
            .await?;
        ensure!(
            vsctl(lab, &["--if-exists", "port-to-br", host_if]).is_empty(),
            "{host_if} left on a bridge after DEL"
        );
        ensure!(
            !Command::new("ip")
                .args(["link", "show", host_if])
                .output()?
                .status
                .success(),
            "{host_if} left on the node after DEL"
        );
    }
    Ok(())
}

fn lab_datapath(lab: &Lab) -> String {
    vsctl(lab, &["get", "Bridge", "br-int", "datapath_type"])
        .trim_matches('"')
        .to_owned()
}

/// `tx-checksum-ip-generic` of the pod's eth0 as ethtool shows it (`on`, `off`, with `[fixed]` if so).
fn tx_checksum(ns: &TestNs) -> String {
    let out = Command::new("ip")
        .args(["netns", "exec", &ns.name, "ethtool", "-k", "eth0"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    out.lines()
        .find_map(|l| l.trim().strip_prefix("tx-checksum-ip-generic:"))
        .map(|v| v.trim().to_owned())
        .unwrap_or_default()
}

/// The VIF the controller writes for a neutron-vif port: Neutron's answers through the controller's own
/// conversion and driver, so the binder is tested against the real mapping.
fn vif_of(port: &Value, subnet: &Value, network: &Value) -> anyhow::Result<Vif> {
    let port: Port = serde_json::from_value(port.clone())?;
    let subnet: subnets::Subnet = serde_json::from_value(subnet.clone())?;
    let network: networks::Network = serde_json::from_value(network.clone())?;
    let subnets = [kuryr_convert::subnet(&subnet, &network)];
    let mut vif = NeutronVif::default().vif(&kuryr_convert::port(&port), &subnets, &Attachment::Bridge)?;
    // Bound by the test before Neutron says ACTIVE, as the daemon's plug phase does.
    vif.active = true;
    Ok(vif)
}

async fn wait_active(cloud: &Cloud, id: &str) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let status = cloud.get(&format!("{}/ports/{id}", cloud.neutron)).await?["port"]["status"].clone();
        if status == "ACTIVE" {
            return Ok(());
        }
        ensure!(
            Instant::now() < deadline,
            "port {id} not ACTIVE within 60 s (status {status})"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}
