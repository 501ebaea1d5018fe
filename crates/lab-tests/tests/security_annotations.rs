//! No escalation through annotations or Service fields, on the lab's kube-apiserver with cloudsim as the
//! cloud and kuryr-controller in-process (docs/security.md):
//! - a Service naming a provider outside `--lb-allowed-providers` and another project gets Warning Events
//!   (`AnnotationNotAllowed`) and `Allowed=False`, and is served on the default provider in the
//!   controller's project;
//! - a `loadBalancerIP` that is another port's floating IP, or outside `--lb-floating-ip-cidrs`, gets
//!   `LoadBalancerIPNotAllowed` (Event + condition): the victim floating IP stays where it was, nothing is
//!   created at the refused address, the load balancer itself is served; an allowed one is attached;
//! - a Pod annotated with another project and extra networks gets an `AnnotationNotAllowed` Event naming
//!   both and is wired on the configured subnet in the controller's project;
//! - a Namespace annotated with a project in `--namespace-projects` has its pods' ports and its
//!   NetworkPolicy's group made there; one not listed gets `ProjectNotAllowed` (docs/projects.md); on
//!   cloudsim and on the lab's real Keystone + Neutron (its second project, `tenant_project_id`).

mod simnets;
mod svc_common;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{ensure, Context as _};
use kuryr_api::attachment::KURYR_CONFIG;
use kuryr_api::conditions::find_condition;
use kuryr_api::{
    annotations, Api, Event, KuryrLoadBalancer, KuryrPort, ListParams, NetworkAttachmentDefinition,
    NetworkPolicy, Patch, PatchParams, Pod, PostParams, ResourceExt,
};
use kuryr_cloudsim::profile::{ADMIN_PROJECT_ID, SERVICE_PROJECT_ID};
use kuryr_cloudsim::{Profile, Sim};
use kuryr_controller::runtime::{run, Runtime};
use kuryr_controller::Config;
use kuryr_core::projects::NamespaceProjects;
use kuryr_openstack::neutron::floating_ips::{self, CreateFloatingIp};
use kuryr_openstack::neutron::ports::{self, CreatePort, FixedIpRequest};
use kuryr_openstack::neutron::subnets::{self, CreateSubnet};
use kuryr_openstack::neutron::trunks::{self, CreateTrunk};
use kuryr_openstack::neutron::{networks, security_groups, Filter};
use kuryr_openstack::{ClientConfig, Cloud, Owner};
use lab_tests::{cluster, Lab};
use svc_common::{mk_service, pod_ips, Backend, Harness};

const ALLOWED_RANGE: &str = "203.0.113.0/26";

fn allowed(k: &KuryrLoadBalancer) -> Option<(String, String, String)> {
    let c = find_condition(&k.status.as_ref()?.conditions, "Allowed")?;
    Some((format!("{:?}", c.status), c.reason.clone(), c.message.clone()))
}

/// Warning Events with `reason` about the object `kind`/`name`.
async fn events_about(h: &Harness, reason: &str, kind: &str, name: &str) -> anyhow::Result<Vec<Event>> {
    Ok(h.events(reason)
        .await?
        .into_iter()
        .filter(|e| {
            e.involved_object.kind.as_deref() == Some(kind)
                && e.involved_object.name.as_deref() == Some(name)
                && e.type_.as_deref() == Some("Warning")
        })
        .collect())
}

fn annotated(mut svc: kuryr_api::Service, ann: &[(&str, &str)]) -> kuryr_api::Service {
    svc.metadata.annotations = Some(ann.iter().map(|(k, v)| ((*k).into(), (*v).into())).collect());
    svc
}

fn load_balancer(mut svc: kuryr_api::Service, ip: &str) -> kuryr_api::Service {
    if let Some(spec) = svc.spec.as_mut() {
        spec.type_ = Some("LoadBalancer".into());
        spec.load_balancer_ip = Some(ip.into());
    }
    svc
}

#[tokio::test]
async fn services_cannot_reach_providers_projects_or_floating_ips_outside_the_allow_lists(
) -> anyhow::Result<()> {
    let lab = Lab::require();
    let backend = Backend::sim("ovn", |_| {}).await?;
    let h = Harness::start(&lab, backend, |sc| {
        // --lb-provider ovn (set by the harness), no --lb-allowed-providers: amphora is not allowed.
        sc.floating_ip_cidrs = vec![ALLOWED_RANGE.parse().expect("cidr")];
    })
    .await?;
    let result = services(&h).await;
    h.finish(result).await
}

