//! nested-vlan binding for real. Where this kernel can make 802.1Q devices the scenario runs here; where it
//! cannot (these machines), this same test binary is booted inside a qemu guest running Debian's stock kernel
//! (which has the 8021q module) by `lab/lib/qemu-run.sh`, and runs the scenario there as root.
//!
//! Scenario: a "VM" namespace whose `eth0` is a trunk port of a VLAN-filtering bridge (tags 101, 102); each
//! tag is untagged onto one "Neutron network" bridge, as OVN does with a trunk's subports. Two pods get VLAN
//! sub-interfaces 101 and 102 of the VM's `eth0` through [`NetlinkBinder`], with MAC, IP, MTU and default
//! route from their VIFs, and reach each other and a remote host on that network; a third pod on a tag the
//! trunk does not carry reaches nothing; the bridge learned each pod's MAC on its own tag.

mod common;

use std::path::PathBuf;
use std::process::Command;

use common::{require_root, run, skip, vif, TestNs};
use kuryr_api::{Vif, VifType};
use kuryr_cni::binding::{Binder, NetlinkBinder, NetlinkBinderConfig};

const TEST: &str = "vlan_pods_get_mac_ip_routes_and_reach_each_other_through_a_vlan_aware_bridge";
const IN_GUEST: &str = "KURYR_CNI_IN_QEMU_GUEST";

/// Whether this kernel makes 802.1Q devices (probed in a namespace of our own).
fn kernel_has_8021q() -> bool {
    let ns = TestNs::new("probe");
    ns.ip(&["link", "add", "p0", "type", "veth", "peer", "name", "p1"]);
    Command::new("ip")
        .args([
            "-n", &ns.name, "link", "add", "link", "p0", "name", "p0.5", "type", "vlan", "id", "5",
        ])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[tokio::test]
async fn vlan_pods_get_mac_ip_routes_and_reach_each_other_through_a_vlan_aware_bridge() {
    if !require_root(TEST) {
        return;
    }
    if kernel_has_8021q() {
        return scenario().await;
    }
    assert!(
        std::env::var_os(IN_GUEST).is_none(),
        "the qemu guest's kernel cannot make 802.1Q devices either (8021q module not loaded?)"
    );
    let cache = std::env::var("KURYR_LAB_CACHE").unwrap_or_else(|_| "/var/cache/kuryr-lab".into());
    let kernel = PathBuf::from(&cache).join("guest-kernel/current/.complete");
    let missing: Vec<&str> = [
        ("qemu-system-x86_64", which("qemu-system-x86_64")),
        ("cpio", which("cpio")),
        ("guest kernel (lab/lib/guest-kernel.sh)", kernel.exists()),
    ]
    .into_iter()
    .filter(|(_, ok)| !ok)
    .map(|(what, _)| what)
    .collect();
    if !missing.is_empty() {
        skip(&format!(
            "{TEST}: this kernel has no 802.1Q and the qemu guest cannot be booted: missing {} (lab/lab install \
             provides them)",
            missing.join(", ")
        ));
        return;
    }
    let exe = std::env::current_exe().expect("the test binary's path");
    let out = Command::new("bash")
        .arg(repo_root().join("lab/lib/qemu-run.sh"))
        .arg(&exe)
        .args(["--exact", TEST, "--nocapture", "--test-threads=1"])
        .env("QEMU_RUN_ENV", format!("{IN_GUEST}=1 RUST_BACKTRACE=1"))
        .output()
        .expect("running lab/lib/qemu-run.sh");
    let console = String::from_utf8_lossy(&out.stdout);
    {
        use std::io::Write;
        // The guest's own report, so the CI log shows the VLAN checks ran (and where).
        let _ = writeln!(
            std::io::stderr(),
            "--- qemu guest console ---\n{console}\n--- end ---"
        );
    }
    assert!(
        out.status.success() && console.contains("VLAN-SCENARIO: PASS"),
        "the VLAN scenario failed inside the qemu guest (exit {:?}): {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn which(cmd: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {cmd}")])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

fn vlan_vif(host: u8, tag: u16) -> Vif {
    let mut v = vif(VifType::NestedVlan, host);
    v.vlan_id = Some(tag);
    v.vrrp_mac = None;
    v
}

