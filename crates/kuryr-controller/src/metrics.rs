//! Prometheus metrics of the controller: one registry per process, served at `/metrics` by [`crate::admin`].
//!
//! - `kuryr_pod_wire_seconds`: from the controller first seeing a KuryrPort to its port ACTIVE (sub-second
//!   buckets: a nested-vlan subport goes ACTIVE in 0.05-1.3 s on ML2/OVN).
//! - `kuryr_reconciles_total{controller}`, `kuryr_reconcile_errors_total{controller,kind}`.
//! - `kuryr_openstack_calls_total{op,outcome}` and `kuryr_openstack_call_seconds{op}`: every HTTP attempt
//!   kuryr-openstack makes, fed through its [`CallObserver`].

use std::sync::Arc;
use std::time::Duration;

use kuryr_openstack::metrics::outcome_label;
use kuryr_openstack::{CallObserver, CallRecord};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

/// Upper bounds (seconds) of the pod time-to-wire histogram.
pub const WIRE_BUCKETS: [f64; 14] = [
    0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0, 10.0, 30.0, 60.0,
];
/// Upper bounds (seconds) of the OpenStack call histogram.
pub const CALL_BUCKETS: [f64; 12] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];

type Labels1 = [(&'static str, String); 1];
type Labels2 = [(&'static str, String); 2];

fn wire_histogram() -> Histogram {
    Histogram::new(WIRE_BUCKETS)
}

fn call_histogram() -> Histogram {
    Histogram::new(CALL_BUCKETS)
}

#[derive(Clone)]
pub struct Metrics {
    pub pod_wire_seconds: Histogram,
    pub reconciles: Family<Labels1, Counter>,
    pub reconcile_errors: Family<Labels2, Counter>,
    pub openstack_calls: Family<Labels2, Counter>,
    pub openstack_call_seconds: Family<Labels1, Histogram, fn() -> Histogram>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self {
            pod_wire_seconds: wire_histogram(),
            reconciles: Family::default(),
            reconcile_errors: Family::default(),
            openstack_calls: Family::default(),
            openstack_call_seconds: Family::new_with_constructor(call_histogram),
        }
    }
}

impl Metrics {
    /// Metrics registered in `registry` under the `kuryr` prefix.
    pub fn register(registry: &mut Registry) -> Self {
        let m = Self::default();
        let reg = registry.sub_registry_with_prefix("kuryr");
        reg.register(
            "pod_wire_seconds",
            "Time from the controller first seeing a KuryrPort to its Neutron port ACTIVE",
            m.pod_wire_seconds.clone(),
        );
        reg.register("reconciles", "Reconcile runs", m.reconciles.clone());
        reg.register(
            "reconcile_errors",
            "Failed reconciles by error kind",
            m.reconcile_errors.clone(),
        );
        reg.register(
            "openstack_calls",
            "OpenStack HTTP attempts by op and outcome (retries included)",
            m.openstack_calls.clone(),
        );
        reg.register(
            "openstack_call_seconds",
            "OpenStack HTTP attempt duration by op",
            m.openstack_call_seconds.clone(),
        );
        m
    }

    pub fn reconciled(&self, controller: &'static str) {
        self.reconciles
            .get_or_create(&[("controller", controller.to_owned())])
            .inc();
    }

    pub fn failed(&self, controller: &'static str, kind: String) {
        self.reconcile_errors
            .get_or_create(&[("controller", controller.to_owned()), ("kind", kind)])
            .inc();
    }

    pub fn wired(&self, took: Duration) {
        self.pod_wire_seconds.observe(took.as_secs_f64());
    }

    /// The observer to hand to `Cloud::connect_with_observer`.
    pub fn call_observer(&self) -> Arc<dyn CallObserver> {
        Arc::new(CallMetrics(self.clone()))
    }
}

/// Feeds kuryr-openstack's per-attempt records into the Prometheus families.
struct CallMetrics(Metrics);

impl CallObserver for CallMetrics {
    fn observe(&self, call: &CallRecord<'_>) {
        self.0
            .openstack_calls
            .get_or_create(&[
                ("op", call.op.to_owned()),
                ("outcome", outcome_label(call.status)),
            ])
            .inc();
        self.0
            .openstack_call_seconds
            .get_or_create(&[("op", call.op.to_owned())])
            .observe(call.duration.as_secs_f64());
    }
}

#[cfg(test)]
mod tests {
    use prometheus_client::encoding::text::encode;

    use super::*;

    #[test]
    fn observed_calls_and_errors_show_up_in_the_text_exposition() {
        let mut registry = Registry::default();
        let m = Metrics::register(&mut registry);
        m.call_observer().observe(&CallRecord {
            op: "neutron.trunks.add_subports",
            method: "PUT",
            status: 409,
            duration: Duration::from_millis(30),
            attempt: 1,
        });
        m.failed("kuryrport", "openstack_conflict".into());
        m.wired(Duration::from_millis(420));
        let mut text = String::new();
        encode(&mut text, &registry).unwrap();
        assert!(
            text.contains(r#"kuryr_openstack_calls_total{op="neutron.trunks.add_subports",outcome="409"} 1"#)
        );
        assert!(text
            .contains(r#"kuryr_reconcile_errors_total{controller="kuryrport",kind="openstack_conflict"} 1"#));
        assert!(text.contains(r#"kuryr_pod_wire_seconds_bucket{le="0.5"} 1"#));
    }
}
