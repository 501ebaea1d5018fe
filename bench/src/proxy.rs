//! A namespace-pinning proxy in front of the lab's kube-apiserver for upstream Kuryr.
//!
//! Upstream's controller has no namespace option: it lists and watches Pods, Services, Endpoints and its
//! CRDs cluster-wide, so on the shared lab it would grab every other test's pods. Behind this proxy
//! (plain HTTP on loopback; the proxy authenticates with the lab kubeconfig) every cluster-wide
//! collection URL becomes the bench namespace's, so upstream sees and touches only that namespace.
//!
//! It also bridges one CRD difference: upstream's CRDs had no `status` subresource and it writes
//! `status.vifs` with a JSON patch on the object itself; ours have one, and the apiserver silently drops
//! such writes. JSON patches whose every op targets `/status...` on a Kuryr CR are sent to its
//! `/status` subresource as the equivalent merge patch (status may not exist yet, so `replace` of
//! `/status/vifs` would fail). The status a create carries is dropped by the subresource, so reads of
//! KuryrPorts (GET, list, watch) get the empty `status.vifs` upstream's handlers expect.

use std::net::SocketAddr;

use axum::body::{to_bytes, Body};
use axum::extract::{Request, State};
use axum::http::{HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value};

/// Collections upstream reads cluster-wide: (API prefix, plural).
const PINNED: &[(&str, &str)] = &[
    ("/api/v1", "pods"),
    ("/api/v1", "services"),
    ("/api/v1", "endpoints"),
    ("/api/v1", "events"),
    ("/apis/networking.k8s.io/v1", "networkpolicies"),
    ("/apis/openstack.org/v1", "kuryrports"),
    ("/apis/openstack.org/v1", "kuryrloadbalancers"),
    ("/apis/openstack.org/v1", "kuryrnetworks"),
    ("/apis/openstack.org/v1", "kuryrnetworkpolicies"),
];

/// The namespaced path for a cluster-wide collection path (query kept); other paths unchanged.
pub fn pin_path(path_and_query: &str, ns: &str) -> String {
    let (path, query) = match path_and_query.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (path_and_query, None),
    };
    let mut out = path.to_string();
    for (prefix, plural) in PINNED {
        if path == format!("{prefix}/{plural}") {
            out = format!("{prefix}/namespaces/{ns}/{plural}");
            break;
        }
    }
    match query {
        Some(q) => format!("{out}?{q}"),
        None => out,
    }
}

/// For a JSON patch on a Kuryr CR whose ops all target `/status...`: the `/status` URL and the merge
/// patch doing the same. `None` when the request is anything else.
pub fn status_patch(path: &str, ops: &Value) -> Option<(String, Value)> {
    if !path.starts_with("/apis/openstack.org/v1/namespaces/") || path.ends_with("/status") {
        return None;
    }
    let ops = ops.as_array()?;
    if ops.is_empty() {
        return None;
    }
    let mut merge = Value::Object(Map::new());
    for op in ops {
        let p = op.get("path")?.as_str()?;
        let rest = p.strip_prefix("/status")?;
        let keys: Vec<String> = rest
            .split('/')
            .filter(|s| !s.is_empty())
            .map(|s| s.replace("~1", "/").replace("~0", "~"))
            .collect();
        let value = match op.get("op")?.as_str()? {
            "add" | "replace" => op.get("value")?.clone(),
            "remove" => Value::Null,
            _ => return None,
        };
        let mut cur = merge
            .as_object_mut()?
            .entry("status")
            .or_insert_with(|| Value::Object(Map::new()));
        if keys.is_empty() {
            *cur = value;
            continue;
        }
        for (i, k) in keys.iter().enumerate() {
            if !cur.is_object() {
                *cur = Value::Object(Map::new());
            }
            let obj = cur.as_object_mut()?;
            if i + 1 == keys.len() {
                obj.insert(k.clone(), value.clone());
                break;
            }
            cur = obj.entry(k.clone()).or_insert_with(|| Value::Object(Map::new()));
        }
    }
    Some((format!("{path}/status"), merge))
}

#[derive(Clone)]
struct Proxy {
    client: kube::Client,
    ns: String,
}

/// Serves the proxy on `127.0.0.1:0`; returns its address and the server task.
pub async fn spawn(
    client: kube::Client,
    ns: &str,
) -> anyhow::Result<(SocketAddr, tokio::task::JoinHandle<()>)> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let app = axum::Router::new().fallback(handle).with_state(Proxy {
        client,
        ns: ns.to_string(),
    });
    let task = tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Ok((addr, task))
}

