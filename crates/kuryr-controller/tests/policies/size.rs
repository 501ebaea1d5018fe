//! A namespace of 500 NetworkPolicies through the policy controller's Neutron path (watch objects →
//! `inputs::build` → compile → observe → diff → execute) on an in-process cloudsim whose Neutron refuses
//! bodies over 112 KiB, as a proxy in front of Neutron may: every group and rule is made, every pod port
//! carries exactly its groups (302 on the busiest port), a policy of 1,160 rules goes in the two bodies it
//! needs, the calls are the formula of docs/network-policy.md ("Size and writes"), and a resync is two
//! lists.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use kuryr_api::{KuryrPort, Namespace, NetworkPolicy, Service, SlimPod};
use kuryr_cloudsim::Profile;
use kuryr_controller::policies::controller::{converge, SyncReport};
use kuryr_controller::policies::inputs::{build, Objects};
use kuryr_controller::policies::neutron::Target;
use kuryr_controller::policies::PolicyConfig;
use kuryr_core::policy::Direction;
use kuryr_openstack::neutron::ports::{self, CreatePort, FixedIpRequest};
use kuryr_openstack::neutron::security_groups;
use kuryr_openstack::neutron::{networks, quotas, subnets, Filter};
use kuryr_openstack::{Cloud, Owner};
use serde_json::{json, Value};

use crate::sim::connect;

const CLUSTER: &str = "size";
const NS: &str = "big";
const APPS: [&str; 5] = ["a0", "a1", "a2", "a3", "a4"];
const PODS_PER_APP: usize = 10;
const POLICIES: usize = 500;
/// The Neutron body limit of this test (oslo sizelimit's default, as a proxy in front may set it).
const LIMIT: usize = 114_688;

fn obj<T: serde::de::DeserializeOwned>(v: Value) -> Arc<T> {
    Arc::new(serde_json::from_value(v).unwrap())
}

struct World {
    namespaces: Vec<Arc<Namespace>>,
    pods: Vec<Arc<SlimPod>>,
    kuryrports: Vec<Arc<KuryrPort>>,
    policies: Vec<Arc<NetworkPolicy>>,
    services: Vec<Arc<Service>>,
}

impl World {
    fn objects(&self) -> Objects<'_> {
        Objects {
            namespaces: &self.namespaces,
            pods: &self.pods,
            kuryrports: &self.kuryrports,
            policies: &self.policies,
            services: &self.services,
        }
    }
}

/// Policy `i` isolates every pod (even `i`) or app `a<i%5>` (odd `i`) for ingress from app `a<(i+1)%5>`
/// on TCP `1000+i` and UDP `20000+i`. Policy 0 is the large one: ingress from everything outside the
/// private ranges (a CIDR subtraction of 58 prefixes) on 20 ports: 1,160 rules, over one body.
fn policy(i: usize) -> Value {
    let app = APPS[i % APPS.len()];
    let peer = APPS[(i + 1) % APPS.len()];
    let selector = if i.is_multiple_of(2) {
        json!({})
    } else {
        json!({"matchLabels": {"app": app}})
    };
    let ingress = if i == 0 {
        let ports: Vec<Value> = (0..20).map(|p| json!({"port": 3000 + p})).collect();
        json!([{"from": [{"ipBlock": {"cidr": "0.0.0.0/0",
                 "except": ["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10",
                            "169.254.0.0/16", "198.18.0.0/15", "127.0.0.0/8"]}}],
                "ports": ports}])
    } else {
        json!([{"from": [{"podSelector": {"matchLabels": {"app": peer}}}],
                "ports": [{"port": 1000 + i}, {"port": 20000 + i, "protocol": "UDP"}]}])
    };
    json!({"metadata": {"namespace": NS, "name": format!("np-{i:03}")},
           "spec": {"podSelector": selector, "policyTypes": ["Ingress"], "ingress": ingress}})
}

async fn world(cloud: &Cloud) -> World {
    let net = networks::create(cloud, &networks::CreateNetwork::named("size-pods"), &[])
        .await
        .unwrap();
    let subnet = subnets::create(cloud, &subnets::CreateSubnet::v4(&net.id, "10.0.0.0/16"), &[])
        .await
        .unwrap();
    let mut w = World {
        namespaces: vec![obj(json!({"metadata": {"name": NS}}))],
        pods: Vec::new(),
        kuryrports: Vec::new(),
        policies: (0..POLICIES).map(|i| obj(policy(i))).collect(),
        services: Vec::new(),
    };
    let mut reqs = Vec::new();
    let mut names = Vec::new();
    for app in APPS {
        for n in 0..PODS_PER_APP {
            let name = format!("{app}-{n}");
            let uid = format!("uid-{name}");
            reqs.push(
                CreatePort {
                    fixed_ips: vec![FixedIpRequest {
                        subnet_id: Some(subnet.id.clone()),
                        ip_address: None,
                    }],
                    ..CreatePort::on_network(&net.id)
                }
                .tagged(Owner::new(CLUSTER, "KuryrPort", &uid).tags().unwrap()),
            );
            w.pods.push(obj(json!({
                "metadata": {"namespace": NS, "name": name, "uid": uid, "labels": {"app": app}},
                "spec": {"containers": [{"name": "c"}]}
            })));
            names.push(name);
        }
    }
    let made = ports::bulk_create(cloud, &reqs).await.unwrap();
    for (name, port) in names.iter().zip(&made) {
        w.kuryrports.push(obj(json!({
            "apiVersion": "openstack.org/v1", "kind": "KuryrPort",
            "metadata": {"namespace": NS, "name": name},
            "spec": {"podUid": "u", "podNodeName": "n"},
            "status": {"vifs": {"eth0": {"default": true, "vif": {"type": "nested-vlan", "portId": port.id,
                "networkId": net.id, "mac": port.mac_address,
                "ips": [{"address": port.ip().unwrap_or_default(), "cidr": "10.0.0.0/16"}]}}}}
        })));
    }
    w
}

