#![allow(clippy::unwrap_used)] // test helpers outside #[test] fns
//! The `kuryr-daemon` binary and the node's CNI conflist (`--cni-conf-dir`): written only once the daemon
//! serves (socket bound, watches of the lab's kube-apiserver synced), pointing at the socket as the host
//! sees it; removed on SIGTERM unless `--keep-cni-conf`; never written by a daemon that cannot reach the
//! API server. The daemon watches a node name of its own, so it touches no lab pod.

mod common;

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use lab_tests::Lab;
use serde_json::Value;

struct Run {
    child: Child,
    dir: PathBuf,
    log: PathBuf,
}

impl Run {
    fn start(kubeconfig: &Path, extra: &[&str]) -> Run {
        let dir = std::env::temp_dir().join(format!("kuryr-dconf-{:08x}", fastrand::u32(..)));
        std::fs::create_dir_all(dir.join("net.d")).unwrap();
        // A free port for /readyz: bind, read, release.
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let log = dir.join("daemon.log");
        let child = Command::new(env!("CARGO_BIN_EXE_kuryr-daemon"))
            .env("KUBECONFIG", kubeconfig)
            .env("RUST_LOG", "info")
            .args([
                "--node-name",
                &format!("dconf-{:06x}", fastrand::u32(..0xff_ffff)),
            ])
            .arg("--socket")
            .arg(dir.join("run/cni.sock"))
            .args(["--health-addr", &format!("127.0.0.1:{port}")])
            .arg("--cni-conf-dir")
            .arg(dir.join("net.d"))
            .args(["--cni-host-socket", "/run/kuryr/host-view.sock"])
            .args(extra)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        Run { child, dir, log }
    }

    fn conflist(&self) -> PathBuf {
        self.dir.join("net.d/10-kuryr.conflist")
    }

    fn socket(&self) -> PathBuf {
        self.dir.join("run/cni.sock")
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Waits until `what` holds, with the daemon's log in the failure.
    fn wait(&mut self, what: &str, f: impl Fn(&Run) -> bool) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while !f(self) {
            if let Ok(Some(st)) = self.child.try_wait() {
                panic!("kuryr-daemon exited ({st}) before {what}; log:\n{}", self.log());
            }
            assert!(
                Instant::now() < deadline,
                "{what} within 60 s; log:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// SIGTERM, then the exit status.
    fn terminate(&mut self) -> std::process::ExitStatus {
        let sent = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(sent.success(), "kill -TERM failed");
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(st) = self.child.try_wait().unwrap() {
                return st;
            }
            assert!(
                Instant::now() < deadline,
                "kuryr-daemon ignored SIGTERM; log:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[test]
fn the_conflist_appears_once_the_daemon_serves_and_goes_with_it() {
    if !common::require_root("the_conflist_appears_once_the_daemon_serves_and_goes_with_it") {
        return;
    }
    let lab = Lab::require();
    let mut run = Run::start(&lab.kubeconfig, &[]);
    run.wait("the conflist is written", |r| r.conflist().exists());
    assert!(
        run.socket().exists(),
        "conflist written before the socket was bound"
    );
    let v: Value = serde_json::from_str(&std::fs::read_to_string(run.conflist()).unwrap()).unwrap();
    assert_eq!(v["cniVersion"], "1.1.0");
    assert_eq!(v["plugins"][0]["type"], "kuryr-cni");
    // The host's view of the socket, not the daemon's own.
    assert_eq!(v["plugins"][0]["socketPath"], "/run/kuryr/host-view.sock");
    // 60 s ADD timeout by default, and the plugin waits a little longer.
    assert_eq!(v["plugins"][0]["timeoutSeconds"], 75);
    let st = run.terminate();
    assert!(st.success(), "exit {st}; log:\n{}", run.log());
    assert!(
        !run.conflist().exists(),
        "conflist left after SIGTERM; log:\n{}",
        run.log()
    );
    assert!(!run.socket().exists(), "socket left after SIGTERM");
    let names: Vec<_> = std::fs::read_dir(run.dir.join("net.d")).unwrap().collect();
    assert!(names.is_empty(), "nothing else left in the conf dir: {names:?}");
}

#[test]
fn keep_cni_conf_leaves_it_for_a_restart() {
    if !common::require_root("keep_cni_conf_leaves_it_for_a_restart") {
        return;
    }
    let lab = Lab::require();
    let mut run = Run::start(&lab.kubeconfig, &["--keep-cni-conf"]);
    run.wait("the conflist is written", |r| r.conflist().exists());
    assert!(run.terminate().success());
    assert!(
        run.conflist().exists(),
        "--keep-cni-conf removed the conflist; log:\n{}",
        run.log()
    );
}

#[test]
fn a_daemon_that_cannot_sync_writes_no_conflist() {
    if !common::require_root("a_daemon_that_cannot_sync_writes_no_conflist") {
        return;
    }
    let lab = Lab::require();
    // The lab's kubeconfig pointed at a port nothing listens on: the watches never sync.
    let dead = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let text = std::fs::read_to_string(&lab.kubeconfig).unwrap();
    // The lab writes it in flow style: swap the value after `server:` up to its delimiter.
    let at = text.find("server:").expect("the lab kubeconfig names a server") + "server:".len();
    let end = at + text[at..].find([',', '}', '\n']).unwrap_or(text.len() - at);
    let moved = format!("{} https://127.0.0.1:{dead}{}", &text[..at], &text[end..]);
    let kc = std::env::temp_dir().join(format!("kuryr-dconf-kc-{:08x}", fastrand::u32(..)));
    std::fs::write(&kc, moved).unwrap();
    let mut run = Run::start(&kc, &[]);
    run.wait("the socket is bound", |r| r.socket().exists());
    // It serves (the plugin gets "not ready" answers) but the runtime is never pointed at it. A few
    // seconds is many watch retries; a conflist written without a sync would show up at once.
    std::thread::sleep(Duration::from_secs(3));
    assert!(
        !run.conflist().exists(),
        "conflist written without synced caches; log:\n{}",
        run.log()
    );
    assert!(run.terminate().success());
    let _ = std::fs::remove_file(kc);
}
