//! What the provisioning states of a load balancer tree call for: go on, wait, or replace it. Octavia
//! refuses every change while anything is PENDING_*, and never leaves ERROR by itself; upstream waited
//! forever on both, which broke the Service for good.

use std::time::Duration;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Assessment {
    /// Every node ACTIVE: changes may be made.
    Active,
    /// Something is PENDING_*: look again later.
    Wait { status: String },
    /// Replace it (cascade delete + create), for this reason.
    Repair { reason: String },
}

/// `states`: provisioning status of every node of the tree, LB first. `pending_for`: how long the tree has
/// been pending without a break, as the caller measured it. `limit`: how long PENDING_* may last.
pub fn assess<S: AsRef<str>>(states: &[S], pending_for: Duration, limit: Duration) -> Assessment {
    if let Some(i) = states.iter().position(|s| s.as_ref() == "ERROR") {
        let what = if i == 0 {
            "load balancer"
        } else {
            "part of its tree"
        };
        return Assessment::Repair {
            reason: format!("{what} in ERROR"),
        };
    }
    match states.iter().find(|s| s.as_ref().starts_with("PENDING_")) {
        Some(p) if pending_for >= limit => Assessment::Repair {
            reason: format!(
                "{} for {}s (limit {}s)",
                p.as_ref(),
                pending_for.as_secs(),
                limit.as_secs()
            ),
        },
        Some(p) => Assessment::Wait {
            status: p.as_ref().to_owned(),
        },
        None if states.is_empty() => Assessment::Wait {
            status: "UNKNOWN".into(),
        },
        None => Assessment::Active,
    }
}
