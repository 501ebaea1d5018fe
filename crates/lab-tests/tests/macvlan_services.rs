//! Routed traffic to nested-macvlan pods on the lab's OVN: every backend of a Service answers, whoever asks.
//!
//! A Deployment of busybox httpd pods (each answering with its name) runs on both kubelet nodes, two or more
//! per node, each pod a macvlan of its VM's NIC with its own VRRP MAC paired with its IP on the VM's port
//! (nested-macvlan; kuryr-controller in-process, scoped to this test's namespace). Behind a ClusterIP Service
//! and a LoadBalancer Service (Octavia ovn provider, a floating IP from the lab's external network), requests
//! come from a host on another Neutron network joined to the pods' by the lab's router (standing for a pod of
//! a namespace network: a macvlan pod cannot be on another network than its VM's port), from a pod on the VM
//! node (nested-vlan, a trunk subport), from the host outside the cluster through the floating IP, and from
//! a pod on each kubelet node. Checked: from the first three every request is answered and every backend
//! answers; from a kubelet node's pod every backend on the other VMs answers, while requests sent to a
//! backend on the pod's own VM go unanswered (counted and printed): OVN's limit for `virtual` ports, which
//! share their VM port's conntrack zone ([`judge`], docs/cni.md). And every pod and the routed host ping each
//! other both ways through the router.
//!
//! OVN before 23.06 bound every macvlan pod IP of a VM, for routed traffic, to the VM's first VRRP MAC: only
//! one pod per VM answered through a load balancer or the router. This test fails on such an OVN.
//!
//! Needs the VM node (`lab/lab vms up`); `./test.sh` runs it in the VM stage beside `vm_nodes`.
//!
//! lab-tests: group macvlan (address pairs on the lab VMs' ports: one writer at a time)

mod plugged;

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context as _};
use kuryr_api::k8s_openapi::api::apps::v1::Deployment;
use kuryr_api::k8s_openapi::api::core::v1::Service;
use kuryr_api::{
    Api, Client, DeleteParams, KuryrLoadBalancer, KuryrPort, ListParams, Namespace, Pod, PostParams,
    ResourceExt, VifType,
};
use kuryr_controller::runtime::{run, Runtime};
use kuryr_controller::services::ServicesConfig;
use kuryr_controller::Config;
use kuryr_openstack::neutron::routers::{self, Interface};
use kuryr_openstack::neutron::{networks, ports, security_groups, subnets, Filter};
use kuryr_openstack::{ClientConfig, Cloud, Owner};
use lab_tests::nodes::{nsenter, pod_task};
use lab_tests::Lab;
use plugged::{plug, Attach, Plugged};
use serde_json::json;

