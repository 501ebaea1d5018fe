//! Events about our objects, published under the controller's name; a failure to publish is only logged
//! (it must not fail the reconcile).

use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kuryr_api::ObjectReference;

use crate::errors::Error;

/// Name under which Events are reported.
pub const REPORTER: &str = "kuryr-controller";

pub struct Events(Recorder);

impl Events {
    /// Events reported by `kuryr-controller`, instance `$POD_NAME` (the downward API) when set.
    pub fn new(client: kube::Client) -> Self {
        let reporter = Reporter {
            controller: REPORTER.into(),
            instance: std::env::var("POD_NAME").ok(),
        };
        Self(Recorder::new(client, reporter))
    }

    pub async fn publish(
        &self,
        obj: &ObjectReference,
        type_: EventType,
        reason: &str,
        action: &str,
        note: String,
    ) {
        let ev = Event {
            type_,
            reason: reason.to_owned(),
            note: Some(note),
            action: action.to_owned(),
            secondary: None,
        };
        if let Err(e) = self.0.publish(&ev, obj).await {
            tracing::warn!(
                error = &e as &dyn std::error::Error,
                reason,
                "cannot publish Event"
            );
        }
    }

    /// A failed reconcile of `obj`, the one way every controller tells it: a Warning Event with the error's
    /// reason, or a Normal one for a wait (an error with a retry time of its own: a network still draining its
    /// ports, a load balancer create that may still land), which is no failure.
    pub async fn failed(&self, obj: &ObjectReference, err: &Error) {
        let type_ = if err.retry_after().is_some() {
            EventType::Normal
        } else {
            EventType::Warning
        };
        self.publish(obj, type_, err.reason(), "Reconcile", err.to_string())
            .await;
    }
}
