#![allow(clippy::unwrap_used)] // test helpers outside #[test] fns
mod common;

use common::*;
use kuryr_cloudsim::profile::Dist;
use kuryr_cloudsim::Profile;
use serde_json::{json, Value};

async fn setup(t: &T) -> (String, Value, String) {
    let net = t.network("n").await;
    t.subnet(&net, "10.7.0.0/24").await;
    let parent = t
        .port(&net, json!({"name": "vm0", "binding:host_id": "node1"}))
        .await;
    let trunk = t
        .create(
            "/v2.0/trunks",
            "trunk",
            json!({"port_id": id(&parent), "name": "t0"}),
        )
        .await;
    assert_eq!(trunk["status"], "ACTIVE");
    (net, trunk, id(&parent))
}

fn sub(port: &str, seg: u32) -> Value {
    json!({"port_id": port, "segmentation_type": "vlan", "segmentation_id": seg})
}

#[tokio::test]
async fn trunk_rules_match_the_trunk_plugin() {
    let t = zero().await;
    let (net, trunk, parent) = setup(&t).await;
    let tid = id(&trunk);
    let a = id(&t.port(&net, json!({"device_owner": "compute:kuryr"})).await);
    let b = id(&t.port(&net, json!({})).await);
    let (s, v) = t
        .put(
            &format!("/v2.0/trunks/{tid}/add_subports"),
            json!({"sub_ports": [sub(&a, 101)]}),
        )
        .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(
        v["sub_ports"][0]["segmentation_id"], 101,
        "answer is the unwrapped trunk"
    );

    let expect = |r: (u16, Value), status: u16, ty: &str| {
        assert_eq!(r.0, status, "{}", r.1);
        assert_eq!(r.1["NeutronError"]["type"], ty);
    };
    // Segmentation id taken on this trunk.
    expect(
        t.put(
            &format!("/v2.0/trunks/{tid}/add_subports"),
            json!({"sub_ports": [sub(&b, 101)]}),
        )
        .await,
        409,
        "DuplicateSubPort",
    );
    // A port is a subport of one trunk only.
    expect(
        t.put(
            &format!("/v2.0/trunks/{tid}/add_subports"),
            json!({"sub_ports": [sub(&a, 102)]}),
        )
        .await,
        409,
        "TrunkPortInUse",
    );
    // The parent can't be its own subport.
    expect(
        t.put(
            &format!("/v2.0/trunks/{tid}/add_subports"),
            json!({"sub_ports": [sub(&parent, 103)]}),
        )
        .await,
        409,
        "ParentPortInUse",
    );
    // Out of range.
    expect(
        t.put(
            &format!("/v2.0/trunks/{tid}/add_subports"),
            json!({"sub_ports": [sub(&b, 4095)]}),
        )
        .await,
        400,
        "InvalidInput",
    );
    // A subport can't become a trunk parent; a parent can't get a second trunk.
    expect(
        t.post("/v2.0/trunks", json!({"trunk": {"port_id": a}})).await,
        409,
        "TrunkPortInUse",
    );
    expect(
        t.post("/v2.0/trunks", json!({"trunk": {"port_id": parent}}))
            .await,
        409,
        "ParentPortInUse",
    );
    // Batches are atomic: b would be fine, but the duplicate fails the whole call.
    expect(
        t.put(
            &format!("/v2.0/trunks/{tid}/add_subports"),
            json!({"sub_ports": [sub(&b, 200), sub(&a, 201)]}),
        )
        .await,
        409,
        "TrunkPortInUse",
    );
    let (_, v) = t.get(&format!("/v2.0/trunks/{tid}/get_subports")).await;
    assert_eq!(v["sub_ports"].as_array().unwrap().len(), 1);

    // Subports and parents can't be deleted while in the trunk.
    expect(
        t.delete(&format!("/v2.0/ports/{a}")).await,
        409,
        "PortInUseAsSubPort",
    );
    expect(
        t.delete(&format!("/v2.0/ports/{parent}")).await,
        409,
        "PortInUseAsTrunkParent",
    );
    // The subport looks like one, and the parent shows trunk_details.
    let (_, v) = t.get(&format!("/v2.0/ports/{a}")).await;
    assert_eq!(v["port"]["device_owner"], "trunk:subport");
    assert_eq!(v["port"]["binding:profile"]["tag"], 101);
    let (_, v) = t.get(&format!("/v2.0/ports/{parent}")).await;
    assert_eq!(v["port"]["trunk_details"]["trunk_id"], tid.as_str());
    assert_eq!(v["port"]["trunk_details"]["sub_ports"][0]["port_id"], a.as_str());
    assert!(v["port"]["trunk_details"]["sub_ports"][0]["mac_address"]
        .as_str()
        .unwrap()
        .starts_with("fa:16:3e"));

    let (s, _) = t
        .put(
            &format!("/v2.0/trunks/{tid}/remove_subports"),
            json!({"sub_ports": [{"port_id": a}]}),
        )
        .await;
    assert_eq!(s, 200);
    expect(
        t.put(
            &format!("/v2.0/trunks/{tid}/remove_subports"),
            json!({"sub_ports": [{"port_id": a}]}),
        )
        .await,
        404,
        "SubPortNotFound",
    );
    let (_, v) = t.get(&format!("/v2.0/ports/{a}")).await;
    assert_eq!(v["port"]["device_owner"], "");
    assert_eq!(t.delete(&format!("/v2.0/ports/{a}")).await.0, 204);
    assert_eq!(t.delete(&format!("/v2.0/trunks/{tid}")).await.0, 204);
    assert_eq!(t.delete(&format!("/v2.0/ports/{parent}")).await.0, 204);
}

