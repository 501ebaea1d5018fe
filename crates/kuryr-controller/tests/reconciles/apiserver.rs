//! A scripted Kubernetes API server for reconcile tests: the other end of a `tower-test` mock, in the style
//! of controller-rs. It keeps the objects the test puts in and the reconciles write, answers GET, POST,
//! PATCH (JSON patch with `test` ops, merge patch, server-side apply), DELETE (finalizers honoured), logs
//! every request, and fails requests the test scripts to fail.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use http::{Method, Request, Response, StatusCode};
use kube::client::Body;
use serde::Serialize;
use serde_json::{json, Value};

type Handle = tower_test::mock::Handle<Request<Body>, Response<Body>>;

/// One request as the server saw it.
#[derive(Clone, Debug)]
pub struct Seen {
    pub method: Method,
    pub path: String,
    pub body: Value,
}

/// A scripted failure: the next `times` requests with this method whose path contains `path` get `status`.
struct Fault {
    method: Method,
    path: String,
    status: u16,
    times: u32,
}

#[derive(Default)]
struct State {
    /// Object path (no `/status`) → object.
    objects: BTreeMap<String, Value>,
    seen: Vec<Seen>,
    faults: Vec<Fault>,
    version: u64,
}

#[derive(Clone, Default)]
pub struct ApiServer(Arc<Mutex<State>>);

