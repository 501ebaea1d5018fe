//! kuryr-controller: Kubernetes pod networking on OpenStack.
//!
//! - [`pods::frontend`]: the Pod front end. Creates each scheduled pod's KuryrPort (owned by the pod); on
//!   deletion deletes it once the pod's containers have stopped (a pod finalizer left by upstream Kuryr goes
//!   once the KuryrPort is gone).
//! - [`ports::reconcile`]: the KuryrPort controller. Creates the pod's Neutron port, makes it a VLAN subport
//!   of the node VM's trunk, records the VIF in the status and waits for ACTIVE; releases it all on deletion.
//! - [`networks`]: one Neutron network + subnet per Namespace (KuryrNetwork), and the pod subnet choice.
//! - [`policies`]: NetworkPolicies → security groups (KuryrNetworkPolicy), see docs/network-policy.md.
//! - [`services`]: the Service front end (Service + endpoints → KuryrLoadBalancer) and
//!   [`loadbalancers`], the KuryrLoadBalancer controller that makes Octavia match it (docs/services.md).
//! - [`admin`]: `/livez`, `/readyz`, `/metrics`.
//! - [`slim`]: what the watch caches keep of an object.
//!
//! Decisions come from `kuryr-core`; cloud calls go through `kuryr-openstack`. See docs/controller.md.

#![forbid(unsafe_code)]

pub mod admin;
pub mod args;
pub mod config;
pub mod config_file;
pub mod context;
pub mod errors;
pub mod gc;
pub mod kube_client;
pub mod leader;
pub mod loadbalancers;
pub mod metrics;
pub mod networks;
pub mod packed;
pub mod pods;
pub mod policies;
pub mod ports;
pub mod projects;
pub mod runtime;
pub mod scope;
pub mod services;
pub mod shutdown;
pub mod slim;
pub mod toolkit;

pub use args::Args;
pub use config::Config;
pub use context::Context;
pub use errors::{Error, Result};
pub use runtime::run;
