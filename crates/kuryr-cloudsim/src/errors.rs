//! API errors shaped like the real services' bodies, so clients exercise their real error parsing.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::json;

/// Which service's error body to render.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Service {
    Keystone,
    Neutron,
    Octavia,
    Sim,
}

/// One failed request. `kind` is the Neutron exception class name (`PortNotFound`, `OverQuota`, ...);
/// Octavia and Keystone bodies carry only the message.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{status} {kind}: {message}")]
pub struct ApiError {
    pub service: Service,
    pub status: StatusCode,
    pub kind: String,
    pub message: String,
}

pub type ApiResult<T> = Result<T, ApiError>;

impl ApiError {
    pub fn new(
        service: Service,
        status: StatusCode,
        kind: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        Self {
            service,
            status,
            kind: kind.into(),
            message: message.into(),
        }
    }

    // === Neutron ===

    pub fn neutron(status: StatusCode, kind: &str, message: impl Into<String>) -> Self {
        Self::new(Service::Neutron, status, kind, message)
    }

    pub fn not_found(kind: &str, message: impl Into<String>) -> Self {
        Self::neutron(StatusCode::NOT_FOUND, kind, message)
    }

    pub fn conflict(kind: &str, message: impl Into<String>) -> Self {
        Self::neutron(StatusCode::CONFLICT, kind, message)
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::neutron(StatusCode::BAD_REQUEST, "HTTPBadRequest", message)
    }

    pub fn invalid_input(message: impl std::fmt::Display) -> Self {
        Self::neutron(
            StatusCode::BAD_REQUEST,
            "InvalidInput",
            format!("Invalid input for operation: {message}."),
        )
    }

    pub fn over_quota(resource: &str) -> Self {
        Self::conflict(
            "OverQuota",
            format!("Quota exceeded for resources: ['{resource}']."),
        )
    }

    // === Octavia ===

    pub fn octavia(status: StatusCode, message: impl Into<String>) -> Self {
        Self::new(Service::Octavia, status, "", message)
    }

    pub fn oct_not_found(resource: &str, id: &str) -> Self {
        Self::octavia(StatusCode::NOT_FOUND, format!("{resource} {id} not found."))
    }

    pub fn oct_validation(detail: impl std::fmt::Display) -> Self {
        Self::octavia(StatusCode::BAD_REQUEST, format!("Validation failure: {detail}"))
    }

    pub fn immutable(resource: &str, id: &str) -> Self {
        Self::octavia(
            StatusCode::CONFLICT,
            format!("{resource} {id} is immutable and cannot be updated."),
        )
    }

    pub fn unsupported_option(provider: &str, msg: impl std::fmt::Display) -> Self {
        Self::octavia(
            StatusCode::NOT_IMPLEMENTED,
            format!("Provider '{provider}' does not support a requested option: {msg}"),
        )
    }

    // === Keystone (also what keystonemiddleware answers in front of Neutron and Octavia) ===

    pub fn unauthorized() -> Self {
        Self::new(
            Service::Keystone,
            StatusCode::UNAUTHORIZED,
            "Unauthorized",
            "The request you have made requires authentication.",
        )
    }

    pub fn keystone(status: StatusCode, message: impl Into<String>) -> Self {
        let title = status.canonical_reason().unwrap_or("Error");
        Self::new(Service::Keystone, status, title, message)
    }

    /// A Neutron error re-raised by Octavia (VIP port allocation): same status, Octavia body.
    pub fn into_octavia(self) -> Self {
        match self.service {
            Service::Neutron => Self::octavia(self.status, self.message),
            _ => self,
        }
    }

    /// The same error rendered in another service's shape (used for injected faults).
    pub fn for_service(mut self, service: Service) -> Self {
        self.service = service;
        self
    }

    pub fn body(&self) -> serde_json::Value {
        match self.service {
            Service::Neutron => json!({
                "NeutronError": {"type": self.kind, "message": self.message, "detail": ""}
            }),
            Service::Octavia => json!({
                "faultcode": if self.status.is_server_error() { "Server" } else { "Client" },
                "faultstring": self.message,
                "debuginfo": null,
            }),
            Service::Keystone => json!({
                "error": {"code": self.status.as_u16(), "message": self.message, "title": self.kind}
            }),
            Service::Sim => json!({"error": self.message}),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut resp = (self.status, axum::Json(self.body())).into_response();
        if self.status == StatusCode::UNAUTHORIZED {
            resp.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Keystone uri=\"/identity\""),
            );
        }
        resp
    }
}
