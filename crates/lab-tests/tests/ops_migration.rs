//! Migration from upstream Kuryr: a pod wired by upstream (pod finalizer set, a KuryrPort exactly as
//! upstream writes it — os-vif VIFVlanNested blob in the status, no trunk id, no conditions — and an
//! untagged Neutron port that is a VLAN subport of the node's trunk). `kuryrctl migrate` lists and changes
//! nothing without `--apply`; with it, it writes the trunk id and tags the port. Then kuryr-controller
//! adopts the pod: the KuryrPort becomes Ready on the same port and VLAN, no port is created, and deleting
//! the pod releases the upstream port.
//! The other upstream shapes (KuryrNetwork, KuryrLoadBalancer, KuryrNetworkPolicy) are checked to parse in
//! crates/kuryr-api/tests/upstream_roundtrip.rs; see docs/migration.md.

use std::time::{Duration, Instant};

use anyhow::{ensure, Context as _};
use kuryr_api::{Api, DeleteParams, KuryrPort, ListParams, Patch, PatchParams, Pod, PostParams, ResourceExt};
use kuryr_controller::runtime::{run, Runtime};
use kuryr_controller::Config;
use kuryr_openstack::neutron::ports::{self, CreatePort};
use kuryr_openstack::neutron::trunks::{self, SubPort};
use kuryr_openstack::neutron::Filter;
use kuryr_openstack::{ClientConfig, Cloud, Owner};
use lab_tests::cluster::{self, scheduled_pod};
use lab_tests::Lab;
use serde_json::{json, Value};

const TIMEOUT: Duration = Duration::from_secs(120);

fn fixture(name: &str) -> anyhow::Result<Value> {
    let path = format!(
        "{}/../kuryr-api/tests/fixtures/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    Ok(serde_json::from_str(
        &std::fs::read_to_string(&path).with_context(|| path.clone())?,
    )?)
}

/// The upstream fixture, rewritten to describe `pod` wired on `port` at `vlan`.
fn upstream_kuryrport(pod: &Pod, node: &str, port: &ports::Port, vlan: u32) -> anyhow::Result<Value> {
    let mut kp = fixture("upstream_kuryrport_nested_vlan.json")?;
    let (name, uid) = (pod.name_any(), pod.uid().context("pod uid")?);
    let m = &mut kp["metadata"];
    for k in ["uid", "resourceVersion", "creationTimestamp", "generation"] {
        m.as_object_mut().context("metadata")?.remove(k);
    }
    m["name"] = json!(name);
    m["namespace"] = json!(pod.namespace());
    m["labels"]["kuryr.openstack.org/nodeName"] = json!(node);
    m["ownerReferences"][0]["name"] = json!(name);
    m["ownerReferences"][0]["uid"] = json!(uid);
    kp["spec"]["podUid"] = json!(uid);
    kp["spec"]["podNodeName"] = json!(node);
    // The fixture also carries a second (macvlan, multi-VIF) interface: this pod has the default one only.
    kp["status"]["vifs"]
        .as_object_mut()
        .context("vifs")?
        .retain(|k, _| k == "eth0");
    let data = &mut kp["status"]["vifs"]["eth0"]["vif"]["versioned_object.data"];
    data["id"] = json!(port.id);
    data["address"] = json!(port.mac_address);
    data["vlan_id"] = json!(vlan);
    data["active"] = json!(true);
    let net = &mut data["network"]["versioned_object.data"];
    net["id"] = json!(port.network_id);
    let subnet = &mut net["subnets"]["versioned_object.data"]["objects"][0]["versioned_object.data"];
    subnet["ips"]["versioned_object.data"]["objects"][0]["versioned_object.data"]["address"] =
        json!(port.ip().unwrap_or_default());
    Ok(kp)
}

