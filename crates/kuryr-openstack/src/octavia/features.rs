//! What an Octavia can do, by its API version and providers: the thresholds (the same as upstream kuryr:
//! tags 2.5, providers 2.6, allowed_cidrs 2.12, same port with different protocols 2.13, SCTP 2.23; and
//! additive member batches 2.11). Plain values, so the client can cache them without importing the calls;
//! discovered by [`super::versions`].

use std::collections::BTreeSet;

use crate::errors::{Error, Result, Service};

/// `(major, minor)`.
pub type ApiVersion = (u32, u32);

pub const UDP: ApiVersion = (2, 1);
pub const TAGS: ApiVersion = (2, 5);
pub const PROVIDERS: ApiVersion = (2, 6);
pub const ADDITIVE_MEMBERS: ApiVersion = (2, 11);
pub const ALLOWED_CIDRS: ApiVersion = (2, 12);
pub const SAME_PORT_DIFFERENT_PROTOCOL: ApiVersion = (2, 13);
pub const SCTP: ApiVersion = (2, 23);

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OctaviaFeatures {
    pub version: ApiVersion,
    /// Enabled providers (empty if the API predates the providers list).
    pub providers: BTreeSet<String>,
}

impl OctaviaFeatures {
    pub fn at_least(&self, v: ApiVersion) -> bool {
        self.version >= v
    }

    pub fn udp(&self) -> bool {
        self.at_least(UDP)
    }

    pub fn sctp(&self) -> bool {
        self.at_least(SCTP)
    }

    pub fn tags(&self) -> bool {
        self.at_least(TAGS)
    }

    /// `additive_only` on member batch updates.
    pub fn additive_member_batch(&self) -> bool {
        self.at_least(ADDITIVE_MEMBERS)
    }

    pub fn allowed_cidrs(&self) -> bool {
        self.at_least(ALLOWED_CIDRS)
    }

    pub fn same_port_different_protocol(&self) -> bool {
        self.at_least(SAME_PORT_DIFFERENT_PROTOCOL)
    }

    pub fn has_provider(&self, name: &str) -> bool {
        self.providers.contains(name)
    }

    pub(crate) fn gate(&self, op: &'static str, ok: bool, what: &str, v: ApiVersion) -> Result<()> {
        if ok {
            Ok(())
        } else {
            Err(Error::Unsupported {
                service: Service::LoadBalancer,
                op,
                feature: format!(
                    "{what} (Octavia API {}.{} needed, cloud has {}.{})",
                    v.0, v.1, self.version.0, self.version.1
                ),
            })
        }
    }
}
