//! A cloudsim whose credentials are canaries (distinctive strings that must never be printed), the files
//! that hold them (clouds.yaml 0600, a kubeconfig with a bearer token), the `kuryr-controller` and
//! `kuryrctl` binaries run on them, and a check that greps every captured output for every canary.
#![allow(dead_code, clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use kuryr_cloudsim::{Profile, Sim, SimHandle};

/// The secrets of one run, each unique to it.
#[derive(Clone, Debug)]
pub struct Canaries {
    pub password: String,
    pub app_secret: String,
    /// The password of the failing login.
    pub wrong_password: String,
    /// The Kubernetes bearer token in the kubeconfig.
    pub kube_token: String,
    /// A Keystone token the test got itself, handed to a `v3token` cloud.
    pub os_token: Option<String>,
}

impl Canaries {
    pub fn new() -> Self {
        let tag = format!("{:016x}", fastrand::u64(..));
        Self {
            password: format!("S3cr3t-canary-pw-{tag}"),
            app_secret: format!("S3cr3t-canary-ac-{tag}"),
            wrong_password: format!("S3cr3t-canary-wrong-{tag}"),
            kube_token: format!("S3cr3t-canary-kube-{tag}"),
            os_token: None,
        }
    }

    pub fn all(&self) -> Vec<(&'static str, String)> {
        let mut v = vec![
            ("password", self.password.clone()),
            ("application credential secret", self.app_secret.clone()),
            ("wrong password", self.wrong_password.clone()),
            ("Kubernetes bearer token", self.kube_token.clone()),
        ];
        if let Some(t) = &self.os_token {
            v.push(("Keystone token", t.clone()));
        }
        v
    }
}

/// A directory removed on drop.
pub struct TempDir(pub PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub fn temp_dir(tag: &str) -> TempDir {
    let d = std::env::temp_dir().join(format!(
        "kuryr-{tag}-{}-{}",
        std::process::id(),
        fastrand::u64(..)
    ));
    std::fs::create_dir_all(&d).unwrap();
    TempDir(d)
}

/// A cloudsim whose `kuryr` user and application credential have the canary secrets.
pub async fn sim(c: &Canaries) -> SimHandle {
    let mut profile = Profile::zero();
    for u in &mut profile.keystone.users {
        if u.name == "kuryr" {
            u.password = c.password.clone();
        }
    }
    for a in &mut profile.keystone.application_credentials {
        a.secret = c.app_secret.clone();
    }
    let (_, sim) = Sim::new(profile).spawn_on("127.0.0.1:0").await.unwrap();
    sim
}

/// clouds.yaml (mode 0600) with the clouds `pw` (password), `ac` (application credential), `bad` (wrong
/// password), `tok` (the test's own token, when set) and `insecure` (password, `verify: false`).
pub fn clouds_yaml(dir: &Path, url: &str, c: &Canaries) -> PathBuf {
    let pw = |name: &str, password: &str, extra: &str| {
        format!(
            "  {name}:\n    auth_type: password\n    auth:\n      auth_url: {url}/v3\n      username: kuryr\n      \
             password: {password}\n      project_name: service\n      user_domain_name: Default\n      \
             project_domain_name: Default\n    region_name: RegionOne\n{extra}"
        )
    };
    let mut text = String::from("clouds:\n");
    text += &pw("pw", &c.password, "");
    text += &pw("bad", &c.wrong_password, "");
    text += &pw("insecure", &c.password, "    verify: false\n");
    text += &format!(
        "  ac:\n    auth_type: v3applicationcredential\n    auth:\n      auth_url: {url}/v3\n      \
         application_credential_id: 0000000000000000000000000000a001\n      application_credential_secret: {}\n    \
         region_name: RegionOne\n",
        c.app_secret
    );
    if let Some(t) = &c.os_token {
        text += &format!(
            "  tok:\n    auth_type: v3token\n    auth:\n      auth_url: {url}/v3\n      token: {t}\n      \
             project_name: service\n      project_domain_name: Default\n    region_name: RegionOne\n"
        );
    }
    let path = dir.join("clouds.yaml");
    std::fs::write(&path, text).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    path
}

/// A kubeconfig with the canary bearer token for `server` (`insecure`: `insecure-skip-tls-verify`).
pub fn kubeconfig(dir: &Path, server: &str, c: &Canaries, insecure: bool) -> PathBuf {
    let tls = if insecure {
        "    insecure-skip-tls-verify: true\n"
    } else {
        ""
    };
    let text = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: {server}\n{tls}\
         users:\n- name: u\n  user:\n    token: {}\ncontexts:\n- name: x\n  context: {{cluster: c, user: u}}\n\
         current-context: x\n",
        c.kube_token
    );
    let path = dir.join(if insecure {
        "kubeconfig-insecure"
    } else {
        "kubeconfig"
    });
    std::fs::write(&path, text).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    path
}

