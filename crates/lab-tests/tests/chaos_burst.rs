//! The real `kuryr-controller` binary SIGKILLed in the middle of a 50-pod burst, three times, and started
//! again each time: every pod ends up wired exactly once (one port, a subport of its node's trunk on the VLAN
//! its status names), no VLAN twice on a trunk, no port without a live owner; after the pods are deleted no
//! pod port is left and every pool port is attached to a trunk. On cloudsim with warm pools and with the
//! per-pod path, and on the lab's real Neutron (ML2/OVN) with the per-pod path (a port create takes ~1.5 s
//! there: the widest window for a kill between create and status write); the same code path everywhere,
//! the lab's API server, a namespace and cluster id of the test's own.

mod chaos_kit;
mod podnet;
mod simnets;

use std::time::{Duration, Instant};

use anyhow::{bail, ensure};
use chaos_kit::controller::ControllerProc;
use chaos_kit::invariants::{check, Counts};
use chaos_kit::snapshot;
use kuryr_api::ListParams;
use lab_tests::Lab;
use podnet::{Scope, TestCloud};

const PODS: usize = 50;
/// The kills happen once this many KuryrPorts are Ready (mid-burst: some wired, most not).
const KILL_AT_READY: [usize; 3] = [3, 18, 33];

#[tokio::test]
async fn controller_killed_mid_burst_of_50_pods_wires_each_once_from_pools_on_cloudsim() -> anyhow::Result<()>
{
    let lab = Lab::require();
    burst(&lab, &TestCloud::cloudsim(&lab, |_| {}).await?, "sim-pool", true).await
}

#[tokio::test]
async fn controller_killed_mid_burst_of_50_pods_wires_each_once_per_pod_on_cloudsim() -> anyhow::Result<()> {
    let lab = Lab::require();
    burst(&lab, &TestCloud::cloudsim(&lab, |_| {}).await?, "sim-own", false).await
}

#[tokio::test]
async fn controller_killed_mid_burst_of_50_pods_wires_each_once_per_pod_on_real_neutron() -> anyhow::Result<()>
{
    let lab = Lab::require();
    let cloud = TestCloud::lab(&lab).await?;
    burst(&lab, &cloud, "lab-own", false).await
}

async fn burst(lab: &Lab, cloud: &TestCloud, kind: &str, pools: bool) -> anyhow::Result<()> {
    let scope = Scope::new(lab, &format!("burst-{kind}")).await?;
    let bin = lab_tests::cluster::workspace_binary("kuryr-controller", "kuryr-controller")?;
    let logs = chaos_kit::report::target_dir().join(format!("chaos/{}", scope.ns));
    std::fs::create_dir_all(&logs)?;
    let args = chaos_kit::controller_args(&chaos_kit::ControllerSetup {
        kubeconfig: &lab.kubeconfig,
        clouds_yaml: &cloud.clouds_yaml,
        cloud_name: &cloud.cloud_name,
        cluster_id: &scope.cluster_id,
        pod_subnet: &cloud.subnet_id,
        project_id: cloud.project_id.as_deref(),
        namespace: &scope.ns,
        service_subnet: None,
        pools,
    });
    let mut ctl = ControllerProc::new(&bin, args, logs.join("kuryr-controller.log"));
    ctl.start()?;
    let result = scenario(cloud, &scope, &mut ctl).await;
    if let Err(e) = &result {
        eprintln!(
            "[{kind}] failed: {e:#}\ncontroller log ({}):\n{}",
            ctl.log_path().display(),
            ctl.log_tail(40)
        );
    }
    ctl.stop().await?;
    sweep(cloud, &scope.cluster_id).await;
    scope.close().await;
    if result.is_ok() {
        let _ = std::fs::remove_dir_all(&logs);
    }
    result
}

async fn scenario(cloud: &TestCloud, scope: &Scope, ctl: &mut ControllerProc) -> anyhow::Result<()> {
    let nodes: Vec<String> = cloud.trunks.keys().cloned().collect();
    let created = {
        let burst = podnet::create_pods(scope, "b", PODS, &nodes);
        let kills = kill_mid_burst(scope, ctl);
        let (created, kills) = tokio::join!(burst, kills);
        kills?;
        created?
    };
    ensure!(ctl.kills == 3, "{} kills", ctl.kills);
    let wired = podnet::wait_ready(scope, &created, "burst").await?;
    ensure!(wired.len() == PODS, "{} of {PODS} wired", wired.len());
    podnet::check_wired(cloud, &created, &wired).await?;

    let snap_scope = snapshot::Scope {
        client: &scope.client,
        ns: &scope.ns,
        cloud: &cloud.cloud,
        cluster_id: &scope.cluster_id,
        project_id: cloud.project_id.as_deref(),
        node_trunks: &cloud.trunks,
        // Real Neutron on the lab's OVN: OVN answers for a port Neutron still calls DOWN.
        ask_ovn: cloud.sim.is_none(),
    };
    // A refill cut short by a kill is cleaned up by the next rebuild: poll until the state is clean.
    let counts = settle(&snap_scope, |c| c.clean()).await?;
    eprintln!("after {} kills: {}", ctl.kills, counts.summary());
    ensure!(
        counts.pods_checked == PODS,
        "{} pods checked",
        counts.pods_checked
    );

    podnet::delete_pods(scope, created.keys()).await?;
    let pool_ports = podnet::check_no_leak(cloud, &scope.cluster_id).await?;
    let after = settle(&snap_scope, |c| c.clean()).await?;
    eprintln!(
        "after deleting the pods: {} ({pool_ports} pool ports attached)",
        after.summary()
    );
    Ok(())
}

/// SIGKILLs the controller each time the number of Ready KuryrPorts reaches the next of [`KILL_AT_READY`],
/// and starts it again at once.
async fn kill_mid_burst(scope: &Scope, ctl: &mut ControllerProc) -> anyhow::Result<()> {
    let deadline = Instant::now() + 2 * podnet::WIRE_TIMEOUT;
    for at in KILL_AT_READY {
        loop {
            let ready = scope
                .kps()
                .list(&ListParams::default())
                .await?
                .iter()
                .filter(|k| podnet::is_ready(k))
                .count();
            if ready >= at {
                break;
            }
            if Instant::now() > deadline {
                bail!("only {ready} KuryrPorts Ready, waiting for {at}");
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        ctl.sigkill()?;
        ctl.start()?;
    }
    Ok(())
}

/// Polls the invariants until `ok` or 90 s; fails with the problems.
async fn settle(s: &snapshot::Scope<'_>, ok: impl Fn(&Counts) -> bool) -> anyhow::Result<Counts> {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let counts = check(&snapshot::take(s).await?);
        if ok(&counts) {
            return Ok(counts);
        }
        if Instant::now() > deadline {
            bail!("invariants broken: {}: {:#?}", counts.summary(), counts.problems);
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Calls a killed controller left in flight are still carried out by real Neutron, after the test stopped
/// looking: deletes this cluster's ports until two scans 5 s apart find none (at most 90 s).
async fn sweep(cloud: &TestCloud, cluster_id: &str) {
    let deadline = Instant::now() + Duration::from_secs(90);
    let mut quiet = 0;
    while quiet < 2 && Instant::now() < deadline {
        match cloud.delete_tagged(cluster_id).await {
            Ok(0) => quiet += 1,
            _ => quiet = 0,
        }
        tokio::time::sleep(Duration::from_secs(5)).await;
    }
}
