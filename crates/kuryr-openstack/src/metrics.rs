//! Every call counted and timed by (op, outcome), plus retries, re-authentications, rate-limiter waits,
//! and each service's adaptive concurrency limit (where it stands and why it moved). A plain struct: the controller reads `snapshot()` and exports it (Prometheus lives there, not
//! here). An optional [`CallObserver`] sees each call as it finishes, for histograms kept elsewhere.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

use crate::adaptive::MoveReason;
use crate::errors::Service;

/// Upper bounds (seconds) of the latency buckets: sub-second resolution, since most calls are fast.
pub const BUCKETS: [f64; 12] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];

/// One finished call (one HTTP attempt).
#[derive(Debug, Clone)]
pub struct CallRecord<'a> {
    pub op: &'a str,
    pub method: &'a str,
    /// HTTP status, or 0 when no answer came (transport error).
    pub status: u16,
    pub duration: Duration,
    /// 1 for the first try.
    pub attempt: u32,
}

pub trait CallObserver: Send + Sync {
    fn observe(&self, call: &CallRecord<'_>);
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct OpStats {
    pub count: u64,
    pub total: Duration,
    pub max: Duration,
    /// Cumulative-free counts per [`BUCKETS`] entry, plus one overflow slot at the end.
    pub buckets: [u64; BUCKETS.len() + 1],
}

impl OpStats {
    fn add(&mut self, d: Duration) {
        self.count += 1;
        self.total += d;
        self.max = self.max.max(d);
        let s = d.as_secs_f64();
        let i = BUCKETS.iter().position(|b| s <= *b).unwrap_or(BUCKETS.len());
        self.buckets[i] += 1;
    }

    pub fn mean(&self) -> Duration {
        u32::try_from(self.count)
            .ok()
            .filter(|c| *c > 0)
            .map_or(Duration::ZERO, |c| self.total / c)
    }
}

/// Key of the per-call table: op name and status class label (`2xx`, `404`, `409`, `5xx`, `transport`).
pub type CallKey = (String, String);

#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    pub calls: BTreeMap<CallKey, OpStats>,
    /// (op, reason) -> retries.
    pub retries: BTreeMap<(String, String), u64>,
    pub reauths: u64,
    pub ratelimit_waits: u64,
    pub ratelimit_wait_total: Duration,
    /// Per service (`neutron`, ...): the adaptive concurrency limit, calls in flight and calls queued, now.
    pub admission: BTreeMap<String, AdmissionGauge>,
    /// (service, reason) -> moves of the limit (`slow_start`, `increase`, `server_error`, `latency`, ...).
    pub limit_moves: BTreeMap<(String, String), u64>,
    /// Calls that queued for a place, and their total wait.
    pub queue_waits: u64,
    pub queue_wait_total: Duration,
}

/// One service's admission, now.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AdmissionGauge {
    pub limit: usize,
    pub in_flight: usize,
    pub queued: usize,
}

impl Snapshot {
    /// Calls of `op` summed over outcomes.
    pub fn count(&self, op: &str) -> u64 {
        self.calls
            .iter()
            .filter(|((o, _), _)| o == op)
            .map(|(_, s)| s.count)
            .sum()
    }

    /// Calls of `op` with this outcome label.
    pub fn count_outcome(&self, op: &str, outcome: &str) -> u64 {
        self.calls
            .get(&(op.to_owned(), outcome.to_owned()))
            .map_or(0, |s| s.count)
    }

    pub fn total_calls(&self) -> u64 {
        self.calls.values().map(|s| s.count).sum()
    }

    /// Calls that ended in neither 2xx nor an accepted 404-on-delete (i.e. failed or retried attempts).
    pub fn failed_attempts(&self) -> u64 {
        self.calls
            .iter()
            .filter(|((_, outcome), _)| outcome != "2xx" && outcome != "404")
            .map(|(_, s)| s.count)
            .sum()
    }

    pub fn retries_total(&self) -> u64 {
        self.retries.values().sum()
    }
}

#[derive(Default)]
pub struct Metrics {
    inner: Mutex<Snapshot>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

/// Bounded outcome label for a status.
pub fn outcome_label(status: u16) -> String {
    match status {
        0 => "transport".to_owned(),
        200..=299 => "2xx".to_owned(),
        500..=599 => "5xx".to_owned(),
        s => s.to_string(),
    }
}

impl Metrics {
    fn lock(&self) -> std::sync::MutexGuard<'_, Snapshot> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn record_call(&self, op: &str, status: u16, d: Duration) {
        self.lock()
            .calls
            .entry((op.to_owned(), outcome_label(status)))
            .or_default()
            .add(d);
    }

    pub fn record_retry(&self, op: &str, reason: &str) {
        *self
            .lock()
            .retries
            .entry((op.to_owned(), reason.to_owned()))
            .or_default() += 1;
    }

    pub fn record_reauth(&self) {
        self.lock().reauths += 1;
    }

    pub fn record_ratelimit_wait(&self, d: Duration) {
        let mut s = self.lock();
        s.ratelimit_waits += 1;
        s.ratelimit_wait_total += d;
    }

    pub fn set_admission(&self, service: Service, gauge: AdmissionGauge) {
        // Called on every call's entry and exit: update in place, allocate the key only the first time.
        let mut s = self.lock();
        match s.admission.get_mut(service.as_str()) {
            Some(g) => *g = gauge,
            None => {
                s.admission.insert(service.as_str().to_owned(), gauge);
            }
        }
    }

    pub fn record_limit_move(&self, service: Service, reason: MoveReason) {
        *self
            .lock()
            .limit_moves
            .entry((service.as_str().to_owned(), reason.as_str().to_owned()))
            .or_default() += 1;
    }

    pub fn record_queue_wait(&self, d: Duration) {
        let mut s = self.lock();
        s.queue_waits += 1;
        s.queue_wait_total += d;
    }

    pub fn snapshot(&self) -> Snapshot {
        self.lock().clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_and_buckets_by_op_and_outcome() {
        let m = Metrics::default();
        m.record_call("neutron.ports.create", 201, Duration::from_millis(30));
        m.record_call("neutron.ports.create", 201, Duration::from_millis(70));
        m.record_call("neutron.ports.create", 409, Duration::from_millis(5));
        m.record_call("neutron.ports.delete", 404, Duration::from_millis(5));
        m.record_call("octavia.loadbalancers.show", 0, Duration::from_secs(40));
        m.record_retry("neutron.ports.create", "ipam_conflict");
        let s = m.snapshot();
        assert_eq!(s.count("neutron.ports.create"), 3);
        assert_eq!(s.count_outcome("neutron.ports.create", "2xx"), 2);
        let ok = &s.calls[&("neutron.ports.create".to_owned(), "2xx".to_owned())];
        assert_eq!(ok.mean(), Duration::from_millis(50));
        assert_eq!(ok.max, Duration::from_millis(70));
        assert_eq!(ok.buckets[3], 1); // 30 ms <= 50 ms
        assert_eq!(ok.buckets[4], 1); // 70 ms <= 100 ms
        let slow = &s.calls[&("octavia.loadbalancers.show".to_owned(), "transport".to_owned())];
        assert_eq!(slow.buckets[BUCKETS.len()], 1);
        assert_eq!(s.failed_attempts(), 2);
        assert_eq!(s.retries_total(), 1);
        assert_eq!(s.total_calls(), 5);
    }
}
