//! kuryr-controller, run in-process against the lab's kube-apiserver, wires pods end to end:
//! - `..._on_cloudsim`: the cloud is an in-process cloudsim bootstrapped with parent ports and trunks that
//!   carry the lab Nodes' InternalIPs;
//! - `..._on_real_neutron`: the lab's Keystone + Neutron (ML2/OVN), the lab VMs' real trunks.
//!
//! Pods are created with `spec.nodeName` set to the lab VMs (no kubelet: they stay Pending but scheduled).
//! Each test checks that every pod gets a KuryrPort whose status names an ACTIVE Neutron subport with a
//! VLAN unique on its trunk, then deletes the pods (grace period 0; the pods carry no finalizer of ours, the
//! KuryrPorts do) and checks that subports, ports, KuryrPorts and every tagged port are gone. Each test runs its own
//! controller scoped to its own namespace and cluster id, so tests never act on each other's pods.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context as _};
use futures::future::try_join_all;
use kuryr_api::k8s_openapi::api::core::v1::{Container, PodSpec};
use kuryr_api::kube::runtime::wait::{await_condition, conditions};
use kuryr_api::{
    crds, finalizers, labels, Api, Client, ConditionStatus, CustomResourceDefinition, DeleteParams, Event,
    KuryrPort, ListParams, Namespace, Node, ObjectMeta, Patch, PatchParams, Pod, PostParams, ResourceExt,
    VifType,
};
use kuryr_cloudsim::{FaultRule, Faults, Profile, Sim, SimHandle};
use kuryr_controller::runtime::{run, Runtime};
use kuryr_controller::Config;
use kuryr_openstack::neutron::ports::{self, AddressPair, CreatePort, FixedIpRequest};
use kuryr_openstack::neutron::quotas::{self, Quota};
use kuryr_openstack::neutron::subnets::{self, CreateSubnet};
use kuryr_openstack::neutron::trunks::{self, CreateTrunk};
use kuryr_openstack::neutron::{networks, Filter};
use kuryr_openstack::{ClientConfig, Cloud, Owner};
use lab_tests::Lab;

/// Pods of the scenario, spread round-robin over the VMs (issue: 50 pods over 3 nodes).
const PODS: usize = 50;
const CRD_MANAGER: &str = "kuryr-crd-test";
/// Generous upper bounds for the waits; the assertions are about what happens, not how fast.
const WIRE_TIMEOUT: Duration = Duration::from_secs(420);
const GONE_TIMEOUT: Duration = Duration::from_secs(420);
const ACTIVE_TIMEOUT: Duration = Duration::from_secs(300);

#[tokio::test]
async fn pods_are_wired_and_released_on_cloudsim() -> anyhow::Result<()> {
    let lab = Lab::require();
    let sim = SimCloud::start(&lab).await?;
    let result = exercise(&lab, "sim", sim.cloud.clone(), &sim.subnet_id, None, &sim.trunks).await;
    drop(sim.handle);
    result
}

#[tokio::test]
async fn pods_are_wired_and_released_on_real_neutron() -> anyhow::Result<()> {
    let lab = Lab::require();
    let cfg = ClientConfig::clouds_yaml(Some(lab.clouds_yaml.clone()), lab.cloud.clone());
    let cloud = Cloud::connect(cfg).await.context("login to the lab cloud")?;
    let trunks: BTreeMap<String, String> = lab
        .vms
        .iter()
        .map(|vm| (vm.name.clone(), vm.trunk_id.clone()))
        .collect();
    exercise(
        &lab,
        "lab",
        cloud,
        &lab.pod_subnet_id.clone(),
        Some(lab.project_id.clone()),
        &trunks,
    )
    .await
}

#[tokio::test]
async fn a_refused_attach_is_rolled_back_and_a_lost_answer_makes_no_second_port_on_cloudsim(
) -> anyhow::Result<()> {
    let lab = Lab::require();
    let sim = SimCloud::start(&lab).await?;
    let h = Harness::start(&lab, "fault", sim.cloud.clone(), &sim.subnet_id, None).await?;
    let result = faults(&h, &sim).await;
    let result = h.finish(result).await;
    drop(sim.handle);
    result
}

/// The whole scenario on one cloud. `trunks`: node name -> the trunk its pods must hang off.
async fn exercise(
    lab: &Lab,
    kind: &str,
    cloud: Cloud,
    subnet_id: &str,
    project_id: Option<String>,
    trunks: &BTreeMap<String, String>,
) -> anyhow::Result<()> {
    let h = Harness::start(lab, kind, cloud, subnet_id, project_id).await?;
    let result = scenario(&h.client, &h.cloud, &h.ns, &h.cluster_id, trunks).await;
    h.finish(result).await
}

/// A namespace, a cluster id and an in-process controller scoped to both.
struct Harness {
    client: Client,
    cloud: Cloud,
    ns: String,
    cluster_id: String,
    subnet_id: String,
    stop: tokio::sync::oneshot::Sender<()>,
    controller: tokio::task::JoinHandle<anyhow::Result<()>>,
}

