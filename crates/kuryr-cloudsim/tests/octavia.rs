#![allow(clippy::unwrap_used)] // test helpers outside #[test] fns
mod common;

use common::*;
use kuryr_cloudsim::profile::Dist;
use kuryr_cloudsim::{AuthMode, Profile};
use serde_json::{json, Value};

async fn vip_subnet(t: &T) -> String {
    let net = t.network("svc").await;
    t.subnet(&net, "10.9.0.0/24").await
}

fn full_body(subnet: &str, provider: &str, algorithm: &str, members: &[(&str, u16)]) -> Value {
    let members: Vec<Value> = members
        .iter()
        .map(|(a, p)| json!({"address": a, "protocol_port": p, "subnet_id": subnet}))
        .collect();
    json!({"loadbalancer": {
        "name": "ns/svc", "vip_subnet_id": subnet, "vip_address": "10.9.0.10", "provider": provider,
        "listeners": [{"name": "l80", "protocol": "TCP", "protocol_port": 80,
            "default_pool": {"name": "p80", "protocol": "TCP", "lb_algorithm": algorithm, "members": members,
                "healthmonitor": {"type": "TCP", "delay": 5, "timeout": 3, "max_retries": 3}}}],
        "tags": ["kuryr"],
    }})
}

fn timed(provider: &str, lb_ms: f64, update_ms: f64) -> Profile {
    let mut p = Profile::default().with_auth(AuthMode::Noauth);
    let t = p.octavia.providers.get_mut(provider).unwrap();
    t.lb_create = Dist::Ms(lb_ms);
    t.update = Dist::Ms(update_ms);
    t.delete = Dist::Ms(update_ms);
    p
}

#[tokio::test]
async fn fully_populated_create_builds_the_tree_and_vip_port() {
    let t = zero().await;
    let sub = vip_subnet(&t).await;
    let (s, v) = t
        .post(
            "/v2/lbaas/loadbalancers",
            full_body(
                &sub,
                "amphora",
                "ROUND_ROBIN",
                &[("10.0.0.5", 8080), ("10.0.0.6", 8080)],
            ),
        )
        .await;
    assert_eq!(s, 201, "{v}");
    let lb = &v["loadbalancer"];
    assert_eq!(lb["provisioning_status"], "PENDING_CREATE");
    assert_eq!(lb["operating_status"], "OFFLINE");
    assert_eq!(lb["vip_address"], "10.9.0.10");
    assert_eq!(lb["listeners"][0]["protocol_port"], 80);
    assert_eq!(lb["pools"][0]["members"].as_array().unwrap().len(), 2);
    assert_eq!(lb["pools"][0]["healthmonitor"]["type"], "TCP");
    let lbid = id(lb);
    let (_, port) = t
        .get(&format!("/v2.0/ports/{}", lb["vip_port_id"].as_str().unwrap()))
        .await;
    assert_eq!(port["port"]["device_owner"], "Octavia");
    // Zero latency: ACTIVE by the next call, whole tree included.
    let (_, st) = t.get(&format!("/v2/lbaas/loadbalancers/{lbid}/status")).await;
    let l = &st["statuses"]["loadbalancer"];
    assert_eq!(l["provisioning_status"], "ACTIVE");
    assert_eq!(l["operating_status"], "ONLINE");
    assert_eq!(
        l["listeners"][0]["pools"][0]["members"][0]["operating_status"],
        "ONLINE"
    );
    assert_eq!(
        l["listeners"][0]["pools"][0]["health_monitor"]["provisioning_status"],
        "ACTIVE"
    );
    // The v2.0 alias and /load-balancer prefix serve the same objects.
    let (s, v) = t
        .get(&format!("/load-balancer/v2.0/lbaas/loadbalancers/{lbid}"))
        .await;
    assert_eq!(
        (s, v["loadbalancer"]["listeners"][0]["id"].is_string()),
        (200, true)
    );
    let (_, v) = t.get("/v2/lbaas/loadbalancers?tags=kuryr&name=ns/svc").await;
    assert_eq!(v["loadbalancers"].as_array().unwrap().len(), 1);
    assert!(v["loadbalancers_links"].is_array());
}

