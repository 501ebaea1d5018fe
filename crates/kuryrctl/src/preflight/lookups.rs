//! Reads behind the install checks: each Node's ports (as the controller finds a node's VM port: one port
//! list filtered by address per InternalIP), the configured subnets and external network, and the Kuryr
//! CRDs in the cluster. Failures become facts, not errors: [`super::evaluate`] says what they mean.

use std::collections::BTreeMap;

use futures::{StreamExt as _, TryStreamExt as _};
use k8s_openapi::api::core::v1::{Node, NodeStatus};
use kube::api::{Api, ListParams};
use kuryr_api::{labels, CustomResourceDefinition, ObjectMeta};
use kuryr_core::neutron::NeutronPort;
use kuryr_core::parent::internal_ips;
use kuryr_openstack::neutron::ports;
use kuryr_openstack::neutron::{networks, subnets, Filter};
use kuryr_openstack::Cloud;

use super::checks::{Configured, NetworkFacts, NodePorts, SubnetFacts};
use super::settings::Given;

/// Nodes whose ports are looked up at once (each is one port list per address; the client rate-limits).
const CONCURRENT_NODES: usize = 8;

/// Every Node with the ports carrying its InternalIPs; `Err` when the Nodes cannot be listed.
pub async fn node_ports(client: &kube::Client, cloud: &Cloud) -> Result<Vec<NodePorts>, String> {
    let nodes = Api::<Node>::all(client.clone())
        .list(&ListParams::default())
        .await
        .map_err(|e| e.to_string())?
        .items;
    Ok(futures::stream::iter(nodes.iter().map(slim))
        .map(|node| async move {
            let ports = ports_of(cloud, &node).await;
            NodePorts { node, ports }
        })
        .buffered(CONCURRENT_NODES)
        .collect()
        .await)
}

/// Only what the parent-port lookup reads: the name, the addresses and the VIF driver labels.
fn slim(n: &Node) -> Node {
    let driver_labels = n.metadata.labels.as_ref().map(|l| {
        l.iter()
            .filter(|(k, _)| [labels::POD_VIF, labels::UPSTREAM_POD_VIF].contains(&k.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    });
    Node {
        metadata: ObjectMeta {
            name: n.metadata.name.clone(),
            labels: driver_labels,
            ..ObjectMeta::default()
        },
        status: Some(NodeStatus {
            addresses: n.status.as_ref().and_then(|s| s.addresses.clone()),
            ..NodeStatus::default()
        }),
        ..Node::default()
    }
}

async fn ports_of(cloud: &Cloud, node: &Node) -> Result<Vec<NeutronPort>, String> {
    futures::stream::iter(internal_ips(node))
        .then(|ip| async move { ports::list(cloud, Filter::new().fixed_ip(ip)).await })
        .map_ok(|found| found.iter().map(kuryr_convert::port).collect::<Vec<_>>())
        .try_concat()
        .await
        .map_err(|e| e.to_string())
}

pub async fn subnet(cloud: &Cloud, given: &Given) -> Configured<SubnetFacts> {
    let found = match subnets::get(cloud, &given.id).await {
        Ok(s) => Ok(Some(SubnetFacts {
            cidr: s.cidr,
            network_id: s.network_id,
        })),
        Err(e) if e.is_not_found() => Ok(None),
        Err(e) => Err(e.to_string()),
    };
    configured(given, found)
}

pub async fn network(cloud: &Cloud, given: &Given) -> Configured<NetworkFacts> {
    let found = match networks::get(cloud, &given.id).await {
        Ok(n) => Ok(Some(NetworkFacts {
            name: n.name,
            external: n.router_external,
        })),
        Err(e) if e.is_not_found() => Ok(None),
        Err(e) => Err(e.to_string()),
    };
    configured(given, found)
}

fn configured<T>(given: &Given, found: Result<Option<T>, String>) -> Configured<T> {
    Configured {
        id: given.id.clone(),
        from: given.from.clone(),
        found,
    }
}

/// The Kuryr CRDs in the cluster, by name (one read each, not a list of every CRD the cluster has).
pub async fn installed_crds(
    client: &kube::Client,
) -> Result<BTreeMap<String, CustomResourceDefinition>, String> {
    let api = Api::<CustomResourceDefinition>::all(client.clone());
    let mut out = BTreeMap::new();
    for name in kuryr_api::crds::crds()
        .into_iter()
        .filter_map(|c| c.metadata.name)
    {
        if let Some(crd) = api.get_opt(&name).await.map_err(|e| e.to_string())? {
            out.insert(name, crd);
        }
    }
    Ok(out)
}