impl Harness {
    async fn start(
        lab: &Lab,
        kind: &str,
        cloud: Cloud,
        subnet_id: &str,
        project_id: Option<String>,
    ) -> anyhow::Result<Harness> {
        Self::start_with(lab, kind, cloud, subnet_id, project_id, |_| {}).await
    }

    /// [`Harness::start`] with `configure` applied to the controller's settings last.
    async fn start_with(
        lab: &Lab,
        kind: &str,
        cloud: Cloud,
        subnet_id: &str,
        project_id: Option<String>,
        configure: impl FnOnce(&mut Config),
    ) -> anyhow::Result<Harness> {
        lab_tests::trace_controllers();
        let client = lab.kube_client().await?;
        install_crds(&client).await?;
        let run_id = format!("{:08x}", fastrand::u32(..));
        let ns = format!("pods-{kind}-{run_id}");
        let cluster_id = format!("podtest-{kind}-{run_id}");
        let namespaces: Api<Namespace> = Api::all(client.clone());
        namespaces
            .create(
                &PostParams::default(),
                &Namespace {
                    metadata: ObjectMeta {
                        name: Some(ns.clone()),
                        ..ObjectMeta::default()
                    },
                    ..Namespace::default()
                },
            )
            .await?;
        lab_tests::cluster::wait_default_service_account(&client, &ns).await?;
        let mut config = Config::new(&cluster_id, subnet_id);
        config.namespace = Some(ns.clone());
        config.project_id = project_id;
        // The per-pod path (a port of its own, deleted with the pod); pools: tests/pod_pools.rs.
        config.pools_enabled = false;
        configure(&mut config);
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let controller = tokio::spawn(run(Runtime::new(client.clone(), cloud.clone(), config), async {
            let _ = stopped.await;
        }));
        Ok(Harness {
            client,
            cloud,
            ns,
            cluster_id,
            subnet_id: subnet_id.to_owned(),
            stop,
            controller,
        })
    }

    /// Cleans up whatever the scenario left (after a failure), stops the controller, deletes the namespace.
    async fn finish(self, result: anyhow::Result<()>) -> anyhow::Result<()> {
        if result.is_err() {
            let _ = strip_and_delete_all(&self.client, &self.ns).await;
            let _ = delete_tagged(&self.cloud, &self.cluster_id).await;
        }
        let _ = self.stop.send(());
        let stopped = tokio::time::timeout(Duration::from_secs(30), self.controller).await;
        let namespaces: Api<Namespace> = Api::all(self.client.clone());
        let _ = namespaces.delete(&self.ns, &DeleteParams::default()).await;
        result?;
        match stopped {
            Ok(Ok(Ok(()))) => Ok(()),
            Ok(Ok(Err(e))) => Err(e),
            Ok(Err(e)) => bail!("controller task panicked: {e}"),
            Err(_) => bail!("controller did not stop within 30 s"),
        }
    }
}