#[tokio::test]
async fn ovn_rules_named_pools_source_ip_port_and_vip_leak() {
    let t = zero().await;
    let sub = vip_subnet(&t).await;
    let (s, v) = t
        .post(
            "/v2/lbaas/loadbalancers",
            full_body(&sub, "ovn", "ROUND_ROBIN", &[]),
        )
        .await;
    assert_eq!(s, 501);
    assert_eq!(v["faultcode"], "Server");
    assert!(v["faultstring"]
        .as_str()
        .unwrap()
        .contains("OVN provider does not support ROUND_ROBIN algorithm"));
    assert!(v["debuginfo"].is_null());
    let mut body = full_body(&sub, "ovn", "SOURCE_IP_PORT", &[]);
    body["loadbalancer"]["vip_address"] = json!("10.9.0.11");
    body["loadbalancer"]["listeners"][0]["default_pool"]["name"] = json!("");
    let (s, v) = t.post("/v2/lbaas/loadbalancers", body).await;
    assert_eq!(s, 400);
    assert_eq!(v["faultcode"], "Client");
    assert_eq!(
        v["faultstring"],
        "Validation failure: Pools must be named when creating a fully populated loadbalancer."
    );
    // Like real Octavia, the VIP ports of both failed creates stay behind.
    let (_, v) = t.get("/v2.0/ports?device_owner=ovn-lb-vip").await;
    assert_eq!(v["ports"].as_array().unwrap().len(), 2);
    let mut body = full_body(&sub, "ovn", "SOURCE_IP_PORT", &[("10.0.0.5", 80)]);
    body["loadbalancer"]["vip_address"] = json!("10.9.0.12");
    let (s, v) = t.post("/v2/lbaas/loadbalancers", body).await;
    assert_eq!(s, 201, "{v}");
    let (s, v) = t.get("/v2/lbaas/providers").await;
    assert_eq!(s, 200);
    assert_eq!(v["providers"].as_array().unwrap().len(), 2);
}

#[tokio::test]
async fn changes_while_pending_get_409_and_settle_after_the_provider_duration() {
    let t = start(timed("amphora", 150.0, 100.0)).await;
    let sub = vip_subnet(&t).await;
    let (_, v) = t
        .post(
            "/v2/lbaas/loadbalancers",
            json!({"loadbalancer": {"vip_subnet_id": sub, "name": "x"}}),
        )
        .await;
    let lbid = id(&v["loadbalancer"]);
    let (s, v) = t
        .post(
            "/v2/lbaas/listeners",
            json!({"listener": {"loadbalancer_id": lbid, "protocol": "TCP", "protocol_port": 80}}),
        )
        .await;
    assert_eq!(s, 409);
    assert_eq!(
        v["faultstring"],
        format!("Load Balancer {lbid} is immutable and cannot be updated.")
    );
    let (s, _) = t.delete(&format!("/v2/lbaas/loadbalancers/{lbid}")).await;
    assert_eq!(s, 409, "no delete while PENDING_CREATE");
    t.wait_for(&format!("/v2/lbaas/loadbalancers/{lbid}"), |v| {
        v["loadbalancer"]["provisioning_status"] == "ACTIVE"
    })
    .await;
    let l = t
        .create(
            "/v2/lbaas/listeners",
            "listener",
            json!({"loadbalancer_id": lbid, "protocol": "UDP", "protocol_port": 53}),
        )
        .await;
    assert_eq!(l["provisioning_status"], "PENDING_CREATE");
    let (_, v) = t.get(&format!("/v2/lbaas/loadbalancers/{lbid}")).await;
    assert_eq!(v["loadbalancer"]["provisioning_status"], "PENDING_UPDATE");
    t.wait_for(&format!("/v2/lbaas/listeners/{}", id(&l)), |v| {
        v["listener"]["provisioning_status"] == "ACTIVE"
    })
    .await;
    let (s, v) = t
        .post(
            "/v2/lbaas/listeners",
            json!({"listener": {"loadbalancer_id": lbid, "protocol": "UDP", "protocol_port": 53}}),
        )
        .await;
    assert_eq!(s, 409, "{v}");
    assert!(v["faultstring"].as_str().unwrap().starts_with("Another Listener"));
}

