#![allow(clippy::unwrap_used)] // test helpers outside #[test] fns
mod common;

use common::*;
use serde_json::{json, Value};

#[tokio::test]
async fn password_token_carries_a_catalog_with_network_and_load_balancer() {
    let t = zero().await;
    let r =
        t.c.post(format!("{}/v3/auth/tokens", t.base))
            .json(
                &json!({"auth": {"identity": {"methods": ["password"], "password": {"user": {
            "name": "kuryr", "domain": {"name": "Default"}, "password": "kuryr-secret"}}},
            "scope": {"project": {"name": "service", "domain": {"name": "Default"}}}}}),
            )
            .send()
            .await
            .unwrap();
    assert_eq!(r.status(), 201);
    assert!(r.headers().contains_key("x-subject-token"));
    let body: Value = r.json().await.unwrap();
    let catalog = body["token"]["catalog"].as_array().unwrap();
    for ty in ["network", "load-balancer", "identity"] {
        let svc = catalog
            .iter()
            .find(|s| s["type"] == ty)
            .unwrap_or_else(|| panic!("no {ty}"));
        let ifaces: Vec<&str> = svc["endpoints"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["interface"].as_str().unwrap())
            .collect();
        assert_eq!(ifaces, vec!["public", "internal", "admin"]);
        assert_eq!(svc["endpoints"][0]["region_id"], "RegionOne");
    }
    assert_eq!(body["token"]["project"]["name"], "service");
    assert!(body["token"]["expires_at"].as_str().unwrap().ends_with('Z'));
}

#[tokio::test]
async fn version_documents_are_unauthenticated() {
    let t = zero().await;
    let v: Value =
        t.c.get(format!("{}/v3", t.base))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
    assert_eq!(v["version"]["id"], "v3.14");
    let v: Value =
        t.c.get(format!("{}/networking/", t.base))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
    assert_eq!(v["versions"][0]["id"], "v2.0");
    let v: Value =
        t.c.get(format!("{}/load-balancer/", t.base))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
    let last = v["versions"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["id"], "v2.30");
    assert_eq!(last["status"], "CURRENT");
}

#[tokio::test]
async fn wrong_password_is_401_with_keystone_body() {
    let t = zero().await;
    let r =
        t.c.post(format!("{}/v3/auth/tokens", t.base))
            .json(
                &json!({"auth": {"identity": {"methods": ["password"], "password": {"user": {
            "name": "kuryr", "domain": {"name": "Default"}, "password": "nope"}}}}}),
            )
            .send()
            .await
            .unwrap();
    assert_eq!(r.status(), 401);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["error"]["code"], 401);
    assert_eq!(v["error"]["title"], "Unauthorized");
}

#[tokio::test]
async fn application_credential_and_token_methods_work() {
    let t = zero().await;
    let r = t
        .c
        .post(format!("{}/v3/auth/tokens", t.base))
        .json(&json!({"auth": {"identity": {"methods": ["application_credential"],
            "application_credential": {"id": "0000000000000000000000000000a001", "secret": "appcred-secret"}}}}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let tok = r.headers()["x-subject-token"].to_str().unwrap().to_owned();
    let r =
        t.c.post(format!("{}/v3/auth/tokens", t.base))
            .json(&json!({"auth": {"identity": {"methods": ["token"], "token": {"id": tok}}}}))
            .send()
            .await
            .unwrap();
    assert_eq!(r.status(), 201);
    let r =
        t.c.get(format!("{}/v3/auth/tokens", t.base))
            .header("X-Auth-Token", t.token.clone().unwrap())
            .header("X-Subject-Token", tok)
            .send()
            .await
            .unwrap();
    assert_eq!(r.status(), 200);
}

#[tokio::test]
async fn neutron_and_octavia_need_a_valid_token() {
    let mut t = zero().await;
    assert_eq!(t.get("/v2.0/networks").await.0, 200);
    let good = t.token.take();
    let (s, v) = t.get("/v2.0/networks").await;
    assert_eq!(s, 401);
    assert_eq!(v["error"]["code"], 401);
    assert_eq!(t.get("/v2/lbaas/loadbalancers").await.0, 401);
    t.token = Some("garbage".into());
    assert_eq!(t.get("/networking/v2.0/ports").await.0, 401);
    t.token = good;
    assert_eq!(t.get("/load-balancer/v2/lbaas/loadbalancers").await.0, 200);
}

#[tokio::test]
async fn expired_tokens_get_401_until_reauthentication() {
    let mut p = kuryr_cloudsim::Profile::zero();
    p.keystone.token_ttl_s = 1;
    let mut t = start(p).await;
    assert_eq!(t.get("/v2.0/ports").await.0, 200);
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    assert_eq!(t.get("/v2.0/ports").await.0, 401);
    t.token = Some(t.login("kuryr", "kuryr-secret").await);
    assert_eq!(t.get("/v2.0/ports").await.0, 200);
    // The admin endpoint expires every token at once.
    let (s, v) = t.sim(reqwest::Method::POST, "/_sim/tokens/expire", None).await;
    assert_eq!(s, 200);
    assert!(v["expired"].as_u64().unwrap() >= 1);
    assert_eq!(t.get("/v2.0/ports").await.0, 401);
}
