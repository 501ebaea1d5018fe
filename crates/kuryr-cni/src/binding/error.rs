//! Binding failures, carrying the kernel errno when netlink refused.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum BindError {
    #[error("netlink {op}: {source}")]
    Netlink {
        op: String,
        #[source]
        source: rtnetlink::Error,
    },
    #[error("network namespace {}: {source}", path.display())]
    Netns {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("invalid VIF: {0}")]
    InvalidVif(String),
    #[error("{0} not found")]
    NotFound(String),
    #[error("interface check failed: {0}")]
    Check(String),
    #[error("Open vSwitch database {}: {what}", socket.display())]
    Ovsdb { socket: PathBuf, what: String },
    #[error("choosing the parent link: {0}")]
    Parent(#[from] super::parent::ParentError),
}

impl BindError {
    pub fn netlink(op: impl Into<String>) -> impl FnOnce(rtnetlink::Error) -> Self {
        let op = op.into();
        move |source| Self::Netlink { op, source }
    }

    /// Positive errno of a netlink refusal.
    pub fn errno(&self) -> Option<i32> {
        match self {
            Self::Netlink {
                source: rtnetlink::Error::NetlinkError(m),
                ..
            } => Some(-m.raw_code()),
            _ => None,
        }
    }

    /// The kernel says the device (name, VLAN id or MAC) is taken: a leftover may be in the way.
    pub fn is_conflict(&self) -> bool {
        matches!(
            self.errno(),
            Some(errno::EEXIST | errno::EBUSY | errno::EADDRINUSE)
        )
    }

    /// The kernel lacks the link kind (802.1Q module absent): EOPNOTSUPP.
    pub fn is_unsupported(&self) -> bool {
        matches!(self.errno(), Some(errno::EOPNOTSUPP))
    }
}

/// The few errnos we branch on (values of Linux on every architecture we target).
pub mod errno {
    pub const ENOENT: i32 = 2;
    pub const ESRCH: i32 = 3;
    pub const EBUSY: i32 = 16;
    pub const EEXIST: i32 = 17;
    pub const ENODEV: i32 = 19;
    pub const EOPNOTSUPP: i32 = 95;
    pub const EADDRINUSE: i32 = 98;
}
