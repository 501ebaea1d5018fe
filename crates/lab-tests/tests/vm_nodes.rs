//! nested-vlan end to end on a real VM: node `qvm1` (`lab/lab vms up`, lab/lib/vm-nodes.sh) is a qemu guest
//! booted from Debian's stock kernel (802.1Q), its NIC a tap on br-int bound to a Neutron port that is a
//! trunk's parent, with containerd + kubelet + kuryr-daemon inside. Its Node carries
//! `kuryr.openstack.org/pod-vif=nested-vlan`; the lab's other kubelet nodes are namespaces on a kernel
//! without 802.1Q, so the test's controller (in-process, scoped to the test's namespace) defaults to
//! nested-macvlan and one controller wires both kinds of node.
//!
//! Checks: pods on the VM are VLAN subports of its trunk (each at the VLAN its KuryrPort names); from the
//! VM they reach each other, a pod on a namespace node (nested-macvlan, through its VM's port and the lab's
//! `kuryr-lab-nodes` group) and a Service VIP (an OVN load balancer), and that pod reaches them back (ICMP,
//! HTTP), all through OVN; a NetworkPolicy admitting one client only drops the other's
//! packets (the subport's security groups, enforced by OVN); deleting the pods leaves no Neutron port, no
//! subport and no VLAN device in the VM. Every pod also asks for two more networks (NetworkAttachmentDefinitions):
//! the VM's pods get them as `data0` and `data1`, a subport of its own each on another VLAN, and the probe in
//! the VM reaches their addresses over each network. The controller runs dual-stack
//! (docs/dual-stack.md): the VM's pods get an IPv6 address too (both on their one subport), reach each other
//! over IPv6, and the Service (PreferDualStack) answers on its IPv6 clusterIP, an Octavia additional VIP;
//! the macvlan pod stays IPv4 only. Checks inside the VM run as probe pods there (kubelet reports their
//! termination message): the API server cannot reach the VM's kubelet for exec.
//!
//! lab-tests: group macvlan (address pairs on the lab VMs' ports: one writer at a time)

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context as _};
use kuryr_api::attachment::KURYR_CONFIG;
use kuryr_api::k8s_openapi::api::core::v1::Service;
use kuryr_api::{
    annotations, Api, Client, DeleteParams, KuryrPort, ListParams, Namespace, NetworkAttachmentDefinition,
    NetworkPolicy, ObjectMeta, Pod, PostParams, VifType,
};
use kuryr_controller::policies::PolicyConfig;
use kuryr_controller::runtime::{run, Runtime};
use kuryr_controller::services::ServicesConfig;
use kuryr_controller::Config;
use kuryr_openstack::neutron::{networks, ports, subnets, trunks, Filter};
use kuryr_openstack::{ClientConfig, Cloud, Owner};
use lab_tests::nodes::{nsenter, pod_task};
use lab_tests::Lab;
use serde::Deserialize;
use serde_json::json;

const KUBELET_LABEL: &str = "kuryr.lab/kubelet=true";
/// Generous bounds: the VM is emulated (TCG), a pod start there takes tens of seconds.
const RUNNING_TIMEOUT: Duration = Duration::from_secs(600);
const GONE_TIMEOUT: Duration = Duration::from_secs(300);
const HTTP_PORT: u16 = 8080;
/// The NetworkAttachmentDefinitions every pod asks for, and the interfaces they become in the VM's pods.
const EXTRAS: [(&str, &str); 2] = [("extra", "data0"), ("extra2", "data1")];