#[tokio::test]
async fn batch_member_replace_creates_updates_and_deletes() {
    let t = zero().await;
    let sub = vip_subnet(&t).await;
    let (_, v) = t
        .post(
            "/v2/lbaas/loadbalancers",
            full_body(
                &sub,
                "amphora",
                "ROUND_ROBIN",
                &[("10.0.0.5", 80), ("10.0.0.6", 80)],
            ),
        )
        .await;
    let pool = id(&v["loadbalancer"]["pools"][0]);
    let path = format!("/v2/lbaas/pools/{pool}/members");
    let (s, v) = t
        .put(
            &path,
            json!({"members": [
                {"address": "10.0.0.6", "protocol_port": 80, "weight": 5},
                {"address": "10.0.0.7", "protocol_port": 80, "name": "new"},
            ]}),
        )
        .await;
    assert_eq!((s, v), (202, Value::Null));
    let (_, v) = t.get(&path).await;
    let mut got: Vec<(String, u64)> = v["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["address"].as_str().unwrap().to_owned(),
                m["weight"].as_u64().unwrap(),
            )
        })
        .collect();
    got.sort();
    assert_eq!(got, vec![("10.0.0.6".into(), 5), ("10.0.0.7".into(), 1)]);
    let (s, v) = t.put(&path, json!({"members": [{"address": "10.0.0.8", "protocol_port": 80}, {"address": "10.0.0.8", "protocol_port": 80}]})).await;
    assert_eq!(s, 409, "{v}");
    let batch = t.h.calls_matching("octavia.members.batch_update");
    assert_eq!(batch[0].items, Some(2));
}

#[tokio::test]
async fn cascade_delete_removes_tree_and_vip_port() {
    let t = start(timed("ovn", 50.0, 50.0)).await;
    let sub = vip_subnet(&t).await;
    let (_, v) = t
        .post(
            "/v2/lbaas/loadbalancers",
            full_body(&sub, "ovn", "SOURCE_IP_PORT", &[("10.0.0.5", 80)]),
        )
        .await;
    let lb = v["loadbalancer"].clone();
    let lbid = id(&lb);
    t.wait_for(&format!("/v2/lbaas/loadbalancers/{lbid}"), |v| {
        v["loadbalancer"]["provisioning_status"] == "ACTIVE"
    })
    .await;
    let (s, v) = t.delete(&format!("/v2/lbaas/loadbalancers/{lbid}")).await;
    assert_eq!(s, 400);
    assert!(v["faultstring"].as_str().unwrap().contains("it has children"));
    assert_eq!(
        t.delete(&format!("/v2/lbaas/loadbalancers/{lbid}?cascade=true"))
            .await
            .0,
        204
    );
    let (_, v) = t.get(&format!("/v2/lbaas/loadbalancers/{lbid}")).await;
    assert_eq!(v["loadbalancer"]["provisioning_status"], "PENDING_DELETE");
    t.wait_for(&format!("/v2/lbaas/loadbalancers/{lbid}"), |v| {
        v["faultstring"].is_string()
    })
    .await;
    let (s, v) = t.get(&format!("/v2/lbaas/loadbalancers/{lbid}")).await;
    assert_eq!(s, 404);
    assert_eq!(v["faultstring"], format!("Load Balancer {lbid} not found."));
    assert_eq!(
        t.get(&format!("/v2/lbaas/pools/{}", id(&lb["pools"][0]))).await.0,
        404
    );
    assert_eq!(
        t.get(&format!("/v2.0/ports/{}", lb["vip_port_id"].as_str().unwrap()))
            .await
            .0,
        404
    );
}

