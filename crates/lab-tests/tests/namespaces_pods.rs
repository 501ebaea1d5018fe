//! Namespace subnet mode through the whole pod path on the lab's real Neutron: kuryr-controller (in-process,
//! scoped to one namespace of this run) creates the namespace's network when its first pod needs it, the
//! pods' subports take their IPs from that subnet, and deleting the pods and then the namespace removes the
//! ports, the router interface, the subnet and the network (tag scan of this run's cluster id).
//! Pods go to vm3 (no kubelet there): they stay Pending but are scheduled, which is all the pod path needs.
//! The first test runs dual-stack (`--namespace-secondary-subnet-pool`, an IPv6 pool this run makes): the
//! namespace network gets an IPv6 subnet from the pool too, on the router, and each pod's port an address
//! of each family. The second test does it for a Namespace put in the lab's second project
//! (`--namespace-projects`): the network, subnet and ports are that project's.

mod nsnet;

use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context as _};
use kuryr_api::{
    Api, Client, DeleteParams, KuryrNetwork, KuryrPort, ListParams, Namespace, Pod, PostParams, ResourceExt,
};
use kuryr_openstack::neutron::subnetpools::{self, CreateSubnetPool};
use kuryr_openstack::neutron::{networks, ports, subnets, Filter};
use kuryr_openstack::{Cloud, Owner};
use lab_tests::Lab;
use nsnet::{delete_subnetpools, leftovers, strip_finalizers, wait_gone, WAIT};
use serde_json::json;

const NODE: &str = "vm3";

#[tokio::test]
async fn pods_land_on_their_namespace_subnet_and_the_network_goes_with_the_namespace() -> anyhow::Result<()> {
    in_namespace_mode(false).await
}

/// The same for a Namespace annotated with the lab's second project, listed in `--namespace-projects`:
/// its network, subnet and pod ports are made in that project (docs/projects.md).
#[tokio::test]
async fn a_namespace_in_its_own_project_gets_its_network_and_ports_there() -> anyhow::Result<()> {
    in_namespace_mode(true).await
}

async fn in_namespace_mode(own_project: bool) -> anyhow::Result<()> {
    let lab = Lab::require();
    let (client, cloud, run_id) = nsnet::connect(&lab).await?;
    let ns = format!("nsnet-{run_id}");
    let cluster_id = format!("nstest-{run_id}");
    let mut config = nsnet::namespace_mode(&lab, &cluster_id);
    config.namespace = Some(ns.clone());
    if !own_project {
        // Dual-stack: an IPv6 pool of this run (its cluster's tags, so the cleanup below takes it too).
        let owner = Owner::new(&cluster_id, "subnetpool", "v6");
        let req = CreateSubnetPool {
            name: format!("kuryr-test-v6-{run_id}"),
            prefixes: vec![format!("fd43:{:x}::/56", fastrand::u16(1..))],
            default_prefixlen: Some(64),
            project_id: Some(lab.project_id.clone()),
            ..CreateSubnetPool::default()
        };
        let pool = subnetpools::create(&cloud, &req, &owner.tags()?).await?;
        config.networks.secondary_subnet_pool_id = Some(pool.id);
    }
    let mut annotations = serde_json::Map::new();
    let project = if own_project {
        let tenant = lab
            .tenant_project_id
            .clone()
            .context("lab.json has no tenant_project_id: the lab predates it, run lab/lab up")?;
        config.namespace_projects = kuryr_core::projects::NamespaceProjects::new([tenant.clone()]);
        annotations.insert(kuryr_api::annotations::PROJECT.to_owned(), tenant.clone().into());
        tenant
    } else {
        lab.project_id.clone()
    };
    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": ns, "annotations": annotations}}))?,
        )
        .await?;
    lab_tests::cluster::wait_default_service_account(&client, &ns).await?;
    let dual = config.networks.secondary_subnet_pool_id.is_some();
    let controller = nsnet::Controller::start(&client, &cloud, config);
    let result = scenario(&client, &cloud, &ns, &lab, &project, dual).await;
    if result.is_err() {
        strip_finalizers(&client, &ns).await;
    }
    let _ = namespaces.delete(&ns, &DeleteParams::default()).await;
    let gone = wait_gone(&namespaces, &ns).await;
    controller.stop().await;
    let left = leftovers(&cloud, &cluster_id).await?;
    // Refused while a subnet of the pool is left: the scenario's own error, the namespace's or the leftovers
    // say why first (CI of stop 50 showed only this one).
    let pools = delete_subnetpools(&cloud, &cluster_id).await;
    result?;
    gone?;
    ensure!(
        left.is_empty(),
        "left behind after the namespace was deleted: {left:?}"
    );
    pools
}

