//! Prometheus metrics of the controller: one registry per process, served at `/metrics` by [`crate::admin`].
//!
//! - `kuryr_pod_wire_seconds`: from the controller first seeing the pod to its KuryrPort's ports ACTIVE
//!   (sub-second buckets: a nested-vlan subport goes ACTIVE in 0.05-1.3 s on ML2/OVN; a pool port is).
//! - `kuryr_calls_per_op{op}`: OpenStack calls one wire / release made (a pooled wire: 1-2).
//! - `kuryr_pool_free_ports`, `kuryr_pool_in_flight_ports`, `kuryr_pool_waiting_pods` `{parent,network}`.
//! - `kuryr_reconciles_total{controller}`, `kuryr_reconcile_errors_total{controller,kind}`.
//! - `kuryr_openstack_calls_total{op,outcome}` and `kuryr_openstack_call_seconds{op}`: every HTTP attempt
//!   kuryr-openstack makes, fed through its [`CallObserver`].
//! - `kuryr_gc_sweeps_total`, `kuryr_gc_collected_total{resource}`, `kuryr_gc_failures_total{resource}`,
//!   `kuryr_gc_suspects` (orphans seen once, awaiting confirmation), `kuryr_loadbalancers{state}` (from the
//!   collector's last listing), `kuryr_leader` (1 while this replica holds the Lease).
//! - `kuryr_openstack_ratelimit_wait_seconds_total`, `kuryr_openstack_ratelimit_waits_total`,
//!   `kuryr_openstack_retries_total{op,reason}`, `kuryr_openstack_reauths_total`,
//!   `kuryr_openstack_concurrency_limit{service}`, `kuryr_openstack_in_flight{service}`,
//!   `kuryr_openstack_queued{service}`, `kuryr_openstack_concurrency_limit_moves_total{service,reason}`,
//!   `kuryr_openstack_queue_wait_seconds_total`, `kuryr_openstack_queue_waits_total`: read from
//!   kuryr-openstack's own counters at scrape time (see [`crate::metrics::CloudCounters`]).

use std::sync::Arc;
use std::time::Duration;

use kuryr_core::pool::PoolParent;
use kuryr_openstack::metrics::outcome_label;
use kuryr_openstack::{CallObserver, CallRecord};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
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

/// Upper bounds of the calls-per-operation histogram.
pub const COUNT_BUCKETS: [f64; 9] = [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 8.0, 13.0, 21.0];

fn count_histogram() -> Histogram {
    Histogram::new(COUNT_BUCKETS)
}

tokio::task_local! {
    /// OpenStack calls made so far by the operation running in this task (see [`counting_calls`]).
    static CALLS: std::cell::Cell<u32>;
}

/// Runs `fut`, counting the OpenStack HTTP attempts it makes (the client reports each one from within the
/// caller's task, so a task-local counter sees exactly this operation's calls).
pub async fn counting_calls<F: std::future::Future>(fut: F) -> (F::Output, u32) {
    CALLS
        .scope(std::cell::Cell::new(0), async {
            let out = fut.await;
            (out, CALLS.with(std::cell::Cell::get))
        })
        .await
}

