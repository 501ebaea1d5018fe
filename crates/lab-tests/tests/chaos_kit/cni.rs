//! A CNI daemon killed mid-ADD: the real `kuryr-daemon` binary (a child process, fed by watches of the
//! chaos API server, making its links from a lab VM's namespace with `--host-netns`, as the lab's kubelet
//! nodes run it) and the real `kuryr-cni` plugin driven as a runtime drives it (env + stdin), as in
//! crates/kuryr-cni/tests/lab_macvlan.rs. The KuryrPorts are written by the test (nested-macvlan, so the
//! binding is real on this kernel), in a namespace no controller watches.
//!
//! 1. ADD waits for a VIF that is not active; the daemon is SIGKILLed: ADD fails with a CNI error, nothing
//!    is left in the sandbox or the VM. The daemon restarts, the runtime's DEL succeeds, the VIF turns
//!    active, the retried ADD wires the pod.
//! 2. ADD of an active VIF, the daemon SIGKILLed a few milliseconds in (while binding), several times:
//!    after each restart the retried ADD succeeds and the sandbox holds exactly one `eth0` (no temporary
//!    device), the VM no stray macvlan.
//! 3. DEL of both pods leaves nothing behind.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::{bail, ensure, Context as _};
use kuryr_api::k8s_openapi::api::core::v1::{Container, PodSpec};
use kuryr_api::{
    labels, Api, Client, KuryrPort, KuryrPortSpec, ObjectMeta, Patch, PatchParams, Pod, PostParams,
    ResourceExt, Vif, VifIp, VifType,
};
use lab_tests::{Lab, LabVm};
use serde::Serialize;
use serde_json::{json, Value};

#[derive(Debug, Clone, Default, Serialize)]
pub struct CniReport {
    pub daemon_kills: u32,
    pub adds_failed_by_kill: u32,
    pub adds_retried_ok: u32,
}

struct Daemon {
    bin: PathBuf,
    node: String,
    socket: PathBuf,
    health: u16,
    kubeconfig: PathBuf,
    netns: String,
    log: PathBuf,
    child: Option<Child>,
}

impl Daemon {
    async fn start(&mut self) -> anyhow::Result<()> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)?;
        let child = Command::new(&self.bin)
            .args(["--node-name", &self.node])
            .arg("--socket")
            .arg(&self.socket)
            .args(["--health-addr", &format!("127.0.0.1:{}", self.health)])
            .args(["--add-timeout", "30"])
            .arg("--host-netns")
            .arg(format!("/var/run/netns/{}", self.netns))
            .env("KUBECONFIG", &self.kubeconfig)
            .env("RUST_LOG", "kuryr_cni=debug,info")
            .stdout(Stdio::from(log.try_clone()?))
            .stderr(Stdio::from(log))
            .spawn()
            .context("starting kuryr-daemon")?;
        self.child = Some(child);
        let url = format!("http://127.0.0.1:{}/readyz", self.health);
        for _ in 0..300 {
            if let Ok(r) = reqwest::get(&url).await {
                if r.status().is_success() {
                    return Ok(());
                }
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        bail!("kuryr-daemon not ready within 30 s; see {}", self.log.display())
    }

    fn kill(&mut self) -> anyhow::Result<()> {
        if let Some(mut c) = self.child.take() {
            c.kill()?;
            c.wait()?;
        }
        Ok(())
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.kill();
    }
}

/// A sandbox namespace of the test, deleted on drop.
struct Sandbox(String);

impl Sandbox {
    fn new(name: String) -> anyhow::Result<Self> {
        run("ip", &["netns", "add", &name])?;
        run("ip", &["-n", &name, "link", "set", "lo", "up"])?;
        Ok(Self(name))
    }

    fn path(&self) -> PathBuf {
        PathBuf::from(format!("/var/run/netns/{}", self.0))
    }

    /// Link names other than `lo`.
    fn links(&self) -> anyhow::Result<Vec<String>> {
        let out = run("ip", &["-n", &self.0, "-j", "link", "show"])?;
        let v: Value = serde_json::from_str(&out)?;
        Ok(v.as_array()
            .into_iter()
            .flatten()
            .filter_map(|l| l["ifname"].as_str().map(str::to_owned))
            .filter(|n| n != "lo")
            .collect())
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        let _ = run("ip", &["netns", "del", &self.0]);
    }
}