#[tokio::test]
async fn subport_goes_active_after_the_delay_once_its_parent_is_active() {
    let mut p = Profile::default().with_auth(kuryr_cloudsim::AuthMode::Noauth);
    p.neutron.port_active_delay = Dist::Ms(100.0);
    p.neutron.subport_active_delay = Dist::Ms(150.0);
    let t = start(p).await;
    let (net, trunk, parent) = setup(&t).await;
    let a = id(&t.port(&net, json!({})).await);
    t.put(
        &format!("/v2.0/trunks/{}/add_subports", id(&trunk)),
        json!({"sub_ports": [sub(&a, 7)]}),
    )
    .await;
    let (_, v) = t.get(&format!("/v2.0/ports/{a}")).await;
    assert_eq!(v["port"]["status"], "DOWN");
    let started = std::time::Instant::now();
    t.wait_for(&format!("/v2.0/ports/{parent}"), |v| {
        v["port"]["status"] == "ACTIVE"
    })
    .await;
    t.wait_for(&format!("/v2.0/ports/{a}"), |v| v["port"]["status"] == "ACTIVE")
        .await;
    assert!(started.elapsed() >= std::time::Duration::from_millis(100));
    // Unbinding the parent takes its subports down.
    t.put(
        &format!("/v2.0/ports/{parent}"),
        json!({"port": {"binding:host_id": ""}}),
    )
    .await;
    let (_, v) = t.get(&format!("/v2.0/ports/{a}")).await;
    assert_eq!(v["port"]["status"], "DOWN");
    let (_, v) = t.get("/v2.0/ports?status=DOWN").await;
    assert_eq!(v["ports"].as_array().unwrap().len(), 2);
}

#[tokio::test]
async fn subports_stay_down_while_the_parent_is_unbound() {
    let t = zero().await;
    let net = t.network("n").await;
    let parent = t.port(&net, json!({})).await;
    let trunk = t
        .create(
            "/v2.0/trunks",
            "trunk",
            json!({"port_id": id(&parent), "sub_ports": []}),
        )
        .await;
    let a = id(&t.port(&net, json!({})).await);
    t.put(
        &format!("/v2.0/trunks/{}/add_subports", id(&trunk)),
        json!({"sub_ports": [sub(&a, 9)]}),
    )
    .await;
    let (_, v) = t.get(&format!("/v2.0/ports/{a}")).await;
    assert_eq!(v["port"]["status"], "DOWN");
    t.put(
        &format!("/v2.0/ports/{}", id(&parent)),
        json!({"port": {"binding:host_id": "node1"}}),
    )
    .await;
    let (_, v) = t.get(&format!("/v2.0/ports/{a}")).await;
    assert_eq!(
        v["port"]["status"], "ACTIVE",
        "zero-latency profile: immediate once the parent is up"
    );
}
