#![allow(clippy::unwrap_used)] // test helpers outside #[test] fns
mod common;

use common::*;
use serde_json::json;

#[tokio::test]
async fn security_group_rules_reject_duplicates_and_bulk_is_atomic() {
    let t = zero().await;
    let sg = t
        .create("/v2.0/security-groups", "security_group", json!({"name": "np"}))
        .await;
    assert_eq!(
        sg["security_group_rules"].as_array().unwrap().len(),
        2,
        "default egress rules"
    );
    let sgid = id(&sg);
    let rule = json!({"security_group_id": sgid, "direction": "ingress", "protocol": "tcp",
                      "port_range_min": 80, "port_range_max": 80, "remote_ip_prefix": "10.0.0.5/32"});
    let r = t
        .create("/v2.0/security-group-rules", "security_group_rule", rule.clone())
        .await;
    assert_eq!(r["normalized_cidr"], "10.0.0.5/32");
    let (s, v) = t
        .post("/v2.0/security-group-rules", json!({"security_group_rule": rule}))
        .await;
    assert_eq!(s, 409);
    assert_eq!(v["NeutronError"]["type"], "SecurityGroupRuleExists");
    assert!(v["NeutronError"]["message"].as_str().unwrap().contains(&id(&r)));
    // Same rule with the protocol as a number is still a duplicate.
    let (s, _) = t
        .post(
            "/v2.0/security-group-rules",
            json!({"security_group_rule": {"security_group_id": sgid, "direction": "ingress",
            "protocol": "6", "port_range_min": 80, "port_range_max": 80, "remote_ip_prefix": "10.0.0.5/32"}}),
        )
        .await;
    assert_eq!(s, 409);
    let bulk = json!({"security_group_rules": [
        {"security_group_id": sgid, "direction": "ingress", "protocol": "udp", "port_range_min": 53, "remote_group_id": sgid},
        {"security_group_id": sgid, "direction": "ingress", "protocol": "tcp", "port_range_min": 80, "port_range_max": 80, "remote_ip_prefix": "10.0.0.5/32"},
    ]});
    assert_eq!(t.post("/v2.0/security-group-rules", bulk).await.0, 409);
    let (_, v) = t
        .get(&format!("/v2.0/security-group-rules?security_group_id={sgid}"))
        .await;
    assert_eq!(
        v["security_group_rules"].as_array().unwrap().len(),
        3,
        "nothing of the failed batch stored"
    );
    let (s, v) = t
        .post("/v2.0/security-group-rules", json!({"security_group_rules": [
            {"security_group_id": sgid, "direction": "ingress", "protocol": "udp", "port_range_min": 53, "remote_group_id": sgid},
            {"security_group_id": sgid, "direction": "egress", "ethertype": "IPv6", "remote_ip_prefix": "fd00::/64"}]}))
        .await;
    assert_eq!(s, 201, "{v}");
    assert_eq!(v["security_group_rules"][0]["port_range_max"], 53);
    let (s, v) = t
        .post(
            "/v2.0/security-group-rules",
            json!({"security_group_rule": {"security_group_id": sgid, "direction": "ingress",
            "remote_ip_prefix": "10.0.0.0/8", "remote_group_id": sgid}}),
        )
        .await;
    assert_eq!(
        (s, v["NeutronError"]["type"].clone()),
        (400, json!("SecurityGroupRemoteGroupAndRemoteIpPrefix"))
    );
    let net = t.network("n").await;
    t.port(&net, json!({"security_groups": [sgid]})).await;
    let (s, v) = t.delete(&format!("/v2.0/security-groups/{sgid}")).await;
    assert_eq!(
        (s, v["NeutronError"]["type"].clone()),
        (409, json!("SecurityGroupInUse"))
    );
}

#[tokio::test]
async fn ports_without_groups_get_the_project_default_group() {
    let t = zero().await;
    let net = t.network("n").await;
    let p = t.port(&net, json!({})).await;
    let sg = p["security_groups"][0].as_str().unwrap().to_owned();
    let (_, v) = t.get(&format!("/v2.0/security-groups/{sg}")).await;
    assert_eq!(v["security_group"]["name"], "default");
    assert_eq!(
        v["security_group"]["security_group_rules"]
            .as_array()
            .unwrap()
            .len(),
        4
    );
}

