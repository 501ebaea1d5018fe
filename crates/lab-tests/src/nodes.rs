//! The lab's kubelet nodes from the outside: a container's task as its node's containerd sees it, and
//! commands run in a pod's network namespace.

use std::process::Command;

use anyhow::Context as _;

use crate::Lab;

/// The PID of a container's task, asked of the node's containerd (`containerd://` prefix or not).
pub fn task_pid(node: &str, container: &str) -> anyhow::Result<u32> {
    let container = container.trim_start_matches("containerd://");
    let sock = Lab::state_dir().join(format!("nodes/{node}/containerd.sock"));
    let out = Command::new("ctr")
        .args(["--address"])
        .arg(&sock)
        .args(["-n", "k8s.io", "tasks", "ls"])
        .output()?;
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| {
            let mut f = l.split_whitespace();
            (f.next() == Some(container)).then(|| f.next().and_then(|p| p.parse().ok()))?
        })
        .with_context(|| format!("containerd of {node} has no task {container}"))
}

/// Runs `cmd` (a host binary) in the network namespace of task `pid`; its stdout, whatever the exit.
pub fn nsenter(pid: u32, cmd: &[&str]) -> anyhow::Result<String> {
    let out = Command::new("nsenter")
        .args(["-t", &pid.to_string(), "-n", "--"])
        .args(cmd)
        .output()?;
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Waits until exactly `n` pods of `pods` exist, none terminating, all Running with an IP.
pub async fn wait_running(
    pods: &kube::Api<k8s_openapi::api::core::v1::Pod>,
    n: usize,
    timeout: std::time::Duration,
) -> anyhow::Result<Vec<k8s_openapi::api::core::v1::Pod>> {
    use kube::ResourceExt;
    let deadline = std::time::Instant::now() + timeout;
    loop {
        let list = pods.list(&kube::api::ListParams::default()).await?.items;
        let running: Vec<_> = list
            .iter()
            .filter(|p| {
                p.metadata.deletion_timestamp.is_none()
                    && p.status
                        .as_ref()
                        .is_some_and(|s| s.phase.as_deref() == Some("Running") && s.pod_ip.is_some())
            })
            .cloned()
            .collect();
        if running.len() == n && list.len() == n {
            return Ok(running);
        }
        if std::time::Instant::now() > deadline {
            let phases: Vec<_> = list
                .iter()
                .map(|p| (p.name_any(), p.status.as_ref().and_then(|s| s.phase.clone())))
                .collect();
            anyhow::bail!(
                "{n} pods not Running within {timeout:?}: {phases:?} (see the kubelet and kuryr-daemon logs)"
            );
        }
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    }
}

/// The node a pod runs on and the PID of its first container's task there.
pub fn pod_task(pod: &k8s_openapi::api::core::v1::Pod) -> anyhow::Result<(String, u32)> {
    let node = pod
        .spec
        .as_ref()
        .and_then(|s| s.node_name.clone())
        .context("node")?;
    let cid = pod
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|c| c.first())
        .and_then(|c| c.container_id.clone())
        .context("container id")?;
    let pid = task_pid(&node, &cid)?;
    Ok((node, pid))
}

/// Everything kuryr-daemon logged on kubelet node `node`: the host-process daemon's log file
/// (`log/kuryr-daemon-<node>.log`, `lab/lab nodes up`) followed by the log of the DaemonSet's daemon pod on
/// that node when kuryr-rs is installed from its image (`lab/lab kuryr install`, e.g. by `./demo.sh`). Either
/// may serve the node's CNI requests, so tests read both.
pub fn daemon_log(lab: &Lab, node: &str) -> String {
    let mut log = std::fs::read_to_string(lab.state_dir.join(format!("log/kuryr-daemon-{node}.log")))
        .unwrap_or_default();
    let kubectl = |args: &[&str]| {
        Command::new("kubectl")
            .env("KUBECONFIG", &lab.kubeconfig)
            .args(["-n", "kube-system"])
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default()
    };
    let field = format!("spec.nodeName={node}");
    let pods = kubectl(&[
        "get",
        "pods",
        "-l",
        "app.kubernetes.io/name=kuryr-daemon",
        "--field-selector",
        &field,
        "-o",
        "name",
    ]);
    for pod in pods.lines().filter(|l| !l.is_empty()) {
        log.push_str(&kubectl(&["logs", pod]));
    }
    log
}

