#![allow(clippy::unwrap_used)] // test helpers outside #[test] fns
//! Lab: nested-macvlan pods wired by the real `kuryr-cni` binary and kuryr-daemon (in-process, fed by real
//! watches of the lab's kube-apiserver), on the lab VMs, with traffic through real OVN. No kubelet: the test
//! drives the plugin exactly as a runtime does (env + stdin), two pods on one VM and one on another.
//!
//! The test makes the Neutron side the way the nested-macvlan layout wants it on ML2/OVN (see
//! docs/pod-networking.md): one Neutron port per pod (its IP), and on the VM's port the address pair
//! {pod IP, a free VRRP MAC}, which the pod's macvlan carries. No NIC name is configured anywhere: each
//! daemon finds its VM's NIC by the VM port's MAC (`parentMac`). Its KuryrPorts and Pods are labelled for node
//! names of its own (`kcni-<id>-vmN`), so no kubelet and no other daemon acts on them; everything it made is
//! removed at the end, also on failure.
//!
//! lab-tests: group macvlan (address pairs on the lab VMs' ports: one writer at a time)

mod common;

use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, ensure, Context as _};
use common::TestNs;
use kuryr_api::k8s_openapi::api::core::v1::{Container, PodSpec};
use kuryr_api::{
    labels, Api, Client, DeleteParams, KuryrPort, KuryrPortSpec, Namespace, ObjectMeta, Patch, PatchParams,
    Pod, PostParams, ResourceExt, Vif, VifIp, VifType,
};
use kuryr_cni::binding::{NetlinkBinder, NetlinkBinderConfig};
use kuryr_cni::daemon::{server, watch, Daemon, DaemonConfig, NodeCache};
use lab_tests::cloud::Cloud;
use lab_tests::{Lab, LabVm};
use serde_json::{json, Value};

const PING_TRIES: usize = 15;