/// A client whose every request this server answers.
pub fn client() -> (kube::Client, ApiServer) {
    let (service, handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    let server = ApiServer::default();
    tokio::spawn(server.clone().serve(handle));
    (kube::Client::new(service, "default"), server)
}

/// The path of a namespaced object of `plural` in `group_version` (`v1` for the core group).
pub fn path(group_version: &str, ns: &str, plural: &str, name: &str) -> String {
    let prefix = if group_version == "v1" {
        "/api/v1".to_owned()
    } else {
        format!("/apis/{group_version}")
    };
    format!("{prefix}/namespaces/{ns}/{plural}/{name}")
}

impl ApiServer {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Stores `obj` at `path`, with a uid and a resourceVersion if it has none.
    pub fn put<K: Serialize>(&self, path: &str, obj: &K) -> Value {
        let mut v = serde_json::to_value(obj).unwrap();
        let mut st = self.state();
        st.version += 1;
        let version = st.version;
        let meta = &mut v["metadata"];
        if meta.get("uid").is_none_or(Value::is_null) {
            meta["uid"] = json!(format!("uid-{version}"));
        }
        meta["resourceVersion"] = json!(version.to_string());
        st.objects.insert(path.to_owned(), v.clone());
        v
    }

    pub fn get(&self, path: &str) -> Option<Value> {
        self.state().objects.get(path).cloned()
    }

    /// Every request so far, oldest first.
    pub fn seen(&self) -> Vec<Seen> {
        self.state().seen.clone()
    }

    /// Requests with `method` whose path contains `path`.
    pub fn requests(&self, method: Method, path: &str) -> Vec<Seen> {
        self.seen()
            .into_iter()
            .filter(|s| s.method == method && s.path.contains(path))
            .collect()
    }

    /// Event reasons posted so far.
    pub fn event_reasons(&self) -> Vec<String> {
        self.requests(Method::POST, "/events")
            .iter()
            .filter_map(|s| s.body["reason"].as_str().map(str::to_owned))
            .collect()
    }

    /// The next `times` requests with `method` on a path containing `path` fail with `status`.
    pub fn fail(&self, method: Method, path: &str, status: u16, times: u32) {
        self.state().faults.push(Fault {
            method,
            path: path.to_owned(),
            status,
            times,
        });
    }

    async fn serve(self, mut handle: Handle) {
        while let Some((req, send)) = handle.next_request().await {
            let (parts, body) = req.into_parts();
            let bytes = body.collect_bytes().await.unwrap_or_default();
            let body: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
            let content_type = parts
                .headers
                .get(http::header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_owned();
            let query = parts.uri.query().unwrap_or_default().to_owned();
            let (status, answer) = self.answer(&parts.method, parts.uri.path(), &query, &content_type, body);
            let response = Response::builder()
                .status(status)
                .header(http::header::CONTENT_TYPE, "application/json")
                .body(Body::from(serde_json::to_vec(&answer).unwrap_or_default()))
                .unwrap();
            send.send_response(response);
        }
    }

    fn answer(
        &self,
        method: &Method,
        path: &str,
        query: &str,
        content_type: &str,
        body: Value,
    ) -> (StatusCode, Value) {
        let mut st = self.state();
        st.seen.push(Seen {
            method: method.clone(),
            path: path.to_owned(),
            body: body.clone(),
        });
        if let Some(f) = st
            .faults
            .iter_mut()
            .find(|f| f.times > 0 && f.method == *method && path.contains(&f.path))
        {
            f.times -= 1;
            return status(f.status, "scripted failure");
        }
        let (key, subresource) = match path.strip_suffix("/status") {
            Some(object) => (object.to_owned(), true),
            None => (path.to_owned(), false),
        };
        st.version += 1;
        let version = st.version.to_string();
        match *method {
            Method::GET => match st.objects.get(&key) {
                Some(v) => (StatusCode::OK, v.clone()),
                None => {
                    let items: Vec<Value> = st
                        .objects
                        .iter()
                        .filter(|(k, _)| k.rsplit_once('/').is_some_and(|(dir, _)| dir.ends_with(&key)))
                        .map(|(_, v)| v)
                        .filter(|v| selected(v, query))
                        .cloned()
                        .collect();
                    if items.is_empty() && !is_collection(&key) {
                        return status(404, "not found");
                    }
                    (
                        StatusCode::OK,
                        json!({"kind": "List", "apiVersion": "v1", "metadata": {"resourceVersion": version}, "items": items}),
                    )
                }
            },
            Method::POST => {
                let name = body["metadata"]["name"]
                    .as_str()
                    .unwrap_or("generated")
                    .to_owned();
                let key = format!("{key}/{name}");
                if st.objects.contains_key(&key) {
                    return status(409, "already exists");
                }
                let mut obj = body;
                if obj["metadata"].get("uid").is_none_or(Value::is_null) {
                    obj["metadata"]["uid"] = json!(format!("uid-{version}"));
                }
                obj["metadata"]["resourceVersion"] = json!(version);
                st.objects.insert(key, obj.clone());
                (StatusCode::CREATED, obj)
            }
            Method::PATCH => {
                let Some(current) = st.objects.get(&key).cloned() else {
                    return status(404, "not found");
                };
                let mut obj = current.clone();
                if content_type.contains("json-patch") {
                    // As the API server's JSON patch does, a `test` for null passes on an absent field.
                    let ops: Vec<Value> = body
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter(|op| {
                            let absent = op["path"].as_str().is_some_and(|p| obj.pointer(p).is_none());
                            !(op["op"] == "test" && op["value"].is_null() && absent)
                        })
                        .cloned()
                        .collect();
                    let Ok(patch) = serde_json::from_value::<json_patch::Patch>(Value::Array(ops)) else {
                        return status(400, "bad patch");
                    };
                    if json_patch::patch(&mut obj, &patch).is_err() {
                        return status(422, "the patch's test failed");
                    }
                } else {
                    json_patch::merge(&mut obj, &body);
                }
                if subresource {
                    // Only the status changes through /status.
                    let status_part = obj["status"].clone();
                    obj = current;
                    obj["status"] = status_part;
                }
                obj["metadata"]["resourceVersion"] = json!(version);
                st.objects.insert(key, obj.clone());
                (StatusCode::OK, obj)
            }
            Method::DELETE => {
                let Some(mut obj) = st.objects.get(&key).cloned() else {
                    return status(404, "not found");
                };
                let want_uid = &body["preconditions"]["uid"];
                if !want_uid.is_null() && *want_uid != obj["metadata"]["uid"] {
                    return status(409, "uid precondition failed");
                }
                let held = obj["metadata"]["finalizers"]
                    .as_array()
                    .is_some_and(|f| !f.is_empty());
                if held {
                    obj["metadata"]["deletionTimestamp"] = json!("2026-11-26T00:00:00Z");
                    obj["metadata"]["resourceVersion"] = json!(version);
                    st.objects.insert(key, obj.clone());
                } else {
                    st.objects.remove(&key);
                }
                (StatusCode::OK, obj)
            }
            _ => status(405, "method not allowed"),
        }
    }
}

/// A path naming a resource type rather than an object (`.../kuryrports`, `/api/v1/namespaces`).
fn is_collection(path: &str) -> bool {
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    // /api/v1/namespaces/ns/pods: 5 segments; /apis/g/v/namespaces/ns/plural: 6; cluster-scoped 3 and 4.
    matches!(
        (segments.first(), segments.len()),
        (Some(&"api"), 3 | 5) | (Some(&"apis"), 4 | 6)
    )
}

/// Whether `obj` matches a list's `labelSelector` and `fieldSelector` (equality terms, and
/// `metadata.name` / `metadata.namespace` fields: what the reconciles ask).
fn selected(obj: &Value, query: &str) -> bool {
    let decode = |v: &str| v.replace("%3D", "=").replace("%2C", ",").replace("%2F", "/");
    query
        .split('&')
        .filter_map(|kv| kv.split_once('='))
        .all(|(k, v)| {
            let v = decode(v);
            let terms = v.split(',').filter_map(|t| t.split_once('='));
            match k {
                "labelSelector" => terms
                    .into_iter()
                    .all(|(l, want)| obj["metadata"]["labels"][l].as_str() == Some(want)),
                "fieldSelector" => terms.into_iter().all(|(f, want)| {
                    let field = f.strip_prefix("metadata.").unwrap_or(f);
                    obj["metadata"][field].as_str() == Some(want)
                }),
                _ => true,
            }
        })
}

fn status(code: u16, message: &str) -> (StatusCode, Value) {
    let reason = match code {
        404 => "NotFound",
        409 => "Conflict",
        422 => "Invalid",
        _ => "InternalError",
    };
    (
        StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
               "message": message, "reason": reason, "code": code}),
    )
}
