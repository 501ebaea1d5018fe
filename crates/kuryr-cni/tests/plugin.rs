#![allow(clippy::unwrap_used)] // test helpers outside #[test] fns
//! Drives the `kuryr-cni` binary exactly as a container runtime does (env + stdin → stdout JSON + exit code)
//! against a kuryr-daemon started in-process on a fake cache (no Kubernetes). Most tests use a recording fake
//! binder; one binds a real macvlan in private namespaces (root).

mod common;

use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kuryr_api::{Vif, VifType};
use kuryr_cni::binding::{BindError, Binder, Bound, NetlinkBinder, NetlinkBinderConfig};
use kuryr_cni::daemon::cache::PodState;
use kuryr_cni::daemon::{server, Daemon, DaemonConfig, NodeCache};
use kuryr_cni::testing::mk_port;
use serde_json::Value;

/// Records calls; binds nothing.
#[derive(Clone, Default)]
struct FakeBinder {
    calls: Arc<Mutex<Vec<String>>>,
}

impl Binder for FakeBinder {
    async fn bind(&self, netns: &Path, ifname: &str, vif: &Vif, _default: bool) -> Result<Bound, BindError> {
        self.calls
            .lock()
            .unwrap()
            .push(format!("bind {} {ifname}", netns.display()));
        Ok(Bound {
            ifname: ifname.into(),
            mac: vif.mac.clone(),
            mtu: vif.mtu,
            host_ifname: (vif.vif_type == VifType::NeutronVif)
                .then(|| kuryr_cni::binding::veth::host_ifname(vif)),
        })
    }

    async fn unbind(&self, netns: Option<&Path>, ifname: &str, host: &[String]) -> Result<(), BindError> {
        let ns = netns.map(|p| p.display().to_string()).unwrap_or_default();
        self.calls
            .lock()
            .unwrap()
            .push(format!("unbind {ns} {ifname} {host:?}"));
        Ok(())
    }

    async fn check(&self, _netns: &Path, _ifname: &str, _vif: &Vif) -> Result<(), BindError> {
        Ok(())
    }
}

static SEQ: AtomicUsize = AtomicUsize::new(0);

