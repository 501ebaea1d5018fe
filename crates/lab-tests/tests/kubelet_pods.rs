//! Real kubelets: a Deployment of busybox pods on the lab's kubelet nodes (`kubelet-vm1`, `kubelet-vm2`:
//! containerd 2 + runc + kubelet (the lab's release) + kuryr-daemon, started by `lab/lab up`). kuryr-controller runs
//! in-process with the nested-macvlan driver, scoped to the test's namespace and cluster id; the pods are
//! created by kubelet → containerd → kuryr-cni → kuryr-daemon, each a macvlan of its VM's eth0 carrying its
//! VRRP MAC, and their traffic crosses real OVN.
//!
//! Checks: every pod reaches every other (inside the pods' own network namespaces, found through containerd);
//! the API server reaches each through its pod proxy (its egress selector), and each VM reaches each pod, its
//! own included (the daemon's host link); the IP kubelet reports is the KuryrPort's, whose VIF names the VM port's MAC and no NIC; scaling down removes the pods' interfaces,
//! KuryrPorts, Neutron ports and address pairs, and kubelet's two DELs per sandbox (the second after the sandbox is gone) both
//! succeed; the remaining pods still reach each other. And containerd 2 asks each node's daemon for CNI STATUS
//! (the conflist's `cniVersion` is 1.1.0).
//!
//! lab-tests: group macvlan (address pairs on the lab VMs' ports: one writer at a time)

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context as _};
use kuryr_api::k8s_openapi::api::apps::v1::Deployment;
use kuryr_api::kube::runtime::wait::{await_condition, conditions};
use kuryr_api::{
    crds, Api, Client, CustomResourceDefinition, DeleteParams, KuryrPort, ListParams, Namespace, Node,
    ObjectMeta, Patch, PatchParams, Pod, PostParams, ResourceExt, VifType,
};
use kuryr_controller::runtime::{run, Runtime};
use kuryr_controller::Config;
use kuryr_openstack::neutron::ports;
use kuryr_openstack::neutron::Filter;
use kuryr_openstack::{ClientConfig, Cloud, Owner};
use lab_tests::nodes::{self, nsenter};
use lab_tests::Lab;
use serde_json::json;

const KUBELET_LABEL: &str = "kuryr.lab/kubelet=true";
const REPLICAS: usize = 4;
const KEEP: usize = 2;
/// Generous bounds; what is asserted is what happens, not how fast.
const RUNNING_TIMEOUT: Duration = Duration::from_secs(240);
/// kubelet removes a stopped sandbox (the second DEL) in its container GC, once a minute.
const SECOND_DEL_TIMEOUT: Duration = Duration::from_secs(150);
const PING_TRIES: usize = 15;

/// kuryr-daemon health/metrics ports of the kubelet nodes: lab/lib/common.sh `P_KDAEMON` + node index.
const DAEMON_PORT_BASE: u16 = 21270;

/// STATUS answered `ok` by the daemon of kubelet node `idx` (1-based), from its request metrics.
async fn status_calls(idx: u16) -> anyhow::Result<u64> {
    let url = format!("http://127.0.0.1:{}/metrics", DAEMON_PORT_BASE + idx);
    let text = reqwest::get(&url).await?.error_for_status()?.text().await?;
    Ok(text
        .lines()
        .find(|l| {
            l.starts_with("kuryr_cni_request_duration_seconds_count{")
                && l.contains("command=\"STATUS\"")
                && l.contains("result=\"ok\"")
        })
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0))
}

