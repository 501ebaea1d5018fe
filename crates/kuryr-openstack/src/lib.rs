//! kuryr-openstack: everything kuryr-rs does to the cloud goes through this crate.
//!
//! - [`Cloud`]: one cheap-to-clone handle per project — authentication (clouds.yaml / `OS_*`: password,
//!   application credential, token; noauth), per service an adaptive concurrency limit ([`adaptive`]) that
//!   lets the oldest work go first ([`priority`]) and an optional rate ceiling, retry classification with
//!   jittered backoff, per-op metrics.
//! - [`neutron`]: networks, subnets, subnet pools, routers, ports (bulk create with tags), trunks,
//!   security groups and rules, floating IPs, quotas, tags, extension discovery.
//! - [`octavia`]: fully-populated LB create, batch member replace, per-object CRUD, cascade delete,
//!   status tree, providers, version gates; [`waiter`] tells ACTIVE, ERROR and stuck PENDING_* apart.
//! - [`fit`]: bulk bodies split to the cloud's request-size limit (413 is never retried).
//! - [`batch`]: single-object reads coalesced into list calls by id (port ACTIVE polls under a burst).
//! - [`ownership`]: the ownership tags (`kuryr.cluster=`, `kuryr.kind=`, `kuryr.uid=`) on everything
//!   created; [`owned`]: everything one cluster owns, listed by those tags, with its owner;
//!   `neutron::tagging`: Neutron's tag calls and the one create-then-tag.
//! - [`secret_files`]: credentials files others can read are refused before anything connects.
//!
//! It knows nothing of Kubernetes: ids in, OpenStack objects out. See docs/openstack-client.md.
#![forbid(unsafe_code)]

pub mod adaptive;
mod admission;
pub mod auth;
pub mod batch;
pub mod client;
pub mod config;
pub mod errors;
pub mod fit;
mod gate;
pub mod metrics;
pub mod neutron;
pub mod octavia;
pub mod owned;
pub mod ownership;
mod page;
pub mod priority;
pub mod ratelimit;
pub mod retry;
pub mod secret_files;
pub mod waiter;

pub use adaptive::AimdConfig;
pub use auth::Endpoints;
pub use client::{Cloud, Request, Response};
pub use config::{AuthSource, ClientConfig};
pub use errors::{ApiFailure, Error, Result, Service};
pub use metrics::{CallObserver, CallRecord, Metrics, Snapshot};
pub use ownership::Owner;
pub use priority::work_started;
pub use ratelimit::RateLimit;
pub use retry::{ErrorKind, RetryPolicy};
pub use waiter::WaitOptions;
