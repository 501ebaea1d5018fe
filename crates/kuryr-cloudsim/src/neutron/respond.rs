//! The shape of Neutron's answers: one object under its singular key. Apart from the handlers, so the
//! shared state ([`crate::state`]) can answer a show without importing them.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};

pub fn wrap(key: &str, v: Value) -> Value {
    json!({ key: v })
}

pub fn created(key: &str, v: Value) -> Response {
    (StatusCode::CREATED, Json(wrap(key, v))).into_response()
}

pub fn ok(key: &str, v: Value) -> Response {
    Json(wrap(key, v)).into_response()
}