/// One pod of the test: its Neutron port, VRRP MAC, namespace and lab VM.
struct TestPod {
    name: String,
    vm: LabVm,
    node: String,
    port_id: String,
    ip: String,
    vrrp_mac: String,
    netns: TestNs,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_macvlan_pods_on_two_lab_vms_ping_each_other_through_ovn_and_del_cleans_up() {
    if !common::require_root("three_macvlan_pods_on_two_lab_vms_ping_each_other_through_ovn") {
        return;
    }
    let lab = Lab::require();
    assert!(lab.vms.len() >= 2, "the lab needs two VMs");
    let id = format!("{:06x}", fastrand::u32(..0xff_ffff));
    let cloud = lab.cloud().await.unwrap();
    let client = lab.kube_client().await.unwrap();
    let ns = format!("kcni-mv-{id}");
    let mut made = Made::default();
    let res = exercise(&lab, &cloud, &client, &id, &ns, &mut made).await;
    let cleanup = made.clean(&cloud, &client, &ns).await;
    res.unwrap();
    cleanup.unwrap();
}

#[derive(Default)]
struct Made {
    ports: Vec<String>,
    /// (VM port, pod IP, VRRP MAC)
    pairs: Vec<(String, String, String)>,
}

impl Made {
    async fn clean(&self, cloud: &Cloud, client: &Client, ns: &str) -> anyhow::Result<()> {
        for (vm_port, ip, mac) in &self.pairs {
            update_pairs(cloud, vm_port, |pairs| {
                pairs.retain(|p| !(p["ip_address"] == ip.as_str() && p["mac_address"] == mac.as_str()))
            })
            .await?;
        }
        for p in &self.ports {
            cloud.delete(&format!("{}/ports/{p}", cloud.neutron)).await?;
        }
        let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
        let _ = pods
            .delete_collection(&DeleteParams::default().grace_period(0), &Default::default())
            .await;
        let nss: Api<Namespace> = Api::all(client.clone());
        let _ = nss.delete(ns, &DeleteParams::default()).await;
        Ok(())
    }
}

/// Read-modify-write of a port's address pairs; re-read to make sure a concurrent writer did not undo it.
async fn update_pairs(cloud: &Cloud, port: &str, edit: impl Fn(&mut Vec<Value>)) -> anyhow::Result<()> {
    let url = format!("{}/ports/{port}", cloud.neutron);
    for _ in 0..5 {
        let mut pairs: Vec<Value> =
            serde_json::from_value(cloud.get(&url).await?["port"]["allowed_address_pairs"].clone())?;
        edit(&mut pairs);
        let want = pairs.clone();
        let (status, body) = cloud
            .call(
                reqwest::Method::PUT,
                &url,
                Some(json!({"port": {"allowed_address_pairs": pairs}})),
            )
            .await?;
        ensure!(status == 200, "PUT {url} -> {status}: {body}");
        let mut now: Vec<Value> =
            serde_json::from_value(cloud.get(&url).await?["port"]["allowed_address_pairs"].clone())?;
        let mut check = now.clone();
        edit(&mut check);
        now.sort_by_key(|v| v.to_string());
        check.sort_by_key(|v| v.to_string());
        if now == check && want.iter().all(|p| now.contains(p)) {
            return Ok(());
        }
    }
    bail!("address pairs of {port} kept changing under us")
}

async fn exercise(
    lab: &Lab,
    cloud: &Cloud,
    client: &Client,
    id: &str,
    ns: &str,
    made: &mut Made,
) -> anyhow::Result<()> {
    let nss: Api<Namespace> = Api::all(client.clone());
    nss.create(
        &PostParams::default(),
        &Namespace {
            metadata: ObjectMeta {
                name: Some(ns.into()),
                ..Default::default()
            },
            ..Default::default()
        },
    )
    .await?;
    // The lab runs ServiceAccount admission: pods wait for the namespace's `default` ServiceAccount.
    lab_tests::cluster::wait_default_service_account(client, ns).await?;
    let net = cloud
        .get(&format!("{}/networks/{}", cloud.neutron, lab.pod_network_id))
        .await?;
    let mtu = net["network"]["mtu"].as_u64().map(|m| m as u32);

    // Free VRRP MACs on the pod network, as the controller's book counts them (pairs on its ports).
    let ports = cloud
        .get(&format!(
            "{}/ports?network_id={}",
            cloud.neutron, lab.pod_network_id
        ))
        .await?;
    let used: BTreeSet<String> = ports["ports"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|p| p["allowed_address_pairs"].as_array().cloned().unwrap_or_default())
        .filter_map(|pair| pair["mac_address"].as_str().map(str::to_ascii_lowercase))
        .collect();
    let start = fastrand::u8(1..=255);
    let mut free = (0..255u16)
        .map(|i| ((u16::from(start) - 1 + i) % 255 + 1) as u8)
        .map(|n| format!("00:00:5e:00:01:{n:02x}"))
        .filter(|m| !used.contains(m));

    // a, b on the first VM, c on the second.
    let placement = [("a", &lab.vms[0]), ("b", &lab.vms[0]), ("c", &lab.vms[1])];
    let mut pods = Vec::new();
    for (short, vm) in placement {
        let name = format!("pod-{short}");
        let body = json!({"port": {
            "name": format!("kcni-{id}-{short}"), "network_id": lab.pod_network_id,
            "device_owner": "compute:kuryr", "fixed_ips": [{"subnet_id": lab.pod_subnet_id}]}});
        let port = cloud.post(&format!("{}/ports", cloud.neutron), body).await?;
        let port_id = port["port"]["id"].as_str().context("port id")?.to_string();
        made.ports.push(port_id.clone());
        let tags = json!({"tags": [format!("kuryr.cluster=kcni-{id}"), "kuryr.kind=pod".to_string(),
            format!("kuryr.uid={id}-{short}")]});
        cloud
            .call(
                reqwest::Method::PUT,
                &format!("{}/ports/{port_id}/tags", cloud.neutron),
                Some(tags),
            )
            .await?;
        let ip = port["port"]["fixed_ips"][0]["ip_address"]
            .as_str()
            .context("port IP")?
            .to_string();
        let vrrp_mac = free.next().context("no free VRRP MAC on the pod network")?;
        update_pairs(cloud, &vm.port_id, |pairs| {
            let pair = json!({"ip_address": ip, "mac_address": vrrp_mac});
            if !pairs.contains(&pair) {
                pairs.push(pair);
            }
        })
        .await?;
        made.pairs
            .push((vm.port_id.clone(), ip.clone(), vrrp_mac.clone()));
        pods.push(TestPod {
            name,
            vm: vm.clone(),
            node: format!("kcni-{id}-{}", vm.name),
            port_id,
            ip,
            vrrp_mac,
            netns: TestNs::new("mv"),
        });
    }

    // Pods and their KuryrPorts, as the controller would have written them.
    let pod_api: Api<Pod> = Api::namespaced(client.clone(), ns);
    let kp_api: Api<KuryrPort> = Api::namespaced(client.clone(), ns);
    let mut uids = Vec::new();
    for p in &pods {
        let pod = pod_api
            .create(
                &PostParams::default(),
                &Pod {
                    metadata: ObjectMeta {
                        name: Some(p.name.clone()),
                        ..Default::default()
                    },
                    spec: Some(PodSpec {
                        node_name: Some(p.node.clone()),
                        containers: vec![Container {
                            name: "c".into(),
                            image: Some("local.test/busybox:1".into()),
                            ..Default::default()
                        }],
                        ..Default::default()
                    }),
                    ..Default::default()
                },
            )
            .await?;
        let uid = pod.uid().context("pod uid")?;
        let mut kp = KuryrPort::new(
            &p.name,
            KuryrPortSpec {
                pod_uid: uid.clone(),
                pod_node_name: p.node.clone(),
                pod_static: false,
                vif_type: Some(VifType::NestedMacvlan),
                project_id: None,
                subnet_ids: None,
                security_group_ids: None,
                additional_networks: Vec::new(),
            },
        );
        kp.metadata.labels = Some([(labels::NODE_NAME.to_string(), p.node.clone())].into());
        kp_api.create(&PostParams::default(), &kp).await?;
        let vif = Vif {
            vif_type: VifType::NestedMacvlan,
            port_id: p.port_id.clone(),
            network_id: lab.pod_network_id.clone(),
            mac: "fa:16:3e:00:00:00".into(),
            ips: vec![VifIp {
                address: p.ip.clone(),
                cidr: lab.pod_subnet_cidr.clone(),
                gateway: Some("198.18.0.1".into()),
                subnet_id: Some(lab.pod_subnet_id.clone()),
                routes: vec![],
            }],
            mtu,
            vlan_id: None,
            vrrp_mac: Some(p.vrrp_mac.clone()),
            trunk_id: None,
            parent_port_id: Some(p.vm.port_id.clone()),
            // As the controller writes it with no `link_iface` pinned: the daemon finds the NIC by MAC.
            parent_ifname: None,
            parent_mac: Some(p.vm.mac.clone()),
            vif_name: None,
            bridge_name: None,
            security_group_ids: vec![],
            active: true,
        };
        kp_api
            .patch_status(
                &p.name,
                &PatchParams::default(),
                &Patch::Merge(json!({"status": {"vifs": {"eth0": {"default": true, "vif": vif}}}})),
            )
            .await?;
        uids.push(uid);
    }

    // One daemon per (test) node, making its links from the VM's namespace.
    let mut daemons = Vec::new();
    for (i, vm) in lab.vms[..2].iter().enumerate() {
        daemons.push(TestDaemon::start(
            client.clone(),
            &format!("kcni-{id}-{}", vm.name),
            vm,
            i,
        )?);
    }
    let socket_of = |p: &TestPod| {
        daemons
            .iter()
            .find(|d| d.node == p.node)
            .map(|d| d.socket.clone())
            .unwrap()
    };

    // ADD through the binary.
    for (p, uid) in pods.iter().zip(&uids) {
        let args = format!(
            "IgnoreUnknown=1;K8S_POD_NAMESPACE={ns};K8S_POD_NAME={};K8S_POD_UID={uid}",
            p.name
        );
        let out = plugin(
            "ADD",
            &format!("ctr-{id}-{}", p.name),
            &p.netns.path(),
            &args,
            &socket_of(p),
        )
        .await?;
        ensure!(out.0 == 0, "ADD {} failed: {}", p.name, out.1);
        let r: Value = serde_json::from_str(&out.1)?;
        ensure!(
            r["ips"][0]["address"] == format!("{}/18", p.ip).as_str(),
            "ADD result: {r}"
        );
        ensure!(
            r["interfaces"][0]["mac"] == p.vrrp_mac.as_str(),
            "ADD result: {r}"
        );
        ensure!(r["routes"][0]["gw"] == "198.18.0.1", "ADD result: {r}");
        let link = p.netns.ip_json(&["-d", "link", "show", "dev", "eth0"]);
        ensure!(link[0]["linkinfo"]["info_kind"] == "macvlan", "{link}");
        ensure!(link[0]["address"] == p.vrrp_mac.as_str(), "{link}");
    }

    // Every pod pings every other, across VMs through OVN.
    let mut failed = Vec::new();
    for a in &pods {
        for b in &pods {
            if a.name != b.name && !ping(&a.netns, &b.ip) {
                failed.push(format!(
                    "{} ({}) -> {} ({})",
                    a.name, a.vm.name, b.name, b.vm.name
                ));
            }
        }
    }
    ensure!(failed.is_empty(), "no ping: {failed:?}");

    // DEL removes the interface; the runtime's second DEL (empty CNI_NETNS, no pod args) succeeds.
    for p in &pods {
        let args = format!("IgnoreUnknown=1;K8S_POD_NAMESPACE={ns};K8S_POD_NAME={}", p.name);
        let cid = format!("ctr-{id}-{}", p.name);
        let out = plugin("DEL", &cid, &p.netns.path(), &args, &socket_of(p)).await?;
        ensure!(out.0 == 0, "DEL {} failed: {}", p.name, out.1);
        ensure!(!p.netns.has_link("eth0"), "DEL left eth0 in {}", p.name);
        let out = plugin("DEL", &cid, Path::new(""), "IgnoreUnknown=1", &socket_of(p)).await?;
        ensure!(out.0 == 0, "second DEL {} failed: {}", p.name, out.1);
    }
    // Nothing of ours is left in the VMs.
    for vm in &lab.vms[..2] {
        let links = lab_tests::netns::exec(&vm.netns, "ip", &["-j", "link", "show"])?;
        let text = String::from_utf8_lossy(&links.stdout);
        for p in &pods {
            ensure!(
                !text.contains(&p.vrrp_mac),
                "{} still holds {}'s macvlan",
                vm.name,
                p.name
            );
        }
    }
    Ok(())
}

fn ping(ns: &TestNs, ip: &str) -> bool {
    (0..PING_TRIES).any(|_| ns.ping(ip))
}

struct TestDaemon {
    node: String,
    socket: PathBuf,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl TestDaemon {
    fn start(client: Client, node: &str, vm: &LabVm, i: usize) -> anyhow::Result<Self> {
        let dir = std::env::temp_dir().join(format!("kcni-lab-{}-{i}", std::process::id()));
        let socket = dir.join("cni.sock");
        let cache = NodeCache::new();
        let binder = NetlinkBinder::new(NetlinkBinderConfig {
            host_netns: Some(PathBuf::from(format!("/var/run/netns/{}", vm.netns))),
            link_iface: None,
            bridge: "br-int".into(),
            netns_dir: PathBuf::from("/var/run/netns"),
            macvlan_host_link: true,
            ..NetlinkBinderConfig::default()
        });
        let daemon = Arc::new(Daemon::new(
            cache.clone(),
            binder,
            DaemonConfig {
                add_timeout: Duration::from_secs(60),
            },
        ));
        let listener = server::bind_socket(&socket)?;
        let tasks = vec![
            tokio::spawn(watch::run(client, node.to_string(), cache)),
            tokio::spawn(server::serve(listener, daemon, std::future::pending())),
        ];
        Ok(Self {
            node: node.to_string(),
            socket,
            tasks,
        })
    }
}

impl Drop for TestDaemon {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
        if let Some(dir) = self.socket.parent() {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// Runs the plugin binary as a runtime does; returns (exit code, stdout).
async fn plugin(
    command: &str,
    container: &str,
    netns: &Path,
    args: &str,
    socket: &Path,
) -> anyhow::Result<(i32, String)> {
    let env = vec![
        ("CNI_COMMAND".to_string(), command.to_string()),
        ("CNI_CONTAINERID".to_string(), container.to_string()),
        ("CNI_NETNS".to_string(), netns.display().to_string()),
        ("CNI_IFNAME".to_string(), "eth0".to_string()),
        ("CNI_PATH".to_string(), "/opt/cni/bin".to_string()),
        ("CNI_ARGS".to_string(), args.to_string()),
    ];
    let conf = json!({"cniVersion": "1.0.0", "name": "kuryr", "type": "kuryr-cni",
        "socketPath": socket, "timeoutSeconds": 70})
    .to_string();
    tokio::task::spawn_blocking(move || {
        let mut child = Command::new(env!("CARGO_BIN_EXE_kuryr-cni"))
            .env_clear()
            .envs(env)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()?;
        child.stdin.take().context("stdin")?.write_all(conf.as_bytes())?;
        let o = child.wait_with_output()?;
        Ok((
            o.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&o.stdout).into_owned(),
        ))
    })
    .await?
}