async fn handle(State(p): State<Proxy>, req: Request) -> Response {
    match forward(&p, req).await {
        Ok(r) => r,
        Err(e) => {
            tracing::warn!("bench proxy: {e:#}");
            (StatusCode::BAD_GATEWAY, format!("bench proxy: {e:#}")).into_response()
        }
    }
}

async fn send(
    p: &Proxy,
    method: Method,
    uri: &str,
    content_type: Option<HeaderValue>,
    body: Vec<u8>,
) -> anyhow::Result<Response> {
    let mut builder = axum::http::Request::builder().method(method).uri(uri);
    if let Some(ct) = content_type {
        builder = builder.header("content-type", ct);
    }
    let resp = p
        .client
        .send(builder.body(kube::client::Body::from(body))?)
        .await?;
    let (parts, body) = resp.into_parts();
    Ok(Response::from_parts(parts, Body::new(body)))
}

async fn forward(p: &Proxy, req: Request) -> anyhow::Result<Response> {
    let method = req.method().clone();
    let pq = req
        .uri()
        .path_and_query()
        .map(|x| x.as_str().to_string())
        .unwrap_or_else(|| "/".into());
    let uri = pin_path(&pq, &p.ns);
    let ct = req.headers().get("content-type").cloned();
    let body = to_bytes(req.into_body(), 64 << 20).await?.to_vec();
    let is_json_patch = ct
        .as_ref()
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json-patch+json"));
    if method == Method::PATCH && is_json_patch {
        let ops: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        if let Some((status_uri, merge)) = status_patch(&uri, &ops) {
            return send(
                p,
                Method::PATCH,
                &status_uri,
                Some(HeaderValue::from_static("application/merge-patch+json")),
                serde_json::to_vec(&merge)?,
            )
            .await;
        }
    }
    let kuryr_read = method == Method::GET && uri.starts_with("/apis/openstack.org/v1/");
    let watch = uri.contains("watch=true") || uri.contains("watch=1");
    let resp = send(p, method, &uri, ct, body).await?;
    if !kuryr_read || !resp.status().is_success() {
        return Ok(resp);
    }
    let (parts, body) = resp.into_parts();
    if watch {
        return Ok(Response::from_parts(parts, Body::from_stream(fix_lines(body))));
    }
    let mut v: Value = serde_json::from_slice(&to_bytes(body, 256 << 20).await?)?;
    fix_object(&mut v);
    if let Some(items) = v.get_mut("items").and_then(Value::as_array_mut) {
        items.iter_mut().for_each(fix_object);
    }
    // The body is re-encoded: its length changed, and an apiserver answer over 4 KiB came chunked
    // (hyper closes the connection on a chunked header with a sized body).
    let mut parts = parts;
    parts.headers.remove("content-length");
    parts.headers.remove("transfer-encoding");
    Ok(Response::from_parts(parts, Body::from(serde_json::to_vec(&v)?)))
}

/// Gives a Kuryr CR read by upstream the `status` its own CRDs always had: our CRDs have a status
/// subresource, so a create's `status` is dropped. Upstream's KuryrPort handlers index `status['vifs']`
/// unguarded; its KuryrLoadBalancer handler, seeing no `status`, patches in `status: {}` and waits for
/// the next event, which that empty patch (a no-op here) never causes.
pub fn fix_object(o: &mut Value) {
    let Some(obj) = o.as_object_mut() else { return };
    let kind = obj.get("kind").and_then(Value::as_str).unwrap_or_default();
    if kind != "KuryrPort" && kind != "KuryrLoadBalancer" {
        return;
    }
    let port = kind == "KuryrPort";
    let status = obj.entry("status").or_insert_with(|| Value::Object(Map::new()));
    if !status.is_object() {
        *status = Value::Object(Map::new());
    }
    if let (true, Some(st)) = (port, status.as_object_mut()) {
        st.entry("vifs").or_insert_with(|| Value::Object(Map::new()));
    }
}

/// One watch event line with its object fixed (lines that are not JSON pass unchanged).
pub fn fix_event_line(line: &[u8]) -> Vec<u8> {
    match serde_json::from_slice::<Value>(line) {
        Ok(mut ev) => {
            if let Some(o) = ev.get_mut("object") {
                fix_object(o);
            }
            serde_json::to_vec(&ev).unwrap_or_else(|_| line.to_vec())
        }
        Err(_) => line.to_vec(),
    }
}