const KUBELET_LABEL: &str = "kuryr.lab/kubelet=true";
/// Backends: the Deployment spreads them evenly, so two per kubelet node.
const BACKENDS: usize = 4;
const HTTP_PORT: u16 = 8080;
/// Requests per client: enough that every one of 4 backends answers unless one is unreachable (an OVN load
/// balancer picks a backend by hash; a backend missed by 60 requests happens with odds of 0.75^60 ≈ 3e-8).
const REQUESTS: usize = 60;
/// Generous bounds; what is asserted is what happens, not how fast. The VM node is emulated (TCG).
const RUNNING_TIMEOUT: Duration = Duration::from_secs(300);
const VM_TIMEOUT: Duration = Duration::from_secs(600);
/// The load balancers' first answer: Octavia builds them once the pods are Running.
const FIRST_ANSWER: Duration = Duration::from_secs(240);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_macvlan_backend_answers_through_its_services_from_each_node_another_network_the_vm_and_outside(
) -> anyhow::Result<()> {
    let lab = Lab::require();
    lab_tests::trace_controllers();
    let client = lab.kube_client().await?;
    let knodes = lab_tests::nodes::ready(&client, KUBELET_LABEL).await?;
    ensure!(
        knodes.len() >= 2,
        "this test needs two Ready kubelet nodes ({KUBELET_LABEL}), found {knodes:?}: run lab/lab up"
    );
    let vm_node = lab_tests::nodes::vm_node(&lab, &client).await?;
    lab_tests::cluster::install_crds(&client).await?;
    let cloud = Cloud::connect(ClientConfig::clouds_yaml(
        Some(lab.clouds_yaml.clone()),
        lab.cloud.clone(),
    ))
    .await
    .context("login to the lab cloud")?;
    let run_id = format!("{:04x}", fastrand::u16(..));
    let ns = format!("kmacsvc-{run_id}");
    let cluster_id = format!("kmacsvc-{run_id}");
    let owner = Owner::new(&cluster_id, "test", "routed");
    lab_tests::cluster::create_namespace(&client, &ns).await?;

    let mut config = Config::new(&cluster_id, &lab.pod_subnet_id);
    config.namespace = Some(ns.clone());
    // The namespace nodes' default; the VM node's pod-vif label asks for nested-vlan.
    config.vif_type = VifType::NestedMacvlan;
    config.pools_enabled = false;
    let mut sc = ServicesConfig::new(&lab.service_subnet_id);
    sc.member_subnet_id = Some(lab.pod_subnet_id.clone());
    sc.provider = Some("ovn".into());
    sc.default_provider = "ovn".into();
    sc.external_network_id = Some(lab.external_network_id.clone());
    config.services = Some(sc);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let controller = tokio::spawn(run(Runtime::new(client.clone(), cloud.clone(), config), async {
        let _ = stopped.await;
    }));

    let mut routed = Routed::default();
    let result = scenario(
        &lab,
        &client,
        &cloud,
        &ns,
        &owner,
        &run_id,
        vm_node.as_deref(),
        &mut routed,
    )
    .await;

    // Cleanup whatever happened: Services, the Deployment and the pods (kubelet stops them, the controller
    // releases the ports and the load balancers), then anything tagged with our cluster id.
    for svc in ["web", "web-public"] {
        let _ = Api::<Service>::namespaced(client.clone(), &ns)
            .delete(svc, &DeleteParams::default())
            .await;
    }
    let _ = Api::<Deployment>::namespaced(client.clone(), &ns)
        .delete("web", &DeleteParams::foreground())
        .await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let _ = pods
        .delete_collection(&DeleteParams::default(), &ListParams::default())
        .await;
    let lbs: Api<KuryrLoadBalancer> = Api::namespaced(client.clone(), &ns);
    // KuryrPorts too: a pod (no finalizer of ours) can be gone while its KuryrPort still releases the port.
    let kps: Api<KuryrPort> = Api::namespaced(client.clone(), &ns);
    let deadline = Instant::now() + Duration::from_secs(240);
    while Instant::now() < deadline
        && (!pods.list(&ListParams::default()).await?.items.is_empty()
            || !kps.list(&ListParams::default()).await?.items.is_empty()
            || !lbs.list(&ListParams::default()).await?.items.is_empty())
    {
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let left = ports::list(&cloud, Filter::new().tags(&Owner::cluster_filter(&cluster_id))).await?;
    let _ = stop.send(());
    let _ = tokio::time::timeout(Duration::from_secs(30), controller).await;
    let routed_gone = routed.remove(&cloud, &lab).await;
    for p in ports::list(&cloud, Filter::new().tags(&Owner::cluster_filter(&cluster_id))).await? {
        let _ = ports::delete(&cloud, &p.id).await;
    }
    let _ = Api::<Namespace>::all(client.clone())
        .delete(&ns, &DeleteParams::default())
        .await;
    result?;
    routed_gone?;
    // Only the routed host's own port may have been left for us to delete.
    let stray: Vec<&str> = left
        .iter()
        .filter(|p| Some(&p.id) != routed.port_id.as_ref())
        .map(|p| p.id.as_str())
        .collect();
    ensure!(
        stray.is_empty(),
        "the controller left ports of this run after its pods and Services were deleted: {stray:?}"
    );
    Ok(())
}

/// The other network joined by the lab's router, and the host plugged into it.
#[derive(Default)]
struct Routed {
    network_id: Option<String>,
    subnet_id: Option<String>,
    security_group_id: Option<String>,
    port_id: Option<String>,
    host: Option<Plugged>,
}

impl Routed {
    async fn remove(&mut self, cloud: &Cloud, lab: &Lab) -> anyhow::Result<()> {
        drop(self.host.take());
        if let Some(id) = &self.port_id {
            let _ = ports::delete(cloud, id).await;
        }
        if let Some(id) = &self.subnet_id {
            let _ = routers::remove_interface(cloud, &lab.router_id, &Interface::Subnet(id.clone())).await;
        }
        if let Some(id) = &self.network_id {
            networks::delete(cloud, id)
                .await
                .context("deleting the routed network (a port left on it?)")?;
        }
        if let Some(id) = &self.security_group_id {
            security_groups::delete(cloud, id).await?;
        }
        Ok(())
    }
}

#[allow(clippy::too_many_arguments)]
async fn scenario(
    lab: &Lab,
    client: &Client,
    cloud: &Cloud,
    ns: &str,
    owner: &Owner,
    run_id: &str,
    vm_node: Option<&str>,
    routed: &mut Routed,
) -> anyhow::Result<()> {
    // Another network on the lab's router, a /28 in 198.18.80.0-198.18.127.255 (outside the pod subnet, the
    // installed controller's namespace pool 198.18.64.0/20 and the tests' pools in 198.18.128.0/17), and a
    // host on it. Its port is in the project's `default` group, which the worker VMs'
    // ports admit (their pods' traffic passes their VM's port), and in a group of its own admitting the pods.
    let net = networks::create(
        cloud,
        &networks::CreateNetwork::named(format!("kmacsvc-{run_id}")),
        &owner.tags()?,
    )
    .await?;
    routed.network_id = Some(net.id.clone());
    let third = 80 + fastrand::u8(..48);
    let cidr = format!("198.18.{third}.{}/28", 16 * fastrand::u8(..16));
    let mut sub = subnets::CreateSubnet::v4(&net.id, cidr.clone());
    sub.enable_dhcp = Some(false);
    let subnet = subnets::create(cloud, &sub, &owner.tags()?).await?;
    routed.subnet_id = Some(subnet.id.clone());
    routers::add_interface(cloud, &lab.router_id, &Interface::Subnet(subnet.id.clone())).await?;
    let sg = security_groups::create(
        cloud,
        &security_groups::CreateSecurityGroup {
            name: format!("kmacsvc-{run_id}"),
            ..Default::default()
        },
        &owner.tags()?,
    )
    .await?;
    routed.security_group_id = Some(sg.id.clone());
    security_groups::create_rule(
        cloud,
        &security_groups::CreateRule::ingress(&sg.id).from_cidr(&lab.pod_subnet_cidr),
    )
    .await?;
    let default_sg = security_groups::list(cloud, Filter::new().name("default").project(&lab.project_id))
        .await?
        .into_iter()
        .next()
        .context("the project has no default security group")?;
    let gateway = subnet
        .gateway_ip
        .clone()
        .context("routed subnet without gateway")?;
    let prefix_len = cidr.split('/').nth(1).unwrap_or("28").to_owned();
    let at = Attach {
        network_id: &net.id,
        subnet_id: &subnet.id,
        prefix_len: &prefix_len,
        gateway: &gateway,
    };
    let host = plug(
        lab,
        cloud,
        owner,
        &[default_sg.id, sg.id.clone()],
        &at,
        &format!("kms{run_id}"),
        "r",
    )
    .await?;
    routed.port_id = Some(host.port_id.clone());
    let (routed_ns, routed_ip) = (host.ns.clone(), host.ip.clone());
    routed.host = Some(host);

    // The backends and a client pod on each kubelet node.
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), ns);
    let deploy: Deployment = serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {"replicas": BACKENDS, "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}},
                "spec": {
                    "nodeSelector": {"kuryr.lab/kubelet": "true"},
                    "tolerations": [{"key": "kuryr.lab/kubelet", "operator": "Exists"}],
                    "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "kubernetes.io/hostname",
                        "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {"matchLabels": {"app": "web"}}}],
                    "terminationGracePeriodSeconds": 1,
                    "containers": [{"name": "web", "image": "local.test/busybox:1", "imagePullPolicy": "Never",
                        "command": ["sh", "-c", format!("mkdir -p /www && hostname > /www/index.html && exec httpd -f -p {HTTP_PORT} -h /www")]}]}}}
    }))?;
    deployments.create(&PostParams::default(), &deploy).await?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let knodes = lab_tests::nodes::ready(client, KUBELET_LABEL).await?;
    for (i, node) in knodes.iter().take(2).enumerate() {
        pods.create(
            &PostParams::default(),
            &busybox(&format!("client-{i}"), node, &["sleep", "3600"])?,
        )
        .await?;
    }
    let services: Api<Service> = Api::namespaced(client.clone(), ns);
    for (name, kind) in [("web", "ClusterIP"), ("web-public", "LoadBalancer")] {
        let svc: Service = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": name},
            "spec": {"type": kind, "selector": {"app": "web"},
                "ports": [{"name": "http", "port": 80, "targetPort": HTTP_PORT, "protocol": "TCP"}]}
        }))?;
        services.create(&PostParams::default(), &svc).await?;
    }
    let running = lab_tests::nodes::wait_running(&pods, BACKENDS + 2, RUNNING_TIMEOUT).await?;
    let mut backends = BTreeSet::new();
    let mut per_node: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut in_pods = Vec::new(); // (name, ip, pid, node)
    for p in &running {
        let (node, pid) = pod_task(p)?;
        let ip = p
            .status
            .as_ref()
            .and_then(|s| s.pod_ip.clone())
            .context("pod IP")?;
        if p.name_any().starts_with("web-") {
            backends.insert(p.name_any());
            per_node.entry(node.clone()).or_default().insert(p.name_any());
        }
        eprintln!("{} {ip} on {node}", p.name_any());
        in_pods.push((p.name_any(), ip, pid, node));
    }
    ensure!(
        per_node.len() >= 2 && per_node.values().all(|b| b.len() >= 2),
        "the backends are not two or more on each of two kubelet nodes: {per_node:?}"
    );

    // Routed pod-to-pod: each pod and the host on the other network, both ways, through the router.
    let mut failed = Vec::new();
    for (name, ip, pid, _) in &in_pods {
        if !pings(|| nsenter(*pid, &["ping", "-c", "1", "-W", "2", &routed_ip]).unwrap_or_default()) {
            failed.push(format!("{name} ({ip}) → routed host {routed_ip}"));
        }
        if !pings(|| netns(&routed_ns, &["ping", "-c", "1", "-W", "2", ip])) {
            failed.push(format!("routed host {routed_ip} → {name} ({ip})"));
        }
    }
    ensure!(failed.is_empty(), "routed pings unanswered: {failed:?}");

    // Through the ClusterIP Service: from a pod on each node, from the routed host, from the VM node.
    let vip = services
        .get("web")
        .await?
        .spec
        .and_then(|s| s.cluster_ip)
        .context("Service web without clusterIP")?;
    let url = format!("http://{vip}/");
    let all = Expect {
        backends: &backends,
        same_vm: BTreeSet::new(),
    };
    let mut report = Vec::new();
    for (name, _, pid, node) in in_pods.iter().filter(|(n, ..)| n.starts_with("client-")) {
        let (pid, u) = (*pid, url.clone());
        let ask = move || nsenter(pid, &["curl", "-s", "-m", "3", &u]).unwrap_or_default();
        let expect = Expect {
            backends: &backends,
            same_vm: per_node.get(node).cloned().unwrap_or_default(),
        };
        report.push(check(&format!("{name} on {node} → {vip}"), ask, &expect).await);
    }
    let (rns, u) = (routed_ns.clone(), url.clone());
    report.push(
        check(
            &format!("routed host {routed_ip} → {vip}"),
            move || netns(&rns, &["curl", "-s", "-m", "3", &u]),
            &all,
        )
        .await,
    );

    // Through the floating IP, from the host outside the cluster.
    let lbs: Api<KuryrLoadBalancer> = Api::namespaced(client.clone(), ns);
    let deadline = Instant::now() + FIRST_ANSWER;
    let fip = loop {
        let ip = lbs
            .get_opt("web-public")
            .await?
            .and_then(|l| l.status)
            .and_then(|s| s.service_pub_ip_info)
            .map(|i| i.ip_addr);
        if let Some(ip) = ip.filter(|ip| !ip.is_empty()) {
            break ip;
        }
        ensure!(
            Instant::now() < deadline,
            "web-public got no floating IP within {FIRST_ANSWER:?}"
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    };
    let outside = format!("{}outside", "kuryr-");
    let fu = format!("http://{fip}/");
    report.push(
        check(
            &format!("outside → floating IP {fip}"),
            move || netns(&outside, &["curl", "-s", "-m", "3", &fu]),
            &all,
        )
        .await,
    );

    // From a pod on the VM node (no exec there: a pod's script asks and kubelet reports what it printed).
    // busybox's `wget -T` crashes (Debian's busybox-static): `timeout` bounds each request instead.
    match vm_node {
        Some(node) => {
            let script = format!(
                "i=0; until timeout 3 wget -q -O - {url} >/dev/null 2>&1 || [ $i -ge 60 ]; do i=$((i+1)); sleep 2; done; \
                 for i in $(seq {REQUESTS}); do a=$(timeout 3 wget -q -O - {url} 2>&1) && echo \"$a\" || echo \"NOANSWER $a\"; done"
            );
            let wrapped = format!("( {script} ) > /dev/termination-log 2>&1");
            let p = busybox("client-vm", node, &["sh", "-c", &wrapped])?;
            let out = lab_tests::nodes::run_to_end(&pods, p, VM_TIMEOUT).await?;
            let answers: Vec<String> = out.lines().map(|l| l.trim().to_owned()).collect();
            report.push(judge(&format!("client-vm on {node} → {vip}"), &answers, &all));
        }
        None => eprintln!("SKIP (the VM node part only): see above"),
    }
    // Every client's result is reported, then the failures fail the test.
    let failed: Vec<String> = report
        .iter()
        .filter_map(|r| r.as_ref().err().map(|e| format!("{e:#}")))
        .collect();
    for r in report.iter().flatten() {
        eprintln!("{r}");
    }
    ensure!(failed.is_empty(), "{}", failed.join("\n"));
    Ok(())
}

