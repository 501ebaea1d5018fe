//! The `Cloud` handle and the one path every call takes: the service's rate limiter, concurrency cap,
//! token, HTTP, metrics, retry classification, backoff.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use reqwest::header::{HeaderValue, ACCEPT, CONTENT_TYPE};
use reqwest::{Method, Url};
use secrecy::ExposeSecret;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;
use tokio::sync::OnceCell;
use tracing::{debug, warn, Instrument};

use crate::adaptive::{CallKind, Verdict};
use crate::auth::{Credentials, Endpoints, Session};
use crate::config::ClientConfig;
use crate::errors::{ApiFailure, Error, Result, Service};
use crate::gate::Gate;
use crate::metrics::{CallObserver, Metrics};
use crate::neutron::extensions::NeutronFeatures;
use crate::neutron::races::RaceRate;
use crate::octavia::features::OctaviaFeatures;
use crate::page::{self, Page};
use crate::retry::{self, classify, Decision, ErrorKind, Outcome, RetryPolicy, RetryReason, TransportKind};

/// A connection to one cloud (one project). Cheap to clone; clones share the token, the rate limiters (one
/// per service), the concurrency cap and the metrics.
#[derive(Clone)]
pub struct Cloud {
    inner: Arc<Inner>,
}

struct Inner {
    http: reqwest::Client,
    session: Session,
    gate: Arc<Gate>,
    retry: RetryPolicy,
    neutron_features: OnceCell<NeutronFeatures>,
    octavia_features: OnceCell<OctaviaFeatures>,
    /// clouds.yaml `verify: false`: certificates are not checked.
    insecure_tls: bool,
    max_request_body: usize,
    request_timeout: Duration,
    /// What bulk port creates have lately shown of address races (sizes their bodies).
    address_races: Mutex<RaceRate>,
}

impl std::fmt::Debug for Cloud {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cloud")
            .field("endpoints", &self.inner.session.snapshot().endpoints)
            .finish_non_exhaustive()
    }
}

/// One request, before it is sent.
#[derive(Debug, Clone)]
pub struct Request {
    pub service: Service,
    /// Stable op name for metrics and logs, e.g. `neutron.ports.bulk_create`.
    pub op: &'static str,
    pub method: Method,
    /// Relative to the service's versioned root, `/`-separated; each segment is percent-encoded.
    pub path: String,
    pub query: Vec<(String, String)>,
    pub body: Option<Value>,
    /// `If-Match` header (Neutron's `revision_number=N` compare-and-swap; 412 when it does not match).
    pub if_match: Option<String>,
    /// Sent to the service's unversioned root (its version document) instead of `path`.
    pub at_root: bool,
    /// A 409 `IpAddressAlreadyAllocated` (an address given to this body was taken by a create beside it)
    /// is answered to the caller at once instead of retried: a bulk create halves the body instead, so one
    /// racing address costs a retry of half the ports, not all of them.
    pub address_race_final: bool,
}

impl Request {
    pub fn new(service: Service, op: &'static str, method: Method, path: impl Into<String>) -> Self {
        Self {
            service,
            op,
            method,
            path: path.into(),
            query: Vec::new(),
            body: None,
            if_match: None,
            at_root: false,
            address_race_final: false,
        }
    }

    /// The service's version document: `GET` on its unversioned root, retried like any other call.
    pub fn version_document(service: Service, op: &'static str) -> Self {
        Self {
            at_root: true,
            ..Self::new(service, op, Method::GET, "")
        }
    }

    pub fn if_match(mut self, value: impl Into<String>) -> Self {
        self.if_match = Some(value.into());
        self
    }

    pub fn query(mut self, q: Vec<(String, String)>) -> Self {
        self.query = q;
        self
    }

    pub fn json(mut self, body: Value) -> Self {
        self.body = Some(body);
        self
    }

    /// See [`Request::address_race_final`].
    pub fn address_race_final(mut self) -> Self {
        self.address_race_final = true;
        self
    }
}

/// A successful answer.
#[derive(Debug, Clone)]
pub struct Response {
    pub status: u16,
    pub request_id: Option<String>,
    pub body: Vec<u8>,
}

impl Response {
    /// The body as JSON (`Null` when empty).
    pub fn json(&self, service: Service, op: &'static str) -> Result<Value> {
        if self.body.iter().all(u8::is_ascii_whitespace) {
            return Ok(Value::Null);
        }
        serde_json::from_slice(&self.body).map_err(|source| Error::Decode { service, op, source })
    }
}

