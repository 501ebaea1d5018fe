//! One error type for every call. API errors carry the service, the op name, the HTTP status, the server's
//! error class (Neutron's `type`, e.g. `OverQuota`) and the request id, so logs and Events can point at the
//! server-side log line.

use std::fmt;
use std::time::Duration;

use crate::retry::ErrorKind;

/// Which OpenStack service a call went to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Service {
    Identity,
    Network,
    LoadBalancer,
}

impl Service {
    pub fn as_str(self) -> &'static str {
        match self {
            Service::Identity => "keystone",
            Service::Network => "neutron",
            Service::LoadBalancer => "octavia",
        }
    }
}

impl Service {
    /// Event reason for a call this service refused.
    pub fn refused_reason(self) -> &'static str {
        match self {
            Service::Identity => "KeystoneError",
            Service::Network => "NeutronError",
            Service::LoadBalancer => "OctaviaError",
        }
    }

    /// Event reason for a call this service did not answer, or answered 5xx, after the retries.
    pub fn unavailable_reason(self) -> &'static str {
        match self {
            Service::Identity => "KeystoneUnavailable",
            Service::Network => "NeutronUnavailable",
            Service::LoadBalancer => "OctaviaUnavailable",
        }
    }
}

impl fmt::Display for Service {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A non-2xx answer, after retries (if it was retryable at all).
#[derive(Debug, Clone)]
pub struct ApiFailure {
    pub service: Service,
    pub op: &'static str,
    pub method: String,
    pub status: u16,
    pub kind: ErrorKind,
    /// Neutron's exception class (`PortNotFound`, `OverQuota`, ...); empty for Octavia and Keystone.
    pub code: String,
    pub message: String,
    pub request_id: Option<String>,
    pub attempts: u32,
}

impl fmt::Display for ApiFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {} ({}) -> HTTP {}",
            self.service, self.op, self.method, self.status
        )?;
        if !self.code.is_empty() {
            write!(f, " {}", self.code)?;
        }
        write!(f, ": {}", self.message)?;
        if let Some(id) = &self.request_id {
            write!(f, " [{id}]")?;
        }
        if self.attempts > 1 {
            write!(f, " after {} attempts", self.attempts)?;
        }
        Ok(())
    }
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{0}")]
    Api(Box<ApiFailure>),

    /// The request never got an answer (connect refused, timeout, broken connection).
    #[error("{service} {op}: transport error after {attempts} attempts: {source}")]
    Transport {
        service: Service,
        op: &'static str,
        attempts: u32,
        #[source]
        source: reqwest::Error,
    },

    #[error("{service} {op}: cannot decode the answer: {source}")]
    Decode {
        service: Service,
        op: &'static str,
        #[source]
        source: serde_json::Error,
    },

    #[error("authentication: {0}")]
    Auth(String),

    #[error("configuration: {0}")]
    Config(String),

    /// The cloud lacks an extension or API version the call needs.
    #[error("{op}: the cloud does not support {feature}")]
    Unsupported {
        service: Service,
        op: &'static str,
        feature: String,
    },

    #[error("invalid tag {tag:?}: {reason}")]
    InvalidTag { tag: String, reason: &'static str },

    #[error("load balancer {id} went to ERROR ({detail})")]
    LbError { id: String, detail: String },

    #[error("load balancer {id} stuck in {status} for {for_:?}")]
    LbStuck {
        id: String,
        status: String,
        for_: Duration,
    },

    #[error("timed out after {after:?} waiting for {what}")]
    WaitTimeout { what: String, after: Duration },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub fn api(&self) -> Option<&ApiFailure> {
        match self {
            Error::Api(a) => Some(a),
            _ => None,
        }
    }

    pub fn status(&self) -> Option<u16> {
        self.api().map(|a| a.status)
    }

    pub fn kind(&self) -> Option<ErrorKind> {
        self.api().map(|a| a.kind)
    }

    pub fn is_not_found(&self) -> bool {
        self.status() == Some(404)
    }

    pub fn is_conflict(&self) -> bool {
        self.status() == Some(409)
    }

    pub fn is_bad_request(&self) -> bool {
        self.status() == Some(400)
    }

    pub fn is_over_quota(&self) -> bool {
        self.kind() == Some(ErrorKind::OverQuota)
    }

    /// The subnet has no address left (Neutron's `IpAddressGenerationFailure`, a 409).
    pub fn is_out_of_addresses(&self) -> bool {
        self.api().is_some_and(|a| a.code == "IpAddressGenerationFailure")
    }

    /// An address given to the request was taken by a create beside it (Neutron's `IpAddressAlreadyAllocated`,
    /// a 409; [`crate::retry::is_address_race`] on the answer's body).
    pub fn is_address_race(&self) -> bool {
        self.api().is_some_and(|a| a.code == crate::retry::ADDRESS_RACE)
    }

    /// Octavia's provider does not support an option of the request (`ProviderUnsupportedOptionError`,
    /// a 501 "Provider 'x' does not support a requested option: ..."; some providers answer 400).
    pub fn is_provider_unsupported(&self) -> bool {
        self.api().is_some_and(|a| {
            a.status == 501 || (a.status == 400 && a.message.contains("does not support a requested option"))
        })
    }

    /// Refused for its size: the same request never passes.
    pub fn is_request_too_large(&self) -> bool {
        self.kind() == Some(ErrorKind::RequestTooLarge)
    }

    /// The service that answered or was asked; `None` for what failed before any call (settings, a tag).
    pub fn service(&self) -> Option<Service> {
        match self {
            Error::Api(a) => Some(a.service),
            Error::Transport { service, .. }
            | Error::Decode { service, .. }
            | Error::Unsupported { service, .. } => Some(*service),
            Error::Auth(_) => Some(Service::Identity),
            // Only load balancers and their members are waited for.
            Error::LbError { .. } | Error::LbStuck { .. } | Error::WaitTimeout { .. } => {
                Some(Service::LoadBalancer)
            }
            Error::Config(_) | Error::InvalidTag { .. } => None,
        }
    }

    /// The cloud did not answer, or answered 5xx, after the client's retries.
    pub fn is_unavailable(&self) -> bool {
        matches!(self, Error::Transport { .. }) || self.status().is_some_and(|s| s >= 500)
    }

    /// Short, bounded label for metrics and Event reasons.
    pub fn metric_label(&self) -> &'static str {
        match self {
            Error::Api(a) => a.kind.as_str(),
            Error::Transport { .. } => "transport",
            Error::Decode { .. } => "decode",
            Error::Auth(_) => "auth",
            Error::Config(_) => "config",
            Error::Unsupported { .. } => "unsupported",
            Error::InvalidTag { .. } => "invalid_tag",
            Error::LbError { .. } => "lb_error",
            Error::LbStuck { .. } => "lb_stuck",
            Error::WaitTimeout { .. } => "wait_timeout",
        }
    }
}

impl From<openstack_sdk::OpenStackError> for Error {
    fn from(e: openstack_sdk::OpenStackError) -> Self {
        Error::Auth(e.to_string())
    }
}
