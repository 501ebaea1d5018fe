//! Preflight verdicts from gathered facts (pure: the facts come from [`super::gather`]).

use std::collections::{BTreeMap, BTreeSet};

use kuryr_api::k8s_openapi::apimachinery::pkg::version::Info;
use kuryr_api::{kube_version, labels, CustomResourceDefinition, Node, VifType};
use kuryr_core::neutron::NeutronPort;
use kuryr_core::node_vif::node_vif_type;
use kuryr_core::parent::{find_trunk_parent, find_vm_port, internal_ips};
use kuryr_core::CoreError;
use serde::Serialize;

use super::crd_drift::drift;
use super::needs::{needs, Api, Counts, Need};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    Pass,
    Warn,
    Fail,
    /// Not checked; the detail says why (a setting not given, Kubernetes not read).
    Skip,
}

impl Outcome {
    pub fn label(self) -> &'static str {
        match self {
            Outcome::Pass => "PASS",
            Outcome::Warn => "WARN",
            Outcome::Fail => "FAIL",
            Outcome::Skip => "SKIP",
        }
    }
}

/// A quota's limit (-1: unlimited) and current use (`None` when the cloud does not say).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct QuotaLine {
    pub limit: i64,
    pub used: Option<i64>,
}

/// A project Namespaces may be put in (docs/projects.md): the pods, namespaces and policies of the
/// Namespaces annotated with it (`None`: Kubernetes not read) and its Neutron quotas.
#[derive(Debug, Clone, Default)]
pub struct ProjectQuota {
    pub project: String,
    pub counts: Option<Counts>,
    pub neutron_quota: BTreeMap<String, QuotaLine>,
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
    /// Each `--namespace-projects` project: what its Namespaces hold and its Neutron quotas.
    pub project_quotas: Vec<ProjectQuota>,
    pub counts: Counts,
    /// Where the counts came from (`kubernetes`, `flags`), or why Kubernetes could not be read.
    pub counts_source: String,
    /// The Kuryr CRDs in the cluster by name (`None`: Kubernetes not read; `Err`: why they could not be).
    pub installed_crds: Option<Result<BTreeMap<String, CustomResourceDefinition>, String>>,
    /// The API server's `/version` (`None`: Kubernetes not read; `Err`: why it could not be).
    pub kubernetes_version: Option<Result<Info, String>>,
    /// The controller's vif driver the install will use.
    pub vif_driver: VifType,
    /// Every Node with the ports on its InternalIPs (`None`: not read; `Err`: Nodes not listed).
    pub nodes: Option<Result<Vec<NodePorts>, String>>,
    /// The configured cloud objects (`None`: not given).
    pub pod_subnet: Option<Configured<SubnetFacts>>,
    pub service_subnet: Option<Configured<SubnetFacts>>,
    /// Dual-stack: `--secondary-pod-subnet`, `--secondary-service-subnet`.
    pub secondary_pod_subnet: Option<Configured<SubnetFacts>>,
    pub secondary_service_subnet: Option<Configured<SubnetFacts>>,
    pub external_network: Option<Configured<NetworkFacts>>,
    /// `--additional-subnets` (pods' extra interfaces).
    pub additional_subnets: Vec<Configured<SubnetFacts>>,
}

/// A Node and the Neutron ports holding its InternalIPs: what the controller's parent-port lookup sees.
#[derive(Debug, Clone)]
pub struct NodePorts {
    pub node: Node,
    /// `Err`: the ports could not be listed.
    pub ports: Result<Vec<NeutronPort>, String>,
}

/// A configured id and what Neutron says about it.
#[derive(Debug, Clone)]
pub struct Configured<T> {
    pub id: String,
    /// Where the id came from: a flag, or the settings file's path.
    pub from: String,
    /// `Ok(None)`: Neutron has no such object (or does not show it to these credentials).
    pub found: Result<Option<T>, String>,
}

#[derive(Debug, Clone)]
pub struct SubnetFacts {
    pub cidr: String,
    pub network_id: String,
}

