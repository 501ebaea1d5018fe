#![allow(clippy::unwrap_used)] // test helpers outside #[test] fns
//! Reconciles tested without a lab: each test drives the controller's own reconcile functions against a
//! scripted Kubernetes API server (a `tower-test` mock, apiserver.rs) and an in-process cloudsim (the same
//! emulator the conformance scenarios hold to the real Neutron and Octavia), then checks what the reconcile
//! wrote to both. Sequences that need the watch (a second reconcile after a status write) feed the cache by
//! hand, as the watch would.

mod apiserver;
mod error_policy;
mod harness;
mod kuryrport;
mod loadbalancer;
mod observer;
mod pool;