fn link(ns: &TestNs, dev: &str) -> serde_json::Value {
    ns.ip_json(&["-d", "link", "show", "dev", dev])[0].clone()
}

/// The "cloud" side: switch namespace with the VLAN-filtering bridge `br0` (trunk port `sw0` ↔ the VM's
/// `eth0`, tags 101 and 102) and the network bridge `brnet`, joined per tag by an access-port veth; a remote
/// host at .100 on `brnet`.
struct Fabric {
    sw: TestNs,
    vm: TestNs,
    remote: TestNs,
}

fn fabric() -> Fabric {
    let (sw, vm, remote) = (TestNs::new("sw"), TestNs::new("vm"), TestNs::new("remote"));
    sw.ip(&["link", "add", "br0", "type", "bridge", "vlan_filtering", "1"]);
    sw.ip(&["link", "add", "brnet", "type", "bridge"]);
    sw.ip(&[
        "link", "add", "sw0", "type", "veth", "peer", "name", "eth0", "netns", &vm.name,
    ]);
    sw.ip(&["link", "set", "sw0", "master", "br0"]);
    run(
        "ip",
        &[
            "netns", "exec", &sw.name, "bridge", "vlan", "del", "dev", "sw0", "vid", "1",
        ],
    );
    for tag in ["101", "102"] {
        run(
            "ip",
            &[
                "netns", "exec", &sw.name, "bridge", "vlan", "add", "dev", "sw0", "vid", tag,
            ],
        );
        let (a, n) = (format!("a{tag}"), format!("n{tag}"));
        sw.ip(&["link", "add", &a, "type", "veth", "peer", "name", &n]);
        sw.ip(&["link", "set", &a, "master", "br0"]);
        sw.ip(&["link", "set", &n, "master", "brnet"]);
        run(
            "ip",
            &[
                "netns", "exec", &sw.name, "bridge", "vlan", "del", "dev", &a, "vid", "1",
            ],
        );
        run(
            "ip",
            &[
                "netns", "exec", &sw.name, "bridge", "vlan", "add", "dev", &a, "vid", tag, "pvid", "untagged",
            ],
        );
        sw.ip(&["link", "set", &a, "up"]);
        sw.ip(&["link", "set", &n, "up"]);
    }
    sw.ip(&[
        "link",
        "add",
        "r0",
        "type",
        "veth",
        "peer",
        "name",
        "eth0",
        "netns",
        &remote.name,
    ]);
    sw.ip(&["link", "set", "r0", "master", "brnet"]);
    for dev in ["r0", "sw0", "br0", "brnet"] {
        sw.ip(&["link", "set", dev, "up"]);
    }
    vm.ip(&["link", "set", "eth0", "up"]);
    remote.ip(&["addr", "add", "198.18.200.100/24", "dev", "eth0"]);
    remote.ip(&["link", "set", "eth0", "up"]);
    Fabric { sw, vm, remote }
}

