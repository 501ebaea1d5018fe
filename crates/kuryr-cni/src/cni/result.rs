//! The success result of ADD, kept version-neutral between daemon and plugin and rendered per spec version
//! only when printed.

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::CniVersion;

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CniResult {
    pub interfaces: Vec<IfaceResult>,
    pub ips: Vec<IpResult>,
    pub routes: Vec<RouteResult>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct IfaceResult {
    pub name: String,
    pub mac: String,
    /// The netns path for in-pod interfaces; absent for host-side ones.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mtu: Option<u32>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct IpResult {
    /// CIDR notation: the address with its subnet's prefix length.
    pub address: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway: Option<String>,
    /// Index into `interfaces`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interface: Option<usize>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RouteResult {
    pub dst: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gw: Option<String>,
}

impl CniResult {
    /// The result JSON for `version`: before 1.0.0 each IP has `"version"`; interface `mtu` exists from 1.1.0.
    pub fn render(&self, version: CniVersion) -> Value {
        let interfaces: Vec<Value> = self
            .interfaces
            .iter()
            .map(|i| {
                let mut v = json!({"name": i.name, "mac": i.mac});
                if let Some(s) = &i.sandbox {
                    v["sandbox"] = s.clone().into();
                }
                if let (Some(mtu), true) = (i.mtu, version >= CniVersion::V110) {
                    v["mtu"] = mtu.into();
                }
                v
            })
            .collect();
        let ips: Vec<Value> = self
            .ips
            .iter()
            .map(|ip| {
                let mut v = json!({"address": ip.address});
                if version.ip_has_version_field() {
                    v["version"] = if ip.address.contains(':') { "6" } else { "4" }.into();
                }
                if let Some(g) = &ip.gateway {
                    v["gateway"] = g.clone().into();
                }
                if let Some(i) = ip.interface {
                    v["interface"] = i.into();
                }
                v
            })
            .collect();
        let routes: Vec<Value> = self
            .routes
            .iter()
            .map(|r| {
                let mut v = json!({"dst": r.dst});
                if let Some(g) = &r.gw {
                    v["gw"] = g.clone().into();
                }
                v
            })
            .collect();
        json!({
            "cniVersion": version.as_str(),
            "interfaces": interfaces,
            "ips": ips,
            "routes": routes,
            "dns": {},
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> CniResult {
        CniResult {
            interfaces: vec![IfaceResult {
                name: "eth0".into(),
                mac: "fa:16:3e:00:00:01".into(),
                sandbox: Some("/var/run/netns/cni-1".into()),
                mtu: Some(1450),
            }],
            ips: vec![
                IpResult {
                    address: "10.0.0.5/24".into(),
                    gateway: Some("10.0.0.1".into()),
                    interface: Some(0),
                },
                IpResult {
                    address: "fd00::5/64".into(),
                    gateway: None,
                    interface: Some(0),
                },
            ],
            routes: vec![RouteResult {
                dst: "0.0.0.0/0".into(),
                gw: Some("10.0.0.1".into()),
            }],
        }
    }

    #[test]
    fn pre_1_0_results_carry_ip_version() {
        for v in [CniVersion::V030, CniVersion::V031, CniVersion::V040] {
            let r = sample().render(v);
            assert_eq!(r["cniVersion"], v.as_str());
            assert_eq!(r["ips"][0]["version"], "4");
            assert_eq!(r["ips"][1]["version"], "6");
            assert!(r["interfaces"][0].get("mtu").is_none());
        }
    }

    #[test]
    fn v1_results_drop_ip_version_and_1_1_adds_mtu() {
        let r = sample().render(CniVersion::V100);
        assert!(r["ips"][0].get("version").is_none());
        assert!(r["interfaces"][0].get("mtu").is_none());
        assert_eq!(r["ips"][0]["interface"], 0);
        assert_eq!(r["routes"][0]["gw"], "10.0.0.1");
        assert!(r["ips"][1].get("gateway").is_none());
        let r = sample().render(CniVersion::V110);
        assert_eq!(r["interfaces"][0]["mtu"], 1450);
        assert_eq!(r["interfaces"][0]["sandbox"], "/var/run/netns/cni-1");
        assert_eq!(r["dns"], json!({}));
    }
}
