//! `kuryrctl preflight` against the lab (real Neutron ML2/OVN + Octavia + kube-apiserver) passes for a small
//! planned cluster (the lab's SG quota is 10: with every Service other tests leave around it rightly fails),
//! including what an install needs: this build's CRDs, every lab Node's InternalIP on a trunk parent port,
//! the lab's pod and service subnets and external network; a subnet id Neutron does not have fails, named.
//! Against a cloudsim without the trunk extension and with a port quota of 5 it fails (exit code 1) on
//! exactly those lines and passes the others it can check.

use std::collections::BTreeMap;

use anyhow::{ensure, Context as _};
use clap::Parser;
use kuryr_cloudsim::{Profile, Sim};
use lab_tests::Lab;

/// One report line: outcome (`pass`, `warn`, `fail`, `skip`) and detail.
type Lines = BTreeMap<String, (String, String)>;

/// `kuryrctl <global> -o json preflight <sub>`: exit code and outcome per check.
async fn preflight(global: &[&str], sub: &[&str]) -> anyhow::Result<(i32, Lines)> {
    let mut argv = vec!["kuryrctl"];
    argv.extend_from_slice(global);
    argv.extend(["-o", "json", "preflight"]);
    argv.extend_from_slice(sub);
    let cli = kuryrctl::Cli::try_parse_from(argv)?;
    let mut out = Vec::new();
    let code = cli.run_to(&mut out).await?;
    let report: serde_json::Value = serde_json::from_slice(&out)?;
    let lines = report["checks"]
        .as_array()
        .context("checks")?
        .iter()
        .map(|c| {
            let s = |k: &str| c[k].as_str().unwrap_or_default().to_owned();
            (s("check"), (s("outcome"), s("detail")))
        })
        .collect();
    Ok((code, lines))
}

/// Global options that point kuryrctl at the lab.
fn lab_globals(lab: &Lab) -> Vec<String> {
    [
        "--kubeconfig",
        &lab.kubeconfig.display().to_string(),
        "--clouds-yaml",
        &lab.clouds_yaml.display().to_string(),
        "--os-cloud",
        &lab.cloud,
        "--project-id",
        &lab.project_id,
    ]
    .map(str::to_owned)
    .to_vec()
}

/// A small planned cluster: the shared lab's own Services and policies (other tests') would make the quota
/// lines depend on what else runs (Kubernetes is still read: CRDs, Nodes).
const SMALL_CLUSTER: [&str; 10] = [
    "--nodes",
    "3",
    "--namespaces",
    "2",
    "--services",
    "1",
    "--policies",
    "0",
    "--pods",
    "10",
];

/// The lab's CRDs are this build's (other work trees' test runs apply theirs to the shared lab).
async fn install_this_builds_crds(lab: &Lab) -> anyhow::Result<()> {
    lab_tests::cluster::install_crds(&lab.kube_client().await?).await
}

/// Every lab Node (bootstrap `vmN`, kubelet `kubelet-vmN`; their InternalIPs are the VMs' trunk parent
/// ports) passed the parent-port lookup. Nodes other tests add for a while (on cloudsim ports) may fail
/// beside them, but then only those.
fn lab_nodes_have_trunk_parents(lab: &Lab, lines: &Lines) -> anyhow::Result<()> {
    let lab_nodes: Vec<String> = lab
        .vms
        .iter()
        .flat_map(|vm| [vm.name.clone(), format!("kubelet-{}", vm.name)])
        .collect();
    let (outcome, detail) = lines
        .get("node parent ports")
        .context("no `node parent ports` line")?;
    let per_node: Vec<(&String, &(String, String))> = lines
        .iter()
        .filter(|(k, _)| k.starts_with("node parent port "))
        .collect();
    for (check, (o, d)) in &per_node {
        let node = check.trim_start_matches("node parent port ");
        ensure!(!lab_nodes.iter().any(|n| n == node), "lab node {node}: {o}: {d}");
    }
    match outcome.as_str() {
        "pass" => {
            // "<n> Nodes: each InternalIP is on a trunk parent port (nested-vlan)"
            let checked: usize = detail
                .split_whitespace()
                .next()
                .and_then(|n| n.parse().ok())
                .with_context(|| format!("no count in {detail:?}"))?;
            ensure!(
                checked >= lab.vms.len() && detail.contains("trunk parent port"),
                "{detail}"
            );
        }
        "fail" => {
            // "<k> of <n> Nodes have no trunk parent port on their InternalIP (nested-vlan): a, b"
            let named: Vec<&str> = detail
                .rsplit_once("): ")
                .map(|(_, names)| names.split(", ").collect())
                .unwrap_or_default();
            ensure!(
                !per_node.is_empty()
                    && !named.is_empty()
                    && named.iter().all(|n| !lab_nodes.iter().any(|l| l == n)),
                "{detail}"
            );
        }
        other => anyhow::bail!("node parent ports: {other}: {detail}"),
    }
    Ok(())
}