async fn services(h: &Harness) -> anyhow::Result<()> {
    let check = &h.backend.check;
    let app = [("app", "sec")];
    let ips = pod_ips(2);
    h.ready_pods(
        &[("s0".into(), ips[0].clone()), ("s1".into(), ips[1].clone())],
        &app,
        true,
    )
    .await?;
    // Someone else's floating IP, inside the allowed range, on a VM port of theirs.
    let victim_port = ports::create(check, &CreatePort::on_network(h.backend.pod_network_id.clone())).await?;
    let victim = floating_ips::create(
        check,
        &CreateFloatingIp {
            floating_network_id: h.backend.external_network_id.clone(),
            floating_ip_address: Some("203.0.113.30".into()),
            port_id: Some(victim_port.id.clone()),
            ..CreateFloatingIp::default()
        },
        &[],
    )
    .await?;

    let base = |name: &str| mk_service(name, &[("web", 80, "TCP", 8080)], Some(&app));
    let svcs = h.services();
    let pp = PostParams::default();
    svcs.create(
        &pp,
        &annotated(
            base("prov"),
            &[
                (annotations::LB_PROVIDER, "amphora"),
                (annotations::PROJECT, ADMIN_PROJECT_ID),
            ],
        ),
    )
    .await?;
    svcs.create(&pp, &load_balancer(base("stolen"), "203.0.113.30"))
        .await?;
    svcs.create(&pp, &load_balancer(base("outside"), "203.0.113.200"))
        .await?;
    svcs.create(&pp, &load_balancer(base("ok"), "203.0.113.40"))
        .await?;

    // A provider outside the list and another project: refused, served on ovn in our project.
    let k = h
        .wait_klb("prov", "refused provider reported", |k| {
            allowed(k).is_some_and(|a| a.0 == "False")
        })
        .await?;
    let (status, reason, message) = allowed(&k).context("Allowed condition")?;
    ensure!(
        status == "False" && reason == "AnnotationNotAllowed" && message.contains("\"amphora\""),
        "prov: Allowed={status} {reason}: {message}"
    );
    let lb_id = svc_common::lb_id(&k);
    let lb = kuryr_openstack::octavia::loadbalancers::get(check, &lb_id).await?;
    ensure!(lb.provider == "ovn", "prov built on {}", lb.provider);
    ensure!(
        lb.project_id == SERVICE_PROJECT_ID,
        "prov built in project {}",
        lb.project_id
    );
    let tagged = h.tagged_lbs().await?;
    ensure!(
        tagged.iter().all(|l| l.provider != "amphora"),
        "an amphora LB exists: {:?}",
        tagged.iter().map(|l| (&l.name, &l.provider)).collect::<Vec<_>>()
    );
    let ev = events_about(h, "AnnotationNotAllowed", "Service", "prov").await?;
    let notes: BTreeSet<String> = ev.iter().filter_map(|e| e.message.clone()).collect();
    ensure!(
        notes.iter().any(|m| m.contains("kuryr-lb-provider"))
            && notes.iter().any(|m| m.contains("kuryr-project")),
        "prov: Events {notes:?}"
    );

    // Another port's floating IP: not taken.
    let k = h
        .wait_klb("stolen", "refused floating IP reported", |k| {
            allowed(k).is_some_and(|a| a.0 == "False")
        })
        .await?;
    let (_, reason, message) = allowed(&k).context("Allowed condition")?;
    ensure!(
        reason == "LoadBalancerIPNotAllowed" && message.contains(&victim_port.id),
        "stolen: {reason}: {message}"
    );
    ensure!(
        k.status
            .as_ref()
            .and_then(|s| s.service_pub_ip_info.as_ref())
            .is_none(),
        "stolen: a floating IP is recorded"
    );
    let v = floating_ips::get(check, &victim.id).await?;
    ensure!(
        v.port_id.as_deref() == Some(victim_port.id.as_str()),
        "the victim floating IP moved to {:?}",
        v.port_id
    );
    ensure!(
        !events_about(h, "LoadBalancerIPNotAllowed", "Service", "stolen")
            .await?
            .is_empty(),
        "stolen: no Event on the Service"
    );

    // Outside the allowed range: nothing created at that address.
    let k = h
        .wait_klb("outside", "refused range reported", |k| {
            allowed(k).is_some_and(|a| a.0 == "False")
        })
        .await?;
    let (_, reason, message) = allowed(&k).context("Allowed condition")?;
    ensure!(
        reason == "LoadBalancerIPNotAllowed" && message.contains(ALLOWED_RANGE),
        "outside: {reason}: {message}"
    );
    let at = floating_ips::list(check, Filter::new().eq("floating_ip_address", "203.0.113.200")).await?;
    ensure!(
        at.is_empty(),
        "a floating IP was made at a refused address: {at:?}"
    );
    ensure!(
        !events_about(h, "LoadBalancerIPNotAllowed", "Service", "outside")
            .await?
            .is_empty(),
        "outside: no Event on the Service"
    );

    // Allowed: attached, and the condition says so.
    let k = h
        .wait_klb("ok", "floating IP attached", |k| {
            k.status.as_ref().is_some_and(|s| s.service_pub_ip_info.is_some())
        })
        .await?;
    ensure!(
        allowed(&k).is_some_and(|a| a.0 == "True"),
        "ok: {:?}",
        allowed(&k)
    );
    let vip_port = k
        .status
        .as_ref()
        .and_then(|s| s.loadbalancer.as_ref())
        .map(|l| l.port_id.clone())
        .unwrap_or_default();
    let fip = floating_ips::list(check, Filter::new().eq("floating_ip_address", "203.0.113.40")).await?;
    ensure!(
        fip.len() == 1 && fip[0].port_id.as_deref() == Some(vip_port.as_str()),
        "ok: {fip:?}"
    );
    eprintln!(
        "refused: provider + project annotations (prov), another port's FIP (stolen), out-of-range IP \
         (outside); allowed FIP attached (ok)"
    );
    for name in ["prov", "stolen", "outside", "ok"] {
        svcs.delete(name, &Default::default()).await?;
    }
    for name in ["prov", "stolen", "outside", "ok"] {
        h.wait_gone(name).await?;
    }
    let v = floating_ips::get(check, &victim.id).await?;
    ensure!(
        v.port_id.as_deref() == Some(victim_port.id.as_str()),
        "victim moved on delete"
    );
    floating_ips::delete(check, &victim.id).await?;
    ports::delete(check, &victim_port.id).await?;
    Ok(())
}

