//! Keystone v3: version documents, token issue (password, token, application_credential) and
//! validation, and the catalog naming the emulator's own Neutron and Octavia endpoints.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use chrono::Utc;
use serde_json::{json, Value};

use crate::errors::{ApiError, ApiResult};
use crate::profile::{KeystoneProfile, KeystoneUser};
use crate::state::{lock, Ctx, Shared};
use crate::tokens::Token;
use crate::util::{keystone_time, new_hex_id};

fn ks_err(status: StatusCode, msg: &str) -> ApiError {
    ApiError::keystone(status, msg)
}

fn version_doc(base: &str) -> Value {
    json!({
        "id": "v3.14",
        "status": "stable",
        "updated": "2020-04-07T00:00:00Z",
        "links": [{"rel": "self", "href": format!("{base}/v3/")}],
        "media-types": [{"base": "application/json", "type": "application/vnd.openstack.identity-v3+json"}],
    })
}

fn identity_base(ctx: &Ctx, p: &KeystoneProfile) -> String {
    p.public_url.clone().unwrap_or_else(|| ctx.base_url.clone())
}

/// `GET /` and `GET /identity`: Keystone's multiple-choice version list.
pub async fn versions(State(sh): State<Arc<Shared>>, Extension(ctx): Extension<Ctx>) -> Response {
    let base = identity_base(&ctx, &sh.profile().keystone);
    (
        StatusCode::MULTIPLE_CHOICES,
        Json(json!({"versions": {"values": [version_doc(&base)]}})),
    )
        .into_response()
}

/// `GET /v3`.
pub async fn v3(State(sh): State<Arc<Shared>>, Extension(ctx): Extension<Ctx>) -> Response {
    let base = identity_base(&ctx, &sh.profile().keystone);
    Json(json!({"version": version_doc(&base)})).into_response()
}

fn find_user<'a>(p: &'a KeystoneProfile, ident: &Value) -> Option<&'a KeystoneUser> {
    let user = ident.get("user")?;
    if let Some(id) = user.get("id").and_then(Value::as_str) {
        return p.users.iter().find(|u| u.id == id);
    }
    let name = user.get("name").and_then(Value::as_str)?;
    let domain = user
        .get("domain")
        .and_then(|d| d.get("name").or_else(|| d.get("id")))
        .and_then(Value::as_str)
        .unwrap_or("Default");
    p.users
        .iter()
        .find(|u| u.name == name && u.domain.eq_ignore_ascii_case(domain))
}

/// The scope's project (by id, or by name + domain), or the user's own project when unscoped.
fn resolve_project(
    p: &KeystoneProfile,
    scope: Option<&Value>,
    user: &KeystoneUser,
) -> ApiResult<(String, String)> {
    let by_name = |name: &str| p.projects.iter().find(|pr| pr.name == name);
    let project = match scope.and_then(|s| s.get("project")) {
        Some(pr) => if let Some(id) = pr.get("id").and_then(Value::as_str) {
            p.projects.iter().find(|x| x.id == id)
        } else {
            pr.get("name").and_then(Value::as_str).and_then(by_name)
        }
        .ok_or_else(|| {
            ks_err(
                StatusCode::UNAUTHORIZED,
                "The request you have made requires authentication.",
            )
        })?,
        None => by_name(&user.project).ok_or_else(|| {
            ks_err(
                StatusCode::UNAUTHORIZED,
                "The request you have made requires authentication.",
            )
        })?,
    };
    if project.name != user.project && !user.roles.iter().any(|r| r == "admin") {
        return Err(ks_err(
            StatusCode::UNAUTHORIZED,
            "The request you have made requires authentication.",
        ));
    }
    Ok((project.id.clone(), project.name.clone()))
}

