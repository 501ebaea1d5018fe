#![allow(clippy::unwrap_used)] // test helpers outside #[test] fns
mod common;

use common::*;
use serde_json::{json, Value};

#[tokio::test]
async fn ipam_allocates_in_order_and_reports_exhaustion() {
    let t = zero().await;
    let net = t.network("n").await;
    let sub = t.subnet(&net, "10.1.0.0/29").await; // .2 - .6 usable (.1 is the gateway)
    let mut ips = Vec::new();
    for _ in 0..5 {
        let p = t.port(&net, json!({})).await;
        assert_eq!(p["fixed_ips"][0]["subnet_id"], sub.as_str());
        ips.push(p["fixed_ips"][0]["ip_address"].as_str().unwrap().to_owned());
    }
    assert_eq!(
        ips,
        vec!["10.1.0.2", "10.1.0.3", "10.1.0.4", "10.1.0.5", "10.1.0.6"]
    );
    let (s, v) = t.post("/v2.0/ports", json!({"port": {"network_id": net}})).await;
    assert_eq!(s, 409);
    assert_eq!(v["NeutronError"]["type"], "IpAddressGenerationFailure");
    assert_eq!(v["NeutronError"]["detail"], "");
}

#[tokio::test]
async fn fixed_ip_conflicts_and_invalid_addresses() {
    let t = zero().await;
    let net = t.network("n").await;
    let sub = t.subnet(&net, "10.2.0.0/24").await;
    let p = t
        .port(
            &net,
            json!({"fixed_ips": [{"subnet_id": sub, "ip_address": "10.2.0.50"}]}),
        )
        .await;
    assert_eq!(p["fixed_ips"][0]["ip_address"], "10.2.0.50");
    let (s, v) = t
        .post(
            "/v2.0/ports",
            json!({"port": {"network_id": net, "fixed_ips": [{"ip_address": "10.2.0.50"}]}}),
        )
        .await;
    assert_eq!(s, 409);
    assert_eq!(v["NeutronError"]["type"], "IpAddressAlreadyAllocated");
    let (s, v) = t
        .post(
            "/v2.0/ports",
            json!({"port": {"network_id": net, "fixed_ips": [{"subnet_id": sub, "ip_address": "10.9.0.1"}]}}),
        )
        .await;
    assert_eq!(s, 400, "{v}");
    assert_eq!(v["NeutronError"]["type"], "InvalidIpForSubnet");
    // Deleting frees the address.
    assert_eq!(t.delete(&format!("/v2.0/ports/{}", id(&p))).await.0, 204);
    t.port(&net, json!({"fixed_ips": [{"ip_address": "10.2.0.50"}]}))
        .await;
}

#[tokio::test]
async fn bulk_create_is_all_or_nothing() {
    let t = zero().await;
    let net = t.network("n").await;
    let sub = t.subnet(&net, "10.3.0.0/24").await;
    t.port(
        &net,
        json!({"fixed_ips": [{"subnet_id": sub, "ip_address": "10.3.0.77"}]}),
    )
    .await;
    let mut ports: Vec<Value> = (0..9)
        .map(|_| json!({"network_id": net, "device_owner": "compute:kuryr"}))
        .collect();
    ports.push(json!({"network_id": net, "fixed_ips": [{"ip_address": "10.3.0.77"}]}));
    let (s, v) = t.post("/v2.0/ports", json!({ "ports": ports })).await;
    assert_eq!(s, 409, "{v}");
    let (_, v) = t.get("/v2.0/ports?device_owner=compute:kuryr").await;
    assert_eq!(
        v["ports"].as_array().unwrap().len(),
        0,
        "nothing of a failed batch remains"
    );
    // The addresses the failed batch held are free again.
    let (s, v) = t
        .post("/v2.0/ports", json!({"ports": [{"network_id": net, "fixed_ips": [{"ip_address": "10.3.0.2"}]}, {"network_id": net}]}))
        .await;
    assert_eq!(s, 201, "{v}");
    assert_eq!(v["ports"][0]["fixed_ips"][0]["ip_address"], "10.3.0.2");
    assert_eq!(t.h.calls_matching("neutron.ports.bulk_create").len(), 2);
    assert_eq!(t.h.calls_matching("neutron.ports.bulk_create")[1].items, Some(2));
}

