//! kuryr-bench: the benchmark harness (docs/BENCHMARKS.md). The pure parts (result schema, percentile
//! maths, repeats' medians, call-log and API-server request accounting, /proc parsing, the upstream
//! proxy's rewrites) are unit-tested; the rest drives the lab and runs only from `bench/run`.

pub mod apimetrics;
pub mod calls;
pub mod cleanup;
pub mod cloud;
pub mod controllers;
pub mod floor;
pub mod kubeenv;
pub mod limits;
pub mod machine;
pub mod phases;
pub mod proc;
pub mod proxy;
pub mod record;
pub mod repeats;
pub mod report;
pub mod scenarios;
pub mod services_floor;
pub mod session;
pub mod stats;

/// A std mutex's guard, poisoned or not: the harness's shared maps stay usable after a task panicked.
pub(crate) fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    match m.lock() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    }
}
