//! kuryr-bench: the benchmark harness (docs/BENCHMARKS.md). The pure parts (result schema, percentile
//! maths, call-log accounting, /proc parsing, the upstream proxy's rewrites) are unit-tested; the rest
//! drives the lab and runs only from `bench/run`.

pub mod calls;
pub mod cleanup;
pub mod cloud;
pub mod controllers;
pub mod kubeenv;
pub mod machine;
pub mod proc;
pub mod proxy;
pub mod record;
pub mod report;
pub mod scenarios;
pub mod session;
pub mod stats;
