//! KuryrNetworkPolicy objects: one per NetworkPolicy (same namespace and name, owned by it so that the
//! garbage collector removes it with the policy), spec mirroring the policy's selector and types, status
//! naming its security group(s) and rules and a `Ready` condition saying whether Neutron enforces the
//! policy exactly. Writes are skipped when nothing changed since the last one.

use std::collections::BTreeMap;

use kube::runtime::events::EventType;
use kuryr_api::conditions::{Condition, ConditionStatus, READY};
use kuryr_api::policy::{PolicyType, SgRuleDirection, SgRuleSpec};
use kuryr_api::{
    Api, KuryrNetworkPolicy, KuryrNetworkPolicyStatus, NetworkPolicy, Patch, PatchParams, Resource,
    ResourceExt, API_VERSION,
};
use kuryr_core::policy::CompiledPolicy;
use serde_json::json;

use crate::context::Context;
use crate::errors::{Error, Result};

const SPEC_MANAGER: &str = "kuryr-controller";
const STATUS_MANAGER: &str = "kuryr-controller-status";

/// How one policy fared in a sync.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Enforced exactly as written.
    Enforced,
    /// Enforced narrower than written (a Service VIP left closed): Ready, with a Warning Event.
    Narrowed(String),
    /// Not expressible or invalid: its pods are isolated with nothing allowed (fail-closed).
    FailedClosed { reason: &'static str, message: String },
    /// The whole compiled state didn't fit (quota) or couldn't be applied: the previous state stays.
    NotApplied { reason: &'static str, message: String },
}

impl Verdict {
    fn condition(&self, generation: Option<i64>) -> Condition {
        let (status, reason, message) = match self {
            Verdict::Enforced => (ConditionStatus::True, "Enforced", String::new()),
            Verdict::Narrowed(m) => (ConditionStatus::True, "Narrowed", m.clone()),
            Verdict::FailedClosed { reason, message } | Verdict::NotApplied { reason, message } => {
                (ConditionStatus::False, *reason, message.clone())
            }
        };
        Condition::new(READY, status, reason, message).with_observed_generation(generation)
    }

    fn event(&self) -> Option<(EventType, &'static str, String)> {
        match self {
            Verdict::Enforced => None,
            Verdict::Narrowed(m) => Some((EventType::Warning, "Narrowed", m.clone())),
            Verdict::FailedClosed { reason, message } | Verdict::NotApplied { reason, message } => {
                Some((EventType::Warning, reason, message.clone()))
            }
        }
    }
}

/// The policy's groups (its own and its named-port variants) and their rules, in API form.
pub fn policy_status(
    np: &NetworkPolicy,
    compiled: &CompiledPolicy,
    sg_ids: &BTreeMap<String, String>,
) -> KuryrNetworkPolicyStatus {
    let key = format!("np/{}/{}", np.namespace().unwrap_or_default(), np.name_any());
    let variants = format!("{key}/");
    let mut st = KuryrNetworkPolicyStatus {
        security_group_id: sg_ids.get(&key).cloned(),
        pod_selector: np.spec.as_ref().and_then(|s| s.pod_selector.clone()),
        ..KuryrNetworkPolicyStatus::default()
    };
    for sg in compiled
        .security_groups
        .iter()
        .filter(|sg| sg.key == key || sg.key.starts_with(&variants))
    {
        for rule in &sg.rules {
            if let Some(mut r) = rule.to_api(|k| sg_ids.get(k).cloned()) {
                r.security_group_id = sg_ids.get(&sg.key).cloned();
                st.security_group_rules.push(r);
            }
        }
    }
    st
}

/// Writes the KuryrNetworkPolicy of `np` (spec and status) unless `last` says it is unchanged; returns
/// what was written, for the next call's `last`. Publishes the verdict's Event when it changed.
pub async fn publish(
    ctx: &Context,
    np: &NetworkPolicy,
    mut st: KuryrNetworkPolicyStatus,
    verdict: &Verdict,
    last: Option<&(serde_json::Value, Verdict)>,
) -> Result<(serde_json::Value, Verdict)> {
    let ns = np.namespace().ok_or(Error::MissingField("metadata.namespace"))?;
    let name = np.name_any();
    let spec = np.spec.clone().unwrap_or_default();
    let types: Vec<PolicyType> = spec
        .policy_types
        .clone()
        .unwrap_or_default()
        .iter()
        .filter_map(|t| match t.as_str() {
            "Ingress" => Some(PolicyType::Ingress),
            "Egress" => Some(PolicyType::Egress),
            _ => None,
        })
        .collect();
    let rules = |dir: SgRuleDirection| -> Vec<SgRuleSpec> {
        st.security_group_rules
            .iter()
            .filter(|r| r.direction == dir)
            .map(|r| SgRuleSpec {
                sg_rule: r.clone(),
                namespace: None,
                affected_pods: Vec::new(),
            })
            .collect()
    };
    let owner = np
        .controller_owner_ref(&())
        .ok_or(Error::MissingField("metadata.uid"))?;
    let body = json!({
        "apiVersion": API_VERSION, "kind": "KuryrNetworkPolicy",
        "metadata": {"name": name, "namespace": ns, "ownerReferences": [owner]},
        "spec": {
            "podSelector": spec.pod_selector.clone().unwrap_or_default(),
            "policyTypes": types,
            "ingressSgRules": rules(SgRuleDirection::Ingress),
            "egressSgRules": rules(SgRuleDirection::Egress),
        },
    });
    st.conditions = vec![verdict.condition(np.metadata.generation)];
    st.observed_generation = np.metadata.generation;
    let status_body = json!({
        "apiVersion": API_VERSION, "kind": "KuryrNetworkPolicy",
        "metadata": {"name": name}, "status": st,
    });
    let written = json!([body, status_body]);
    if last.is_some_and(|(w, v)| *w == written && v == verdict) {
        return Ok((written, verdict.clone()));
    }
    let api: Api<KuryrNetworkPolicy> = Api::namespaced(ctx.client.clone(), &ns);
    api.patch(
        &name,
        &PatchParams::apply(SPEC_MANAGER).force(),
        &Patch::Apply(&body),
    )
    .await
    .map_err(Error::kube("patch_kuryrnetworkpolicy"))?;
    api.patch_status(
        &name,
        &PatchParams::apply(STATUS_MANAGER).force(),
        &Patch::Apply(&status_body),
    )
    .await
    .map_err(Error::kube("patch_kuryrnetworkpolicy_status"))?;
    if last.map(|(_, v)| v) != Some(verdict) {
        if let Some((type_, reason, note)) = verdict.event() {
            ctx.events
                .publish(&np.object_ref(&()), type_, reason, "Enforce", note)
                .await;
        }
    }
    Ok((written, verdict.clone()))
}