/// `POST /v3/auth/tokens`.
pub async fn issue(
    State(sh): State<Arc<Shared>>,
    Extension(ctx): Extension<Ctx>,
    body: Bytes,
) -> ApiResult<Response> {
    let profile = sh.profile();
    let kp = &profile.keystone;
    let body: Value = serde_json::from_slice(&body).map_err(|e| {
        ks_err(
            StatusCode::BAD_REQUEST,
            &format!("Invalid input for field 'auth': {e}"),
        )
    })?;
    let auth = body
        .get("auth")
        .ok_or_else(|| ks_err(StatusCode::BAD_REQUEST, "'auth' is a required property"))?;
    let identity = auth
        .get("identity")
        .ok_or_else(|| ks_err(StatusCode::BAD_REQUEST, "'identity' is a required property"))?;
    let methods: Vec<String> = identity
        .get("methods")
        .and_then(Value::as_array)
        .map(|m| m.iter().filter_map(Value::as_str).map(str::to_owned).collect())
        .unwrap_or_default();
    let unauthorized = || ApiError::unauthorized();
    let scope = auth.get("scope");

    let (user, project, app_cred, expires_cap) = match methods.first().map(String::as_str) {
        Some("password") => {
            let pw = identity.get("password").ok_or_else(unauthorized)?;
            let user = find_user(kp, pw).ok_or_else(unauthorized)?;
            let given = pw
                .get("user")
                .and_then(|u| u.get("password"))
                .and_then(Value::as_str);
            if given != Some(user.password.as_str()) {
                return Err(unauthorized());
            }
            let project = resolve_project(kp, scope, user)?;
            (user.clone(), project, None, None)
        }
        Some("token") => {
            let id = identity
                .get("token")
                .and_then(|t| t.get("id"))
                .and_then(Value::as_str)
                .ok_or_else(unauthorized)?;
            let old = lock(&sh.tokens).valid(id).cloned().ok_or_else(unauthorized)?;
            let user = kp
                .users
                .iter()
                .find(|u| u.id == old.user_id)
                .ok_or_else(unauthorized)?;
            let project = match scope {
                Some(_) => resolve_project(kp, scope, user)?,
                None => (old.project_id.clone(), old.project_name.clone()),
            };
            // A token made from a token never outlives the original.
            (user.clone(), project, old.app_cred.clone(), Some(old.expires_at))
        }
        Some("application_credential") => {
            let ac = identity.get("application_credential").ok_or_else(unauthorized)?;
            let secret = ac.get("secret").and_then(Value::as_str);
            let cred = if let Some(id) = ac.get("id").and_then(Value::as_str) {
                kp.application_credentials.iter().find(|c| c.id == id)
            } else {
                let name = ac.get("name").and_then(Value::as_str);
                kp.application_credentials
                    .iter()
                    .find(|c| Some(c.name.as_str()) == name)
            }
            .ok_or_else(unauthorized)?;
            if secret != Some(cred.secret.as_str()) {
                return Err(unauthorized());
            }
            if scope.is_some() {
                return Err(ks_err(
                    StatusCode::UNAUTHORIZED,
                    "Application credentials cannot request a scope.",
                ));
            }
            let user = kp
                .users
                .iter()
                .find(|u| u.name == cred.user)
                .ok_or_else(unauthorized)?;
            let project = resolve_project(kp, None, user)?;
            (user.clone(), project, Some(cred.id.clone()), None)
        }
        _ => {
            return Err(ks_err(
                StatusCode::UNAUTHORIZED,
                "Unsupported authentication method.",
            ))
        }
    };

    let now = Utc::now();
    let mut expires = now + chrono::Duration::seconds(i64::try_from(kp.token_ttl_s).unwrap_or(i64::MAX / 2));
    if let Some(cap) = expires_cap {
        expires = expires.min(cap);
    }
    let token = Token {
        user_id: user.id.clone(),
        user_name: user.name.clone(),
        project_id: project.0,
        project_name: project.1,
        roles: user.roles.clone(),
        methods: methods.clone(),
        issued_at: now,
        expires_at: expires,
        audit_id: new_hex_id()[..22].to_owned(),
        app_cred,
    };
    let id = format!("gAAAAA{}", new_hex_id());
    let body = token_body(&token, kp, &identity_base(&ctx, kp), true);
    lock(&sh.tokens).insert(id.clone(), token);
    let mut resp = (StatusCode::CREATED, Json(body)).into_response();
    if let Ok(v) = HeaderValue::from_str(&id) {
        resp.headers_mut().insert("x-subject-token", v);
    }
    Ok(resp)
}

