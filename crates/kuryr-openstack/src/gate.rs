//! The gate every HTTP exchange passes, the client's own calls and Keystone logins alike: per service
//! (Keystone, Neutron, Octavia) an adaptive concurrency limit with the oldest work first
//! ([`crate::admission`]) and an optional rate ceiling (token bucket, off by default), plus the
//! metrics/observer that count and time each attempt.

use std::sync::Arc;
use std::time::Duration;

use crate::adaptive::{AimdConfig, CallKind};
use crate::admission::{Admission, Pass};
use crate::errors::{Result, Service};
use crate::metrics::{CallObserver, CallRecord, Metrics};
use crate::ratelimit::{RateLimit, TokenBucket};

/// One of each per service: a pod burst's Neutron calls must not delay the Octavia polls of the Services
/// being built at the same time, nor the other way round.
struct PerService<T> {
    identity: T,
    network: T,
    load_balancer: T,
}

impl<T> PerService<T> {
    fn new(f: impl Fn(Service) -> T) -> Self {
        Self {
            identity: f(Service::Identity),
            network: f(Service::Network),
            load_balancer: f(Service::LoadBalancer),
        }
    }

    fn of(&self, service: Service) -> &T {
        match service {
            Service::Identity => &self.identity,
            Service::Network => &self.network,
            Service::LoadBalancer => &self.load_balancer,
        }
    }
}

pub(crate) struct Gate {
    admissions: PerService<Admission>,
    ceilings: PerService<TokenBucket>,
    metrics: Arc<Metrics>,
    observer: Option<Arc<dyn CallObserver>>,
}

impl Gate {
    pub(crate) fn new(
        rate: RateLimit,
        concurrency: AimdConfig,
        observer: Option<Arc<dyn CallObserver>>,
    ) -> Self {
        let metrics = Arc::new(Metrics::default());
        Self {
            admissions: PerService::new(|s| Admission::new(s, concurrency, metrics.clone())),
            ceilings: PerService::new(|_| TokenBucket::new(rate)),
            metrics,
            observer,
        }
    }

    pub(crate) fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// A place among `service`'s calls in flight (oldest work first), then the rate ceiling's token if one
    /// is set. The place comes first so that the ceiling cannot undo the order; its wait is not counted
    /// in the call's latency. Hold the pass for the exchange only, and finish it with how the call went.
    pub(crate) async fn enter(&self, service: Service, kind: CallKind) -> Result<Pass<'_>> {
        let mut pass = self.admissions.of(service).enter(kind).await?;
        let waited = self.ceilings.of(service).acquire().await;
        if !waited.is_zero() {
            self.metrics.record_ratelimit_wait(waited);
            pass.restart_clock();
        }
        Ok(pass)
    }

    /// Counts and times one attempt (`status` 0: no answer).
    pub(crate) fn record(&self, op: &str, method: &str, status: u16, duration: Duration, attempt: u32) {
        self.metrics.record_call(op, status, duration);
        if let Some(o) = &self.observer {
            o.observe(&CallRecord {
                op,
                method,
                status,
                duration,
                attempt,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::errors::Error;
    use tokio::time::Instant;

    const KIND: CallKind = CallKind {
        op: "test.call",
        size_class: 0,
    };

    /// Milliseconds after `t0` at which each of `n` calls to `service` gets through the gate.
    async fn admitted(gate: &Arc<Gate>, service: Service, n: usize, t0: Instant) -> Vec<u128> {
        let tasks: Vec<_> = (0..n)
            .map(|_| {
                let gate = gate.clone();
                tokio::spawn(async move {
                    let _pass = gate.enter(service, KIND).await?;
                    Ok::<_, Error>(Instant::now().duration_since(t0).as_millis())
                })
            })
            .collect();
        let mut out = Vec::new();
        for t in tasks {
            out.push(t.await.expect("task").expect("gate"));
        }
        out.sort_unstable();
        out
    }

    #[tokio::test(start_paused = true)]
    async fn each_service_has_its_own_rate_ceiling() {
        let gate = Arc::new(Gate::new(
            RateLimit { qps: 10.0, burst: 2 },
            AimdConfig::fixed(32),
            None,
        ));
        let t0 = Instant::now();
        // A Neutron burst far beyond its bucket does not delay Octavia nor Keystone: each has its own
        // burst, then 10/s.
        let (neutron, octavia, keystone) = tokio::join!(
            admitted(&gate, Service::Network, 20, t0),
            admitted(&gate, Service::LoadBalancer, 4, t0),
            admitted(&gate, Service::Identity, 1, t0),
        );
        assert_eq!(octavia, vec![0, 0, 100, 200]);
        assert_eq!(keystone, vec![0]);
        assert_eq!(neutron.len(), 20);
        assert_eq!(&neutron[..3], &[0, 0, 100]);
        assert_eq!(neutron.last(), Some(&1800));
    }

    #[tokio::test(start_paused = true)]
    async fn each_service_has_its_own_places() {
        // Neutron's one place is held by a long exchange; Octavia's is free.
        let gate = Arc::new(Gate::new(RateLimit::unlimited(), AimdConfig::fixed(1), None));
        let t0 = Instant::now();
        let held = gate.enter(Service::Network, KIND).await.expect("gate");
        let neutron = {
            let gate = gate.clone();
            tokio::spawn(async move { admitted(&gate, Service::Network, 1, t0).await })
        };
        assert_eq!(admitted(&gate, Service::LoadBalancer, 1, t0).await, vec![0]);
        tokio::time::sleep(Duration::from_millis(300)).await;
        drop(held);
        assert_eq!(neutron.await.expect("task"), vec![300]);
    }
}