/// Asks through `ask` until a first answer comes (the load balancer being built), then [`REQUESTS`] times,
/// judged by [`judge`].
async fn check(
    what: &str,
    ask: impl Fn() -> String + Send + Clone + 'static,
    expect: &Expect<'_>,
) -> anyhow::Result<String> {
    let first = ask.clone();
    let deadline = Instant::now() + FIRST_ANSWER;
    tokio::task::spawn_blocking(move || loop {
        if !first().trim().is_empty() {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("no answer within {FIRST_ANSWER:?}");
        }
        std::thread::sleep(Duration::from_millis(500));
    })
    .await?
    .with_context(|| what.to_owned())?;
    let answers = tokio::task::spawn_blocking(move || {
        (0..REQUESTS)
            .map(|_| {
                let a = ask();
                let a = a.trim();
                if a.is_empty() {
                    "NOANSWER".to_owned()
                } else {
                    a.to_owned()
                }
            })
            .collect::<Vec<_>>()
    })
    .await?;
    judge(what, &answers, expect)
}

/// What a client's requests must show.
struct Expect<'a> {
    /// The backends: every answer names one of them.
    backends: &'a BTreeSet<String>,
    /// Backends on the client's own VM (a nested-macvlan client): OVN cannot bring a load balancer's
    /// traffic back to the VM it came from (below), so requests that go to them are unanswered; the others
    /// must all answer. Empty: every request answered, every backend answering.
    same_vm: BTreeSet<String>,
}

