//! The garbage collector against the lab's real Neutron and Octavia, during a pod burst: orphans tagged
//! with this test's cluster id are planted (a port, a port left as a trunk subport, a security group, a
//! network with its subnet, a floating IP, a load balancer; all owned by uids no Kubernetes object has),
//! plus an object of a kind the collector must never touch. An in-process controller wires a burst of
//! pods while the collector sweeps: the first sweep only suspects, `kuryrctl gc` lists the
//! orphans for collection and the pods' ports as owned, the second sweep deletes exactly the orphans;
//! every pod still ends up Ready with its port, and the counts show in the metrics.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use anyhow::{ensure, Context as _};
use kuryr_api::{Api, DeleteParams, KuryrPort, ListParams, Pod, PostParams};
use kuryr_controller::gc::Collector;
use kuryr_controller::metrics::Metrics;
use kuryr_controller::runtime::{run, Runtime};
use kuryr_controller::Config;
use kuryr_openstack::neutron::ports::{self, CreatePort};
use kuryr_openstack::neutron::security_groups::{self, CreateSecurityGroup};
use kuryr_openstack::neutron::subnets::{self, CreateSubnet};
use kuryr_openstack::neutron::trunks::{self, SubPort};
use kuryr_openstack::neutron::{floating_ips, networks, Filter};
use kuryr_openstack::octavia::loadbalancers::{self, CreateLoadBalancer};
use kuryr_openstack::{waiter, ClientConfig, Cloud, Owner, WaitOptions};
use lab_tests::cluster::{self, scheduled_pod};
use lab_tests::Lab;
use prometheus_client::registry::Registry;

const BURST: usize = 6;
const TIMEOUT: Duration = Duration::from_secs(120);