async fn scenario(
    client: &Client,
    cloud: &Cloud,
    ns: &str,
    cluster_id: &str,
    trunks: &BTreeMap<String, String>,
) -> anyhow::Result<()> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let kps: Api<KuryrPort> = Api::namespaced(client.clone(), ns);

    // Create the pods, spread over the VMs.
    let nodes: Vec<&String> = trunks.keys().collect();
    let mut created = HashMap::new();
    for i in 0..PODS {
        let node = nodes[i % nodes.len()];
        let name = format!("{node}-pod{i}");
        pods.create(&PostParams::default(), &mk_pod(&name, node)).await?;
        created.insert(name, (node.clone(), Instant::now()));
    }

    // Every KuryrPort reaches Ready with an ACTIVE port.
    let mut wired: BTreeMap<String, KuryrPort> = BTreeMap::new();
    let mut took = Vec::new();
    let mut deadline = Instant::now() + WIRE_TIMEOUT;
    let mut extended = false;
    while wired.len() < created.len() {
        let listed = kps.list(&ListParams::default()).await?.items;
        for kp in &listed {
            let name = kp.name_any();
            if wired.contains_key(&name) || !is_ready(kp) {
                continue;
            }
            if let Some((_, t0)) = created.get(&name) {
                took.push((name.clone(), t0.elapsed()));
            }
            wired.insert(name, kp.clone());
        }
        if Instant::now() > deadline && wired.len() < created.len() {
            let missing: Vec<&KuryrPort> = listed
                .iter()
                .filter(|kp| created.contains_key(&kp.name_any()) && !wired.contains_key(&kp.name_any()))
                .collect();
            let names: Vec<String> = created
                .keys()
                .filter(|n| !wired.contains_key(*n))
                .cloned()
                .collect();
            // On a busy Neutron the ACTIVE status trails OVN by its event queue (measured: a subport up in OVN
            // at 18:35:31, "OVN reports status up" handled at 18:42:41; docs/pod-networking.md). When OVN has
            // every missing port up, the controller is waiting on Neutron's copy: wait once more for it.
            let up = lab_tests::ovn::up_ports().ok();
            let up_in_ovn = missing.len() == names.len()
                && missing.iter().all(|kp| {
                    kp.status
                        .as_ref()
                        .and_then(|s| s.default_vif().map(|(_, v)| v.port_id.clone()))
                        .is_some_and(|id| up.as_ref().is_some_and(|u| u.contains(&id)))
                });
            if up_in_ovn && !extended {
                eprintln!(
                    "{names:?}: not ACTIVE in Neutron within {WIRE_TIMEOUT:?} though up in OVN (Neutron's status \
                     lags its OVN event queue on a busy lab); waiting up to {WIRE_TIMEOUT:?} more"
                );
                extended = true;
                deadline = Instant::now() + WIRE_TIMEOUT;
            } else {
                bail!(
                    "not wired within {WIRE_TIMEOUT:?}{}: {names:?} (up in OVN: {up_in_ovn})",
                    if extended { " and as long again" } else { "" }
                );
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    took.sort_by_key(|(_, d)| *d);
    let ms: Vec<u128> = took.iter().map(|(_, d)| d.as_millis()).collect();
    eprintln!(
        "{} pods wired; pod create -> KuryrPort Ready (port ACTIVE), ms: min {} median {} max {} (all: {ms:?})",
        ms.len(),
        ms.first().copied().unwrap_or_default(),
        ms.get(ms.len() / 2).copied().unwrap_or_default(),
        ms.last().copied().unwrap_or_default(),
    );

    // What each KuryrPort says, and what Neutron says about it.
    let mut vlans: BTreeMap<String, BTreeSet<u16>> = BTreeMap::new();
    let mut port_ids = Vec::new();
    for (name, kp) in &wired {
        let (node, _) = &created[name];
        let pod = pods.get(name).await?;
        // The pod is held by nothing of ours: its KuryrPort (owned by it) holds the port.
        ensure!(
            !pod.finalizers().iter().any(|f| f == finalizers::POD),
            "{name}: a pod finalizer was put on the pod"
        );
        ensure!(kp.spec.pod_uid == pod.uid().unwrap_or_default(), "{name}: podUid");
        ensure!(
            kp.labels().get(labels::NODE_NAME) == Some(node),
            "{name}: nodeName label"
        );
        ensure!(
            kp.owner_references()
                .iter()
                .any(|o| o.kind == "Pod" && o.name == *name),
            "{name}: ownerReference to the pod"
        );
        let status = kp.status.as_ref().context("status")?;
        let vif = &status.vifs.get("eth0").context("eth0")?.vif;
        ensure!(vif.active, "{name}: eth0 not active");
        ensure!(
            !vif.port_id.is_empty() && !vif.mac.is_empty(),
            "{name}: port id / MAC"
        );
        ensure!(
            vif.ips.first().is_some_and(|ip| !ip.address.is_empty()),
            "{name}: IP"
        );
        let vlan = vif.vlan_id.context("vlanId")?;
        let trunk = vif.trunk_id.clone().context("trunkId")?;
        ensure!(trunk == trunks[node], "{name}: trunk {trunk} is not {node}'s");
        ensure!(
            vlans.entry(trunk.clone()).or_default().insert(vlan),
            "{name}: VLAN {vlan} used twice on trunk {trunk}"
        );
        // ML2/OVN briefly reports a bound subport DOWN while sibling subports are added to the same trunk
        // (ovn-controller re-claims the parent's children); it must be ACTIVE again soon after.
        let port = wait_active(cloud, &vif.port_id)
            .await
            .with_context(|| format!("{name}: Neutron port"))?;
        ensure!(port.mac_address == vif.mac, "{name}: MAC differs from Neutron's");
        let owner = Owner::from_tags(&port.tags).context("ownership tags")?;
        ensure!(
            owner.cluster == cluster_id && owner.uid == kp.spec.pod_uid,
            "{name}: tags {owner:?}"
        );
        let t = trunks::get(cloud, &trunk).await?;
        ensure!(
            t.sub_ports
                .iter()
                .any(|s| s.port_id == vif.port_id && s.segmentation_id == u32::from(vlan)),
            "{name}: not a subport of {trunk} on VLAN {vlan}"
        );
        port_ids.push((vif.port_id.clone(), trunk));
    }

    // Delete the pods (no kubelet: grace period 0; their KuryrPorts' finalizers hold the ports' release).
    let dp = DeleteParams {
        grace_period_seconds: Some(0),
        ..DeleteParams::default()
    };
    for name in created.keys() {
        pods.delete(name, &dp).await?;
    }
    let deadline = Instant::now() + GONE_TIMEOUT;
    loop {
        let left_pods = pods.list(&ListParams::default()).await?.items.len();
        let left_kps = kps.list(&ListParams::default()).await?.items.len();
        if left_pods == 0 && left_kps == 0 {
            break;
        }
        if Instant::now() > deadline {
            bail!("after {GONE_TIMEOUT:?}: {left_pods} pods and {left_kps} KuryrPorts left");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for (port_id, trunk) in &port_ids {
        match ports::get(cloud, port_id).await {
            Err(e) if e.is_not_found() => {}
            other => bail!("port {port_id} still there: {other:?}"),
        }
        let t = trunks::get(cloud, trunk).await?;
        ensure!(
            !t.sub_ports.iter().any(|s| s.port_id == *port_id),
            "{port_id} still a subport of {trunk}"
        );
    }
    let tagged = ports::list(cloud, Filter::new().tags(&Owner::cluster_filter(cluster_id))).await?;
    ensure!(
        tagged.is_empty(),
        "tagged ports left: {:?}",
        tagged.iter().map(|p| &p.id).collect::<Vec<_>>()
    );
    Ok(())
}

fn is_ready(kp: &KuryrPort) -> bool {
    kp.status
        .as_ref()
        .is_some_and(|s| s.all_active() && kuryr_api::conditions::is_condition_true(&s.conditions, "Ready"))
}

fn mk_pod(name: &str, node: &str) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            node_name: Some(node.into()),
            containers: vec![Container {
                name: "pause".into(),
                image: Some("registry.k8s.io/pause:3.9".into()),
                ..Container::default()
            }],
            ..PodSpec::default()
        }),
        ..Pod::default()
    }
}

