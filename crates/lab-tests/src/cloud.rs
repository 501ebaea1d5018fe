//! Plain HTTP access to the lab's Keystone, Neutron and Octavia, for tests that check the lab itself (the
//! product's own OpenStack client lives in `kuryr-openstack` and is tested against these same servers).

use std::time::Duration;

use anyhow::{bail, Context};
use serde_json::{json, Value};

use crate::Lab;

/// Password the lab gives its `kuryr` user (see lab/lib/common.sh).
const LAB_PASSWORD: &str = "lab-admin-secret";

/// An authenticated session with the lab cloud.
pub struct Cloud {
    http: reqwest::Client,
    token: Option<String>,
    pub neutron: String,
    pub octavia: String,
    pub project_id: String,
}

impl Lab {
    /// Logs in as the lab's `kuryr` user (Keystone password auth), or goes without a token under noauth.
    pub async fn cloud(&self) -> anyhow::Result<Cloud> {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(60))
            .build()?;
        let token = match (&*self.auth, &self.keystone_url) {
            ("keystone", Some(ks)) => {
                let body = json!({"auth": {
                    "identity": {"methods": ["password"], "password": {"user": {
                        "name": "kuryr", "domain": {"id": "default"}, "password": LAB_PASSWORD}}},
                    "scope": {"project": {"id": self.project_id}}}});
                let resp = http.post(format!("{ks}/auth/tokens")).json(&body).send().await?;
                if !resp.status().is_success() {
                    bail!("keystone login failed: {}", resp.status());
                }
                let token = resp
                    .headers()
                    .get("x-subject-token")
                    .context("keystone answered without X-Subject-Token")?
                    .to_str()?
                    .to_owned();
                Some(token)
            }
            _ => None,
        };
        Ok(Cloud {
            http,
            token,
            neutron: format!("{}/v2.0", self.neutron_url),
            octavia: format!("{}/v2/lbaas", self.octavia_url),
            project_id: self.project_id.clone(),
        })
    }
}

impl Cloud {
    /// Sends a request; returns the HTTP status and the JSON body (Null when empty).
    pub async fn call(
        &self,
        method: reqwest::Method,
        url: &str,
        body: Option<Value>,
    ) -> anyhow::Result<(u16, Value)> {
        let mut req = self.http.request(method, url);
        if let Some(t) = &self.token {
            req = req.header("X-Auth-Token", t);
        }
        if let Some(mut b) = body {
            if self.token.is_none() {
                self.add_noauth_project(&mut b);
            }
            req = req.json(&b);
        }
        let resp = req.send().await?;
        let status = resp.status().as_u16();
        let text = resp.text().await?;
        let value = if text.trim().is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text).unwrap_or(Value::String(text))
        };
        Ok((status, value))
    }

    /// Without Keystone, Neutron and Octavia learn the project only from the body: put it into
    /// `{"<resource>": {...}}` bodies that do not name one.
    fn add_noauth_project(&self, body: &mut Value) {
        if let Some(obj) = body.as_object_mut() {
            if obj.len() == 1 {
                if let Some(Value::Object(res)) = obj.values_mut().next() {
                    res.entry("project_id")
                        .or_insert_with(|| Value::String(self.project_id.clone()));
                }
            }
        }
    }

    /// GET that must succeed.
    pub async fn get(&self, url: &str) -> anyhow::Result<Value> {
        let (status, body) = self.call(reqwest::Method::GET, url, None).await?;
        if !(200..300).contains(&status) {
            bail!("GET {url} -> {status}: {body}");
        }
        Ok(body)
    }

    /// POST that must succeed.
    pub async fn post(&self, url: &str, body: Value) -> anyhow::Result<Value> {
        let (status, resp) = self.call(reqwest::Method::POST, url, Some(body)).await?;
        if !(200..300).contains(&status) {
            bail!("POST {url} -> {status}: {resp}");
        }
        Ok(resp)
    }

    /// DELETE; a 404 counts as done.
    pub async fn delete(&self, url: &str) -> anyhow::Result<()> {
        let (status, resp) = self.call(reqwest::Method::DELETE, url, None).await?;
        if !(200..300).contains(&status) && status != 404 {
            bail!("DELETE {url} -> {status}: {resp}");
        }
        Ok(())
    }

    /// Polls `GET url` until `done` says so, at most `timeout`.
    pub async fn wait_for(
        &self,
        url: &str,
        timeout: Duration,
        mut done: impl FnMut(u16, &Value) -> bool,
    ) -> anyhow::Result<Value> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let (status, body) = self.call(reqwest::Method::GET, url, None).await?;
            if done(status, &body) {
                return Ok(body);
            }
            if tokio::time::Instant::now() > deadline {
                bail!("timed out after {timeout:?} waiting on {url}; last answer {status}: {body}");
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Waits until every provisioning_status in an LB's status tree is ACTIVE; fails fast on ERROR. (With the
    /// ovn provider the LB itself turns ACTIVE before its listeners, pools and members do.)
    pub async fn wait_lb_tree_active(&self, lb_id: &str, timeout: Duration) -> anyhow::Result<Value> {
        let url = format!("{}/loadbalancers/{lb_id}/status", self.octavia);
        let mut error = None;
        let tree = self
            .wait_for(&url, timeout, |status, body| {
                let states = provisioning_states(body);
                if states.iter().any(|s| s == "ERROR") {
                    error = Some(body.clone());
                    return true;
                }
                status == 200 && !states.is_empty() && states.iter().all(|s| s == "ACTIVE")
            })
            .await?;
        if let Some(tree) = error {
            bail!("load balancer {lb_id} went to ERROR: {tree}");
        }
        Ok(tree)
    }
}

impl Cloud {
    /// Cascade-deletes a load balancer and waits until both it and its Neutron VIP port are gone: a VIP port
    /// that outlives its LB is a leak.
    pub async fn delete_lb_and_wait(&self, lb_id: &str, vip_port_id: &str) -> anyhow::Result<()> {
        self.delete(&format!("{}/loadbalancers/{lb_id}?cascade=true", self.octavia))
            .await?;
        self.wait_for(
            &format!("{}/loadbalancers/{lb_id}", self.octavia),
            Duration::from_secs(90),
            |s, b| s == 404 || b["loadbalancer"]["provisioning_status"] == "DELETED",
        )
        .await?;
        self.wait_for(
            &format!("{}/ports/{vip_port_id}", self.neutron),
            Duration::from_secs(30),
            |s, _| s == 404,
        )
        .await
        .context("the VIP port outlived its load balancer")?;
        Ok(())
    }
}

/// Every `provisioning_status` found anywhere in a JSON document.
pub fn provisioning_states(v: &Value) -> Vec<String> {
    let mut out = Vec::new();
    fn walk(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::Object(m) => {
                for (k, x) in m {
                    if k == "provisioning_status" {
                        if let Some(s) = x.as_str() {
                            out.push(s.to_owned());
                        }
                    } else {
                        walk(x, out);
                    }
                }
            }
            Value::Array(a) => a.iter().for_each(|x| walk(x, out)),
            _ => {}
        }
    }
    walk(v, &mut out);
    out
}