#[tokio::test]
async fn port_quota_gives_over_quota_and_covers_whole_batches() {
    let t = zero().await;
    let project = kuryr_cloudsim::profile::SERVICE_PROJECT_ID;
    let (s, v) = t
        .put(&format!("/v2.0/quotas/{project}"), json!({"quota": {"port": 3}}))
        .await;
    assert_eq!(s, 200);
    assert_eq!(v["quota"]["port"], 3);
    let net = t.network("n").await;
    t.subnet(&net, "10.4.0.0/24").await;
    t.port(&net, json!({})).await;
    let (s, v) = t
        .post(
            "/v2.0/ports",
            json!({"ports": [{"network_id": net}, {"network_id": net}, {"network_id": net}]}),
        )
        .await;
    assert_eq!(s, 409);
    assert_eq!(v["NeutronError"]["type"], "OverQuota");
    assert_eq!(
        v["NeutronError"]["message"],
        "Quota exceeded for resources: ['port']."
    );
    let (_, d) = t.get(&format!("/v2.0/quotas/{project}/details")).await;
    assert_eq!(d["quota"]["port"], json!({"limit": 3, "used": 1, "reserved": 0}));
}

#[tokio::test]
async fn if_match_revision_number_mismatch_is_412() {
    let t = zero().await;
    let net = t.network("n").await;
    let p = t.port(&net, json!({})).await;
    let rev = p["revision_number"].as_u64().unwrap();
    let path = format!("/v2.0/ports/{}", id(&p));
    let stale = format!("revision_number={}", rev + 5);
    let (s, v) = t
        .req(
            reqwest::Method::PUT,
            &path,
            Some(json!({"port": {"name": "x"}})),
            &[("If-Match", &stale)],
        )
        .await;
    assert_eq!(s, 412);
    assert_eq!(v["NeutronError"]["type"], "RevisionNumberConstraintFailed");
    let good = format!("revision_number={rev}");
    let (s, v) = t
        .req(
            reqwest::Method::PUT,
            &path,
            Some(json!({"port": {"name": "x"}})),
            &[("If-Match", &good)],
        )
        .await;
    assert_eq!(s, 200);
    assert_eq!(v["port"]["revision_number"], rev + 1);
}

#[tokio::test]
async fn list_filters_by_tags_device_and_fixed_ips() {
    let t = zero().await;
    let net = t.network("n").await;
    let sub = t.subnet(&net, "10.5.0.0/24").await;
    let a = t
        .port(&net, json!({"tags": ["kuryr", "pool"], "device_id": "vm-1"}))
        .await;
    let b = t
        .port(&net, json!({"tags": ["kuryr"], "device_owner": "compute:kuryr"}))
        .await;
    t.port(&net, json!({"name": "other"})).await;
    let ids = |v: &Value| -> Vec<String> { v["ports"].as_array().unwrap().iter().map(id).collect() };
    assert_eq!(ids(&t.get("/v2.0/ports?tags=kuryr,pool").await.1), vec![id(&a)]);
    assert_eq!(ids(&t.get("/v2.0/ports?tags=kuryr").await.1).len(), 2);
    assert_eq!(ids(&t.get("/v2.0/ports?tags-any=pool,zzz").await.1), vec![id(&a)]);
    assert_eq!(ids(&t.get("/v2.0/ports?not-tags=pool").await.1).len(), 2);
    assert_eq!(ids(&t.get("/v2.0/ports?device_id=vm-1").await.1), vec![id(&a)]);
    assert_eq!(
        ids(&t
            .get("/v2.0/ports?device_owner=compute:kuryr&device_owner=trunk:subport")
            .await
            .1),
        vec![id(&b)]
    );
    let ip = b["fixed_ips"][0]["ip_address"].as_str().unwrap();
    assert_eq!(
        ids(&t.get(&format!("/v2.0/ports?fixed_ips=ip_address%3D{ip}")).await.1),
        vec![id(&b)]
    );
    assert_eq!(
        ids(&t.get(&format!("/v2.0/ports?fixed_ips=subnet_id%3D{sub}")).await.1).len(),
        3
    );
    assert_eq!(ids(&t.get("/v2.0/ports?name=other&fields=id").await.1).len(), 1);
    let (_, v) = t.get("/v2.0/ports?limit=2").await;
    assert_eq!(v["ports"].as_array().unwrap().len(), 2);
    assert_eq!(v["ports_links"][0]["rel"], "next");
}

