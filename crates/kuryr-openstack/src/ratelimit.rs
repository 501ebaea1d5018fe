//! A token bucket (QPS + burst): the optional rate ceiling the client's gate keeps per service (off by
//! default; the adaptive concurrency limit is the everyday control). Waiters reserve
//! their token up front (the bucket may go negative), so they are served in arrival order and a burst of
//! callers spreads out at exactly `qps` instead of thundering after each refill.

use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RateLimit {
    /// Sustained calls per second; `f64::INFINITY` (or <= 0) disables the limiter.
    pub qps: f64,
    /// Calls allowed back to back from a full bucket.
    pub burst: u32,
}

impl Default for RateLimit {
    /// No ceiling. A fixed rate was the old control (20 QPS, burst 40): it made large syncs wait on the
    /// client while the cloud idled; operators whose cloud needs a hard cap set one.
    fn default() -> Self {
        Self::unlimited()
    }
}

impl RateLimit {
    pub fn unlimited() -> Self {
        Self {
            qps: f64::INFINITY,
            burst: u32::MAX,
        }
    }

    fn enabled(&self) -> bool {
        self.qps.is_finite() && self.qps > 0.0
    }
}

#[derive(Debug)]
struct Bucket {
    /// Tokens available at `at`; negative when callers have reserved future tokens.
    tokens: f64,
    at: Instant,
}

#[derive(Debug)]
pub struct TokenBucket {
    limit: RateLimit,
    state: Mutex<Bucket>,
}

impl TokenBucket {
    pub fn new(limit: RateLimit) -> Self {
        Self {
            limit,
            state: Mutex::new(Bucket {
                tokens: f64::from(limit.burst.max(1)),
                at: Instant::now(),
            }),
        }
    }

    pub fn limit(&self) -> RateLimit {
        self.limit
    }

    /// Takes one token and says how long the caller must wait before using it (zero when one was there).
    pub fn reserve(&self, now: Instant) -> Duration {
        if !self.limit.enabled() {
            return Duration::ZERO;
        }
        let cap = f64::from(self.limit.burst.max(1));
        let mut b = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let elapsed = now.saturating_duration_since(b.at).as_secs_f64();
        b.tokens = (b.tokens + elapsed * self.limit.qps).min(cap);
        b.at = now.max(b.at);
        b.tokens -= 1.0;
        if b.tokens >= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(-b.tokens / self.limit.qps)
        }
    }

    /// Waits for a token; returns how long it waited.
    pub async fn acquire(&self) -> Duration {
        let wait = self.reserve(Instant::now());
        if !wait.is_zero() {
            tokio::time::sleep(wait).await;
        }
        wait
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn burst_is_free_then_calls_are_spaced_at_qps() {
        let b = TokenBucket::new(RateLimit { qps: 10.0, burst: 3 });
        let t0 = Instant::now();
        for _ in 0..3 {
            assert_eq!(b.acquire().await, Duration::ZERO);
        }
        // The 4th..6th wait 100, 200, 300 ms after t0 (reserved back to back).
        let waits: Vec<Duration> = (0..3).map(|_| b.reserve(t0)).collect();
        let ms: Vec<u128> = waits.iter().map(Duration::as_millis).collect();
        assert_eq!(ms, vec![100, 200, 300]);
    }

    #[tokio::test(start_paused = true)]
    async fn sustained_rate_matches_qps() {
        let b = TokenBucket::new(RateLimit { qps: 50.0, burst: 5 });
        let t0 = Instant::now();
        for _ in 0..105 {
            b.acquire().await;
        }
        // 5 from the burst, 100 more at 50/s = 2 s.
        let took = t0.elapsed();
        assert!(
            took >= Duration::from_millis(1990) && took <= Duration::from_millis(2010),
            "{took:?}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn refill_is_capped_at_burst() {
        let b = TokenBucket::new(RateLimit { qps: 10.0, burst: 2 });
        b.acquire().await;
        b.acquire().await;
        tokio::time::advance(Duration::from_secs(60)).await;
        let now = Instant::now();
        assert_eq!(b.reserve(now), Duration::ZERO);
        assert_eq!(b.reserve(now), Duration::ZERO);
        assert_eq!(b.reserve(now), Duration::from_millis(100));
    }

    #[tokio::test(start_paused = true)]
    async fn concurrent_waiters_are_spread_not_bunched() {
        let b = std::sync::Arc::new(TokenBucket::new(RateLimit { qps: 4.0, burst: 1 }));
        let t0 = Instant::now();
        let tasks: Vec<_> = (0..5)
            .map(|_| {
                let b = b.clone();
                tokio::spawn(async move {
                    b.acquire().await;
                    Instant::now()
                })
            })
            .collect();
        let mut done = Vec::new();
        for t in tasks {
            done.push(t.await.unwrap().duration_since(t0).as_millis());
        }
        done.sort_unstable();
        assert_eq!(done, vec![0, 250, 500, 750, 1000]);
    }

    #[test]
    fn unlimited_never_waits() {
        let b = TokenBucket::new(RateLimit::unlimited());
        let now = Instant::now();
        for _ in 0..10_000 {
            assert_eq!(b.reserve(now), Duration::ZERO);
        }
    }
}
