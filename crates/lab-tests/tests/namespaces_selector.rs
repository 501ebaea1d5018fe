//! `--namespace-selector` on the KuryrNetwork controller and the pod path, on the lab's real Neutron: its own
//! test binary, as its controller watches KuryrNetworks and pods cluster-wide.

mod nsnet;

use std::time::{Duration, Instant};

use anyhow::{bail, ensure};
use kuryr_api::{Api, Client, DeleteParams, KuryrNetwork, KuryrPort, Namespace, Pod, PostParams};
use kuryr_openstack::neutron::{networks, Filter};
use kuryr_openstack::{Cloud, Owner};
use lab_tests::Lab;
use nsnet::{delete_subnetpools, strip_finalizers, wait_gone, WAIT};
use serde_json::json;

/// With `--namespace-selector`, the KuryrNetwork controller (which watches KuryrNetworks cluster-wide) makes
/// networks only for namespaces its selector matches: another controller's KuryrNetwork, in a namespace it
/// does not select, gets no network, status or finalizer from it. Two controllers sharing a cluster used to
/// race over such a namespace's router interface (an OVN router port with no address broke every ovn LB).
#[tokio::test]
async fn a_namespace_selector_keeps_the_controller_off_other_namespaces_networks() -> anyhow::Result<()> {
    let lab = Lab::require();
    let (client, cloud, run_id) = nsnet::connect(&lab).await?;
    let (ours, theirs) = (format!("nssel-a-{run_id}"), format!("nssel-b-{run_id}"));
    let label = format!("kuryr-test-sel-{run_id}");
    let cluster_id = format!("nssel-{run_id}");
    let mut config = nsnet::namespace_mode(&lab, &cluster_id);
    config.namespace_selector = Some(format!("{label}=yes"));
    let namespaces: Api<Namespace> = Api::all(client.clone());
    for (ns, labels) in [(&ours, json!({label.clone(): "yes"})), (&theirs, json!({}))] {
        namespaces
            .create(
                &PostParams::default(),
                &serde_json::from_value(json!({"metadata": {"name": ns, "labels": labels}}))?,
            )
            .await?;
        lab_tests::cluster::wait_default_service_account(&client, ns).await?;
    }
    let controller = nsnet::Controller::start(&client, &cloud, config);
    let result = selector_scenario(&client, &cloud, &ours, &theirs, &lab.project_id, &cluster_id).await;
    for ns in [&ours, &theirs] {
        if result.is_err() {
            strip_finalizers(&client, ns).await;
        }
        let _ = namespaces.delete(ns, &DeleteParams::default()).await;
    }
    let gone = (
        wait_gone(&namespaces, &ours).await,
        wait_gone(&namespaces, &theirs).await,
    );
    controller.stop().await;
    result?;
    gone.0?;
    gone.1?;
    // What this run's two namespaces had must be gone (by name: only they are this test's), and the rest of
    // this cluster id is swept without failing the test.
    let names = [format!("kuryr-ns-{ours}"), format!("kuryr-ns-{theirs}")];
    let left: Vec<String> = networks::list(&cloud, Filter::new().tags(&Owner::cluster_filter(&cluster_id)))
        .await?
        .into_iter()
        .filter(|n| names.contains(&n.name))
        .map(|n| format!("network {} ({})", n.id, n.name))
        .collect();
    ensure!(
        left.is_empty(),
        "left behind after the namespaces were deleted: {left:?}"
    );
    if let Err(e) = delete_subnetpools(&cloud, &cluster_id).await {
        eprintln!("note: subnet pool of {cluster_id} not deleted ({e:#}): another namespace's pod got a subnet from it");
    }
    Ok(())
}

