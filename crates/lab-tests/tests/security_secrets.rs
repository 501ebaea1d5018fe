//! No secret in logs, Events, statuses, metrics or error messages, on a whole run against the lab's
//! kube-apiserver: cloudsim with canary credentials (password, application credential secret, a Keystone
//! token), the lab's real Kubernetes bearer token as one more canary. The real `kuryr-controller` runs at
//! `RUST_LOG=debug` on pods that cannot be wired (no trunks: Warning Events carrying error messages) and on
//! Services (one with refused annotations and a refused `loadBalancerIP`); `kuryrctl status`, `pools` and
//! `gc` run at debug too; and a controller with a wrong password fails. Every output is grepped
//! for every canary: stdout and stderr, `/metrics`, every Event of the namespace, every KuryrPort and
//! KuryrLoadBalancer (status conditions included), the Services.

#[path = "../../kuryr-controller/tests/canary/mod.rs"]
mod canary;
mod simnets;

use std::time::{Duration, Instant};

use anyhow::{ensure, Context as _};
use canary::{clouds_yaml, command, finish, free_port, http_get, run, temp_dir, Canaries, Outputs};
use kuryr_api::k8s_openapi::api::core::v1::{ServicePort, ServiceSpec};
use kuryr_api::{
    annotations, Api, DeleteParams, Event, KuryrLoadBalancer, KuryrPort, ListParams, ObjectMeta, Patch,
    PatchParams, Pod, PostParams, ResourceExt, Service,
};
use kuryr_openstack::{ClientConfig, Cloud};
use lab_tests::{cluster, Lab};
use secrecy::ExposeSecret;

/// The bearer token of the lab's kubeconfig.
fn lab_token(lab: &Lab) -> anyhow::Result<String> {
    let kc: serde_yaml::Value = serde_yaml::from_str(&std::fs::read_to_string(&lab.kubeconfig)?)?;
    kc["users"][0]["user"]["token"]
        .as_str()
        .map(str::to_owned)
        .context("the lab kubeconfig has no token")
}