#[derive(Debug, Clone)]
pub struct NetworkFacts {
    pub name: String,
    /// `router:external`: floating IPs can be allocated from it.
    pub external: bool,
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
            project_quotas: Vec::new(),
            counts: Counts::default(),
            counts_source: String::new(),
            installed_crds: None,
            kubernetes_version: None,
            vif_driver: VifType::NestedVlan,
            nodes: None,
            pod_subnet: None,
            service_subnet: None,
            secondary_pod_subnet: None,
            secondary_service_subnet: None,
            external_network: None,
            additional_subnets: Vec::new(),
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
    out.push(crds(f));
    out.extend(node_ports(f));
    out.push(configured(
        "pod subnet",
        "subnet",
        &f.pod_subnet,
        "not given (--pod-subnet, or pod_subnet in --config): the controller needs one",
        subnet_line,
    ));
    out.extend(dual_stack(f));
    for extra in &f.additional_subnets {
        out.push(configured(
            &format!("additional subnet {}", extra.id),
            "subnet",
            &Some(extra.clone()),
            "",
            subnet_line,
        ));
    }
    out.push(configured(
        "service subnet",
        "subnet",
        &f.service_subnet,
        "not given (--service-subnet, or service_subnet in --config): without it Services get no load balancer",
        subnet_line,
    ));
    out.push(configured(
        "external network",
        "network",
        &f.external_network,
        "not given (--external-network, or external_network in --config): LoadBalancer Services get no floating IP",
        |id, n: &NetworkFacts| {
            if n.external {
                (Outcome::Pass, format!("{id} ({}): external", n.name))
            } else {
                (
                    Outcome::Fail,
                    format!(
                        "{id} ({}): not external (router:external false): floating IPs cannot come from it",
                        n.name
                    ),
                )
            }
        },
    ));
    for need in needs(&f.counts) {
        let quotas = match need.api {
            Api::Neutron => &f.neutron_quota,
            Api::Octavia => &f.octavia_quota,
        };
        let line = quotas.get(need.resource).copied().unwrap_or_default();
        let name = format!("quota {} {}", api_name(need.api), need.resource);
        out.push(quota_check(name, &need, line, "cluster"));
    }
    // A namespace's own project holds its pods' ports, its network and its policies' groups.
    for p in &f.project_quotas {
        let counts = p.counts.unwrap_or_default();
        let what = format!("namespaces in project {}", p.project);
        for need in needs(&counts).into_iter().filter(|n| {
            n.api == Api::Neutron && matches!(n.resource, "port" | "network" | "subnet" | "security_group")
        }) {
            let line = p.neutron_quota.get(need.resource).copied().unwrap_or_default();
            let name = format!("quota neutron {} (project {})", need.resource, p.project);
            let mut check = quota_check(name, &need, line, &what);
            if p.counts.is_none() {
                check.outcome = Outcome::Warn;
                check.detail = format!(
                    "{}; Kubernetes not read: what its namespaces need is unknown",
                    check.detail
                );
            }
            out.push(check);
        }
    }
    out
}