/// Every answer a backend's name; every backend answering (those on a macvlan client's own VM excepted, whose
/// requests go unanswered: counted and reported). nested-macvlan pods of one VM share its OVN port and that
/// port's conntrack zone: a request to the VIP is DNATed in that zone, and its reply, routed back to the same
/// port, is un-DNATed there and then meets the same zone again as a new connection from the VIP, which
/// clashes with the first entry and is dropped (docs/cni.md, Troubleshooting).
fn judge(what: &str, answers: &[String], expect: &Expect<'_>) -> anyhow::Result<String> {
    let mut by: BTreeMap<&str, usize> = BTreeMap::new();
    for a in answers {
        *by.entry(a.as_str()).or_default() += 1;
    }
    let unanswered = answers.iter().filter(|a| a.starts_with("NOANSWER")).count();
    let strangers: Vec<_> = by
        .keys()
        .filter(|a| !expect.backends.contains(**a) && !a.starts_with("NOANSWER"))
        .collect();
    ensure!(
        answers.len() == REQUESTS && strangers.is_empty(),
        "{what}: {} requests, answers other than a backend's name: {strangers:?} (all: {by:?})",
        answers.len()
    );
    ensure!(
        unanswered == 0 || !expect.same_vm.is_empty(),
        "{what}: {unanswered} of {REQUESTS} requests unanswered (answers: {by:?})"
    );
    let silent: Vec<_> = expect
        .backends
        .iter()
        .filter(|b| !expect.same_vm.contains(*b) && !by.contains_key(b.as_str()))
        .collect();
    ensure!(
        silent.is_empty(),
        "{what}: backends that never answered in {REQUESTS} requests: {silent:?} (answers: {by:?})"
    );
    let limit = if expect.same_vm.is_empty() {
        String::new()
    } else {
        format!(
            " ({unanswered} unanswered: the VM's own backends {:?}, OVN's limit)",
            expect.same_vm
        )
    };
    Ok(format!(
        "{what}: {}/{REQUESTS} answered, by {by:?}{limit}",
        REQUESTS - unanswered
    ))
}

/// A busybox pod on `node` running `command`.
fn busybox(name: &str, node: &str, command: &[&str]) -> anyhow::Result<Pod> {
    Ok(serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "client"}},
        "spec": {
            "nodeName": node,
            "tolerations": [{"operator": "Exists"}],
            "terminationGracePeriodSeconds": 1,
            "containers": [{"name": "bb", "image": "local.test/busybox:1", "imagePullPolicy": "Never",
                "command": command}]
        }
    }))?)
}

/// Runs `cmd` in network namespace `ns`; its stdout, whatever the exit.
fn netns(ns: &str, cmd: &[&str]) -> String {
    Command::new("ip")
        .args(["netns", "exec", ns])
        .args(cmd)
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default()
}

/// A ping answered within a few tries (the first may wait for ARP through the router).
fn pings(ping: impl Fn() -> String) -> bool {
    (0..5).any(|_| ping().contains(" 0% packet loss"))
}
