#![allow(clippy::unwrap_used, clippy::expect_used)] // a benchmark program, not product code
//! CNI ADD latency with the VIF already active (the warm path: the KuryrPort is in the daemon's cache), as a
//! runtime sees it: exec of the `kuryr-cni` binary with env + stdin, the unix socket round trip, the daemon's
//! cache lookup and a real nested-macvlan bind (device, MAC, address, MTU, default route) in a private
//! namespace. A second series uses a binder that does nothing, to split netlink from the rest. Each sample is
//! one ADD followed (untimed) by its DEL. Needs root.
//!
//! `cargo bench -p kuryr-cni --bench cni_add [-- SAMPLES]` → `bench/results/cni-add-<UTC time>.json`.

#[path = "../tests/common/mod.rs"]
mod common;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kuryr_api::{Vif, VifType};
use kuryr_cni::binding::{BindError, Binder, Bound, NetlinkBinder, NetlinkBinderConfig};
use kuryr_cni::daemon::cache::PodState;
use kuryr_cni::daemon::{server, Daemon, DaemonConfig, NodeCache};
use kuryr_cni::testing::mk_port;
use serde_json::json;

const ARGS: &str = "IgnoreUnknown=1;K8S_POD_NAMESPACE=bench;K8S_POD_NAME=pod-0;K8S_POD_UID=uid-0";

/// Binds nothing: the plugin + socket + daemon share of an ADD.
struct NoopBinder;

impl Binder for NoopBinder {
    async fn bind(&self, _: &Path, ifname: &str, vif: &Vif, _: bool) -> Result<Bound, BindError> {
        Ok(Bound {
            ifname: ifname.into(),
            mac: vif.mac.clone(),
            mtu: vif.mtu,
            host_ifname: None,
        })
    }
    async fn unbind(&self, _: Option<&Path>, _: &str, _: &[String]) -> Result<(), BindError> {
        Ok(())
    }
    async fn check(&self, _: &Path, _: &str, _: &Vif) -> Result<(), BindError> {
        Ok(())
    }
}

fn plugin_bin() -> PathBuf {
    // target/<profile>/deps/cni_add-<hash> → target/<profile>/kuryr-cni (built by `cargo build --bins`).
    let exe = std::env::current_exe().unwrap();
    let dir = exe.parent().and_then(Path::parent).unwrap();
    for profile in [dir.to_path_buf(), dir.join("../debug")] {
        let p = profile.join("kuryr-cni");
        if p.exists() {
            return p;
        }
    }
    panic!(
        "kuryr-cni binary not found next to {}: run cargo build -p kuryr-cni --bins",
        exe.display()
    );
}

fn invoke(bin: &Path, command: &str, netns: &str, socket: &Path) -> (bool, Duration) {
    let conf = json!({"cniVersion": "1.0.0", "name": "kuryr", "type": "kuryr-cni",
        "socketPath": socket, "timeoutSeconds": 10})
    .to_string();
    let t = Instant::now();
    let mut child = Command::new(bin)
        .env_clear()
        .envs([
            ("CNI_COMMAND", command),
            ("CNI_CONTAINERID", "bench0123"),
            ("CNI_NETNS", netns),
            ("CNI_IFNAME", "eth0"),
            ("CNI_PATH", "/opt/cni/bin"),
            ("CNI_ARGS", ARGS),
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(conf.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    (out.status.success(), t.elapsed())
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

async fn series<B: Binder>(name: &str, binder: B, netns: &str, samples: usize) -> serde_json::Value {
    let dir = std::env::temp_dir().join(format!("kcni-bench-{}-{name}", std::process::id()));
    let socket = dir.join("cni.sock");
    let cache = NodeCache::new();
    cache.set_pod_state(
        "bench",
        "pod-0",
        Some(PodState {
            uid: "uid-0".into(),
            deleting: false,
        }),
    );
    cache.apply_port(mk_port(
        "bench",
        "pod-0",
        "uid-0",
        vec![("eth0", common::vif(VifType::NestedMacvlan, 90))],
    ));
    let daemon = Arc::new(Daemon::new(cache, binder, DaemonConfig::default()));
    let listener = server::bind_socket(&socket).unwrap();
    let task = tokio::spawn(server::serve(listener, daemon, std::future::pending()));
    let bin = plugin_bin();
    let mut ms = Vec::with_capacity(samples);
    let (netns, socket2) = (netns.to_string(), socket.clone());
    let ms = tokio::task::spawn_blocking(move || {
        // Warm-up (page cache, first connections) is not measured.
        for _ in 0..5 {
            assert!(invoke(&bin, "ADD", &netns, &socket2).0);
            assert!(invoke(&bin, "DEL", &netns, &socket2).0);
        }
        for _ in 0..samples {
            let (ok, took) = invoke(&bin, "ADD", &netns, &socket2);
            assert!(ok, "ADD failed");
            ms.push(took.as_secs_f64() * 1000.0);
            assert!(invoke(&bin, "DEL", &netns, &socket2).0, "DEL failed");
        }
        ms
    })
    .await
    .unwrap();
    task.abort();
    let _ = std::fs::remove_dir_all(&dir);
    let mut sorted = ms.clone();
    sorted.sort_by(f64::total_cmp);
    let r = |x: f64| (x * 100.0).round() / 100.0;
    json!({
        "series": name, "samples": samples,
        "p50_ms": r(percentile(&sorted, 0.50)), "p90_ms": r(percentile(&sorted, 0.90)),
        "p99_ms": r(percentile(&sorted, 0.99)), "min_ms": r(sorted[0]), "max_ms": r(sorted[sorted.len() - 1]),
        "mean_ms": r(ms.iter().sum::<f64>() / ms.len() as f64),
    })
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let samples: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(300);
    if !common::is_root() {
        common::skip("cni_add bench: needs root (real macvlan binding in private namespaces)");
        return;
    }
    let vm = common::mk_vm();
    let pod = common::TestNs::new("bench");
    let netns = pod.path().display().to_string();
    let noop = series("plugin+daemon, no-op binder", NoopBinder, &netns, samples).await;
    let binder = NetlinkBinder::new(NetlinkBinderConfig {
        host_netns: Some(vm.path()),
        link_iface: Some("eth0".into()),
        bridge: "unused".into(),
        netns_dir: PathBuf::from("/var/run/netns"),
        macvlan_host_link: true,
        ..NetlinkBinderConfig::default()
    });
    let real = series("plugin+daemon+macvlan bind", binder, &netns, samples).await;
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| {
            c.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())
        })
        .unwrap_or_default();
    let now = Command::new("date")
        .args(["-u", "+%Y%m%dT%H%M%SZ"])
        .output()
        .unwrap();
    let stamp = String::from_utf8_lossy(&now.stdout).trim().to_string();
    let report = json!({
        "benchmark": "cni-add", "what": "CNI ADD with the VIF active in the daemon's cache, exec of kuryr-cni to result",
        "when": stamp, "profile": if cfg!(debug_assertions) { "debug" } else { "release" },
        "machine": {"cpus": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0), "cpu": cpu,
            "kernel": common::run("uname", &["-r"]).trim()},
        "results": [noop, real],
    });
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../bench/results");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("cni-add-{stamp}.json"));
    std::fs::write(&path, serde_json::to_string_pretty(&report).unwrap() + "\n").unwrap();
    println!("{}", serde_json::to_string_pretty(&report).unwrap());
    println!("written to {}", path.display());
}