/// A free localhost port.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A workspace binary, built first (`CARGO_BIN_EXE_*` only covers this package's).
pub fn workspace_binary(package: &str, bin: &str) -> PathBuf {
    // Under ./test.sh its build stage made every workspace binary (lab_tests::cluster::workspace_binary).
    if let Some(dir) = std::env::var_os("KURYR_WORKSPACE_BINARIES") {
        let path = PathBuf::from(dir).join(bin);
        assert!(path.exists(), "{} (KURYR_WORKSPACE_BINARIES)", path.display());
        return path;
    }
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = Command::new(cargo)
        .args(["build", "--locked", "-p", package, "--bin", bin])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .status()
        .unwrap();
    assert!(status.success(), "cargo build -p {package} --bin {bin}");
    let exe = std::env::current_exe().unwrap();
    let path = exe.parent().and_then(|d| d.parent()).unwrap().join(bin);
    assert!(path.exists(), "{}", path.display());
    path
}

/// A command with a clean environment plus `RUST_LOG` (no ambient OS_* or KUBECONFIG).
pub fn command(bin: &Path, rust_log: &str) -> Command {
    let mut cmd = Command::new(bin);
    cmd.env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", std::env::temp_dir())
        .env("RUST_LOG", rust_log)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

/// A running binary whose stdout and stderr are drained as it goes (a full pipe would stall it).
pub struct Running {
    pub child: Child,
    out: std::thread::JoinHandle<String>,
    err: std::thread::JoinHandle<String>,
}

fn drain(r: Option<impl std::io::Read + Send + 'static>) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut buf = Vec::new();
        if let Some(mut r) = r {
            let _ = r.read_to_end(&mut buf);
        }
        String::from_utf8_lossy(&buf).into_owned()
    })
}

pub fn spawn(mut cmd: Command) -> Running {
    let mut child = cmd.spawn().unwrap();
    let out = drain(child.stdout.take());
    let err = drain(child.stderr.take());
    Running { child, out, err }
}

/// Runs to completion (at most `limit`, then stopped); "stdout\nstderr" and the exit code.
pub fn run(cmd: Command, limit: Duration) -> (String, Option<i32>) {
    finish(spawn(cmd), limit)
}

/// Waits for the binary up to `limit` (then SIGTERM, and SIGKILL after 10 s); its output and exit code.
pub fn finish(mut r: Running, limit: Duration) -> (String, Option<i32>) {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if r.child.try_wait().unwrap().is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    if r.child.try_wait().unwrap().is_none() {
        terminate(&r.child);
        let grace = Instant::now() + Duration::from_secs(10);
        while r.child.try_wait().unwrap().is_none() && Instant::now() < grace {
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = r.child.kill();
    }
    let status = r.child.wait().unwrap();
    let (out, err) = (r.out.join().unwrap(), r.err.join().unwrap());
    (format!("{out}\n{err}"), status.code())
}

/// SIGTERM (graceful shutdown logs are output too).
pub fn terminate(child: &Child) {
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
}

/// Plain HTTP GET of `path` on `127.0.0.1:port`, retried for a few seconds; the body.
pub fn http_get(port: u16, path: &str) -> String {
    use std::io::{Read, Write};
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) {
            let req = format!("GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n");
            if s.write_all(req.as_bytes()).is_ok() {
                let mut body = String::new();
                if s.read_to_string(&mut body).is_ok() && !body.is_empty() {
                    return body;
                }
            }
        }
        assert!(Instant::now() < deadline, "nothing on 127.0.0.1:{port}{path}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Every output by where it came from; fails naming each (output, canary) that leaked, with the line.
#[derive(Default)]
pub struct Outputs(pub BTreeMap<String, String>);

impl Outputs {
    pub fn add(&mut self, what: impl Into<String>, text: impl Into<String>) {
        let (what, text) = (what.into(), text.into());
        self.0
            .entry(what)
            .and_modify(|t| t.push_str(&text))
            .or_insert(text);
    }

    pub fn total_bytes(&self) -> usize {
        self.0.values().map(String::len).sum()
    }

    pub fn assert_no_leak(&self, c: &Canaries) {
        let mut leaks = Vec::new();
        for (what, text) in &self.0 {
            for (name, secret) in c.all() {
                if let Some(line) = text.lines().find(|l| l.contains(&secret)) {
                    let line: String = line.chars().take(300).collect();
                    leaks.push(format!("{name} leaked in {what}: {line}"));
                }
            }
        }
        assert!(leaks.is_empty(), "secrets leaked:\n{}", leaks.join("\n"));
    }
}
