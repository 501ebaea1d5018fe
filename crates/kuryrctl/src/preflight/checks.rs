//! Preflight verdicts from gathered facts (pure: the facts come from [`super::gather`]).

use std::collections::{BTreeMap, BTreeSet};

use kuryr_api::k8s_openapi::apimachinery::pkg::version::Info;
use kuryr_api::kube_version;
use serde::Serialize;

use super::needs::{needs, Api, Counts};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    Pass,
    Warn,
    Fail,
}

impl Outcome {
    pub fn label(self) -> &'static str {
        match self {
            Outcome::Pass => "PASS",
            Outcome::Warn => "WARN",
            Outcome::Fail => "FAIL",
        }
    }
}

/// A quota's limit (-1: unlimited) and current use (`None` when the cloud does not say).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct QuotaLine {
    pub limit: i64,
    pub used: Option<i64>,
}

/// Everything preflight looked at.
#[derive(Debug, Clone)]
pub struct Facts {
    pub neutron_extensions: BTreeSet<String>,
    /// `Err` when Octavia could not be read.
    pub octavia_version: Result<(u32, u32), String>,
    pub octavia_providers: BTreeSet<String>,
    /// Neutron agent types, `Err` when they cannot be listed (not admin).
    pub agents: Result<Vec<String>, String>,
    pub neutron_quota: BTreeMap<String, QuotaLine>,
    pub octavia_quota: BTreeMap<String, QuotaLine>,
    pub counts: Counts,
    /// Where the counts came from (`kubernetes`, `flags`), or why Kubernetes could not be read.
    pub counts_source: String,
    /// Kuryr CRDs missing from the cluster (`None`: Kubernetes not read).
    pub missing_crds: Option<Vec<String>>,
    /// The API server's `/version` (`None`: Kubernetes not read; `Err`: why it could not be).
    pub kubernetes_version: Option<Result<Info, String>>,
}

impl Default for Facts {
    fn default() -> Self {
        Self {
            neutron_extensions: BTreeSet::new(),
            octavia_version: Err("not read".into()),
            octavia_providers: BTreeSet::new(),
            agents: Err("not read".into()),
            neutron_quota: BTreeMap::new(),
            octavia_quota: BTreeMap::new(),
            counts: Counts::default(),
            counts_source: String::new(),
            missing_crds: None,
            kubernetes_version: None,
        }
    }
}