#[tokio::test]
async fn pods_cannot_choose_a_project_or_extra_networks() -> anyhow::Result<()> {
    with_pod_controller(
        "secpod",
        |_, _| {},
        |w| async move { pod_scenario(&w.lab, &w.iso, &w.cloud, &w.pod_net, &w.other_net).await },
    )
    .await
}

fn listing_the_tenant(c: &mut Config, w: &PodWorld) {
    c.namespace_projects = NamespaceProjects::new([w.projects.tenant.clone()]);
    c.policy.enabled = true;
}

fn allowing_the_extra_subnet(c: &mut Config, w: &PodWorld) {
    c.additional_subnets = [w.extra_subnet.clone()].into();
}

#[tokio::test]
async fn a_pod_gets_an_interface_per_allowed_network_attachment_on_cloudsim() -> anyhow::Result<()> {
    with_pod_controller("multinet", allowing_the_extra_subnet, |w| async move {
        networks_scenario(&w).await
    })
    .await
}

#[tokio::test]
async fn a_pod_gets_an_interface_per_allowed_network_attachment_on_real_neutron() -> anyhow::Result<()> {
    with_lab_controller("multinetlab", allowing_the_extra_subnet, |w| async move {
        networks_scenario(&w).await
    })
    .await
}

#[tokio::test]
async fn a_namespace_in_a_listed_project_has_its_ports_and_policy_groups_there_on_cloudsim(
) -> anyhow::Result<()> {
    with_pod_controller("nsproj", listing_the_tenant, |w| async move {
        project_scenario(&w).await
    })
    .await
}

#[tokio::test]
async fn a_namespace_in_a_listed_project_has_its_ports_and_policy_groups_there_on_real_neutron(
) -> anyhow::Result<()> {
    with_lab_controller("nsprojlab", listing_the_tenant, |w| async move {
        project_scenario(&w).await
    })
    .await
}

/// The controller's project and the one a namespace is put in.
struct Projects {
    home: String,
    tenant: String,
}

/// What a pod scenario works with: the cloud (admin credentials), its pod network and another network,
/// the projects, and the isolated namespace the in-process controller serves.
struct PodWorld {
    lab: Lab,
    iso: cluster::Isolated,
    cloud: Cloud,
    pod_net: String,
    other_net: String,
    projects: Projects,
    /// A network of its own for extra interfaces, with one subnet.
    extra_net: String,
    extra_subnet: String,
}