/// kuryr-rs as `lab/lab kuryr install` left it installed from its image (e.g. by `./demo.sh`): the image tag
/// and the namespace its controller serves; `None` when it is not installed (the host-process daemons serve
/// the kubelet nodes).
pub fn installed_kuryr(lab: &Lab) -> Option<(String, String)> {
    if !lab.state_dir.join("nodes/kuryr-installed").exists() {
        return None;
    }
    let inst = lab.state_dir.join("install");
    let tag = std::fs::read_to_string(inst.join("tag")).unwrap_or_default();
    let ns = std::fs::read_to_string(inst.join("namespace")).unwrap_or_default();
    Some((tag.trim().to_owned(), ns.trim().to_owned()))
}

/// Names of the Nodes matching label selector `selector` whose Ready condition is True.
pub async fn ready(client: &kube::Client, selector: &str) -> anyhow::Result<Vec<String>> {
    use kube::ResourceExt;
    let nodes: kube::Api<k8s_openapi::api::core::v1::Node> = kube::Api::all(client.clone());
    Ok(nodes
        .list(&kube::api::ListParams::default().labels(selector))
        .await?
        .items
        .iter()
        .filter(|n| {
            n.status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
        })
        .map(|n| n.name_any())
        .collect())
}

/// Creates `pod` (its restart policy set to `Never`), waits until it has run to its end and returns its
/// termination message as kubelet reports it, then deletes it. For checks inside nodes the API server cannot
/// exec into (the VM nodes): the pod's script writes what it found to `/dev/termination-log`.
pub async fn run_to_end(
    pods: &kube::Api<k8s_openapi::api::core::v1::Pod>,
    mut pod: k8s_openapi::api::core::v1::Pod,
    timeout: std::time::Duration,
) -> anyhow::Result<String> {
    use kube::ResourceExt;
    if let Some(spec) = pod.spec.as_mut() {
        spec.restart_policy = Some("Never".into());
    }
    let name = pod.name_any();
    let node = pod
        .spec
        .as_ref()
        .and_then(|s| s.node_name.clone())
        .unwrap_or_default();
    pods.create(&kube::api::PostParams::default(), &pod).await?;
    let deadline = std::time::Instant::now() + timeout;
    let message = loop {
        let p = pods.get(&name).await?;
        let status = p.status.unwrap_or_default();
        if matches!(status.phase.as_deref(), Some("Succeeded" | "Failed")) {
            break status
                .container_statuses
                .unwrap_or_default()
                .into_iter()
                .find_map(|c| c.state.and_then(|s| s.terminated).and_then(|t| t.message))
                .unwrap_or_default();
        }
        if std::time::Instant::now() > deadline {
            anyhow::bail!(
                "pod {name} on {node} not done within {timeout:?}: {:?}",
                status.phase
            );
        }
        tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    };
    let _ = pods.delete(&name, &kube::api::DeleteParams::default()).await;
    eprintln!("{name} on {node}:\n{message}");
    Ok(message)
}

/// The name of the lab's Ready VM node (`kuryr.lab/vm-node=true`, `lab/lab vms up`). `None` (after saying why)
/// only where this machine cannot run the guest, as lab/lib/vm-nodes.sh recorded in `vm-nodes/unavailable`;
/// otherwise a missing node is an error saying how to start one.
pub async fn vm_node(lab: &Lab, client: &kube::Client) -> anyhow::Result<Option<String>> {
    const VM_LABEL: &str = "kuryr.lab/vm-node=true";
    let dir = lab.state_dir.join("vm-nodes");
    if let Ok(why) = std::fs::read_to_string(dir.join("unavailable")) {
        eprintln!("SKIP: this machine cannot run the lab's VM node: {}", why.trim());
        return Ok(None);
    }
    match ready(client, VM_LABEL).await?.into_iter().next() {
        Some(name) => Ok(Some(name)),
        None => anyhow::bail!(
            "no Ready VM node ({VM_LABEL}): start one with `lab/lab vms up` (logs: {}/*/log/)",
            dir.display()
        ),
    }
}

/// A Node's `InternalIP` (the lab VM's address: lab.json `vms[].ip`).
pub fn internal_ip(node: &k8s_openapi::api::core::v1::Node) -> Option<String> {
    node.status
        .as_ref()?
        .addresses
        .as_ref()?
        .iter()
        .find(|a| a.type_ == "InternalIP")
        .map(|a| a.address.clone())
}
