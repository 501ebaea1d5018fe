//! `/livez`, `/readyz` (caches synced) and `/metrics`.

use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use axum::Router;
use prometheus_client::registry::Registry;

use super::NodeCache;

#[derive(Clone)]
struct AdminState {
    cache: Arc<NodeCache>,
    registry: Arc<Registry>,
}

pub fn router(cache: Arc<NodeCache>, registry: Registry) -> Router {
    Router::new()
        .route("/livez", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .with_state(AdminState {
            cache,
            registry: Arc::new(registry),
        })
}

async fn readyz(State(s): State<AdminState>) -> (StatusCode, &'static str) {
    if s.cache.is_synced() {
        (StatusCode::OK, "ok")
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "caches not synced")
    }
}

async fn metrics(State(s): State<AdminState>) -> (StatusCode, String) {
    let mut out = String::new();
    match prometheus_client::encoding::text::encode(&mut out, &s.registry) {
        Ok(()) => (StatusCode::OK, out),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
}