fn run(cmd: &str, args: &[&str]) -> anyhow::Result<String> {
    let o = Command::new(cmd).args(args).output()?;
    ensure!(
        o.status.success(),
        "{cmd} {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    Ok(String::from_utf8_lossy(&o.stdout).into_owned())
}

/// Devices carrying `mac` (unique to the test) in any namespace under /var/run/netns, as `netns/ifname`.
fn stray_links(mac: &str) -> anyhow::Result<Vec<String>> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/var/run/netns")?.flatten() {
        let ns = entry.file_name().to_string_lossy().into_owned();
        let Ok(out) = run("ip", &["-n", &ns, "-j", "link", "show"]) else {
            continue;
        };
        let v: Value = serde_json::from_str(&out).unwrap_or(Value::Null);
        for l in v.as_array().into_iter().flatten() {
            if l["address"].as_str() == Some(mac) {
                found.push(format!("{ns}/{}", l["ifname"].as_str().unwrap_or("?")));
            }
        }
    }
    Ok(found)
}

struct TestPod {
    name: String,
    uid: String,
    ip: String,
    mac: String,
    sandbox: Sandbox,
}

pub struct Setup<'a> {
    pub lab: &'a Lab,
    pub client: Client,
    pub kubeconfig: PathBuf,
    pub dir: PathBuf,
    pub id: String,
}

pub async fn daemon_killed_mid_add(s: Setup<'_>, rng: &mut fastrand::Rng) -> anyhow::Result<CniReport> {
    let vm = s.lab.vms.last().context("the lab has no VM")?.clone();
    let ns = format!("chaos-cni-{}", s.id);
    lab_tests::cluster::create_namespace_unadmitted(&s.client, &ns).await?;
    let node = format!("chaos-cni-{}", s.id);
    let mut daemon = Daemon {
        bin: lab_tests::cluster::workspace_binary("kuryr-cni", "kuryr-daemon")?,
        node: node.clone(),
        socket: s.dir.join("cni/cni.sock"),
        health: std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port(),
        kubeconfig: s.kubeconfig.clone(),
        netns: vm.netns.clone(),
        log: s.dir.join("kuryr-daemon.log"),
        child: None,
    };
    let plugin = lab_tests::cluster::workspace_binary("kuryr-cni", "kuryr-cni")?;
    let mut report = CniReport::default();
    daemon.start().await?;

    // 1. Killed while ADD waits for the VIF.
    let a = make_pod(&s, &ns, &node, &vm, "a", rng, false).await?;
    let cid_a = format!("chaos-{}-a", s.id);
    let add = spawn_plugin(&plugin, "ADD", &cid_a, &a, &ns, &daemon.socket)?;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    ensure!(!add.is_finished(), "ADD returned before its VIF was active");
    daemon.kill()?;
    report.daemon_kills += 1;
    let (code, out) = add.await??;
    ensure!(code != 0, "ADD succeeded although the daemon was killed: {out}");
    let err: Value = serde_json::from_str(&out).context("a CNI error on stdout")?;
    ensure!(err["code"].as_u64().is_some(), "not a CNI error: {out}");
    report.adds_failed_by_kill += 1;
    ensure!(
        a.sandbox.links()?.is_empty(),
        "the failed ADD left {:?}",
        a.sandbox.links()?
    );
    ensure!(
        stray_links(&a.mac)?.is_empty(),
        "stray: {:?}",
        stray_links(&a.mac)?
    );
    daemon.start().await?;
    let (code, out) = plugin_call(&plugin, "DEL", &cid_a, &a, &ns, &daemon.socket).await?;
    ensure!(code == 0, "the runtime's DEL after the failed ADD: {out}");
    set_active(&s.client, &ns, &a.name).await?;
    let (code, out) = plugin_call(&plugin, "ADD", &cid_a, &a, &ns, &daemon.socket).await?;
    ensure!(code == 0, "retried ADD: {out}");
    report.adds_retried_ok += 1;
    check_wired(&a, &out)?;

    // 2. Killed while binding, a few times.
    let b = make_pod(&s, &ns, &node, &vm, "b", rng, true).await?;
    let cid_b = format!("chaos-{}-b", s.id);
    for _ in 0..3 {
        let add = spawn_plugin(&plugin, "ADD", &cid_b, &b, &ns, &daemon.socket)?;
        tokio::time::sleep(Duration::from_millis(rng.u64(2..40))).await;
        daemon.kill()?;
        report.daemon_kills += 1;
        let (code, _) = add.await??;
        if code != 0 {
            report.adds_failed_by_kill += 1;
        }
        daemon.start().await?;
        if code != 0 {
            let (code, out) = plugin_call(&plugin, "DEL", &cid_b, &b, &ns, &daemon.socket).await?;
            ensure!(code == 0, "the runtime's DEL after the failed ADD: {out}");
        }
        let (code, out) = plugin_call(&plugin, "ADD", &cid_b, &b, &ns, &daemon.socket).await?;
        ensure!(code == 0, "ADD after a daemon killed mid-ADD: {out}");
        report.adds_retried_ok += 1;
        check_wired(&b, &out)?;
    }

    // 3. DEL leaves nothing.
    for (p, cid) in [(&a, &cid_a), (&b, &cid_b)] {
        let (code, out) = plugin_call(&plugin, "DEL", cid, p, &ns, &daemon.socket).await?;
        ensure!(code == 0, "DEL {}: {out}", p.name);
        ensure!(p.sandbox.links()?.is_empty(), "DEL left {:?}", p.sandbox.links()?);
        ensure!(
            stray_links(&p.mac)?.is_empty(),
            "stray: {:?}",
            stray_links(&p.mac)?
        );
    }
    daemon.kill()?;
    let pods: Api<Pod> = Api::namespaced(s.client.clone(), &ns);
    for p in [&a, &b] {
        let _ = pods
            .delete(&p.name, &kuryr_api::DeleteParams::default().grace_period(0))
            .await;
    }
    lab_tests::cluster::delete_namespace(&s.client, &ns).await;
    Ok(report)
}