/// Re-frames a watch stream into lines and fixes each event.
fn fix_lines(
    body: Body,
) -> impl futures::Stream<Item = Result<axum::body::Bytes, axum::Error>> + Send + 'static {
    use futures::StreamExt;
    let mut buf: Vec<u8> = Vec::new();
    body.into_data_stream().map(move |chunk| {
        let chunk = chunk?;
        buf.extend_from_slice(&chunk);
        let mut out = Vec::new();
        while let Some(pos) = buf.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = buf.drain(..=pos).collect();
            out.extend(fix_event_line(&line[..line.len() - 1]));
            out.push(b'\n');
        }
        Ok(axum::body::Bytes::from(out))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn cluster_wide_collections_are_pinned_to_the_namespace() {
        assert_eq!(
            pin_path("/api/v1/pods?watch=true&resourceVersion=5", "b"),
            "/api/v1/namespaces/b/pods?watch=true&resourceVersion=5"
        );
        assert_eq!(
            pin_path("/apis/openstack.org/v1/kuryrports", "b"),
            "/apis/openstack.org/v1/namespaces/b/kuryrports"
        );
        // Namespaced, cluster-scoped and unknown paths pass unchanged.
        for p in [
            "/api/v1/namespaces/x/pods/p",
            "/api/v1/nodes",
            "/api/v1/podsx",
            "/version",
        ] {
            assert_eq!(pin_path(p, "b"), p);
        }
    }

    #[test]
    fn status_json_patches_become_merge_patches_on_the_subresource() {
        let path = "/apis/openstack.org/v1/namespaces/b/kuryrports/p1";
        let ops = json!([{"op": "replace", "path": "/status/vifs", "value": {"eth0": {"default": true}}}]);
        let (uri, merge) = status_patch(path, &ops).expect("status patch");
        assert_eq!(uri, format!("{path}/status"));
        assert_eq!(merge, json!({"status": {"vifs": {"eth0": {"default": true}}}}));

        let ops = json!([{"op": "remove", "path": "/status/vifs/eth0"}, {"op": "add", "path": "/status/a~1b", "value": 1}]);
        let (_, merge) = status_patch(path, &ops).expect("status patch");
        assert_eq!(merge, json!({"status": {"vifs": {"eth0": null}, "a/b": 1}}));
    }

    #[test]
    fn kuryrports_without_status_get_empty_vifs() {
        let mut kp = json!({"kind": "KuryrPort", "metadata": {"name": "p"}});
        fix_object(&mut kp);
        assert_eq!(kp["status"], json!({"vifs": {}}));
        let mut wired = json!({"kind": "KuryrPort", "status": {"vifs": {"eth0": {}}}});
        fix_object(&mut wired);
        assert_eq!(wired["status"], json!({"vifs": {"eth0": {}}}));
        let mut klb = json!({"kind": "KuryrLoadBalancer", "spec": {}});
        fix_object(&mut klb);
        assert_eq!(klb["status"], json!({}));
        let mut built = json!({"kind": "KuryrLoadBalancer", "status": {"members": []}});
        fix_object(&mut built);
        assert_eq!(built["status"], json!({"members": []}));
        let mut pod = json!({"kind": "Pod"});
        fix_object(&mut pod);
        assert!(pod.get("status").is_none());
        let line = fix_event_line(br#"{"type":"ADDED","object":{"kind":"KuryrPort"}}"#);
        let ev: Value = serde_json::from_slice(&line).expect("json");
        assert_eq!(ev["object"]["status"]["vifs"], json!({}));
        assert_eq!(fix_event_line(b"not json"), b"not json".to_vec());
    }

    #[test]
    fn other_patches_pass_through() {
        let path = "/apis/openstack.org/v1/namespaces/b/kuryrports/p1";
        let meta = json!([{"op": "replace", "path": "/metadata/finalizers", "value": []}]);
        assert!(status_patch(path, &meta).is_none());
        let mixed = json!([{"op": "replace", "path": "/status/vifs", "value": {}}, {"op": "replace", "path": "/spec/podUid", "value": "u"}]);
        assert!(status_patch(path, &mixed).is_none());
        let ops = json!([{"op": "replace", "path": "/status/vifs", "value": {}}]);
        assert!(status_patch("/api/v1/namespaces/b/pods/p", &ops).is_none());
        assert!(status_patch(&format!("{path}/status"), &ops).is_none());
    }
}