/// What lab/lib/vm-nodes.sh recorded of a VM node (`vm-nodes/<node>/vm.json`).
#[derive(Debug, Deserialize)]
struct VmNode {
    name: String,
    port_id: String,
    trunk_id: String,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_on_a_vm_node_are_vlan_subports_that_talk_through_ovn_and_leave_nothing() -> anyhow::Result<()> {
    let lab = Lab::require();
    lab_tests::trace_controllers();
    let client = lab.kube_client().await?;
    let Some(vm) = vm_node(&lab, &client).await? else {
        return Ok(());
    };
    let knode = lab_tests::nodes::ready(&client, KUBELET_LABEL)
        .await?
        .into_iter()
        .next()
        .context("no Ready kubelet node (lab/lab up)")?;
    lab_tests::cluster::install_crds(&client).await?;
    let cloud = Cloud::connect(ClientConfig::clouds_yaml(
        Some(lab.clouds_yaml.clone()),
        lab.cloud.clone(),
    ))
    .await
    .context("login to the lab cloud")?;
    let run_id = format!("{:06x}", fastrand::u32(..0xff_ffff));
    let ns = format!("kvm-{run_id}");
    let cluster_id = format!("kvm-{run_id}");
    lab_tests::cluster::create_namespace(&client, &ns).await?;

    // Two more networks for the pods' extra interfaces (`k8s.v1.cni.cncf.io/networks`, docs/multi-network.md).
    let mut extras = Vec::new();
    for (i, (nad, _)) in EXTRAS.iter().enumerate() {
        // Disjoint second octets: a pod has a route per extra subnet.
        let second = 100 + 50 * i as u8..150 + 50 * i as u8;
        extras.push(ExtraNetwork::create(&cloud, &client, &ns, nad, second).await?);
    }

    let mut config = Config::new(&cluster_id, &lab.pod_subnet_id);
    config.secondary_pod_subnet_id = Some(lab.pod_subnet_v6_id.clone());
    config.namespace = Some(ns.clone());
    config.additional_subnets = extras.iter().map(|e| e.subnet_id.clone()).collect();
    config.project_id = Some(lab.project_id.clone());
    // The namespace nodes' default; the VM node's pod-vif label asks for nested-vlan.
    config.vif_type = VifType::NestedMacvlan;
    config.pools_enabled = false;
    config.policy = PolicyConfig {
        enabled: true,
        ..PolicyConfig::default()
    };
    let mut sc = ServicesConfig::new(&lab.service_subnet_id);
    sc.member_subnet_id = Some(lab.pod_subnet_id.clone());
    sc.secondary_service_subnet_id = Some(lab.service_subnet_v6_id.clone());
    sc.secondary_member_subnet_id = Some(lab.pod_subnet_v6_id.clone());
    sc.provider = Some("ovn".into());
    sc.default_provider = "ovn".into();
    config.services = Some(sc);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let controller = tokio::spawn(run(Runtime::new(client.clone(), cloud.clone(), config), async {
        let _ = stopped.await;
    }));

    let mut seen = Vec::new();
    let result = scenario(&client, &cloud, &ns, &vm, &knode, &extras, &mut seen).await;

    // Cleanup whatever happened: pods first (kubelet stops them, the controller releases the ports).
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let _ = pods
        .delete_collection(&DeleteParams::default(), &ListParams::default())
        .await;
    let _ = Api::<Service>::namespaced(client.clone(), &ns)
        .delete("web", &DeleteParams::default())
        .await;
    let deadline = Instant::now() + GONE_TIMEOUT;
    while Instant::now() < deadline && !pods.list(&ListParams::default()).await?.items.is_empty() {
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let ports_left = wait_ports_gone(&cloud, &cluster_id).await;
    let _ = stop.send(());
    let _ = tokio::time::timeout(Duration::from_secs(30), controller).await;
    for p in ports::list(&cloud, Filter::new().tags(&Owner::cluster_filter(&cluster_id))).await? {
        let _ = trunks::remove_subports(&cloud, &vm.trunk_id, std::slice::from_ref(&p.id)).await;
        let _ = ports::delete(&cloud, &p.id).await;
    }
    let _ = Api::<Namespace>::all(client.clone())
        .delete(&ns, &DeleteParams::default())
        .await;
    let mut extra_gone = Ok(());
    for e in &extras {
        if let Err(err) = networks::delete(&cloud, &e.network_id).await {
            extra_gone = Err(err);
        }
    }
    result?;
    extra_gone.context("deleting the extra network (a port of ours left on it?)")?;
    ports_left?;
    // Nothing of ours on the trunk any more.
    let left: Vec<String> = trunks::get(&cloud, &vm.trunk_id)
        .await?
        .sub_ports
        .into_iter()
        .map(|s| s.port_id)
        .filter(|id| seen.contains(id))
        .collect();
    ensure!(left.is_empty(), "subports left on the VM's trunk: {left:?}");
    Ok(())
}

/// A Neutron network + subnet for extra interfaces and the NetworkAttachmentDefinition `nad` naming it.
struct ExtraNetwork {
    network_id: String,
    subnet_id: String,
}

impl ExtraNetwork {
    async fn create(
        cloud: &Cloud,
        client: &Client,
        ns: &str,
        nad: &str,
        second: std::ops::Range<u8>,
    ) -> anyhow::Result<Self> {
        let net = networks::create(
            cloud,
            &networks::CreateNetwork::named(format!("kuryr-{nad}-{ns}")),
            &[],
        )
        .await?;
        let cidr = format!("10.{}.{}.0/24", fastrand::u8(second), fastrand::u8(..));
        let mut sub = subnets::CreateSubnet::v4(&net.id, cidr);
        sub.enable_dhcp = Some(false);
        let subnet = subnets::create(cloud, &sub, &[]).await?;
        lab_tests::cluster::install_network_attachment_crd(client).await?;
        let mut nad = NetworkAttachmentDefinition::new(nad, Default::default());
        nad.metadata.annotations = Some(BTreeMap::from([(
            KURYR_CONFIG.to_owned(),
            json!({ "subnetId": subnet.id }).to_string(),
        )]));
        Api::<NetworkAttachmentDefinition>::namespaced(client.clone(), ns)
            .create(&PostParams::default(), &nad)
            .await?;
        Ok(Self {
            network_id: net.id,
            subnet_id: subnet.id,
        })
    }
}

async fn scenario(
    client: &Client,
    cloud: &Cloud,
    ns: &str,
    vm: &VmNode,
    knode: &str,
    extras: &[ExtraNetwork],
    seen: &mut Vec<String>,
) -> anyhow::Result<()> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let lab_v6_subnet = Lab::require().pod_subnet_v6_id;
    let lab_v6_subnet = lab_v6_subnet.as_str();
    let server = ["httpd", "-f", "-p", "8080", "-h", "/"];
    for (name, node, labels) in [
        ("vm-a", vm.name.as_str(), json!({"app": "web", "role": "server"})),
        ("vm-b", vm.name.as_str(), json!({"app": "other"})),
        ("ns-c", knode, json!({"app": "other"})),
    ] {
        pods.create(&PostParams::default(), &pod(name, node, labels, &server, false)?)
            .await?;
    }
    let running = wait_running(&pods, &["vm-a", "vm-b", "ns-c"]).await?;
    let ip = |n: &str| {
        running[n]
            .status
            .as_ref()
            .and_then(|s| s.pod_ip.clone())
            .unwrap_or_default()
    };

    // The VM's pods are subports of its trunk at the VLAN their KuryrPort names; the other is a macvlan.
    let kps: Api<KuryrPort> = Api::namespaced(client.clone(), ns);
    let trunk = trunks::get(cloud, &vm.trunk_id).await?;
    let mut extra_ips = Vec::new();
    let mut v6_ips = Vec::new();
    for name in ["vm-a", "vm-b"] {
        let kp = kps.get(name).await?;
        let vif = kp
            .status
            .as_ref()
            .and_then(|s| s.default_vif().map(|(_, v)| v.clone()))
            .with_context(|| format!("{name}: KuryrPort without VIF"))?;
        seen.push(vif.port_id.clone());
        ensure!(vif.vif_type == VifType::NestedVlan, "{name}: {:?}", vif.vif_type);
        ensure!(
            vif.trunk_id.as_deref() == Some(vm.trunk_id.as_str()),
            "{name}: {vif:?}"
        );
        let vlan = vif.vlan_id.with_context(|| format!("{name}: no VLAN id"))?;
        ensure!(
            trunk
                .sub_ports
                .iter()
                .any(|s| s.port_id == vif.port_id && s.segmentation_id == u32::from(vlan)),
            "{name}: port {} is not a subport of {} at VLAN {vlan}: {:?}",
            vif.port_id,
            vm.trunk_id,
            trunk.sub_ports
        );
        ensure!(
            vif.ips.first().map(|i| i.address.clone()) == Some(ip(name)),
            "{name}: {vif:?}"
        );
        // Dual-stack: the same port has an address on the IPv6 pod subnet, and kubelet reports both.
        let v6 = vif
            .ips
            .iter()
            .find(|i| i.subnet_id.as_deref() == Some(lab_v6_subnet))
            .map(|i| i.address.clone())
            .with_context(|| format!("{name}: no address on the IPv6 pod subnet: {vif:?}"))?;
        let pod_ips: Vec<String> = running[name]
            .status
            .as_ref()
            .and_then(|s| s.pod_ips.clone())
            .unwrap_or_default()
            .into_iter()
            .map(|p| p.ip)
            .collect();
        ensure!(
            pod_ips == vec![ip(name), v6.clone()],
            "{name}: podIPs {pod_ips:?}, KuryrPort {vif:?}"
        );
        v6_ips.push(v6);
        // Its extra interfaces: a subport of its own each (a VLAN each) on its network.
        let mut vlans = vec![vif.vlan_id];
        for ((_, ifname), extra) in EXTRAS.iter().zip(extras) {
            let dv = kp
                .status
                .as_ref()
                .and_then(|s| s.vifs.get(*ifname))
                .map(|v| v.vif.clone())
                .with_context(|| format!("{name}: no {ifname} in its KuryrPort"))?;
            seen.push(dv.port_id.clone());
            ensure!(
                dv.network_id == extra.network_id
                    && dv.vlan_id.is_some()
                    && !vlans.contains(&dv.vlan_id)
                    && trunk.sub_ports.iter().any(|s| s.port_id == dv.port_id),
                "{name}: {ifname} {dv:?} (VLANs taken {vlans:?})"
            );
            vlans.push(dv.vlan_id);
            extra_ips.push(
                dv.ips
                    .first()
                    .map(|i| i.address.clone())
                    .with_context(|| format!("{name}: {ifname} without IP"))?,
            );
        }
    }
    let kp = kps.get("ns-c").await?;
    let ns_vif = kp
        .status
        .as_ref()
        .and_then(|s| s.default_vif().map(|(_, v)| v.vif_type));
    ensure!(ns_vif == Some(VifType::NestedMacvlan), "ns-c: {ns_vif:?}");
    // nested-macvlan pairs one address per pod: IPv4 only, and the pod is told why.
    let ns_ips = kp
        .status
        .as_ref()
        .and_then(|s| s.default_vif().map(|(_, v)| v.ips.len()));
    ensure!(ns_ips == Some(1), "ns-c: {ns_ips:?} addresses");

    // A Service of vm-a, an OVN load balancer on the service subnet (routed from the pod network).
    let services: Api<Service> = Api::namespaced(client.clone(), ns);
    let svc: Service = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {"selector": {"app": "web"}, "ipFamilyPolicy": "PreferDualStack",
            "ports": [{"port": 80, "targetPort": HTTP_PORT, "protocol": "TCP"}]}
    }))?;
    let cluster_ips = services
        .create(&PostParams::default(), &svc)
        .await?
        .spec
        .and_then(|s| s.cluster_ips)
        .unwrap_or_default();
    let [vip, vip6] = cluster_ips.as_slice() else {
        bail!("a PreferDualStack Service without two clusterIPs: {cluster_ips:?} (API server dual-stack?)");
    };
    let (vip, vip6) = (vip.clone(), vip6.clone());

    // From the VM: its own pods, the namespace node's macvlan pod and the Service (retried until its LB
    // serves). The macvlan pod is reached through its VM's port, whose groups admit the pod network (the
    // lab's `kuryr-lab-nodes`): the VM pods' subports carry policy groups, not `default` (docs/lab.md).
    // The probe has its own data0 and data1: the VM pods' extra interfaces answer on each extra network.
    let targets: Vec<String> = [ip("vm-a"), ip("vm-b"), ip("ns-c")]
        .into_iter()
        .chain(extra_ips.iter().cloned())
        .chain(v6_ips.iter().cloned())
        .collect();
    let mut script = ping_lines(&targets);
    for (label, host) in [("svc", vip.clone()), ("svc6", format!("[{vip6}]"))] {
        script.push_str(&format!(
            "for i in $(seq 60); do timeout 5 wget -q -O /dev/null http://{host}/etc/passwd && break; sleep 3; done; \
             if timeout 5 wget -q -O /dev/null http://{host}/etc/passwd; then echo '{label} ok'; else echo '{label} fail'; fi\n"
        ));
    }
    let seen_from_vm = probe(&pods, "probe-vm", &vm.name, json!({}), &script).await?;
    for t in &targets {
        ensure!(
            seen_from_vm.contains(&format!("{t} ok")),
            "from the VM node: {seen_from_vm}"
        );
    }
    ensure!(
        seen_from_vm.contains("svc ok"),
        "the Service VIP {vip} from the VM node: {seen_from_vm}"
    );
    ensure!(
        seen_from_vm.contains("svc6 ok"),
        "the Service's IPv6 VIP {vip6} (an additional VIP) from the VM node: {seen_from_vm}"
    );

    // From the namespace node's pod (its network namespace, entered from this host) to the VM's pods.
    let (_, pid) = pod_task(&running["ns-c"])?;
    for name in ["vm-a", "vm-b"] {
        let out = nsenter(pid, &["ping", "-c", "3", "-W", "3", &ip(name)])?;
        ensure!(
            out.contains(" 0% packet loss"),
            "ns-c → {name} ({}): {out}",
            ip(name)
        );
    }
    let url = format!("http://{}:{HTTP_PORT}/etc/passwd", ip("vm-a"));
    let out = nsenter(
        pid,
        &[
            "curl",
            "-s",
            "-m",
            "10",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            &url,
        ],
    )?;
    ensure!(out == "200", "ns-c → vm-a's httpd: HTTP {out:?}");

    // A policy admitting only `access=yes` to vm-a: the other client's packets are dropped on the subport.
    let np: NetworkPolicy = serde_json::from_value(json!({
        "metadata": {"name": "server-guard"},
        "spec": {"podSelector": {"matchLabels": {"role": "server"}}, "policyTypes": ["Ingress"],
            "ingress": [{"from": [{"podSelector": {"matchLabels": {"access": "yes"}}}]}]}
    }))?;
    Api::<NetworkPolicy>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &np)
        .await?;
    let a = ip("vm-a");
    // Applied asynchronously: the denied probe waits until its pings fail, within bounds.
    let denied = format!(
        "for i in $(seq 60); do ping -c 1 -W 2 {a} >/dev/null || break; sleep 3; done\n{}",
        ping_lines(&[a.clone(), ip("vm-b")])
    );
    let seen_denied = probe(&pods, "probe-denied", &vm.name, json!({}), &denied).await?;
    ensure!(
        seen_denied.contains(&format!("{a} fail")),
        "not admitted, yet reached vm-a: {seen_denied}"
    );
    ensure!(
        seen_denied.contains(&format!("{} ok", ip("vm-b"))),
        "the denied client lost vm-b too (so not the policy): {seen_denied}"
    );
    let seen_allowed = probe(
        &pods,
        "probe-allowed",
        &vm.name,
        json!({"access": "yes"}),
        &ping_lines(std::slice::from_ref(&a)),
    )
    .await?;
    ensure!(
        seen_allowed.contains(&format!("{a} ok")),
        "admitted, yet not reaching vm-a: {seen_allowed}"
    );

    // Pods deleted: their ports and subports go, and the VM keeps no VLAN device.
    for name in ["vm-a", "vm-b"] {
        pods.delete(name, &DeleteParams::default()).await?;
    }
    let deadline = Instant::now() + GONE_TIMEOUT;
    loop {
        let mut left = Vec::new();
        for id in seen.iter() {
            match ports::get(cloud, id).await {
                Ok(_) => left.push(id.clone()),
                Err(e) if e.status() == Some(404) => {}
                Err(e) => return Err(e.into()),
            }
        }
        if left.is_empty() {
            break;
        }
        if Instant::now() > deadline {
            bail!("ports of deleted VM pods still in Neutron after {GONE_TIMEOUT:?}: {left:?}");
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    let links = host_probe(&pods, "probe-links", &vm.name, "tail -n +3 /proc/net/vlan/config").await?;
    ensure!(links.trim().is_empty(), "VLAN devices left in the VM: {links}");
    Ok(())
}

/// `<ip> ok` or `<ip> fail` per target, a line each.
fn ping_lines(targets: &[String]) -> String {
    targets
        .iter()
        .map(|t| format!("if ping -c 3 -W 3 {t} >/dev/null; then echo '{t} ok'; else echo '{t} fail'; fi\n"))
        .collect()
}

/// Runs `script` in a busybox pod on `node` and returns what it printed, as kubelet reports it (the
/// termination message the script's output is written to).
async fn probe(
    pods: &Api<Pod>,
    name: &str,
    node: &str,
    labels: serde_json::Value,
    script: &str,
) -> anyhow::Result<String> {
    run_probe(pods, name, node, labels, script, false).await
}

/// [`probe`] in the node's own network namespace.
async fn host_probe(pods: &Api<Pod>, name: &str, node: &str, script: &str) -> anyhow::Result<String> {
    run_probe(pods, name, node, json!({}), script, true).await
}

async fn run_probe(
    pods: &Api<Pod>,
    name: &str,
    node: &str,
    labels: serde_json::Value,
    script: &str,
    host_network: bool,
) -> anyhow::Result<String> {
    let wrapped = format!("( {script} ) > /dev/termination-log 2>&1");
    let p = pod(name, node, labels, &["sh", "-c", &wrapped], host_network)?;
    lab_tests::nodes::run_to_end(pods, p, RUNNING_TIMEOUT).await
}

fn pod(
    name: &str,
    node: &str,
    labels: serde_json::Value,
    command: &[&str],
    host_network: bool,
) -> anyhow::Result<Pod> {
    let mut p: Pod = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "spec": {
            "nodeName": node,
            "hostNetwork": host_network,
            "tolerations": [{"operator": "Exists"}],
            "terminationGracePeriodSeconds": 1,
            "containers": [{"name": "bb", "image": "local.test/busybox:1", "imagePullPolicy": "Never",
                "command": command}]
        }
    }))?;
    // Every pod asks for the extra networks: the VM's get them (nested-vlan), the namespace node's are told
    // they are not attached (nested-macvlan has one port) and are wired on the pod network alone.
    let annotations = (!host_network).then(|| {
        let asked: Vec<String> = EXTRAS
            .iter()
            .map(|(nad, ifname)| format!("{nad}@{ifname}"))
            .collect();
        BTreeMap::from([(annotations::NPWG_NETWORKS.to_owned(), asked.join(", "))])
    });
    p.metadata = ObjectMeta {
        name: Some(name.into()),
        labels: Some(serde_json::from_value(labels)?),
        annotations,
        ..ObjectMeta::default()
    };
    Ok(p)
}

