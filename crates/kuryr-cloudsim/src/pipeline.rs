//! What every emulated API call goes through: naming (op), authentication, fault injection,
//! latency (with the IPAM conflict roll for port creates), the handler, and the call log.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::{to_bytes, Body};
use axum::extract::{MatchedPath, Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde::de::IgnoredAny;
use serde::Deserialize;

use crate::calllog::Call;
use crate::errors::{ApiError, Service};
use crate::faults::FaultAction;
use crate::profile::AuthMode;
use crate::routes::OpTable;
use crate::state::{lock, Ctx, Shared};
use crate::util::log_time;

pub struct Pipeline {
    pub shared: Arc<Shared>,
    pub ops: OpTable,
}

/// Ops that need no token (as with keystonemiddleware: version documents and token issue).
const PUBLIC_OPS: &[&str] = &[
    "keystone.versions",
    "keystone.version",
    "keystone.tokens.issue",
    "neutron.versions",
    "octavia.versions",
];

/// Ops whose body is read before the handler: bulk detection and per-item latency.
const PEEKED: &[&str] = &[
    "neutron.ports.create",
    "neutron.security_group_rules.create",
    "octavia.members.batch_update",
    "octavia.loadbalancers.create",
];

const MAX_BODY: usize = 64 << 20;

#[derive(Deserialize, Default)]
#[serde(default)]
struct Probe {
    ports: Option<Vec<IgnoredAny>>,
    security_group_rules: Option<Vec<IgnoredAny>>,
    members: Option<Vec<IgnoredAny>>,
    loadbalancer: Option<LbProbe>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct LbProbe {
    provider: Option<String>,
}

pub fn service_of(op: &str, path: &str) -> Service {
    if op.starts_with("neutron.") {
        Service::Neutron
    } else if op.starts_with("octavia.") {
        Service::Octavia
    } else if op.starts_with("keystone.") {
        Service::Keystone
    } else if path.contains("/lbaas") || path.starts_with("/load-balancer") {
        Service::Octavia
    } else if path.contains("/v2.0") || path.starts_with("/networking") {
        Service::Neutron
    } else {
        Service::Keystone
    }
}

/// The error an injected fault answers with, in the service's shape.
fn fault_error(f: &FaultAction, service: Service) -> ApiError {
    let status = f
        .status
        .and_then(|s| StatusCode::from_u16(s).ok())
        .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let (kind, message) = match status.as_u16() {
        409 => ("Conflict", "A conflict was injected by the emulator."),
        429 => ("HTTPTooManyRequests", "Too many requests."),
        502 => ("HTTPBadGateway", "Bad gateway."),
        503 => (
            "HTTPServiceUnavailable",
            "The server is currently unavailable. Please try again at a later time.",
        ),
        504 => ("HTTPGatewayTimeout", "The gateway timed out."),
        _ => (
            "HTTPInternalServerError",
            "Request Failed: internal server error while processing your request.",
        ),
    };
    ApiError::new(
        service,
        status,
        f.kind.clone().unwrap_or_else(|| kind.to_owned()),
        f.message.clone().unwrap_or_else(|| message.to_owned()),
    )
}

/// Runs each call on its own task: like a real API server, work goes on when the client gives up
/// (timeouts must leave the port created, as they do against Neutron).
pub async fn run(State(p): State<Arc<Pipeline>>, req: Request, next: Next) -> Response {
    match tokio::spawn(handle(p, req, next)).await {
        Ok(r) => r,
        Err(e) => ApiError::new(
            Service::Sim,
            StatusCode::INTERNAL_SERVER_ERROR,
            "Panic",
            e.to_string(),
        )
        .into_response(),
    }
}

async fn handle(p: Arc<Pipeline>, req: Request, next: Next) -> Response {
    let start = Instant::now();
    let path = req.uri().path().to_owned();
    if path.starts_with("/_sim") {
        return next.run(req).await;
    }
    let sh = &p.shared;
    let ts = log_time();
    let method = req.method().clone();
    let path_q = req
        .uri()
        .path_and_query()
        .map_or_else(|| path.clone(), |pq| pq.as_str().to_owned());
    let pattern = req
        .extensions()
        .get::<MatchedPath>()
        .map(|m| m.as_str().to_owned());
    let mut op: &'static str = pattern
        .as_deref()
        .and_then(|pt| p.ops.op(&method, pt))
        .unwrap_or("unknown");
    let service = service_of(op, &path);
    let host = req
        .headers()
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("localhost")
        .to_owned();
    let profile = sh.profile();

    let log = |status: u16, items: Option<usize>, fault: Option<String>, op: &str| {
        lock(&sh.calls).push(Call {
            seq: 0,
            ts: ts.clone(),
            op: op.to_owned(),
            method: method.to_string(),
            path: path_q.clone(),
            status,
            latency_ms: start.elapsed().as_secs_f64() * 1000.0,
            items,
            fault,
        });
    };

    // oslo.middleware's sizelimit runs before anything else of the service: a body over its limit is 413.
    let limit = match service {
        Service::Neutron => profile.max_request_body.neutron,
        Service::Octavia => profile.max_request_body.octavia,
        _ => None,
    };
    if let Some(limit) = limit {
        let declared = req
            .headers()
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<usize>().ok());
        if declared.is_some_and(|n| n > limit) {
            log(413, None, None, op);
            return too_large().into_response();
        }
    }

    // Read bulk-capable bodies once to learn the item count (and name bulk calls apart).
    let (req, items, provider) = if PEEKED.contains(&op) {
        let (parts, body) = req.into_parts();
        let bytes = match to_bytes(body, MAX_BODY).await {
            Ok(b) => b,
            Err(e) => {
                log(400, None, None, op);
                return ApiError::new(
                    service,
                    StatusCode::BAD_REQUEST,
                    "HTTPBadRequest",
                    format!("Unreadable body: {e}"),
                )
                .into_response();
            }
        };
        let probe: Probe = serde_json::from_slice(&bytes).unwrap_or_default();
        let items = match op {
            "neutron.ports.create" => probe.ports.map(|v| {
                op = "neutron.ports.bulk_create";
                v.len()
            }),
            "neutron.security_group_rules.create" => probe.security_group_rules.map(|v| {
                op = "neutron.security_group_rules.bulk_create";
                v.len()
            }),
            "octavia.members.batch_update" => probe.members.map(|v| v.len()),
            _ => None,
        };
        (
            Request::from_parts(parts, Body::from(bytes)),
            items,
            probe.loadbalancer.and_then(|l| l.provider),
        )
    } else {
        (req, None, None)
    };

    // Authentication.
    let mut project = None;
    // noauth: Neutron's and Octavia's noauth context is an admin one.
    let mut admin = true;
    if !PUBLIC_OPS.contains(&op) {
        match profile.auth {
            AuthMode::Keystone => {
                let token = req.headers().get("x-auth-token").and_then(|v| v.to_str().ok());
                let found = token.and_then(|t| {
                    lock(&sh.tokens)
                        .valid(t)
                        .map(|t| (t.project_id.clone(), t.roles.iter().any(|r| r == "admin")))
                });
                match found {
                    Some((pr, is_admin)) => {
                        project = Some(pr);
                        admin = is_admin;
                    }
                    None => {
                        log(401, items, None, op);
                        return ApiError::unauthorized().into_response();
                    }
                }
            }
            AuthMode::Noauth => {
                project = req
                    .headers()
                    .get("x-project-id")
                    .or_else(|| req.headers().get("x-tenant-id"))
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_owned);
            }
        }
    }

    // Faults.
    let fault = if op == "unknown" {
        None
    } else {
        lock(&sh.faults).roll(op, &mut sh.rng())
    };
    if let Some(f) = &fault {
        if let Some(h) = f.hold_ms {
            tokio::time::sleep(Duration::from_millis(h)).await;
        }
        if f.status.is_some() && !f.execute {
            let err = fault_error(f, service);
            log(err.status.as_u16(), items, Some(f.describe()), op);
            return err.into_response();
        }
    }

    // The load model: counted in flight until the answer is out; slower, or refused, beyond the workers.
    let (_counted, in_flight) = match service {
        Service::Neutron | Service::Octavia => {
            let (c, n) = sh.in_flight.enter(service == Service::Neutron);
            (Some(c), n)
        }
        _ => (None, 0),
    };
    let load = match service {
        Service::Neutron => profile.load.neutron,
        Service::Octavia => profile.load.octavia,
        _ => None,
    };
    let slowdown = load.map_or(1.0, |m| m.slowdown(in_flight));
    let refused = load.is_some_and(|m| {
        let rate = m.error_rate(in_flight);
        rate > 0.0 && sh.rng().f64() < rate
    });

    // Latency, and the IPAM conflict roll that depends on how many port creates overlap.
    let port_create = op == "neutron.ports.create" || op == "neutron.ports.bulk_create";
    let delay_ms = profile
        .latency
        .lookup(op, provider.as_deref())
        .sample_ms(items.unwrap_or(1), &mut sh.rng());
    let delay = profile.scaled(delay_ms * slowdown);
    if refused {
        // The proxy gave up on the queue: the time was spent, nothing was done.
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        log(503, items, Some(format!("overload ({in_flight} in flight)")), op);
        return ApiError::new(
            service,
            StatusCode::SERVICE_UNAVAILABLE,
            "HTTPServiceUnavailable",
            "The server is currently unavailable. Please try again at a later time.",
        )
        .into_response();
    }
    let mut ipam_conflict = false;
    if port_create {
        let at_start = sh.port_creates_in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        let at_end = sh.port_creates_in_flight.fetch_sub(1, Ordering::SeqCst);
        let prob = profile
            .ipam_conflict
            .probability(at_start.max(at_end), items.unwrap_or(1));
        ipam_conflict = prob > 0.0 && sh.rng().f64() < prob;
    } else if !delay.is_zero() {
        tokio::time::sleep(delay).await;
    }

    let mut req = req;
    req.extensions_mut().insert(Ctx {
        op,
        project,
        admin,
        base_url: format!("http://{host}"),
        ipam_conflict,
    });
    let mut resp = next.run(req).await;

    let mut fault_desc = fault.as_ref().map(FaultAction::describe);
    if let Some(f) = fault.as_ref().filter(|f| f.execute && f.status.is_some()) {
        resp = fault_error(f, service).into_response();
    }
    if ipam_conflict {
        fault_desc =
            Some(fault_desc.map_or_else(|| "ipam_conflict".to_owned(), |d| format!("{d}, ipam_conflict")));
    }
    log(resp.status().as_u16(), items, fault_desc, op);
    resp
}

/// What webob's `HTTPRequestEntityTooLarge` answers a JSON client (oslo.middleware's sizelimit).
fn too_large() -> Response {
    let body = serde_json::json!({
        "code": "413 Request Entity Too Large",
        "title": "Request Entity Too Large",
        "message": "Request is too large.",
    });
    (StatusCode::PAYLOAD_TOO_LARGE, axum::Json(body)).into_response()
}

/// Unknown paths: 404 in the shape of the service the path looks like.
pub async fn fallback(req: Request) -> Response {
    let path = req.uri().path();
    let service = service_of("", path);
    let msg = "The resource could not be found.";
    match service {
        Service::Neutron => ApiError::not_found("HTTPNotFound", msg).into_response(),
        Service::Octavia => ApiError::octavia(StatusCode::NOT_FOUND, msg).into_response(),
        _ => ApiError::keystone(StatusCode::NOT_FOUND, msg).into_response(),
    }
}
