//! The chaos suite (docs/RELIABILITY.md). A private kube-apiserver on the lab's etcd (plus endpoints and
//! garbage-collector controllers), an in-process cloudsim shaped like the lab, and the real
//! `kuryr-controller` binary wiring pods and Services under churn while:
//! - the controller is SIGKILLed at random moments (at least 20 times) and started again;
//! - the API server is restarted (watch streams break);
//! - a `kuryr-daemon` is SIGKILLed mid-ADD (tests/chaos_kit/cni.rs);
//! - the cloud answers 5xx bursts (some after carrying the call out), 409 IPAM conflicts, holds calls
//!   without answering, runs out of port and load balancer quota then recovers, leaves a load balancer
//!   stuck in PENDING_UPDATE and puts one in ERROR.
//!
//! Then the churn stops and the invariants must hold (tests/chaos_kit/invariants.rs): every live pod wired
//! exactly once, no VLAN twice on a trunk, every Service's members = its ready endpoints, no tagged cloud
//! object without a live owner, no KuryrPort/KuryrLoadBalancer left behind its owner. Everything is then
//! deleted (with more kills) and leaks and finalizers are checked again. The counts are printed and written
//! to chaos-latest.json (report.rs says where).
//!
//! Short form by default (CI); `CHAOS_MINUTES=10` for a long run, `CHAOS_SEED=<n>` to repeat one,
//! `CHAOS_PORTS_POOL=false` for the per-pod path instead of warm pools.
//!
//! lab-tests: group heavy (four worker threads and kill timing: not beside another heavy binary)

mod chaos_kit;
mod podnet;
mod simnets;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::{Duration, Instant};

use anyhow::{ensure, Context as _};
use chaos_kit::apiserver::PrivateApi;
use chaos_kit::churn::Churn;
use chaos_kit::cloud::{ChaosCloud, Fault};
use chaos_kit::cni::{self, CniReport};
use chaos_kit::controller::ControllerProc;
use chaos_kit::invariants::{check, Snapshot};
use chaos_kit::report::{self, Plan, Report};
use chaos_kit::snapshot;
use kuryr_api::{Api, KuryrLoadBalancer, KuryrPort, ListParams, Pod, Service};
use lab_tests::Lab;

const NS: &str = "chaos";
/// Bounds of the waits after the churn (assertions are about the end state, not how fast it came).
const SETTLE: Duration = Duration::from_secs(240);
/// How long the operator lets a load balancer stay PENDING_* before resetting it.
const OPERATOR_PATIENCE: Duration = Duration::from_secs(15);
/// How long the cloud stays out of quota.
const QUOTA_OUTAGE: Duration = Duration::from_secs(8);

#[derive(Debug, Clone, Copy)]
enum Event {
    Fault(Fault),
    QuotaExhausted,
    QuotaRecovered,
    ApiRestart,
}

