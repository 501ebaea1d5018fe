//! Octavia v2: load balancers created fully populated (LB + listeners + pools + members + health monitors
//! in one POST), members replaced in one batch call, status trees, providers and API version gates.

pub mod cluster;
pub mod features;
pub mod healthmonitors;
pub mod listeners;
pub mod loadbalancers;
pub mod members;
pub mod pools;
pub mod providers;
pub mod quotas;
pub mod status;
pub mod versions;

pub use crate::neutron::IdRef;
pub use features::OctaviaFeatures;

/// Octavia's provisioning states.
pub mod provisioning {
    pub const ACTIVE: &str = "ACTIVE";
    pub const ERROR: &str = "ERROR";
    pub const DELETED: &str = "DELETED";
    pub const PENDING_CREATE: &str = "PENDING_CREATE";
    pub const PENDING_UPDATE: &str = "PENDING_UPDATE";
    pub const PENDING_DELETE: &str = "PENDING_DELETE";

    pub fn is_pending(s: &str) -> bool {
        s.starts_with("PENDING_")
    }
}
