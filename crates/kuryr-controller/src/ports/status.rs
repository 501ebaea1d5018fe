//! Writing a KuryrPort's status: always the whole status, by server-side apply under the controller's own
//! status field manager (on 1.20 managedFields have no subresource entry, so spec and status writers must
//! differ). Leaving a field out of an apply would drop it, hence never a partial status.

use kuryr_api::conditions::{set_condition, Condition, ConditionStatus, READY};
use kuryr_api::k8s_openapi::jiff::Timestamp;
use kuryr_api::{Api, KuryrPort, KuryrPortStatus, Patch, PatchParams, ResourceExt, API_VERSION};
use kuryr_core::kuryrport::ready_condition;
use serde_json::json;

use crate::context::Context;
use crate::errors::{Error, Result};

pub const STATUS_MANAGER: &str = "kuryr-controller-status";

/// Sets `Ready` (from the VIFs, or `failure`'s reason and message) and writes the whole status.
pub async fn write(
    ctx: &Context,
    kp: &KuryrPort,
    status: &mut KuryrPortStatus,
    failure: Option<&Error>,
) -> Result<()> {
    mark(kp, status, failure);
    let ns = kp.namespace().ok_or(Error::MissingField("metadata.namespace"))?;
    let api: Api<KuryrPort> = Api::namespaced(ctx.client.clone(), &ns);
    let body = json!({
        "apiVersion": API_VERSION,
        "kind": "KuryrPort",
        "metadata": {"name": kp.name_any()},
        "status": status,
    });
    api.patch_status(
        &kp.name_any(),
        &PatchParams::apply(STATUS_MANAGER).force(),
        &Patch::Apply(&body),
    )
    .await
    .map_err(Error::kube("patch_kuryrport_status"))?;
    ctx.book.wrote_status(&crate::toolkit::Uid::of(kp), status);
    Ok(())
}

/// The `Ready` condition: computed from the VIFs (with `observedGeneration`), or `Ready=False` with a
/// failure's reason and message.
fn mark(kp: &KuryrPort, status: &mut KuryrPortStatus, failure: Option<&Error>) {
    let generation = kp.metadata.generation;
    let cond = match failure {
        // kuryr-core words the VIFs' progress and its own failures.
        None | Some(Error::Core(_)) => {
            let core = failure.and_then(|e| match e {
                Error::Core(core) => Some(core),
                _ => None,
            });
            ready_condition(status, core, generation, Timestamp::now())
        }
        Some(other) => Condition::new(READY, ConditionStatus::False, other.reason(), other.to_string())
            .with_transition_time(Timestamp::now())
            .with_observed_generation(generation),
    };
    set_condition(&mut status.conditions, cond);
    if failure.is_none() {
        status.observed_generation = generation;
    }
}

#[cfg(test)]
mod tests {
    use kuryr_api::conditions::find_condition;
    use kuryr_api::KuryrPortSpec;
    use kuryr_core::CoreError;

    use super::*;

    fn mk_kp() -> KuryrPort {
        let mut kp = KuryrPort::new(
            "web",
            KuryrPortSpec {
                pod_uid: "uid-1".into(),
                pod_node_name: "w1".into(),
                pod_static: false,
                vif_type: None,
                project_id: None,
                subnet_ids: None,
                security_group_ids: None,
                additional_networks: Vec::new(),
            },
        );
        kp.metadata.generation = Some(3);
        kp
    }

    #[test]
    fn a_failure_sets_ready_false_with_its_reason_and_a_success_clears_it() {
        let kp = mk_kp();
        let mut st = KuryrPortStatus::default();
        let err = Error::Core(CoreError::VlanRangeExhausted {
            trunk_id: "t".into(),
            first: 1,
            last: 4094,
        });
        mark(&kp, &mut st, Some(&err));
        let ready = find_condition(&st.conditions, READY).unwrap();
        assert_eq!(ready.reason, "VlanRangeExhausted");
        assert_eq!(ready.status, ConditionStatus::False);

        mark(&kp, &mut st, None);
        let ready = find_condition(&st.conditions, READY).unwrap();
        assert_eq!(ready.reason, "Allocating");
        assert_eq!(st.observed_generation, Some(3));
    }

    #[test]
    fn a_non_core_failure_carries_its_own_reason() {
        let mut st = KuryrPortStatus::default();
        mark(&mk_kp(), &mut st, Some(&Error::NodeNotFound("w1".into())));
        let ready = find_condition(&st.conditions, READY).unwrap();
        assert_eq!(ready.reason, "NodeNotFound");
        assert!(ready.message.contains("w1"));
    }
}