/// containerd 2 reads a conflist of `cniVersion` 1.1.0 and asks the plugin for STATUS (its CRI Status, which
/// kubelet polls for the node's NetworkReady): every kubelet node's daemon answers such calls, and more of
/// them keep coming.
#[tokio::test]
async fn containerd_asks_every_node_daemon_for_cni_status() -> anyhow::Result<()> {
    let lab = Lab::require();
    let client = lab.kube_client().await?;
    let nodes: Api<Node> = Api::all(client);
    let count = nodes
        .list(&ListParams::default().labels(KUBELET_LABEL))
        .await?
        .items
        .len();
    ensure!(count > 0, "no kubelet node in the lab (lab/lab nodes up)");
    for idx in 1..=u16::try_from(count)? {
        let first = status_calls(idx).await?;
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let now = status_calls(idx).await?;
            if first > 0 && now > first {
                eprintln!("kubelet node {idx}: {now} CNI STATUS calls answered ok");
                break;
            }
            ensure!(
                Instant::now() < deadline,
                "kubelet node {idx}: its daemon answered {now} STATUS calls (was {first}) in 60 s: containerd does not send CNI STATUS"
            );
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deployment_on_kubelet_nodes_pings_across_vms_and_scales_down_cleanly() -> anyhow::Result<()> {
    let lab = Lab::require();
    lab_tests::trace_controllers();
    let client = lab.kube_client().await?;
    let knodes = nodes::ready(&client, KUBELET_LABEL).await?;
    ensure!(
        knodes.len() >= 2,
        "this test needs two Ready kubelet nodes ({KUBELET_LABEL}), found {knodes:?}: run lab/lab up"
    );
    install_crds(&client).await?;
    let cloud = Cloud::connect(ClientConfig::clouds_yaml(
        Some(lab.clouds_yaml.clone()),
        lab.cloud.clone(),
    ))
    .await
    .context("login to the lab cloud")?;
    let run_id = format!("{:06x}", fastrand::u32(..0xff_ffff));
    let ns = format!("kcni-kubelet-{run_id}");
    let cluster_id = format!("kcni-kubelet-{run_id}");
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
    let mut config = Config::new(&cluster_id, &lab.pod_subnet_id);
    config.namespace = Some(ns.clone());
    config.vif_type = VifType::NestedMacvlan;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let controller = tokio::spawn(run(Runtime::new(client.clone(), cloud.clone(), config), async {
        let _ = stopped.await;
    }));

    let mut seen_pairs = Vec::new();
    let result = scenario(&lab, &client, &cloud, &ns, &cluster_id, &mut seen_pairs).await;

    // Cleanup whatever happened: the Deployment and its pods (kubelet stops them, the controller releases the
    // ports), then anything tagged with our cluster id.
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);
    let _ = deployments.delete("pinger", &DeleteParams::foreground()).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let deadline = Instant::now() + Duration::from_secs(90);
    while Instant::now() < deadline && !pods.list(&ListParams::default()).await?.items.is_empty() {
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let ports_left = wait_ports(&cloud, &cluster_id, 0, Duration::from_secs(60)).await;
    let _ = stop.send(());
    let _ = tokio::time::timeout(Duration::from_secs(30), controller).await;
    for p in ports::list(&cloud, Filter::new().tags(&Owner::cluster_filter(&cluster_id))).await? {
        let _ = ports::delete(&cloud, &p.id).await;
    }
    // Pairs of our pods the controller did not get to (it was stopped, or failed) must not outlive us.
    let pairs_left = remove_pairs(&lab, &cloud, &seen_pairs).await;
    let _ = namespaces.delete(&ns, &DeleteParams::default()).await;
    result?;
    ports_left.context("the controller did not release every port after the Deployment was deleted")?;
    pairs_left
}

/// Removes from the VM ports the address pairs {IP, VRRP MAC} of our pods whose IP no Neutron port holds any
/// more. The lab may be busy (the demo's controller, other tests' controllers pair pods on the same VM ports
/// and network): a pair whose IP or MAC went to someone else's pod since is theirs and stays, and each write
/// carries `If-Match` so a concurrent writer's pair is never lost.
async fn remove_pairs(lab: &Lab, cloud: &Cloud, ours: &[(String, String)]) -> anyhow::Result<()> {
    let mut gone = Vec::new();
    for (ip, mac) in ours {
        let holders = ports::list(
            cloud,
            Filter::new().eq("network_id", &lab.pod_network_id).fixed_ip(ip),
        )
        .await?;
        if holders.is_empty() {
            gone.push((ip.as_str(), mac.as_str()));
        }
    }
    for vm in &lab.vms {
        for _ in 0..5 {
            let port = ports::get(cloud, &vm.port_id).await?;
            let keep: Vec<ports::AddressPair> = port
                .allowed_address_pairs
                .iter()
                .filter(|p| {
                    !gone.iter().any(|(ip, mac)| {
                        p.ip_address == *ip
                            && p.mac_address
                                .as_deref()
                                .is_some_and(|m| m.eq_ignore_ascii_case(mac))
                    })
                })
                .cloned()
                .collect();
            if keep.len() == port.allowed_address_pairs.len() {
                break;
            }
            match ports::set_address_pairs_if_revision(cloud, &vm.port_id, &keep, port.revision_number).await
            {
                Ok(_) => break,
                Err(e) if e.status() == Some(412) => continue,
                Err(e) => bail!("removing leftover pairs from {}: {e}", vm.name),
            }
        }
    }
    Ok(())
}

async fn scenario(
    lab: &Lab,
    client: &Client,
    cloud: &Cloud,
    ns: &str,
    cluster_id: &str,
    seen_pairs: &mut Vec<(String, String)>,
) -> anyhow::Result<()> {
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), ns);
    let deploy: Deployment = serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "pinger"},
        "spec": {"replicas": REPLICAS, "selector": {"matchLabels": {"app": "pinger"}},
            "template": {"metadata": {"labels": {"app": "pinger"}},
                "spec": {
                    "nodeSelector": {"kuryr.lab/kubelet": "true"},
                    "tolerations": [{"key": "kuryr.lab/kubelet", "operator": "Exists"}],
                    "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "kubernetes.io/hostname",
                        "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {"matchLabels": {"app": "pinger"}}}],
                    "terminationGracePeriodSeconds": 1,
                    "containers": [{"name": "bb", "image": "local.test/busybox:1", "imagePullPolicy": "Never",
                        "command": ["sh", "-c",
                            "mkdir -p /tmp/www && hostname >/tmp/www/name && exec httpd -f -p 8080 -h /tmp/www"]}]}}}
    }))?;
    deployments.create(&PostParams::default(), &deploy).await?;
    let running = wait_running(client, ns, REPLICAS).await?;
    let on: BTreeSet<&str> = running.iter().map(|p| p.node.as_str()).collect();
    ensure!(
        on.len() >= 2,
        "the pods were not spread over two kubelet nodes: {on:?}"
    );

    // The IP kubelet learnt from the CNI result is the KuryrPort's.
    let kps: Api<KuryrPort> = Api::namespaced(client.clone(), ns);
    let nodes: Api<Node> = Api::all(client.clone());
    let mut macs = BTreeMap::new();
    for p in &running {
        let kp = kps.get(&p.name).await?;
        let vif = kp
            .status
            .as_ref()
            .and_then(|s| s.default_vif().map(|(_, v)| v.clone()))
            .context("KuryrPort without VIF")?;
        ensure!(
            vif.vif_type == VifType::NestedMacvlan,
            "{}: {:?}",
            p.name,
            vif.vif_type
        );
        ensure!(
            vif.ips.first().map(|i| i.address.as_str()) == Some(p.ip.as_str()),
            "{}: {vif:?}",
            p.name
        );
        // No NIC name pinned: the VIF carries the MAC of the node VM's port, by which a daemon finds the NIC.
        let node_ip = nodes::internal_ip(&nodes.get(&p.node).await?).context("node without InternalIP")?;
        let vm = lab
            .vms
            .iter()
            .find(|v| v.ip == node_ip)
            .context("node on no lab VM")?;
        ensure!(
            vif.parent_ifname.is_none() && vif.parent_mac.as_deref() == Some(vm.mac.as_str()),
            "{}: parentIfname {:?}, parentMac {:?}; its VM's port has MAC {}",
            p.name,
            vif.parent_ifname,
            vif.parent_mac,
            vm.mac
        );
        let mac = vif.vrrp_mac.clone().context("macvlan VIF without VRRP MAC")?;
        seen_pairs.push((p.ip.clone(), mac.clone()));
        ensure!(
            nsenter(p.pid, &["ip", "-o", "link", "show", "eth0"])?.contains(&mac),
            "{}: eth0 does not carry {mac}",
            p.name
        );
        macs.insert(p.name.clone(), mac);
    }
    ping_matrix(&running)?;
    api_server_reaches(client, &running).await?;
    vms_reach_pods(lab, client, &running).await?;

    // Scale down: the removed pods' sandboxes get two DELs each (StopPodSandbox, then RemovePodSandbox with
    // no netns) and the controller releases their ports.
    let keys_before = del_lines(lab, &running);
    deployments
        .patch(
            "pinger",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": KEEP}})),
        )
        .await?;
    let kept = wait_running(client, ns, KEEP).await?;
    let kept_names: BTreeSet<&str> = kept.iter().map(|p| p.name.as_str()).collect();
    let removed: Vec<&RunningPod> = running
        .iter()
        .filter(|p| !kept_names.contains(p.name.as_str()))
        .collect();
    ensure!(
        removed.len() == REPLICAS - KEEP,
        "kept {kept_names:?} of {running:?}"
    );
    wait_ports(cloud, cluster_id, KEEP, Duration::from_secs(90)).await?;
    // The pods carry no finalizer of ours: a removed pod can be gone while its KuryrPort (deleted by the
    // Pod front end or by the garbage collector) still waits for the port's release to take its finalizer.
    let deadline = Instant::now() + Duration::from_secs(60);
    for p in &removed {
        while kps.get_opt(&p.name).await?.is_some() {
            ensure!(
                Instant::now() < deadline,
                "KuryrPort of removed pod {} is still there 60 s after its port went",
                p.name
            );
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
    // No VM port pairs a removed pod's IP with its VRRP MAC any more. (Only that pair: on a busy lab the IP,
    // or the MAC, may already have gone to a pod of another controller on the same network.)
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let mut paired = Vec::new();
        for vm in &lab.vms {
            let port = ports::get(cloud, &vm.port_id).await?;
            for p in &removed {
                let mac = &macs[&p.name];
                if port.allowed_address_pairs.iter().any(|a| {
                    a.ip_address == p.ip
                        && a.mac_address
                            .as_deref()
                            .is_some_and(|m| m.eq_ignore_ascii_case(mac))
                }) {
                    paired.push(format!(
                        "{} still pairs removed pod {}'s IP {} with {mac}",
                        vm.name, p.name, p.ip
                    ));
                }
            }
        }
        if paired.is_empty() {
            break;
        }
        ensure!(Instant::now() < deadline, "{paired:?}");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    // Their interfaces are gone from every namespace (the sandboxes' namespaces were deleted with them): no
    // namespace holds a link with a removed pod's VRRP MAC *and* its IP. (The MAC alone may already be
    // another controller's new pod on a busy lab: VRRP MACs are reused, lowest free first.)
    let per_netns = netns_links_and_addrs()?;
    for p in &removed {
        let mac = &macs[&p.name];
        let inet = format!("inet {}/", p.ip);
        if let Some((netns, _)) = per_netns
            .iter()
            .find(|(_, text)| text.contains(mac.as_str()) && text.contains(&inet))
        {
            bail!(
                "{}'s macvlan {mac} with {} is still in netns {netns}",
                p.name,
                p.ip
            );
        }
    }
    // Both DELs of every removed sandbox succeeded.
    let deadline = Instant::now() + SECOND_DEL_TIMEOUT;
    loop {
        let now = del_lines(lab, &removed.iter().map(|p| (*p).clone()).collect::<Vec<_>>());
        let failed: Vec<&String> = now.iter().filter(|l| l.contains("failed")).collect();
        ensure!(failed.is_empty(), "a DEL failed: {failed:?}");
        let done_per_pod = |p: &RunningPod| {
            now.iter()
                .filter(|l| !keys_before.contains(*l) && l.contains(&format!("pod={}/{} ", p.ns, p.name)))
                .count()
        };
        if removed.iter().all(|p| done_per_pod(p) >= 2) {
            break;
        }
        if Instant::now() > deadline {
            bail!(
                "kubelet did not send both DELs for every removed pod within {SECOND_DEL_TIMEOUT:?}: {:?}",
                removed
                    .iter()
                    .map(|p| (&p.name, done_per_pod(p)))
                    .collect::<Vec<_>>()
            );
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    ping_matrix(&kept)
}

/// The API server reaches every pod through its pod proxy (what `kubectl port-forward`-less tools and the e2e
/// suite use to read a pod's files): the API server lives in a namespace with no address on the pod network,
/// so this goes through its egress selector (lab/lib/kapi-egress.py dials from the kuryr-kapi namespace).
async fn api_server_reaches(client: &Client, pods: &[RunningPod]) -> anyhow::Result<()> {
    for p in pods {
        let path = format!("/api/v1/namespaces/{}/pods/{}:8080/proxy/name", p.ns, p.name);
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let req = http::Request::get(&path).body(Vec::new())?;
            match client.request_text(req).await {
                Ok(body) if body.trim() == p.name => break,
                answer => ensure!(
                    Instant::now() < deadline,
                    "GET {path} through the API server: {answer:?}, wanted the pod's name"
                ),
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }
    Ok(())
}

/// Each kubelet node's VM reaches every pod over HTTP, those on itself included (what its kubelet's HTTP
/// probes need): a macvlan parent cannot reach its own children, so the node's daemon gives the VM a macvlan
/// sibling and a route per local pod (kuryr-cni `binding::host_link`).
async fn vms_reach_pods(lab: &Lab, client: &Client, pods: &[RunningPod]) -> anyhow::Result<()> {
    let nodes: Api<Node> = Api::all(client.clone());
    let mut vms = BTreeMap::new();
    for p in pods {
        let ip = nodes::internal_ip(&nodes.get(&p.node).await?).context("node without InternalIP")?;
        let vm = lab.vms.iter().find(|v| v.ip == ip).context("node on no lab VM")?;
        vms.insert(vm.name.clone(), vm.netns.clone());
    }
    let mut failed = Vec::new();
    for (vm, netns) in &vms {
        for p in pods {
            let url = format!("http://{}:8080/name", p.ip);
            let out = Command::new("ip")
                .args([
                    "netns",
                    "exec",
                    netns,
                    "curl",
                    "-sS",
                    "--max-time",
                    "5",
                    "--retry",
                    "3",
                ])
                .args(["--retry-all-errors", &url])
                .output()?;
            let body = String::from_utf8_lossy(&out.stdout);
            if body.trim() != p.name {
                let own = if p.node == format!("kubelet-{vm}") {
                    " (its own pod)"
                } else {
                    ""
                };
                failed.push(format!(
                    "{vm} → {}{own}: {:?} {}",
                    p.name,
                    body.trim(),
                    String::from_utf8_lossy(&out.stderr).trim()
                ));
            }
        }
    }
    ensure!(failed.is_empty(), "VMs could not reach pods: {failed:#?}");
    Ok(())
}

#[derive(Clone, Debug)]
struct RunningPod {
    ns: String,
    name: String,
    node: String,
    ip: String,
    /// A process of the pod's container (its network namespace is the pod's).
    pid: u32,
}

/// Waits until exactly `n` pods are Running with an IP and no pod is terminating; finds their PIDs.
async fn wait_running(client: &Client, ns: &str, n: usize) -> anyhow::Result<Vec<RunningPod>> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let mut out = Vec::new();
    for p in nodes::wait_running(&pods, n, RUNNING_TIMEOUT).await? {
        let (node, pid) = nodes::pod_task(&p)?;
        out.push(RunningPod {
            ns: ns.into(),
            name: p.name_any(),
            ip: p
                .status
                .as_ref()
                .and_then(|s| s.pod_ip.clone())
                .context("pod IP")?,
            pid,
            node,
        });
    }
    Ok(out)
}

fn pings(from: &RunningPod, ip: &str) -> bool {
    (0..PING_TRIES).any(|_| {
        Command::new("nsenter")
            .args([
                "-t",
                &from.pid.to_string(),
                "-n",
                "--",
                "ping",
                "-c",
                "1",
                "-W",
                "2",
                ip,
            ])
            .output()
            .is_ok_and(|o| o.status.success())
    })
}

fn ping_matrix(pods: &[RunningPod]) -> anyhow::Result<()> {
    let mut failed = Vec::new();
    for a in pods {
        for b in pods {
            if a.name != b.name && !pings(a, &b.ip) {
                failed.push(format!(
                    "{} ({}) -> {} ({}, {})",
                    a.name, a.node, b.name, b.node, b.ip
                ));
            }
        }
    }
    ensure!(failed.is_empty(), "no ping: {failed:?}");
    Ok(())
}

/// `ip -o link` and `ip -o addr` of every named network namespace, by namespace.
fn netns_links_and_addrs() -> anyhow::Result<Vec<(String, String)>> {
    let out = Command::new("ip")
        .args(["-all", "netns", "exec", "sh", "-c", "ip -o link; ip -o addr"])
        .output()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let mut per = Vec::new();
    let mut current: Option<(String, String)> = None;
    for line in text.lines() {
        if let Some(name) = line.strip_prefix("netns: ") {
            per.extend(current.take());
            current = Some((name.trim().to_owned(), String::new()));
        } else if let Some((_, body)) = current.as_mut() {
            body.push_str(line);
            body.push('\n');
        }
    }
    per.extend(current);
    Ok(per)
}

/// The kuryr-daemon log lines about DELs of these pods, from their nodes' daemons (the host-process ones or,
/// when kuryr-rs is installed from its image, the DaemonSet's).
fn del_lines(lab: &Lab, pods: &[RunningPod]) -> Vec<String> {
    let on: BTreeSet<&str> = pods.iter().map(|p| p.node.as_str()).collect();
    let mut out = Vec::new();
    for node in on {
        let log = nodes::daemon_log(lab, node);
        for l in log.lines() {
            let ours = pods
                .iter()
                .any(|p| l.contains(&format!("pod={}/{} ", p.ns, p.name)));
            if ours && l.contains("command=DEL") && (l.contains(" done ") || l.contains(" failed ")) {
                out.push(l.to_string());
            }
        }
    }
    out
}

/// Waits until exactly `n` ports carry the cluster's tags.
async fn wait_ports(cloud: &Cloud, cluster_id: &str, n: usize, timeout: Duration) -> anyhow::Result<()> {
    let deadline = Instant::now() + timeout;
    loop {
        let have = ports::list(cloud, Filter::new().tags(&Owner::cluster_filter(cluster_id)))
            .await?
            .len();
        if have == n {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("{have} ports tagged for {cluster_id}, expected {n}");
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

async fn install_crds(client: &Client) -> anyhow::Result<()> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in crds::crds() {
        let name = crd.name_any();
        api.patch(
            &name,
            &PatchParams::apply("kuryr-crd-test").force(),
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
