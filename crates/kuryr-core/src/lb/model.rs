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

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DesiredLb {
    pub name: String,
    pub vip_address: Option<String>,
    pub vip_subnet_id: Option<String>,
    /// `None`: Octavia's default provider.
    pub provider: Option<String>,
    pub listeners: BTreeMap<ListenerKey, DesiredListener>,
    /// Whether a floating IP may be put on the VIP (type LoadBalancer and its source ranges enforceable).
    pub expose: bool,
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

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DesiredPool {
    pub name: String,
    pub lb_algorithm: String,
    /// `SOURCE_IP` for sessionAffinity ClientIP where the provider has it.
    pub session_persistence: Option<String>,
    /// (address, port) → member name.
    pub members: BTreeMap<MemberKey, String>,
    /// Subnet of every member (the pod subnet), when configured.
    pub member_subnet_id: Option<String>,
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
    pub listeners: BTreeMap<ListenerKey, ObservedListener>,
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
    pub session_persistence: Option<String>,
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