/// Runs `scenario` against a fresh cloudsim (pod network, the lab Nodes' parent ports and trunks) and an
/// in-process controller on an isolated namespace (pools off, `configure`d), then cleans up.
async fn with_pod_controller<F, Fut>(
    prefix: &str,
    configure: impl FnOnce(&mut Config, &PodWorld),
    scenario: F,
) -> anyhow::Result<()>
where
    F: FnOnce(Arc<PodWorld>) -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<()>>,
{
    let lab = Lab::require();
    let mut profile = Profile::zero();
    profile.neutron.subport_active_delay = serde_json::from_value(serde_json::json!({"fixed": 20}))?;
    let (_, sim) = Sim::new(profile).spawn_on("127.0.0.1:0").await?;
    let dir = std::env::temp_dir().join(format!(
        "kuryr-secpods-{}-{}",
        std::process::id(),
        fastrand::u64(..)
    ));
    std::fs::create_dir_all(&dir)?;
    let yaml = dir.join("clouds.yaml");
    std::fs::write(&yaml, sim.clouds_yaml("sim"))?;
    let cloud = Cloud::connect(ClientConfig::clouds_yaml(Some(yaml), "sim")).await?;
    let _ = std::fs::remove_dir_all(&dir);
    // The pod network, parent ports carrying the lab Nodes' InternalIPs, and their trunks.
    let net = networks::create(&cloud, &networks::CreateNetwork::named("kuryr-pods"), &[]).await?;
    let mut sub = CreateSubnet::v4(&net.id, lab.pod_subnet_cidr.clone());
    sub.gateway_ip = Some(Some("198.18.0.1".into()));
    let subnet = subnets::create(&cloud, &sub, &[]).await?;
    let other = networks::create(&cloud, &networks::CreateNetwork::named("corp-net"), &[]).await?;
    for vm in &lab.vms {
        let port = ports::create(
            &cloud,
            &CreatePort {
                name: Some(vm.name.clone()),
                fixed_ips: vec![FixedIpRequest {
                    subnet_id: Some(subnet.id.clone()),
                    ip_address: Some(vm.ip.clone()),
                }],
                device_owner: Some("compute:nova".into()),
                binding_host_id: Some("lab-hv1".into()),
                ..CreatePort::on_network(net.id.clone())
            },
        )
        .await?;
        trunks::create(
            &cloud,
            &CreateTrunk {
                port_id: port.id.clone(),
                name: Some(format!("{}-trunk", vm.name)),
                ..CreateTrunk::default()
            },
            &[],
        )
        .await?;
    }
    let projects = Projects {
        home: SERVICE_PROJECT_ID.to_owned(),
        tenant: ADMIN_PROJECT_ID.to_owned(),
    };
    let (extra_net, extra_subnet) = extra_network(&cloud, prefix).await?;
    let world = PodWorld {
        extra_net,
        extra_subnet,
        iso: cluster::isolated(&lab, prefix).await?,
        lab,
        cloud,
        pod_net: net.id.clone(),
        other_net: other.id.clone(),
        projects,
    };
    let result = serve(world, &subnet.id, configure, scenario).await;
    drop(sim);
    result
}

/// The same on the lab's own Keystone + Neutron (ML2/OVN): its pod subnet, its VMs' trunks, its project
/// and its second one (`tenant_project_id`).
async fn with_lab_controller<F, Fut>(
    prefix: &str,
    configure: impl FnOnce(&mut Config, &PodWorld),
    scenario: F,
) -> anyhow::Result<()>
where
    F: FnOnce(Arc<PodWorld>) -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<()>>,
{
    let lab = Lab::require();
    let Some(tenant) = lab.tenant_project_id.clone() else {
        anyhow::bail!("lab.json has no tenant_project_id: the lab predates it, run lab/lab up");
    };
    let cloud = Cloud::connect(ClientConfig::clouds_yaml(
        Some(lab.clouds_yaml.clone()),
        lab.cloud.clone(),
    ))
    .await
    .context("login to the lab cloud")?;
    let subnet = lab.pod_subnet_id.clone();
    let (extra_net, extra_subnet) = extra_network(&cloud, prefix).await?;
    let world = PodWorld {
        extra_net,
        extra_subnet,
        iso: cluster::isolated(&lab, prefix).await?,
        cloud,
        pod_net: lab.pod_network_id.clone(),
        other_net: lab.service_network_id.clone(),
        projects: Projects {
            home: lab.project_id.clone(),
            tenant,
        },
        lab,
    };
    serve(world, &subnet, configure, scenario).await
}

