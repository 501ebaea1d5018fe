//! kuryrctl, the operator CLI: `preflight` (is this cloud ready for kuryr-rs, with quotas against what the
//! cluster will need), `status` (Kubernetes objects to cloud objects, drift marked), `pools` (pool sizes per
//! trunk and network), `gc` (what the garbage collector would delete; it only lists), `migrate` (adopt what upstream Kuryr left). Human tables by default,
//! `-o json` for scripts. See docs/kuryrctl.md.

#![forbid(unsafe_code)]

pub mod cli;
pub mod connect;
mod dispatch;
pub mod gc;
pub mod migrate;
pub mod output;
pub mod pools;
pub mod preflight;
pub mod status;

pub use cli::Cli;