/// The sandbox holds exactly `eth0` with the pod's MAC and IP, nothing else (no temporary device).
fn check_wired(p: &TestPod, out: &str) -> anyhow::Result<()> {
    let r: Value = serde_json::from_str(out)?;
    ensure!(
        r["ips"][0]["address"].as_str() == Some(&format!("{}/18", p.ip)),
        "ADD result: {r}"
    );
    let links = p.sandbox.links()?;
    ensure!(links == vec!["eth0".to_owned()], "{}: links {links:?}", p.name);
    let strays: Vec<String> = stray_links(&p.mac)?
        .into_iter()
        .filter(|l| !l.starts_with(&format!("{}/", p.sandbox.0)))
        .collect();
    ensure!(strays.is_empty(), "{}: stray devices {strays:?}", p.name);
    Ok(())
}

async fn make_pod(
    s: &Setup<'_>,
    ns: &str,
    node: &str,
    vm: &LabVm,
    short: &str,
    rng: &mut fastrand::Rng,
    active: bool,
) -> anyhow::Result<TestPod> {
    let name = format!("cni-{short}");
    let pods: Api<Pod> = Api::namespaced(s.client.clone(), ns);
    let pod = pods
        .create(
            &PostParams::default(),
            &Pod {
                metadata: ObjectMeta {
                    name: Some(name.clone()),
                    ..ObjectMeta::default()
                },
                spec: Some(PodSpec {
                    node_name: Some(node.to_owned()),
                    containers: vec![Container {
                        name: "c".into(),
                        image: Some("local.test/pause:1".into()),
                        ..Container::default()
                    }],
                    ..PodSpec::default()
                }),
                ..Pod::default()
            },
        )
        .await?;
    let uid = pod.uid().context("pod uid")?;
    let mut kp = KuryrPort::new(
        &name,
        KuryrPortSpec {
            pod_uid: uid.clone(),
            pod_node_name: node.to_owned(),
            pod_static: false,
            vif_type: Some(VifType::NestedMacvlan),
            project_id: None,
            subnet_ids: None,
            security_group_ids: None,
            additional_networks: Vec::new(),
        },
    );
    kp.metadata.labels = Some([(labels::NODE_NAME.to_string(), node.to_owned())].into());
    let kps: Api<KuryrPort> = Api::namespaced(s.client.clone(), ns);
    kps.create(&PostParams::default(), &kp).await?;
    let mac = format!(
        "0a:c4:{:02x}:{:02x}:{:02x}:{:02x}",
        rng.u8(..),
        rng.u8(..),
        rng.u8(..),
        rng.u8(..)
    );
    let ip = format!("198.18.{}.{}", rng.u8(60..62), rng.u8(2..250));
    let vif = Vif {
        vif_type: VifType::NestedMacvlan,
        port_id: format!("{:08x}-chaos-cni-{short}", rng.u32(..)),
        network_id: "chaos".into(),
        mac: "fa:16:3e:00:00:01".into(),
        ips: vec![VifIp {
            address: ip.clone(),
            cidr: "198.18.0.0/18".into(),
            gateway: Some("198.18.0.1".into()),
            subnet_id: None,
            routes: vec![],
        }],
        mtu: Some(1442),
        vlan_id: None,
        vrrp_mac: Some(mac.clone()),
        trunk_id: None,
        parent_port_id: Some(vm.port_id.clone()),
        parent_ifname: Some("eth0".into()),
        parent_mac: Some(vm.mac.clone()),
        vif_name: None,
        bridge_name: None,
        security_group_ids: vec![],
        active,
    };
    kps.patch_status(
        &name,
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"vifs": {"eth0": {"default": true, "vif": vif}}}})),
    )
    .await?;
    Ok(TestPod {
        sandbox: Sandbox::new(format!("chaos-{}-{short}", s.id))?,
        name,
        uid,
        ip,
        mac,
    })
}

