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

/// Sets the `Ready` condition computed from the VIFs and `observedGeneration`.
pub fn mark(kp: &KuryrPort, status: &mut KuryrPortStatus) {
    let cond = ready_condition(status, None, kp.metadata.generation, Timestamp::now());
    set_condition(&mut status.conditions, cond);
    status.observed_generation = kp.metadata.generation;
}

/// `Ready=False` with the error's reason and message.
pub fn mark_failed(kp: &KuryrPort, status: &mut KuryrPortStatus, err: &Error) {
    let cond = match err {
        Error::Core(core) => ready_condition(status, Some(core), kp.metadata.generation, Timestamp::now()),
        other => Condition::new(READY, ConditionStatus::False, other.reason(), other.to_string())
            .with_transition_time(Timestamp::now())
            .with_observed_generation(kp.metadata.generation),
    };
    set_condition(&mut status.conditions, cond);
}

pub async fn write(ctx: &Context, kp: &KuryrPort, status: &KuryrPortStatus) -> Result<()> {
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
    ctx.wrote_status(kp.metadata.uid.as_deref().unwrap_or_default(), status);
    Ok(())
}
