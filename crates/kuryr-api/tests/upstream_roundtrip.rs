//! Objects shaped like the ones upstream Kuryr wrote (fixtures/upstream_*.json) must parse into the typed
//! CRDs, and everything that is not the os-vif blob must serialize back unchanged, so a cluster migrated from
//! upstream keeps its objects.

use kuryr_api::loadbalancer::{LbProtocol, PubIpAllocMethod, ServiceType};
use kuryr_api::policy::{EtherType, PolicyType, SgRuleDirection};
use kuryr_api::{
    finalizers, labels, ConditionStatus, KuryrLoadBalancer, KuryrNetwork, KuryrNetworkPolicy, KuryrPort,
    ResourceExt, Vif, VifType,
};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

fn fixture(name: &str) -> Value {
    let path = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn parse<T: DeserializeOwned>(value: &Value) -> T {
    serde_json::from_value(value.clone()).unwrap_or_else(|e| panic!("does not parse: {e}"))
}

/// Serializes, parses again and checks the second parse equals the first.
fn reparse<T: Serialize + DeserializeOwned + PartialEq + std::fmt::Debug>(obj: &T) -> Value {
    let json = serde_json::to_value(obj).expect("serializes");
    let again: T = serde_json::from_value(json.clone()).expect("parses its own output");
    assert_eq!(&again, obj, "typed -> JSON -> typed changed the object");
    json
}

#[test]
fn upstream_nested_vlan_kuryrport_parses_into_typed_vifs() {
    let kp: KuryrPort = parse(&fixture("upstream_kuryrport_nested_vlan.json"));
    assert_eq!(kp.spec.pod_uid, "5f6c2a1e-9d8b-4e7a-b3c2-1f0e9d8c7b6a");
    assert_eq!(kp.spec.pod_node_name, "worker-1");
    assert!(!kp.spec.pod_static);
    assert_eq!(kp.finalizers(), [finalizers::KURYRPORT]);
    assert_eq!(
        kp.labels().get(labels::NODE_NAME).map(String::as_str),
        Some("worker-1")
    );

    let status = kp.status.as_ref().unwrap();
    let (ifname, eth0) = status.default_vif().unwrap();
    assert_eq!(ifname, "eth0");
    assert_eq!(eth0.vif_type, VifType::NestedVlan);
    assert_eq!(eth0.port_id, "8b7c3d2e-1f0a-4b9c-8d7e-6f5a4b3c2d1e");
    assert_eq!(eth0.network_id, "c4d3e2f1-a0b9-4c8d-9e7f-6a5b4c3d2e1f");
    assert_eq!(eth0.mac, "fa:16:3e:5d:21:9b");
    assert_eq!(eth0.vlan_id, Some(3018));
    assert_eq!(eth0.mtu, Some(1442));
    assert_eq!(eth0.vif_name.as_deref(), Some("tap8b7c3d2e-1f"));
    assert!(eth0.active);
    let ip = eth0.primary_ip().unwrap();
    assert_eq!(
        (ip.address.as_str(), ip.cidr.as_str()),
        ("10.0.4.23", "10.0.4.0/26")
    );
    assert_eq!(ip.gateway.as_deref(), Some("10.0.4.1"));
    assert_eq!(ip.routes.len(), 1);
    assert_eq!(ip.routes[0].cidr, "169.254.169.254/32");

    let eth1 = &status.vifs["eth1"];
    assert!(!eth1.default);
    assert_eq!(eth1.vif.vif_type, VifType::NestedMacvlan);
    assert_eq!(eth1.vif.ips[0].address, "172.16.8.41");
    assert_eq!(eth1.vif.ips[0].gateway, None);
    assert!(!eth1.vif.active);
    assert!(!status.all_active());

    // Written back, the VIFs are in the typed shape and parse to the same thing.
    let json = reparse(&kp);
    assert_eq!(json["status"]["vifs"]["eth0"]["vif"]["type"], "nested-vlan");
    assert_eq!(json["status"]["vifs"]["eth0"]["vif"]["vlanId"], 3018);
    assert!(json["status"]["vifs"]["eth0"]["vif"]
        .get("versioned_object.data")
        .is_none());
}

#[test]
fn upstream_ovs_kuryrport_parses_as_neutron_vif() {
    let kp: KuryrPort = parse(&fixture("upstream_kuryrport_neutron_vif.json"));
    let (_, vif) = kp.status.as_ref().unwrap().default_vif().unwrap();
    assert_eq!(vif.vif_type, VifType::NeutronVif);
    assert_eq!(vif.bridge_name.as_deref(), Some("br-int"));
    assert_eq!(vif.vlan_id, None);
    assert_eq!(vif.ips[0].address, "fd00:10::2c");
    assert_eq!(vif.ips[0].cidr, "fd00:10::/64");
    assert!(!vif.active);
    reparse(&kp);
}

#[test]
fn upstream_kuryrport_without_vifs_round_trips_unchanged() {
    let original = fixture("upstream_kuryrport_new.json");
    let kp: KuryrPort = parse(&original);
    assert!(kp.status.as_ref().unwrap().vifs.is_empty());
    assert!(!kp.status.as_ref().unwrap().all_active());
    assert_eq!(reparse(&kp), original);
}

#[test]
fn typed_kuryrport_round_trips_unchanged() {
    let original = fixture("kuryrport_typed.json");
    let kp: KuryrPort = parse(&original);
    assert_eq!(kp.spec.vif_type, Some(VifType::NestedVlan));
    let status = kp.status.as_ref().unwrap();
    assert!(status.all_active());
    assert_eq!(status.conditions[0].status, ConditionStatus::True);
    let vif = &status.vifs["eth0"].vif;
    assert_eq!(
        vif.trunk_id.as_deref(),
        Some("e5f6a7b8-c9d0-4e1f-a2b3-c4d5e6f7a8b9")
    );
    assert_eq!(vif.parent_ifname.as_deref(), Some("eth0"));
    assert_eq!(vif.parent_mac.as_deref(), Some("fa:16:3e:4b:0c:2d"));
    assert_eq!(reparse(&kp), original);
}

#[test]
fn a_vif_written_before_parent_mac_existed_still_parses_and_stays_without_it() {
    let mut value = fixture("kuryrport_typed.json")["status"]["vifs"]["eth0"]["vif"].clone();
    value.as_object_mut().unwrap().remove("parentMac");
    let vif = Vif::from_value(value.clone()).unwrap();
    assert_eq!(vif.parent_mac, None);
    assert_eq!(serde_json::to_value(&vif).unwrap(), value);
}

#[test]
fn typed_fields_win_over_leftover_ovo_keys() {
    // A merge patch of the typed VIF over a migrated object keeps upstream's keys next to ours.
    let mut value = fixture("kuryrport_typed.json")["status"]["vifs"]["eth0"]["vif"].clone();
    let ovo = fixture("upstream_kuryrport_neutron_vif.json")["status"]["vifs"]["eth0"]["vif"].clone();
    for (k, v) in ovo.as_object().unwrap() {
        value[k] = v.clone();
    }
    let vif = Vif::from_value(value).unwrap();
    assert_eq!(vif.vif_type, VifType::NestedVlan);
    assert_eq!(vif.vlan_id, Some(3018));
}

#[test]
fn unknown_ovo_class_is_a_clear_error() {
    let mut value = fixture("upstream_kuryrport_neutron_vif.json")["status"]["vifs"]["eth0"]["vif"].clone();
    value["versioned_object.name"] = "VIFHostDevice".into();
    let err = Vif::from_value(value).unwrap_err().to_string();
    assert!(err.contains("unknown VIF class VIFHostDevice"), "{err}");
}

#[test]
fn upstream_kuryrnetwork_round_trips_unchanged() {
    let original = fixture("upstream_kuryrnetwork.json");
    let kns: KuryrNetwork = parse(&original);
    assert_eq!(kns.spec.ns_name, "shop");
    assert_eq!(kns.spec.ns_labels["team"], "payments");
    let status = kns.status.as_ref().unwrap();
    assert_eq!(status.subnet_cidr.as_deref(), Some("10.0.4.0/26"));
    assert_eq!(status.populated, Some(true));
    assert_eq!(kns.finalizers(), [finalizers::KURYRNETWORK]);
    assert_eq!(reparse(&kns), original);
}

#[test]
fn upstream_kuryrloadbalancer_round_trips_unchanged() {
    let original = fixture("upstream_kuryrloadbalancer.json");
    let klb: KuryrLoadBalancer = parse(&original);
    let spec = &klb.spec;
    assert_eq!(spec.service_type, Some(ServiceType::LoadBalancer));
    assert_eq!(spec.ip.as_deref(), Some("10.0.0.143"));
    assert_eq!(spec.lb_ip.as_deref(), Some("203.0.113.40"));
    assert_eq!(spec.ports.len(), 2);
    assert_eq!(spec.ports[0].protocol, LbProtocol::Tcp);
    assert_eq!(spec.ports[1].target_port, "metrics");
    assert_eq!(spec.timeout_client_data, Some(0));
    assert_eq!(spec.endpoint_slices[0].endpoints.len(), 2);
    assert_eq!(
        spec.endpoint_slices[0].endpoints[0]
            .target_ref
            .as_ref()
            .unwrap()
            .name
            .as_deref(),
        Some("web-7d4b9c8f6-x2kqp")
    );
    let status = klb.status.as_ref().unwrap();
    let lb = status.loadbalancer.as_ref().unwrap();
    assert_eq!(lb.port_id, "a9b8c7d6-e5f4-4a3b-9c2d-1e0f9a8b7c6d");
    assert_eq!(lb.provisioning_status, None);
    assert_eq!(
        (status.listeners.len(), status.pools.len(), status.members.len()),
        (2, 2, 2)
    );
    assert_eq!(status.listeners[0].timeout_client_data, Some(50000));
    assert_eq!(
        status.service_pub_ip_info.as_ref().unwrap().alloc_method,
        PubIpAllocMethod::User
    );
    assert_eq!(klb.finalizers(), [finalizers::KURYRLOADBALANCER]);
    assert_eq!(reparse(&klb), original);
}

#[test]
fn upstream_kuryrnetworkpolicy_round_trips_unchanged() {
    let original = fixture("upstream_kuryrnetworkpolicy.json");
    let knp: KuryrNetworkPolicy = parse(&original);
    let spec = &knp.spec;
    assert_eq!(spec.policy_types, [PolicyType::Ingress, PolicyType::Egress]);
    assert_eq!(spec.ingress_sg_rules[0].affected_pods.len(), 2);
    assert_eq!(spec.ingress_sg_rules[0].namespace.as_deref(), Some("edge"));
    assert_eq!(spec.egress_sg_rules[1].sg_rule.ethertype, EtherType::IPv6);
    assert_eq!(spec.egress_sg_rules[1].sg_rule.protocol, None);
    assert_eq!(spec.pod_selector.match_labels.as_ref().unwrap()["app"], "web");
    let status = knp.status.as_ref().unwrap();
    assert_eq!(status.security_group_rules.len(), 2);
    assert_eq!(status.security_group_rules[1].direction, SgRuleDirection::Ingress);
    // The created rule is the desired one, as Neutron compares them.
    assert!(status.security_group_rules[1].same_rule(&spec.ingress_sg_rules[0].sg_rule));
    assert!(!status.security_group_rules[0].same_rule(&spec.ingress_sg_rules[0].sg_rule));
    assert_eq!(reparse(&knp), original);
}

#[test]
fn ovo_without_port_id_or_network_is_a_clear_error() {
    let vif = fixture("upstream_kuryrport_neutron_vif.json")["status"]["vifs"]["eth0"]["vif"].clone();

    let mut no_id = vif.clone();
    no_id["versioned_object.data"]
        .as_object_mut()
        .unwrap()
        .remove("id");
    let err = Vif::from_value(no_id).unwrap_err().to_string();
    assert!(err.contains("VIFOpenVSwitch has no string id"), "{err}");

    let mut no_network = vif;
    no_network["versioned_object.data"]
        .as_object_mut()
        .unwrap()
        .remove("network");
    let err = Vif::from_value(no_network).unwrap_err().to_string();
    assert!(err.contains("has no network"), "{err}");
}

#[test]
fn typed_vif_missing_required_fields_names_them() {
    let err = Vif::from_value(serde_json::json!({"type": "nested-vlan", "portId": "p"}))
        .unwrap_err()
        .to_string();
    assert!(err.contains("networkId"), "{err}");
}
