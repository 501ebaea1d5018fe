//! The gate every HTTP exchange passes, the client's own calls and Keystone logins alike: one rate limiter
//! per service (Keystone, Neutron, Octavia, each at the configured QPS and burst), one concurrency cap,
//! and the metrics/observer that count and time each attempt.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{Semaphore, SemaphorePermit};

use crate::errors::{Error, Result, Service};
use crate::metrics::{CallObserver, CallRecord, Metrics};
use crate::ratelimit::{RateLimit, TokenBucket};

/// One token bucket per service: a pod burst's Neutron calls must not delay the Octavia polls of the
/// Services being built at the same time, nor the other way round.
pub(crate) struct Limiters {
    identity: TokenBucket,
    network: TokenBucket,
    load_balancer: TokenBucket,
}

impl Limiters {
    pub(crate) fn new(rate: RateLimit) -> Self {
        Self {
            identity: TokenBucket::new(rate),
            network: TokenBucket::new(rate),
            load_balancer: TokenBucket::new(rate),
        }
    }

    pub(crate) fn of(&self, service: Service) -> &TokenBucket {
        match service {
            Service::Identity => &self.identity,
            Service::Network => &self.network,
            Service::LoadBalancer => &self.load_balancer,
        }
    }
}

pub(crate) struct Gate {
    limiters: Limiters,
    slots: Semaphore,
    metrics: Arc<Metrics>,
    observer: Option<Arc<dyn CallObserver>>,
}

impl Gate {
    pub(crate) fn new(
        rate: RateLimit,
        max_concurrency: usize,
        observer: Option<Arc<dyn CallObserver>>,
    ) -> Self {
        Self {
            limiters: Limiters::new(rate),
            slots: Semaphore::new(max_concurrency.max(1)),
            metrics: Arc::new(Metrics::default()),
            observer,
        }
    }

    pub(crate) fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// `service`'s rate-limiter token (the wait is recorded), then a concurrency slot. The token comes
    /// first so that callers waiting for one service's tokens do not sit on the slots another service's
    /// calls need. Hold the permit for the exchange only.
    pub(crate) async fn enter(&self, service: Service) -> Result<SemaphorePermit<'_>> {
        let waited = self.limiters.of(service).acquire().await;
        if !waited.is_zero() {
            self.metrics.record_ratelimit_wait(waited);
        }
        self.slots
            .acquire()
            .await
            .map_err(|_| Error::Config("client closed".to_owned()))
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
    use tokio::time::Instant;

    /// Milliseconds after `t0` at which each of `n` calls to `service` gets through the gate.
    async fn admitted(gate: &Arc<Gate>, service: Service, n: usize, t0: Instant) -> Vec<u128> {
        let tasks: Vec<_> = (0..n)
            .map(|_| {
                let gate = gate.clone();
                tokio::spawn(async move {
                    let _permit = gate.enter(service).await?;
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
    async fn each_service_has_its_own_bucket() {
        let gate = Arc::new(Gate::new(RateLimit { qps: 10.0, burst: 2 }, 32, None));
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
    async fn waiting_for_a_token_holds_no_slot() {
        // One slot, held by a long Neutron exchange; two more Neutron calls wait for their tokens (1/s).
        let gate = Arc::new(Gate::new(RateLimit { qps: 1.0, burst: 1 }, 1, None));
        let t0 = Instant::now();
        let permit = gate.enter(Service::Network).await.expect("gate");
        let neutron = {
            let gate = gate.clone();
            tokio::spawn(async move { admitted(&gate, Service::Network, 2, t0).await })
        };
        tokio::time::sleep(Duration::from_millis(10)).await;
        drop(permit);
        // Octavia gets the slot at once: the Neutron calls waiting for tokens do not hold it.
        let octavia = admitted(&gate, Service::LoadBalancer, 1, t0).await;
        assert_eq!(octavia, vec![10]);
        assert_eq!(neutron.await.expect("task"), vec![1000, 2000]);
    }
}
