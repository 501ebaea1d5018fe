//! kuryr-rs installed the way an operator installs it: `lab/lab kuryr install` builds the image
//! (deploy/image/build), imports it into each kubelet node's containerd and applies deploy/ through the lab
//! overlay (lab/overlay) with `kubectl apply -k`; kuryr-controller and kuryr-daemon then run as pods under
//! their own ServiceAccounts, nothing of this repo in-process.
//!
//! Checked: the controller and the DaemonSet roll out and the daemons write the nodes' conflists; a
//! Deployment of HTTP servers and a client pod are wired (KuryrPort IP = pod IP) and Running; the client
//! gets an answer from a server through the Service's ClusterIP (an Octavia load balancer made by the
//! installed controller); the client reads the API server's `/version` through `default/kubernetes`
//! with the ServiceAccount token and CA that admission mounted; `kubectl rollout restart` of the
//! DaemonSet and then the Deployment while a Deployment's pods are deleted and replaced leaves every pod
//! wired and Running; neither component's log (read through the kubelets) shows a 403; deleting the
//! workloads removes their Neutron ports and load balancers; `lab/lab kuryr uninstall` releases the
//! `kubernetes` Service's load balancer and leaves no kuryr-rs pod and no conflist; the host-process
//! daemons then come back for the other tests.
//!
//! lab-tests: exclusive (installs kuryr-rs cluster-wide, stops the nodes' host daemons, serves `default/kubernetes`)

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context as _};
use kuryr_api::k8s_openapi::api::apps::v1::Deployment;
use kuryr_api::{
    Api, Client, DeleteParams, KuryrLoadBalancer, KuryrPort, ListParams, Pod, PostParams, ResourceExt,
    Service,
};
use kuryr_openstack::neutron::{ports, Filter};
use kuryr_openstack::octavia::loadbalancers;
use kuryr_openstack::{ClientConfig, Cloud, Owner};
use lab_tests::nodes::{self, nsenter};
use lab_tests::{cluster, Lab};
use serde_json::json;

const WAIT: Duration = Duration::from_secs(300);

fn lab_cmd() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../lab/lab")
}

/// `lab/lab ARGS` with `env`; its output in the error when it fails.
fn lab_run(args: &[&str], env: &[(&str, &str)]) -> anyhow::Result<String> {
    let out = Command::new(lab_cmd())
        .args(args)
        .envs(env.iter().copied())
        .output()
        .context("running lab/lab")?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    ensure!(
        out.status.success(),
        "lab/lab {}: {}\n{text}",
        args.join(" "),
        out.status
    );
    Ok(text)
}

