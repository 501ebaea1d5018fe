//! A plain HTTP client against an in-process emulator.
#![allow(dead_code, clippy::unwrap_used)] // test helpers: a failed call is a failed test

use kuryr_cloudsim::{AuthMode, Profile, Sim, SimHandle};
use serde_json::{json, Value};

pub struct T {
    pub h: SimHandle,
    pub c: reqwest::Client,
    pub base: String,
    pub token: Option<String>,
}

pub async fn start(profile: Profile) -> T {
    let auth = profile.auth;
    let (_, h) = Sim::new(profile).spawn_on("127.0.0.1:0").await.unwrap();
    let base = h.url();
    let mut t = T {
        h,
        c: reqwest::Client::new(),
        base,
        token: None,
    };
    if auth == AuthMode::Keystone {
        t.token = Some(t.login("kuryr", "kuryr-secret").await);
    }
    t
}

/// Zero latency, keystone auth (logged in as kuryr).
pub async fn zero() -> T {
    start(Profile::zero()).await
}

pub async fn noauth() -> T {
    start(Profile::zero().with_auth(AuthMode::Noauth)).await
}

impl T {
    pub async fn login(&self, user: &str, password: &str) -> String {
        let body = json!({"auth": {"identity": {"methods": ["password"], "password": {"user": {
            "name": user, "domain": {"name": "Default"}, "password": password}}},
            "scope": {"project": {"name": "service", "domain": {"name": "Default"}}}}});
        let r = self
            .c
            .post(format!("{}/v3/auth/tokens", self.base))
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 201, "login failed");
        r.headers()["x-subject-token"].to_str().unwrap().to_owned()
    }

    pub async fn req(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
        headers: &[(&str, &str)],
    ) -> (u16, Value) {
        let mut rb = self.c.request(method, format!("{}{}", self.base, path));
        if let Some(t) = &self.token {
            rb = rb.header("X-Auth-Token", t);
        }
        for (k, v) in headers {
            rb = rb.header(*k, *v);
        }
        if let Some(b) = body {
            rb = rb.json(&b);
        }
        let r = rb.send().await.unwrap();
        let status = r.status().as_u16();
        let text = r.text().await.unwrap();
        (status, serde_json::from_str(&text).unwrap_or(Value::Null))
    }

    pub async fn get(&self, path: &str) -> (u16, Value) {
        self.req(reqwest::Method::GET, path, None, &[]).await
    }
    pub async fn post(&self, path: &str, body: Value) -> (u16, Value) {
        self.req(reqwest::Method::POST, path, Some(body), &[]).await
    }
    pub async fn put(&self, path: &str, body: Value) -> (u16, Value) {
        self.req(reqwest::Method::PUT, path, Some(body), &[]).await
    }
    pub async fn delete(&self, path: &str) -> (u16, Value) {
        self.req(reqwest::Method::DELETE, path, None, &[]).await
    }

    /// POST that must succeed; returns the object under `key`.
    pub async fn create(&self, path: &str, key: &str, body: Value) -> Value {
        let (s, v) = self.post(path, json!({ key: body })).await;
        assert_eq!(s, 201, "create {path}: {v}");
        v[key].clone()
    }

    pub async fn network(&self, name: &str) -> String {
        self.create("/v2.0/networks", "network", json!({"name": name}))
            .await["id"]
            .as_str()
            .unwrap()
            .to_owned()
    }

    pub async fn subnet(&self, net: &str, cidr: &str) -> String {
        self.create(
            "/v2.0/subnets",
            "subnet",
            json!({"network_id": net, "cidr": cidr, "ip_version": 4}),
        )
        .await["id"]
            .as_str()
            .unwrap()
            .to_owned()
    }

    pub async fn port(&self, net: &str, extra: Value) -> Value {
        let mut body = json!({"network_id": net});
        if let (Some(b), Some(e)) = (body.as_object_mut(), extra.as_object()) {
            b.extend(e.clone());
        }
        self.create("/v2.0/ports", "port", body).await
    }

    /// Admin API.
    pub async fn sim(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> (u16, Value) {
        let mut rb = self.c.request(method, format!("{}{}", self.base, path));
        if let Some(b) = body {
            rb = rb.json(&b);
        }
        let r = rb.send().await.unwrap();
        let s = r.status().as_u16();
        (
            s,
            serde_json::from_str(&r.text().await.unwrap()).unwrap_or(Value::Null),
        )
    }

    /// Polls `path` every 10 ms until `pred` holds; panics with the last answer after 20 s.
    pub async fn wait_for(&self, path: &str, pred: impl Fn(&Value) -> bool) -> Value {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        loop {
            let (_, v) = self.get(path).await;
            if pred(&v) {
                return v;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "timed out (20 s) waiting on {path}; last answer: {v}"
            );
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    }
}

pub fn id(v: &Value) -> String {
    v["id"].as_str().unwrap().to_owned()
}