/// Builds the full URL: versioned root + encoded path segments + query.
pub(crate) fn build_url(base: &Url, path: &str, query: &[(String, String)]) -> Url {
    let mut url = base.clone();
    if let Ok(mut segs) = url.path_segments_mut() {
        segs.pop_if_empty();
        segs.extend(path.split('/').filter(|s| !s.is_empty()));
    }
    if !query.is_empty() {
        let mut q = url.query_pairs_mut();
        for (k, v) in query {
            q.append_pair(k, v);
        }
    }
    url
}

impl Cloud {
    /// Authenticates (or resolves the noauth endpoints) and builds the HTTP client.
    pub async fn connect(config: ClientConfig) -> Result<Cloud> {
        Self::connect_with_observer(config, None).await
    }

    /// Same as `connect`, with an observer that sees every HTTP attempt (e.g. a Prometheus histogram).
    pub async fn connect_with_observer(
        config: ClientConfig,
        observer: Option<Arc<dyn CallObserver>>,
    ) -> Result<Cloud> {
        // Logins pass the same gate as every other call: rate-limited, capped, counted.
        let gate = Arc::new(Gate::new(config.rate_limit, config.concurrency, observer));
        let session = Session::open(&config.auth, config.token_renew_margin, gate.clone()).await?;
        let tls = crate::auth::Tls::of(&config.auth)?;
        let builder = tls.apply(reqwest::Client::builder())?;
        let http = builder
            .connect_timeout(config.connect_timeout)
            .timeout(config.request_timeout)
            .pool_idle_timeout(Duration::from_secs(30))
            .build()
            .map_err(|e| Error::Config(format!("HTTP client: {e}")))?;
        Ok(Cloud {
            inner: Arc::new(Inner {
                http,
                session,
                gate,
                retry: config.retry,
                neutron_features: OnceCell::new(),
                octavia_features: OnceCell::new(),
                insecure_tls: tls.insecure,
                max_request_body: config.max_request_body,
                request_timeout: config.request_timeout,
                address_races: Mutex::default(),
            }),
        })
    }

    /// The cloud's request body limit, in bytes: what bulk bodies are split to fit ([`crate::fit`]).
    pub fn max_request_body(&self) -> usize {
        self.inner.max_request_body
    }