/// What was planted: (resource label, id).
type Planted = Vec<(&'static str, String)>;

#[tokio::test]
async fn gc_collects_planted_orphans_and_no_live_object_during_a_pod_burst() -> anyhow::Result<()> {
    let lab = Lab::require();
    let cluster::Isolated {
        client,
        ns,
        cluster_id,
    } = cluster::isolated(&lab, "gc").await?;
    let cloud = Cloud::connect(ClientConfig::clouds_yaml(
        Some(lab.clouds_yaml.clone()),
        lab.cloud.clone(),
    ))
    .await?;
    let mut config = Config::new(&cluster_id, &lab.pod_subnet_id);
    config.namespace = Some(ns.clone());
    config.project_id = Some(lab.project_id.clone());
    // Every pod its own port (kind=KuryrPort, collectable); pools are tests/pod_pools.rs'.
    config.pools_enabled = false;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let controller = tokio::spawn(run(Runtime::new(client.clone(), cloud.clone(), config), async {
        let _ = stopped.await;
    }));
    let mut planted = Planted::new();
    let mut keeper = None;
    let result = scenario(&lab, &client, &cloud, &ns, &cluster_id, &mut planted, &mut keeper).await;
    if result.is_err() {
        cluster::strip_and_delete_all(&client, &ns).await;
    }
    // Whatever the outcome: nothing of this test stays behind.
    cleanup(&cloud, &cluster_id, &planted, keeper.as_deref()).await;
    let _ = stop.send(());
    let _ = tokio::time::timeout(Duration::from_secs(30), controller).await;
    cluster::delete_namespace(&client, &ns).await;
    result
}

async fn plant(lab: &Lab, cloud: &Cloud, cluster_id: &str, planted: &mut Planted) -> anyhow::Result<String> {
    let dead = |kind: &str| Owner::new(cluster_id, kind, format!("dead-{:08x}", fastrand::u32(..)));
    let name = |what: &str| format!("{cluster_id}-{what}");
    let port = ports::create(
        cloud,
        &CreatePort {
            name: Some(name("orphan-port")),
            ..CreatePort::on_network(&lab.pod_network_id)
        }
        .tagged(dead("KuryrPort").tags()?),
    )
    .await?;
    planted.push(("port", port.id));
    // A stray subport: an orphaned pod port still on a node VM's trunk.
    let sub = ports::create(
        cloud,
        &CreatePort {
            name: Some(name("orphan-subport")),
            ..CreatePort::on_network(&lab.pod_network_id)
        }
        .tagged(dead("pod").tags()?),
    )
    .await?;
    planted.push(("port", sub.id.clone()));
    let vlan = 4000 + u32::from(fastrand::u8(0..90));
    trunks::add_subports(cloud, &lab.vms[0].trunk_id, &[SubPort::vlan(&sub.id, vlan)]).await?;
    let sg = security_groups::create(
        cloud,
        &CreateSecurityGroup {
            name: name("orphan-sg"),
            ..CreateSecurityGroup::default()
        },
        &dead("NetworkPolicy").tags()?,
    )
    .await?;
    planted.push(("security_group", sg.id));
    let owner = dead("KuryrNetwork").tags()?;
    let net = networks::create(cloud, &networks::CreateNetwork::named(name("orphan-net")), &owner).await?;
    planted.push(("network", net.id.clone()));
    let cidr = format!("10.250.{}.0/24", fastrand::u8(0..250));
    let subnet = subnets::create(cloud, &CreateSubnet::v4(&net.id, cidr), &owner).await?;
    planted.push(("subnet", subnet.id));
    let fip = floating_ips::create(
        cloud,
        &floating_ips::CreateFloatingIp {
            floating_network_id: lab.external_network_id.clone(),
            description: Some(name("orphan-fip")),
            ..floating_ips::CreateFloatingIp::default()
        },
        &dead("service").tags()?,
    )
    .await?;
    planted.push(("floatingip", fip.id));
    let lb = loadbalancers::create(
        cloud,
        &CreateLoadBalancer {
            name: name("orphan-lb"),
            vip_subnet_id: Some(lab.service_subnet_id.clone()),
            provider: Some("ovn".into()),
            tags: dead("service").tags()?,
            ..CreateLoadBalancer::default()
        },
    )
    .await?;
    planted.push(("loadbalancer", lb.id.clone()));
    waiter::wait_lb_active(cloud, &lb.id, &wait()).await?;
    // Never collected: a kind whose uid is not a Kubernetes object's.
    let keep = ports::create(
        cloud,
        &CreatePort {
            name: Some(name("keeper")),
            ..CreatePort::on_network(&lab.pod_network_id)
        }
        .tagged(Owner::new(cluster_id, "cluster", cluster_id).tags()?),
    )
    .await?;
    Ok(keep.id)
}

fn wait() -> WaitOptions {
    WaitOptions {
        timeout: TIMEOUT,
        stuck_after: Duration::from_secs(90),
        ..WaitOptions::default()
    }
}

async fn scenario(
    lab: &Lab,
    client: &kube::Client,
    cloud: &Cloud,
    ns: &str,
    cluster_id: &str,
    planted: &mut Planted,
    keeper: &mut Option<String>,
) -> anyhow::Result<()> {
    *keeper = Some(plant(lab, cloud, cluster_id, planted).await?);
    let mut registry = Registry::default();
    let metrics = Metrics::register(&mut registry);
    let mut gc = Collector::new(
        cloud.clone(),
        client.clone(),
        cluster_id.to_owned(),
        Some(lab.project_id.clone()),
        Duration::ZERO,
        metrics,
    );

    // The burst: pods created while the collector sweeps.
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let mut names = Vec::new();
    for i in 0..BURST {
        let name = format!("burst-{i}");
        pods.create(
            &PostParams::default(),
            &scheduled_pod(&name, &lab.vms[i % lab.vms.len()].name),
        )
        .await?;
        names.push(name);
        if i == 1 {
            let first = gc.sweep().await?;
            ensure!(
                first.collected == 0,
                "first sighting collected {}",
                first.collected
            );
            ensure!(
                first.suspects >= planted.len(),
                "suspects {} < {} planted",
                first.suspects,
                planted.len()
            );
        }
    }

    // The dry run names exactly the planted objects for collection.
    let dry = dry_run(lab, cluster_id).await?;
    let listed: BTreeSet<String> = dry["objects"]
        .as_array()
        .context("objects")?
        .iter()
        .filter(|o| o["verdict"] == "collect")
        .filter_map(|o| o["id"].as_str().map(str::to_owned))
        .collect();
    let want: BTreeSet<String> = planted.iter().map(|(_, id)| id.clone()).collect();
    ensure!(
        listed == want,
        "dry run would collect {listed:?}, planted {want:?}"
    );
    ensure!(
        dry["objects"]
            .as_array()
            .context("objects")?
            .iter()
            .any(|o| o["verdict"] == "unknown_kind"),
        "the keeper is not reported as unknown_kind"
    );

    let second = gc.sweep().await?;
    ensure!(second.failed == 0, "failures: {second:?}");
    ensure!(
        second.collected == planted.len(),
        "collected {} of {} planted",
        second.collected,
        planted.len()
    );
    let owned_collected: Vec<_> = second
        .lines
        .iter()
        .filter(|l| l.verdict == "collect" && !want.contains(&l.id))
        .collect();
    ensure!(
        owned_collected.is_empty(),
        "collected objects that were not planted: {owned_collected:?}"
    );

    // Every pod is wired and keeps its port; the keeper is there; the orphans are gone.
    let ready = cluster::wait_ready(client, ns, &names, TIMEOUT).await?;
    for (name, kp) in &ready {
        let port_id = &kp
            .status
            .as_ref()
            .context("status")?
            .vifs
            .get("eth0")
            .context("eth0")?
            .vif
            .port_id;
        ports::get(cloud, port_id)
            .await
            .with_context(|| format!("{name}: its port is gone"))?;
    }
    ports::get(cloud, keeper.as_deref().unwrap_or_default())
        .await
        .context("the keeper port was deleted")?;
    for (what, id) in planted.iter() {
        let gone = match *what {
            "port" => ports::get(cloud, id)
                .await
                .err()
                .is_some_and(|e| e.is_not_found()),
            "security_group" => security_groups::get(cloud, id)
                .await
                .err()
                .is_some_and(|e| e.is_not_found()),
            "network" => networks::get(cloud, id)
                .await
                .err()
                .is_some_and(|e| e.is_not_found()),
            "subnet" => subnets::get(cloud, id)
                .await
                .err()
                .is_some_and(|e| e.is_not_found()),
            "floatingip" => floating_ips::get(cloud, id)
                .await
                .err()
                .is_some_and(|e| e.is_not_found()),
            _ => waiter::wait_lb_deleted(cloud, id, &wait()).await.is_ok(),
        };
        ensure!(gone, "{what} {id} still there");
    }
    let t = trunks::get(cloud, &lab.vms[0].trunk_id).await?;
    ensure!(
        !t.sub_ports.iter().any(|s| want.contains(&s.port_id)),
        "the stray subport is still on the trunk"
    );

    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry)?;
    for (label, n) in [
        ("port", 2),
        ("security_group", 1),
        ("network", 1),
        ("subnet", 1),
        ("floatingip", 1),
        ("loadbalancer", 1),
    ] {
        let line = format!("kuryr_gc_collected_total{{resource=\"{label}\"}} {n}");
        ensure!(text.contains(&line), "metrics lack `{line}`:\n{text}");
    }
    ensure!(text.contains("kuryr_gc_sweeps_total 2"), "sweeps not counted");
    eprintln!("gc: planted {} orphans; sweep 1 suspected {}, sweep 2 collected {}; {BURST} burst pods kept their ports",
        planted.len(), planted.len(), second.collected);

    // Release the pods through the controller.
    for name in &names {
        pods.delete(
            name,
            &DeleteParams {
                grace_period_seconds: Some(0),
                ..DeleteParams::default()
            },
        )
        .await?;
    }
    let kps: Api<KuryrPort> = Api::namespaced(client.clone(), ns);
    let deadline = Instant::now() + TIMEOUT;
    while !kps.list(&ListParams::default()).await?.items.is_empty()
        || !pods.list(&ListParams::default()).await?.items.is_empty()
    {
        ensure!(Instant::now() < deadline, "pods not released");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Ok(())
}

/// `kuryrctl gc -o json --grace-seconds 0` (a dry run: gc only lists) against the lab.
async fn dry_run(lab: &Lab, cluster_id: &str) -> anyhow::Result<serde_json::Value> {
    use clap::Parser;
    let cli = kuryrctl::Cli::try_parse_from([
        "kuryrctl",
        "--kubeconfig",
        &lab.kubeconfig.display().to_string(),
        "--clouds-yaml",
        &lab.clouds_yaml.display().to_string(),
        "--os-cloud",
        &lab.cloud,
        "--cluster-id",
        cluster_id,
        "--project-id",
        &lab.project_id,
        "-o",
        "json",
        "gc",
        "--grace-seconds",
        "0",
    ])?;
    let mut out = Vec::new();
    let code = cli.run_to(&mut out).await?;
    ensure!(code == 0, "kuryrctl gc exit code {code}");
    Ok(serde_json::from_slice(&out)?)
}

async fn cleanup(cloud: &Cloud, cluster_id: &str, planted: &Planted, keeper: Option<&str>) {
    for (what, id) in planted {
        if *what == "loadbalancer" {
            let _ = loadbalancers::delete(cloud, id, true).await;
        }
    }
    if let Ok(ts) = trunks::list(cloud, Filter::new()).await {
        for t in ts {
            let ids: Vec<String> = t
                .sub_ports
                .iter()
                .filter(|s| planted.iter().any(|(_, id)| *id == s.port_id))
                .map(|s| s.port_id.clone())
                .collect();
            if !ids.is_empty() {
                let _ = trunks::remove_subports(cloud, &t.id, &ids).await;
            }
        }
    }
    if let Ok(tagged) = ports::list(cloud, Filter::new().tags(&Owner::cluster_filter(cluster_id))).await {
        for p in tagged {
            let _ = ports::delete(cloud, &p.id).await;
        }
    }
    if let Some(k) = keeper {
        let _ = ports::delete(cloud, k).await;
    }
    for (what, id) in planted {
        let _ = match *what {
            "security_group" => security_groups::delete(cloud, id).await,
            "floatingip" => floating_ips::delete(cloud, id).await,
            "subnet" => subnets::delete(cloud, id).await,
            _ => Ok(()),
        };
    }
    for (what, id) in planted {
        if *what == "network" {
            let _ = networks::delete(cloud, id).await;
        }
    }
}