#[tokio::test]
async fn preflight_passes_on_the_lab() -> anyhow::Result<()> {
    let lab = Lab::require();
    install_this_builds_crds(&lab).await?;
    let globals = lab_globals(&lab);
    let globals: Vec<&str> = globals.iter().map(String::as_str).collect();
    let mut sub = SMALL_CLUSTER.to_vec();
    sub.extend([
        "--vif-driver",
        "nested-vlan",
        "--pod-subnet",
        &lab.pod_subnet_id,
        "--service-subnet",
        &lab.service_subnet_id,
        "--external-network",
        &lab.external_network_id,
    ]);
    let (code, lines) = preflight(&globals, &sub).await?;
    lab_nodes_have_trunk_parents(&lab, &lines)?;
    // Only Nodes other tests added for a while may fail (see above).
    let failed: Vec<_> = lines
        .iter()
        .filter(|(k, (o, _))| *o == "fail" && !k.starts_with("node parent port"))
        .collect();
    ensure!(failed.is_empty(), "exit {code}, failed: {failed:?}");
    ensure!(
        code == 0 || lines["node parent ports"].0 == "fail",
        "exit {code}: {lines:?}"
    );
    for must in [
        "neutron extension trunk",
        "neutron extension tags",
        "octavia api version",
        "octavia providers",
        "security group firewall",
        "kuryr CRDs",
        "pod subnet",
        "service subnet",
        "external network",
        "quota neutron port",
        "quota octavia load_balancer",
    ] {
        ensure!(lines.contains_key(must), "no `{must}` line: {lines:?}");
    }
    for must_pass in [
        "neutron extension trunk",
        "security group firewall",
        "kuryr CRDs",
        "pod subnet",
        "service subnet",
        "external network",
    ] {
        ensure!(
            lines[must_pass].0 == "pass",
            "{must_pass}: {:?}",
            lines[must_pass]
        );
    }
    ensure!(
        lines["pod subnet"].1.contains(&lab.pod_subnet_cidr),
        "{:?}",
        lines["pod subnet"]
    );
    Ok(())
}

/// The controller's settings file is read like the controller reads it, and a subnet id Neutron does not
/// have is a FAIL naming the id and where it came from; the flags' and the file's real ids pass.
#[tokio::test]
async fn preflight_fails_on_a_subnet_the_cloud_does_not_have() -> anyhow::Result<()> {
    let lab = Lab::require();
    let dir = std::env::temp_dir().join(format!(
        "kuryr-preflight-cfg-{}-{}",
        std::process::id(),
        fastrand::u32(..)
    ));
    std::fs::create_dir_all(&dir)?;
    let config = dir.join("kuryr.yaml");
    let missing = "00000000-0000-4000-8000-00000000dead";
    std::fs::write(
        &config,
        format!(
            "cluster_id: preflight\npod_subnet: {missing}\nservice-subnet: {}\nvif_driver: nested-vlan\n",
            lab.service_subnet_id
        ),
    )?;
    let config_path = config.display().to_string();
    let globals = lab_globals(&lab);
    let globals: Vec<&str> = globals.iter().map(String::as_str).collect();
    let mut sub = SMALL_CLUSTER.to_vec();
    sub.extend([
        "--config",
        &config_path,
        "--external-network",
        &lab.external_network_id,
    ]);
    let result = preflight(&globals, &sub).await;
    let _ = std::fs::remove_dir_all(&dir);
    let (code, lines) = result?;
    ensure!(code == 1, "exit code {code}, want 1: {lines:?}");
    let (outcome, detail) = &lines["pod subnet"];
    ensure!(
        outcome == "fail" && detail.contains(missing) && detail.contains(&config_path),
        "pod subnet: {outcome}: {detail}"
    );
    ensure!(
        lines["service subnet"].0 == "pass",
        "{:?}",
        lines["service subnet"]
    );
    ensure!(
        lines["external network"].0 == "pass",
        "{:?}",
        lines["external network"]
    );
    lab_nodes_have_trunk_parents(&lab, &lines)?;
    Ok(())
}

#[tokio::test]
async fn preflight_fails_on_a_cloud_without_trunks_and_with_a_tiny_port_quota() -> anyhow::Result<()> {
    let mut profile = Profile::zero();
    profile.neutron.disabled_extensions = vec!["trunk".into()];
    profile.neutron.quotas.insert("port".into(), 5);
    let (_, sim) = Sim::new(profile).spawn_on("127.0.0.1:0").await?;
    let dir = std::env::temp_dir().join(format!(
        "kuryr-preflight-{}-{}",
        std::process::id(),
        fastrand::u32(..)
    ));
    std::fs::create_dir_all(&dir)?;
    let yaml = dir.join("clouds.yaml");
    std::fs::write(&yaml, sim.clouds_yaml("sim"))?;
    // Credentials: kuryrctl refuses a clouds.yaml every user can read.
    std::fs::set_permissions(&yaml, std::os::unix::fs::PermissionsExt::from_mode(0o600))?;
    // A planned cluster of 3 nodes and 10 pods: 3 x 10 pool ports + 10 > 5.
    let result = preflight(
        &["--clouds-yaml", &yaml.display().to_string(), "--os-cloud", "sim"],
        &["--no-kubernetes", "--nodes", "3", "--pods", "10"],
    )
    .await;
    let _ = std::fs::remove_dir_all(&dir);
    let (code, lines) = result?;
    ensure!(code == 1, "exit code {code}, want 1: {lines:?}");
    ensure!(lines["neutron extension trunk"].0 == "fail", "{lines:?}");
    ensure!(lines["quota neutron port"].0 == "fail", "{lines:?}");
    let other_failures: Vec<_> = lines
        .iter()
        .filter(|(k, (o, _))| *o == "fail" && *k != "neutron extension trunk" && *k != "quota neutron port")
        .collect();
    ensure!(
        other_failures.is_empty(),
        "unexpected failures: {other_failures:?}"
    );
    ensure!(
        lines["neutron extension tags"].0 == "pass" && lines["octavia api version"].0 == "pass",
        "{lines:?}"
    );
    // Without Kubernetes the cluster-side install checks say why they did not run.
    ensure!(
        lines["kuryr CRDs"].0 == "skip" && lines["node parent ports"].0 == "skip",
        "{lines:?}"
    );
    Ok(())
}
