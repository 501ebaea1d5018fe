//! Which answers are worth another try, and how long to wait before it. `classify` is a pure function of
//! what came back, the method and the op, so the whole policy is unit-tested without a server.

use std::time::Duration;

use reqwest::Method;
use serde::Deserialize;

/// What went wrong, from the status and the error body (Neutron's `type`, Octavia's `faultstring`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ErrorKind {
    BadRequest,
    Unauthorized,
    Forbidden,
    NotFound,
    /// 409 that another try will not fix (duplicate, segmentation id in use, in-use object).
    Conflict,
    /// 409 from IPAM racing another allocation (`IpAddressAlreadyAllocated`, `IpAddressGenerationFailure`).
    IpamConflict,
    /// 409 because an Octavia object is PENDING_* ("immutable and cannot be updated").
    Pending,
    /// Neutron 409 `OverQuota`, Octavia 403 "Quota has been met".
    OverQuota,
    TooManyRequests,
    /// 413 for the request's size (oslo.middleware's `max_request_body_size`, 112 KiB by default): the same
    /// request will be refused again; it has to be split.
    RequestTooLarge,
    ServerError,
    /// 501: the provider or driver does not support what was asked.
    NotImplemented,
    Other,
}

impl ErrorKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::BadRequest => "bad_request",
            ErrorKind::Unauthorized => "unauthorized",
            ErrorKind::Forbidden => "forbidden",
            ErrorKind::NotFound => "not_found",
            ErrorKind::Conflict => "conflict",
            ErrorKind::IpamConflict => "ipam_conflict",
            ErrorKind::Pending => "pending",
            ErrorKind::OverQuota => "over_quota",
            ErrorKind::TooManyRequests => "too_many_requests",
            ErrorKind::RequestTooLarge => "request_too_large",
            ErrorKind::ServerError => "server_error",
            ErrorKind::NotImplemented => "not_implemented",
            ErrorKind::Other => "other",
        }
    }
}