fn token_body(t: &Token, kp: &KeystoneProfile, base: &str, with_catalog: bool) -> Value {
    let domain = json!({"id": "default", "name": "Default"});
    let roles: Vec<Value> = t
        .roles
        .iter()
        .enumerate()
        .map(|(i, r)| json!({"id": format!("{:032x}", i + 1), "name": r}))
        .collect();
    let mut token = json!({
        "methods": t.methods,
        "user": {"domain": domain, "id": t.user_id, "name": t.user_name, "password_expires_at": null},
        "audit_ids": [t.audit_id],
        "expires_at": keystone_time(t.expires_at),
        "issued_at": keystone_time(t.issued_at),
        "project": {"domain": domain, "id": t.project_id, "name": t.project_name},
        "is_domain": false,
        "roles": roles,
    });
    if let Some(ac) = &t.app_cred {
        token["application_credential"] = json!({"id": ac, "restricted": true});
    }
    if with_catalog {
        token["catalog"] = catalog(kp, base);
    }
    json!({"token": token})
}

fn catalog(kp: &KeystoneProfile, base: &str) -> Value {
    let entry = |ty: &str, name: &str, path: &str, n: u8| {
        let endpoints: Vec<Value> = ["public", "internal", "admin"]
            .iter()
            .enumerate()
            .map(|(i, iface)| {
                json!({
                    "id": format!("{:030x}{n:01x}{i:01x}", 0xe),
                    "interface": iface,
                    "region_id": kp.region,
                    "region": kp.region,
                    "url": format!("{base}{path}"),
                })
            })
            .collect();
        json!({"endpoints": endpoints, "id": format!("{:031x}{n:01x}", 0xc), "type": ty, "name": name})
    };
    json!([
        entry("identity", "keystone", "/identity", 1),
        entry("network", "neutron", "/networking", 2),
        entry("load-balancer", "octavia", "/load-balancer", 3),
    ])
}

fn subject(headers: &HeaderMap) -> Option<&str> {
    headers.get("x-subject-token").and_then(|v| v.to_str().ok())
}

/// `GET /v3/auth/tokens`: validate `X-Subject-Token` (the caller's own `X-Auth-Token` was checked by
/// the pipeline).
pub async fn validate(
    State(sh): State<Arc<Shared>>,
    Extension(ctx): Extension<Ctx>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    let id = subject(&headers).ok_or_else(|| ks_err(StatusCode::NOT_FOUND, "Could not find token: ."))?;
    let t = lock(&sh.tokens)
        .valid(id)
        .cloned()
        .ok_or_else(|| ks_err(StatusCode::NOT_FOUND, &format!("Could not find token: {id}.")))?;
    let kp = sh.profile().keystone.clone();
    let mut resp = Json(token_body(&t, &kp, &identity_base(&ctx, &kp), true)).into_response();
    if let Ok(v) = HeaderValue::from_str(id) {
        resp.headers_mut().insert("x-subject-token", v);
    }
    Ok(resp)
}

/// `HEAD /v3/auth/tokens`.
pub async fn check(State(sh): State<Arc<Shared>>, headers: HeaderMap) -> StatusCode {
    match subject(&headers).and_then(|id| lock(&sh.tokens).valid(id).map(|_| ())) {
        Some(()) => StatusCode::OK,
        None => StatusCode::NOT_FOUND,
    }
}

/// `DELETE /v3/auth/tokens`: revoke.
pub async fn revoke(State(sh): State<Arc<Shared>>, headers: HeaderMap) -> ApiResult<StatusCode> {
    let id = subject(&headers).ok_or_else(|| ks_err(StatusCode::NOT_FOUND, "Could not find token: ."))?;
    match lock(&sh.tokens).remove(id) {
        Some(_) => Ok(StatusCode::NO_CONTENT),
        None => Err(ks_err(
            StatusCode::NOT_FOUND,
            &format!("Could not find token: {id}."),
        )),
    }
}
