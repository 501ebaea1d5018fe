//! The load balancer tree as kuryr wants it ([`DesiredLb`]) and as Octavia has it ([`ObservedLb`]). Both are
//! keyed the same way — listeners by (protocol, port), members by (address, port) — so [`crate::lb::plan`]
//! compares them directly.

use std::collections::BTreeMap;

use kuryr_api::loadbalancer::LbProtocol;

/// A listener is one Service port: protocol + port.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ListenerKey {
    pub protocol: LbProtocol,
    pub port: u32,
}

impl ListenerKey {
    pub fn new(protocol: LbProtocol, port: u32) -> Self {
        Self { protocol, port }
    }
}

/// By port, then protocol name (LbProtocol itself has no order).
impl Ord for ListenerKey {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.port, crate::lb::names::protocol(self.protocol))
            .cmp(&(other.port, crate::lb::names::protocol(other.protocol)))
    }
}

impl PartialOrd for ListenerKey {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

/// A backend: address and port.
pub type MemberKey = (String, u32);

/// The subnets Octavia members go on, by the IP family of their address: a dual-stack Service's pool holds
/// members of both families, each declared on its own family's pod subnet.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MemberSubnets {
    pub v4: Option<String>,
    pub v6: Option<String>,
}

impl MemberSubnets {
    /// One subnet for every member (single-stack).
    pub fn single(id: Option<&str>) -> Self {
        Self {
            v4: id.map(str::to_owned),
            v6: id.map(str::to_owned),
        }
    }

    /// The subnet of a member at `ip`.
    pub fn for_address(&self, ip: &str) -> Option<&String> {
        if ip.contains(':') {
            self.v6.as_ref()
        } else {
            self.v4.as_ref()
        }
    }
}

/// A VIP besides the primary one (Octavia `additional_vips`): a dual-stack Service's other clusterIP.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct AdditionalVip {
    pub subnet_id: String,
    pub ip_address: String,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DesiredLb {
    pub name: String,
    pub vip_address: Option<String>,
    pub vip_subnet_id: Option<String>,
    /// Dual-stack: the VIP of the other family; empty for single-stack Services.
    pub additional_vips: Vec<AdditionalVip>,
    /// `None`: Octavia's default provider.
    pub provider: Option<String>,
    pub listeners: BTreeMap<ListenerKey, DesiredListener>,
    /// Whether a floating IP may be put on the VIP (type LoadBalancer and its source ranges enforceable).
    pub expose: bool,
}

impl DesiredLb {
    /// Whether every listener's pool has a member: a load balancer made now serves every port.
    pub fn has_backends(&self) -> bool {
        !self.listeners.is_empty() && self.listeners.values().all(|l| !l.pool.members.is_empty())
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DesiredListener {
    pub name: String,
    pub timeout_client_data: Option<u64>,
    pub timeout_member_data: Option<u64>,
    /// Empty: everyone.
    pub allowed_cidrs: Vec<String>,
    pub pool: DesiredPool,
}

/// Octavia's session persistence types.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PersistenceKind {
    SourceIp,
    HttpCookie,
    AppCookie,
    /// A type this code does not know (seen on a pool, never asked for).
    Other(String),
}

impl PersistenceKind {
    /// Octavia's name for it.
    pub fn as_str(&self) -> &str {
        match self {
            Self::SourceIp => "SOURCE_IP",
            Self::HttpCookie => "HTTP_COOKIE",
            Self::AppCookie => "APP_COOKIE",
            Self::Other(s) => s,
        }
    }

    /// From Octavia's name; `None` for an empty one (no persistence).
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "" => return None,
            "SOURCE_IP" => Self::SourceIp,
            "HTTP_COOKIE" => Self::HttpCookie,
            "APP_COOKIE" => Self::AppCookie,
            other => Self::Other(other.to_owned()),
        })
    }
}

/// A pool's session persistence.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionPersistence {
    pub kind: PersistenceKind,
    /// Octavia `persistence_timeout` (seconds): UDP and SCTP pools only (Octavia refuses it on others). The
    /// ovn provider sets OVN's `affinity_timeout` from it, and sets no affinity without it.
    pub timeout_s: Option<u32>,
}