/// How a request ended before any decision.
#[derive(Debug, Clone, Copy)]
pub enum Outcome<'a> {
    Response { status: u16, body: &'a [u8] },
    Transport(TransportKind),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransportKind {
    /// Never reached the server: always safe to repeat.
    Connect,
    /// Sent, but no (complete) answer in time.
    Timeout,
    /// Anything else (connection reset mid-body, invalid response).
    Other,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Success (2xx, or 404 on DELETE: already gone).
    Done,
    /// The token was refused: re-authenticate, then try again once.
    Reauth,
    Retry(RetryReason),
    Fail(ErrorKind),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RetryReason {
    IpamConflict,
    Pending,
    OverQuota,
    TooManyRequests,
    ServerError,
    Connect,
    Timeout,
}

impl RetryReason {
    pub fn as_str(self) -> &'static str {
        match self {
            RetryReason::IpamConflict => "ipam_conflict",
            RetryReason::Pending => "pending",
            RetryReason::OverQuota => "over_quota",
            RetryReason::TooManyRequests => "too_many_requests",
            RetryReason::ServerError => "server_error",
            RetryReason::Connect => "connect",
            RetryReason::Timeout => "timeout",
        }
    }
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct NeutronErrorBody {
    #[serde(rename = "NeutronError")]
    neutron: Option<NeutronError>,
    faultstring: Option<String>,
    description: Option<String>,
    error: Option<KeystoneError>,
    message: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct NeutronError {
    #[serde(rename = "type")]
    kind: String,
    message: String,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct KeystoneError {
    message: String,
}

/// The server's error class and message from any of the three services' error bodies.
pub fn parse_error_body(body: &[u8]) -> (String, String) {
    match serde_json::from_slice::<NeutronErrorBody>(body) {
        Ok(b) => {
            if let Some(n) = b.neutron {
                return (n.kind, n.message);
            }
            let msg = b
                .faultstring
                .or(b.description)
                .or(b.error.map(|e| e.message))
                .or(b.message)
                .unwrap_or_default();
            (String::new(), msg)
        }
        Err(_) => (
            String::new(),
            String::from_utf8_lossy(&body[..body.len().min(512)])
                .trim()
                .to_owned(),
        ),
    }
}

/// Classifies an error status and body.
pub fn error_kind(status: u16, body: &[u8]) -> ErrorKind {
    let (code, message) = parse_error_body(body);
    match status {
        400 => ErrorKind::BadRequest,
        401 => ErrorKind::Unauthorized,
        403 if message.contains("Quota has been met") => ErrorKind::OverQuota,
        403 => ErrorKind::Forbidden,
        404 => ErrorKind::NotFound,
        409 => match code.as_str() {
            "OverQuota" => ErrorKind::OverQuota,
            // Not IpAddressInUse: a fixed IP that is taken stays taken.
            ADDRESS_RACE | "IpAddressGenerationFailure" => ErrorKind::IpamConflict,
            _ if message.contains("immutable") || message.contains("PENDING_") => ErrorKind::Pending,
            _ => ErrorKind::Conflict,
        },
        // Older Neutron answered quota errors with 413 OverLimit; any other 413 is the body-size limit.
        413 if code == "OverQuota"
            || code == "OverLimit"
            || message.to_ascii_lowercase().contains("quota") =>
        {
            ErrorKind::OverQuota
        }
        413 => ErrorKind::RequestTooLarge,
        429 => ErrorKind::TooManyRequests,
        501 => ErrorKind::NotImplemented,
        500..=599 => ErrorKind::ServerError,
        _ => ErrorKind::Other,
    }
}

/// A 409 body saying an address given to the request was taken by a create beside it (not that the
/// subnet has none left: `IpAddressGenerationFailure`).
pub fn is_address_race(body: &[u8]) -> bool {
    parse_error_body(body).0 == ADDRESS_RACE
}

/// Neutron's error type of [`is_address_race`].
pub const ADDRESS_RACE: &str = "IpAddressAlreadyAllocated";

/// Op-name suffix of port creates that ask for specific addresses: for them `IpAddressAlreadyAllocated`
/// means the address is taken (real Neutron answers both cases with the same 409), not an IPAM race.
pub const WITH_FIXED_IP: &str = "_with_ip";

/// The retry policy. `op` carries the per-op exceptions (see [`WITH_FIXED_IP`]).
pub fn classify(outcome: Outcome<'_>, method: &Method, op: &str) -> Decision {
    match outcome {
        Outcome::Transport(TransportKind::Connect) => Decision::Retry(RetryReason::Connect),
        Outcome::Transport(TransportKind::Timeout) => Decision::Retry(RetryReason::Timeout),
        Outcome::Transport(TransportKind::Other) => Decision::Fail(ErrorKind::Other),
        Outcome::Response { status, .. } if (200..300).contains(&status) => Decision::Done,
        Outcome::Response { status: 404, .. } if *method == Method::DELETE => Decision::Done,
        Outcome::Response { status: 401, .. } => Decision::Reauth,
        Outcome::Response { status, body } => match error_kind(status, body) {
            ErrorKind::IpamConflict if op.ends_with(WITH_FIXED_IP) => Decision::Fail(ErrorKind::Conflict),
            ErrorKind::IpamConflict => Decision::Retry(RetryReason::IpamConflict),
            ErrorKind::Pending => Decision::Retry(RetryReason::Pending),
            ErrorKind::OverQuota => Decision::Retry(RetryReason::OverQuota),
            ErrorKind::TooManyRequests => Decision::Retry(RetryReason::TooManyRequests),
            ErrorKind::ServerError => Decision::Retry(RetryReason::ServerError),
            kind => Decision::Fail(kind),
        },
    }
}

/// Attempts and jittered exponential backoff.
#[derive(Debug, Clone)]
pub struct RetryPolicy {
    /// Total tries for one call, the first included.
    pub max_attempts: u32,
    /// Tries for OverQuota, which only frees up when something else is deleted.
    pub over_quota_attempts: u32,
    pub base_delay: Duration,
    pub max_delay: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_attempts: 6,
            over_quota_attempts: 3,
            base_delay: Duration::from_millis(100),
            max_delay: Duration::from_secs(10),
        }
    }
}

impl RetryPolicy {
    /// No retries at all (tests that want to see the first answer).
    pub fn none() -> Self {
        Self {
            max_attempts: 1,
            over_quota_attempts: 1,
            ..Self::default()
        }
    }

    /// Whether attempt number `attempt` (1-based, just failed for `reason`) may be followed by another.
    pub fn allows_another(&self, reason: RetryReason, attempt: u32) -> bool {
        let cap = match reason {
            RetryReason::OverQuota => self.over_quota_attempts.min(self.max_attempts),
            _ => self.max_attempts,
        };
        attempt < cap
    }

    /// Upper bound of the delay after failed attempt `attempt` (1-based): base * 2^(attempt-1), capped.
    pub fn ceiling(&self, attempt: u32) -> Duration {
        let exp = attempt.saturating_sub(1).min(20);
        self.base_delay.saturating_mul(1u32 << exp).min(self.max_delay)
    }

    /// "Equal jitter": half the ceiling plus a random half, so retries of many callers spread out but
    /// never collapse to zero. `unit` is a uniform draw in [0, 1).
    pub fn delay(&self, attempt: u32, unit: f64) -> Duration {
        let c = self.ceiling(attempt);
        c / 2 + c.mul_f64(unit.clamp(0.0, 1.0) / 2.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resp(status: u16, body: &str) -> Outcome<'_> {
        Outcome::Response {
            status,
            body: body.as_bytes(),
        }
    }

    fn neutron(kind: &str) -> String {
        format!(r#"{{"NeutronError": {{"type": "{kind}", "message": "m", "detail": ""}}}}"#)
    }

    #[test]
    fn success_and_delete_of_missing_object_are_done() {
        assert_eq!(classify(resp(200, ""), &Method::GET, "x"), Decision::Done);
        assert_eq!(classify(resp(204, ""), &Method::DELETE, "x"), Decision::Done);
        assert_eq!(
            classify(
                resp(404, &neutron("PortNotFound")),
                &Method::DELETE,
                "neutron.ports.delete"
            ),
            Decision::Done
        );
        assert_eq!(
            classify(
                resp(404, &neutron("PortNotFound")),
                &Method::GET,
                "neutron.ports.show"
            ),
            Decision::Fail(ErrorKind::NotFound)
        );
    }

    #[test]
    fn ipam_and_quota_conflicts_are_retried_other_conflicts_are_not() {
        for kind in ["IpAddressAlreadyAllocated", "IpAddressGenerationFailure"] {
            assert_eq!(
                classify(resp(409, &neutron(kind)), &Method::POST, "neutron.ports.create"),
                Decision::Retry(RetryReason::IpamConflict)
            );
        }
        assert_eq!(
            classify(
                resp(409, &neutron("OverQuota")),
                &Method::POST,
                "neutron.ports.create"
            ),
            Decision::Retry(RetryReason::OverQuota)
        );
        // The same 409 for an address the caller asked for is final.
        assert_eq!(
            classify(
                resp(409, &neutron("IpAddressAlreadyAllocated")),
                &Method::POST,
                "neutron.ports.create_with_ip"
            ),
            Decision::Fail(ErrorKind::Conflict)
        );
        assert_eq!(
            classify(resp(409, &neutron("SubPortBindingError")), &Method::PUT, "x"),
            Decision::Fail(ErrorKind::Conflict)
        );
    }

    #[test]
    fn octavia_pending_and_quota() {
        let pending = r#"{"faultcode": "Client", "faultstring": "Load Balancer 1 is immutable and cannot be updated.", "debuginfo": null}"#;
        assert_eq!(
            classify(resp(409, pending), &Method::PUT, "octavia.members.batch_update"),
            Decision::Retry(RetryReason::Pending)
        );
        let quota = r#"{"faultcode": "Client", "faultstring": "Quota has been met for resources: Load Balancer", "debuginfo": null}"#;
        assert_eq!(
            classify(resp(403, quota), &Method::POST, "octavia.loadbalancers.create"),
            Decision::Retry(RetryReason::OverQuota)
        );
        assert_eq!(
            classify(
                resp(403, r#"{"faultstring": "Policy does not allow"}"#),
                &Method::POST,
                "x"
            ),
            Decision::Fail(ErrorKind::Forbidden)
        );
    }

    #[test]
    fn bad_request_is_never_retried_whatever_the_method() {
        for m in [Method::GET, Method::POST, Method::PUT, Method::DELETE] {
            assert_eq!(
                classify(resp(400, &neutron("InvalidInput")), &m, "x"),
                Decision::Fail(ErrorKind::BadRequest)
            );
        }
    }

    #[test]
    fn server_errors_throttling_and_transport_are_retried() {
        for s in [500, 502, 503, 504] {
            assert_eq!(
                classify(resp(s, "oops"), &Method::POST, "x"),
                Decision::Retry(RetryReason::ServerError)
            );
        }
        assert_eq!(
            classify(resp(501, "{}"), &Method::POST, "x"),
            Decision::Fail(ErrorKind::NotImplemented)
        );
        assert_eq!(
            classify(resp(429, ""), &Method::GET, "x"),
            Decision::Retry(RetryReason::TooManyRequests)
        );
        assert_eq!(
            classify(Outcome::Transport(TransportKind::Connect), &Method::POST, "x"),
            Decision::Retry(RetryReason::Connect)
        );
        assert_eq!(
            classify(Outcome::Transport(TransportKind::Timeout), &Method::GET, "x"),
            Decision::Retry(RetryReason::Timeout)
        );
        assert_eq!(
            classify(Outcome::Transport(TransportKind::Other), &Method::GET, "x"),
            Decision::Fail(ErrorKind::Other)
        );
    }

    #[test]
    fn a_request_over_the_body_size_limit_is_refused_for_good_and_an_old_quota_413_is_still_a_quota() {
        // oslo.middleware's sizelimit (Octavia and Neutron): no error class, a plain text/HTML body.
        let too_large =
            b"<html><body><h1>413 Request Entity Too Large</h1>Request is too large.</body></html>";
        assert_eq!(error_kind(413, too_large), ErrorKind::RequestTooLarge);
        assert_eq!(
            classify(
                Outcome::Response {
                    status: 413,
                    body: too_large
                },
                &Method::POST,
                "octavia.loadbalancers.create"
            ),
            Decision::Fail(ErrorKind::RequestTooLarge)
        );
        let over_limit = br#"{"NeutronError": {"type": "OverLimit", "message": "Quota exceeded for resources: ['port']."}}"#;
        assert_eq!(error_kind(413, over_limit), ErrorKind::OverQuota);
    }

    #[test]
    fn unauthorized_asks_for_reauth() {
        let ks = r#"{"error": {"code": 401, "message": "The request you have made requires authentication.", "title": "Unauthorized"}}"#;
        assert_eq!(classify(resp(401, ks), &Method::GET, "x"), Decision::Reauth);
    }

    #[test]
    fn error_bodies_of_each_service_parse() {
        assert_eq!(
            parse_error_body(neutron("OverQuota").as_bytes()),
            ("OverQuota".to_owned(), "m".to_owned())
        );
        assert_eq!(
            parse_error_body(br#"{"faultcode": "Client", "faultstring": "nope", "debuginfo": null}"#).1,
            "nope"
        );
        assert_eq!(
            parse_error_body(br#"{"error": {"code": 404, "message": "gone"}}"#).1,
            "gone"
        );
        assert_eq!(parse_error_body(b"<html>502</html>").1, "<html>502</html>");
    }

    #[test]
    fn backoff_grows_caps_and_jitters_within_bounds() {
        let p = RetryPolicy {
            base_delay: Duration::from_millis(100),
            max_delay: Duration::from_secs(1),
            ..RetryPolicy::default()
        };
        assert_eq!(p.ceiling(1), Duration::from_millis(100));
        assert_eq!(p.ceiling(3), Duration::from_millis(400));
        assert_eq!(p.ceiling(10), Duration::from_secs(1));
        assert_eq!(p.delay(3, 0.0), Duration::from_millis(200));
        assert_eq!(p.delay(3, 1.0), Duration::from_millis(400));
        let mid = p.delay(3, 0.5);
        assert!(mid > Duration::from_millis(200) && mid < Duration::from_millis(400));
    }

    #[test]
    fn attempt_budgets() {
        let p = RetryPolicy::default();
        assert!(p.allows_another(RetryReason::ServerError, 5));
        assert!(!p.allows_another(RetryReason::ServerError, 6));
        assert!(p.allows_another(RetryReason::OverQuota, 2));
        assert!(!p.allows_another(RetryReason::OverQuota, 3));
        assert!(!RetryPolicy::none().allows_another(RetryReason::Connect, 1));
    }
}