#[tokio::test]
async fn ovn_reports_the_lb_active_before_its_children() {
    let mut p = timed("ovn", 30.0, 30.0);
    p.octavia.providers.get_mut("ovn").unwrap().tree_extra = Dist::Ms(300.0);
    let t = start(p).await;
    let sub = vip_subnet(&t).await;
    let (_, v) = t
        .post(
            "/v2/lbaas/loadbalancers",
            full_body(&sub, "ovn", "SOURCE_IP_PORT", &[("10.0.0.5", 80)]),
        )
        .await;
    let lbid = id(&v["loadbalancer"]);
    let st = t
        .wait_for(&format!("/v2/lbaas/loadbalancers/{lbid}/status"), |v| {
            v["statuses"]["loadbalancer"]["provisioning_status"] == "ACTIVE"
        })
        .await;
    assert_eq!(
        st["statuses"]["loadbalancer"]["listeners"][0]["provisioning_status"],
        "PENDING_CREATE"
    );
    t.wait_for(&format!("/v2/lbaas/loadbalancers/{lbid}/status"), |v| {
        v["statuses"]["loadbalancer"]["listeners"][0]["pools"][0]["members"][0]["provisioning_status"]
            == "ACTIVE"
    })
    .await;
}

#[tokio::test]
async fn lists_are_paged_at_a_thousand_with_links_that_drop_the_filters() {
    let t = zero().await;
    let sub = vip_subnet(&t).await;
    let ips: Vec<String> = (0..1_001)
        .map(|i| format!("10.1.{}.{}", i / 250, i % 250 + 1))
        .collect();
    let members: Vec<(&str, u16)> = ips.iter().map(|ip| (ip.as_str(), 8080)).collect();
    let (s, v) = t
        .post(
            "/v2/lbaas/loadbalancers",
            full_body(&sub, "amphora", "ROUND_ROBIN", &members),
        )
        .await;
    assert_eq!(s, 201, "{v}");
    let pool = id(&v["loadbalancer"]["pools"][0]);
    let next = |v: &Value| {
        v["members_links"]
            .as_array()
            .and_then(|l| l.iter().find(|l| l["rel"] == "next"))
            .and_then(|l| l["href"].as_str())
            .map(str::to_owned)
    };
    // No limit, or one over Octavia's pagination_max_limit: pages of 1,000.
    for q in ["", "?limit=5000", "?protocol_port=8080"] {
        let (s, v) = t.get(&format!("/v2/lbaas/pools/{pool}/members{q}")).await;
        assert_eq!(s, 200);
        assert_eq!(v["members"].as_array().unwrap().len(), 1_000, "{q}");
        let href = next(&v).unwrap();
        assert!(href.contains("limit=1000") && href.contains("marker="), "{href}");
        assert!(!href.contains("protocol_port"), "the filter is dropped: {href}");
    }
    // The last page is not full: no next link. A full last page has one (Octavia cannot tell).
    let (_, first) = t.get(&format!("/v2/lbaas/pools/{pool}/members")).await;
    let href = next(&first).unwrap();
    let path = href.split_once("/load-balancer").unwrap().1;
    let (_, rest) = t.get(path).await;
    assert_eq!(rest["members"].as_array().unwrap().len(), 1);
    assert_eq!(next(&rest), None);
    let (_, exact) = t.get(&format!("/v2/lbaas/pools/{pool}/members?limit=1001")).await;
    assert_eq!(exact["members"].as_array().unwrap().len(), 1_000);
    let (_, two) = t
        .get(&format!(
            "/v2/lbaas/pools/{pool}/members?limit=1&address=10.1.0.1"
        ))
        .await;
    assert!(next(&two).is_some(), "a full page of one: {two}");
}

