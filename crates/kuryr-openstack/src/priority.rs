//! Finish what is started first. A caller working on one object (a pod's port, a Service's load balancer)
//! runs its calls inside [`work_started`] with the instant it began on that object; when a service's calls
//! have to queue, the oldest work goes first. The first call of a new pod therefore waits behind the last
//! calls of the pods already under way, and a burst's pods finish one after another instead of all together
//! at the end. Calls outside any scope rank by the instant they asked (plain arrival order).

use std::future::Future;

use tokio::time::Instant;

tokio::task_local! {
    static STARTED: Instant;
}

/// Runs `f` with its calls ranked as work begun at `at`.
pub async fn work_started<F: Future>(at: Instant, f: F) -> F::Output {
    STARTED.scope(at, f).await
}

/// The rank of a call asked now: when its work began, or now outside any scope. Work handed to another task
/// (a spawned refill, a batched read) keeps its rank by running there inside `work_started(rank(), …)`:
/// outside any scope it would rank as new work, behind everything begun before it was handed over.
pub fn rank() -> Instant {
    STARTED.try_with(|at| *at).unwrap_or_else(|_| Instant::now())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test(start_paused = true)]
    async fn a_scope_gives_its_instant_and_no_scope_gives_now() {
        let t0 = Instant::now();
        tokio::time::advance(Duration::from_secs(5)).await;
        assert_eq!(work_started(t0, async { rank() }).await, t0);
        assert_eq!(rank(), t0 + Duration::from_secs(5));
    }
}