/// Runs the controller (pools off, `configure`d) on the world's namespace while `scenario` runs; then
/// stops it and deletes the namespace (stripping finalizers when the scenario failed).
async fn serve<F, Fut>(
    world: PodWorld,
    subnet_id: &str,
    configure: impl FnOnce(&mut Config, &PodWorld),
    scenario: F,
) -> anyhow::Result<()>
where
    F: FnOnce(Arc<PodWorld>) -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<()>>,
{
    let mut config = Config::new(&world.iso.cluster_id, subnet_id);
    config.project_id = Some(world.projects.home.clone());
    config.namespace = Some(world.iso.ns.clone());
    config.pools_enabled = false;
    configure(&mut config, &world);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(run(
        Runtime::new(world.iso.client.clone(), world.cloud.clone(), config),
        async {
            let _ = stopped.await;
        },
    ));
    let world = Arc::new(world);
    let result = scenario(world.clone()).await;
    let _ = stop.send(());
    let _ = tokio::time::timeout(Duration::from_secs(30), task).await;
    if result.is_err() {
        cluster::strip_and_delete_all(&world.iso.client, &world.iso.ns).await;
    }
    cluster::delete_namespace(&world.iso.client, &world.iso.ns).await;
    // Groups the policy controller had no time to delete (it stopped with the scenario).
    let left = security_groups::list(
        &world.cloud,
        Filter::new().tags(&Owner::cluster_filter(&world.iso.cluster_id)),
    )
    .await
    .unwrap_or_default();
    for g in left {
        let _ = security_groups::delete(&world.cloud, &g.id).await;
    }
    // The pods' ports are gone with the namespace; a port still on it makes this fail (it leaks then).
    let _ = networks::delete(&world.cloud, &world.extra_net).await;
    result
}

/// A network and a /24 subnet for extra interfaces (a random 10.x range: nothing else of the lab uses 10/8).
async fn extra_network(cloud: &Cloud, prefix: &str) -> anyhow::Result<(String, String)> {
    let net = networks::create(
        cloud,
        &networks::CreateNetwork::named(format!("kuryr-extra-{prefix}-{:04x}", fastrand::u16(..))),
        &[],
    )
    .await?;
    let cidr = format!("10.{}.{}.0/24", fastrand::u8(100..200), fastrand::u8(..));
    let mut sub = CreateSubnet::v4(&net.id, cidr.clone());
    sub.enable_dhcp = Some(false);
    let subnet = subnets::create(cloud, &sub, &[]).await?;
    Ok((net.id, subnet.id))
}

