//! The gate every HTTP exchange passes, the client's own calls and Keystone logins alike: one concurrency
//! cap, one rate limiter, and the metrics/observer that count and time each attempt.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{Semaphore, SemaphorePermit};

use crate::errors::{Error, Result};
use crate::metrics::{CallObserver, CallRecord, Metrics};
use crate::ratelimit::{RateLimit, TokenBucket};

pub(crate) struct Gate {
    limiter: TokenBucket,
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
            limiter: TokenBucket::new(rate),
            slots: Semaphore::new(max_concurrency.max(1)),
            metrics: Arc::new(Metrics::default()),
            observer,
        }
    }

    pub(crate) fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// A concurrency slot, then a rate-limiter token (the wait is recorded). Hold the permit for the
    /// exchange only.
    pub(crate) async fn enter(&self) -> Result<SemaphorePermit<'_>> {
        let permit = self
            .slots
            .acquire()
            .await
            .map_err(|_| Error::Config("client closed".to_owned()))?;
        let waited = self.limiter.acquire().await;
        if !waited.is_zero() {
            self.metrics.record_ratelimit_wait(waited);
        }
        Ok(permit)
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
