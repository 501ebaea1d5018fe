//! The controller's one error type. Variants name the failed operation; [`Error::metric_label`] and
//! [`Error::reason`] give bounded labels for metrics, Events and conditions.

use kuryr_core::CoreError;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("kubernetes {op}: {source}")]
    Kube {
        op: &'static str,
        #[source]
        source: kube::Error,
    },

    #[error("openstack: {0}")]
    OpenStack(#[from] kuryr_openstack::Error),

    #[error("{0}")]
    Core(#[from] CoreError),

    #[error("node {0} not found (yet) in the node cache")]
    NodeNotFound(String),

    #[error("{0} is not supported by this controller yet")]
    Unsupported(String),

    /// The controller's settings cannot serve this object (e.g. a LoadBalancer Service without an external
    /// network): retried slowly, the operator has to act.
    #[error("configuration: {0}")]
    Config(String),

    /// The cloud answered without something it always sends (or our own bookkeeping lost track): retried.
    #[error("unexpected: {0}")]
    Unexpected(String),

    /// Something the controller looks up in the cloud is not there (yet).
    #[error("not found in the cloud: {0}")]
    CloudObjectMissing(String),

    #[error("namespace {0}: the KuryrNetwork controller has not made its network yet")]
    NetworkNotReady(String),

    #[error("namespace {0} is being deleted, and its network with it")]
    NamespaceDeleting(String),

    #[error("pool of {0} stayed empty after refills (other pods took every port made)")]
    PoolEmpty(String),

    #[error("{0} kept changing under us (412 on every try)")]
    Contended(String),

    #[error("object without {0}")]
    MissingField(&'static str),

    #[error("serializing: {0}")]
    Serialize(#[from] serde_json::Error),

    #[error("{0} port(s) still on the namespace network; waiting for them to be released")]
    Draining(usize),

    /// A load balancer create that a killed controller process sent may still land: the cleanup lists the
    /// Service's load balancers again once it cannot (`kuryr_core::lb::landing`).
    #[error(
        "a load balancer create sent by an earlier controller process may still land; listing again in {}s before letting go",
        .0.as_secs().max(1)
    )]
    CreateMayLand(std::time::Duration),

    #[error("network policy: {0}")]
    Policy(#[from] kuryr_core::policy::PolicyError),

    /// Boxed: the finalizer helper's error wraps this type.
    #[error("finalizer: {0}")]
    Finalizer(#[source] Box<kube::runtime::finalizer::Error<Error>>),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Re-check of a namespace whose ports are still draining.
const DRAIN_POLL: std::time::Duration = std::time::Duration::from_secs(2);

impl Error {
    pub fn kube(op: &'static str) -> impl FnOnce(kube::Error) -> Error {
        move |source| Error::Kube { op, source }
    }

    /// Bounded label for the reconcile-error counter.
    pub fn metric_label(&self) -> String {
        match self {
            Error::Kube { op, .. } => format!("kube_{op}"),
            Error::OpenStack(e) => format!("openstack_{}", e.metric_label()),
            Error::Core(e) => e.reason().to_owned(),
            Error::NodeNotFound(_) => "node_not_found".into(),
            Error::Unsupported(_) => "unsupported".into(),
            Error::Config(_) => "config".into(),
            Error::Unexpected(_) => "unexpected".into(),
            Error::CloudObjectMissing(_) => "cloud_object_missing".into(),
            Error::NetworkNotReady(_) => "network_not_ready".into(),
            Error::NamespaceDeleting(_) => "namespace_deleting".into(),
            Error::PoolEmpty(_) => "pool_empty".into(),
            Error::Contended(_) => "contended".into(),
            Error::MissingField(_) => "missing_field".into(),
            Error::Serialize(_) => "serialize".into(),
            Error::Draining(_) => "draining".into(),
            Error::CreateMayLand(_) => "create_may_land".into(),
            Error::Policy(_) => "policy".into(),
            Error::Finalizer(_) => self.cause().map_or("finalizer".into(), Error::metric_label),
        }
    }

    /// CamelCase reason for Events and the `Ready` condition.
    pub fn reason(&self) -> &'static str {
        match self {
            Error::Kube { .. } => "KubernetesError",
            Error::OpenStack(e) if e.is_over_quota() => "OverQuota",
            Error::OpenStack(e) if e.is_request_too_large() => "RequestTooLarge",
            Error::OpenStack(e) if e.is_out_of_addresses() => "SubnetFull",
            // Named for the service that answered (or did not).
            Error::OpenStack(e) => match (e.service(), e.is_unavailable()) {
                (Some(s), true) => s.unavailable_reason(),
                (Some(s), false) => s.refused_reason(),
                (None, _) => "OpenStackError",
            },
            Error::Core(e) => e.reason(),
            Error::NodeNotFound(_) => "NodeNotFound",
            Error::Unsupported(_) => "Unsupported",
            Error::Config(_) => "Misconfigured",
            Error::Unexpected(_) => "UnexpectedAnswer",
            Error::CloudObjectMissing(_) => "NotFound",
            Error::NetworkNotReady(_) => "NetworkNotReady",
            Error::NamespaceDeleting(_) => "NamespaceDeleting",
            Error::PoolEmpty(_) => "PoolEmpty",
            Error::Contended(_) => "Contended",
            Error::MissingField(_) | Error::Serialize(_) => "InvalidObject",
            Error::Draining(_) => "Draining",
            Error::CreateMayLand(_) => "CreateMayLand",
            Error::Policy(kuryr_core::policy::PolicyError::TooManyRules { .. })
            | Error::Policy(kuryr_core::policy::PolicyError::TooManySecurityGroups { .. }) => "OverQuota",
            Error::Policy(_) => "InvalidPolicy",
            Error::Finalizer(_) => self.cause().map_or("FinalizerError", Error::reason),
        }
    }

    /// Errors that no retry soon will fix (configuration, a node without trunk): retried slowly. Also
    /// inside a finalizer's apply or cleanup, where every CRD controller's errors arrive.
    pub fn is_permanent(&self) -> bool {
        match self {
            Error::Core(
                CoreError::NoTrunkOnNode { .. }
                | CoreError::NoParentPort { .. }
                | CoreError::NoNodeAddress { .. }
                | CoreError::InvalidVlanRange { .. }
                | CoreError::NoSubnet { .. },
            )
            | Error::Unsupported(_)
            | Error::Config(_)
            | Error::NamespaceDeleting(_) => true,
            Error::Finalizer(_) => self.cause().is_some_and(Error::is_permanent),
            // A request refused for its size is refused again until the object changes.
            _ => self.openstack().is_some_and(|e| e.is_request_too_large()),
        }
    }

    /// When to try again regardless of the backoff: waits, not failures (a namespace network still draining
    /// its ports is looked at every few seconds however long it drains).
    pub fn retry_after(&self) -> Option<std::time::Duration> {
        match self {
            Error::Draining(_) => Some(DRAIN_POLL),
            Error::CreateMayLand(wait) => Some(*wait),
            Error::Finalizer(_) => self.cause().and_then(Error::retry_after),
            _ => None,
        }
    }

    /// The error a finalizer's apply or cleanup failed with: every CRD controller's errors arrive wrapped.
    pub fn cause(&self) -> Option<&Error> {
        match self {
            Error::Finalizer(f) => match &**f {
                kube::runtime::finalizer::Error::ApplyFailed(e)
                | kube::runtime::finalizer::Error::CleanupFailed(e) => Some(e),
                _ => None,
            },
            _ => None,
        }
    }

    /// The cloud's error behind this one, also inside a finalizer's apply or cleanup.
    pub fn openstack(&self) -> Option<&kuryr_openstack::Error> {
        match self {
            Error::OpenStack(e) => Some(e),
            Error::Finalizer(_) => self.cause().and_then(Error::openstack),
            _ => None,
        }
    }
}

/// A cached object that does not unpack is a bug of ours, told as one.
impl From<crate::packed::UnpackError> for Error {
    fn from(e: crate::packed::UnpackError) -> Self {
        Error::Unexpected(e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use kube::runtime::finalizer::Error as FinalizerError;

    use super::*;

    #[test]
    fn a_wrapped_apply_failure_is_labelled_by_its_cause() {
        let core = Error::Core(CoreError::NoTrunkOnNode {
            node: "w1".into(),
            port_id: "p".into(),
        });
        assert!(core.is_permanent());
        let wrapped = Error::Finalizer(Box::new(FinalizerError::ApplyFailed(core)));
        assert!(
            wrapped.is_permanent(),
            "retried slowly from inside the finalizer too"
        );
        assert_eq!(wrapped.metric_label(), "NoTrunkOnNode");
        assert_eq!(wrapped.reason(), "NoTrunkOnNode");
        let missing = Error::Finalizer(Box::new(FinalizerError::<Error>::UnnamedObject));
        assert_eq!(missing.metric_label(), "finalizer");
        assert!(!Error::NodeNotFound("w1".into()).is_permanent());
        let draining = Error::Finalizer(Box::new(FinalizerError::CleanupFailed(Error::Draining(3))));
        assert_eq!(draining.retry_after(), Some(DRAIN_POLL));
        assert_eq!(wrapped.retry_after(), None);
        assert_eq!(Error::NodeNotFound("w1".into()).reason(), "NodeNotFound");
    }

    #[test]
    fn a_request_too_large_is_named_and_permanent_even_inside_a_finalizer() {
        let api = kuryr_openstack::Error::Api(Box::new(kuryr_openstack::ApiFailure {
            service: kuryr_openstack::Service::LoadBalancer,
            op: "octavia.loadbalancers.create",
            method: "POST".into(),
            status: 413,
            kind: kuryr_openstack::ErrorKind::RequestTooLarge,
            code: String::new(),
            message: "Request is too large.".into(),
            request_id: None,
            attempts: 1,
        }));
        let wrapped = Error::Finalizer(Box::new(FinalizerError::ApplyFailed(Error::OpenStack(api))));
        assert!(wrapped.is_permanent());
        assert_eq!(wrapped.reason(), "RequestTooLarge");
    }

    fn refused(service: kuryr_openstack::Service, status: u16) -> Error {
        Error::OpenStack(kuryr_openstack::Error::Api(Box::new(
            kuryr_openstack::ApiFailure {
                service,
                op: "op",
                method: "POST".into(),
                status,
                kind: kuryr_openstack::ErrorKind::Conflict,
                code: String::new(),
                message: "m".into(),
                request_id: None,
                attempts: 1,
            },
        )))
    }

    #[test]
    fn a_cloud_error_is_named_for_the_service_that_answered() {
        use kuryr_openstack::Service::{Identity, LoadBalancer, Network};
        assert_eq!(refused(Network, 409).reason(), "NeutronError");
        assert_eq!(refused(Network, 503).reason(), "NeutronUnavailable");
        assert_eq!(refused(LoadBalancer, 409).reason(), "OctaviaError");
        assert_eq!(refused(LoadBalancer, 500).reason(), "OctaviaUnavailable");
        assert_eq!(refused(Identity, 401).reason(), "KeystoneError");
        let wrapped = Error::Finalizer(Box::new(FinalizerError::CleanupFailed(refused(
            LoadBalancer,
            409,
        ))));
        assert_eq!(wrapped.reason(), "OctaviaError");
        let before_any_call = Error::OpenStack(kuryr_openstack::Error::InvalidTag {
            tag: "a,b".into(),
            reason: "contains ','",
        });
        assert_eq!(before_any_call.reason(), "OpenStackError");
    }
}
