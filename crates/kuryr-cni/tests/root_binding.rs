//! Root tests of the netlink binding drivers in private namespaces (see tests/common). They run for real as
//! root (CI) and say why when they skip (not root). The VLAN driver has its own test (tests/vlan_binding.rs),
//! which boots a qemu guest where this kernel lacks 802.1Q.

mod common;

use std::path::PathBuf;

use common::{mk_vm, require_root, vif, TestNs};
use kuryr_api::VifType;
use kuryr_cni::binding::{Binder, NetlinkBinder, NetlinkBinderConfig};

fn binder(host: &TestNs, link_iface: &str, bridge: &str) -> NetlinkBinder {
    binder_with(host, link_iface, bridge, true)
}

fn binder_with(host: &TestNs, link_iface: &str, bridge: &str, macvlan_host_link: bool) -> NetlinkBinder {
    NetlinkBinder::new(NetlinkBinderConfig {
        host_netns: Some(host.path()),
        link_iface: Some(link_iface.into()),
        bridge: bridge.into(),
        netns_dir: PathBuf::from("/var/run/netns"),
        macvlan_host_link,
        ..NetlinkBinderConfig::default()
    })
}

/// `ip route show <ip>/32` in `ns`: the device of that host route, if any.
fn host_route_dev(ns: &TestNs, ip: &str) -> Option<String> {
    let r = ns.ip_json(&["route", "show", &format!("{ip}/32")]);
    r.as_array()?.first()?["dev"].as_str().map(String::from)
}

#[tokio::test]
async fn the_vm_reaches_its_own_macvlan_pods_through_its_host_link() {
    if !require_root("the_vm_reaches_its_own_macvlan_pods_through_its_host_link") {
        return;
    }
    // The VM's address on its NIC, in the pods' subnet: as a nested VM's port address.
    let vm = mk_vm();
    vm.ip(&["addr", "add", "198.18.200.2/24", "dev", "eth0"]);
    let (a, b) = (TestNs::new("ha"), TestNs::new("hb"));
    let (va, vb) = (vif(VifType::NestedMacvlan, 21), vif(VifType::NestedMacvlan, 22));

    // Without the host link, the macvlan parent cannot reach its child: what the link is for.
    let plain = binder_with(&vm, "eth0", "unused", false);
    plain.bind(&b.path(), "eth0", &vb, true).await.unwrap();
    assert!(
        !vm.ping("198.18.200.22"),
        "the parent reached its macvlan child without a host link"
    );
    assert!(!vm.has_link("kmv-eth0"));
    plain.unbind(Some(&b.path()), "eth0", &[]).await.unwrap();

    let binder = binder(&vm, "eth0", "unused");
    binder.bind(&a.path(), "eth0", &va, true).await.unwrap();
    binder.bind(&b.path(), "eth0", &vb, true).await.unwrap();
    let l = link_json(&vm, "kmv-eth0");
    assert_eq!(l["linkinfo"]["info_kind"], "macvlan");
    assert_eq!(l["linkinfo"]["info_data"]["mode"], "bridge");
    assert!(
        vm.ip_json(&["-4", "addr", "show", "dev", "kmv-eth0"])[0]["addr_info"]
            .as_array()
            .is_none_or(|a| a.is_empty())
    );
    for ip in ["198.18.200.21", "198.18.200.22"] {
        assert_eq!(host_route_dev(&vm, ip).as_deref(), Some("kmv-eth0"));
        assert!(vm.ping(ip), "the VM cannot ping its pod {ip}");
    }
    // The pod sees the VM's own address as the source, and reaches it back.
    assert!(a.ping("198.18.200.2"), "the pod cannot ping its VM");
    // Pods still reach each other.
    assert!(a.ping("198.18.200.22"));

    // DEL takes the pod's route (not the other's); the link stays for the next pod.
    binder.unbind(Some(&a.path()), "eth0", &[]).await.unwrap();
    assert_eq!(host_route_dev(&vm, "198.18.200.21"), None);
    assert_eq!(host_route_dev(&vm, "198.18.200.22").as_deref(), Some("kmv-eth0"));
    assert!(vm.has_link("kmv-eth0"));
    // A second DEL (no interface left) and the other pod's DEL succeed; nothing routed remains.
    binder.unbind(Some(&a.path()), "eth0", &[]).await.unwrap();
    binder.unbind(Some(&b.path()), "eth0", &[]).await.unwrap();
    assert_eq!(host_route_dev(&vm, "198.18.200.22"), None);
}

