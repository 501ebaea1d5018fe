//! Fault injection: request faults (an error status, a hold longer than the client's timeout, or an
//! error after the operation was carried out) and load-balancer provisioning faults (stuck in PENDING_*
//! or ending in ERROR). Rules come from the profile and from `/_sim/faults`.

use serde::{Deserialize, Serialize};

/// A rule matching calls by op name: exact (`neutron.ports.create`), prefix (`neutron.ports.*`) or `*`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FaultRule {
    pub op: String,
    /// Probability that a matching call is hit.
    pub rate: f64,
    /// Hit at most this many calls, then the rule is spent (tests use `count: 1`).
    pub count: Option<u64>,
    /// HTTP status to answer with; no status = no error (a pure hold).
    pub status: Option<u16>,
    /// Neutron error type (`NeutronError.type`); a generic one per status when absent.
    #[serde(rename = "type")]
    pub kind: Option<String>,
    pub message: Option<String>,
    /// Hold the request this long before going on (not time-scaled: it races the client's timeout).
    pub hold_ms: Option<u64>,
    /// Carry out the operation and answer with the error anyway (a lost response).
    pub execute: bool,
    /// How many calls this rule hit so far (output only).
    pub fired: u64,
}

impl Default for FaultRule {
    fn default() -> Self {
        Self {
            op: "*".to_owned(),
            rate: 1.0,
            count: None,
            status: None,
            kind: None,
            message: None,
            hold_ms: None,
            execute: false,
            fired: 0,
        }
    }
}

pub fn op_matches(pattern: &str, op: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => op.starts_with(prefix),
        None => pattern == op,
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LbPhase {
    Create,
    Update,
    Delete,
    #[default]
    Any,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LbOutcome {
    /// Never leaves PENDING_* (until `/_sim/loadbalancers/{id}/status` or a reset).
    #[default]
    Stuck,
    /// Ends in provisioning_status ERROR after the usual duration.
    Error,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LbFaultRule {
    pub provider: Option<String>,
    /// LB name, or a prefix ending in `*`.
    pub name: Option<String>,
    pub id: Option<String>,
    pub on: LbPhase,
    pub outcome: LbOutcome,
    pub rate: f64,
    pub count: Option<u64>,
    pub fired: u64,
}

impl Default for LbFaultRule {
    fn default() -> Self {
        Self {
            provider: None,
            name: None,
            id: None,
            on: LbPhase::Any,
            outcome: LbOutcome::Stuck,
            rate: 1.0,
            count: None,
            fired: 0,
        }
    }
}

/// What the pipeline does to one call.
#[derive(Debug, Clone, Default)]
pub struct FaultAction {
    pub status: Option<u16>,
    pub kind: Option<String>,
    pub message: Option<String>,
    pub hold_ms: Option<u64>,
    pub execute: bool,
}

impl FaultAction {
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if let Some(h) = self.hold_ms {
            parts.push(format!("hold {h}ms"));
        }
        if let Some(s) = self.status {
            parts.push(format!("status {s}"));
        }
        if self.execute {
            parts.push("after execute".to_owned());
        }
        parts.join(", ")
    }
}

/// The live rule set.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Faults {
    pub faults: Vec<FaultRule>,
    pub lb_faults: Vec<LbFaultRule>,
}

impl Faults {
    /// The first live rule that matches `op` and wins its roll.
    pub fn roll(&mut self, op: &str, rng: &mut fastrand::Rng) -> Option<FaultAction> {
        for rule in &mut self.faults {
            if !op_matches(&rule.op, op) || rule.count == Some(0) {
                continue;
            }
            if rule.rate < 1.0 && rng.f64() >= rule.rate {
                continue;
            }
            if let Some(c) = rule.count.as_mut() {
                *c -= 1;
            }
            rule.fired += 1;
            return Some(FaultAction {
                status: rule.status,
                kind: rule.kind.clone(),
                message: rule.message.clone(),
                hold_ms: rule.hold_ms,
                execute: rule.execute,
            });
        }
        None
    }

    pub fn roll_lb(
        &mut self,
        phase: LbPhase,
        id: &str,
        name: &str,
        provider: &str,
        rng: &mut fastrand::Rng,
    ) -> Option<LbOutcome> {
        for rule in &mut self.lb_faults {
            if rule.count == Some(0) || (rule.on != LbPhase::Any && rule.on != phase) {
                continue;
            }
            if rule.provider.as_deref().is_some_and(|p| p != provider)
                || rule.id.as_deref().is_some_and(|i| i != id)
                || rule.name.as_deref().is_some_and(|n| !op_matches(n, name))
            {
                continue;
            }
            if rule.rate < 1.0 && rng.f64() >= rule.rate {
                continue;
            }
            if let Some(c) = rule.count.as_mut() {
                *c -= 1;
            }
            rule.fired += 1;
            return Some(rule.outcome);
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counted_rule_is_spent_after_its_hits() {
        let mut f = Faults {
            faults: vec![FaultRule {
                op: "neutron.ports.*".into(),
                count: Some(2),
                status: Some(500),
                ..Default::default()
            }],
            ..Default::default()
        };
        let mut rng = fastrand::Rng::with_seed(1);
        assert!(f.roll("neutron.networks.create", &mut rng).is_none());
        assert!(f.roll("neutron.ports.create", &mut rng).is_some());
        assert!(f.roll("neutron.ports.list", &mut rng).is_some());
        assert!(f.roll("neutron.ports.list", &mut rng).is_none());
        assert_eq!(f.faults[0].fired, 2);
    }

    #[test]
    fn lb_rule_matches_by_name_prefix_and_phase() {
        let mut f = Faults {
            lb_faults: vec![LbFaultRule {
                name: Some("ns1/*".into()),
                on: LbPhase::Update,
                outcome: LbOutcome::Error,
                ..Default::default()
            }],
            ..Default::default()
        };
        let mut rng = fastrand::Rng::with_seed(1);
        assert_eq!(f.roll_lb(LbPhase::Create, "x", "ns1/a", "ovn", &mut rng), None);
        assert_eq!(f.roll_lb(LbPhase::Update, "x", "ns2/a", "ovn", &mut rng), None);
        assert_eq!(
            f.roll_lb(LbPhase::Update, "x", "ns1/a", "ovn", &mut rng),
            Some(LbOutcome::Error)
        );
    }
}