async fn pod_scenario(
    lab: &Lab,
    iso: &cluster::Isolated,
    cloud: &Cloud,
    pod_net: &str,
    other_net: &str,
) -> anyhow::Result<()> {
    let pods: Api<Pod> = Api::namespaced(iso.client.clone(), &iso.ns);
    let mut pod = cluster::scheduled_pod("annotated", &lab.vms[0].name);
    pod.metadata.annotations = Some(BTreeMap::from([
        (annotations::PROJECT.to_owned(), ADMIN_PROJECT_ID.to_owned()),
        (annotations::NPWG_NETWORKS.to_owned(), "corp-net".to_owned()),
    ]));
    pods.create(&PostParams::default(), &pod).await?;
    let uid = pods.get("annotated").await?.uid().unwrap_or_default();
    let kps: Api<KuryrPort> = Api::namespaced(iso.client.clone(), &iso.ns);
    let names = ["annotated".to_owned()];
    if let Err(e) = cluster::wait_ready(&iso.client, &iso.ns, &names, Duration::from_secs(120)).await {
        let kp = kps.get_opt("annotated").await?;
        anyhow::bail!("{e}; KuryrPort: {}", serde_json::to_string(&kp)?);
    }
    ensure!(kps.get_opt("annotated").await?.is_some(), "no KuryrPort");
    // The Event on the Pod, one per refused annotation.
    let events: Api<Event> = Api::namespaced(iso.client.clone(), &iso.ns);
    let deadline = Instant::now() + Duration::from_secs(30);
    let notes = loop {
        let notes: Vec<String> = events
            .list(&ListParams::default())
            .await?
            .items
            .into_iter()
            .filter(|e| {
                e.reason.as_deref() == Some("AnnotationNotAllowed")
                    && e.involved_object.kind.as_deref() == Some("Pod")
                    && e.type_.as_deref() == Some("Warning")
            })
            .filter_map(|e| e.message)
            .collect();
        let both = notes.iter().any(|m| m.contains("kuryr-project"))
            && notes.iter().any(|m| m.contains("cni.cncf.io/networks"));
        if both || Instant::now() > deadline {
            break notes;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    ensure!(
        notes.iter().any(|m| m.contains("kuryr-project"))
            && notes.iter().any(|m| m.contains("cni.cncf.io/networks")),
        "Pod Events: {notes:?}"
    );
    // Its port: on the pod network, in the controller's project; nothing of ours elsewhere.
    let tagged = ports::list(cloud, Filter::new().tags(&Owner::cluster_filter(&iso.cluster_id))).await?;
    let mine: Vec<_> = tagged
        .iter()
        .filter(|p| Owner::from_tags(&p.tags).is_some_and(|o| o.uid == uid))
        .collect();
    ensure!(mine.len() == 1, "{} ports for the pod", mine.len());
    ensure!(
        mine[0].network_id == pod_net && mine[0].project_id == SERVICE_PROJECT_ID,
        "port on network {} in project {}",
        mine[0].network_id,
        mine[0].project_id
    );
    ensure!(
        tagged
            .iter()
            .all(|p| p.network_id != other_net && p.project_id != ADMIN_PROJECT_ID),
        "a port of this cluster on corp-net or in the admin project"
    );
    eprintln!(
        "pod: AnnotationNotAllowed Event naming both annotations; its port on the pod network in the \
         controller's project"
    );
    // Released as usual: the pod goes, and its KuryrPort once its port has.
    let dp = kuryr_api::DeleteParams {
        grace_period_seconds: Some(0),
        ..Default::default()
    };
    pods.delete("annotated", &dp).await?;
    let deadline = Instant::now() + Duration::from_secs(120);
    while pods.get_opt("annotated").await?.is_some() || kps.get_opt("annotated").await?.is_some() {
        ensure!(Instant::now() < deadline, "the pod's port was not released");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Ok(())
}

/// A Namespace annotated with a project in `--namespace-projects`: its pod's port (and the port's default
/// group) and its NetworkPolicy's group are made in that project, selector groups stay in the controller's;
/// re-annotated with a project not listed, the next pod is wired in the controller's project and the
/// Namespace gets a `ProjectNotAllowed` Event. Nothing is left in either project once the pods go.
async fn project_scenario(w: &PodWorld) -> anyhow::Result<()> {
    let (iso, cloud) = (&w.iso, &w.cloud);
    let namespaces: Api<kuryr_api::Namespace> = Api::all(iso.client.clone());
    let annotate = |project: String| {
        let namespaces = namespaces.clone();
        let ns = iso.ns.clone();
        async move {
            let patch = serde_json::json!({"metadata": {"annotations": {annotations::PROJECT: project}}});
            namespaces
                .patch(&ns, &PatchParams::default(), &Patch::Merge(&patch))
                .await
        }
    };
    annotate(w.projects.tenant.clone()).await?;
    let pods: Api<Pod> = Api::namespaced(iso.client.clone(), &iso.ns);
    let node = &w.lab.vms[0].name;
    pods.create(&PostParams::default(), &cluster::scheduled_pod("inproj", node))
        .await?;
    cluster::wait_ready(
        &iso.client,
        &iso.ns,
        &["inproj".to_owned()],
        Duration::from_secs(300),
    )
    .await?;
    let kps: Api<KuryrPort> = Api::namespaced(iso.client.clone(), &iso.ns);
    let kp = kps.get("inproj").await?;
    ensure!(
        kp.spec.project_id.as_deref() == Some(w.projects.tenant.as_str()),
        "KuryrPort project {:?}",
        kp.spec.project_id
    );
    let port = pod_port(w, &pods, "inproj").await?;
    let admin_default =
        security_groups::list(cloud, Filter::new().name("default").project(&w.projects.tenant))
            .await?
            .into_iter()
            .next()
            .context("no default group in the namespace's project")?;
    // Made with the project's default group; the NetworkPolicy controller (on) then gives every pod port
    // the cluster's groups (allow-all while no policy selects it), which may be the controller's project's.
    let tagged: Vec<String> =
        security_groups::list(cloud, Filter::new().tags(&Owner::cluster_filter(&iso.cluster_id)))
            .await?
            .into_iter()
            .map(|g| g.id)
            .collect();
    ensure!(
        port.project_id == w.projects.tenant
            && port.network_id == w.pod_net
            && port
                .security_groups
                .iter()
                .all(|g| *g == admin_default.id || tagged.contains(g)),
        "port in project {} on network {} with groups {:?} (default {}, the cluster's {tagged:?})",
        port.project_id,
        port.network_id,
        port.security_groups,
        admin_default.id
    );
    // A NetworkPolicy of the namespace: its group in the namespace's project.
    let np: NetworkPolicy = serde_json::from_value(serde_json::json!({
        "apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
        "metadata": {"name": "same-ns"},
        "spec": {"podSelector": {}, "policyTypes": ["Ingress"],
                 "ingress": [{"from": [{"podSelector": {}}]}]},
    }))?;
    let nps: Api<NetworkPolicy> = Api::namespaced(iso.client.clone(), &iso.ns);
    nps.create(&PostParams::default(), &np).await?;
    let description = format!("NetworkPolicy {}/same-ns", iso.ns);
    let deadline = Instant::now() + Duration::from_secs(90);
    let groups = loop {
        let groups =
            security_groups::list(cloud, Filter::new().tags(&Owner::cluster_filter(&iso.cluster_id))).await?;
        if groups.iter().any(|g| g.description == description) || Instant::now() > deadline {
            break groups;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    };
    let np_group = groups
        .iter()
        .find(|g| g.description == description)
        .with_context(|| format!("no group for the policy among {}", groups.len()))?;
    ensure!(
        np_group.project_id == w.projects.tenant,
        "policy group in project {}",
        np_group.project_id
    );
    ensure!(
        groups
            .iter()
            .filter(|g| g.description != description && g.name.starts_with("sel"))
            .all(|g| g.project_id == w.projects.home),
        "selector groups outside the controller's project"
    );
    eprintln!("listed project: port, its default group and the policy's group in the namespace's project");

    // Not listed: served in the controller's project, with an Event on the Namespace. The project read
    // off a Namespace is reused for 10 s (docs/projects.md): let that pass.
    annotate("000000000000000000000000000000ff".to_owned()).await?;
    tokio::time::sleep(Duration::from_secs(11)).await;
    pods.create(&PostParams::default(), &cluster::scheduled_pod("outproj", node))
        .await?;
    cluster::wait_ready(
        &iso.client,
        &iso.ns,
        &["outproj".to_owned()],
        Duration::from_secs(300),
    )
    .await?;
    let port = pod_port(w, &pods, "outproj").await?;
    ensure!(
        port.project_id == w.projects.home,
        "unlisted project: port in {}",
        port.project_id
    );
    let events: Api<Event> = Api::all(iso.client.clone());
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let found = events
            .list(&ListParams::default().fields(&format!("involvedObject.name={}", iso.ns)))
            .await?
            .items
            .into_iter()
            .any(|e| {
                e.reason.as_deref() == Some("ProjectNotAllowed")
                    && e.involved_object.kind.as_deref() == Some("Namespace")
                    && e.message
                        .unwrap_or_default()
                        .contains("000000000000000000000000000000ff")
            });
        if found {
            break;
        }
        ensure!(
            Instant::now() < deadline,
            "no ProjectNotAllowed Event on the Namespace"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    eprintln!("unlisted project: port in the controller's project, ProjectNotAllowed Event on the Namespace");

    // Released: no port of the cluster left in either project.
    let dp = kuryr_api::DeleteParams {
        grace_period_seconds: Some(0),
        ..Default::default()
    };
    for name in ["inproj", "outproj"] {
        pods.delete(name, &dp).await?;
    }
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        let left = ports::list(cloud, Filter::new().tags(&Owner::cluster_filter(&iso.cluster_id))).await?;
        if left.is_empty() && pods.list(&ListParams::default()).await?.items.is_empty() {
            break;
        }
        ensure!(
            Instant::now() < deadline,
            "ports left: {:?}",
            left.iter().map(|p| (&p.id, &p.project_id)).collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    nps.delete("same-ns", &Default::default()).await?;
    Ok(())
}

/// The one port tagged for pod `name`.
async fn pod_port(w: &PodWorld, pods: &Api<Pod>, name: &str) -> anyhow::Result<ports::Port> {
    let uid = pods.get(name).await?.uid().unwrap_or_default();
    let mut mine: Vec<ports::Port> = ports::list(
        &w.cloud,
        Filter::new().tags(&Owner::cluster_filter(&w.iso.cluster_id)),
    )
    .await?
    .into_iter()
    .filter(|p| Owner::from_tags(&p.tags).is_some_and(|o| o.uid == uid))
    .collect();
    ensure!(mine.len() == 1, "{} ports for pod {name}", mine.len());
    mine.pop().context("no port")
}

/// A pod asking for three NetworkAttachmentDefinitions: one on an allowed subnet becomes interface `data0`
/// (its own port on that subnet, wired like eth0: a subport of the node's trunk with a VLAN of its own);
/// one naming a subnet outside `--additional-subnets` and one that does not exist are told with Warning
/// Events, and the pod is wired without them. Deleting the pod releases both ports.
async fn networks_scenario(w: &PodWorld) -> anyhow::Result<()> {
    let (iso, cloud) = (&w.iso, &w.cloud);
    cluster::install_network_attachment_crd(&iso.client).await?;
    let nads: Api<NetworkAttachmentDefinition> = Api::namespaced(iso.client.clone(), &iso.ns);
    for (name, subnet) in [
        ("extra", w.extra_subnet.as_str()),
        ("blocked", "00000000-0000-4000-8000-0000000000bb"),
    ] {
        let mut nad = NetworkAttachmentDefinition::new(name, Default::default());
        nad.metadata.annotations = Some(BTreeMap::from([(
            KURYR_CONFIG.to_owned(),
            serde_json::json!({ "subnetId": subnet }).to_string(),
        )]));
        nads.create(&PostParams::default(), &nad).await?;
    }
    let pods: Api<Pod> = Api::namespaced(iso.client.clone(), &iso.ns);
    let mut pod = cluster::scheduled_pod("multi", &w.lab.vms[0].name);
    pod.metadata.annotations = Some(BTreeMap::from([(
        annotations::NPWG_NETWORKS.to_owned(),
        "extra@data0, blocked, missing".to_owned(),
    )]));
    pods.create(&PostParams::default(), &pod).await?;
    cluster::wait_ready(
        &iso.client,
        &iso.ns,
        &["multi".to_owned()],
        Duration::from_secs(300),
    )
    .await?;
    let kps: Api<KuryrPort> = Api::namespaced(iso.client.clone(), &iso.ns);
    let kp = kps.get("multi").await?;
    ensure!(
        kp.spec.additional_networks.len() == 1
            && kp.spec.additional_networks[0].interface == "data0"
            && kp.spec.additional_networks[0].subnet_id == w.extra_subnet,
        "KuryrPort additionalNetworks {:?}",
        kp.spec.additional_networks
    );
    let st = kp.status.context("KuryrPort status")?;
    let names: Vec<&String> = st.vifs.keys().collect();
    ensure!(names == ["data0", "eth0"], "interfaces {names:?}");
    let (eth0, data0) = (&st.vifs["eth0"], &st.vifs["data0"]);
    ensure!(eth0.default && !data0.default, "eth0 is the default interface");
    ensure!(
        data0.vif.active && data0.vif.network_id == w.extra_net && eth0.vif.network_id == w.pod_net,
        "data0 on {} (active {}), eth0 on {}",
        data0.vif.network_id,
        data0.vif.active,
        eth0.vif.network_id
    );
    let port = ports::get(cloud, &data0.vif.port_id).await?;
    ensure!(
        port.fixed_ips.iter().any(|ip| ip.subnet_id == w.extra_subnet),
        "data0's port has no address on the extra subnet: {:?}",
        port.fixed_ips
    );
    ensure!(
        data0.vif.vlan_id.is_some() && data0.vif.vlan_id != eth0.vif.vlan_id,
        "VLANs eth0 {:?}, data0 {:?}",
        eth0.vif.vlan_id,
        data0.vif.vlan_id
    );
    // Both subports of one trunk: the node's (the trunk whose parent is its port).
    let all = trunks::list(cloud, Filter::new()).await?;
    let trunk = all
        .iter()
        .find(|t| t.sub_ports.iter().any(|s| s.port_id == eth0.vif.port_id))
        .context("eth0 is no trunk's subport")?;
    let parent = ports::get(cloud, &trunk.port_id).await?;
    ensure!(
        parent.fixed_ips.iter().any(|ip| ip.ip_address == w.lab.vms[0].ip),
        "eth0's trunk is not {}'s",
        w.lab.vms[0].name
    );
    ensure!(
        trunk.sub_ports.iter().any(|s| s.port_id == data0.vif.port_id),
        "data0's port {} is not a subport of {}'s trunk",
        data0.vif.port_id,
        w.lab.vms[0].name
    );
    // The refused ones, on the Pod.
    let events: Api<Event> = Api::namespaced(iso.client.clone(), &iso.ns);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let reasons: BTreeSet<String> = events
            .list(&ListParams::default())
            .await?
            .items
            .into_iter()
            .filter(|e| e.involved_object.name.as_deref() == Some("multi"))
            .filter_map(|e| e.reason)
            .collect();
        if reasons.contains("SubnetNotAllowed") && reasons.contains("NetworkAttachmentInvalid") {
            break;
        }
        ensure!(Instant::now() < deadline, "Pod Events: {reasons:?}");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    eprintln!("extra network: data0 on its own subport and subnet; the refused attachments told on the Pod");
    let dp = kuryr_api::DeleteParams {
        grace_period_seconds: Some(0),
        ..Default::default()
    };
    pods.delete("multi", &dp).await?;
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        let left = ports::list(cloud, Filter::new().tags(&Owner::cluster_filter(&iso.cluster_id))).await?;
        let on_extra = ports::list(cloud, Filter::new().eq("network_id", &w.extra_net)).await?;
        if left.is_empty() && on_extra.is_empty() && pods.get_opt("multi").await?.is_none() {
            break;
        }
        ensure!(
            Instant::now() < deadline,
            "ports left: {} tagged, {} on the extra network",
            left.len(),
            on_extra.len()
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    Ok(())
}