fn service(name: &str, lb_ip: Option<&str>, ann: &[(&str, &str)]) -> Service {
    Service {
        metadata: ObjectMeta {
            name: Some(name.into()),
            annotations: Some(ann.iter().map(|(k, v)| ((*k).into(), (*v).into())).collect()),
            ..ObjectMeta::default()
        },
        spec: Some(ServiceSpec {
            selector: Some([("app".to_owned(), name.to_owned())].into()),
            ports: Some(vec![ServicePort {
                name: Some("web".into()),
                port: 80,
                protocol: Some("TCP".into()),
                ..ServicePort::default()
            }]),
            type_: lb_ip.map(|_| "LoadBalancer".to_owned()),
            load_balancer_ip: lb_ip.map(str::to_owned),
            ..ServiceSpec::default()
        }),
        ..Service::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_secret_reaches_logs_events_statuses_or_metrics() -> anyhow::Result<()> {
    let lab = Lab::require();
    let mut c = Canaries::new();
    c.kube_token = lab_token(&lab)?;
    let sim = canary::sim(&c).await;
    let dir = temp_dir("labsecrets");
    let first = clouds_yaml(&dir.0, &sim.url(), &c);
    let cloud = Cloud::connect(ClientConfig::clouds_yaml(Some(first), "pw")).await?;
    c.os_token = cloud
        .credentials()
        .token
        .as_ref()
        .map(|t| t.expose_secret().to_owned());
    let clouds = clouds_yaml(&dir.0, &sim.url(), &c).display().to_string();
    let nets = simnets::like_the_lab(&cloud).await?;
    let iso = cluster::isolated(&lab, "secrets").await?;
    let result = scenario(&lab, &c, &clouds, &nets, &iso).await;
    cluster::strip_and_delete_all(&iso.client, &iso.ns).await;
    let strip = serde_json::json!({"metadata": {"finalizers": null}});
    let svcs: Api<Service> = Api::namespaced(iso.client.clone(), &iso.ns);
    let klbs: Api<KuryrLoadBalancer> = Api::namespaced(iso.client.clone(), &iso.ns);
    for name in ["web", "refused"] {
        let _ = klbs
            .patch(name, &PatchParams::default(), &Patch::Merge(&strip))
            .await;
        let _ = svcs
            .patch(name, &PatchParams::default(), &Patch::Merge(&strip))
            .await;
    }
    cluster::delete_namespace(&iso.client, &iso.ns).await;
    let (outputs, c) = result?;
    eprintln!(
        "grepped {} outputs, {} bytes, for {} canaries",
        outputs.0.len(),
        outputs.total_bytes(),
        c.all().len()
    );
    outputs.assert_no_leak(&c);
    Ok(())
}

async fn scenario(
    lab: &Lab,
    c: &Canaries,
    clouds: &str,
    nets: &simnets::LabNets,
    iso: &cluster::Isolated,
) -> anyhow::Result<(Outputs, Canaries)> {
    let mut out = Outputs::default();
    let kubeconfig = lab.kubeconfig.display().to_string();
    let controller = cluster::workspace_binary("kuryr-controller", "kuryr-controller")?;
    let kuryrctl = cluster::workspace_binary("kuryrctl", "kuryrctl")?;
    let port = free_port();
    let metrics_addr = format!("127.0.0.1:{port}");
    let mut cmd = command(&controller, "debug");
    cmd.args([
        "--kubeconfig",
        &kubeconfig,
        "--clouds-yaml",
        clouds,
        "--os-cloud",
        "pw",
    ])
    .args(["--cluster-id", &iso.cluster_id, "--namespace", &iso.ns])
    .args([
        "--pod-subnet",
        &nets.pod_subnet_id,
        "--service-subnet",
        &nets.service_subnet_id,
    ])
    .args([
        "--external-network",
        &nets.external_network_id,
        "--lb-provider",
        "amphora",
        "--lb-floating-ip-cidrs",
        "203.0.113.0/24",
    ])
    .args([
        "--ports-pool=false",
        "--gc-interval-seconds",
        "0",
        "--lb-coalesce-ms",
        "100",
    ])
    .args(["--metrics-addr", &metrics_addr]);
    let child = canary::spawn(cmd);

    // Pods the controller cannot wire (cloudsim has no trunks for the lab's nodes): failure Events.
    let pods: Api<Pod> = Api::namespaced(iso.client.clone(), &iso.ns);
    for (i, vm) in lab.vms.iter().take(2).enumerate() {
        let mut pod = cluster::scheduled_pod(&format!("p{i}"), &vm.name);
        pod.metadata.labels = Some([("app".to_owned(), "web".to_owned())].into());
        pods.create(&PostParams::default(), &pod).await?;
    }
    let svcs: Api<Service> = Api::namespaced(iso.client.clone(), &iso.ns);
    svcs.create(&PostParams::default(), &service("web", None, &[]))
        .await?;
    svcs.create(
        &PostParams::default(),
        &service(
            "refused",
            Some("198.51.100.7"),
            &[
                (annotations::LB_PROVIDER, "vendor-x"),
                (annotations::TIMEOUT_CLIENT_DATA, "soon"),
                (annotations::PROJECT, "another-project"),
            ],
        ),
    )
    .await?;

    // Until the controller has said something about each: Events on pods/KuryrPorts and on Services.
    let events: Api<Event> = Api::namespaced(iso.client.clone(), &iso.ns);
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let reasons: Vec<String> = events
            .list(&ListParams::default())
            .await?
            .items
            .into_iter()
            .filter_map(|e| e.reason)
            .collect();
        let has = |r: &str| reasons.iter().any(|x| x == r);
        if has("AnnotationNotAllowed")
            && has("LoadBalancerIPNotAllowed")
            && has("InvalidAnnotation")
            && reasons.len() >= 5
        {
            break;
        }
        ensure!(
            Instant::now() < deadline,
            "the controller did not report enough within 90 s: {reasons:?}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let metrics = http_get(port, "/metrics");
    ensure!(metrics.contains("kuryr_reconciles_total"), "{metrics}");
    out.add("kuryr-controller /metrics", metrics);

    for sub in [vec!["status", "-n", iso.ns.as_str()], vec!["pools"], vec!["gc"]] {
        let mut cmd = command(&kuryrctl, "debug");
        cmd.args([
            "--kubeconfig",
            &kubeconfig,
            "--clouds-yaml",
            clouds,
            "--os-cloud",
            "ac",
        ])
        .args(["--cluster-id", &iso.cluster_id])
        .args(&sub);
        let (text, _) = run(cmd, Duration::from_secs(60));
        out.add(format!("kuryrctl {}: stdout+stderr", sub.join(" ")), text);
    }

    // Everything the cluster now holds about it.
    for e in events.list(&ListParams::default()).await?.items {
        out.add(
            format!("Event {} {}", e.reason.clone().unwrap_or_default(), e.name_any()),
            serde_json::to_string(&e)?,
        );
    }
    let kps: Api<KuryrPort> = Api::namespaced(iso.client.clone(), &iso.ns);
    for k in kps.list(&ListParams::default()).await?.items {
        out.add(format!("KuryrPort {}", k.name_any()), serde_json::to_string(&k)?);
    }
    let klbs: Api<KuryrLoadBalancer> = Api::namespaced(iso.client.clone(), &iso.ns);
    for k in klbs.list(&ListParams::default()).await?.items {
        out.add(
            format!("KuryrLoadBalancer {}", k.name_any()),
            serde_json::to_string(&k)?,
        );
    }
    for s in svcs.list(&ListParams::default()).await?.items {
        out.add(format!("Service {}", s.name_any()), serde_json::to_string(&s)?);
    }

    // Let the controller release what it made, then stop it.
    let dp = DeleteParams {
        grace_period_seconds: Some(0),
        ..DeleteParams::default()
    };
    for name in ["web", "refused"] {
        let _ = svcs.delete(name, &dp).await;
    }
    for p in ["p0", "p1"] {
        let _ = pods.delete(p, &dp).await;
    }
    // KuryrPorts too: a pod (no finalizer of ours) can be gone before its port's release has run.
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline
        && (!svcs.list(&ListParams::default()).await?.items.is_empty()
            || !pods.list(&ListParams::default()).await?.items.is_empty()
            || !kps.list(&ListParams::default()).await?.items.is_empty())
    {
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let (text, _) = finish(child, Duration::ZERO);
    ensure!(text.contains("DEBUG"), "not a debug-level run");
    out.add("kuryr-controller: stdout+stderr", text);

    // A wrong password: the controller stops with an error.
    let mut cmd = command(&controller, "debug");
    cmd.args([
        "--kubeconfig",
        &kubeconfig,
        "--clouds-yaml",
        clouds,
        "--os-cloud",
        "bad",
    ])
    .args([
        "--cluster-id",
        &iso.cluster_id,
        "--pod-subnet",
        &nets.pod_subnet_id,
    ]);
    let (text, code) = run(cmd, Duration::from_secs(60));
    ensure!(
        code.is_some_and(|c| c != 0),
        "a wrong password must stop the controller: {text}"
    );
    out.add("kuryr-controller with a wrong password: stdout+stderr", text);
    Ok((out, c.clone()))
}