fn link_json(ns: &TestNs, ifname: &str) -> serde_json::Value {
    ns.ip_json(&["-d", "link", "show", "dev", ifname])[0].clone()
}

#[tokio::test]
async fn macvlan_pods_get_mac_ip_route_mtu_and_ping_each_other() {
    if !require_root("macvlan_pods_get_mac_ip_route_mtu_and_ping_each_other") {
        return;
    }
    let vm = mk_vm();
    let (a, b) = (TestNs::new("pa"), TestNs::new("pb"));
    let binder = binder(&vm, "eth0", "unused");
    let (va, vb) = (vif(VifType::NestedMacvlan, 11), vif(VifType::NestedMacvlan, 12));
    let bound = binder.bind(&a.path(), "eth0", &va, true).await.unwrap();
    assert_eq!(bound.mac, "00:00:5e:00:01:0b", "macvlan uses the VRRP MAC");
    binder.bind(&b.path(), "eth0", &vb, true).await.unwrap();

    let l = link_json(&a, "eth0");
    assert_eq!(l["address"], "00:00:5e:00:01:0b");
    assert_eq!(l["mtu"], 1400);
    assert_eq!(l["linkinfo"]["info_kind"], "macvlan");
    assert_eq!(l["linkinfo"]["info_data"]["mode"], "bridge");
    let addrs = a.ip_json(&["addr", "show", "dev", "eth0"]);
    let ai = &addrs[0]["addr_info"];
    assert!(
        ai.as_array()
            .unwrap()
            .iter()
            .any(|x| x["local"] == "198.18.200.11" && x["prefixlen"] == 24),
        "{addrs}"
    );
    let routes = a.ip_json(&["route", "show", "default"]);
    assert_eq!(routes[0]["gateway"], "198.18.200.1", "{routes}");
    assert!(a.ping("198.18.200.12"), "pod A cannot ping pod B");
    assert!(b.ping("198.18.200.11"), "pod B cannot ping pod A");

    binder.check(&a.path(), "eth0", &va).await.unwrap();
    let mut wrong = va.clone();
    wrong.vrrp_mac = Some("00:00:5e:00:01:ff".into());
    assert!(binder.check(&a.path(), "eth0", &wrong).await.is_err());

    // DEL removes it; a second DEL (runtime's, empty netns) and a DEL of a gone netns succeed.
    binder.unbind(Some(&a.path()), "eth0", &[]).await.unwrap();
    assert!(!a.has_link("eth0"));
    binder.unbind(Some(&a.path()), "eth0", &[]).await.unwrap();
    binder.unbind(None, "eth0", &[]).await.unwrap();
    binder
        .unbind(Some(&PathBuf::from("/var/run/netns/kcni-test-gone")), "eth0", &[])
        .await
        .unwrap();
}

#[tokio::test]
async fn a_repeated_add_replaces_the_half_made_interface() {
    if !require_root("a_repeated_add_replaces_the_half_made_interface") {
        return;
    }
    let vm = mk_vm();
    let a = TestNs::new("pa");
    let binder = binder(&vm, "eth0", "unused");
    let v = vif(VifType::NestedMacvlan, 21);
    binder.bind(&a.path(), "eth0", &v, true).await.unwrap();
    binder.bind(&a.path(), "eth0", &v, true).await.unwrap();
    binder.check(&a.path(), "eth0", &v).await.unwrap();
}

