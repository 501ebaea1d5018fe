//! Kuryr's CRDs as read back from the API server (or written by upstream Kuryr before a migration):
//! KuryrPort, KuryrLoadBalancer, KuryrNetwork and KuryrNetworkPolicy objects and their statuses, and the
//! node-side consumers of a KuryrPort status (the daemon's ADD verdict and the binding requests).
//!
//! The first byte picks the type, the rest is JSON. Asserts: no panic; whatever decodes re-encodes to
//! JSON that decodes to the same value (upstream's os-vif VIF blobs included: they come back in the
//! typed shape); a KuryrPort the daemon judges ready yields every VIF once, the default one under the
//! runtime's CNI_IFNAME and no two under the same name; addresses and routes taken from a VIF have
//! prefix lengths their family allows, and building the netlink requests never panics.

#![no_main]

use std::net::IpAddr;
use std::sync::Arc;

use kuryr_api::{
    KuryrLoadBalancer, KuryrLoadBalancerStatus, KuryrNetwork, KuryrNetworkPolicy, KuryrNetworkPolicyStatus,
    KuryrNetworkStatus, KuryrPort, KuryrPortStatus, Vif,
};
use kuryr_cni::binding::{addr, link, macvlan, route, veth, vlan};
use kuryr_cni::cni::PodArgs;
use kuryr_cni::daemon::cache::{Lookup, PodState};
use kuryr_cni::daemon::wait::{evaluate, Verdict};
use kuryr_core::lb::{desired_lb, plan, MemberSubnets, OctaviaCaps, Unlimited};
use libfuzzer_sys::fuzz_target;
use serde::de::DeserializeOwned;
use serde::Serialize;

/// Decodes `data` as `T`; when it decodes, encoding and decoding again gives the same value.
fn round_trip<T: Serialize + DeserializeOwned + PartialEq + std::fmt::Debug>(data: &[u8]) -> Option<T> {
    let v: T = serde_json::from_slice(data).ok()?;
    let text = serde_json::to_vec(&v).unwrap();
    let back: T = serde_json::from_slice(&text).unwrap_or_else(|e| {
        panic!(
            "re-encoded value does not decode ({e}): {}",
            String::from_utf8_lossy(&text)
        )
    });
    assert_eq!(back, v, "round trip changed the value");
    Some(v)
}

fn width(ip: &IpAddr) -> u8 {
    if ip.is_ipv4() {
        32
    } else {
        128
    }
}

fn check_vif(vif: &Vif, default: bool) {
    if let Ok(addrs) = addr::vif_addresses(vif) {
        assert_eq!(addrs.len(), vif.ips.len());
        for (ip, prefix) in addrs {
            assert!(prefix <= width(&ip), "{ip}/{prefix}");
        }
    }
    if let Ok(routes) = route::vif_routes(vif, default) {
        for (dst, prefix, gw) in routes {
            assert!(prefix <= width(&dst), "route {dst}/{prefix} accepted");
            let _ = route::message(7, dst, prefix, gw);
        }
    }
    if let Ok(mac) = link::parse_mac(&vif.mac) {
        assert_eq!(link::format_mac(&mac), vif.mac.to_ascii_lowercase());
    }
    let _ = macvlan::message("eth0", 2, vif, -1);
    let _ = vlan::message("eth0", 2, vif, -1);
    let host = veth::host_ifname(vif);
    let _ = veth::message(&host, "eth0", vif, -1);
}

fn check_port(port: &KuryrPort) {
    let Some(status) = &port.status else {
        return;
    };
    let _ = status.all_active();
    if let Some((name, _)) = status.default_vif() {
        assert!(status.vifs.contains_key(name));
    }
    for (i, v) in status.vifs.values().enumerate() {
        check_vif(&v.vif, i == 0);
    }
    for ifname in ["eth0", "net1"] {
        let pod = PodArgs {
            namespace: "ns".into(),
            name: "pod".into(),
            uid: Some(port.spec.pod_uid.clone()),
        };
        let view = Lookup {
            port: Some(Arc::new(port.clone())),
            pod: Some(PodState {
                uid: port.spec.pod_uid.clone(),
                deleting: false,
            }),
            pods_synced: true,
        };
        if let Verdict::Ready(vifs) = evaluate(&pod, ifname, &view) {
            assert_eq!(vifs.len(), status.vifs.len(), "every VIF is wired once");
            let mut names: Vec<&str> = vifs.iter().map(|(n, _)| n.as_str()).collect();
            if status.default_vif().is_some() {
                assert_eq!(names[0], ifname, "the default VIF takes CNI_IFNAME");
            }
            names.sort_unstable();
            names.dedup();
            assert_eq!(
                names.len(),
                vifs.len(),
                "two VIFs under one interface name: {vifs:?}"
            );
        }
    }
}

fn check_lb(lb: &KuryrLoadBalancer) {
    for caps in [
        OctaviaCaps {
            version: (2, 26),
            provider: "amphora".into(),
            refused: Default::default(),
        },
        OctaviaCaps {
            version: (2, 0),
            provider: "ovn".into(),
            refused: Default::default(),
        },
    ] {
        let (desired, _) = desired_lb("ns", "svc", &lb.spec, &caps, &MemberSubnets::default());
        let _ = plan(&desired, None, &Unlimited);
    }
    if let Some(s) = &lb.status {
        if let Some(p) = s.loadbalancer.as_ref().and_then(|l| l.provisioning_status) {
            let _ = p.is_pending();
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&kind, json)) = data.split_first() else {
        return;
    };
    match kind % 9 {
        0 => {
            if let Some(p) = round_trip::<KuryrPort>(json) {
                check_port(&p);
            }
        }
        1 => {
            round_trip::<KuryrPortStatus>(json);
        }
        2 => {
            if let Some(lb) = round_trip::<KuryrLoadBalancer>(json) {
                check_lb(&lb);
            }
        }
        3 => {
            round_trip::<KuryrLoadBalancerStatus>(json);
        }
        4 => {
            round_trip::<KuryrNetwork>(json);
        }
        5 => {
            round_trip::<KuryrNetworkStatus>(json);
        }
        6 => {
            round_trip::<KuryrNetworkPolicy>(json);
        }
        7 => {
            round_trip::<KuryrNetworkPolicyStatus>(json);
        }
        _ => {
            // One VIF, ours or upstream's os-vif primitive.
            let Ok(value) = serde_json::from_slice::<serde_json::Value>(json) else {
                return;
            };
            if let Ok(vif) = Vif::from_value(value) {
                let back = Vif::from_value(serde_json::to_value(&vif).unwrap()).unwrap();
                assert_eq!(back, vif);
                check_vif(&vif, true);
            }
        }
    }
});