async fn install_crds(client: &Client) -> anyhow::Result<()> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in crds::crds() {
        let name = crd.name_any();
        api.patch(
            &name,
            &PatchParams::apply(CRD_MANAGER).force(),
            &Patch::Apply(&crd),
        )
        .await
        .with_context(|| format!("applying CRD {name}"))?;
        tokio::time::timeout(
            Duration::from_secs(30),
            await_condition(api.clone(), &name, conditions::is_crd_established()),
        )
        .await??;
    }
    Ok(())
}

/// After a failure: strip finalizers so the namespace can go.
async fn strip_and_delete_all(client: &Client, ns: &str) -> anyhow::Result<()> {
    let strip = serde_json::json!({"metadata": {"finalizers": null}});
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let kps: Api<KuryrPort> = Api::namespaced(client.clone(), ns);
    for kp in kps.list(&ListParams::default()).await? {
        let _ = kps
            .patch(&kp.name_any(), &PatchParams::default(), &Patch::Merge(&strip))
            .await;
    }
    for pod in pods.list(&ListParams::default()).await? {
        let _ = pods
            .patch(&pod.name_any(), &PatchParams::default(), &Patch::Merge(&strip))
            .await;
        let _ = pods
            .delete(
                &pod.name_any(),
                &DeleteParams {
                    grace_period_seconds: Some(0),
                    ..DeleteParams::default()
                },
            )
            .await;
    }
    Ok(())
}