#[derive(Clone)]
pub struct Metrics {
    pub pod_wire_seconds: Histogram,
    pub reconciles: Family<Labels1, Counter>,
    pub reconcile_errors: Family<Labels2, Counter>,
    pub openstack_calls: Family<Labels2, Counter>,
    pub openstack_call_seconds: Family<Labels1, Histogram, fn() -> Histogram>,
    pub gc_sweeps: Counter,
    pub gc_collected: Family<Labels1, Counter>,
    pub gc_failures: Family<Labels1, Counter>,
    pub gc_suspects: Gauge,
    pub loadbalancers: Family<Labels1, Gauge>,
    pub leader: Gauge,
    /// Load balancers replaced (cascade delete + create) by why: `error`, `stuck`, `lost`.
    pub lb_repairs: Family<Labels1, Counter>,
    /// Octavia writes by kind (`create_loadbalancer`, `replace_members`, ...).
    pub lb_ops: Family<Labels1, Counter>,
    /// Reconciles woken by the Octavia observer, by why (`settled`, `changed`, `gone`, `strays`).
    pub lb_observer_wakes: Family<Labels1, Counter>,
    /// The observer's listings (each one call per kind and per 1,000 objects) and those that failed.
    pub lb_observer_ticks: Family<Labels1, Counter>,
    /// OpenStack calls made by one controller operation (`wire`, `release`).
    pub calls_per_op: Family<Labels1, Histogram, fn() -> Histogram>,
    pub pool_free_ports: Family<Labels2, Gauge>,
    pub pool_in_flight_ports: Family<Labels2, Gauge>,
    pub pool_waiting_pods: Family<Labels2, Gauge>,
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
            gc_sweeps: Counter::default(),
            gc_collected: Family::default(),
            gc_failures: Family::default(),
            gc_suspects: Gauge::default(),
            loadbalancers: Family::default(),
            leader: Gauge::default(),
            lb_repairs: Family::default(),
            lb_ops: Family::default(),
            lb_observer_wakes: Family::default(),
            lb_observer_ticks: Family::default(),
            calls_per_op: Family::new_with_constructor(count_histogram),
            pool_free_ports: Family::default(),
            pool_in_flight_ports: Family::default(),
            pool_waiting_pods: Family::default(),
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
        reg.register("gc_sweeps", "Garbage collector sweeps", m.gc_sweeps.clone());
        reg.register(
            "gc_collected",
            "Orphaned cloud objects deleted by the garbage collector",
            m.gc_collected.clone(),
        );
        reg.register(
            "gc_failures",
            "Orphan deletions that failed (retried next sweep)",
            m.gc_failures.clone(),
        );
        reg.register(
            "gc_suspects",
            "Orphans seen once, awaiting a confirming sweep",
            m.gc_suspects.clone(),
        );
        reg.register(
            "loadbalancers",
            "Load balancers of this cluster by provisioning status (last GC listing)",
            m.loadbalancers.clone(),
        );
        reg.register(
            "leader",
            "1 while this replica holds the leader Lease",
            m.leader.clone(),
        );
        reg.register(
            "lb_repairs",
            "Octavia load balancers replaced because they were in ERROR, stuck PENDING_* or gone",
            m.lb_repairs.clone(),
        );
        reg.register(
            "lb_ops",
            "Octavia writes by the KuryrLoadBalancer controller",
            m.lb_ops.clone(),
        );
        reg.register(
            "lb_observer_wakes",
            "KuryrLoadBalancer reconciles woken by the Octavia observer, by reason",
            m.lb_observer_wakes.clone(),
        );
        reg.register(
            "lb_observer_ticks",
            "Listings of the cluster's load balancers by the Octavia observer, by outcome (ok, failed)",
            m.lb_observer_ticks.clone(),
        );
        reg.register(
            "calls_per_op",
            "OpenStack HTTP attempts made by one controller operation (wire: a pod's port; release)",
            m.calls_per_op.clone(),
        );
        reg.register(
            "pool_free_ports",
            "Ports ready to hand out, per pool (parent = trunk or host)",
            m.pool_free_ports.clone(),
        );
        reg.register(
            "pool_in_flight_ports",
            "Ports being created for a pool",
            m.pool_in_flight_ports.clone(),
        );
        reg.register(
            "pool_waiting_pods",
            "Pods waiting for a port of an empty pool",
            m.pool_waiting_pods.clone(),
        );
        m
    }

    /// Exports kuryr-openstack's rate-limiter, retry and re-auth counters (`cloud.metrics()`) at every scrape.
    pub fn register_cloud(registry: &mut Registry, counters: Arc<kuryr_openstack::Metrics>) {
        registry
            .sub_registry_with_prefix("kuryr")
            .register_collector(Box::new(CloudCounters(counters)));
    }

    pub fn gc_swept(&self, lb_states: &std::collections::BTreeMap<String, u64>) {
        self.gc_sweeps.inc();
        self.loadbalancers.clear();
        for (state, n) in lb_states {
            self.loadbalancers
                .get_or_create(&[("state", state.clone())])
                .set(i64::try_from(*n).unwrap_or(i64::MAX));
        }
    }

    pub fn gc_collected(&self, resource: &'static str) {
        self.gc_collected
            .get_or_create(&[("resource", resource.to_owned())])
            .inc();
    }

    pub fn gc_failed(&self, resource: &'static str) {
        self.gc_failures
            .get_or_create(&[("resource", resource.to_owned())])
            .inc();
    }

    pub fn gc_suspects(&self, n: usize) {
        self.gc_suspects.set(i64::try_from(n).unwrap_or(i64::MAX));
    }

    pub fn calls_per_op(&self, op: &'static str, calls: u32) {
        self.calls_per_op
            .get_or_create(&[("op", op.to_owned())])
            .observe(f64::from(calls));
    }

    /// Publishes every pool's load.
    pub fn pools(&self, pools: &kuryr_core::Pools) {
        for pool in pools.iter() {
            let key = pool.key();
            let parent = match &key.parent {
                PoolParent::Trunk(t) => format!("trunk:{t}"),
                PoolParent::Host(h) => format!("host:{h}"),
            };
            let labels = [("parent", parent), ("network", key.network_id.clone())];
            let load = pool.load();
            self.pool_free_ports
                .get_or_create(&labels)
                .set(i64::from(load.free));
            self.pool_in_flight_ports
                .get_or_create(&labels)
                .set(i64::from(load.in_flight));
            self.pool_waiting_pods
                .get_or_create(&labels)
                .set(i64::from(load.pending));
        }
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

    /// One Octavia write of a load balancer round (`op`: the planned op's kind).
    pub fn lb_op(&self, op: &str) {
        self.lb_ops.get_or_create(&[("op", op.to_owned())]).inc();
    }

    /// The observer woke a reconcile.
    pub fn lb_observer_wake(&self, reason: kuryr_core::lb::WakeReason) {
        self.lb_observer_wakes
            .get_or_create(&[("reason", reason.as_str().to_owned())])
            .inc();
    }

    /// One listing of the observer (`ok`: it completed).
    pub fn lb_observer_tick(&self, ok: bool) {
        let outcome = if ok { "ok" } else { "failed" };
        self.lb_observer_ticks
            .get_or_create(&[("outcome", outcome.to_owned())])
            .inc();
    }

    /// A load balancer replaced (`reason`: error, stuck, changed, lost).
    pub fn lb_repair(&self, reason: &str) {
        self.lb_repairs
            .get_or_create(&[("reason", reason.to_owned())])
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
        let _ = CALLS.try_with(|c| c.set(c.get().saturating_add(1)));
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

/// One unlabelled counter.
fn counter<N: prometheus_client::encoding::EncodeCounterValue>(
    encoder: &mut prometheus_client::encoding::DescriptorEncoder<'_>,
    name: &str,
    help: &str,
    value: prometheus_client::metrics::counter::ConstCounter<N>,
) -> Result<(), std::fmt::Error> {
    use prometheus_client::encoding::EncodeMetric;
    value.encode(encoder.encode_descriptor(name, help, None, value.metric_type())?)
}

/// One counter family with two labels.
fn labelled_counter<'a>(
    encoder: &mut prometheus_client::encoding::DescriptorEncoder<'_>,
    name: &str,
    help: &str,
    values: impl Iterator<Item = ([(&'static str, &'a String); 2], u64)>,
) -> Result<(), std::fmt::Error> {
    use prometheus_client::encoding::EncodeMetric;
    use prometheus_client::metrics::counter::ConstCounter;
    let mut family =
        encoder.encode_descriptor(name, help, None, prometheus_client::metrics::MetricType::Counter)?;
    for (labels, n) in values {
        let labels = labels.map(|(k, v)| (k, v.as_str()));
        ConstCounter::new(n).encode(family.encode_family(&labels)?)?;
    }
    Ok(())
}

/// kuryr-openstack's own counters, read at scrape time (no cloud call: they are what the client counted).
#[derive(Debug)]
pub struct CloudCounters(Arc<kuryr_openstack::Metrics>);

impl prometheus_client::collector::Collector for CloudCounters {
    fn encode(
        &self,
        mut encoder: prometheus_client::encoding::DescriptorEncoder<'_>,
    ) -> Result<(), std::fmt::Error> {
        use prometheus_client::encoding::EncodeMetric;
        use prometheus_client::metrics::counter::ConstCounter;
        let snap = self.0.snapshot();
        let seconds = |d: Duration| ConstCounter::new(d.as_secs_f64());
        let wait = "Time spent waiting for a rate-limiter token";
        counter(
            &mut encoder,
            "openstack_ratelimit_wait_seconds",
            wait,
            seconds(snap.ratelimit_wait_total),
        )?;
        let waits = "Calls that waited for a rate-limiter token";
        counter(
            &mut encoder,
            "openstack_ratelimit_waits",
            waits,
            ConstCounter::new(snap.ratelimit_waits),
        )?;
        let reauths = "Keystone re-authentications";
        counter(
            &mut encoder,
            "openstack_reauths",
            reauths,
            ConstCounter::new(snap.reauths),
        )?;
        let queue = "Time calls waited for a place under the adaptive concurrency limit";
        counter(
            &mut encoder,
            "openstack_queue_wait_seconds",
            queue,
            seconds(snap.queue_wait_total),
        )?;
        let queued = "Calls that waited for a place under the adaptive concurrency limit";
        counter(
            &mut encoder,
            "openstack_queue_waits",
            queued,
            ConstCounter::new(snap.queue_waits),
        )?;
        let retries = snap
            .retries
            .iter()
            .map(|((op, reason), n)| ([("op", op), ("reason", reason)], *n));
        let help = "Retried OpenStack calls by op and reason";
        labelled_counter(&mut encoder, "openstack_retries", help, retries)?;
        use prometheus_client::metrics::gauge::ConstGauge;
        for (name, help, pick) in [
            (
                "openstack_concurrency_limit",
                "Calls allowed in flight per service, as the adaptive limit stands",
                (|g: &kuryr_openstack::metrics::AdmissionGauge| g.limit) as fn(&_) -> usize,
            ),
            (
                "openstack_in_flight",
                "Calls in flight per service",
                |g: &kuryr_openstack::metrics::AdmissionGauge| g.in_flight,
            ),
            (
                "openstack_queued",
                "Calls waiting for a place per service",
                |g: &kuryr_openstack::metrics::AdmissionGauge| g.queued,
            ),
        ] {
            let mut family =
                encoder.encode_descriptor(name, help, None, prometheus_client::metrics::MetricType::Gauge)?;
            for (service, g) in &snap.admission {
                let labels = [("service", service.as_str())];
                ConstGauge::new(pick(g) as i64).encode(family.encode_family(&labels)?)?;
            }
        }
        let moves = snap
            .limit_moves
            .iter()
            .map(|((service, reason), n)| ([("service", service), ("reason", reason)], *n));
        let help = "Moves of the adaptive concurrency limit per service and reason";
        labelled_counter(&mut encoder, "openstack_concurrency_limit_moves", help, moves)?;
        Ok(())
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

    #[test]
    fn the_observers_wakes_and_listings_are_exported() {
        let mut registry = Registry::default();
        let m = Metrics::register(&mut registry);
        m.lb_observer_wake(kuryr_core::lb::WakeReason::Settled);
        m.lb_observer_wake(kuryr_core::lb::WakeReason::Settled);
        m.lb_observer_wake(kuryr_core::lb::WakeReason::Changed);
        m.lb_observer_tick(true);
        m.lb_observer_tick(false);
        let mut text = String::new();
        encode(&mut text, &registry).unwrap();
        assert!(
            text.contains("kuryr_lb_observer_wakes_total{reason=\"settled\"} 2"),
            "{text}"
        );
        assert!(
            text.contains("kuryr_lb_observer_wakes_total{reason=\"changed\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("kuryr_lb_observer_ticks_total{outcome=\"ok\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("kuryr_lb_observer_ticks_total{outcome=\"failed\"} 1"),
            "{text}"
        );
    }

    #[test]
    fn the_clients_concurrency_limits_and_their_moves_are_exported() {
        use kuryr_openstack::adaptive::{Distress, MoveReason};
        use kuryr_openstack::metrics::AdmissionGauge;
        use kuryr_openstack::Service;
        let mut registry = Registry::default();
        let cloud = Arc::new(kuryr_openstack::Metrics::default());
        Metrics::register_cloud(&mut registry, cloud.clone());
        cloud.set_admission(
            Service::Network,
            AdmissionGauge {
                limit: 12,
                in_flight: 3,
                queued: 7,
            },
        );
        cloud.record_limit_move(Service::Network, MoveReason::Cut(Distress::ServerError));
        let mut text = String::new();
        encode(&mut text, &registry).unwrap();
        for line in [
            r#"kuryr_openstack_concurrency_limit{service="neutron"} 12"#,
            r#"kuryr_openstack_in_flight{service="neutron"} 3"#,
            r#"kuryr_openstack_queued{service="neutron"} 7"#,
            r#"kuryr_openstack_concurrency_limit_moves_total{service="neutron",reason="server_error"} 1"#,
        ] {
            assert!(text.contains(line), "{line} not in\n{text}");
        }
    }
}