async fn scenario() {
    let f = fabric();
    let binder = NetlinkBinder::new(NetlinkBinderConfig {
        host_netns: Some(f.vm.path()),
        link_iface: Some("eth0".into()),
        bridge: "unused".into(),
        netns_dir: PathBuf::from("/var/run/netns"),
        macvlan_host_link: true,
        ..NetlinkBinderConfig::default()
    });
    let (p1, p2, p3) = (TestNs::new("p101"), TestNs::new("p102"), TestNs::new("p103"));
    let (v1, v2, v3) = (vlan_vif(61, 101), vlan_vif(62, 102), vlan_vif(63, 103));
    let b1 = binder
        .bind(&p1.path(), "eth0", &v1, true)
        .await
        .expect("bind VLAN 101");
    binder
        .bind(&p2.path(), "eth0", &v2, true)
        .await
        .expect("bind VLAN 102");
    binder
        .bind(&p3.path(), "eth0", &v3, true)
        .await
        .expect("bind VLAN 103");
    assert_eq!(
        b1.mac, "fa:16:3e:c0:00:3d",
        "a VLAN device carries the subport's MAC"
    );

    for (ns, v, tag) in [(&p1, &v1, 101), (&p2, &v2, 102)] {
        let l = link(ns, "eth0");
        assert_eq!(l["linkinfo"]["info_kind"], "vlan", "{l}");
        assert_eq!(l["linkinfo"]["info_data"]["protocol"], "802.1Q", "{l}");
        assert_eq!(l["linkinfo"]["info_data"]["id"], tag, "{l}");
        assert_eq!(l["address"], v.mac.as_str(), "{l}");
        assert_eq!(l["mtu"], 1400, "{l}");
        // operstate reads UNKNOWN for a moment after link up; the flags are what was set.
        let flags = l["flags"].as_array().cloned().unwrap_or_default();
        assert!(
            flags.contains(&"UP".into()) && flags.contains(&"LOWER_UP".into()),
            "{l}"
        );
        let addrs = ns.ip_json(&["addr", "show", "dev", "eth0"]);
        let want = v.ips[0].address.as_str();
        assert!(
            addrs[0]["addr_info"]
                .as_array()
                .is_some_and(|a| a.iter().any(|x| x["local"] == want && x["prefixlen"] == 24)),
            "{addrs}"
        );
        let routes = ns.ip_json(&["route", "show", "default"]);
        assert_eq!(routes[0]["gateway"], "198.18.200.1", "{routes}");
        assert_eq!(routes[0]["dev"], "eth0", "{routes}");
        binder
            .check(&ns.path(), "eth0", v)
            .await
            .expect("CHECK of a bound VLAN pod");
    }
    assert!(
        f.vm.ip_json(&["link", "show"])
            .as_array()
            .is_some_and(|l| l.len() == 2),
        "the sub-interfaces live in the pods, not the VM (lo + eth0 only)"
    );

    assert!(
        p1.ping("198.18.200.62"),
        "pod on VLAN 101 cannot reach the pod on VLAN 102"
    );
    assert!(
        p2.ping("198.18.200.61"),
        "pod on VLAN 102 cannot reach the pod on VLAN 101"
    );
    assert!(
        p1.ping("198.18.200.100"),
        "pod on VLAN 101 cannot reach the remote host"
    );
    assert!(
        f.remote.ping("198.18.200.62"),
        "the remote host cannot reach the pod on VLAN 102"
    );
    assert!(
        !p3.ping("198.18.200.61"),
        "a pod on VLAN 103 (not on the trunk) must reach nothing"
    );

    // The frames crossed the trunk tagged: the bridge learned each pod's MAC on sw0 under its own tag.
    let fdb: serde_json::Value = serde_json::from_str(&run(
        "ip",
        &[
            "netns", "exec", &f.sw.name, "bridge", "-j", "fdb", "show", "br", "br0",
        ],
    ))
    .expect("bridge -j prints JSON");
    for (mac, tag) in [(&v1.mac, 101), (&v2.mac, 102)] {
        assert!(
            fdb.as_array().is_some_and(|e| e
                .iter()
                .any(|x| x["mac"] == mac.as_str() && x["ifname"] == "sw0" && x["vlan"] == tag)),
            "no fdb entry for {mac} on sw0 vlan {tag}: {fdb}"
        );
    }

    // A wrong MAC fails CHECK.
    let mut wrong = v1.clone();
    wrong.mac = "fa:16:3e:c0:00:ff".into();
    assert!(binder.check(&p1.path(), "eth0", &wrong).await.is_err());

    // A same-tag leftover in a dead sandbox does not wedge the next ADD of that port (upstream ce9bac5b).
    let stale = TestNs::new("stale");
    p1.ip(&["link", "set", "eth0", "netns", &stale.name]);
    let p1b = TestNs::new("p101b");
    binder
        .bind(&p1b.path(), "eth0", &v1, true)
        .await
        .expect("ADD past a stale same-tag child");
    assert!(!stale.has_link("eth0"), "the stale VLAN child was removed");
    assert!(p1b.ping("198.18.200.62"), "the re-added pod reaches its peer");

    // DEL removes the device; the runtime's second DEL (no netns) succeeds.
    binder.unbind(Some(&p2.path()), "eth0", &[]).await.expect("DEL");
    assert!(!p2.has_link("eth0"));
    binder
        .unbind(Some(&p2.path()), "eth0", &[])
        .await
        .expect("repeated DEL");
    binder.unbind(None, "eth0", &[]).await.expect("DEL without netns");
    {
        use std::io::Write;
        let _ = writeln!(
            std::io::stdout(),
            "VLAN-SCENARIO: PASS (kernel {})",
            run("uname", &["-r"]).trim()
        );
    }
}