#[tokio::test]
async fn an_upstream_wired_pod_is_adopted_without_a_new_port_and_released_on_delete() -> anyhow::Result<()> {
    let lab = Lab::require();
    lab_tests::trace_controllers();
    let cluster::Isolated {
        client,
        ns,
        cluster_id,
    } = cluster::isolated(&lab, "migrate").await?;
    let cloud = Cloud::connect(ClientConfig::clouds_yaml(
        Some(lab.clouds_yaml.clone()),
        lab.cloud.clone(),
    ))
    .await?;
    let mut port_id = None;
    let result = scenario(&lab, &client, &cloud, &ns, &cluster_id, &mut port_id).await;
    if result.is_err() {
        cluster::strip_and_delete_all(&client, &ns).await;
        if let Some(id) = &port_id {
            let _ = trunks::remove_subports(&cloud, &lab.vms[0].trunk_id, std::slice::from_ref(id)).await;
            let _ = ports::delete(&cloud, id).await;
        }
    }
    cluster::delete_namespace(&client, &ns).await;
    result
}

async fn scenario(
    lab: &Lab,
    client: &kube::Client,
    cloud: &Cloud,
    ns: &str,
    cluster_id: &str,
    port_id: &mut Option<String>,
) -> anyhow::Result<()> {
    let vm = &lab.vms[0];
    // What upstream left: an untagged port (upstream tagged with its own resource_tags only), a subport.
    let port = ports::create(
        cloud,
        &CreatePort {
            name: Some(format!("{ns}-upstream")),
            device_owner: Some("compute:kuryr".into()),
            ..CreatePort::on_subnet(&lab.pod_network_id, &lab.pod_subnet_id)
        },
    )
    .await?;
    *port_id = Some(port.id.clone());
    let vlan = 3000 + u32::from(fastrand::u16(0..900));
    trunks::add_subports(cloud, &vm.trunk_id, &[SubPort::vlan(&port.id, vlan)]).await?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let mut pod = scheduled_pod("web-0", &vm.name);
    pod.metadata.finalizers = Some(vec![kuryr_api::finalizers::POD.to_owned()]);
    let pod = pods.create(&PostParams::default(), &pod).await?;
    let kps: Api<KuryrPort> = Api::namespaced(client.clone(), ns);
    let upstream = upstream_kuryrport(&pod, &vm.name, &port, vlan)?;
    let created: KuryrPort = serde_json::from_value(upstream.clone())?;
    kps.create(&PostParams::default(), &created).await?;
    // Upstream had no status subresource; ours does: the status goes in through it.
    kps.patch_status(
        &pod.name_any(),
        &PatchParams::default(),
        &Patch::Merge(json!({"status": upstream["status"]})),
    )
    .await?;

    // The migration step: a dry run first.
    let dry = migrate(lab, ns, cluster_id, false).await?;
    ensure!(dry.len() == 2, "dry run plans {dry:?}");
    ensure!(
        dry.iter().all(|a| a["done"] == false),
        "dry run did something: {dry:?}"
    );
    ensure!(
        ports::get(cloud, &port.id).await?.tags.is_empty(),
        "dry run tagged the port"
    );
    let applied = migrate(lab, ns, cluster_id, true).await?;
    ensure!(
        applied.len() == 2 && applied.iter().all(|a| a["done"] == true),
        "{applied:?}"
    );
    let tagged = ports::get(cloud, &port.id).await?;
    let owner = Owner::from_tags(&tagged.tags).context("port not tagged")?;
    ensure!(
        owner.cluster == cluster_id && owner.uid == pod.uid().unwrap_or_default(),
        "{owner:?}"
    );
    ensure!(
        migrate(lab, ns, cluster_id, true).await?.is_empty(),
        "migrate is not idempotent"
    );

    // Now kuryr-controller starts on the cluster.
    let mut config = Config::new(cluster_id, &lab.pod_subnet_id);
    config.namespace = Some(ns.to_owned());
    config.project_id = Some(lab.project_id.clone());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let controller = tokio::spawn(run(Runtime::new(client.clone(), cloud.clone(), config), async {
        let _ = stopped.await;
    }));
    let result = adopted(lab, client, cloud, ns, cluster_id, &pod, &port, vlan).await;
    let _ = stop.send(());
    let _ = tokio::time::timeout(Duration::from_secs(30), controller).await;
    result
}