/// One quota line: `needed` of `need` against what `line` leaves free (`who` needs it).
fn quota_check(name: String, need: &Need, line: QuotaLine, who: &str) -> Check {
    let used = line.used.unwrap_or(0);
    let free = line.limit - used;
    let needed = i64::try_from(need.needed).unwrap_or(i64::MAX);
    // The documented minimum is for a whole cluster's project.
    let below_seed = who == "cluster"
        && need
            .seed_minimum
            .is_some_and(|m| line.limit >= 0 && line.limit < i64::try_from(m).unwrap_or(i64::MAX));
    let (outcome, detail) = if line.limit >= 0 && free < needed {
        (
            Outcome::Fail,
            format!(
                "{free} free, {who} need{} {needed} ({})",
                if who == "cluster" { "s" } else { "" },
                need.why
            ),
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
    Check {
        check: name,
        outcome,
        detail,
        quota: Some(QuotaReport {
            limit: line.limit,
            used: line.used,
            needed: need.needed,
            seed_minimum: if who == "cluster" { need.seed_minimum } else { None },
        }),
    }
}

const KUBERNETES_SKIPPED: &str = "Kubernetes not read (--no-kubernetes)";

/// The cluster's Kuryr CRDs against this build's: a stale one FAILs (the controller would write objects
/// the API server prunes or refuses), missing ones only WARN (before an install they are not there yet).
fn crds(f: &Facts) -> Check {
    const NAME: &str = "kuryr CRDs";
    let installed = match &f.installed_crds {
        None => return check(NAME, Outcome::Skip, KUBERNETES_SKIPPED),
        Some(Err(e)) => return check(NAME, Outcome::Warn, format!("not read: {e}")),
        Some(Ok(installed)) => installed,
    };
    let mut missing = Vec::new();
    let mut stale = Vec::new();
    for built in kuryr_api::crds::crds() {
        let name = built.metadata.name.clone().unwrap_or_default();
        match installed.get(&name) {
            None => missing.push(name),
            Some(i) => stale.extend(drift(&built, i).map(|d| format!("{name}: {d}"))),
        }
    }
    if !stale.is_empty() {
        let also = if missing.is_empty() {
            String::new()
        } else {
            format!("; not installed: {}", missing.join(", "))
        };
        check(
            NAME,
            Outcome::Fail,
            format!(
                "not the ones {} generates: {}{also}; run `kubectl apply -f deploy/crds/` (or `kubectl apply -k deploy/`) of this release",
                kuryr_version::line("kuryrctl"),
                stale.join("; ")
            ),
        )
    } else if !missing.is_empty() {
        check(
            NAME,
            Outcome::Warn,
            format!(
                "not installed yet: {} (kubectl apply -k deploy/)",
                missing.join(", ")
            ),
        )
    } else {
        check(
            NAME,
            Outcome::Pass,
            format!(
                "installed, the same as {} generates",
                kuryr_version::line("kuryrctl")
            ),
        )
    }
}

/// What a Node's VIF driver needs of the port holding its InternalIP; `None`: its pods get ports of their own.
fn port_needed(driver: VifType) -> Option<&'static str> {
    match driver {
        VifType::NestedVlan => Some("trunk parent port"),
        VifType::NestedMacvlan => Some("Neutron port"),
        _ => None,
    }
}

/// Each Node's VM port as the controller will look for it, by the Node's driver (its
/// `kuryr.openstack.org/pod-vif` label, else `--vif-driver`): nested-vlan needs the port holding the Node's
/// InternalIP to be a trunk parent, nested-macvlan only needs the port, neutron-vif nothing. One summary
/// line, then one line per Node that fails (named, with its addresses).
fn node_ports(f: &Facts) -> Vec<Check> {
    const NAME: &str = "node parent ports";
    let own_ports = || {
        check(
            NAME,
            Outcome::Skip,
            format!(
                "vif driver {}: pods get ports of their own, the Nodes' ports are not used",
                f.vif_driver
            ),
        )
    };
    let nodes = match &f.nodes {
        None if port_needed(f.vif_driver).is_none() => return vec![own_ports()],
        None => return vec![check(NAME, Outcome::Skip, KUBERNETES_SKIPPED)],
        Some(Err(e)) => return vec![check(NAME, Outcome::Warn, format!("Nodes not listed: {e}"))],
        Some(Ok(nodes)) if nodes.is_empty() => {
            return vec![check(NAME, Outcome::Warn, "no Nodes yet: nothing to check")]
        }
        Some(Ok(nodes)) => nodes,
    };
    let mut failed = Vec::new();
    let mut unread = Vec::new();
    let mut lines = Vec::new();
    // Nodes checked, per driver.
    let mut drivers: BTreeMap<&'static str, usize> = BTreeMap::new();
    for n in nodes {
        let name = n.node.metadata.name.clone().unwrap_or_default();
        let ips = internal_ips(&n.node).join(", ");
        let line = |outcome, detail| check(format!("node parent port {name}"), outcome, detail);
        let driver = match node_vif_type(n.node.metadata.labels.as_ref()) {
            Ok(labelled) => labelled.unwrap_or(f.vif_driver),
            Err(e) => {
                lines.push(line(Outcome::Fail, e.to_string()));
                failed.push(name.clone());
                continue;
            }
        };
        if port_needed(driver).is_none() {
            continue;
        }
        *drivers.entry(driver.as_str()).or_default() += 1;
        let found = match &n.ports {
            Err(e) => {
                lines.push(line(Outcome::Warn, format!("{ips}: ports not listed: {e}")));
                unread.push(name.clone());
                continue;
            }
            Ok(ports) if driver == VifType::NestedVlan => find_trunk_parent(&n.node, ports).map(|_| ()),
            Ok(ports) => find_vm_port(&n.node, ports).map(|_| ()),
        };
        if let Err(e) = found {
            lines.push(line(Outcome::Fail, node_failure(&e, &ips)));
            failed.push(name.clone());
        }
    }
    if drivers.is_empty() && failed.is_empty() {
        return vec![own_ports()];
    }
    let total = nodes.len();
    let summary = if !failed.is_empty() {
        check(
            NAME,
            Outcome::Fail,
            format!(
                "{} of {total} Nodes have no {}: {}",
                failed.len(),
                needed_ports(&drivers, " on their InternalIP"),
                failed.join(", ")
            ),
        )
    } else if !unread.is_empty() {
        check(
            NAME,
            Outcome::Warn,
            format!(
                "{} of {total} Nodes not checked: {}",
                unread.len(),
                unread.join(", ")
            ),
        )
    } else {
        let checked: usize = drivers.values().sum();
        let nodes = if checked == 1 {
            "1 Node".to_owned()
        } else {
            format!("{checked} Nodes")
        };
        check(
            NAME,
            Outcome::Pass,
            format!("{nodes}: each InternalIP is on a {}", needed_ports(&drivers, "")),
        )
    };
    std::iter::once(summary).chain(lines).collect()
}

/// The ports the checked Nodes' drivers need, `on` placed before the driver: "trunk parent port on their
/// InternalIP (nested-vlan)", or one part per driver when the Nodes' drivers differ.
fn needed_ports(drivers: &BTreeMap<&'static str, usize>, on: &str) -> String {
    let need = |d: &str| VifType::creatable(d).and_then(port_needed).unwrap_or("port");
    match drivers.len() {
        0 => format!("usable {} label", labels::POD_VIF),
        1 => {
            let d = drivers.keys().next().copied().unwrap_or_default();
            format!("{}{on} ({d})", need(d))
        }
        _ => {
            let each: Vec<String> = drivers
                .iter()
                .map(|(d, count)| format!("{} ({d}: {count})", need(d)))
                .collect();
            format!("{}{on}", each.join(" or a "))
        }
    }
}

/// What to tell about a Node the parent-port lookup refuses, and how to fix it.
fn node_failure(e: &CoreError, ips: &str) -> String {
    match e {
        CoreError::NoNodeAddress { .. } => {
            format!("{e}: the controller finds a Node's VM port by its InternalIP")
        }
        CoreError::NoParentPort { .. } => {
            format!("{e} (none these credentials can see): is the Node a VM of this cloud and project?")
        }
        CoreError::NoTrunkOnNode { .. } => format!(
            "{ips}: {e}: nested-vlan needs the VM booted on a trunk's parent port (or nested-macvlan: --vif-driver, or the Node label {})",
            labels::POD_VIF
        ),
        other => format!("{ips}: {other}"),
    }
}

/// A configured id: SKIP when not given, FAIL when Neutron has no such `what`, else `judge` decides.
fn configured<T>(
    name: &str,
    what: &str,
    c: &Option<Configured<T>>,
    not_given: &str,
    judge: impl Fn(&str, &T) -> (Outcome, String),
) -> Check {
    let Some(c) = c else {
        return check(name, Outcome::Skip, not_given);
    };
    match &c.found {
        Ok(None) => check(
            name,
            Outcome::Fail,
            format!("{} (from {}): no such {what}", c.id, c.from),
        ),
        Err(e) => check(
            name,
            Outcome::Warn,
            format!("{} (from {}): not read: {e}", c.id, c.from),
        ),
        Ok(Some(t)) => {
            let (outcome, detail) = judge(&c.id, t);
            check(name, outcome, detail)
        }
    }
}

fn subnet_line(id: &str, s: &SubnetFacts) -> (Outcome, String) {
    (
        Outcome::Pass,
        format!("{id}: {} on network {}", s.cidr, s.network_id),
    )
}

fn api_name(a: Api) -> &'static str {
    match a {
        Api::Neutron => "neutron",
        Api::Octavia => "octavia",
    }
}