async fn selector_scenario(
    client: &Client,
    cloud: &Cloud,
    ours: &str,
    theirs: &str,
    project_id: &str,
    cluster_id: &str,
) -> anyhow::Result<()> {
    // A KuryrNetwork in each namespace, as the namespace front end (ours) or another controller (theirs)
    // would make it.
    for ns in [ours, theirs] {
        let kns: Api<KuryrNetwork> = Api::namespaced(client.clone(), ns);
        let kn: KuryrNetwork = serde_json::from_value(json!({
            "apiVersion": "openstack.org/v1", "kind": "KuryrNetwork",
            "metadata": {"name": ns, "namespace": ns},
            "spec": {"nsName": ns, "projectId": project_id}
        }))?;
        kns.create(&PostParams::default(), &kn).await?;
    }
    let ours_api: Api<KuryrNetwork> = Api::namespaced(client.clone(), ours);
    let deadline = Instant::now() + WAIT;
    let net_id = loop {
        let kn = ours_api.get(ours).await?;
        if let Some(id) = kn.status.and_then(|s| s.net_id) {
            break id;
        }
        if Instant::now() > deadline {
            bail!("the selected namespace's KuryrNetwork got no network within {WAIT:?}");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    // The other one was seen by the same watch; give its reconcile (and a requeue) time to do the wrong thing.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let kn = Api::<KuryrNetwork>::namespaced(client.clone(), theirs)
        .get(theirs)
        .await?;
    ensure!(
        kn.status.is_none(),
        "the unselected namespace's KuryrNetwork got a status: {:?}",
        kn.status
    );
    ensure!(
        kn.metadata.finalizers.as_deref().unwrap_or_default().is_empty(),
        "the unselected namespace's KuryrNetwork got finalizers: {:?}",
        kn.metadata.finalizers
    );
    // By name: a pod of another namespace in the cluster may give it a network of this cluster id meanwhile.
    let mine = networks::list(cloud, Filter::new().tags(&Owner::cluster_filter(cluster_id))).await?;
    ensure!(
        mine.iter().any(|n| n.id == net_id),
        "the selected namespace's network {net_id} is not tagged with this controller's cluster id"
    );
    let wrong: Vec<&str> = mine
        .iter()
        .filter(|n| n.name == format!("kuryr-ns-{theirs}"))
        .map(|n| n.id.as_str())
        .collect();
    ensure!(
        wrong.is_empty(),
        "a network was made for the unselected namespace {theirs}: {wrong:?}"
    );
    pods_scenario(client, ours, theirs).await?;
    eprintln!("{ours}: network {net_id} and its pod wired; {theirs} (not selected): untouched");
    Ok(())
}

/// The pod path honours the selector too: a pod in each namespace (on vm3, no kubelet: scheduled is all
/// the pod path needs); ours is wired, theirs gets no KuryrPort.
async fn pods_scenario(client: &Client, ours: &str, theirs: &str) -> anyhow::Result<()> {
    for ns in [ours, theirs] {
        let pod: Pod = serde_json::from_value(json!({"metadata": {"name": "p"},
            "spec": {"nodeName": "vm3", "containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.9"}]}}))?;
        Api::<Pod>::namespaced(client.clone(), ns)
            .create(&PostParams::default(), &pod)
            .await?;
    }
    let deadline = Instant::now() + WAIT;
    loop {
        let kp = Api::<KuryrPort>::namespaced(client.clone(), ours)
            .get_opt("p")
            .await?;
        if kp
            .and_then(|k| k.status)
            .is_some_and(|s| s.vifs.values().all(|v| v.vif.active) && !s.vifs.is_empty())
        {
            break;
        }
        if Instant::now() > deadline {
            bail!("the selected namespace's pod was not wired within {WAIT:?}");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // Both pods were seen by the same watch; give theirs time to be (wrongly) handled.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let kp = Api::<KuryrPort>::namespaced(client.clone(), theirs)
        .get_opt("p")
        .await?;
    ensure!(kp.is_none(), "the unselected namespace's pod got a KuryrPort");
    // Gone before the namespaces go: ours released by the controller, theirs has nothing to release.
    let now = DeleteParams {
        grace_period_seconds: Some(0),
        ..DeleteParams::default()
    };
    for ns in [ours, theirs] {
        Api::<Pod>::namespaced(client.clone(), ns)
            .delete("p", &now)
            .await?;
    }
    let pods: Api<Pod> = Api::namespaced(client.clone(), ours);
    let kps: Api<KuryrPort> = Api::namespaced(client.clone(), ours);
    let deadline = Instant::now() + WAIT;
    while pods.get_opt("p").await?.is_some() || kps.get_opt("p").await?.is_some() {
        if Instant::now() > deadline {
            bail!("the selected namespace's pod was not released within {WAIT:?}");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Ok(())
}