fn kubectl(args: &[&str]) -> anyhow::Result<String> {
    let out = Command::new("kubectl")
        .args(args)
        .env("KUBECONFIG", Lab::state_dir().join("k8s/kubeconfig"))
        .output()
        .context("running kubectl")?;
    ensure!(
        out.status.success(),
        "kubectl {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn conflists() -> Vec<PathBuf> {
    let nodes = Lab::state_dir().join("nodes");
    std::fs::read_dir(&nodes)
        .map(|d| {
            d.filter_map(Result::ok)
                .map(|e| e.path().join("cni-conf/10-kuryr.conflist"))
                .filter(|p| p.exists())
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn installed_from_its_image_it_wires_pods_answers_a_service_and_uninstalls_cleanly(
) -> anyhow::Result<()> {
    let lab = Lab::require();
    // This test installs kuryr-rs for a namespace of its own and uninstalls it at the end: over an install
    // someone else made (./demo.sh's), it would take that install away from the pods it serves.
    if let Some((tag, ns)) = nodes::installed_kuryr(&lab) {
        eprintln!(
            "SKIP: kuryr-rs:{tag} is installed from its image already (serving namespace {ns:?}, e.g. by ./demo.sh); \
             this test would replace and then uninstall it, leaving that namespace's pods without a controller. \
             Run `lab/lab kuryr uninstall` first to run this test."
        );
        return Ok(());
    }
    let client = lab.kube_client().await?;
    let cloud = Cloud::connect(ClientConfig::clouds_yaml(
        Some(lab.clouds_yaml.clone()),
        lab.cloud.clone(),
    ))
    .await
    .context("login to the lab cloud")?;
    let id = format!("kinst-{:06x}", fastrand::u32(..0xff_ffff));
    let env = [
        ("KURYR_INSTALL_NAMESPACE", id.as_str()),
        ("KURYR_INSTALL_CLUSTER_ID", id.as_str()),
    ];
    let installed = lab_run(&["kuryr", "install"], &env);
    let result = match installed {
        Ok(out) => {
            eprintln!("{out}");
            scenario(&client, &cloud, &id).await
        }
        Err(e) => Err(e),
    };
    // Whatever happened: the workloads go first (the installed controller releases their ports), then
    // kuryr-rs, then the host-process daemons come back.
    cluster::delete_namespace(&client, &id).await;
    let deadline = Instant::now() + Duration::from_secs(120);
    let pods: Api<Pod> = Api::namespaced(client.clone(), &id);
    // KuryrPorts too: a pod (no finalizer of ours) can be gone while its KuryrPort still releases the port.
    let kps: Api<KuryrPort> = Api::namespaced(client.clone(), &id);
    while Instant::now() < deadline
        && (pods
            .list(&ListParams::default())
            .await
            .is_ok_and(|l| !l.items.is_empty())
            || kps
                .list(&ListParams::default())
                .await
                .is_ok_and(|l| !l.items.is_empty()))
    {
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let uninstalled = lab_run(&["kuryr", "uninstall", "--no-restore"], &[]);
    let after = uninstalled.and_then(|_| {
        let left = kubectl(&[
            "-n",
            "kube-system",
            "get",
            "pods",
            "-l",
            "app.kubernetes.io/name in (kuryr-controller,kuryr-daemon)",
            "-o",
            "name",
        ])?;
        ensure!(
            left.trim().is_empty(),
            "kuryr-rs pods left after uninstall: {left}"
        );
        let files = conflists();
        ensure!(files.is_empty(), "conflists left after uninstall: {files:?}");
        Ok(())
    });
    // The `kubernetes` Service's load balancer was released by the uninstall (docs/operations.md).
    let after = after.and(kapi_lb_released(&client, &cloud, &id).await);
    let restored = lab_run(&["nodes", "up"], &[]);
    for p in ports::list(&cloud, Filter::new().tags(&Owner::cluster_filter(&id)))
        .await
        .unwrap_or_default()
    {
        let _ = ports::delete(&cloud, &p.id).await;
    }
    result?;
    after?;
    restored?;
    ensure!(
        conflists().len() >= 2,
        "the host-process daemons did not write their conflists again"
    );
    Ok(())
}

/// Waits for `default/kubernetes`'s load balancer, then reads `/version` through its clusterIP from the
/// network namespace of the pod whose task is `pid`; returns the clusterIP.
async fn api_service_reachable(client: &Client, pid: u32) -> anyhow::Result<String> {
    let lab = Lab::require();
    let klbs: Api<KuryrLoadBalancer> = Api::namespaced(client.clone(), "default");
    let deadline = Instant::now() + WAIT;
    loop {
        let klb = klbs.get_opt("kubernetes").await?;
        let members: Vec<String> = klb
            .as_ref()
            .and_then(|k| k.status.as_ref())
            .filter(|s| kuryr_api::conditions::is_condition_true(&s.conditions, "Ready"))
            .map(|s| s.members.iter().map(|m| m.ip.clone()).collect())
            .unwrap_or_default();
        if members == [lab.apiserver.ip.clone()] {
            break;
        }
        if Instant::now() > deadline {
            bail!("default/kubernetes: no Ready load balancer with member {} within {WAIT:?} (members {members:?})", lab.apiserver.ip);
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let vip = Api::<Service>::namespaced(client.clone(), "default")
        .get("kubernetes")
        .await?
        .spec
        .and_then(|s| s.cluster_ip)
        .context("default/kubernetes has no clusterIP")?;
    let sa = format!("/proc/{pid}/root/var/run/secrets/kubernetes.io/serviceaccount");
    let token = std::fs::read_to_string(format!("{sa}/token"))
        .with_context(|| format!("the client pod has no ServiceAccount token in {sa}"))?;
    let auth = format!("Authorization: Bearer {}", token.trim());
    let ca = format!("{sa}/ca.crt");
    let url = format!("https://{vip}/version");
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let body = nsenter(
            pid,
            &["curl", "-s", "-m", "5", "--cacert", &ca, "-H", &auth, &url],
        )?;
        let version = serde_json::from_str::<serde_json::Value>(&body)
            .ok()
            .and_then(|v| v["gitVersion"].as_str().map(str::to_owned));
        if let Some(v) = version {
            ensure!(v.starts_with('v'), "{url} answered {body}");
            return Ok(vip);
        }
        if Instant::now() > deadline {
            bail!("no answer from the API server through {url} within 120 s (last: {body:?})");
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// Each pod's IP is its KuryrPort's (the port kuryr-rs made is the one the pod got).
async fn wired_as_reported(kps: &Api<KuryrPort>, running: &[Pod]) -> anyhow::Result<()> {
    for p in running {
        let kp = kps.get(&p.name_any()).await?;
        let vif_ip = kp
            .status
            .as_ref()
            .and_then(|s| s.default_vif().map(|(_, v)| v.clone()))
            .and_then(|v| v.ips.first().map(|i| i.address.clone()));
        let pod_ip = p.status.as_ref().and_then(|s| s.pod_ip.clone());
        ensure!(
            vif_ip.is_some() && vif_ip == pod_ip,
            "{}: KuryrPort IP {vif_ip:?}, pod IP {pod_ip:?}",
            p.name_any()
        );
    }
    Ok(())
}

/// Pods of the churn Deployment.
const CHURN_REPLICAS: usize = 4;

fn web_spec_for_churn(on_kubelets: &serde_json::Value) -> serde_json::Value {
    let mut spec = on_kubelets.clone();
    spec["containers"] = json!([{"name": "sleep", "image": "local.test/busybox:1", "imagePullPolicy": "Never",
        "command": ["sleep", "3600"]}]);
    spec
}

/// `kubectl rollout restart` of the daemon DaemonSet, then of the controller Deployment, while a Deployment's
/// pods are deleted one every 2 s (each replaced by a new one): ADDs and DELs land before, during and after
/// each restart. Returns once both rollouts are done and the churn stopped.
async fn restart_during_churn(client: &Client, ns: &str, spec: &serde_json::Value) -> anyhow::Result<()> {
    let churn: Deployment = serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "churn"},
        "spec": {"replicas": CHURN_REPLICAS, "selector": {"matchLabels": {"app": "churn"}},
            "template": {"metadata": {"labels": {"app": "churn"}}, "spec": spec}}
    }))?;
    Api::<Deployment>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &churn)
        .await?;
    let (stop, mut stopped) = tokio::sync::watch::channel(false);
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let churner = tokio::spawn(async move {
        let mut deleted = 0usize;
        let by_label = ListParams::default().labels("app=churn");
        while !*stopped.borrow() {
            if let Ok(list) = pods.list(&by_label).await {
                let live: Vec<_> = list
                    .items
                    .iter()
                    .filter(|p| p.metadata.deletion_timestamp.is_none())
                    .collect();
                if !live.is_empty() {
                    let victim = live[fastrand::usize(..live.len())].name_any();
                    if pods.delete(&victim, &DeleteParams::default()).await.is_ok() {
                        deleted += 1;
                    }
                }
            }
            let _ = tokio::time::timeout(Duration::from_secs(2), stopped.changed()).await;
        }
        deleted
    });
    let restarts = async {
        tokio::time::sleep(Duration::from_secs(5)).await;
        for what in ["ds/kuryr-daemon", "deploy/kuryr-controller"] {
            // Off the runtime's thread: the churn task runs on it meanwhile.
            let rollout = move || -> anyhow::Result<String> {
                kubectl(&["-n", "kube-system", "rollout", "restart", what])?;
                kubectl(&["-n", "kube-system", "rollout", "status", what, "--timeout=300s"])
            };
            tokio::task::spawn_blocking(rollout)
                .await?
                .with_context(|| format!("{what} did not roll out again"))?;
            eprintln!("{what}: restarted during churn");
        }
        tokio::time::sleep(Duration::from_secs(5)).await;
        anyhow::Ok(())
    }
    .await;
    let _ = stop.send(true);
    let deleted = churner.await.context("churn task")?;
    restarts?;
    eprintln!("churn: {deleted} pods deleted (and replaced) across both restarts");
    ensure!(
        deleted >= 3,
        "the churn deleted only {deleted} pods: it did not overlap the restarts"
    );
    Ok(())
}

/// After an uninstall: no KuryrLoadBalancer for `default/kubernetes` or `kube-system/kube-dns` (the cluster's
/// Services the installed controller served), no load balancer of `cluster_id`.
async fn kapi_lb_released(client: &Client, cloud: &Cloud, cluster_id: &str) -> anyhow::Result<()> {
    for (ns, name) in [("default", "kubernetes"), ("kube-system", "kube-dns")] {
        let klb = Api::<KuryrLoadBalancer>::namespaced(client.clone(), ns)
            .get_opt(name)
            .await?;
        ensure!(
            klb.is_none(),
            "KuryrLoadBalancer {ns}/{name} left after uninstall"
        );
    }
    let owner = Owner::cluster_filter(cluster_id);
    let left = loadbalancers::list(cloud, vec![("tags".into(), owner.join(","))]).await?;
    ensure!(
        left.is_empty(),
        "load balancers left after uninstall: {:?}",
        left.iter().map(|l| &l.id).collect::<Vec<_>>()
    );
    Ok(())
}

async fn scenario(client: &Client, cloud: &Cloud, ns: &str) -> anyhow::Result<()> {
    let files = conflists();
    ensure!(files.len() >= 2, "the DaemonSet wrote no conflists: {files:?}");
    let image = kubectl(&[
        "-n",
        "kube-system",
        "get",
        "ds/kuryr-daemon",
        "-o",
        "jsonpath={.spec.template.spec.containers[0].image}",
    ])?;
    ensure!(
        image.starts_with("kuryr-rs:") && image != "kuryr-rs:latest",
        "the DaemonSet runs {image}"
    );
    cluster::create_namespace(client, ns).await?;
    let on_kubelets = json!({
        "nodeSelector": {"kuryr.lab/kubelet": "true"},
        "tolerations": [{"key": "kuryr.lab/kubelet", "operator": "Exists"}],
        "terminationGracePeriodSeconds": 1,
    });
    let mut web_spec = on_kubelets.clone();
    web_spec["topologySpreadConstraints"] = json!([{"maxSkew": 1, "topologyKey": "kubernetes.io/hostname",
        "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {"matchLabels": {"app": "web"}}}]);
    web_spec["containers"] = json!([{"name": "httpd", "image": "local.test/busybox:1", "imagePullPolicy": "Never",
        "command": ["sh", "-c", "mkdir -p /www && hostname > /www/index.html && exec httpd -f -p 8080 -h /www"]}]);
    let web: Deployment = serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": web_spec}}
    }))?;
    Api::<Deployment>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &web)
        .await?;
    let mut client_spec = on_kubelets.clone();
    client_spec["containers"] = json!([{"name": "client", "image": "local.test/busybox:1",
        "imagePullPolicy": "Never", "command": ["sleep", "3600"]}]);
    let client_pod: Pod = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "client", "labels": {"app": "client"}},
        "spec": client_spec
    }))?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    pods.create(&PostParams::default(), &client_pod).await?;
    let svc: Service = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
        "spec": {"selector": {"app": "web"}, "ports": [{"name": "http", "port": 80, "targetPort": 8080, "protocol": "TCP"}]}
    }))?;
    let services: Api<Service> = Api::namespaced(client.clone(), ns);
    services.create(&PostParams::default(), &svc).await?;

    // Wired and Running, with the KuryrPort's IP.
    let running = nodes::wait_running(&pods, 3, WAIT).await?;
    let kps: Api<KuryrPort> = Api::namespaced(client.clone(), ns);
    wired_as_reported(&kps, &running).await?;

    // The Service answers through its load balancer.
    let klbs: Api<KuryrLoadBalancer> = Api::namespaced(client.clone(), ns);
    let deadline = Instant::now() + WAIT;
    loop {
        let ready = klbs.get_opt("web").await?.is_some_and(|k| {
            k.status.as_ref().is_some_and(|s| {
                kuryr_api::conditions::is_condition_true(&s.conditions, "Ready") && s.members.len() == 2
            })
        });
        if ready {
            break;
        }
        if Instant::now() > deadline {
            bail!("the web Service's load balancer is not Ready with 2 members within {WAIT:?}");
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let vip = services
        .get("web")
        .await?
        .spec
        .and_then(|s| s.cluster_ip)
        .context("clusterIP")?;
    let c = running
        .iter()
        .find(|p| p.name_any() == "client")
        .context("client pod")?;
    let (_, pid) = nodes::pod_task(c)?;
    let names: Vec<String> = running
        .iter()
        .map(|p| p.name_any())
        .filter(|n| n.starts_with("web-"))
        .collect();
    let url = format!("http://{vip}/");
    let deadline = Instant::now() + Duration::from_secs(120);
    let answer = loop {
        let body = nsenter(pid, &["curl", "-s", "-m", "3", &url])?;
        if names.iter().any(|n| body.trim() == n) {
            break body;
        }
        if Instant::now() > deadline {
            bail!("no answer from a web pod through {url} within 120 s (last: {body:?})");
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    };
    eprintln!("client -> {url}: {}", answer.trim());

    // The API server through the `kubernetes` Service: its load balancer (members: the API server's
    // advertised address) made by the installed controller, read from the client pod with the
    // ServiceAccount token and CA that ServiceAccount admission mounted, the certificate checked
    // against the clusterIP.
    let api_vip = api_service_reachable(client, pid).await?;
    eprintln!("client -> https://{api_vip}/version: answered by the API server");

    // Both components restarted by their rollouts while pods come and go: every pod ends up wired
    // and Running, none stuck (the leak check is the one after the workloads are deleted, below).
    restart_during_churn(client, ns, &web_spec_for_churn(&on_kubelets)).await?;
    let running = nodes::wait_running(&pods, 3 + CHURN_REPLICAS, WAIT)
        .await
        .context("after the rollout restarts during churn")?;
    wired_as_reported(&kps, &running)
        .await
        .context("after the rollout restarts during churn")?;

    // Least privilege held: no request of either component was refused. The logs are read through the
    // kubelets (`kubectl logs`), and must hold each component's start line: an empty log proves nothing.
    for (app, started) in [
        ("kuryr-controller", "caches synced; ready"),
        ("kuryr-daemon", "serving CNI requests"),
    ] {
        let logs = kubectl(&[
            "-n",
            "kube-system",
            "logs",
            "-l",
            &format!("app.kubernetes.io/name={app}"),
            "--tail=-1",
            "--prefix",
        ])?;
        ensure!(
            logs.contains(started),
            "{app}'s log (kubectl logs) lacks {started:?}: {} lines read",
            logs.lines().count()
        );
        let refused: Vec<&str> = logs
            .lines()
            // A refusal reads `reason: "Forbidden"`, `code: 403` and `... is forbidden: User ...`; a bare
            // "403" also matches container ids and netns names.
            .filter(|l| l.contains("Forbidden") || l.contains("forbidden") || l.contains("code: 403"))
            .collect();
        ensure!(
            refused.is_empty(),
            "{app} was refused by the API server: {refused:#?}"
        );
    }

    // The workloads go: their ports and the load balancer with them.
    services.delete("web", &DeleteParams::default()).await?;
    Api::<Deployment>::namespaced(client.clone(), ns)
        .delete("web", &DeleteParams::foreground())
        .await?;
    pods.delete("client", &DeleteParams::default()).await?;
    Api::<Deployment>::namespaced(client.clone(), ns)
        .delete("churn", &DeleteParams::foreground())
        .await?;
    let owner = Owner::cluster_filter(ns);
    let deadline = Instant::now() + WAIT;
    loop {
        let left_ports = ports::list(cloud, Filter::new().tags(&owner)).await?.len();
        // The `kubernetes` and `kube-system/kube-dns` Services' load balancers are the cluster's (the installed
        // controller serves kube-system too): they go with the uninstall, checked after it.
        let left_lbs = loadbalancers::list(cloud, vec![("tags".into(), owner.join(","))])
            .await?
            .iter()
            .filter(|lb| lb.name != "default/kubernetes" && lb.name != "kube-system/kube-dns")
            .count();
        let left_pods = pods.list(&ListParams::default()).await?.items.len();
        if left_ports == 0 && left_lbs == 0 && left_pods == 0 {
            break;
        }
        if Instant::now() > deadline {
            bail!("after deleting the workloads: {left_pods} pods, {left_ports} Neutron ports, {left_lbs} load balancers left");
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    Ok(())
}
