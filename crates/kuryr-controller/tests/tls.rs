//! TLS verification is on by default for Kubernetes and OpenStack; turning it off (kubeconfig
//! `insecure-skip-tls-verify: true`, clouds.yaml `verify: false`) is honoured but announced loudly by
//! `kuryr-controller` and `kuryrctl` at start; and no code in the workspace turns it off by itself.

#![allow(clippy::unwrap_used)] // test helpers outside #[test] fns panic on failure, as they should

mod canary;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use canary::{clouds_yaml, command, finish, free_port, kubeconfig, run, temp_dir, Canaries};

const KUBE_WARNING: &str = "INSECURE: TLS certificate verification is OFF for Kubernetes";
const CLOUD_WARNING: &str = "INSECURE: TLS certificate verification is OFF for OpenStack";

#[tokio::test]
async fn kube_rs_honours_insecure_skip_tls_verify_and_verifies_otherwise() {
    let c = Canaries::new();
    let dir = temp_dir("tls-kube");
    let secure = kubeconfig(&dir.0, "https://127.0.0.1:6443", &c, false);
    let insecure = kubeconfig(&dir.0, "https://127.0.0.1:6443", &c, true);
    let cfg = kuryr_api::kubeconfig::load(Some(&secure)).await.unwrap();
    assert!(!cfg.accept_invalid_certs);
    assert_eq!(kuryr_api::kubeconfig::tls_warning(&cfg), None);
    let cfg = kuryr_api::kubeconfig::load(Some(&insecure)).await.unwrap();
    assert!(cfg.accept_invalid_certs);
    assert!(kuryr_api::kubeconfig::tls_warning(&cfg)
        .unwrap()
        .starts_with(KUBE_WARNING));
}

/// Whether something answers `GET /livez` on `127.0.0.1:port` (one try).
fn livez(port: u16) -> bool {
    use std::io::{Read, Write};
    let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
    let mut answer = String::new();
    s.write_all(b"GET /livez HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
        .is_ok()
        && s.read_to_string(&mut answer).is_ok()
        && answer.starts_with("HTTP/1.")
}

/// Runs the controller on `cloud` and `kube` until it has started (it serves its admin port only after both
/// places that may warn, the kubeconfig and the clouds.yaml, are behind it), then stops it; its output.
fn controller(clouds: &Path, cloud: &str, kube: &Path) -> String {
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_kuryr-controller"));
    let admin = free_port();
    let mut cmd = command(&bin, "info");
    cmd.args(["--kubeconfig", &kube.display().to_string()])
        .args([
            "--clouds-yaml",
            &clouds.display().to_string(),
            "--os-cloud",
            cloud,
        ])
        .args([
            "--cluster-id",
            "tls",
            "--pod-subnet",
            "s",
            "--gc-interval-seconds",
            "0",
        ])
        .args(["--metrics-addr", &format!("127.0.0.1:{admin}")]);
    let mut child = canary::spawn(cmd);
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut started = false;
    while !started && Instant::now() < deadline && child.child.try_wait().unwrap().is_none() {
        started = livez(admin);
        if !started {
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    let out = finish(child, Duration::ZERO).0;
    assert!(
        started,
        "kuryr-controller did not serve 127.0.0.1:{admin}/livez (exited, or not within 30 s):\n{out}"
    );
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_binaries_warn_loudly_when_verification_is_off_and_only_then() {
    let c = Canaries::new();
    let sim = canary::sim(&c).await;
    let dir = temp_dir("tls");
    let clouds = clouds_yaml(&dir.0, &sim.url(), &c);
    let dead = format!("https://127.0.0.1:{}", free_port());
    let secure = kubeconfig(&dir.0, &dead, &c, false);
    let insecure = kubeconfig(&dir.0, &dead, &c, true);

    let out = controller(&clouds, "insecure", &insecure);
    assert!(out.contains(KUBE_WARNING) && out.contains(CLOUD_WARNING), "{out}");
    assert!(out.contains("WARN"), "a warning, not an info line: {out}");
    let out = controller(&clouds, "pw", &secure);
    assert!(!out.contains("INSECURE"), "{out}");
    assert!(
        out.contains("connecting") || out.contains("watch") || out.contains("INFO"),
        "{out}"
    );

    let kuryrctl = canary::workspace_binary("kuryrctl", "kuryrctl");
    let ctl = |cloud: &str, kube: &Path, sub: &[&str]| {
        let mut cmd = command(&kuryrctl, "warn");
        cmd.args(["--kubeconfig", &kube.display().to_string()])
            .args([
                "--clouds-yaml",
                &clouds.display().to_string(),
                "--os-cloud",
                cloud,
            ])
            .args(sub);
        run(cmd, Duration::from_secs(60)).0
    };
    let out = ctl("insecure", &insecure, &["status"]);
    assert!(
        out.contains(&format!("kuryrctl: WARNING: {CLOUD_WARNING}"))
            && out.contains(&format!("kuryrctl: WARNING: {KUBE_WARNING}")),
        "{out}"
    );
    let out = ctl("pw", &secure, &["status"]);
    assert!(!out.contains("INSECURE"), "{out}");
}

/// Files of `dir` (recursively) whose code, unit tests left out, contains `needle`.
fn grep(dir: &Path, needle: &str, hits: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            grep(&p, needle, hits);
        } else if p.extension().is_some_and(|x| x == "rs") {
            let text = std::fs::read_to_string(&p).unwrap();
            let code = text.split("#[cfg(test)]").next().unwrap_or_default();
            if code.contains(needle) && !hits.contains(&p) {
                hits.push(p);
            }
        }
    }
}

#[test]
fn no_code_turns_verification_off_by_itself() {
    let crates = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut hits = Vec::new();
    for krate in std::fs::read_dir(&crates).unwrap() {
        let src = krate.unwrap().path().join("src");
        if src.is_dir() {
            for needle in [
                "danger_accept_invalid_certs",
                "accept_invalid_certs = true",
                "accept_invalid_certs: true",
                "insecure_skip_tls_verify",
                "danger_accept_invalid_hostnames",
            ] {
                grep(&src, needle, &mut hits);
            }
        }
    }
    let names: Vec<String> = hits
        .iter()
        .map(|p| p.strip_prefix(&crates).unwrap().display().to_string())
        .collect();
    // The one place: kuryr-openstack applies clouds.yaml `verify: false`, guarded by it.
    assert_eq!(names, vec!["kuryr-openstack/src/auth.rs"], "{names:?}");
    let auth = std::fs::read_to_string(crates.join("kuryr-openstack/src/auth.rs")).unwrap();
    let at = auth.find("danger_accept_invalid_certs").unwrap();
    assert!(
        auth[..at]
            .rfind("if self.insecure {")
            .is_some_and(|g| at - g < 300),
        "danger_accept_invalid_certs must stay behind `if self.insecure`"
    );
}
