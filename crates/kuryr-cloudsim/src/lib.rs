//! kuryr-cloudsim: an in-memory emulator of the OpenStack APIs kuryr-rs uses — Keystone v3 (tokens,
//! catalog), a Neutron subset (networks, subnets, subnet pools, ports with bulk create and IPAM,
//! trunks, security groups, routers, floating IPs, quotas, tags) and an Octavia subset (load
//! balancers with fully-populated create, listeners, pools, members with batch replace, health
//! monitors, provisioning states per provider) — with the real APIs' shapes and error codes,
//! latency profiles, fault injection and a call log. See docs/cloudsim.md.
#![forbid(unsafe_code)]

pub mod admin;
pub mod calllog;
pub mod errors;
pub mod faults;
pub mod ipam;
pub mod keystone;
pub mod load;
pub mod neutron;
pub mod octavia;
pub mod pipeline;
pub mod profile;
pub mod query;
pub mod routes;
pub mod server;
pub mod state;
pub mod tokens;
pub mod util;
pub mod world;

pub use calllog::Call;
pub use faults::{FaultRule, Faults, LbFaultRule, LbOutcome, LbPhase};
pub use profile::{AuthMode, Profile};
pub use server::{Server, Sim, SimHandle};