#[tokio::test]
async fn routers_interfaces_and_floating_ips() {
    let t = zero().await;
    let ext = t
        .create(
            "/v2.0/networks",
            "network",
            json!({"name": "public", "router:external": true}),
        )
        .await;
    t.subnet(&id(&ext), "203.0.113.0/24").await;
    let net = t.network("pods").await;
    let sub = t.subnet(&net, "10.8.0.0/24").await;
    let r = t
        .create(
            "/v2.0/routers",
            "router",
            json!({"name": "r", "external_gateway_info": {"network_id": id(&ext)}}),
        )
        .await;
    assert_eq!(
        r["external_gateway_info"]["external_fixed_ips"][0]["ip_address"],
        "203.0.113.2"
    );
    let rid = id(&r);
    let port = t.port(&net, json!({})).await;
    let fip = t
        .create(
            "/v2.0/floatingips",
            "floatingip",
            json!({"floating_network_id": id(&ext)}),
        )
        .await;
    let fpath = format!("/v2.0/floatingips/{}", id(&fip));
    let (s, v) = t.put(&fpath, json!({"floatingip": {"port_id": id(&port)}})).await;
    assert_eq!(
        (s, v["NeutronError"]["type"].clone()),
        (404, json!("ExternalGatewayForFloatingIPNotFound"))
    );
    let (s, v) = t
        .put(
            &format!("/v2.0/routers/{rid}/add_router_interface"),
            json!({"subnet_id": sub}),
        )
        .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["subnet_id"], sub.as_str());
    let (s, v) = t
        .put(
            &format!("/v2.0/routers/{rid}/add_router_interface"),
            json!({"subnet_id": sub}),
        )
        .await;
    assert_eq!(s, 400, "{v}");
    let (s, v) = t.put(&fpath, json!({"floatingip": {"port_id": id(&port)}})).await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(
        v["floatingip"]["fixed_ip_address"],
        port["fixed_ips"][0]["ip_address"]
    );
    assert_eq!(v["floatingip"]["router_id"], rid.as_str());
    assert_eq!(v["floatingip"]["status"], "ACTIVE");
    let (s, v) = t
        .put(
            &format!("/v2.0/routers/{rid}/remove_router_interface"),
            json!({"subnet_id": sub}),
        )
        .await;
    assert_eq!(
        (s, v["NeutronError"]["type"].clone()),
        (409, json!("RouterInterfaceInUseByFloatingIP"))
    );
    let (s, v) = t.put(&fpath, json!({"floatingip": {"port_id": null}})).await;
    assert_eq!((s, v["floatingip"]["status"].clone()), (200, json!("DOWN")));
    let (s, v) = t.delete(&format!("/v2.0/routers/{rid}")).await;
    assert_eq!(
        (s, v["NeutronError"]["type"].clone()),
        (409, json!("RouterInUse"))
    );
    let (_, v) = t.get("/v2.0/ports?device_owner=network:router_interface").await;
    let rport = id(&v["ports"][0]);
    let (s, v) = t.delete(&format!("/v2.0/ports/{rport}")).await;
    assert_eq!(
        (s, v["NeutronError"]["type"].clone()),
        (409, json!("L3PortInUse"))
    );
    assert_eq!(
        t.put(
            &format!("/v2.0/routers/{rid}/remove_router_interface"),
            json!({"subnet_id": sub})
        )
        .await
        .0,
        200
    );
    assert_eq!(t.delete(&fpath).await.0, 204);
    assert_eq!(t.delete(&format!("/v2.0/routers/{rid}")).await.0, 204);
}

#[tokio::test]
async fn network_and_subnet_updates_refuse_read_only_attributes() {
    let t = common::zero().await;
    let net = t.network("upd").await;
    let sub = t
        .create(
            "/v2.0/subnets",
            "subnet",
            json!({"network_id": net, "cidr": "10.9.0.0/24", "ip_version": 4}),
        )
        .await["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let (s, v) = t
        .put(
            &format!("/v2.0/subnets/{sub}"),
            json!({"subnet": {"cidr": "10.8.0.0/24"}}),
        )
        .await;
    assert_eq!(
        (s, v["NeutronError"]["message"].as_str()),
        (400, Some("Cannot update read-only attribute cidr"))
    );
    let (s, _) = t
        .put(
            &format!("/v2.0/networks/{net}"),
            json!({"network": {"status": "DOWN"}}),
        )
        .await;
    assert_eq!(s, 400);
    let (s, v) = t
        .put(
            &format!("/v2.0/networks/{net}"),
            json!({"network": {"mtu": 9000}}),
        )
        .await;
    assert_eq!(
        (s, v["NeutronError"]["type"].as_str()),
        (400, Some("InvalidInput"))
    );
    let (s, v) = t
        .put(
            &format!("/v2.0/networks/{net}"),
            json!({"network": {"mtu": 1400, "name": "n2"}}),
        )
        .await;
    assert_eq!((s, v["network"]["mtu"].as_u64()), (200, Some(1400)));
}

#[tokio::test]
async fn another_project_in_a_create_takes_the_admin_role() {
    let mut profile = kuryr_cloudsim::Profile::zero();
    profile
        .keystone
        .users
        .push(kuryr_cloudsim::profile::KeystoneUser {
            id: "0000000000000000000000000000000c".to_owned(),
            name: "tenant".to_owned(),
            password: "tenant-secret".to_owned(),
            project: "service".to_owned(),
            roles: vec!["member".to_owned(), "reader".to_owned()],
            ..Default::default()
        });
    let mut t = start(profile).await;
    let other = kuryr_cloudsim::profile::ADMIN_PROJECT_ID;
    // The admin (kuryr) may make a network in another project: it is that project's.
    let (s, v) = t
        .post(
            "/v2.0/networks",
            json!({"network": {"name": "a", "project_id": other}}),
        )
        .await;
    assert_eq!(s, 201, "{v}");
    assert_eq!(v["network"]["project_id"], other);
    // A member may not: Neutron's 400 with its message, nothing made.
    t.token = Some(t.login("tenant", "tenant-secret").await);
    let (s, v) = t
        .post(
            "/v2.0/networks",
            json!({"network": {"name": "b", "tenant_id": other}}),
        )
        .await;
    assert_eq!(s, 400, "{v}");
    assert!(v.to_string().contains("requires admin privileges"), "{v}");
    let (s, v) = t
        .post(
            "/v2.0/ports",
            json!({"port": {"network_id": "x", "project_id": other}}),
        )
        .await;
    assert_eq!(s, 400, "{v}");
    // Its own project, named or not, is fine.
    let own = kuryr_cloudsim::profile::SERVICE_PROJECT_ID;
    let (s, v) = t
        .post(
            "/v2.0/networks",
            json!({"network": {"name": "c", "project_id": own}}),
        )
        .await;
    assert_eq!(s, 201, "{v}");
    let (_, v) = t.get("/v2.0/networks?name=b").await;
    assert_eq!(v["networks"].as_array().map(Vec::len), Some(0), "{v}");
}