struct TestDaemon {
    socket: PathBuf,
    cache: Arc<NodeCache>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for TestDaemon {
    fn drop(&mut self) {
        self.task.abort();
        if let Some(dir) = self.socket.parent() {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

fn start<B: Binder>(binder: B, add_timeout: Duration) -> TestDaemon {
    let dir = std::env::temp_dir().join(format!(
        "kcni-test-{}-{}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    ));
    let socket = dir.join("cni.sock");
    let cache = NodeCache::new();
    let daemon = Arc::new(Daemon::new(cache.clone(), binder, DaemonConfig { add_timeout }));
    let listener = server::bind_socket(&socket).unwrap();
    let task = tokio::spawn(server::serve(listener, daemon, std::future::pending()));
    TestDaemon { socket, cache, task }
}

struct Out {
    code: i32,
    json: Option<Value>,
}

fn conf(version: &str, socket: &Path) -> String {
    format!(
        r#"{{"cniVersion":"{version}","name":"kuryr","type":"kuryr-cni","socketPath":"{}","timeoutSeconds":20}}"#,
        socket.display()
    )
}

/// Runs the plugin binary with only the given environment.
async fn plugin(env: &[(&str, &str)], stdin: &str) -> Out {
    let env: Vec<(String, String)> = env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    let stdin = stdin.to_string();
    tokio::task::spawn_blocking(move || {
        let mut child = Command::new(env!("CARGO_BIN_EXE_kuryr-cni"))
            .env_clear()
            .envs(env)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(stdin.as_bytes()).unwrap();
        let o = child.wait_with_output().unwrap();
        let text = String::from_utf8_lossy(&o.stdout).into_owned();
        Out {
            code: o.status.code().unwrap_or(-1),
            json: (!text.trim().is_empty()).then(|| serde_json::from_str(&text).unwrap()),
        }
    })
    .await
    .unwrap()
}

fn env<'a>(command: &'a str, netns: &'a str, args: &'a str) -> Vec<(&'a str, &'a str)> {
    vec![
        ("CNI_COMMAND", command),
        ("CNI_CONTAINERID", "0123456789abcdef"),
        ("CNI_NETNS", netns),
        ("CNI_IFNAME", "eth0"),
        ("CNI_PATH", "/opt/cni/bin"),
        ("CNI_ARGS", args),
    ]
}

const ARGS: &str = "K8S_POD_UID=uid-1;IgnoreUnknown=1;K8S_POD_NAME=web-0;K8S_POD_NAMESPACE=shop;K8S_POD_INFRA_CONTAINER_ID=0123";

fn live() -> Option<PodState> {
    Some(PodState {
        uid: "uid-1".into(),
        deleting: false,
    })
}

fn ready_port(v: Vif) -> kuryr_api::KuryrPort {
    mk_port("shop", "web-0", "uid-1", vec![("eth0", v)])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn add_check_del_and_a_second_empty_del_through_the_binary() {
    let fake = FakeBinder::default();
    let d = start(fake.clone(), Duration::from_secs(5));
    d.cache.set_pod_state("shop", "web-0", live());
    d.cache
        .apply_port(ready_port(common::vif(VifType::NestedMacvlan, 81)));
    let c = conf("1.0.0", &d.socket);

    let out = plugin(&env("ADD", "/var/run/netns/cni-x", ARGS), &c).await;
    assert_eq!(out.code, 0, "{:?}", out.json);
    let r = out.json.unwrap();
    assert_eq!(r["cniVersion"], "1.0.0");
    assert_eq!(r["interfaces"][0]["name"], "eth0");
    assert_eq!(r["interfaces"][0]["sandbox"], "/var/run/netns/cni-x");
    assert_eq!(r["ips"][0]["address"], "198.18.200.81/24");
    assert_eq!(r["ips"][0]["gateway"], "198.18.200.1");
    assert_eq!(r["ips"][0]["interface"], 0);
    assert!(r["ips"][0].get("version").is_none());
    assert_eq!(r["routes"][0]["dst"], "0.0.0.0/0");

    let out = plugin(&env("CHECK", "/var/run/netns/cni-x", ARGS), &c).await;
    assert_eq!((out.code, out.json), (0, None));
    let out = plugin(&env("DEL", "/var/run/netns/cni-x", ARGS), &c).await;
    assert_eq!((out.code, out.json), (0, None));
    // containerd's second DEL: empty netns, no prevResult, little context.
    let out = plugin(&env("DEL", "", "IgnoreUnknown=1"), &c).await;
    assert_eq!((out.code, out.json), (0, None));
    let calls = fake.calls.lock().unwrap().clone();
    assert_eq!(
        calls,
        vec![
            "bind /var/run/netns/cni-x eth0",
            "unbind /var/run/netns/cni-x eth0 []",
            "unbind  eth0 []"
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_del_of_an_older_sandbox_leaves_the_new_host_end_alone() {
    let fake = FakeBinder::default();
    let d = start(fake.clone(), Duration::from_secs(5));
    d.cache.set_pod_state("shop", "web-0", live());
    d.cache
        .apply_port(ready_port(common::vif(VifType::NeutronVif, 85)));
    let c = conf("1.0.0", &d.socket);
    let mut add = env("ADD", "/var/run/netns/new", ARGS);
    add[1] = ("CNI_CONTAINERID", "newsandbox");
    assert_eq!(plugin(&add, &c).await.code, 0);
    // The old sandbox's DEL arrives late: its own netns only, never the shared host end.
    let mut old = env("DEL", "/var/run/netns/old", ARGS);
    old[1] = ("CNI_CONTAINERID", "oldsandbox");
    assert_eq!(plugin(&old, &c).await.code, 0);
    let mut del = env("DEL", "/var/run/netns/new", ARGS);
    del[1] = ("CNI_CONTAINERID", "newsandbox");
    assert_eq!(plugin(&del, &c).await.code, 0);
    let calls = fake.calls.lock().unwrap().clone();
    assert_eq!(calls[1], "unbind /var/run/netns/old eth0 []");
    assert_eq!(calls[2], "unbind /var/run/netns/new eth0 [\"tap085e4567-e8\"]");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn old_conflist_versions_get_their_result_shape() {
    let d = start(FakeBinder::default(), Duration::from_secs(5));
    d.cache.set_pod_state("shop", "web-0", live());
    d.cache
        .apply_port(ready_port(common::vif(VifType::NestedMacvlan, 82)));
    for v in ["0.3.1", "0.4.0"] {
        let out = plugin(&env("ADD", "/var/run/netns/cni-x", ARGS), &conf(v, &d.socket)).await;
        assert_eq!(out.code, 0);
        let r = out.json.unwrap();
        assert_eq!(r["cniVersion"], v);
        assert_eq!(r["ips"][0]["version"], "4");
    }
    let out = plugin(
        &env("ADD", "/var/run/netns/cni-x", ARGS),
        &conf("1.1.0", &d.socket),
    )
    .await;
    assert_eq!(out.json.unwrap()["interfaces"][0]["mtu"], 1400);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_vif_not_yet_active_is_try_again_later() {
    let d = start(FakeBinder::default(), Duration::from_millis(300));
    d.cache.set_pod_state("shop", "web-0", live());
    let mut v = common::vif(VifType::NestedMacvlan, 83);
    v.active = false;
    d.cache.apply_port(ready_port(v));
    let out = plugin(
        &env("ADD", "/var/run/netns/cni-x", ARGS),
        &conf("1.0.0", &d.socket),
    )
    .await;
    assert_eq!(out.code, 1);
    let e = out.json.unwrap();
    assert_eq!(e["code"], 11);
    assert_eq!(e["cniVersion"], "1.0.0");
    assert!(e["details"].as_str().unwrap().contains("not active"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_or_replaced_pod_is_code_3_at_once() {
    let d = start(FakeBinder::default(), Duration::from_secs(30));
    d.cache.set_pod_state(
        "shop",
        "web-0",
        Some(PodState {
            uid: "uid-2".into(),
            deleting: false,
        }),
    );
    let started = std::time::Instant::now();
    let out = plugin(
        &env("ADD", "/var/run/netns/cni-x", ARGS),
        &conf("1.0.0", &d.socket),
    )
    .await;
    assert_eq!(out.code, 1);
    assert_eq!(out.json.unwrap()["code"], 3);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "must not wait out the ADD timeout"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn daemon_down_is_a_clear_error_json() {
    let sock = PathBuf::from("/run/kuryr-test-nonexistent/cni.sock");
    let out = plugin(&env("ADD", "/var/run/netns/cni-x", ARGS), &conf("1.0.0", &sock)).await;
    assert_eq!(out.code, 1);
    let e = out.json.unwrap();
    assert_eq!(e["code"], 11);
    let msg = e["msg"].as_str().unwrap();
    assert!(
        msg.contains("kuryr-daemon is not reachable") && msg.contains(sock.to_str().unwrap()),
        "{msg}"
    );
    assert!(e["details"].as_str().unwrap().contains("kuryr-daemon"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_invocations_are_refused_by_the_plugin_itself() {
    let sock = PathBuf::from("/run/kuryr-test-nonexistent/cni.sock");
    let c = conf("1.0.0", &sock);
    let mut no_ifname = env("ADD", "/n", ARGS);
    no_ifname.retain(|(k, _)| *k != "CNI_IFNAME");
    let out = plugin(&no_ifname, &c).await;
    assert_eq!((out.code, out.json.unwrap()["code"].clone()), (1, 4.into()));
    let out = plugin(&env("ADD", "/n", ARGS), "{not json").await;
    assert_eq!(out.json.unwrap()["code"], 6);
    let out = plugin(&env("ADD", "/n", ARGS), &conf("0.2.0", &sock)).await;
    assert_eq!(out.json.unwrap()["code"], 1);
    let out = plugin(&env("FROB", "/n", ARGS), &c).await;
    assert_eq!(out.json.unwrap()["code"], 4);
    let out = plugin(&[("CNI_COMMAND", "VERSION")], r#"{"cniVersion":"0.4.0"}"#).await;
    assert_eq!(out.code, 0);
    let v = out.json.unwrap();
    assert_eq!(v["cniVersion"], "0.4.0");
    assert!(v["supportedVersions"]
        .as_array()
        .unwrap()
        .contains(&"1.1.0".into()));
}

/// `--version` prints `<binary> <version> (<commit>)`. kuryr-cni answers it without reading stdin (held
/// open here, as a terminal would be); the CNI VERSION command still answers JSON (above).
#[test]
fn version_flags_print_the_build_line() {
    for (name, bin) in [
        ("kuryr-cni", env!("CARGO_BIN_EXE_kuryr-cni")),
        ("kuryr-daemon", env!("CARGO_BIN_EXE_kuryr-daemon")),
    ] {
        let mut child = Command::new(bin)
            .arg("--version")
            .env_clear()
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let _open_stdin = child.stdin.take();
        // Its exit, as it happens (stdin stays open meanwhile); a child still running after 20 s is killed.
        let pid = child.id();
        let (exited, exit) = std::sync::mpsc::channel();
        std::thread::spawn(move || exited.send(child.wait_with_output()));
        let Ok(out) = exit.recv_timeout(Duration::from_secs(20)) else {
            let _ = Command::new("kill").args(["-KILL", &pid.to_string()]).status();
            panic!("{name} --version waited (for stdin?)");
        };
        let out = out.unwrap();
        assert!(out.status.success(), "{name}: {:?}", out.status);
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            format!("{name} {}\n", kuryr_version::VERSION)
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_follows_cache_sync_and_gc_succeeds() {
    let d = start(FakeBinder::default(), Duration::from_secs(1));
    let c = conf("1.1.0", &d.socket);
    let out = plugin(&[("CNI_COMMAND", "STATUS")], &c).await;
    assert_eq!((out.code, out.json.unwrap()["code"].clone()), (1, 50.into()));
    d.cache.reset_ports(vec![]);
    d.cache.reset_pods(std::iter::empty());
    let out = plugin(&[("CNI_COMMAND", "STATUS")], &c).await;
    assert_eq!((out.code, out.json), (0, None));
    let out = plugin(&[("CNI_COMMAND", "GC")], &c).await;
    assert_eq!((out.code, out.json), (0, None));
}

#[tokio::test]
async fn the_socket_is_root_only() {
    let d = start(FakeBinder::default(), Duration::from_secs(1));
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&d.socket), 0o600);
    assert_eq!(mode(d.socket.parent().unwrap()), 0o700);
}

/// A directory left open by someone (0755) and a leftover socket file (0666) end up 0700 and 0600; a
/// symlinked, world-writable or foreign directory is refused rather than served from.
#[tokio::test]
async fn the_socket_directory_is_made_private_or_refused() {
    use std::os::unix::fs::MetadataExt;
    let mode = |p: &Path| std::fs::symlink_metadata(p).unwrap().mode() & 0o777;
    let base = std::env::temp_dir().join(format!("kcni-sockdir-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    let open = base.join("open");
    std::fs::create_dir_all(&open).unwrap();
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o755)).unwrap();
    let sock = open.join("cni.sock");
    std::fs::write(&sock, "leftover").unwrap();
    std::fs::set_permissions(&sock, std::fs::Permissions::from_mode(0o666)).unwrap();
    let listener = server::bind_socket(&sock).unwrap();
    assert_eq!((mode(&open), mode(&sock)), (0o700, 0o600));
    drop(listener);

    let shared = base.join("shared");
    std::fs::create_dir_all(&shared).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let e = server::bind_socket(&shared.join("cni.sock")).unwrap_err();
    assert!(e.to_string().contains("writable by every user"), "{e}");
    assert_eq!(mode(&shared), 0o777, "a shared directory is left as it was");

    let link = base.join("link");
    std::os::unix::fs::symlink(&shared, &link).unwrap();
    let e = server::bind_socket(&link.join("cni.sock")).unwrap_err();
    assert!(e.to_string().contains("not a directory"), "{e}");

    // Another user's directory (only root can make one for the test).
    if std::fs::metadata("/proc/self").unwrap().uid() == 0 {
        let foreign = base.join("foreign");
        std::fs::create_dir_all(&foreign).unwrap();
        std::os::unix::fs::chown(&foreign, Some(65534), Some(65534)).unwrap();
        let e = server::bind_socket(&foreign.join("cni.sock")).unwrap_err();
        assert!(e.to_string().contains("owned by uid 65534"), "{e}");
    }
    std::fs::remove_dir_all(&base).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_macvlan_add_check_del_through_the_binary() {
    if !common::require_root("real_macvlan_add_check_del_through_the_binary") {
        return;
    }
    let vm = common::mk_vm();
    let pod = common::TestNs::new("pod");
    let binder = NetlinkBinder::new(NetlinkBinderConfig {
        host_netns: Some(vm.path()),
        link_iface: Some("eth0".into()),
        bridge: "unused".into(),
        netns_dir: PathBuf::from("/var/run/netns"),
        macvlan_host_link: true,
        ..NetlinkBinderConfig::default()
    });
    let d = start(binder, Duration::from_secs(5));
    d.cache.set_pod_state("shop", "web-0", live());
    d.cache
        .apply_port(ready_port(common::vif(VifType::NestedMacvlan, 84)));
    let c = conf("1.0.0", &d.socket);
    let netns = pod.path().display().to_string();

    let out = plugin(&env("ADD", &netns, ARGS), &c).await;
    assert_eq!(out.code, 0, "{:?}", out.json);
    assert_eq!(out.json.unwrap()["interfaces"][0]["mac"], "00:00:5e:00:01:54");
    assert!(pod.has_link("eth0"));
    let out = plugin(&env("CHECK", &netns, ARGS), &c).await;
    assert_eq!(out.code, 0, "{:?}", out.json);
    pod.ip(&["link", "set", "eth0", "address", "00:00:5e:00:01:55"]);
    let out = plugin(&env("CHECK", &netns, ARGS), &c).await;
    assert_eq!((out.code, out.json.unwrap()["code"].clone()), (1, 102.into()));
    let out = plugin(&env("DEL", &netns, ARGS), &c).await;
    assert_eq!(out.code, 0, "{:?}", out.json);
    assert!(!pod.has_link("eth0"));
    let out = plugin(&env("DEL", "", "IgnoreUnknown=1"), &c).await;
    assert_eq!(out.code, 0, "{:?}", out.json);
}

/// ADD requests this test binary's kuryr-daemons have taken in, by pod (`namespace/name`), from the
/// handler's `request` log event: the handler logs it and, in the same poll, starts waiting for the pod's VIFs
/// (no `.await` in between), so a pod listed here has an ADD waiting in the daemon or already served.
fn adds_received() -> tokio::sync::watch::Receiver<Vec<String>> {
    static SEEN: std::sync::OnceLock<tokio::sync::watch::Sender<Vec<String>>> = std::sync::OnceLock::new();
    SEEN.get_or_init(|| {
        let (seen, _) = tokio::sync::watch::channel(Vec::new());
        tracing::subscriber::set_global_default(AddRequests(seen.clone()))
            .expect("nothing else in this test binary sets the global tracing subscriber");
        seen
    })
    .subscribe()
}

/// A tracing subscriber that only records the pods of kuryr-daemon's ADD `request` events.
struct AddRequests(tokio::sync::watch::Sender<Vec<String>>);

#[derive(Default)]
struct RequestEvent {
    message: String,
    command: String,
    pod: String,
}

impl tracing::field::Visit for RequestEvent {
    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        self.record_debug(field, &format_args!("{value}"));
    }

    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        let slot = match field.name() {
            "message" => &mut self.message,
            "command" => &mut self.command,
            "pod" => &mut self.pod,
            _ => return,
        };
        *slot = format!("{value:?}");
    }
}

impl tracing::Subscriber for AddRequests {
    fn enabled(&self, meta: &tracing::Metadata<'_>) -> bool {
        meta.is_event()
            && meta.target().starts_with("kuryr_cni::daemon")
            && *meta.level() <= tracing::Level::INFO
    }

    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }

    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}

    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}

    fn event(&self, event: &tracing::Event<'_>) {
        let mut e = RequestEvent::default();
        event.record(&mut e);
        if e.message == "request" && e.command == "ADD" {
            self.0.send_modify(|pods| pods.push(e.pod));
        }
    }

    fn enter(&self, _: &tracing::span::Id) {}

    fn exit(&self, _: &tracing::span::Id) {}
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_waiting_adds_are_served_concurrently_and_woken_together() {
    // Its own namespace: no other test of this binary sends ADDs for these pods.
    const NS: &str = "twenty";
    let mut received = adds_received();
    let d = start(FakeBinder::default(), Duration::from_secs(10));
    let mk = |i: u8, active: bool| {
        let mut v = common::vif(VifType::NestedMacvlan, 100 + i);
        v.active = active;
        mk_port(NS, &format!("web-{i}"), &format!("uid-{i}"), vec![("eth0", v)])
    };
    for i in 0..20u8 {
        d.cache.set_pod_state(
            NS,
            &format!("web-{i}"),
            Some(PodState {
                uid: format!("uid-{i}"),
                deleting: false,
            }),
        );
        d.cache.apply_port(mk(i, false));
    }
    let c = conf("1.0.0", &d.socket);
    let mut runs = Vec::new();
    for i in 0..20u8 {
        let (c, args) = (
            c.clone(),
            format!("K8S_POD_NAMESPACE={NS};K8S_POD_NAME=web-{i};K8S_POD_UID=uid-{i}"),
        );
        runs.push(tokio::spawn(async move {
            plugin(&env("ADD", "/var/run/netns/cni-x", &args), &c).await
        }));
    }
    // Every ADD has reached kuryr-daemon and waits there for its inactive VIF.
    let pods: Vec<String> = (0..20).map(|i| format!("{NS}/web-{i}")).collect();
    let all_waiting = tokio::time::timeout(
        Duration::from_secs(30),
        received.wait_for(|seen| pods.iter().all(|p| seen.contains(p))),
    )
    .await
    .map(|r| r.is_ok());
    assert!(
        matches!(all_waiting, Ok(true)),
        "not all 20 ADDs reached kuryr-daemon within 30 s; those that did: {:?}",
        *received.borrow()
    );
    let started = std::time::Instant::now();
    for i in 0..20u8 {
        d.cache.apply_port(mk(i, true));
    }
    for r in runs {
        let out = r.await.unwrap();
        assert_eq!(out.code, 0, "{:?}", out.json);
    }
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_add_leaves_nothing_half_plugged() {
    if !common::require_root("a_failed_add_leaves_nothing_half_plugged") {
        return;
    }
    let vm = common::mk_vm();
    let pod = common::TestNs::new("pod");
    let binder = NetlinkBinder::new(NetlinkBinderConfig {
        host_netns: Some(vm.path()),
        link_iface: Some("eth0".into()),
        bridge: "unused".into(),
        netns_dir: PathBuf::from("/var/run/netns"),
        macvlan_host_link: true,
        ..NetlinkBinderConfig::default()
    });
    let d = start(binder, Duration::from_secs(5));
    d.cache.set_pod_state("shop", "web-0", live());
    // The device can be made, but its route cannot: the gateway is outside every address of the pod.
    let mut v = common::vif(VifType::NestedMacvlan, 86);
    v.ips[0].gateway = Some("203.0.113.1".into());
    d.cache.apply_port(ready_port(v));
    let netns = pod.path().display().to_string();
    let out = plugin(&env("ADD", &netns, ARGS), &conf("1.0.0", &d.socket)).await;
    assert_eq!(out.code, 1);
    let e = out.json.unwrap();
    assert_eq!(e["code"], 101, "{e}");
    assert!(e["details"].as_str().unwrap().contains("route"), "{e}");
    assert!(!pod.has_link("eth0"), "the failed ADD left its interface behind");
    let left = vm.ip_json(&["link", "show"]);
    assert_eq!(
        left.as_array().unwrap().len(),
        3,
        "only lo, eth0, eth0p in the VM: {left}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_add_whose_parent_mac_no_link_carries_is_a_101_naming_the_mac_and_the_links() {
    if !common::require_root("an_add_whose_parent_mac_no_link_carries_is_a_101_naming_the_mac_and_the_links")
    {
        return;
    }
    let vm = common::mk_vm();
    let pod = common::TestNs::new("pod");
    let d = start(
        NetlinkBinder::new(NetlinkBinderConfig {
            host_netns: Some(vm.path()),
            link_iface: None,
            bridge: "unused".into(),
            netns_dir: PathBuf::from("/var/run/netns"),
            macvlan_host_link: true,
            ..NetlinkBinderConfig::default()
        }),
        Duration::from_secs(5),
    );
    d.cache.set_pod_state("shop", "web-0", live());
    let mut v = common::vif(VifType::NestedMacvlan, 89);
    v.parent_ifname = None;
    v.parent_mac = Some("fa:16:3e:77:77:77".into());
    d.cache.apply_port(ready_port(v));
    let netns = pod.path().display().to_string();
    let out = plugin(&env("ADD", &netns, ARGS), &conf("1.0.0", &d.socket)).await;
    assert_eq!(out.code, 1);
    let e = out.json.unwrap();
    assert_eq!(e["code"], 101, "{e}");
    let details = e["details"].as_str().unwrap();
    assert!(
        details.contains("fa:16:3e:77:77:77") && details.contains("eth0 ") && details.contains("eth0p "),
        "{e}"
    );
    assert!(!pod.has_link("eth0"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gc_unplugs_attachments_the_runtime_no_longer_lists() {
    let fake = FakeBinder::default();
    let d = start(fake.clone(), Duration::from_secs(5));
    d.cache.set_pod_state("shop", "web-0", live());
    d.cache
        .apply_port(ready_port(common::vif(VifType::NestedMacvlan, 87)));
    let c = conf("1.1.0", &d.socket);
    for (id, ns) in [("aaaa", "/var/run/netns/cni-a"), ("bbbb", "/var/run/netns/cni-b")] {
        let mut e = env("ADD", ns, ARGS);
        e.retain(|(k, _)| *k != "CNI_CONTAINERID");
        e.push(("CNI_CONTAINERID", id));
        assert_eq!(plugin(&e, &c).await.code, 0);
    }
    let mut gc: Value = serde_json::from_str(&c).unwrap();
    gc["cni.dev/valid-attachments"] = serde_json::json!([{"containerID": "bbbb", "ifname": "eth0"}]);
    let out = plugin(&[("CNI_COMMAND", "GC")], &gc.to_string()).await;
    assert_eq!((out.code, out.json), (0, None));
    let calls = fake.calls.lock().unwrap().clone();
    assert_eq!(calls[2..], ["unbind /var/run/netns/cni-a eth0 []".to_string()]);
    // A second GC has nothing left to collect.
    assert_eq!(plugin(&[("CNI_COMMAND", "GC")], &gc.to_string()).await.code, 0);
    assert_eq!(fake.calls.lock().unwrap().len(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_gets_the_spec_error_and_touches_nothing() {
    let fake = FakeBinder::default();
    let d = start(fake.clone(), Duration::from_secs(2));
    d.cache.set_pod_state("shop", "web-0", live());
    d.cache
        .apply_port(ready_port(common::vif(VifType::NestedMacvlan, 88)));
    let c = conf("1.0.0", &d.socket);
    let ns = "/var/run/netns/cni-bad";
    let uid_mismatch = ARGS.replace("uid-1", "uid-9");
    let mut no_netns = env("ADD", ns, ARGS);
    no_netns.retain(|(k, _)| *k != "CNI_NETNS");
    let mut no_command = env("ADD", ns, ARGS);
    no_command.retain(|(k, _)| *k != "CNI_COMMAND");
    /// (what, environment, stdin, expected code)
    type Case<'a> = (&'a str, Vec<(&'a str, &'a str)>, String, u32);
    let cases: Vec<Case<'_>> = vec![
        (
            "malformed stdin",
            env("ADD", ns, ARGS),
            "{\"cniVersion\":".into(),
            6,
        ),
        ("stdin not an object", env("ADD", ns, ARGS), "[1]".into(), 6),
        ("no CNI_COMMAND", no_command, c.clone(), 4),
        ("no CNI_NETNS on ADD", no_netns, c.clone(), 4),
        ("unknown command", env("PLUG", ns, ARGS), c.clone(), 4),
        (
            "wrong cniVersion",
            env("ADD", ns, ARGS),
            conf("2.0.0", &d.socket),
            1,
        ),
        (
            "CHECK on 0.3.1",
            env("CHECK", ns, ARGS),
            conf("0.3.1", &d.socket),
            1,
        ),
        ("pod UID mismatch", env("ADD", ns, &uid_mismatch), c.clone(), 3),
        (
            "no pod name",
            env("ADD", ns, "K8S_POD_NAMESPACE=shop"),
            c.clone(),
            4,
        ),
    ];
    for (what, e, stdin, code) in cases {
        let out = plugin(&e, &stdin).await;
        assert_eq!(out.code, 1, "{what}");
        let j = out.json.unwrap_or_else(|| panic!("{what}: no error JSON"));
        assert_eq!(j["code"], code, "{what}: {j}");
        assert!(j["msg"].as_str().is_some_and(|m| !m.is_empty()), "{what}: {j}");
        assert!(j["cniVersion"].is_string(), "{what}: {j}");
    }
    assert!(
        fake.calls.lock().unwrap().is_empty(),
        "bad input reached the binder"
    );
}