/// Waits until Neutron reports the port ACTIVE; fails naming the last status after `ACTIVE_TIMEOUT`.
async fn wait_active(cloud: &Cloud, port_id: &str) -> anyhow::Result<ports::Port> {
    let deadline = Instant::now() + ACTIVE_TIMEOUT;
    loop {
        let port = ports::get(cloud, port_id).await?;
        if port.status == "ACTIVE" {
            return Ok(port);
        }
        if Instant::now() > deadline {
            bail!("port {port_id} is {} after {ACTIVE_TIMEOUT:?}", port.status);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn delete_tagged(cloud: &Cloud, cluster_id: &str) -> anyhow::Result<()> {
    let tagged = ports::list(cloud, Filter::new().tags(&Owner::cluster_filter(cluster_id))).await?;
    // ML2/OVN leaves a subport's device_id empty: find its trunk by listing.
    for trunk in trunks::list(cloud, Filter::new()).await? {
        let ids: Vec<String> = trunk
            .sub_ports
            .iter()
            .filter(|s| tagged.iter().any(|p| p.id == s.port_id))
            .map(|s| s.port_id.clone())
            .collect();
        if !ids.is_empty() {
            let _ = trunks::remove_subports(cloud, &trunk.id, &ids).await;
        }
    }
    for port in tagged {
        let _ = ports::delete(cloud, &port.id).await;
    }
    Ok(())
}

/// An in-process cloudsim with a pod network and, per lab VM, a bound parent port carrying the VM's IP
/// (= its Node's InternalIP) and a trunk on it.
struct SimCloud {
    handle: SimHandle,
    cloud: Cloud,
    subnet_id: String,
    /// node name -> trunk id
    trunks: BTreeMap<String, String>,
}

impl SimCloud {
    async fn start(lab: &Lab) -> anyhow::Result<SimCloud> {
        let mut profile = Profile::zero();
        // Subports go ACTIVE a little later, as on ML2/OVN (measured 0.05-1.3 s; scaled down here).
        profile.neutron.subport_active_delay =
            serde_json::from_value(serde_json::json!({"uniform": {"min": 20, "max": 200}}))?;
        let (_, handle) = Sim::new(profile).spawn_on("127.0.0.1:0").await?;
        let dir =
            std::env::temp_dir().join(format!("kuryr-pods-{}-{}", std::process::id(), fastrand::u64(..)));
        std::fs::create_dir_all(&dir)?;
        let yaml = dir.join("clouds.yaml");
        std::fs::write(&yaml, handle.clouds_yaml("sim"))?;
        let cloud = Cloud::connect(ClientConfig::clouds_yaml(Some(yaml), "sim")).await?;
        let _ = std::fs::remove_dir_all(&dir);
        let net = networks::create(&cloud, &networks::CreateNetwork::named("kuryr-pods"), &[]).await?;
        let mut sub = CreateSubnet::v4(&net.id, lab.pod_subnet_cidr.clone());
        sub.gateway_ip = Some(Some("198.18.0.1".into()));
        let subnet = subnets::create(&cloud, &sub, &[]).await?;
        let parents = try_join_all(lab.vms.iter().map(|vm| {
            let cloud = cloud.clone();
            let (net, subnet) = (net.id.clone(), subnet.id.clone());
            async move {
                let port = ports::create(
                    &cloud,
                    &CreatePort {
                        name: Some(vm.name.clone()),
                        fixed_ips: vec![FixedIpRequest {
                            subnet_id: Some(subnet),
                            ip_address: Some(vm.ip.clone()),
                        }],
                        device_owner: Some("compute:nova".into()),
                        binding_host_id: Some("lab-hv1".into()),
                        ..CreatePort::on_network(net)
                    },
                )
                .await?;
                let trunk = trunks::create(
                    &cloud,
                    &CreateTrunk {
                        port_id: port.id.clone(),
                        name: Some(format!("{}-trunk", vm.name)),
                        ..CreateTrunk::default()
                    },
                    &[],
                )
                .await?;
                anyhow::Ok((vm.name.clone(), trunk.id))
            }
        }))
        .await?;
        Ok(SimCloud {
            handle,
            cloud,
            subnet_id: subnet.id,
            trunks: parents.into_iter().collect(),
        })
    }
}

/// Fault injection on cloudsim, one pod at a time on vm1.
async fn faults(h: &Harness, sim: &SimCloud) -> anyhow::Result<()> {
    let pods: Api<Pod> = Api::namespaced(h.client.clone(), &h.ns);
    let kps: Api<KuryrPort> = Api::namespaced(h.client.clone(), &h.ns);
    let events: Api<Event> = Api::namespaced(h.client.clone(), &h.ns);
    let count = |op: &str| sim.handle.calls_matching(op).len();
    let (node, trunk_id) = ("vm1", sim.trunks["vm1"].clone());

    // 1. add_subports refused once with a 409 that is not about the VLAN: the port is deleted, VLAN 1
    //    released, the failure reported, and the retry wires the pod on VLAN 1 with a new port.
    sim.handle.add_fault(FaultRule {
        op: "neutron.trunks.add_subports".into(),
        count: Some(1),
        status: Some(409),
        kind: Some("PortInUse".into()),
        message: Some("injected".into()),
        ..FaultRule::default()
    });
    pods.create(&PostParams::default(), &mk_pod("refused", node))
        .await?;
    let vif = wait_wired(&kps, "refused").await?;
    ensure!(
        vif.vlan_id == Some(1),
        "VLAN 1 is handed out again, got {:?}",
        vif.vlan_id
    );
    ensure!(
        (count("neutron.ports.bulk_create"), count("neutron.ports.delete")) == (2, 1),
        "one port rolled back, one kept: {} creates, {} deletes",
        count("neutron.ports.bulk_create"),
        count("neutron.ports.delete")
    );
    let warned = events.list(&ListParams::default()).await?.items.iter().any(|e| {
        e.involved_object.name.as_deref() == Some("refused")
            && e.type_.as_deref() == Some("Warning")
            && e.reason.as_deref() == Some("NeutronError")
    });
    ensure!(warned, "no Warning Event NeutronError on the KuryrPort");

    // 2. add_subports carried out but its answer lost (500; the client retries): the retry's answer is
    //    resolved against the trunk, no second port is made, the pod gets VLAN 2.
    sim.handle.add_fault(FaultRule {
        op: "neutron.trunks.add_subports".into(),
        count: Some(1),
        status: Some(500),
        execute: true,
        ..FaultRule::default()
    });
    pods.create(&PostParams::default(), &mk_pod("lost", node)).await?;
    let vif = wait_wired(&kps, "lost").await?;
    ensure!(vif.vlan_id == Some(2), "VLAN 2 expected, got {:?}", vif.vlan_id);
    ensure!(
        (count("neutron.ports.bulk_create"), count("neutron.ports.delete")) == (3, 1),
        "no extra port for a lost answer: {} creates, {} deletes",
        count("neutron.ports.bulk_create"),
        count("neutron.ports.delete")
    );
    let trunk = trunks::get(&h.cloud, &trunk_id).await?;
    let vlans: BTreeSet<u32> = trunk.sub_ports.iter().map(|s| s.segmentation_id).collect();
    ensure!(vlans == BTreeSet::from([1, 2]), "trunk subports {vlans:?}");

    // Both go away with nothing left.
    let dp = DeleteParams {
        grace_period_seconds: Some(0),
        ..DeleteParams::default()
    };
    for name in ["refused", "lost"] {
        pods.delete(name, &dp).await?;
    }
    let deadline = Instant::now() + GONE_TIMEOUT;
    while !pods.list(&ListParams::default()).await?.items.is_empty()
        || !kps.list(&ListParams::default()).await?.items.is_empty()
    {
        ensure!(
            Instant::now() < deadline,
            "pods or KuryrPorts left after {GONE_TIMEOUT:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    ensure!(
        trunks::get(&h.cloud, &trunk_id).await?.sub_ports.is_empty(),
        "subports left"
    );
    let tagged = ports::list(
        &h.cloud,
        Filter::new().tags(&Owner::cluster_filter(&h.cluster_id)),
    )
    .await?;
    ensure!(tagged.is_empty(), "{} tagged ports left", tagged.len());
    Ok(())
}

/// Waits for the KuryrPort `name` to be Ready; returns its eth0 VIF.
async fn wait_wired(kps: &Api<KuryrPort>, name: &str) -> anyhow::Result<kuryr_api::Vif> {
    let deadline = Instant::now() + WIRE_TIMEOUT;
    loop {
        if let Some(kp) = kps.get_opt(name).await? {
            if is_ready(&kp) {
                let status = kp.status.context("status")?;
                return Ok(status.vifs.get("eth0").context("eth0")?.vif.clone());
            }
        }
        ensure!(
            Instant::now() < deadline,
            "{name} not wired within {WIRE_TIMEOUT:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Bad input on the pod path (cloudsim): a pod on a Node whose VM port has no trunk, the port quota used
/// up, Neutron answering 503, and a subnet with no address left. Each failing pod's KuryrPort gets a
/// `Ready=False` condition and a Warning Event naming the reason, a healthy pod next to it is wired
/// meanwhile, each recovers once the cause is gone, and nothing tagged is left at the end.
#[tokio::test]
async fn bad_input_gets_an_event_and_a_condition_and_the_rest_is_served_on_cloudsim() -> anyhow::Result<()> {
    let lab = Lab::require();
    let sim = SimCloud::start(&lab).await?;
    // Pods take their addresses from a /28 beside the VMs' subnet, so it can be used up.
    let network_id = subnets::get(&sim.cloud, &sim.subnet_id).await?.network_id;
    let small = subnets::create(&sim.cloud, &CreateSubnet::v4(&network_id, "198.18.100.0/28"), &[]).await?;
    let h = Harness::start(&lab, "bad", sim.cloud.clone(), &small.id, None).await?;
    let result = bad_input(&h, &sim, &network_id).await;
    let result = h.finish(result).await;
    drop(sim.handle);
    result
}

async fn bad_input(h: &Harness, sim: &SimCloud, network_id: &str) -> anyhow::Result<()> {
    let pods: Api<Pod> = Api::namespaced(h.client.clone(), &h.ns);
    let kps: Api<KuryrPort> = Api::namespaced(h.client.clone(), &h.ns);

    // 1. A Node whose VM port exists but carries no trunk.
    let vm_port = ports::create(
        &h.cloud,
        &CreatePort {
            name: Some("no-trunk-vm".into()),
            fixed_ips: vec![FixedIpRequest {
                subnet_id: Some(sim.subnet_id.clone()),
                ip_address: None,
            }],
            device_owner: Some("compute:nova".into()),
            binding_host_id: Some("lab-hv1".into()),
            ..CreatePort::on_network(network_id)
        },
    )
    .await?;
    let vm_ip = vm_port
        .fixed_ips
        .first()
        .map(|f| f.ip_address.clone())
        .context("VM port without IP")?;
    let node_name = format!("{}-notrunk", h.ns);
    let nodes: Api<Node> = Api::all(h.client.clone());
    nodes
        .create(&PostParams::default(), &bare_node(&node_name, &vm_ip))
        .await?;
    let result = async {
        pods.create(&PostParams::default(), &mk_pod("no-trunk", &node_name))
            .await?;
        pods.create(&PostParams::default(), &mk_pod("beside-no-trunk", "vm1"))
            .await?;
        wait_wired(&kps, "beside-no-trunk").await?;
        wait_refused(h, "no-trunk", "NoTrunkOnNode").await?;
        pods.delete("no-trunk", &grace0()).await?;
        anyhow::Ok(())
    }
    .await;
    let _ = nodes.delete(&node_name, &DeleteParams::default()).await;
    result?;
    ports::delete(&h.cloud, &vm_port.id).await?;

    // 2. The port quota used up, then raised.
    let project = h.cloud.project_id().context("token without project")?;
    let used = ports::list(&h.cloud, Filter::new()).await?.len() as i64;
    quotas::update(&h.cloud, &project, &Quota::from([("port".to_owned(), used)])).await?;
    pods.create(&PostParams::default(), &mk_pod("over-quota", "vm2"))
        .await?;
    wait_refused(h, "over-quota", "OverQuota").await?;
    quotas::reset(&h.cloud, &project).await?;
    wait_wired(&kps, "over-quota").await?;

    // 3. Neutron down (every Neutron call answered 503), then back.
    sim.handle.add_fault(FaultRule {
        op: "neutron.*".into(),
        status: Some(503),
        ..FaultRule::default()
    });
    pods.create(&PostParams::default(), &mk_pod("neutron-down", "vm3"))
        .await?;
    wait_refused(h, "neutron-down", "NeutronUnavailable").await?;
    sim.handle.set_faults(Faults::default());
    wait_wired(&kps, "neutron-down").await?;

    // 4. Every address of the subnet taken: a pod waits with SubnetFull and is wired once one is freed.
    let mut hog = Vec::new();
    let on_small = CreatePort {
        fixed_ips: vec![FixedIpRequest {
            subnet_id: Some(h.subnet_id.clone()),
            ip_address: None,
        }],
        ..CreatePort::on_network(network_id)
    };
    loop {
        match ports::create(&h.cloud, &on_small).await {
            Ok(p) => hog.push(p.id),
            Err(e) if e.api().is_some_and(|a| a.code == "IpAddressGenerationFailure") => break,
            Err(e) => return Err(e.into()),
        }
        ensure!(hog.len() <= 16, "a /28 never ran out of addresses");
    }
    pods.create(&PostParams::default(), &mk_pod("subnet-full", "vm1"))
        .await?;
    wait_refused(h, "subnet-full", "SubnetFull").await?;
    let freed = hog.pop().context("no address was taken")?;
    ports::delete(&h.cloud, &freed).await?;
    wait_wired(&kps, "subnet-full").await?;
    for id in hog {
        ports::delete(&h.cloud, &id).await?;
    }

    // Everything goes with nothing left.
    for pod in pods.list(&ListParams::default()).await? {
        pods.delete(&pod.name_any(), &grace0()).await?;
    }
    let deadline = Instant::now() + GONE_TIMEOUT;
    while !pods.list(&ListParams::default()).await?.items.is_empty()
        || !kps.list(&ListParams::default()).await?.items.is_empty()
    {
        ensure!(
            Instant::now() < deadline,
            "pods or KuryrPorts left after {GONE_TIMEOUT:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let tagged = ports::list(
        &h.cloud,
        Filter::new().tags(&Owner::cluster_filter(&h.cluster_id)),
    )
    .await?;
    ensure!(tagged.is_empty(), "{} tagged ports left", tagged.len());
    for (node, trunk) in &sim.trunks {
        ensure!(
            trunks::get(&h.cloud, trunk).await?.sub_ports.is_empty(),
            "subports left on {node}'s trunk"
        );
    }
    Ok(())
}

fn grace0() -> DeleteParams {
    DeleteParams {
        grace_period_seconds: Some(0),
        ..DeleteParams::default()
    }
}

/// A Ready Node with `ip` as its InternalIP (no kubelet behind it).
fn bare_node(name: &str, ip: &str) -> Node {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name},
        "status": {"addresses": [{"type": "InternalIP", "address": ip}]}
    }))
    .unwrap_or_default()
}

/// Waits until `name`'s KuryrPort says `Ready=False` with `reason` and a Warning Event with that reason
/// is recorded for it.
async fn wait_refused(h: &Harness, name: &str, reason: &str) -> anyhow::Result<()> {
    let kps: Api<KuryrPort> = Api::namespaced(h.client.clone(), &h.ns);
    let events: Api<Event> = Api::namespaced(h.client.clone(), &h.ns);
    let deadline = Instant::now() + WIRE_TIMEOUT;
    loop {
        let condition = kps.get_opt(name).await?.and_then(|kp| {
            kp.status?
                .conditions
                .into_iter()
                .find(|c| c.type_ == "Ready" && c.status == ConditionStatus::False)
        });
        let event = events
            .list(&ListParams::default())
            .await?
            .items
            .into_iter()
            .any(|e| {
                e.involved_object.name.as_deref() == Some(name)
                    && e.type_.as_deref() == Some("Warning")
                    && e.reason.as_deref() == Some(reason)
            });
        if event && condition.as_ref().is_some_and(|c| c.reason == reason) {
            return Ok(());
        }
        ensure!(
            Instant::now() < deadline,
            "{name}: no Ready=False/{reason} condition and Warning Event within {WIRE_TIMEOUT:?} \
             (condition: {condition:?}, event: {event})"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// nested-macvlan pairs every pod's IP with a VRRP MAC on its VM's port. Neutron's `If-Match` check is not
/// atomic with the update (two pairings in flight at once both passed on the lab's ML2/OVN, leaving OVN's
/// port security with one pair), so the controller writes one VM port's pairs one at a time: six pods on
/// one VM at once, each write held 300 ms by cloudsim, must give six writes that never overlap and end
/// with all six pairs, each its own VRRP MAC.
#[tokio::test]
async fn macvlan_pairs_of_one_vm_port_are_written_one_at_a_time_on_cloudsim() -> anyhow::Result<()> {
    let lab = Lab::require();
    let sim = SimCloud::start(&lab).await?;
    let h = Harness::start_with(&lab, "pairs", sim.cloud.clone(), &sim.subnet_id, None, |c| {
        c.vif_type = VifType::NestedMacvlan;
    })
    .await?;
    let result = one_writer_per_vm_port(&h, &sim).await;
    let result = h.finish(result).await;
    drop(sim.handle);
    result
}

async fn one_writer_per_vm_port(h: &Harness, sim: &SimCloud) -> anyhow::Result<()> {
    let pods: Api<Pod> = Api::namespaced(h.client.clone(), &h.ns);
    let kps: Api<KuryrPort> = Api::namespaced(h.client.clone(), &h.ns);
    let vm_port = ports::list(&h.cloud, Filter::new().eq("name", "vm1"))
        .await?
        .into_iter()
        .next()
        .context("vm1's port")?;
    sim.handle.add_fault(FaultRule {
        op: "neutron.ports.update".into(),
        hold_ms: Some(300),
        ..FaultRule::default()
    });
    let names: Vec<String> = (0..6).map(|i| format!("paired-{i}")).collect();
    try_join_all(names.iter().map(|n| {
        let (pods, pod) = (pods.clone(), mk_pod(n, "vm1"));
        async move { pods.create(&PostParams::default(), &pod).await }
    }))
    .await?;
    let mut ips = BTreeSet::new();
    for n in &names {
        let vif = wait_wired(&kps, n).await?;
        ips.insert(vif.ips.first().map(|i| i.address.clone()).context("IP")?);
    }
    sim.handle.set_faults(Faults::default());

    let path = format!("ports/{}", vm_port.id);
    let mut writes: Vec<(chrono::DateTime<chrono::FixedOffset>, f64)> = sim
        .handle
        .calls_matching("neutron.ports.update")
        .into_iter()
        .filter(|c| c.path.ends_with(&path))
        .map(|c| Ok((chrono::DateTime::parse_from_rfc3339(&c.ts)?, c.latency_ms)))
        .collect::<anyhow::Result<_>>()?;
    writes.sort_by_key(|(t, _)| *t);
    ensure!(
        writes.len() >= names.len(),
        "{} writes of vm1's pairs for {} pods",
        writes.len(),
        names.len()
    );
    for pair in writes.windows(2) {
        let ((t0, ms0), (t1, _)) = (pair[0], pair[1]);
        let end0 = t0 + chrono::Duration::microseconds((ms0 * 1000.0) as i64);
        ensure!(
            t1 >= end0,
            "two writes of vm1's pairs overlapped: one from {t0} to {end0}, the next at {t1}"
        );
    }
    let vm = ports::get(&h.cloud, &vm_port.id).await?;
    let paired: BTreeSet<String> = vm
        .allowed_address_pairs
        .iter()
        .map(|p| p.ip_address.clone())
        .collect();
    ensure!(
        paired == ips,
        "vm1's pairs {paired:?} are not the pods' IPs {ips:?}"
    );
    let macs: BTreeSet<_> = vm
        .allowed_address_pairs
        .iter()
        .map(|p| p.mac_address.clone())
        .collect();
    ensure!(macs.len() == names.len(), "VRRP MACs not unique: {macs:?}");

    for n in &names {
        pods.delete(n, &grace0()).await?;
    }
    let deadline = Instant::now() + GONE_TIMEOUT;
    while !kps.list(&ListParams::default()).await?.items.is_empty() {
        ensure!(
            Instant::now() < deadline,
            "KuryrPorts left after {GONE_TIMEOUT:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let vm = ports::get(&h.cloud, &vm_port.id).await?;
    ensure!(
        vm.allowed_address_pairs.is_empty(),
        "pairs left on vm1: {:?}",
        vm.allowed_address_pairs
    );
    Ok(())
}

/// A pair left on a VM port by a writer that died or an update Neutron lost (its pod port gone) would keep
/// its VRRP MAC taken, and that MAC be handed out again on another VM port of the network where OVN can't
/// tell the two apart. A macvlan controller drops such pairs at start: only the VRRP pair without a port
/// goes; a VRRP pair whose IP a port holds and pairs that are not VRRP ones stay.
#[tokio::test]
async fn leftover_macvlan_pairs_are_dropped_at_start_on_cloudsim() -> anyhow::Result<()> {
    let lab = Lab::require();
    let sim = SimCloud::start(&lab).await?;
    let vm = ports::list(&sim.cloud, Filter::new().eq("name", "vm1"))
        .await?
        .into_iter()
        .next()
        .context("vm1's port")?;
    let held = ports::create(&sim.cloud, &CreatePort::on_network(&vm.network_id)).await?;
    let held_ip = held
        .fixed_ips
        .first()
        .map(|f| f.ip_address.clone())
        .context("IP")?;
    let pair = |ip: &str, mac: Option<&str>| AddressPair {
        ip_address: ip.into(),
        mac_address: mac.map(Into::into),
    };
    let planted = vec![
        pair("198.18.60.1", Some("00:00:5e:00:01:09")),
        pair(&held_ip, Some("00:00:5e:00:01:0a")),
        pair("198.18.60.2", None),
    ];
    ports::set_address_pairs_if_revision(&sim.cloud, &vm.id, &planted, vm.revision_number).await?;
    let h = Harness::start_with(&lab, "leftover", sim.cloud.clone(), &sim.subnet_id, None, |c| {
        c.vif_type = VifType::NestedMacvlan;
    })
    .await?;
    let result = async {
        let deadline = Instant::now() + WIRE_TIMEOUT;
        loop {
            let now = ports::get(&h.cloud, &vm.id).await?.allowed_address_pairs;
            if !now.iter().any(|p| p.ip_address == "198.18.60.1") {
                // (Neutron fills a pair given without MAC with the port's own.)
                let ips: Vec<&str> = now.iter().map(|p| p.ip_address.as_str()).collect();
                ensure!(
                    ips == [held_ip.as_str(), "198.18.60.2"],
                    "only the portless VRRP pair may go: {now:?}"
                );
                return Ok(());
            }
            ensure!(
                Instant::now() < deadline,
                "the leftover pair is still on vm1: {now:?}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    .await;
    let result = h.finish(result).await;
    drop(sim.handle);
    result
}
