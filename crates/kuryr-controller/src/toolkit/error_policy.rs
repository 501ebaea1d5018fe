//! The one error policy: count the failure, log it, and retry after the error's own delay or the object's
//! backoff (longer for errors a retry will not fix soon).

use std::sync::Arc;

use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};
use tracing::{debug, warn};

use super::{Ledger, Uid};
use crate::errors::Error;
use crate::metrics::Metrics;

/// An object kind a controller reconciles, with the `controller` label of its metrics.
pub trait Reconciled: Resource<DynamicType = ()> {
    const CONTROLLER: &'static str;
}

/// A controller context: where failures are counted and remembered.
pub trait Reconciler {
    fn ledger(&self) -> &Ledger;
    fn metrics(&self) -> &Metrics;
}

pub fn error_policy<K: Reconciled, C: Reconciler>(obj: Arc<K>, err: &Error, ctx: Arc<C>) -> Action {
    ctx.metrics().failed(K::CONTROLLER, err.metric_label());
    if let Some(delay) = err.retry_after() {
        // A wait the error itself times (e.g. ports draining): no failure to back off from.
        debug!(kind = %K::kind(&()), name = obj.name_any(), error = %err, retry_in = ?delay, "waiting");
        return Action::requeue(delay);
    }
    let delay = ctx.ledger().failed(&Uid::of(obj.as_ref()), err.is_permanent());
    warn!(
        kind = %K::kind(&()),
        namespace = obj.namespace(),
        name = obj.name_any(),
        error = err as &dyn std::error::Error,
        retry_in = ?delay,
        "reconcile failed"
    );
    Action::requeue(delay)
}
