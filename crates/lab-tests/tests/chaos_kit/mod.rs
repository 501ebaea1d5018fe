//! The chaos suite's parts (tests/chaos.rs runs them; tests/chaos_burst.rs uses the controller process and
//! the invariants): a private API server that can be restarted, the controller as a process to SIGKILL,
//! the cloud and its faults, pod/Service churn, the CNI daemon killed mid-ADD, the invariant checks and the
//! report. See docs/RELIABILITY.md.

// Each test binary uses part of this module.
#![allow(dead_code)]

pub mod apiserver;
pub mod churn;
pub mod cloud;
pub mod cni;
pub mod controller;
pub mod invariants;
pub mod report;
pub mod snapshot;

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::Path;

use kuryr_api::{Api, Client, Node, PostParams};

/// What the controller binary is pointed at.
pub struct ControllerSetup<'a> {
    pub kubeconfig: &'a Path,
    pub clouds_yaml: &'a Path,
    pub cloud_name: &'a str,
    pub cluster_id: &'a str,
    pub pod_subnet: &'a str,
    pub project_id: Option<&'a str>,
    pub namespace: &'a str,
    /// Turns Services on.
    pub service_subnet: Option<&'a str>,
    /// Warm port pools (the default) or the per-pod path: a port of its own per pod, deleted with it.
    pub pools: bool,
}

/// Flags of the real binary: pools on with small watermarks (refills, trims and returns all happen under
/// churn), fast load balancer repair, the garbage collector off (the invariants must hold by the main
/// path's own crash safety; the collector is tested in ops_gc.rs).
pub fn controller_args(s: &ControllerSetup<'_>) -> Vec<OsString> {
    let mut a: Vec<String> = vec![
        "--kubeconfig".into(),
        s.kubeconfig.display().to_string(),
        "--clouds-yaml".into(),
        s.clouds_yaml.display().to_string(),
        "--os-cloud".into(),
        s.cloud_name.into(),
        "--cluster-id".into(),
        s.cluster_id.into(),
        "--pod-subnet".into(),
        s.pod_subnet.into(),
        "--namespace".into(),
        s.namespace.into(),
        "--metrics-addr".into(),
        "127.0.0.1:0".into(),
        "--gc-interval-seconds".into(),
        "0".into(),
        "--ports-pool-min".into(),
        "2".into(),
        "--ports-pool-max".into(),
        "8".into(),
        "--ports-pool-batch".into(),
        "4".into(),
        "--ports-pool-sync-seconds".into(),
        "5".into(),
    ];
    if !s.pools {
        a.push("--ports-pool=false".into());
    }
    if let Some(p) = s.project_id {
        a.extend(["--project-id".into(), p.into()]);
    }
    if let Some(svc) = s.service_subnet {
        a.extend([
            "--service-subnet".into(),
            svc.into(),
            "--lb-pending-limit".into(),
            "6".into(),
            "--lb-drift-interval".into(),
            "5".into(),
            "--lb-coalesce-ms".into(),
            "300".into(),
        ]);
    }
    a.into_iter().map(OsString::from).collect()
}

/// Nodes as the lab registers them (Ready, InternalIP = the VM's port IP), on a private API server.
pub async fn create_nodes(client: &Client, nodes: &BTreeMap<String, String>) -> anyhow::Result<()> {
    let api: Api<Node> = Api::all(client.clone());
    for (name, ip) in nodes {
        let node: Node = serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "status": {
                "addresses": [{"type": "InternalIP", "address": ip}, {"type": "Hostname", "address": name}],
                "conditions": [{"type": "Ready", "status": "True", "reason": "ChaosLab"}],
            },
        }))?;
        let made = api.create(&PostParams::default(), &node).await?;
        if made.status.and_then(|s| s.addresses).is_none() {
            api.patch_status(
                name,
                &kuryr_api::PatchParams::default(),
                &kuryr_api::Patch::Merge(serde_json::json!({"status": node.status})),
            )
            .await?;
        }
    }
    Ok(())
}
