//! A service that suffers under load: beyond `workers` requests in flight, each one waits its turn (latency
//! grows with the queue, as an API server with a fixed pool of workers does) and some are refused with 503
//! (the proxy's queue timeout), the more the deeper the queue. Off unless the profile sets it; this is
//! what lets the benchmark show a client that backs off beside one that floods.

use std::sync::atomic::{AtomicUsize, Ordering};

use serde::{Deserialize, Serialize};

/// Per service (`profile.load.neutron`, `profile.load.octavia`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LoadModel {
    /// Requests served at once at the profile's latency (Neutron's API workers × their green threads).
    pub workers: usize,
    /// Probability of a 503 for each request in flight beyond `workers` (so 0.01 and 20 over: 20 %).
    pub error_per_excess: f64,
    /// The 503 probability never exceeds this.
    pub max_error_rate: f64,
}

impl Default for LoadModel {
    fn default() -> Self {
        Self {
            workers: 16,
            error_per_excess: 0.0,
            max_error_rate: 0.5,
        }
    }
}

impl LoadModel {
    /// Latency multiplier with `in_flight` requests (this one included): 1 up to `workers`, then the
    /// queue's length over the workers.
    pub fn slowdown(&self, in_flight: usize) -> f64 {
        let workers = self.workers.max(1);
        (in_flight as f64 / workers as f64).max(1.0)
    }

    /// Probability that a request arriving with `in_flight` in flight is refused.
    pub fn error_rate(&self, in_flight: usize) -> f64 {
        let excess = in_flight.saturating_sub(self.workers.max(1)) as f64;
        (excess * self.error_per_excess).clamp(0.0, self.max_error_rate.clamp(0.0, 1.0))
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LoadProfile {
    pub neutron: Option<LoadModel>,
    pub octavia: Option<LoadModel>,
}

/// Requests in flight per service (counted whether or not a model is set, so one can be set mid-run).
#[derive(Debug, Default)]
pub struct InFlight {
    neutron: AtomicUsize,
    octavia: AtomicUsize,
}

/// One request counted in flight until dropped.
pub struct Counted<'a>(&'a AtomicUsize);

impl Drop for Counted<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl InFlight {
    /// Counts a request to Neutron (`neutron: true`) or Octavia; how many are in flight with it.
    pub fn enter(&self, neutron: bool) -> (Counted<'_>, usize) {
        let c = if neutron { &self.neutron } else { &self.octavia };
        let n = c.fetch_add(1, Ordering::SeqCst) + 1;
        (Counted(c), n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latency_grows_with_the_queue_beyond_the_workers() {
        let m = LoadModel {
            workers: 10,
            ..LoadModel::default()
        };
        assert_eq!(m.slowdown(1), 1.0);
        assert_eq!(m.slowdown(10), 1.0);
        assert_eq!(m.slowdown(40), 4.0);
    }

    #[test]
    fn errors_grow_with_the_excess_up_to_the_cap() {
        let m = LoadModel {
            workers: 10,
            error_per_excess: 0.02,
            max_error_rate: 0.3,
        };
        assert_eq!(m.error_rate(10), 0.0);
        assert!((m.error_rate(15) - 0.1).abs() < 1e-9);
        assert_eq!(m.error_rate(100), 0.3);
    }

    #[test]
    fn a_request_is_counted_until_dropped() {
        let f = InFlight::default();
        let (a, n) = f.enter(true);
        assert_eq!(n, 1);
        let (_b, n) = f.enter(true);
        assert_eq!(n, 2);
        let (_c, n) = f.enter(false);
        assert_eq!(n, 1);
        drop(a);
        assert_eq!(f.enter(true).1, 2);
    }
}