#[tokio::test]
async fn a_stale_macvlan_with_the_same_mac_in_a_dead_sandbox_does_not_wedge_add() {
    if !require_root("a_stale_macvlan_with_the_same_mac_in_a_dead_sandbox_does_not_wedge_add") {
        return;
    }
    let vm = mk_vm();
    let stale = TestNs::new("stale");
    let pod = TestNs::new("pod");
    let v = vif(VifType::NestedMacvlan, 31);
    let mac = v.vrrp_mac.clone().unwrap();
    // What a sandbox the runtime never cleaned up leaves: the pod's old macvlan, up, same MAC.
    vm.ip(&[
        "link", "add", "old0", "link", "eth0", "type", "macvlan", "mode", "bridge",
    ]);
    vm.ip(&["link", "set", "old0", "address", &mac, "netns", &stale.name]);
    stale.ip(&["link", "set", "old0", "up"]);

    let binder = binder(&vm, "eth0", "unused");
    binder.bind(&pod.path(), "eth0", &v, true).await.unwrap();
    assert!(!stale.has_link("old0"), "the stale interface was removed");
    assert_eq!(link_json(&pod, "eth0")["address"], mac.as_str());
    assert_eq!(link_json(&pod, "eth0")["operstate"], "UP");
}

#[tokio::test]
async fn veth_pods_on_a_bridge_ping_and_del_removes_both_ends() {
    if !require_root("veth_pods_on_a_bridge_ping_and_del_removes_both_ends") {
        return;
    }
    let node = TestNs::new("node");
    node.ip(&["link", "add", "br-test", "type", "bridge"]);
    node.ip(&["link", "set", "br-test", "up"]);
    let (a, b) = (TestNs::new("pa"), TestNs::new("pb"));
    let binder = binder(&node, "unused", "br-test");
    let (va, vb) = (vif(VifType::NeutronVif, 41), vif(VifType::NeutronVif, 42));
    let ba = binder.bind(&a.path(), "eth0", &va, true).await.unwrap();
    let bb = binder.bind(&b.path(), "eth0", &vb, true).await.unwrap();
    let host_a = ba.host_ifname.clone().unwrap();
    assert_eq!(ba.mac, "fa:16:3e:c0:00:29");
    let hl = link_json(&node, &host_a);
    assert_eq!(hl["master"], "br-test");
    assert_eq!(hl["mtu"], 1400);
    assert_eq!(link_json(&a, "eth0")["mtu"], 1400);
    assert!(a.ping("198.18.200.42"), "pod A cannot ping pod B over the bridge");
    binder.check(&b.path(), "eth0", &vb).await.unwrap();

    binder
        .unbind(Some(&a.path()), "eth0", std::slice::from_ref(&host_a))
        .await
        .unwrap();
    assert!(!a.has_link("eth0"));
    assert!(!node.has_link(&host_a));
    binder.unbind(None, "eth0", &[host_a]).await.unwrap();
    binder
        .unbind(Some(&b.path()), "eth0", &[bb.host_ifname.unwrap()])
        .await
        .unwrap();
}

#[tokio::test]
async fn a_leftover_host_end_with_the_same_name_does_not_wedge_add() {
    if !require_root("a_leftover_host_end_with_the_same_name_does_not_wedge_add") {
        return;
    }
    let node = TestNs::new("node");
    node.ip(&["link", "add", "br-test", "type", "bridge"]);
    node.ip(&["link", "set", "br-test", "up"]);
    let stale = TestNs::new("stale");
    let pod = TestNs::new("pod");
    let v = vif(VifType::NeutronVif, 51);
    let host_name = kuryr_cni::binding::veth::host_ifname(&v);
    node.ip(&[
        "link",
        "add",
        &host_name,
        "type",
        "veth",
        "peer",
        "name",
        "eth0",
        "netns",
        &stale.name,
    ]);
    let binder = binder(&node, "unused", "br-test");
    let b = binder.bind(&pod.path(), "eth0", &v, true).await.unwrap();
    assert_eq!(b.host_ifname.as_deref(), Some(host_name.as_str()));
    assert!(!stale.has_link("eth0"), "the old pair went with its host end");
    binder.check(&pod.path(), "eth0", &v).await.unwrap();
}
