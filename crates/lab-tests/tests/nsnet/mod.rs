//! What the namespace-network tests share: bounds, the CRD field manager, waiting for a namespace to go,
//! the tag scan of what a run left, and the cleanup after a failure.

#![allow(dead_code)]

use std::time::{Duration, Instant};

use anyhow::bail;
use kuryr_api::{
    Api, Client, KuryrNetwork, KuryrPort, ListParams, Namespace, Patch, PatchParams, Pod, ResourceExt,
};
use kuryr_openstack::neutron::{networks, ports, subnetpools, subnets, Filter};
use kuryr_openstack::{Cloud, Owner};
use serde_json::json;

pub const CRD_MANAGER: &str = "kuryr-crd-test";
/// A generous bound (the lab's Neutron is slow on a loaded 2-core machine); nothing asserts speed.
pub const WAIT: Duration = Duration::from_secs(300);

pub async fn wait_gone(namespaces: &Api<Namespace>, ns: &str) -> anyhow::Result<()> {
    let deadline = Instant::now() + WAIT;
    while namespaces.get_opt(ns).await?.is_some() {
        if Instant::now() > deadline {
            bail!("namespace {ns} still there after {WAIT:?}");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Ok(())
}

pub async fn leftovers(cloud: &Cloud, cluster_id: &str) -> anyhow::Result<Vec<String>> {
    let tags = Owner::cluster_filter(cluster_id);
    let mut left: Vec<String> = ports::list(cloud, Filter::new().tags(&tags))
        .await?
        .into_iter()
        .map(|p| format!("port {}", p.id))
        .collect();
    left.extend(
        subnets::list(cloud, Filter::new().tags(&tags))
            .await?
            .into_iter()
            .map(|s| format!("subnet {}", s.id)),
    );
    left.extend(
        networks::list(cloud, Filter::new().tags(&tags))
            .await?
            .into_iter()
            .map(|n| format!("network {}", n.id)),
    );
    Ok(left)
}

/// After a failure: let the namespace go (what is left shows in the tag scan).
pub async fn strip_finalizers(client: &Client, ns: &str) {
    let strip = json!({"metadata": {"finalizers": null}});
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let kps: Api<KuryrPort> = Api::namespaced(client.clone(), ns);
    let kns: Api<KuryrNetwork> = Api::namespaced(client.clone(), ns);
    for kp in kps
        .list(&ListParams::default())
        .await
        .map(|l| l.items)
        .unwrap_or_default()
    {
        let _ = kps
            .patch(&kp.name_any(), &PatchParams::default(), &Patch::Merge(&strip))
            .await;
    }
    for pod in pods
        .list(&ListParams::default())
        .await
        .map(|l| l.items)
        .unwrap_or_default()
    {
        let _ = pods
            .patch(&pod.name_any(), &PatchParams::default(), &Patch::Merge(&strip))
            .await;
    }
    let _ = kns
        .patch(ns, &PatchParams::default(), &Patch::Merge(&strip))
        .await;
}

pub async fn delete_subnetpools(cloud: &Cloud, cluster_id: &str) -> anyhow::Result<()> {
    for p in subnetpools::list(cloud, Filter::new().tags(&Owner::cluster_filter(cluster_id))).await? {
        subnetpools::delete(cloud, &p.id).await?;
    }
    Ok(())
}