/// Waits for the pods to run with an IP; returns them by name.
async fn wait_running(pods: &Api<Pod>, names: &[&str]) -> anyhow::Result<BTreeMap<String, Pod>> {
    let deadline = Instant::now() + RUNNING_TIMEOUT;
    loop {
        let mut running = BTreeMap::new();
        let mut phases = Vec::new();
        for n in names {
            let p = pods.get(n).await?;
            let st = p.status.clone().unwrap_or_default();
            phases.push((n.to_string(), st.phase.clone()));
            if st.phase.as_deref() == Some("Running") && st.pod_ip.is_some() {
                running.insert(n.to_string(), p);
            }
        }
        if running.len() == names.len() {
            return Ok(running);
        }
        if Instant::now() > deadline {
            bail!("pods not Running within {RUNNING_TIMEOUT:?}: {phases:?} (VM node logs: $KURYR_LAB_STATE/vm-nodes/*/log/)");
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
}

async fn wait_ports_gone(cloud: &Cloud, cluster_id: &str) -> anyhow::Result<()> {
    let deadline = Instant::now() + GONE_TIMEOUT;
    loop {
        let left = ports::list(cloud, Filter::new().tags(&Owner::cluster_filter(cluster_id))).await?;
        if left.is_empty() {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!(
                "{} ports of this run left after the pods were deleted: {:?}",
                left.len(),
                left.iter().map(|p| &p.id).collect::<Vec<_>>()
            );
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
}

/// The lab's VM node, Ready, as lab/lib/vm-nodes.sh recorded it (`None`: this machine cannot run one).
async fn vm_node(lab: &Lab, client: &Client) -> anyhow::Result<Option<VmNode>> {
    let Some(name) = lab_tests::nodes::vm_node(lab, client).await? else {
        return Ok(None);
    };
    let path = lab.state_dir.join("vm-nodes").join(&name).join("vm.json");
    let text = std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    let vm: VmNode = serde_json::from_str(&text)?;
    ensure!(!vm.port_id.is_empty(), "{}: no port", path.display());
    Ok(Some(vm))
}