/// The events of the churn phase at seeded random times: every fault kind at least once, the quota
/// episodes (recovered [`QUOTA_OUTAGE`] later) and the API server restarts.
fn schedule(plan: &Plan, rng: &mut fastrand::Rng) -> Vec<(Duration, Event)> {
    let span = plan.churn_seconds as f64;
    let at = |rng: &mut fastrand::Rng, lo: f64, hi: f64| {
        Duration::from_secs_f64(span * (lo + rng.f64() * (hi - lo)))
    };
    let mut ev = Vec::new();
    for i in 0..plan.fault_bursts {
        let f = match Fault::ALL.get(i as usize) {
            Some(f) => *f,
            None => Fault::ALL[rng.usize(..Fault::ALL.len())],
        };
        ev.push((at(rng, 0.1, 0.85), Event::Fault(f)));
    }
    for _ in 0..plan.quota_exhaustions {
        ev.push((at(rng, 0.15, 0.8), Event::QuotaExhausted));
    }
    for i in 0..plan.api_restarts {
        let slot = (f64::from(i) + 0.5) / f64::from(plan.api_restarts);
        ev.push((at(rng, slot * 0.9, slot * 1.1), Event::ApiRestart));
    }
    ev.sort_by_key(|(t, _)| *t);
    ev
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn chaos_under_kills_restarts_and_cloud_faults_every_invariant_holds() -> anyhow::Result<()> {
    let lab = Lab::require();
    let plan = Plan::from_env();
    eprintln!(
        "chaos: seed {} ({} form: {} s of churn, >= {} controller kills; repeat with CHAOS_SEED={})",
        plan.seed, plan.form, plan.churn_seconds, plan.min_kills, plan.seed
    );
    let logs = report::target_dir().join(format!("chaos/run-{}", plan.seed));
    std::fs::create_dir_all(&logs)?;
    let bin = lab_tests::cluster::workspace_binary("kuryr-controller", "kuryr-controller")?;
    let t = Instant::now();
    let api = PrivateApi::start(&lab, &logs)
        .await
        .context("private API server")?;
    eprintln!(
        "chaos: private kube-apiserver on 127.0.0.1:{} (etcd prefix /chaos-{}) ready in {:.1} s",
        api.port,
        api.id,
        t.elapsed().as_secs_f64()
    );
    let result = run(&lab, &plan, &bin, api, &logs).await;
    match &result {
        Ok(r) if r.passed => {
            if std::env::var_os("CHAOS_KEEP_LOGS").is_none() {
                let _ = std::fs::remove_dir_all(&logs);
            }
        }
        _ => eprintln!("chaos: logs kept in {}", logs.display()),
    }
    let r = result?;
    ensure!(r.passed, "chaos run failed (seed {}): {:#?}", r.seed, r.problems);
    Ok(())
}

async fn run(
    lab: &Lab,
    plan: &Plan,
    bin: &std::path::Path,
    api: PrivateApi,
    logs: &std::path::Path,
) -> anyhow::Result<Report> {
    let t_start = Instant::now();
    let client = api.client().await?;
    lab_tests::cluster::install_crds(&client).await?;
    lab_tests::cluster::create_namespace_unadmitted(&client, NS).await?;
    let nodes: BTreeMap<String, String> = lab.vms.iter().map(|v| (v.name.clone(), v.ip.clone())).collect();
    chaos_kit::create_nodes(&client, &nodes).await?;
    let cloud = ChaosCloud::start(lab).await?;
    let cluster_id = format!("chaos-{}", api.id);
    let kubeconfig = api.kubeconfig.clone();
    let args = chaos_kit::controller_args(&chaos_kit::ControllerSetup {
        kubeconfig: &kubeconfig,
        clouds_yaml: &cloud.pods.clouds_yaml,
        cloud_name: &cloud.pods.cloud_name,
        cluster_id: &cluster_id,
        pod_subnet: &cloud.pods.subnet_id,
        project_id: None,
        namespace: NS,
        service_subnet: Some(&cloud.service_subnet_id),
        pools: plan.pools,
    });
    let mut ctl = ControllerProc::new(bin, args, logs.join("kuryr-controller.log"));
    ctl.start()?;
    let mut rng = fastrand::Rng::with_seed(plan.seed);
    let mut churn = Churn::new(client.clone(), NS, nodes, rng.u64(..));
    churn.ensure_services().await;
    churn.create_pods(8).await;

    let cni_task = {
        let (lab, client, kubeconfig, dir, id) = (
            lab.clone(),
            client.clone(),
            kubeconfig.clone(),
            logs.to_owned(),
            api.id.clone(),
        );
        let mut crng = fastrand::Rng::with_seed(rng.u64(..));
        tokio::spawn(async move {
            let setup = cni::Setup {
                lab: &lab,
                client,
                kubeconfig,
                dir,
                id,
            };
            cni::daemon_killed_mid_add(setup, &mut crng).await
        })
    };

    // Churn under kills, faults and API restarts.
    let mut events = schedule(plan, &mut rng);
    let gap = |rng: &mut fastrand::Rng| {
        Duration::from_secs_f64(plan.kill_gap_s.0 + rng.f64() * (plan.kill_gap_s.1 - plan.kill_gap_s.0))
    };
    let t0 = Instant::now();
    let mut next_kill = t0 + gap(&mut rng);
    let mut next_churn = t0;
    let mut api_slot = Some(api);
    let mut restarting: Option<tokio::task::JoinHandle<(PrivateApi, anyhow::Result<Duration>)>> = None;
    let mut crashes = 0;
    let mut quota_exhaustions = 0;
    let mut cni_result: Option<anyhow::Result<CniReport>> = None;
    let mut cni_task = Some(cni_task);
    loop {
        let now = Instant::now();
        if let Some(status) = ctl.exited()? {
            crashes += 1;
            eprintln!(
                "chaos: the controller exited on its own ({status}):\n{}",
                ctl.log_tail(30)
            );
            ctl.start()?;
        }
        if now >= next_kill {
            ctl.sigkill()?;
            eprintln!(
                "chaos: t={:.1}s controller SIGKILL #{}",
                t0.elapsed().as_secs_f64(),
                ctl.kills
            );
            if rng.bool() {
                tokio::time::sleep(Duration::from_millis(rng.u64(0..800))).await;
            }
            ctl.start()?;
            next_kill = Instant::now() + gap(&mut rng);
        }
        if cni_task.as_ref().is_some_and(|t| t.is_finished()) {
            if let Some(t) = cni_task.take() {
                let r = t.await.context("CNI scenario task")?;
                eprintln!(
                    "chaos: t={:.1}s CNI daemon scenario done: {}",
                    t0.elapsed().as_secs_f64(),
                    match &r {
                        Ok(r) => format!("{r:?}"),
                        Err(e) => format!("FAILED: {e:#}"),
                    }
                );
                cni_result = Some(r);
            }
        }
        let mut i = 0;
        while let Some((at, ev)) = events.get(i).copied() {
            if t0 + at > now {
                break;
            }
            // The daemon scenario reads the same API server: a restart waits for it (later events don't).
            if matches!(ev, Event::ApiRestart) && (cni_task.is_some() || restarting.is_some()) {
                i += 1;
                continue;
            }
            events.remove(i);
            eprintln!("chaos: t={:.1}s {ev:?}", t0.elapsed().as_secs_f64());
            match ev {
                Event::ApiRestart => {
                    if let Some(mut a) = api_slot.take() {
                        let lab = lab.clone();
                        restarting = Some(tokio::spawn(async move {
                            let r = a.restart(&lab).await;
                            (a, r)
                        }));
                    }
                }
                Event::Fault(f) => f.inject(cloud.sim(), NS),
                Event::QuotaExhausted => {
                    let used = cloud.exhaust_port_quota().await?;
                    let lbs = kuryr_openstack::octavia::loadbalancers::list(&cloud.pods.cloud, vec![])
                        .await?
                        .len();
                    cloud.exhaust_lb_quota(i64::try_from(lbs)?).await?;
                    quota_exhaustions += 1;
                    eprintln!("chaos: port quota down to {used} ports in use, LB quota to {lbs}");
                    // Recovery 8 s after the exhaustion really began.
                    let back = t0.elapsed() + QUOTA_OUTAGE;
                    let pos = events.partition_point(|(t, _)| *t <= back);
                    events.insert(pos, (back, Event::QuotaRecovered));
                }
                Event::QuotaRecovered => cloud.recover_quotas().await?,
            }
        }
        if restarting.as_ref().is_some_and(|t| t.is_finished()) {
            if let Some(t) = restarting.take() {
                let (a, r) = t.await?;
                let away = r.context("restarting the API server")?;
                eprintln!("chaos: API server restarted, away {:.1} s", away.as_secs_f64());
                api_slot = Some(a);
            }
        }
        if now >= next_churn {
            churn.step().await;
            churn.kubelet().await;
            next_churn = Instant::now() + Duration::from_millis(rng.u64(200..1000));
        }
        let done = t0.elapsed() >= plan.churn()
            && ctl.kills >= plan.min_kills
            && events.is_empty()
            && restarting.is_none()
            && cni_task.is_none();
        if done {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let api = api_slot.context("API server lost")?;
    let faults_injected = cloud.sim().faults_fired() + u64::from(quota_exhaustions);
    cloud.sim().set_faults(Default::default());
    cloud.recover_quotas().await?;
    eprintln!(
        "chaos: churn over after {:.1} s: {} kills, {} API restarts, {faults_injected} faults; {:?}",
        t0.elapsed().as_secs_f64(),
        ctl.kills,
        api.restarts,
        churn.stats
    );

    // Settle: no more chaos; every invariant must come true.
    if ctl.exited()?.is_some() {
        crashes += 1;
        ctl.start()?;
    }
    let node_trunks = cloud.pods.trunks.clone();
    let scope = snapshot::Scope {
        client: &client,
        ns: NS,
        cloud: &cloud.pods.cloud,
        cluster_id: &cluster_id,
        project_id: None,
        node_trunks: &node_trunks,
        // cloudsim: its port status is the only truth there is.
        ask_ovn: false,
    };
    let t_settle = Instant::now();
    let mut operator = Operator::default();
    churn.ensure_services().await;
    let settled = loop {
        churn.kubelet().await;
        let Some(snap) = snapshot_or_retry(&scope).await else {
            ensure!(t_settle.elapsed() < SETTLE, "no snapshot for {SETTLE:?}");
            continue;
        };
        let counts = check(&snap);
        if counts.clean() || t_settle.elapsed() > SETTLE {
            break counts;
        }
        operator.tend(&cloud, &snap).await?;
        tokio::time::sleep(Duration::from_secs(1)).await;
    };
    let settle_seconds = t_settle.elapsed().as_secs_f64();
    eprintln!("chaos: settled in {settle_seconds:.1} s: {}", settled.summary());

    // Teardown under a few more kills: every owner deleted, nothing of theirs may stay.
    churn.delete_all().await;
    for _ in 0..3 {
        tokio::time::sleep(Duration::from_millis(rng.u64(200..2000))).await;
        ctl.sigkill()?;
        ctl.start()?;
    }
    let t_down = Instant::now();
    let after = loop {
        let Some(snap) = snapshot_or_retry(&scope).await else {
            ensure!(t_down.elapsed() < SETTLE, "no snapshot for {SETTLE:?}");
            continue;
        };
        let counts = check(&snap);
        let empty = snap.kps.is_empty() && snap.klbs.is_empty() && snap.terminating_pods.is_empty();
        if (counts.clean() && empty) || t_down.elapsed() > SETTLE {
            break counts;
        }
        operator.tend(&cloud, &snap).await?;
        tokio::time::sleep(Duration::from_secs(1)).await;
    };
    eprintln!("chaos: after deleting everything: {}", after.summary());
    let mut leftovers = leftover_objects(&client).await;
    for _ in 0..5 {
        if leftovers.is_ok() {
            break;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
        leftovers = leftover_objects(&client).await;
    }
    let leftovers = leftovers?;

    let cni_report = match cni_result {
        Some(Ok(r)) => Some(r),
        Some(Err(e)) => {
            eprintln!("chaos: the CNI daemon scenario failed: {e:#}");
            None
        }
        None => None,
    };
    let mut problems: Vec<String> = settled.problems.iter().chain(&after.problems).cloned().collect();
    problems.extend(leftovers.iter().cloned());
    if crashes > 0 {
        problems.push(format!("the controller exited on its own {crashes} times"));
    }
    if cni_report.is_none() {
        problems.push("the CNI daemon scenario failed".into());
    }
    if ctl.kills < plan.min_kills {
        problems.push(format!("only {} kills", ctl.kills));
    }
    if settled.pods_checked == 0 || settled.services_checked == 0 {
        problems.push("nothing was checked".into());
    }
    let passed = settled.clean() && after.clean() && problems.is_empty() && api.restarts >= plan.api_restarts;
    let report = Report {
        test: "chaos",
        at: chrono::Utc::now().to_rfc3339(),
        seed: plan.seed,
        form: plan.form,
        passed,
        kills: ctl.kills,
        controller_starts: ctl.starts,
        controller_crashes: crashes,
        api_restarts: api.restarts,
        faults_injected,
        quota_exhaustions,
        pods_checked: settled.pods_checked,
        services_checked: settled.services_checked,
        leaked_objects: settled.leaked_objects + after.leaked_objects,
        duplicate_vlans: settled.duplicate_vlans + after.duplicate_vlans,
        unwired_pods: settled.unwired_pods,
        member_mismatches: settled.member_mismatches,
        stuck_finalizers: settled.stuck_finalizers + after.stuck_finalizers,
        after_teardown: after,
        cni: cni_report.unwrap_or_default(),
        churn: churn.stats.clone(),
        operator_lb_resets: operator.resets,
        wall_seconds: t_start.elapsed().as_secs_f64(),
        settle_seconds,
        problems,
        plan: plan.clone(),
    };
    let path = report::write(&report)?;
    eprintln!(
        "chaos: {} — kills={} api_restarts={} faults_injected={} pods_checked={} services_checked={} \
         unwired_pods={} duplicate_vlans={} member_mismatches={} leaked_objects={} stuck_finalizers={} \
         (cni: {} daemon kills) -> {}",
        if passed { "PASSED" } else { "FAILED" },
        report.kills,
        report.api_restarts,
        report.faults_injected,
        report.pods_checked,
        report.services_checked,
        report.unwired_pods,
        report.duplicate_vlans,
        report.member_mismatches,
        report.leaked_objects,
        report.stuck_finalizers,
        report.cni.daemon_kills,
        path.display()
    );
    if !passed {
        eprintln!("chaos: controller log tail:\n{}", ctl.log_tail(40));
    }
    ctl.stop().await?;
    let _ = cloud.pods.delete_tagged(&cluster_id).await;
    api.close().await?;
    Ok(report)
}

/// A snapshot, or None after a transient error (said on stderr; the caller polls again): the lab's etcd
/// and the private API server are busy too.
async fn snapshot_or_retry(scope: &snapshot::Scope<'_>) -> Option<Snapshot> {
    match snapshot::take(scope).await {
        Ok(s) => Some(s),
        Err(e) => {
            eprintln!("chaos: snapshot failed, polling again: {e:#}");
            tokio::time::sleep(Duration::from_secs(1)).await;
            None
        }
    }
}

/// The operator's part. Octavia never lets go of a load balancer stuck in PENDING_*: the controller
/// replaces it (and abandons it) or, when its Service is deleted, keeps asking Octavia to delete it, but
/// only an operator can reset it (as in services_faults.rs). The test plays that operator after the churn:
/// an abandoned one (named by no KuryrLoadBalancer) at once, any other once it stayed PENDING_* for
/// [`OPERATOR_PATIENCE`].
#[derive(Default)]
struct Operator {
    pending_since: HashMap<String, Instant>,
    resets: u32,
}

impl Operator {
    async fn tend(&mut self, cloud: &ChaosCloud, snap: &Snapshot) -> anyhow::Result<()> {
        let named: HashSet<&str> = snap.klbs.iter().filter_map(|k| k.lb_id.as_deref()).collect();
        for lb in &snap.lbs {
            if !lb.provisioning_status.starts_with("PENDING_") {
                self.pending_since.remove(&lb.id);
                continue;
            }
            let since = *self
                .pending_since
                .entry(lb.id.clone())
                .or_insert_with(Instant::now);
            if named.contains(lb.id.as_str()) && since.elapsed() < OPERATOR_PATIENCE {
                continue;
            }
            let url = format!("{}/_sim/loadbalancers/{}/status", cloud.sim().url(), lb.id);
            let resp = reqwest::Client::new()
                .post(url)
                .json(&serde_json::json!({"provisioning_status": "ACTIVE"}))
                .send()
                .await?;
            // Deleted since the snapshot: nothing to reset.
            if resp.status() == reqwest::StatusCode::NOT_FOUND {
                continue;
            }
            resp.error_for_status()?;
            eprintln!(
                "chaos: operator reset load balancer {} ({})",
                lb.id, lb.provisioning_status
            );
            self.pending_since.remove(&lb.id);
            self.resets += 1;
        }
        Ok(())
    }
}

/// Anything of the namespace still there after the teardown (pods, Services, KuryrPorts,
/// KuryrLoadBalancers), named.
async fn leftover_objects(client: &kuryr_api::Client) -> anyhow::Result<Vec<String>> {
    let lp = ListParams::default();
    let mut out = Vec::new();
    for p in Api::<Pod>::namespaced(client.clone(), NS).list(&lp).await? {
        out.push(format!("pod {} left", kuryr_api::ResourceExt::name_any(&p)));
    }
    for s in Api::<Service>::namespaced(client.clone(), NS).list(&lp).await? {
        out.push(format!("service {} left", kuryr_api::ResourceExt::name_any(&s)));
    }
    for k in Api::<KuryrPort>::namespaced(client.clone(), NS).list(&lp).await? {
        out.push(format!("KuryrPort {} left", kuryr_api::ResourceExt::name_any(&k)));
    }
    for k in Api::<KuryrLoadBalancer>::namespaced(client.clone(), NS)
        .list(&lp)
        .await?
    {
        out.push(format!(
            "KuryrLoadBalancer {} left",
            kuryr_api::ResourceExt::name_any(&k)
        ));
    }
    Ok(out)
}
