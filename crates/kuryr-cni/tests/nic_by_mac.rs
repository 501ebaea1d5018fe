//! The VM's NIC found by the VM port's MAC (`parentMac`), in private namespaces (root; see tests/common).
//! The "VM" has no `eth0`: its NIC is `ens3`, next to another NIC (`eth1`) and a macvlan another tool
//! stacked on `ens3` with the same MAC. Nested VIFs that name no NIC are wired on `ens3` and reach each
//! other; a pinned name the node lacks gives way to the MAC, one it has wins; a MAC no link carries fails
//! naming the MAC and the links seen, and leaves the pod namespace empty.

mod common;

use std::path::PathBuf;

use common::{require_root, vif, TestNs};
use kuryr_api::{Vif, VifType};
use kuryr_cni::binding::{Binder, NetlinkBinder, NetlinkBinderConfig};

/// The VM's Neutron port MAC, which its NIC carries.
const VM_MAC: &str = "fa:16:3e:5e:00:03";

fn vm_with_ens3() -> TestNs {
    let vm = TestNs::new("vm");
    vm.ip(&[
        "link", "add", "ens3", "address", VM_MAC, "type", "veth", "peer", "name", "ens3p",
    ]);
    vm.ip(&["link", "add", "eth1", "type", "veth", "peer", "name", "eth1p"]);
    for l in ["ens3", "ens3p", "eth1", "eth1p"] {
        vm.ip(&["link", "set", l, "up"]);
    }
    // Carries the NIC's MAC too, but is stacked on it: never the parent. (Left down: the kernel refuses to
    // open a macvlan with its lower device's MAC.)
    vm.ip(&[
        "link", "add", "link", "ens3", "name", "mv-other", "address", VM_MAC, "type", "macvlan", "mode",
        "bridge",
    ]);
    vm
}

fn binder(vm: &TestNs, link_iface: Option<&str>) -> NetlinkBinder {
    NetlinkBinder::new(NetlinkBinderConfig {
        host_netns: Some(vm.path()),
        link_iface: link_iface.map(Into::into),
        bridge: "unused".into(),
        netns_dir: PathBuf::from("/var/run/netns"),
        macvlan_host_link: true,
        ..NetlinkBinderConfig::default()
    })
}

/// A nested VIF as the controller writes it with no `link_iface` pinned.
fn by_mac(kind: VifType, host: u8, mac: &str) -> Vif {
    let mut v = vif(kind, host);
    v.parent_ifname = None;
    v.parent_mac = Some(mac.into());
    v
}

fn ifindex(ns: &TestNs, ifname: &str) -> u64 {
    ns.ip_json(&["link", "show", "dev", ifname])[0]["ifindex"]
        .as_u64()
        .expect("ifindex")
}

/// The ifindex (in the VM) of the device the pod's `eth0` is stacked on.
fn parent_of_pod_eth0(pod: &TestNs) -> u64 {
    pod.ip_json(&["-d", "link", "show", "dev", "eth0"])[0]["link_index"]
        .as_u64()
        .expect("link_index")
}

#[tokio::test]
async fn macvlan_pods_hang_off_the_nic_with_the_vm_ports_mac_when_it_is_not_eth0() {
    if !require_root("macvlan_pods_hang_off_the_nic_with_the_vm_ports_mac_when_it_is_not_eth0") {
        return;
    }
    let vm = vm_with_ens3();
    assert!(!vm.has_link("eth0"));
    let (a, b) = (TestNs::new("pa"), TestNs::new("pb"));
    let binder = binder(&vm, None);
    let va = by_mac(VifType::NestedMacvlan, 71, VM_MAC);
    // Neutron writes lower case; the match does not depend on it.
    let vb = by_mac(VifType::NestedMacvlan, 72, &VM_MAC.to_uppercase());
    binder.bind(&a.path(), "eth0", &va, true).await.unwrap();
    binder.bind(&b.path(), "eth0", &vb, true).await.unwrap();
    let ens3 = ifindex(&vm, "ens3");
    assert_eq!(parent_of_pod_eth0(&a), ens3);
    assert_eq!(parent_of_pod_eth0(&b), ens3);
    assert!(a.ping("198.18.200.72"), "pod A cannot ping pod B");
    assert!(b.ping("198.18.200.71"), "pod B cannot ping pod A");
    binder.check(&a.path(), "eth0", &va).await.unwrap();
    binder.unbind(Some(&a.path()), "eth0", &[]).await.unwrap();
    assert!(!a.has_link("eth0"));
}

#[tokio::test]
async fn a_pinned_name_the_node_lacks_gives_way_to_the_mac_and_one_it_has_wins() {
    if !require_root("a_pinned_name_the_node_lacks_gives_way_to_the_mac_and_one_it_has_wins") {
        return;
    }
    let vm = vm_with_ens3();
    let (a, b) = (TestNs::new("pa"), TestNs::new("pb"));
    // The controller pinned `eth0` for the cluster; this node has none.
    let mut v = by_mac(VifType::NestedMacvlan, 73, VM_MAC);
    v.parent_ifname = Some("eth0".into());
    binder(&vm, None).bind(&a.path(), "eth0", &v, true).await.unwrap();
    assert_eq!(parent_of_pod_eth0(&a), ifindex(&vm, "ens3"));
    // This node's own pin exists: it wins over the MAC.
    let v = by_mac(VifType::NestedMacvlan, 74, VM_MAC);
    binder(&vm, Some("eth1"))
        .bind(&b.path(), "eth0", &v, true)
        .await
        .unwrap();
    assert_eq!(parent_of_pod_eth0(&b), ifindex(&vm, "eth1"));
}

#[tokio::test]
async fn a_mac_no_link_carries_fails_naming_the_mac_and_the_links_seen() {
    if !require_root("a_mac_no_link_carries_fails_naming_the_mac_and_the_links_seen") {
        return;
    }
    let vm = vm_with_ens3();
    let pod = TestNs::new("pod");
    let v = by_mac(VifType::NestedMacvlan, 75, "fa:16:3e:5e:00:99");
    let err = binder(&vm, None)
        .bind(&pod.path(), "eth0", &v, true)
        .await
        .unwrap_err()
        .to_string();
    for part in ["MAC fa:16:3e:5e:00:99", "ens3 fa:16:3e:5e:00:03", "eth1 ", "lo "] {
        assert!(err.contains(part), "{part:?} missing from: {err}");
    }
    assert!(!pod.has_link("eth0"));
    let links = pod.ip_json(&["link", "show"]);
    assert_eq!(links.as_array().map(Vec::len), Some(1), "only lo: {links}");
}