/// The family of a CIDR: `6` when it has a colon.
fn family(cidr: &str) -> u8 {
    if cidr.contains(':') {
        6
    } else {
        4
    }
}

/// Dual-stack lines, when a secondary subnet is given: it exists, is on its primary's network and of the other
/// family; for Services, Octavia has additional VIPs (API 2.26).
fn dual_stack(f: &Facts) -> Vec<Check> {
    let mut out = Vec::new();
    for (what, secondary, primary) in [
        ("secondary pod subnet", &f.secondary_pod_subnet, &f.pod_subnet),
        (
            "secondary service subnet",
            &f.secondary_service_subnet,
            &f.service_subnet,
        ),
    ] {
        let Some(sec) = secondary else { continue };
        let first = primary
            .as_ref()
            .and_then(|p| p.found.as_ref().ok().cloned().flatten());
        out.push(configured(what, "subnet", &Some(sec.clone()), "", |id, s: &SubnetFacts| {
            match &first {
                None => (
                    Outcome::Warn,
                    format!("{id} ({}): its primary subnet is not known, pairing not checked", s.cidr),
                ),
                Some(p) if p.network_id != s.network_id => (
                    Outcome::Fail,
                    format!(
                        "{id} ({}) is on network {}, its primary subnet on {}: both must be on one network",
                        s.cidr, s.network_id, p.network_id
                    ),
                ),
                Some(p) if family(&p.cidr) == family(&s.cidr) => (
                    Outcome::Fail,
                    format!(
                        "{id} ({}) is IPv{} like its primary subnet ({}): dual-stack needs one of each family",
                        s.cidr,
                        family(&s.cidr),
                        p.cidr
                    ),
                ),
                Some(p) => (
                    Outcome::Pass,
                    format!("{id} ({}) pairs with {} on network {}", s.cidr, p.cidr, s.network_id),
                ),
            }
        }));
    }
    if f.secondary_service_subnet.is_some() {
        out.push(match &f.octavia_version {
            Ok(v) if *v >= kuryr_core::lb::desired::ADDITIONAL_VIPS => check(
                "octavia additional VIPs",
                Outcome::Pass,
                format!(
                    "API {}.{}: dual-stack Services get a VIP of each family",
                    v.0, v.1
                ),
            ),
            Ok(v) => check(
                "octavia additional VIPs",
                Outcome::Warn,
                format!(
                    "API {}.{} < 2.26: dual-stack Services are served on their first family only",
                    v.0, v.1
                ),
            ),
            Err(e) => check(
                "octavia additional VIPs",
                Outcome::Warn,
                format!("Octavia version unknown ({e})"),
            ),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use kuryr_api::k8s_openapi::api::core::v1::{NodeAddress, NodeStatus};
    use kuryr_api::ObjectMeta;
    use kuryr_core::neutron::FixedIp;

    use super::*;

    fn node(name: &str, ips: &[&str]) -> Node {
        Node {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..ObjectMeta::default()
            },
            status: Some(NodeStatus {
                addresses: Some(
                    ips.iter()
                        .map(|ip| NodeAddress {
                            type_: "InternalIP".into(),
                            address: (*ip).into(),
                        })
                        .collect(),
                ),
                ..NodeStatus::default()
            }),
            ..Node::default()
        }
    }

    fn port(id: &str, ip: &str, trunk: Option<&str>) -> NeutronPort {
        NeutronPort {
            id: id.into(),
            device_owner: "compute:nova".into(),
            fixed_ips: vec![FixedIp {
                subnet_id: "nodes".into(),
                ip_address: ip.into(),
            }],
            trunk_id: trunk.map(Into::into),
            ..NeutronPort::default()
        }
    }

    /// A Node whose VM port (`vm-<name>`) holds its address; a trunk parent when `trunk`.
    fn node_on_port(name: &str, ip: &str, trunk: bool) -> NodePorts {
        let trunk_id = format!("trunk-{name}");
        NodePorts {
            node: node(name, &[ip]),
            ports: Ok(vec![port(
                &format!("vm-{name}"),
                ip,
                trunk.then_some(trunk_id.as_str()),
            )]),
        }
    }

    fn found<T>(id: &str, t: T) -> Option<Configured<T>> {
        Some(Configured {
            id: id.into(),
            from: "--flag".into(),
            found: Ok(Some(t)),
        })
    }

    fn subnet(cidr: &str) -> SubnetFacts {
        SubnetFacts {
            cidr: cidr.into(),
            network_id: "net-1".into(),
        }
    }

    /// What the API server hands back for this build's CRDs: with its defaults filled in.
    fn installed_crds() -> BTreeMap<String, CustomResourceDefinition> {
        kuryr_api::crds::crds()
            .into_iter()
            .map(|mut c| {
                c.spec.names.list_kind = Some(format!("{}List", c.spec.names.kind));
                (c.metadata.name.clone().unwrap_or_default(), c)
            })
            .collect()
    }

    fn line<'a>(checks: &'a [Check], name: &str) -> &'a Check {
        checks
            .iter()
            .find(|c| c.check == name)
            .unwrap_or_else(|| panic!("no `{name}` line: {checks:#?}"))
    }

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
            installed_crds: Some(Ok(installed_crds())),
            nodes: Some(Ok(vec![
                node_on_port("vm1", "10.0.0.11", true),
                node_on_port("vm2", "10.0.0.12", true),
            ])),
            pod_subnet: found("pod-subnet-id", subnet("10.1.0.0/16")),
            service_subnet: found("svc-subnet-id", subnet("10.2.0.0/16")),
            external_network: found(
                "ext-net-id",
                NetworkFacts {
                    name: "public".into(),
                    external: true,
                },
            ),
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
        assert_eq!(
            line(&c, "node parent ports").detail,
            "2 Nodes: each InternalIP is on a trunk parent port (nested-vlan)"
        );
        assert_eq!(
            line(&c, "pod subnet").detail,
            "pod-subnet-id: 10.1.0.0/16 on network net-1"
        );
    }

    #[test]
    fn nested_vlan_fails_each_node_without_a_trunk_parent_by_name_and_ip() {
        let mut f = good();
        f.nodes = Some(Ok(vec![
            node_on_port("vm1", "10.0.0.11", true),
            node_on_port("no-trunk", "10.0.0.12", false),
            NodePorts {
                node: node("elsewhere", &["192.0.2.7"]),
                ports: Ok(vec![]),
            },
            NodePorts {
                node: node("no-address", &[]),
                ports: Ok(vec![]),
            },
        ]));
        let c = evaluate(&f);
        let summary = line(&c, "node parent ports");
        assert_eq!(summary.outcome, Outcome::Fail);
        assert_eq!(
            summary.detail,
            "3 of 4 Nodes have no trunk parent port on their InternalIP (nested-vlan): no-trunk, elsewhere, no-address"
        );
        let no_trunk = line(&c, "node parent port no-trunk");
        assert_eq!(no_trunk.outcome, Outcome::Fail);
        assert!(
            no_trunk
                .detail
                .starts_with("10.0.0.12: port vm-no-trunk of node no-trunk is not a trunk parent"),
            "{}",
            no_trunk.detail
        );
        let elsewhere = line(&c, "node parent port elsewhere");
        assert_eq!(elsewhere.outcome, Outcome::Fail);
        assert!(
            elsewhere
                .detail
                .contains("no Neutron port has node elsewhere's address 192.0.2.7"),
            "{}",
            elsewhere.detail
        );
        assert!(line(&c, "node parent port no-address")
            .detail
            .contains("has no InternalIP address"));
        // Passing Nodes get no line of their own.
        assert!(!c.iter().any(|c| c.check == "node parent port vm1"), "{c:#?}");
    }

    #[test]
    fn nested_macvlan_needs_a_port_but_no_trunk() {
        let mut f = good();
        f.vif_driver = VifType::NestedMacvlan;
        f.nodes = Some(Ok(vec![node_on_port("vm1", "10.0.0.11", false)]));
        let c = evaluate(&f);
        assert_eq!(line(&c, "node parent ports").outcome, Outcome::Pass);
        assert_eq!(
            line(&c, "node parent ports").detail,
            "1 Node: each InternalIP is on a Neutron port (nested-macvlan)"
        );
        f.nodes = Some(Ok(vec![NodePorts {
            node: node("vm9", &["10.0.0.19"]),
            ports: Ok(vec![]),
        }]));
        let c = evaluate(&f);
        assert_eq!(line(&c, "node parent ports").outcome, Outcome::Fail);
        assert_eq!(line(&c, "node parent port vm9").outcome, Outcome::Fail);
    }

    fn labelled(mut n: NodePorts, driver: &str) -> NodePorts {
        n.node.metadata.labels = Some([(labels::POD_VIF.to_owned(), driver.to_owned())].into());
        n
    }

    #[test]
    fn a_nodes_pod_vif_label_decides_what_its_port_must_be() {
        // Default nested-vlan; a macvlan-labelled VM needs no trunk, a neutron-vif one no port at all.
        let mut f = good();
        f.nodes = Some(Ok(vec![
            node_on_port("vm1", "10.0.0.11", true),
            labelled(node_on_port("vm2", "10.0.0.12", false), "nested-macvlan"),
            labelled(
                NodePorts {
                    node: node("metal1", &["10.0.0.30"]),
                    ports: Ok(vec![]),
                },
                "neutron-vif",
            ),
        ]));
        let c = evaluate(&f);
        assert_eq!(line(&c, "node parent ports").outcome, Outcome::Pass, "{c:#?}");
        assert_eq!(
            line(&c, "node parent ports").detail,
            "2 Nodes: each InternalIP is on a Neutron port (nested-macvlan: 1) or a trunk parent port (nested-vlan: 1)"
        );
        // Default neutron-vif: only the labelled VM is checked, and its missing trunk fails.
        f.vif_driver = VifType::NeutronVif;
        f.nodes = Some(Ok(vec![
            labelled(node_on_port("vm3", "10.0.0.13", false), "nested-vlan"),
            NodePorts {
                node: node("metal1", &["10.0.0.30"]),
                ports: Ok(vec![]),
            },
        ]));
        let c = evaluate(&f);
        assert_eq!(line(&c, "node parent ports").outcome, Outcome::Fail, "{c:#?}");
        assert!(line(&c, "node parent ports")
            .detail
            .starts_with("1 of 2 Nodes have no trunk parent port on their InternalIP (nested-vlan): vm3"));
        assert_eq!(line(&c, "node parent port vm3").outcome, Outcome::Fail);
        // A label naming no driver fails that Node and says which label.
        f.nodes = Some(Ok(vec![labelled(node_on_port("vm4", "10.0.0.14", true), "vlan")]));
        let c = evaluate(&f);
        assert_eq!(line(&c, "node parent ports").outcome, Outcome::Fail, "{c:#?}");
        assert!(line(&c, "node parent port vm4")
            .detail
            .contains("kuryr.openstack.org/pod-vif=\"vlan\""));
    }

    #[test]
    fn node_ports_are_skipped_or_warned_when_not_checkable() {
        let mut f = good();
        f.vif_driver = VifType::NeutronVif;
        let c = evaluate(&f);
        assert_eq!(line(&c, "node parent ports").outcome, Outcome::Skip);
        assert!(line(&c, "node parent ports").detail.contains("neutron-vif"));

        let mut f = good();
        f.nodes = None;
        assert_eq!(line(&evaluate(&f), "node parent ports").outcome, Outcome::Skip);
        f.nodes = Some(Err("forbidden".into()));
        assert_eq!(line(&evaluate(&f), "node parent ports").outcome, Outcome::Warn);
        f.nodes = Some(Ok(vec![NodePorts {
            node: node("vm1", &["10.0.0.11"]),
            ports: Err("neutron down".into()),
        }]));
        let c = evaluate(&f);
        assert_eq!(line(&c, "node parent ports").outcome, Outcome::Warn);
        assert_eq!(line(&c, "node parent port vm1").outcome, Outcome::Warn);
        assert!(!c.iter().any(|c| c.outcome == Outcome::Fail), "{c:#?}");
    }

    #[test]
    fn a_missing_subnet_or_network_fails_with_its_id_and_an_absent_one_is_skipped() {
        let mut f = good();
        f.pod_subnet = Some(Configured {
            id: "00000000-dead-beef-0000-000000000000".into(),
            from: "/etc/kuryr/kuryr.yaml".into(),
            found: Ok(None),
        });
        f.service_subnet = None;
        f.external_network = Some(Configured {
            id: "ext".into(),
            from: "--external-network".into(),
            found: Err("503".into()),
        });
        let c = evaluate(&f);
        let pod = line(&c, "pod subnet");
        assert_eq!(pod.outcome, Outcome::Fail);
        assert_eq!(
            pod.detail,
            "00000000-dead-beef-0000-000000000000 (from /etc/kuryr/kuryr.yaml): no such subnet"
        );
        let svc = line(&c, "service subnet");
        assert_eq!(svc.outcome, Outcome::Skip);
        assert!(
            svc.detail.starts_with("not given (--service-subnet"),
            "{}",
            svc.detail
        );
        assert_eq!(line(&c, "external network").outcome, Outcome::Warn);
        f.external_network = Some(Configured {
            id: "ext".into(),
            from: "--external-network".into(),
            found: Ok(None),
        });
        assert_eq!(
            line(&evaluate(&f), "external network").detail,
            "ext (from --external-network): no such network"
        );
    }

    #[test]
    fn an_external_network_that_is_not_external_fails() {
        let mut f = good();
        f.external_network = found(
            "tenant-net",
            NetworkFacts {
                name: "private".into(),
                external: false,
            },
        );
        let c = evaluate(&f);
        let ext = line(&c, "external network");
        assert_eq!(ext.outcome, Outcome::Fail);
        assert!(
            ext.detail.starts_with("tenant-net (private): not external"),
            "{}",
            ext.detail
        );
    }

    #[test]
    fn stale_crds_fail_with_the_apply_command_and_missing_ones_warn() {
        let mut f = good();
        let mut installed = installed_crds();
        let kp = installed.get_mut("kuryrports.openstack.org").unwrap();
        kp.spec.versions[0]
            .schema
            .as_mut()
            .and_then(|s| s.open_api_v3_schema.as_mut())
            .and_then(|s| s.properties.as_mut())
            .unwrap()
            .remove("status");
        f.installed_crds = Some(Ok(installed));
        let c = evaluate(&f);
        let crds = line(&c, "kuryr CRDs");
        assert_eq!(crds.outcome, Outcome::Fail);
        assert!(
            crds.detail.contains(
                "kuryrports.openstack.org: version v1: schema.openAPIV3Schema.properties.status is not in the cluster"
            ),
            "{}",
            crds.detail
        );
        assert!(
            crds.detail.contains("kubectl apply -f deploy/crds/"),
            "{}",
            crds.detail
        );

        let mut partial = installed_crds();
        partial.remove("kuryrnetworkpolicies.openstack.org");
        f.installed_crds = Some(Ok(partial));
        let crds = evaluate(&f);
        let crds = line(&crds, "kuryr CRDs");
        assert_eq!(crds.outcome, Outcome::Warn);
        assert!(crds
            .detail
            .contains("not installed yet: kuryrnetworkpolicies.openstack.org"));

        f.installed_crds = None;
        assert_eq!(line(&evaluate(&f), "kuryr CRDs").outcome, Outcome::Skip);
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
    fn a_secondary_subnet_must_pair_with_its_primary_and_services_need_additional_vips() {
        let given = |id: &str, s: SubnetFacts| {
            Some(Configured {
                id: id.into(),
                from: "--x".into(),
                found: Ok(Some(s)),
            })
        };
        let mut f = good();
        f.pod_subnet = given("pods", subnet("10.1.0.0/24"));
        f.secondary_pod_subnet = given("pods6", subnet("fd42:18::/64"));
        f.service_subnet = given("svc", subnet("10.2.0.0/24"));
        f.secondary_service_subnet = given("svc4", subnet("10.3.0.0/24"));
        f.octavia_version = Ok((2, 25));
        let c = evaluate(&f);
        let m = by_name(&c);
        assert_eq!(m["secondary pod subnet"], Outcome::Pass);
        assert_eq!(m["secondary service subnet"], Outcome::Fail);
        assert!(line(&c, "secondary service subnet")
            .detail
            .contains("one of each family"));
        assert_eq!(m["octavia additional VIPs"], Outcome::Warn);
        f.secondary_pod_subnet = given(
            "elsewhere",
            SubnetFacts {
                cidr: "fd42:18::/64".into(),
                network_id: "net-2".into(),
            },
        );
        f.octavia_version = Ok((2, 30));
        let c = evaluate(&f);
        let m = by_name(&c);
        assert_eq!(m["secondary pod subnet"], Outcome::Fail);
        assert!(line(&c, "secondary pod subnet").detail.contains("one network"));
        assert_eq!(m["octavia additional VIPs"], Outcome::Pass);
        // Not given: no line at all.
        f.secondary_pod_subnet = None;
        f.secondary_service_subnet = None;
        let m = by_name(&evaluate(&f));
        assert!(!m.contains_key("secondary pod subnet") && !m.contains_key("octavia additional VIPs"));
    }

    #[test]
    fn each_additional_subnet_is_a_line_of_its_own() {
        let mut f = good();
        f.additional_subnets = vec![
            Configured {
                id: "s-ok".into(),
                from: "--additional-subnets".into(),
                found: Ok(Some(subnet("10.9.0.0/24"))),
            },
            Configured {
                id: "s-gone".into(),
                from: "--additional-subnets".into(),
                found: Ok(None),
            },
        ];
        let c = evaluate(&f);
        let m = by_name(&c);
        assert_eq!(m["additional subnet s-ok"], Outcome::Pass);
        assert_eq!(m["additional subnet s-gone"], Outcome::Fail);
        assert!(line(&c, "additional subnet s-gone")
            .detail
            .contains("no such subnet"));
    }

    #[test]
    fn each_namespace_project_gets_its_own_quota_lines() {
        let mut f = good();
        let line = |limit, used| QuotaLine {
            limit,
            used: Some(used),
        };
        f.project_quotas = vec![
            ProjectQuota {
                project: "p-a".into(),
                counts: Some(Counts {
                    namespaces: 2,
                    pods: 30,
                    policies: 1,
                    ..Counts::default()
                }),
                neutron_quota: BTreeMap::from([
                    ("port".to_owned(), line(40, 20)),
                    ("network".to_owned(), line(10, 0)),
                    ("subnet".to_owned(), line(10, 0)),
                    ("security_group".to_owned(), line(-1, 3)),
                ]),
            },
            ProjectQuota {
                project: "p-b".into(),
                counts: None,
                neutron_quota: BTreeMap::from([("port".to_owned(), line(500, 0))]),
            },
        ];
        let c = evaluate(&f);
        let m = by_name(&c);
        // 30 pods + 2 namespaces = 32 ports, 20 free.
        assert_eq!(m["quota neutron port (project p-a)"], Outcome::Fail);
        let port = c
            .iter()
            .find(|c| c.check == "quota neutron port (project p-a)")
            .unwrap();
        assert!(
            port.detail
                .starts_with("20 free, namespaces in project p-a need 32"),
            "{}",
            port.detail
        );
        assert_eq!(port.quota.as_ref().unwrap().seed_minimum, None);
        assert_eq!(m["quota neutron network (project p-a)"], Outcome::Pass);
        assert_eq!(m["quota neutron security_group (project p-a)"], Outcome::Pass);
        // Kubernetes not read: the need is unknown, said as a warning.
        assert_eq!(m["quota neutron port (project p-b)"], Outcome::Warn);
        assert!(!m.contains_key("quota neutron security_group_rule (project p-a)"));
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