/// `project`: where the namespace's network, subnet and ports must be; `dual`: dual-stack.
async fn scenario(
    client: &Client,
    cloud: &Cloud,
    ns: &str,
    lab: &Lab,
    project: &str,
    dual: bool,
) -> anyhow::Result<()> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let kps: Api<KuryrPort> = Api::namespaced(client.clone(), ns);
    let kns: Api<KuryrNetwork> = Api::namespaced(client.clone(), ns);
    ensure!(
        kns.get_opt(ns).await?.is_none(),
        "network made before any pod needed it (lazy mode)"
    );
    for name in ["a", "b"] {
        let pod: Pod = serde_json::from_value(json!({"metadata": {"name": name},
            "spec": {"nodeName": NODE, "containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.9"}]}}))?;
        pods.create(&PostParams::default(), &pod).await?;
    }
    let deadline = Instant::now() + WAIT;
    let wired = loop {
        let list = kps.list(&ListParams::default()).await?;
        let ready: Vec<KuryrPort> = list.into_iter().filter(is_ready).collect();
        if ready.len() == 2 {
            break ready;
        }
        if Instant::now() > deadline {
            bail!("pods not wired within {WAIT:?} ({} ready)", ready.len());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let kn = kns.get(ns).await?;
    let st = kn.status.clone().context("KuryrNetwork status")?;
    let (net_id, subnet_id) = (
        st.net_id.clone().context("netId")?,
        st.subnet_id.clone().context("subnetId")?,
    );
    ensure!(
        net_id != lab.pod_network_id,
        "namespace network is the default pod network"
    );
    let subnet = subnets::get(cloud, &subnet_id).await?;
    let network = networks::get(cloud, &net_id).await?;
    ensure!(
        network.project_id == project && subnet.project_id == project,
        "network in project {}, subnet in {}; want {project}",
        network.project_id,
        subnet.project_id
    );
    ensure!(
        kn.spec.project_id == project,
        "KuryrNetwork spec.projectId {}",
        kn.spec.project_id
    );
    let subnet6 = match (&st.secondary_subnet_id, dual) {
        (Some(id), true) => {
            let s = subnets::get(cloud, id).await?;
            ensure!(
                s.ip_version == 6 && s.network_id == net_id && s.project_id == project,
                "secondary subnet {s:?}"
            );
            let router = st.router_id.clone().context("routerId")?;
            let on_router = ports::list(
                cloud,
                Filter::new().eq("device_id", &router).fixed_ip_subnet(&s.id),
            )
            .await?;
            ensure!(
                !on_router.is_empty(),
                "IPv6 subnet {} not on router {router}",
                s.cidr
            );
            Some(s)
        }
        (None, false) => None,
        (got, _) => bail!("secondary subnet {got:?}, dual-stack {dual}"),
    };
    let (base, len) = subnet.cidr.split_once('/').context("cidr")?;
    let (base, len): (Ipv4Addr, u32) = (base.parse()?, len.parse()?);
    let mask = u32::MAX << (32 - len);
    for kp in &wired {
        let vif = &kp
            .status
            .as_ref()
            .context("status")?
            .vifs
            .get("eth0")
            .context("eth0")?
            .vif;
        ensure!(
            vif.network_id == net_id,
            "{}: port on network {}",
            kp.name_any(),
            vif.network_id
        );
        let ip: Ipv4Addr = vif.ips.first().context("ip")?.address.parse()?;
        if let Some(s6) = &subnet6 {
            ensure!(
                vif.ips.len() == 2
                    && vif.ips[1].subnet_id.as_deref() == Some(s6.id.as_str())
                    && vif.ips[1].address.contains(':'),
                "{}: not an address of each family: {:?}",
                kp.name_any(),
                vif.ips
            );
        }
        ensure!(
            u32::from(ip) & mask == u32::from(base),
            "{}: {ip} outside {}",
            kp.name_any(),
            subnet.cidr
        );
        let port = ports::get(cloud, &vif.port_id).await?;
        ensure!(
            port.network_id == net_id && port.project_id == project,
            "{}: Neutron says network {}, project {}",
            kp.name_any(),
            port.network_id,
            port.project_id
        );
    }
    eprintln!(
        "namespace {ns}: network {net_id}, subnet {} (and {:?}) in project {project}; both pods on it",
        subnet.cidr,
        subnet6.as_ref().map(|s| &s.cidr)
    );
    // Pods go first (their ports are released by the KuryrPort controller), the namespace after.
    let now = DeleteParams {
        grace_period_seconds: Some(0),
        ..DeleteParams::default()
    };
    for name in ["a", "b"] {
        pods.delete(name, &now).await?;
    }
    let deadline = Instant::now() + WAIT;
    while !kps.list(&ListParams::default()).await?.items.is_empty() {
        if Instant::now() > deadline {
            bail!("KuryrPorts not released within {WAIT:?}");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Ok(())
}

fn is_ready(kp: &KuryrPort) -> bool {
    kp.status
        .as_ref()
        .is_some_and(|s| s.all_active() && kuryr_api::conditions::is_condition_true(&s.conditions, "Ready"))
}
