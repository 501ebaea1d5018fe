//! What the provisioning states of a load balancer tree call for: go on, wait, or replace it. Octavia
//! refuses every change while anything is PENDING_*, and never leaves ERROR by itself; upstream waited
//! forever on both, which broke the Service for good.

use std::fmt;
use std::time::Duration;

/// Octavia's provisioning status of a tree node. Anything Octavia may add later reads as `Other`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum ProvisioningStatus {
    Active,
    PendingCreate,
    PendingUpdate,
    PendingDelete,
    Error,
    Deleted,
    Other(String),
}

impl ProvisioningStatus {
    pub fn parse(status: &str) -> Self {
        match status {
            "ACTIVE" => Self::Active,
            "PENDING_CREATE" => Self::PendingCreate,
            "PENDING_UPDATE" => Self::PendingUpdate,
            "PENDING_DELETE" => Self::PendingDelete,
            "ERROR" => Self::Error,
            "DELETED" => Self::Deleted,
            other => Self::Other(other.to_owned()),
        }
    }

    /// Octavia refuses changes to the tree until this node settles.
    pub fn is_pending(&self) -> bool {
        matches!(
            self,
            Self::PendingCreate | Self::PendingUpdate | Self::PendingDelete
        )
    }

    pub fn as_str(&self) -> &str {
        match self {
            Self::Active => "ACTIVE",
            Self::PendingCreate => "PENDING_CREATE",
            Self::PendingUpdate => "PENDING_UPDATE",
            Self::PendingDelete => "PENDING_DELETE",
            Self::Error => "ERROR",
            Self::Deleted => "DELETED",
            Self::Other(s) => s,
        }
    }
}

impl fmt::Display for ProvisioningStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a load balancer is replaced (the `reason` label of the repairs metric).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RepairKind {
    /// It (or part of its tree) went to ERROR.
    Error,
    /// PENDING_* past the limit.
    Stuck,
    /// It cannot be changed into what is wanted (e.g. another provider or VIP subnet).
    Changed,
    /// It vanished from Octavia.
    Lost,
}

impl RepairKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Error => "error",
            Self::Stuck => "stuck",
            Self::Changed => "changed",
            Self::Lost => "lost",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Assessment {
    /// Every node ACTIVE: changes may be made.
    Active,
    /// Something is PENDING_*: look again later.
    Wait { status: ProvisioningStatus },
    /// Replace it (cascade delete + create), for this reason.
    Repair { kind: RepairKind, reason: String },
}

/// `states`: provisioning status of every node of the tree, LB first. `pending_for`: how long the tree has
/// been pending without a break, as the caller measured it. `limit`: how long PENDING_* may last.
pub fn assess(states: &[ProvisioningStatus], pending_for: Duration, limit: Duration) -> Assessment {
    if let Some(i) = states.iter().position(|s| *s == ProvisioningStatus::Error) {
        let what = if i == 0 {
            "load balancer"
        } else {
            "part of its tree"
        };
        return Assessment::Repair {
            kind: RepairKind::Error,
            reason: format!("{what} in ERROR"),
        };
    }
    match states.iter().find(|s| s.is_pending()) {
        Some(p) if pending_for >= limit => Assessment::Repair {
            kind: RepairKind::Stuck,
            reason: format!("{p} for {}s (limit {}s)", pending_for.as_secs(), limit.as_secs()),
        },
        Some(p) => Assessment::Wait { status: p.clone() },
        None if states.is_empty() => Assessment::Wait {
            status: ProvisioningStatus::Other("UNKNOWN".into()),
        },
        None => Assessment::Active,
    }
}
