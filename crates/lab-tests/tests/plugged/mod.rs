//! A network namespace plugged into the lab's OVN exactly like the lab's VMs (lab/lib/bootstrap.sh): a veth
//! whose host end is a br-int port with `external_ids:iface-id` = a Neutron port bound to the lab's chassis.
//! The Neutron port is the caller's to delete (it carries the caller's tags); the namespace, the veth, the OVS
//! port and the processes started in it go on drop. One copy for every test that needs a host on a Neutron
//! network, via a module of each.

#![allow(dead_code)]

use std::process::{Child, Command};
use std::time::{Duration, Instant};

use anyhow::{ensure, Context as _};
use kuryr_openstack::neutron::ports::{self, CreatePort, FixedIpRequest};
use kuryr_openstack::{Cloud, Owner};
use lab_tests::Lab;

/// Where a plugged namespace goes: the Neutron network and subnet, and the subnet's prefix length and gateway.
pub struct Attach<'a> {
    pub network_id: &'a str,
    pub subnet_id: &'a str,
    pub prefix_len: &'a str,
    pub gateway: &'a str,
}

impl<'a> Attach<'a> {
    /// The lab's pod network.
    pub fn pod_network(lab: &'a Lab) -> Self {
        Self {
            network_id: &lab.pod_network_id,
            subnet_id: &lab.pod_subnet_id,
            prefix_len: lab.pod_subnet_cidr.split('/').nth(1).unwrap_or("18"),
            gateway: "198.18.0.1",
        }
    }
}

/// A namespace plugged into OVN as a Neutron port; removed (with its processes) on drop.
pub struct Plugged {
    pub ns: String,
    pub host_if: String,
    pub ovs_db: String,
    pub port_id: String,
    pub ip: String,
    pub servers: Vec<Child>,
}

impl Drop for Plugged {
    fn drop(&mut self) {
        for c in &mut self.servers {
            let _ = c.kill();
            let _ = c.wait();
        }
        let _ = Command::new("ovs-vsctl")
            .args([
                &format!("--db=unix:{}", self.ovs_db),
                "--if-exists",
                "del-port",
                "br-int",
                &self.host_if,
            ])
            .output();
        let _ = Command::new("ip").args(["link", "del", &self.host_if]).output();
        let _ = Command::new("ip").args(["netns", "del", &self.ns]).output();
    }
}

pub fn run(cmd: &str, args: &[&str]) -> anyhow::Result<()> {
    let out = Command::new(cmd).args(args).output()?;
    ensure!(
        out.status.success(),
        "{cmd} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(())
}

/// Makes a Neutron port on `at` (security groups `sgs`, tagged by `owner`) and a namespace `<prefix><name>`
/// holding it as `eth0`, its default route via the subnet's gateway; returns once Neutron says ACTIVE.
/// Names stay within the 15 characters of an interface name when `prefix` + `name` takes at most 13.
pub async fn plug(
    lab: &Lab,
    cloud: &Cloud,
    owner: &Owner,
    sgs: &[String],
    at: &Attach<'_>,
    prefix: &str,
    name: &str,
) -> anyhow::Result<Plugged> {
    let port = ports::create(
        cloud,
        &CreatePort {
            name: Some(format!("{prefix}{name}")),
            fixed_ips: vec![FixedIpRequest {
                subnet_id: Some(at.subnet_id.to_owned()),
                ip_address: None,
            }],
            device_owner: Some("compute:kuryr-test".into()),
            binding_host_id: Some(lab.chassis.clone()),
            // Port security stays on: with it off ML2/OVN writes the LSP addresses as just `unknown`, and the
            // ovn provider then cannot find the member's port for its health monitor ("Logical_Switch_Port not
            // found").
            security_groups: Some(sgs.to_vec()),
            tags: owner.tags()?,
            ..CreatePort::on_network(at.network_id)
        },
    )
    .await?;
    let ip = port
        .fixed_ips
        .first()
        .map(|f| f.ip_address.clone())
        .context("port without IP")?;
    let p = Plugged {
        ns: format!("{prefix}{name}"),
        host_if: format!("{prefix}{name}h"),
        ovs_db: lab.state_dir.join("ovs/db.sock").display().to_string(),
        port_id: port.id.clone(),
        ip: ip.clone(),
        servers: Vec::new(),
    };
    let (ns, hl, guest) = (p.ns.clone(), p.host_if.clone(), format!("{prefix}{name}g"));
    run("ip", &["netns", "add", &ns])?;
    run(
        "ip",
        &["link", "add", &hl, "type", "veth", "peer", "name", &guest],
    )?;
    run("ip", &["link", "set", &guest, "netns", &ns])?;
    run("ip", &["-n", &ns, "link", "set", &guest, "name", "eth0"])?;
    run(
        "ip",
        &["-n", &ns, "link", "set", "eth0", "address", &port.mac_address],
    )?;
    run(
        "ip",
        &[
            "-n",
            &ns,
            "addr",
            "add",
            &format!("{ip}/{}", at.prefix_len),
            "dev",
            "eth0",
        ],
    )?;
    // Userspace OVS conntrack sees bad L4 checksums from offloaded veths (test-environment.md).
    run(
        "ip",
        &["netns", "exec", &ns, "ethtool", "-K", "eth0", "tx", "off"],
    )?;
    run("ip", &["-n", &ns, "link", "set", "lo", "up"])?;
    run("ip", &["-n", &ns, "link", "set", "eth0", "up"])?;
    run("ip", &["-n", &ns, "route", "add", "default", "via", at.gateway])?;
    run("ip", &["link", "set", &hl, "up"])?;
    run(
        "ovs-vsctl",
        &[
            &format!("--db=unix:{}", p.ovs_db),
            "--may-exist",
            "add-port",
            "br-int",
            &hl,
            "--",
            "set",
            "Interface",
            &hl,
            &format!("external_ids:iface-id={}", port.id),
        ],
    )?;
    // An upper bound: Neutron marks the port ACTIVE when OVN reports it up, which took over 60 s on CI's
    // slow machine of stop 50 beside the suite's other tests.
    let deadline = Instant::now() + Duration::from_secs(180);
    while ports::get(cloud, &port.id).await?.status != "ACTIVE" {
        ensure!(Instant::now() < deadline, "port {} of {name} not ACTIVE", port.id);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Ok(p)
}