async fn set_active(client: &Client, ns: &str, name: &str) -> anyhow::Result<()> {
    let kps: Api<KuryrPort> = Api::namespaced(client.clone(), ns);
    let mut kp = kps.get(name).await?;
    let st = kp.status.as_mut().context("status")?;
    for v in st.vifs.values_mut() {
        v.vif.active = true;
    }
    let vifs = serde_json::to_value(&st.vifs)?;
    kps.patch_status(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"vifs": vifs}})),
    )
    .await?;
    Ok(())
}

type PluginRun = tokio::task::JoinHandle<anyhow::Result<(i32, String)>>;

fn spawn_plugin(
    plugin: &Path,
    command: &str,
    cid: &str,
    p: &TestPod,
    ns: &str,
    socket: &Path,
) -> anyhow::Result<PluginRun> {
    let env = [
        ("CNI_COMMAND".to_owned(), command.to_owned()),
        ("CNI_CONTAINERID".to_owned(), cid.to_owned()),
        ("CNI_NETNS".to_owned(), p.sandbox.path().display().to_string()),
        ("CNI_IFNAME".to_owned(), "eth0".to_owned()),
        ("CNI_PATH".to_owned(), "/opt/cni/bin".to_owned()),
        (
            "CNI_ARGS".to_owned(),
            format!(
                "IgnoreUnknown=1;K8S_POD_NAMESPACE={ns};K8S_POD_NAME={};K8S_POD_UID={}",
                p.name, p.uid
            ),
        ),
    ];
    let conf = json!({"cniVersion": "1.0.0", "name": "kuryr", "type": "kuryr-cni",
        "socketPath": socket, "timeoutSeconds": 40})
    .to_string();
    let plugin = plugin.to_owned();
    Ok(tokio::task::spawn_blocking(move || {
        let mut child = Command::new(plugin)
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
    }))
}

async fn plugin_call(
    plugin: &Path,
    command: &str,
    cid: &str,
    p: &TestPod,
    ns: &str,
    socket: &Path,
) -> anyhow::Result<(i32, String)> {
    spawn_plugin(plugin, command, cid, p, ns, socket)?.await?
}