impl Default for QuotaLine {
    fn default() -> Self {
        Self {
            limit: -1,
            used: None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Check {
    pub check: String,
    pub outcome: Outcome,
    pub detail: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub quota: Option<QuotaReport>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct QuotaReport {
    pub limit: i64,
    pub used: Option<i64>,
    pub needed: u64,
    pub seed_minimum: Option<u64>,
}

fn check(name: impl Into<String>, outcome: Outcome, detail: impl Into<String>) -> Check {
    Check {
        check: name.into(),
        outcome,
        detail: detail.into(),
        quota: None,
    }
}

pub fn evaluate(f: &Facts) -> Vec<Check> {
    let mut out = Vec::new();
    match &f.kubernetes_version {
        None => {}
        Some(Err(e)) => out.push(check(
            "kubernetes version",
            Outcome::Warn,
            format!("not read: {e}"),
        )),
        Some(Ok(info)) => out.push(match kube_version::require_supported(info) {
            Ok(_) => check(
                "kubernetes version",
                Outcome::Pass,
                format!(
                    "{} (kuryr-rs supports {}.{} and newer)",
                    info.git_version,
                    kube_version::MIN_SUPPORTED.0,
                    kube_version::MIN_SUPPORTED.1
                ),
            ),
            Err(e) => check("kubernetes version", Outcome::Fail, e.to_string()),
        }),
    }
    let ext = |alias: &str| f.neutron_extensions.contains(alias);
    out.push(if ext("trunk") {
        check(
            "neutron extension trunk",
            Outcome::Pass,
            "pods are VLAN subports of the node VMs' trunks",
        )
    } else {
        check(
            "neutron extension trunk",
            Outcome::Fail,
            "missing: enable the trunk service plugin (service_plugins += trunk) — nested pods need it",
        )
    });
    out.push(if ext("standard-attr-tag") || ext("tag-ext") {
        check(
            "neutron extension tags",
            Outcome::Pass,
            "ownership tags on every object",
        )
    } else {
        check(
            "neutron extension tags",
            Outcome::Fail,
            "missing standard-attr-tag: ownership tags (and so GC and crash recovery) need it",
        )
    });
    out.push(if ext("trunk-details") {
        check(
            "neutron extension trunk-details",
            Outcome::Pass,
            "subports listed on parent ports",
        )
    } else {
        check(
            "neutron extension trunk-details",
            Outcome::Warn,
            "missing: one extra trunk read per node",
        )
    });
    out.push(if ext("tag-ports-during-bulk-creation") {
        check(
            "neutron extension tag-ports-during-bulk-creation",
            Outcome::Pass,
            "ports tagged in the create call",
        )
    } else {
        check(
            "neutron extension tag-ports-during-bulk-creation",
            Outcome::Warn,
            "missing: each port is tagged by a second call",
        )
    });
    match &f.octavia_version {
        Ok(v) => {
            let at = |m: (u32, u32)| *v >= m;
            out.push(if at((2, 5)) {
                check(
                    "octavia api version",
                    Outcome::Pass,
                    format!("{}.{} (tags need 2.5)", v.0, v.1),
                )
            } else {
                check(
                    "octavia api version",
                    Outcome::Fail,
                    format!(
                        "{}.{}: below 2.5, load balancers cannot carry ownership tags",
                        v.0, v.1
                    ),
                )
            });
            out.push(if at((2, 1)) {
                check("octavia udp listeners", Outcome::Pass, "UDP Services supported")
            } else {
                check(
                    "octavia udp listeners",
                    Outcome::Warn,
                    "API < 2.1: UDP Services will be refused",
                )
            });
            out.push(if at((2, 23)) {
                check("octavia sctp listeners", Outcome::Pass, "SCTP Services supported")
            } else {
                check(
                    "octavia sctp listeners",
                    Outcome::Warn,
                    "API < 2.23: SCTP Services will be refused",
                )
            });
            let p: Vec<&str> = f.octavia_providers.iter().map(String::as_str).collect();
            out.push(if f.octavia_providers.contains("ovn") {
                check("octavia providers", Outcome::Pass, p.join(", "))
            } else if f.octavia_providers.is_empty() {
                check(
                    "octavia providers",
                    Outcome::Warn,
                    "none listed (API < 2.6?): amphora assumed",
                )
            } else {
                check(
                    "octavia providers",
                    Outcome::Warn,
                    format!("{} — no ovn: every Service costs an amphora VM", p.join(", ")),
                )
            });
        }
        Err(e) => out.push(check(
            "octavia api version",
            Outcome::Fail,
            format!("Octavia unreachable: {e}"),
        )),
    }
    out.push(match &f.agents {
        Ok(types) if types.iter().any(|t| t.contains("OVN")) => check(
            "security group firewall",
            Outcome::Pass,
            "ML2/OVN: security groups are enforced on trunk subports",
        ),
        Ok(types) if types.iter().any(|t| t.contains("Open vSwitch")) => check(
            "security group firewall",
            Outcome::Warn,
            "ML2/OVS: set [securitygroup] firewall_driver = openvswitch (iptables_hybrid does not filter subports)",
        ),
        Ok(_) => check(
            "security group firewall",
            Outcome::Warn,
            "no OVN or OVS agents listed: check that SGs are enforced on trunk subports",
        ),
        Err(e) => check(
            "security group firewall",
            Outcome::Warn,
            format!("cannot list agents ({e}): check the firewall driver enforces SGs on subports"),
        ),
    });
    if let Some(missing) = &f.missing_crds {
        out.push(if missing.is_empty() {
            check("kuryr CRDs", Outcome::Pass, "installed")
        } else {
            check(
                "kuryr CRDs",
                Outcome::Warn,
                format!(
                    "not installed yet: {} (kubectl apply -k deploy/)",
                    missing.join(", ")
                ),
            )
        });
    }
    for need in needs(&f.counts) {
        let quotas = match need.api {
            Api::Neutron => &f.neutron_quota,
            Api::Octavia => &f.octavia_quota,
        };
        let line = quotas.get(need.resource).copied().unwrap_or_default();
        let name = format!("quota {} {}", api_name(need.api), need.resource);
        let used = line.used.unwrap_or(0);
        let free = line.limit - used;
        let needed = i64::try_from(need.needed).unwrap_or(i64::MAX);
        let below_seed = need
            .seed_minimum
            .is_some_and(|m| line.limit >= 0 && line.limit < i64::try_from(m).unwrap_or(i64::MAX));
        let (outcome, detail) = if line.limit >= 0 && free < needed {
            (
                Outcome::Fail,
                format!("{free} free, cluster needs {needed} ({})", need.why),
            )
        } else if below_seed {
            (
                Outcome::Warn,
                format!(
                    "enough now, but below the documented minimum for a default cluster ({})",
                    need.why
                ),
            )
        } else if line.used.is_none() && line.limit >= 0 {
            (
                Outcome::Warn,
                format!("usage unknown; limit covers the need ({})", need.why),
            )
        } else {
            (Outcome::Pass, need.why.to_owned())
        };
        out.push(Check {
            check: name,
            outcome,
            detail,
            quota: Some(QuotaReport {
                limit: line.limit,
                used: line.used,
                needed: need.needed,
                seed_minimum: need.seed_minimum,
            }),
        });
    }
    out
}

fn api_name(a: Api) -> &'static str {
    match a {
        Api::Neutron => "neutron",
        Api::Octavia => "octavia",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn good() -> Facts {
        let ext = [
            "trunk",
            "standard-attr-tag",
            "trunk-details",
            "tag-ports-during-bulk-creation",
        ];
        Facts {
            neutron_extensions: ext.iter().map(|s| s.to_string()).collect(),
            octavia_version: Ok((2, 30)),
            octavia_providers: ["ovn".to_owned(), "amphora".to_owned()].into(),
            agents: Ok(vec!["OVN Controller Gateway agent".into()]),
            counts: Counts {
                nodes: 3,
                namespaces: 2,
                services: 2,
                service_ports: 2,
                pods: 10,
                pool_batch: 10,
                ..Counts::default()
            },
            ..Facts::default()
        }
    }

    fn by_name(checks: &[Check]) -> BTreeMap<String, Outcome> {
        checks.iter().map(|c| (c.check.clone(), c.outcome)).collect()
    }

    #[test]
    fn the_kubernetes_release_is_checked_against_the_supported_floor() {
        let version = |minor: &str| Info {
            major: "1".into(),
            minor: minor.into(),
            git_version: format!("v1.{minor}.2"),
            ..Info::default()
        };
        let mut f = good();
        f.kubernetes_version = Some(Ok(version("37")));
        assert_eq!(by_name(&evaluate(&f))["kubernetes version"], Outcome::Pass);
        f.kubernetes_version = Some(Ok(version("20")));
        let checks = evaluate(&f);
        let line = checks.iter().find(|c| c.check == "kubernetes version").unwrap();
        assert_eq!(line.outcome, Outcome::Fail);
        assert!(line.detail.contains("v1.20.2 is older"), "{}", line.detail);
    }

    #[test]
    fn a_complete_cloud_with_unlimited_quotas_passes() {
        let c = evaluate(&good());
        assert!(c.iter().all(|c| c.outcome == Outcome::Pass), "{c:#?}");
    }

    #[test]
    fn no_trunks_old_octavia_and_a_tiny_port_quota_fail_on_their_own_lines() {
        let mut f = good();
        f.neutron_extensions.remove("trunk");
        f.octavia_version = Ok((2, 4));
        f.neutron_quota.insert(
            "port".into(),
            QuotaLine {
                limit: 10,
                used: Some(4),
            },
        );
        f.neutron_quota.insert(
            "network".into(),
            QuotaLine {
                limit: 100,
                used: Some(1),
            },
        );
        let c = evaluate(&f);
        let m = by_name(&c);
        assert_eq!(m["neutron extension trunk"], Outcome::Fail);
        assert_eq!(m["octavia api version"], Outcome::Fail);
        assert_eq!(m["octavia sctp listeners"], Outcome::Warn);
        assert_eq!(m["quota neutron port"], Outcome::Fail);
        let port = c.iter().find(|c| c.check == "quota neutron port").unwrap();
        assert!(
            port.detail.starts_with("6 free, cluster needs 44"),
            "{}",
            port.detail
        );
        // Enough for this cluster, but under the documented 250: a warning, not a failure.
        assert_eq!(m["quota neutron network"], Outcome::Warn);
    }

    #[test]
    fn ovs_clouds_get_the_firewall_hint() {
        let mut f = good();
        f.agents = Ok(vec!["Open vSwitch agent".into()]);
        let c = evaluate(&f);
        let fw = c.iter().find(|c| c.check == "security group firewall").unwrap();
        assert_eq!(fw.outcome, Outcome::Warn);
        assert!(fw.detail.contains("firewall_driver = openvswitch"));
    }
}
