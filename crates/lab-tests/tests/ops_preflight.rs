//! `kuryrctl preflight` against the lab (real Neutron ML2/OVN + Octavia + kube-apiserver) passes for a small
//! planned cluster (the lab's SG quota is 10: with every Service other tests leave around it rightly fails); against a
//! cloudsim without the trunk extension and with a port quota of 5 it fails (exit code 1) on exactly those
//! lines and passes the others it can check.

use std::collections::BTreeMap;

use anyhow::{ensure, Context as _};
use clap::Parser;
use kuryr_cloudsim::{Profile, Sim};
use lab_tests::Lab;

/// `kuryrctl <global> -o json preflight <sub>`: exit code and outcome per check.
async fn preflight(global: &[&str], sub: &[&str]) -> anyhow::Result<(i32, BTreeMap<String, String>)> {
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
            (
                c["check"].as_str().unwrap_or_default().to_owned(),
                c["outcome"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    Ok((code, lines))
}

#[tokio::test]
async fn preflight_passes_on_the_lab() -> anyhow::Result<()> {
    let lab = Lab::require();
    let kubeconfig = lab.kubeconfig.display().to_string();
    let clouds = lab.clouds_yaml.display().to_string();
    let (code, lines) = preflight(
        &[
            "--kubeconfig",
            &kubeconfig,
            "--clouds-yaml",
            &clouds,
            "--os-cloud",
            &lab.cloud,
            "--project-id",
            &lab.project_id,
        ],
        // A small planned cluster: the shared lab's own Services and policies (other tests') would make
        // the quota lines depend on what else runs (Kubernetes is still read: the CRDs line).
        &[
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
        ],
    )
    .await?;
    let failed: Vec<_> = lines.iter().filter(|(_, o)| *o == "fail").collect();
    ensure!(code == 0 && failed.is_empty(), "exit {code}, failed: {failed:?}");
    for must in [
        "neutron extension trunk",
        "neutron extension tags",
        "octavia api version",
        "octavia providers",
        "security group firewall",
        "kuryr CRDs",
        "quota neutron port",
        "quota octavia load_balancer",
    ] {
        ensure!(lines.contains_key(must), "no `{must}` line: {lines:?}");
    }
    ensure!(lines["neutron extension trunk"] == "pass");
    ensure!(
        lines["security group firewall"] == "pass",
        "ML2/OVN not recognised: {lines:?}"
    );
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
    std::fs::write(
        &yaml,
        format!(
            "clouds:\n  sim:\n    auth_type: password\n    auth: {{auth_url: \"{}/v3\", username: kuryr, password: kuryr-secret, project_name: service, user_domain_name: Default, project_domain_name: Default}}\n    region_name: RegionOne\n",
            sim.url()
        ),
    )?;
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
    ensure!(lines["neutron extension trunk"] == "fail", "{lines:?}");
    ensure!(lines["quota neutron port"] == "fail", "{lines:?}");
    let other_failures: Vec<_> = lines
        .iter()
        .filter(|(k, o)| *o == "fail" && *k != "neutron extension trunk" && *k != "quota neutron port")
        .collect();
    ensure!(
        other_failures.is_empty(),
        "unexpected failures: {other_failures:?}"
    );
    ensure!(
        lines["neutron extension tags"] == "pass" && lines["octavia api version"] == "pass",
        "{lines:?}"
    );
    Ok(())
}
