//! A NetworkPolicy deleted while its group is still on a pool port (the pod's port went back to its pool
//! while a sync set its groups, seen in Kubernetes' Netpol e2e run on the lab): the sync takes the group off
//! the pool port and deletes it. A group still on a port that is not ours is left for a later sync, and
//! the sync does not fail for it (a failed sync is retried with backoff, every other policy with it).

use std::collections::BTreeMap;
use std::sync::Arc;

use kuryr_api::{KuryrPort, Namespace, NetworkPolicy, SlimPod};
use kuryr_cloudsim::Profile;
use kuryr_controller::policies::controller::converge;
use kuryr_controller::policies::inputs::{build, Objects};
use kuryr_controller::policies::neutron::Target;
use kuryr_controller::policies::PolicyConfig;
use kuryr_core::OwnerKind;
use kuryr_openstack::neutron::ports::{self, CreatePort, FixedIpRequest, Port};
use kuryr_openstack::neutron::{networks, security_groups, subnets, Filter};
use kuryr_openstack::{Cloud, Owner};
use serde_json::json;

use crate::sim::connect;

const CLUSTER: &str = "pool-sg";
const NS: &str = "shop";

fn obj<T: serde::de::DeserializeOwned>(v: serde_json::Value) -> Arc<T> {
    Arc::new(serde_json::from_value(v).unwrap())
}

/// One converge of `policies` over pod `web-0` on `port` (when it is still the pod's).
async fn sync(cloud: &Cloud, port: Option<&Port>, policies: &[Arc<NetworkPolicy>]) -> usize {
    let namespaces = vec![obj::<Namespace>(json!({"metadata": {"name": NS}}))];
    let pods = vec![obj::<SlimPod>(json!({
        "metadata": {"namespace": NS, "name": "web-0", "uid": "uid-web-0", "labels": {"app": "web"}},
        "spec": {"containers": [{"name": "c"}]}
    }))];
    let kuryrports: Vec<Arc<KuryrPort>> = port
        .map(|p| {
            obj(json!({
                "apiVersion": "openstack.org/v1", "kind": "KuryrPort",
                "metadata": {"namespace": NS, "name": "web-0"},
                "spec": {"podUid": "uid-web-0", "podNodeName": "n"},
                "status": {"vifs": {"eth0": {"default": true, "vif": {"type": "neutron-vif", "portId": p.id,
                    "networkId": p.network_id, "mac": p.mac_address,
                    "ips": [{"address": p.ip().unwrap_or_default(), "cidr": "10.0.0.0/16"}]}}}}
            }))
        })
        .into_iter()
        .collect();
    let objects = Objects {
        namespaces: &namespaces,
        pods: &pods,
        kuryrports: &kuryrports,
        policies,
        services: &[],
    };
    let target = Target {
        cloud,
        cluster_id: CLUSTER,
        project_id: &cloud.project_id().unwrap_or_default(),
        namespace_projects: &BTreeMap::new(),
    };
    let config = PolicyConfig {
        enabled: true,
        ..PolicyConfig::default()
    };
    let report = converge(&target, &build(&objects, false), &config.compile_options())
        .await
        .expect("the sync does not fail")
        .unwrap();
    report.applied.groups_in_use
}

async fn port_tagged(cloud: &Cloud, network: &str, subnet: &str, owner: Owner) -> Port {
    let req = CreatePort {
        fixed_ips: vec![FixedIpRequest {
            subnet_id: Some(subnet.to_owned()),
            ip_address: None,
        }],
        ..CreatePort::on_network(network)
    }
    .tagged(owner.tags().unwrap());
    ports::bulk_create(cloud, &[req]).await.unwrap().remove(0)
}

async fn groups_of(cloud: &Cloud, port: &Port) -> Vec<String> {
    ports::get(cloud, &port.id).await.unwrap().security_groups
}

#[tokio::test]
async fn a_gone_policys_group_is_taken_off_a_pool_port_and_deleted_and_one_on_a_foreign_port_waits() {
    let (cloud, _sim) = connect(Profile::zero(), None).await;
    let net = networks::create(&cloud, &networks::CreateNetwork::named("pods"), &[])
        .await
        .unwrap();
    let subnet = subnets::create(&cloud, &subnets::CreateSubnet::v4(&net.id, "10.0.0.0/16"), &[])
        .await
        .unwrap();
    let pool_owner = Owner::new(CLUSTER, OwnerKind::Pool.as_str(), CLUSTER);
    let port = port_tagged(&cloud, &net.id, &subnet.id, pool_owner).await;
    let deny = vec![obj::<NetworkPolicy>(json!({
        "metadata": {"namespace": NS, "name": "deny-ingress", "uid": "np-1"},
        "spec": {"podSelector": {"matchLabels": {"app": "web"}}, "policyTypes": ["Ingress"]}
    }))];

    // The pod has the port: its policy's group goes on it.
    assert_eq!(sync(&cloud, Some(&port), &deny).await, 0);
    let with_policy = groups_of(&cloud, &port).await;
    let sgs = security_groups::list(&cloud, Filter::new()).await.unwrap();
    let policy_sg = sgs
        .iter()
        .find(|g| g.name.contains("deny-ingress"))
        .expect("the policy's group")
        .id
        .clone();
    assert!(with_policy.contains(&policy_sg), "{with_policy:?}");

    // The pod went, its port back in the pool with the group still on it; then the policy went.
    assert_eq!(sync(&cloud, None, &[]).await, 0);
    assert!(
        !groups_of(&cloud, &port).await.contains(&policy_sg),
        "taken off the pool port"
    );
    assert!(
        ports::get(&cloud, &port.id).await.is_ok(),
        "the pool port itself stays"
    );
    let left = security_groups::list(&cloud, Filter::new()).await.unwrap();
    assert!(!left.iter().any(|g| g.id == policy_sg), "the group is deleted");

    // The same with the group on a port that is not a pool port of ours: left, and the sync still succeeds.
    let other = port_tagged(
        &cloud,
        &net.id,
        &subnet.id,
        Owner::new("another", "KuryrPort", "x"),
    )
    .await;
    assert_eq!(sync(&cloud, Some(&other), &deny).await, 0);
    let sgs = security_groups::list(&cloud, Filter::new()).await.unwrap();
    let policy_sg = sgs
        .iter()
        .find(|g| g.name.contains("deny-ingress"))
        .unwrap()
        .id
        .clone();
    assert!(groups_of(&cloud, &other).await.contains(&policy_sg));
    // The policy's group and the permissive egress group the pod's port had with it.
    assert_eq!(sync(&cloud, None, &[]).await, 2, "in use: left for the next sync");
    assert!(groups_of(&cloud, &other).await.contains(&policy_sg));
}