/// As Octavia's pool API: a persistence timeout is for UDP and SCTP pools (400 on a TCP pool's create or
/// update, each with its own message), stored and answered back.
#[tokio::test]
async fn persistence_timeout_is_for_udp_and_sctp_pools_only() {
    let t = zero().await;
    let sub = vip_subnet(&t).await;
    let (s, v) = t
        .post(
            "/v2/lbaas/loadbalancers",
            full_body(&sub, "ovn", "SOURCE_IP_PORT", &[]),
        )
        .await;
    assert_eq!(s, 201, "{v}");
    let lb = id(&v["loadbalancer"]);
    let tcp_pool = id(&v["loadbalancer"]["pools"][0]);
    let udp_listener = t
        .create(
            "/v2/lbaas/listeners",
            "listener",
            json!({"loadbalancer_id": lb, "protocol": "UDP", "protocol_port": 53}),
        )
        .await;
    let sp = |timeout: Value| json!({"type": "SOURCE_IP", "persistence_timeout": timeout});

    let (s, v) = t
        .post(
            "/v2/lbaas/pools",
            json!({"pool": {"loadbalancer_id": lb, "protocol": "TCP", "lb_algorithm": "SOURCE_IP_PORT",
                "session_persistence": sp(json!(600))}}),
        )
        .await;
    assert_eq!(s, 400, "{v}");
    assert_eq!(
        v["faultstring"],
        "Validation failure: persistence_timeout and persistence_granularity is only for UDP and SCTP \
         protocol pools."
    );
    let (s, v) = t
        .put(
            &format!("/v2/lbaas/pools/{tcp_pool}"),
            json!({"pool": {"session_persistence": sp(json!(600))}}),
        )
        .await;
    assert_eq!(s, 400, "{v}");
    assert_eq!(
        v["faultstring"],
        "Validation failure: persistence_timeout and persistence_granularity is only for UDP protocol pools."
    );
    let (s, v) = t
        .put(
            &format!("/v2/lbaas/pools/{tcp_pool}"),
            json!({"pool": {"session_persistence": {"type": "SOURCE_IP"}}}),
        )
        .await;
    assert_eq!(s, 200, "{v}");
    assert!(
        v["pool"]["session_persistence"]["persistence_timeout"].is_null(),
        "{v}"
    );

    let (s, v) = t
        .post(
            "/v2/lbaas/pools",
            json!({"pool": {"listener_id": id(&udp_listener), "protocol": "UDP",
                "lb_algorithm": "SOURCE_IP_PORT", "session_persistence": sp(json!("long"))}}),
        )
        .await;
    assert_eq!(s, 400, "{v}");
    let udp_pool = t
        .create(
            "/v2/lbaas/pools",
            "pool",
            json!({"listener_id": id(&udp_listener), "protocol": "UDP",
                "lb_algorithm": "SOURCE_IP_PORT", "session_persistence": sp(json!(600))}),
        )
        .await;
    let udp_pool = id(&udp_pool);
    let (_, v) = t.get(&format!("/v2/lbaas/pools/{udp_pool}")).await;
    assert_eq!(
        v["pool"]["session_persistence"],
        json!({"type": "SOURCE_IP", "cookie_name": null,
        "persistence_timeout": 600, "persistence_granularity": null})
    );
    let (s, v) = t
        .put(
            &format!("/v2/lbaas/pools/{udp_pool}"),
            json!({"pool": {"session_persistence": sp(json!(900))}}),
        )
        .await;
    assert_eq!(s, 200, "{v}");
    let (_, v) = t.get(&format!("/v2/lbaas/pools/{udp_pool}")).await;
    assert_eq!(v["pool"]["session_persistence"]["persistence_timeout"], 900);
}

/// The ovn provider's pool update handler reads `admin_state_up` unconditionally: an update with
/// `session_persistence` and without it is stored, and the pool ends in ERROR.
#[tokio::test]
async fn an_ovn_pool_update_of_session_persistence_without_admin_state_up_ends_in_error() {
    let t = zero().await;
    let sub = vip_subnet(&t).await;
    let (s, v) = t
        .post(
            "/v2/lbaas/loadbalancers",
            full_body(&sub, "ovn", "SOURCE_IP_PORT", &[]),
        )
        .await;
    assert_eq!(s, 201, "{v}");
    let pool = id(&v["loadbalancer"]["pools"][0]);
    let path = format!("/v2/lbaas/pools/{pool}");
    let (s, v) = t
        .put(
            &path,
            json!({"pool": {"admin_state_up": true, "session_persistence": {"type": "SOURCE_IP"}}}),
        )
        .await;
    assert_eq!(s, 200, "{v}");
    let (_, v) = t.get(&path).await;
    assert_eq!(v["pool"]["provisioning_status"], "ACTIVE");
    let (s, v) = t.put(&path, json!({"pool": {"session_persistence": null}})).await;
    assert_eq!(s, 200, "{v}");
    let (_, v) = t.get(&path).await;
    assert_eq!(v["pool"]["provisioning_status"], "ERROR");
    assert!(v["pool"]["session_persistence"].is_null(), "{v}");
}