    /// `f` on what bulk port creates have lately shown of address races.
    pub(crate) fn address_races<T>(&self, f: impl FnOnce(&mut RaceRate) -> T) -> T {
        f(&mut self.inner.address_races.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// How long one HTTP request may take: also how long a request whose client died may still be carried
    /// out by the cloud.
    pub fn request_timeout(&self) -> Duration {
        self.inner.request_timeout
    }

    /// The loud startup warning when certificate verification is off (clouds.yaml `verify: false`).
    pub fn tls_warning(&self) -> Option<String> {
        self.inner.insecure_tls.then(|| {
            format!(
                "INSECURE: TLS certificate verification is OFF for OpenStack ({}; clouds.yaml `verify: false`): \
                 anyone on the path can read the credentials and tokens; set `cacert` instead",
                self.endpoints().network
            )
        })
    }

    pub fn metrics(&self) -> &Arc<Metrics> {
        self.inner.gate.metrics()
    }

    /// The project the token is scoped to (or the noauth project).
    pub fn project_id(&self) -> Option<String> {
        self.inner.session.snapshot().project_id.clone()
    }

    pub fn endpoints(&self) -> Endpoints {
        self.inner.session.snapshot().endpoints.clone()
    }

    /// Current credentials (token expiry, generation) — for diagnostics and tests.
    pub fn credentials(&self) -> Arc<Credentials> {
        self.inner.session.snapshot()
    }

    /// Neutron extensions, discovered once per handle.
    pub async fn neutron_features(&self) -> Result<&NeutronFeatures> {
        self.inner
            .neutron_features
            .get_or_try_init(|| crate::neutron::extensions::discover(self))
            .await
    }

    /// Where [`Cloud::octavia_features`] keeps what it discovered.
    pub(crate) fn octavia_cache(&self) -> &OnceCell<OctaviaFeatures> {
        &self.inner.octavia_features
    }

    /// Sends a request with retries; `Ok` only for 2xx (and 404 on DELETE).
    pub async fn execute(&self, req: Request) -> Result<Response> {
        let span = tracing::debug_span!("openstack", op = req.op, method = %req.method);
        self.execute_inner(req).instrument(span).await
    }

    async fn execute_inner(&self, req: Request) -> Result<Response> {
        let inner = &*self.inner;
        let mut body_value = req.body.clone();
        if let (Some(b), Some(project)) = (&mut body_value, self.noauth_project()) {
            if req.method == Method::POST {
                fill_project_id(b, &project);
            }
        }
        let body = match &body_value {
            Some(v) => Some(serde_json::to_vec(v).map_err(|source| Error::Decode {
                service: req.service,
                op: req.op,
                source,
            })?),
            None => None,
        };
        if let Some(b) = body.as_ref().filter(|b| b.len() > inner.max_request_body) {
            return Err(crate::fit::too_large(
                req.service,
                req.op,
                req.method.as_str(),
                b.len(),
                inner.max_request_body,
            ));
        }
        let mut attempt: u32 = 0;
        let mut reauthed = false;
        loop {
            attempt += 1;
            let (creds, _) = inner.session.current().await?;
            let url = if req.at_root {
                creds.endpoints.root(req.service)
            } else {
                build_url(creds.endpoints.base(req.service), &req.path, &req.query)
            };
            let pass = inner
                .gate
                .enter(
                    req.service,
                    CallKind::new(req.op, body.as_ref().map_or(0, Vec::len)),
                )
                .await?;
            let mut rb = inner
                .http
                .request(req.method.clone(), url.clone())
                .header(ACCEPT, HeaderValue::from_static("application/json"));
            if let Some(t) = &creds.token {
                // Sensitive: never printed by a Debug of the request or its headers.
                let mut v = HeaderValue::from_str(t.expose_secret())
                    .map_err(|_| Error::Auth("the token is not a valid header value".to_owned()))?;
                v.set_sensitive(true);
                rb = rb.header("X-Auth-Token", v);
            }
            if let Some(m) = &req.if_match {
                rb = rb.header("If-Match", m.as_str());
            }
            if let Some(b) = &body {
                rb = rb
                    .header(CONTENT_TYPE, HeaderValue::from_static("application/json"))
                    .body(b.clone());
            }
            let start = Instant::now();
            let result = send(rb).await;
            let elapsed = start.elapsed();

            let (status, outcome_body, request_id, transport) = match result {
                Ok((status, rid, bytes)) => (status, bytes, rid, None),
                Err(e) => (0, Vec::new(), None, Some(e)),
            };
            inner
                .gate
                .record(req.op, req.method.as_str(), status, elapsed, attempt);
            let outcome = match &transport {
                Some(e) => Outcome::Transport(transport_kind(e)),
                None => Outcome::Response {
                    status,
                    body: &outcome_body,
                },
            };
            if req.at_root {
                // A version document is no sample of the API's work: it holds a place, teaches nothing.
                drop(pass);
            } else {
                pass.finish(Verdict::of(&outcome));
            }
            debug!(%url, status, attempt, ms = elapsed.as_millis() as u64, "call");
            match classify(outcome, &req.method, req.op) {
                Decision::Done => {
                    return Ok(Response {
                        status,
                        request_id,
                        body: outcome_body,
                    })
                }
                Decision::Reauth if !reauthed => {
                    reauthed = true;
                    inner.gate.metrics().record_reauth();
                    warn!(op = req.op, "token refused (401); logging in again");
                    inner.session.refresh(creds.generation).await?;
                    // The refused try does not use up the retry budget.
                    attempt -= 1;
                }
                Decision::Retry(reason)
                    if inner.retry.allows_another(reason, attempt)
                        && !(reason == RetryReason::IpamConflict
                            && req.address_race_final
                            && retry::is_address_race(&outcome_body)) =>
                {
                    inner.gate.metrics().record_retry(req.op, reason.as_str());
                    let delay = inner.retry.delay(attempt, fastrand::f64());
                    warn!(
                        op = req.op,
                        status,
                        attempt,
                        reason = reason.as_str(),
                        delay_ms = delay.as_millis() as u64,
                        "retrying"
                    );
                    tokio::time::sleep(delay).await;
                }
                Decision::Retry(_) | Decision::Fail(_) | Decision::Reauth => {
                    if let Some(source) = transport {
                        return Err(Error::Transport {
                            service: req.service,
                            op: req.op,
                            attempts: attempt,
                            source,
                        });
                    }
                    let (code, message) = retry::parse_error_body(&outcome_body);
                    let kind = match status {
                        401 => ErrorKind::Unauthorized,
                        s => retry::error_kind(s, &outcome_body),
                    };
                    return Err(Error::Api(Box::new(ApiFailure {
                        service: req.service,
                        op: req.op,
                        method: req.method.to_string(),
                        status,
                        kind,
                        code,
                        message,
                        request_id,
                        attempts: attempt,
                    })));
                }
            }
        }
    }

    fn noauth_project(&self) -> Option<String> {
        match &self.inner.session {
            Session::NoAuth(c) => c.project_id.clone(),
            Session::Keystone(_) => None,
        }
    }

    // === typed helpers ===

    /// GET `{key: T}`.
    pub(crate) async fn get_one<T: DeserializeOwned>(
        &self,
        service: Service,
        op: &'static str,
        path: String,
        key: &str,
    ) -> Result<T> {
        let resp = self.execute(Request::new(service, op, Method::GET, path)).await?;
        take(resp.json(service, op)?, key, service, op)
    }

    /// GET `{key: [T]}` with filters.
    pub(crate) async fn list<T: DeserializeOwned>(
        &self,
        service: Service,
        op: &'static str,
        path: &str,
        key: &str,
        query: Vec<(String, String)>,
    ) -> Result<Vec<T>> {
        let mut out = Vec::new();
        let mut query = query;
        // Follow `<key>_links` rel=next: Octavia pages at pagination_max_limit (1000 by default), and
        // Neutron does when the operator sets one.
        for _ in 0..MAX_PAGES {
            let resp = self
                .execute(Request::new(service, op, Method::GET, path).query(query.clone()))
                .await?;
            let page: Page<T> =
                page::read(&resp.body, key).map_err(|source| Error::Decode { service, op, source })?;
            drop(resp);
            let next = page::next_query(page.links.as_ref(), &query);
            let empty = page.items.is_empty();
            if out.is_empty() {
                out = page.items;
            } else {
                out.extend(page.items);
            }
            match next {
                Some(q) if !empty && q != query => query = q,
                _ => return Ok(out),
            }
        }
        Ok(out)
    }

    /// `method {key: body}` -> `{key: T}`. If a create succeeded but its answer cannot be read, the object
    /// is deleted again (best effort) rather than left behind unknown and untagged.
    pub(crate) async fn send_one<B: Serialize, T: DeserializeOwned>(
        &self,
        service: Service,
        op: &'static str,
        method: Method,
        path: String,
        key: &str,
        body: &B,
    ) -> Result<T> {
        let body = wrap(key, body, service, op)?;
        let is_create = method == Method::POST;
        let resp = self
            .execute(Request::new(service, op, method, path.clone()).json(body))
            .await?;
        let value = resp.json(service, op)?;
        let id = value[key]["id"].as_str().map(str::to_owned);
        match take(value, key, service, op) {
            Ok(t) => Ok(t),
            Err(e) => {
                if let (true, Some(id)) = (is_create, id) {
                    tracing::error!(op, id, error = %e, "created but unreadable; deleting it again");
                    let _ = self
                        .delete_path(service, "rollback.delete", format!("{path}/{id}"), Vec::new())
                        .await;
                }
                Err(e)
            }
        }
    }

    /// DELETE; a 404 is success (already gone).
    pub(crate) async fn delete_path(
        &self,
        service: Service,
        op: &'static str,
        path: String,
        query: Vec<(String, String)>,
    ) -> Result<()> {
        self.execute(Request::new(service, op, Method::DELETE, path).query(query))
            .await
            .map(|_| ())
    }
}

/// Upper bound on pages one list follows (1000 items each on Octavia).
const MAX_PAGES: usize = 1000;

/// `{key: body}`.
pub(crate) fn wrap<B: Serialize>(key: &str, body: &B, service: Service, op: &'static str) -> Result<Value> {
    let v = serde_json::to_value(body).map_err(|source| Error::Decode { service, op, source })?;
    let mut m = serde_json::Map::new();
    m.insert(key.to_owned(), v);
    Ok(Value::Object(m))
}

/// `body[key]` as `T`.
pub(crate) fn take<T: DeserializeOwned>(
    mut body: Value,
    key: &str,
    service: Service,
    op: &'static str,
) -> Result<T> {
    let v = body.get_mut(key).map(Value::take).unwrap_or(Value::Null);
    decode(v, service, op)
}

/// A JSON value as `T`, nulls read as defaults.
pub(crate) fn decode<T: DeserializeOwned>(mut v: Value, service: Service, op: &'static str) -> Result<T> {
    strip_nulls(&mut v);
    serde_json::from_value(v).map_err(|source| Error::Decode { service, op, source })
}

/// Drops `null` members of objects, so `#[serde(default)]` fields read a null as their default: real
/// Neutron answers `"description": null` on default SG rules where one would expect a string.
pub(crate) fn strip_nulls(v: &mut Value) {
    match v {
        Value::Object(m) => {
            m.retain(|_, x| !x.is_null());
            m.values_mut().for_each(strip_nulls);
        }
        Value::Array(a) => a.iter_mut().for_each(strip_nulls),
        _ => {}
    }
}

/// Puts `project_id` into a create body's resource object(s) that lack one (noauth clouds take the project
/// from the body).
fn fill_project_id(body: &mut Value, project: &str) {
    if let Value::Object(m) = body {
        for (_, v) in m.iter_mut() {
            match v {
                Value::Object(o) => {
                    o.entry("project_id")
                        .or_insert_with(|| Value::String(project.to_owned()));
                }
                Value::Array(items) => {
                    for item in items {
                        if let Value::Object(o) = item {
                            o.entry("project_id")
                                .or_insert_with(|| Value::String(project.to_owned()));
                        }
                    }
                }
                _ => {}
            }
        }
    }
}

async fn send(
    rb: reqwest::RequestBuilder,
) -> std::result::Result<(u16, Option<String>, Vec<u8>), reqwest::Error> {
    let resp = rb.send().await?;
    let status = resp.status().as_u16();
    let rid = resp
        .headers()
        .get("x-openstack-request-id")
        .or_else(|| resp.headers().get("x-compute-request-id"))
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let bytes = resp.bytes().await?;
    Ok((status, rid, bytes.to_vec()))
}

fn transport_kind(e: &reqwest::Error) -> TransportKind {
    if e.is_connect() {
        TransportKind::Connect
    } else if e.is_timeout() {
        TransportKind::Timeout
    } else {
        TransportKind::Other
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn urls_encode_segments_and_repeat_query_keys() {
        let base = Url::parse("http://h:9696/v2.0/").unwrap();
        let u = build_url(&base, "ports/abc/tags/kuryr.uid=a b", &[]);
        assert_eq!(u.as_str(), "http://h:9696/v2.0/ports/abc/tags/kuryr.uid=a%20b");
        let q = vec![
            ("fixed_ips".to_owned(), "ip_address=10.0.0.1".to_owned()),
            ("fixed_ips".to_owned(), "subnet_id=s".to_owned()),
        ];
        let u = build_url(&base, "ports", &q);
        assert_eq!(
            u.as_str(),
            "http://h:9696/v2.0/ports?fixed_ips=ip_address%3D10.0.0.1&fixed_ips=subnet_id%3Ds"
        );
    }

    #[test]
    fn nulls_read_as_defaults() {
        #[derive(serde::Deserialize, Default)]
        #[serde(default)]
        struct R {
            description: String,
            protocol: Option<String>,
        }
        let rules: Vec<R> = take(
            json!({"rules": [{"description": null, "protocol": null}, {"description": "d", "protocol": "tcp"}]}),
            "rules",
            Service::Network,
            "x",
        )
        .unwrap();
        assert_eq!(
            (rules[0].description.as_str(), rules[0].protocol.as_deref()),
            ("", None)
        );
        assert_eq!(rules[1].protocol.as_deref(), Some("tcp"));
    }

    #[test]
    fn noauth_project_goes_into_single_and_bulk_bodies() {
        let mut single = json!({"port": {"network_id": "n"}});
        fill_project_id(&mut single, "p");
        assert_eq!(single["port"]["project_id"], "p");
        let mut bulk = json!({"ports": [{"network_id": "n"}, {"network_id": "n", "project_id": "q"}]});
        fill_project_id(&mut bulk, "p");
        assert_eq!(bulk["ports"][0]["project_id"], "p");
        assert_eq!(bulk["ports"][1]["project_id"], "q");
    }
}
