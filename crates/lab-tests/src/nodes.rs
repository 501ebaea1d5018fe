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
