//! Helpers for the root tests: private network namespaces (`ip netns add kcni-test-…`, deleted on drop),
//! `ip` calls inside them, and VIFs on the 198.18.200.0/24 test range. Nothing touches the root namespace.

#![allow(dead_code)]

use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

use kuryr_api::{Vif, VifType};

pub fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false)
}

/// Says why a test skips, straight to stderr: `eprintln!` is captured by the test harness and would hide the
/// reason of a passing (skipped) test from the CI log.
pub fn skip(reason: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "SKIP {reason}");
}

/// Returns false (after saying why) when the test cannot run here.
pub fn require_root(test: &str) -> bool {
    if is_root() {
        return true;
    }
    skip(&format!(
        "{test}: needs root (creates network namespaces); CI runs these as root"
    ));
    false
}

static SEQ: AtomicUsize = AtomicUsize::new(0);

/// A named network namespace of our own.
pub struct TestNs {
    pub name: String,
}

impl TestNs {
    pub fn new(tag: &str) -> Self {
        let name = format!(
            "kcni-test-{tag}-{}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        );
        run("ip", &["netns", "add", &name]);
        run("ip", &["-n", &name, "link", "set", "lo", "up"]);
        Self { name }
    }

    pub fn path(&self) -> PathBuf {
        PathBuf::from(format!("/var/run/netns/{}", self.name))
    }

    /// `ip -n <ns> <args>`, panicking on failure.
    pub fn ip(&self, args: &[&str]) -> String {
        let mut a = vec!["-n", &self.name];
        a.extend_from_slice(args);
        run("ip", &a)
    }

    /// `ip -n <ns> -j <args>` parsed.
    pub fn ip_json(&self, args: &[&str]) -> serde_json::Value {
        let mut a = vec!["-j"];
        a.extend_from_slice(args);
        serde_json::from_str(&self.ip(&a)).expect("ip -j prints JSON")
    }

    pub fn has_link(&self, name: &str) -> bool {
        Command::new("ip")
            .args(["-n", &self.name, "link", "show", "dev", name])
            .output()
            .map(|o| o.status.success())
            .unwrap_or(false)
    }

    pub fn ping(&self, addr: &str) -> bool {
        Command::new("ip")
            .args(["netns", "exec", &self.name, "ping", "-c", "1", "-W", "2", addr])
            .output()
            .map(|o| o.status.success())
            .unwrap_or(false)
    }
}

impl Drop for TestNs {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.name]).status();
    }
}

pub fn run(cmd: &str, args: &[&str]) -> String {
    let o = Command::new(cmd).args(args).output().expect("spawning a command");
    assert!(
        o.status.success(),
        "{cmd} {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// A "VM" namespace whose `eth0` (a veth with its peer up in the same namespace, for carrier) is the parent
/// of nested VIFs.
pub fn mk_vm() -> TestNs {
    let vm = TestNs::new("vm");
    vm.ip(&["link", "add", "eth0", "type", "veth", "peer", "name", "eth0p"]);
    vm.ip(&["link", "set", "eth0", "up"]);
    vm.ip(&["link", "set", "eth0p", "up"]);
    vm
}

/// A VIF on the test range; `host` is the last octet, also used to make the MACs unique per test.
pub fn vif(kind: VifType, host: u8) -> Vif {
    let mut v = kuryr_cni::testing::mk_vif(true);
    v.vif_type = kind;
    v.port_id = format!("{host:03}e4567-e89b-12d3-a456-426614174000");
    v.mac = format!("fa:16:3e:c0:00:{host:02x}");
    v.vrrp_mac = (kind == VifType::NestedMacvlan).then(|| format!("00:00:5e:00:01:{host:02x}"));
    v.ips[0].address = format!("198.18.200.{host}");
    v.mtu = Some(1400);
    v
}