async fn sync(cloud: &Cloud, w: &World, config: &PolicyConfig) -> (SyncReport, BTreeMap<String, u64>) {
    let before = cloud.metrics().snapshot();
    let target = Target {
        cloud,
        cluster_id: CLUSTER,
        project_id: &cloud.project_id().unwrap_or_default(),
        namespace_projects: &BTreeMap::new(),
    };
    let inputs = build(&w.objects(), true);
    let report = converge(&target, &inputs, &config.compile_options())
        .await
        .unwrap()
        .unwrap();
    let after = cloud.metrics().snapshot();
    let calls = after
        .calls
        .keys()
        .map(|(op, _)| (op.clone(), after.count(op) - before.count(op)))
        .filter(|(_, n)| *n > 0)
        .collect();
    (report, calls)
}

#[tokio::test]
async fn a_namespace_of_500_policies_is_enforced_in_bodies_that_fit() {
    let mut profile = Profile::zero();
    profile.max_request_body.neutron = Some(LIMIT);
    // The client's own rate limit (20 calls/s by default) would make this about two minutes of waiting.
    let (cloud, _sim) = connect(profile, Some(LIMIT)).await;
    let project = cloud.project_id().unwrap();
    let limits: BTreeMap<String, i64> = [
        ("security_group", 1000),
        ("security_group_rule", 10_000),
        ("port", 100),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), *v))
    .collect();
    quotas::update(&cloud, &project, &limits).await.unwrap();
    let w = world(&cloud).await;
    let opts = PolicyConfig {
        enabled: true,
        ..PolicyConfig::default()
    };

    let (report, calls) = sync(&cloud, &w, &opts).await;
    let compiled = &report.compiled;
    // 500 policy groups, 5 selector groups and the permissive egress one (the even policies isolate every
    // pod for ingress: no pod needs the permissive ingress group).
    assert_eq!(
        compiled.security_groups.len(),
        POLICIES + APPS.len() + 1,
        "{calls:?}"
    );
    let big = compiled
        .security_groups
        .iter()
        .map(|sg| sg.rules.len())
        .max()
        .unwrap();
    assert!(big > 1000, "policy 0 compiles to {big} rules");

    // Neutron holds exactly the compiled groups and rules.
    let listed = security_groups::list(&cloud, Filter::new()).await.unwrap();
    let by_name: BTreeMap<&str, usize> = listed
        .iter()
        .map(|sg| (sg.name.as_str(), sg.security_group_rules.len()))
        .collect();
    for sg in &compiled.security_groups {
        assert_eq!(
            by_name.get(sg.name.as_str()),
            Some(&sg.rules.len()),
            "{}: rules in Neutron",
            sg.key
        );
    }
    // Every pod port carries exactly its groups: all even policies, its app's odd ones.
    let ids: BTreeMap<&str, &str> = listed
        .iter()
        .map(|sg| (sg.name.as_str(), sg.id.as_str()))
        .collect();
    let mut largest = 0;
    for (pod, keys) in &compiled.memberships {
        let kp = w
            .kuryrports
            .iter()
            .find(|k| k.metadata.name.as_deref() == Some(pod.name.as_str()))
            .unwrap();
        let port_id = &kp.status.as_ref().unwrap().default_vif().unwrap().1.port_id;
        let port = ports::get(&cloud, port_id).await.unwrap();
        let want: BTreeSet<&str> = keys
            .iter()
            .map(|k| ids[compiled.security_group(k).unwrap().name.as_str()])
            .collect();
        let have: BTreeSet<&str> = port.security_groups.iter().map(String::as_str).collect();
        assert_eq!(have, want, "{}'s port", pod.name);
        largest = largest.max(have.len());
    }
    // 250 even policies + 50 odd ones of its app + its selector group.
    assert!(largest >= 300, "the most groups a port carries: {largest}");

    // The writes: one create (and one tag call) per group, one bulk rule create per group with rules
    // and body it needs, one delete per default rule Neutron put in, one update per pod port.
    let groups = compiled.security_groups.len() as u64;
    assert_eq!(calls["neutron.security_groups.create"], groups, "{calls:?}");
    // Groups whose rules Neutron's defaults don't already give: the policy groups (all Ingress).
    let with_rules = compiled
        .security_groups
        .iter()
        .filter(|sg| sg.rules.iter().any(|r| r.direction == Direction::Ingress))
        .count() as u64;
    let bulks = calls["neutron.security_group_rules.bulk_create"];
    // Policy 0's rules (about 170 bytes each in the body) take two bodies; every other group one.
    assert_eq!(bulks, with_rules + 1, "{calls:?}");
    assert_eq!(calls["neutron.tags.replace"], groups, "{calls:?}");
    // Neutron puts two default egress rules into every new group (IPv4, IPv6); only those no group wants
    // are deleted.
    assert!(
        calls["neutron.security_group_rules.delete"] <= 2 * groups,
        "{calls:?}"
    );
    assert_eq!(
        calls["neutron.ports.update"],
        (APPS.len() * PODS_PER_APP) as u64,
        "{calls:?}"
    );
    eprintln!(
        "500 policies: {groups} groups, {} rules, largest port {largest} groups; calls {calls:?}",
        compiled.rule_count()
    );

    // Nothing changed: two lists.
    let (_, calls) = sync(&cloud, &w, &opts).await;
    let total: u64 = calls.values().sum();
    assert_eq!(total, 2, "resync: {calls:?}");
}