/// `kuryrctl -o json migrate -n <ns> [--apply]`: the actions listed.
async fn migrate(lab: &Lab, ns: &str, cluster_id: &str, apply: bool) -> anyhow::Result<Vec<Value>> {
    use clap::Parser;
    let kubeconfig = lab.kubeconfig.display().to_string();
    let clouds = lab.clouds_yaml.display().to_string();
    let mut argv = vec![
        "kuryrctl",
        "--kubeconfig",
        &kubeconfig,
        "--clouds-yaml",
        &clouds,
        "--os-cloud",
        &lab.cloud,
        "--cluster-id",
        cluster_id,
        "-o",
        "json",
        "migrate",
        "-n",
        ns,
    ];
    if apply {
        argv.push("--apply");
    }
    let mut out = Vec::new();
    let code = kuryrctl::Cli::try_parse_from(argv)?.run_to(&mut out).await?;
    ensure!(code == 0, "kuryrctl migrate exit {code}");
    Ok(serde_json::from_slice::<Vec<Value>>(&out)?)
}

#[allow(clippy::too_many_arguments)]
async fn adopted(
    lab: &Lab,
    client: &kube::Client,
    cloud: &Cloud,
    ns: &str,
    cluster_id: &str,
    pod: &Pod,
    port: &ports::Port,
    vlan: u32,
) -> anyhow::Result<()> {
    let name = pod.name_any();
    let ready = cluster::wait_ready(client, ns, std::slice::from_ref(&name), TIMEOUT).await?;
    let vif = &ready[&name]
        .status
        .as_ref()
        .context("status")?
        .vifs
        .get("eth0")
        .context("eth0")?
        .vif;
    ensure!(
        vif.port_id == port.id,
        "adopted KuryrPort now names port {}",
        vif.port_id
    );
    ensure!(
        vif.vlan_id.map(u32::from) == Some(vlan),
        "VLAN {:?}, upstream had {vlan}",
        vif.vlan_id
    );
    let ours = ports::list(cloud, Filter::new().tags(&Owner::cluster_filter(cluster_id))).await?;
    ensure!(
        ours.len() == 1 && ours[0].id == port.id,
        "ports of this cluster: {:?} (only the adopted one expected)",
        ours.iter().map(|p| &p.id).collect::<Vec<_>>()
    );
    let t = trunks::get(cloud, &lab.vms[0].trunk_id).await?;
    ensure!(
        t.sub_ports
            .iter()
            .any(|s| s.port_id == port.id && s.segmentation_id == vlan),
        "the upstream subport changed"
    );

    // Deleting the pod releases the upstream port through the normal path.
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    pods.delete(
        &name,
        &DeleteParams {
            grace_period_seconds: Some(0),
            ..DeleteParams::default()
        },
    )
    .await?;
    let kps: Api<KuryrPort> = Api::namespaced(client.clone(), ns);
    let deadline = Instant::now() + TIMEOUT;
    loop {
        let left = kps.list(&ListParams::default()).await?.items.len()
            + pods.list(&ListParams::default()).await?.items.len();
        let port_gone = ports::get(cloud, &port.id)
            .await
            .err()
            .is_some_and(|e| e.is_not_found());
        if left == 0 && port_gone {
            break;
        }
        ensure!(
            Instant::now() < deadline,
            "not released: {left} objects left, port gone: {port_gone}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let t = trunks::get(cloud, &lab.vms[0].trunk_id).await?;
    ensure!(
        !t.sub_ports.iter().any(|s| s.port_id == port.id),
        "still a subport"
    );
    Ok(())
}