#[tokio::test]
async fn tag_api_replaces_adds_and_removes() {
    let t = zero().await;
    let net = t.network("n").await;
    let p = t.port(&net, json!({})).await;
    let base = format!("/v2.0/ports/{}/tags", id(&p));
    let (s, v) = t.put(&base, json!({"tags": ["a", "b"]})).await;
    assert_eq!((s, v["tags"].clone()), (200, json!(["a", "b"])));
    assert_eq!(t.put(&format!("{base}/c"), json!(null)).await.0, 201);
    assert_eq!(t.delete(&format!("{base}/a")).await.0, 204);
    let (s, v) = t.delete(&format!("{base}/zzz")).await;
    assert_eq!(
        (s, v["NeutronError"]["type"].clone()),
        (404, json!("TagNotFound"))
    );
    let (_, v) = t.get(&format!("/v2.0/ports/{}", id(&p))).await;
    assert_eq!(v["port"]["tags"], json!(["b", "c"]));
    let (_, v) = t.get("/v2.0/ports?tags=c").await;
    assert_eq!(
        v["ports"].as_array().unwrap().len(),
        1,
        "tag index follows the tag API"
    );
    let (s, _) = t
        .put(&format!("/v2.0/networks/{net}/tags"), json!({"tags": ["x"]}))
        .await;
    assert_eq!(s, 200);
}

#[tokio::test]
async fn create_body_tags_need_the_bulk_tagging_extension() {
    let mut p = kuryr_cloudsim::Profile::zero();
    p.neutron.disabled_extensions = vec!["tag-ports-during-bulk-creation".into(), "trunk".into()];
    let t = start(p).await;
    let net = t.network("n").await;
    let port = t.port(&net, json!({"tags": ["dropped"]})).await;
    assert_eq!(port["tags"], json!([]));
    let (s, v) = t.get("/v2.0/extensions/tag-ports-during-bulk-creation").await;
    assert_eq!(
        (s, v["NeutronError"]["type"].clone()),
        (404, json!("HTTPNotFound"))
    );
    let (_, v) = t.get("/v2.0/extensions").await;
    let aliases: Vec<&str> = v["extensions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["alias"].as_str().unwrap())
        .collect();
    assert!(!aliases.contains(&"trunk") && aliases.contains(&"trunk-details"));
    assert_eq!(t.get("/v2.0/trunks").await.0, 404);
}

#[tokio::test]
async fn subnet_from_pool_and_network_in_use() {
    let t = zero().await;
    let pool = t
        .create(
            "/v2.0/subnetpools",
            "subnetpool",
            json!({"name": "pods", "prefixes": ["10.128.0.0/14"], "default_prefixlen": 24}),
        )
        .await;
    let net = t.network("ns1").await;
    let s1 = t
        .create(
            "/v2.0/subnets",
            "subnet",
            json!({"network_id": net, "subnetpool_id": id(&pool), "ip_version": 4}),
        )
        .await;
    assert_eq!(s1["cidr"], "10.128.0.0/24");
    let net2 = t.network("ns2").await;
    let s2 = t
        .create(
            "/v2.0/subnets",
            "subnet",
            json!({"network_id": net2, "subnetpool_id": id(&pool), "ip_version": 4}),
        )
        .await;
    assert_eq!(s2["cidr"], "10.128.1.0/24");
    let p = t.port(&net, json!({})).await;
    let (s, v) = t.delete(&format!("/v2.0/networks/{net}")).await;
    assert_eq!(
        (s, v["NeutronError"]["type"].clone()),
        (409, json!("NetworkInUse"))
    );
    t.delete(&format!("/v2.0/ports/{}", id(&p))).await;
    assert_eq!(t.delete(&format!("/v2.0/networks/{net}")).await.0, 204);
    assert_eq!(t.get(&format!("/v2.0/subnets/{}", id(&s1))).await.0, 404);
}

#[tokio::test]
async fn address_pairs_need_vrrp_macs_on_ovn() {
    let t = zero().await;
    let net = t.network("n").await;
    t.subnet(&net, "10.6.0.0/24").await;
    let p = t.port(&net, json!({})).await;
    let path = format!("/v2.0/ports/{}", id(&p));
    let (s, v) = t.put(&path, json!({"port": {"allowed_address_pairs": [{"ip_address": "10.6.0.99", "mac_address": "fa:16:3e:00:00:99"}]}})).await;
    assert_eq!(
        (s, v["NeutronError"]["type"].clone()),
        (400, json!("InvalidVirtualMACAddress"))
    );
    let (s, v) = t.put(&path, json!({"port": {"allowed_address_pairs": [{"ip_address": "10.6.0.99", "mac_address": "00:00:5e:00:01:07"}]}})).await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(
        v["port"]["allowed_address_pairs"][0]["mac_address"],
        "00:00:5e:00:01:07"
    );
}