impl SessionPersistence {
    /// `SOURCE_IP`, with `timeout_s` if given.
    pub fn source_ip(timeout_s: Option<u32>) -> Self {
        Self {
            kind: PersistenceKind::SourceIp,
            timeout_s,
        }
    }

    /// Whether a pool that has `have` gives what `self` asks: the same kind, and the timeout when one is
    /// asked (a pool may report a provider default where none was asked).
    pub fn satisfied_by(&self, have: &SessionPersistence) -> bool {
        self.kind == have.kind && (self.timeout_s.is_none() || self.timeout_s == have.timeout_s)
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DesiredPool {
    pub name: String,
    pub lb_algorithm: String,
    /// `SOURCE_IP` for sessionAffinity ClientIP where the provider has it (with the Service's timeout on UDP
    /// and SCTP pools).
    pub session_persistence: Option<SessionPersistence>,
    /// (address, port) → member name.
    pub members: BTreeMap<MemberKey, String>,
    /// Subnets members are declared on (the pod subnets), by IP family.
    pub member_subnets: MemberSubnets,
    pub health_monitor: Option<DesiredHm>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DesiredHm {
    /// Octavia type: `TCP`, `HTTP`, `UDP-CONNECT`, `SCTP`, ...
    pub kind: String,
    pub delay: u32,
    pub timeout: u32,
    pub max_retries: u32,
    pub max_retries_down: Option<u32>,
    pub url_path: Option<String>,
    pub expected_codes: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ObservedLb {
    pub id: String,
    pub provider: String,
    pub vip_address: String,
    pub vip_port_id: String,
    /// The additional VIPs' addresses, sorted.
    pub additional_vips: Vec<String>,
    pub listeners: BTreeMap<ListenerKey, Box<ObservedListener>>,
    /// Pools attached to no listener (e.g. left by an interrupted listener delete).
    pub orphan_pools: Vec<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ObservedListener {
    pub id: String,
    pub name: String,
    pub timeout_client_data: Option<u64>,
    pub timeout_member_data: Option<u64>,
    pub allowed_cidrs: Vec<String>,
    pub pool: Option<ObservedPool>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ObservedPool {
    pub id: String,
    pub name: String,
    pub lb_algorithm: String,
    pub session_persistence: Option<SessionPersistence>,
    /// (address, port) → member id.
    pub members: BTreeMap<MemberKey, String>,
    pub health_monitor: Option<ObservedHm>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObservedHm {
    pub id: String,
    pub spec: DesiredHm,
}

/// Something asked for that this cloud cannot do; the rest is still built.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Problem {
    /// CamelCase, for the Event reason and the condition.
    pub reason: &'static str,
    pub message: String,
}

impl Problem {
    pub fn new(reason: &'static str, message: impl Into<String>) -> Self {
        Self {
            reason,
            message: message.into(),
        }
    }

    /// One problem per reason, messages joined with `; ` in order. Kubernetes' event recorder folds Events
    /// with the same reason about the same object into one, so each reason must carry all its messages.
    pub fn by_reason(problems: &[Problem]) -> Vec<Problem> {
        let mut out: Vec<Problem> = Vec::new();
        for p in problems {
            match out.iter_mut().find(|o| o.reason == p.reason) {
                Some(o) => {
                    o.message.push_str("; ");
                    o.message.push_str(&p.message);
                }
                None => out.push(p.clone()),
            }
        }
        out
    }
}

#[cfg(test)]
mod problem_tests {
    use super::Problem;

    #[test]
    fn problems_of_one_reason_become_one_with_every_message() {
        let got = Problem::by_reason(&[
            Problem::new("A", "one"),
            Problem::new("B", "two"),
            Problem::new("A", "three"),
        ]);
        assert_eq!(
            got,
            vec![Problem::new("A", "one; three"), Problem::new("B", "two")]
        );
    }
}
