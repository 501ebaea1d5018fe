//! `kuryr-bench`: runs the benchmark scenarios against the lab (see docs/BENCHMARKS.md; `bench/run` is
//! the one command that builds, installs and calls this).

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;
use clap::{Parser, Subcommand};
use kuryr_bench::record::{Implementation, Record, Run, Scenario, SCHEMA_VERSION};
use kuryr_bench::repeats::{self, Sink};
use kuryr_bench::scenarios::burst::{self, BurstOpts};
use kuryr_bench::scenarios::churn::{self, ChurnOpts};
use kuryr_bench::scenarios::datapath::{self, DatapathOpts};
use kuryr_bench::scenarios::scale::{self, ScaleOpts};
use kuryr_bench::scenarios::services::{self, ServicesOpts};
use kuryr_bench::session::{self, CloudKind, Settings, Spec};
use kuryr_bench::{kubeenv, machine, report};
use kuryr_cloudsim::Profile;
use lab_tests::Lab;

#[derive(Debug, Parser)]
#[command(
    name = "kuryr-bench",
    about = "kuryr-rs vs upstream Kuryr benchmarks on the lab",
    // A flag given again wins (bench/run --smoke passes its own, which later ones replace).
    args_override_self = true
)]
struct Args {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// Run scenarios and write bench/results/<run_id>.json and latest.json.
    Run(Box<RunArgs>),
    /// Print the side-by-side markdown table of a result file.
    Report { file: PathBuf },
    /// Check a result file against the schema.
    Check { file: PathBuf },
    /// Delete what an interrupted run left: namespaces and Nodes labelled kuryr-bench=true.
    Cleanup,
    /// Serve the namespace-pinning apiserver proxy upstream runs behind (for debugging it by hand).
    Proxy { namespace: String },
}

#[derive(Debug, clap::Args)]
struct RunArgs {
    /// Scenarios (default: all).
    #[arg(value_enum)]
    scenarios: Vec<Scenario>,
    /// Implementations to run: kuryr-rs, upstream, and floor (the harness's own minimal controller, burst
    /// only: the least the scenario costs on this machine).
    #[arg(long, value_delimiter = ',', default_value = "kuryr-rs,upstream,floor", action = clap::ArgAction::Set)]
    impls: Vec<String>,
    /// Sessions per variant and implementation (burst, churn, services), the implementations' order
    /// rotated every repeat; figures are reported as their median and range.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..))]
    repeats: u32,
    /// cloudsim latency profile.
    #[arg(long, default_value = "bench/profiles/published.yaml")]
    profile: PathBuf,
    /// Multiplies every latency of the profile.
    #[arg(long, default_value_t = 1.0)]
    time_scale: f64,
    #[arg(long, default_value_t = 500)]
    burst_pods: usize,
    #[arg(long, default_value_t = 10)]
    nodes: usize,
    /// burst: the cloudsim bursts measured, pools off and on (`both`), or one of them (`off`, `on`: e.g. to
    /// measure a change to the pools alone, repeats and all, in a third of the time).
    #[arg(long, value_enum, default_value_t = BurstPools::Both)]
    burst_pools: BurstPools,
    /// burst: also run kuryr-rs with its former default, a fixed 20 QPS token bucket per service in front
    /// of the adaptive limit, pools off and on (variants `cloudsim/no-pools/qps-20`, `cloudsim/pools/qps-20`).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    burst_fixed_rate_variant: bool,
    /// burst: also run both implementations, pools off, against a Neutron that suffers beyond this many
    /// requests in flight (cloudsim's load model: latency × in-flight/workers, 1 % more 503s per request
    /// over, at most 50 %): variant `cloudsim/no-pools/neutron-overloaded`. 0 skips it.
    #[arg(long, default_value_t = 8)]
    burst_overload_workers: usize,
    /// Pods of the real-Neutron burst (0 = skip it).
    #[arg(long, default_value_t = 100)]
    neutron_burst_pods: usize,
    /// churn: pods created per second, for how long, and how long each lives.
    #[arg(long, default_value_t = 5.0)]
    churn_rate: f64,
    #[arg(long, default_value_t = 120)]
    churn_duration_s: u64,
    #[arg(long, default_value_t = 20)]
    churn_lifetime_s: u64,
    /// scale: pods and Services known to the controller.
    #[arg(long, default_value_t = 10_000)]
    scale_pods: usize,
    #[arg(long, default_value_t = 2_000)]
    scale_services: usize,
    /// scale: seconds the controller is left idle once everything is wired before its RSS is read again
    /// (`extra.idle_rss_mib`): apiserver connections opened for the build close after 90 s idle.
    #[arg(long, default_value_t = 120)]
    scale_idle_s: u64,
    /// services: Services created at once, endpoints each, then a rolling update of this many endpoints
    /// behind one Service, this many replaced per step (one Endpoints update per step).
    #[arg(long, default_value_t = 200)]
    services: usize,
    #[arg(long, default_value_t = 5)]
    services_endpoints: usize,
    #[arg(long, default_value_t = 50)]
    services_rolling_pods: usize,
    #[arg(long, default_value_t = 10)]
    services_rolling_step: usize,
    /// services: Octavia providers measured (ovn at --time-scale; amphora at --services-amphora-time-scale).
    #[arg(long, value_delimiter = ',', default_value = "ovn,amphora")]
    services_providers: Vec<String>,
    /// Time-scale of the amphora runs (its LB create is 90 s p50 in the profile).
    #[arg(long, default_value_t = 0.1)]
    services_amphora_time_scale: f64,
    /// datapath: seconds per iperf3 / sockperf run, runs per (path, message size), message sizes.
    #[arg(long, default_value_t = 3)]
    datapath_seconds: u64,
    #[arg(long, default_value_t = 2)]
    datapath_reps: usize,
    #[arg(long, value_delimiter = ',', default_value = "64,256,1024,4096,16384")]
    datapath_sizes: Vec<usize>,
    /// datapath: also between two VM nodes (qemu guests on trunk parents: nested-vlan vs VXLAN in the guests).
    #[arg(long)]
    datapath_vms: bool,
    /// Per-wait timeout in seconds.
    #[arg(long, default_value_t = 900)]
    timeout_s: u64,
    /// kuryr-controller flags of the pools variants (empty: the kuryr-rs pools variants are skipped). The
    /// default is upstream's pool settings in the bench (batch 10, min 5, no max); no-pools sessions pass
    /// `--ports-pool=false`.
    #[arg(
        long,
        allow_hyphen_values = true,
        default_value = "--ports-pool=true --ports-pool-batch 10 --ports-pool-min 5 --ports-pool-max 0"
    )]
    kuryr_pool_args: String,
    #[arg(long, env = "KURYR_BENCH_CONTROLLER_BIN")]
    kuryr_bin: PathBuf,
    #[arg(long, env = "KURYR_BENCH_UPSTREAM_VENV")]
    upstream_venv: PathBuf,
    /// Where result files go.
    #[arg(long, default_value = "bench/results")]
    out: PathBuf,
    /// The command line recorded in the result (bench/run passes its own).
    #[arg(long, default_value = "bench/run")]
    command: String,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    match Args::parse().cmd {
        Cmd::Run(a) => run(*a).await,
        Cmd::Report { file } => {
            let run: Run = serde_json::from_str(&std::fs::read_to_string(&file)?)?;
            print!("{}", report::side_by_side(&run));
            Ok(())
        }
        Cmd::Cleanup => {
            let client = Lab::load()?.kube_client().await?;
            kubeenv::cleanup_all(&client).await?;
            datapath::cleanup(&Lab::load()?).await
        }
        Cmd::Proxy { namespace } => {
            let client = Lab::load()?.kube_client().await?;
            let (addr, task) = kuryr_bench::proxy::spawn(client, &namespace).await?;
            println!("http://{addr}");
            task.await?;
            Ok(())
        }
        Cmd::Check { file } => {
            let run: Run = serde_json::from_str(&std::fs::read_to_string(&file)?)
                .with_context(|| format!("{} does not match the schema", file.display()))?;
            let problems = run.problems();
            anyhow::ensure!(problems.is_empty(), "{}: {problems:#?}", file.display());
            println!("{}: {} records, schema ok", file.display(), run.records.len());
            Ok(())
        }
    }
}

/// The variant suffix of sessions whose kuryr-controller runs with a fixed 20 QPS rate limit (its default
/// before the adaptive concurrency limit), for comparison.
const FIXED_RATE: &str = "qps-20";

/// The variant suffix of bursts against a Neutron with a load model (`--burst-overload-workers`).
const OVERLOADED: &str = "neutron-overloaded";

/// `base` with Neutron suffering beyond `workers` requests in flight.
fn overloaded(base: &Profile, workers: usize) -> Profile {
    let mut p = base.clone();
    p.load.neutron = Some(kuryr_cloudsim::load::LoadModel {
        workers,
        error_per_excess: 0.01,
        max_error_rate: 0.5,
    });
    p
}

/// cni_add: records from the newest `cni-add-*.json` that `cargo bench -p kuryr-cni --bench cni_add`
/// wrote into `dir` (bench/run runs it just before kuryr-bench), one per series.
fn cni_add_all(
    dir: &std::path::Path,
    started: chrono::DateTime<chrono::Utc>,
    impls: &[Implementation],
    out: &mut Sink<'_>,
) -> anyhow::Result<()> {
    for &i in impls.iter().filter(|i| **i != Implementation::Floor) {
        if i == Implementation::Upstream {
            out(Record::not_run(
                Scenario::CniAdd,
                i,
                "lab",
                "not run for upstream: its CNI (kuryr-cni + kuryr-daemon, Python) is not in the bench venv, which \
                 holds the controller only",
            ))?;
            continue;
        }
        let newest = std::fs::read_dir(dir)
            .ok()
            .into_iter()
            .flatten()
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with("cni-add-") && n.ends_with(".json"))
            })
            .max();
        let Some(file) = newest else {
            out(Record::not_run(
                Scenario::CniAdd,
                i,
                "lab",
                "not measured: no bench/results/cni-add-*.json (cargo bench -p kuryr-cni --bench cni_add, as root)",
            ))?;
            continue;
        };
        let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&file)?)?;
        for r in cni_add::records(&v, &file.display().to_string(), started) {
            out(r)?;
        }
    }
    Ok(())
}

mod cni_add {
    use kuryr_bench::record::{Implementation, Record, Scenario};
    use serde_json::Value;

    /// One record per series of a `cni-add-*.json` (milliseconds there, seconds here).
    pub fn records(v: &Value, file: &str, started: chrono::DateTime<chrono::Utc>) -> Vec<Record> {
        let when = v["when"].as_str().unwrap_or_default();
        let earlier = chrono::NaiveDateTime::parse_from_str(when, "%Y%m%dT%H%M%SZ")
            .map(|t| t.and_utc() < started - chrono::Duration::minutes(30))
            .unwrap_or(true);
        let ms = |s: &Value, k: &str| s[k].as_f64().map(|x| (x / 1000.0 * 1e6).round() / 1e6);
        v["results"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|s| {
                let series = s["series"].as_str().unwrap_or("?");
                let mut r = Record::new(Scenario::CniAdd, Implementation::KuryrRs, format!("lab/{series}"));
                r.p50_s = ms(s, "p50_ms");
                r.p99_s = ms(s, "p99_ms");
                r.max_s = ms(s, "max_ms");
                r.extra.insert("samples".into(), s["samples"].clone());
                r.extra.insert("p90_s".into(), ms(s, "p90_ms").into());
                r.extra.insert("mean_s".into(), ms(s, "mean_ms").into());
                r.extra.insert("source".into(), file.into());
                r.extra.insert("measured_at".into(), when.into());
                let mut note = "CNI ADD with the VIF already active (exec of kuryr-cni to its result), not \
                                time-to-wire; from cargo bench -p kuryr-cni --bench cni_add"
                    .to_string();
                if earlier {
                    note.push_str(&format!(" — measured at {when}, before this run (not re-run)"));
                }
                r.note = Some(note);
                r
            })
            .collect()
    }

    #[cfg(test)]
    mod tests {
        #[test]
        fn series_become_records_in_seconds_and_old_files_say_so() {
            let v = serde_json::json!({"when": "20261122T140058Z", "results": [
                {"series": "plugin+daemon+macvlan bind", "samples": 300, "p50_ms": 5.34, "p90_ms": 14.65,
                 "p99_ms": 31.94, "max_ms": 49.26, "mean_ms": 7.33}]});
            let later = chrono::DateTime::parse_from_rfc3339("2026-11-24T12:00:00Z")
                .expect("time")
                .to_utc();
            let rs = super::records(&v, "f.json", later);
            assert_eq!(rs.len(), 1);
            let r = &rs[0];
            assert_eq!(r.variant, "lab/plugin+daemon+macvlan bind");
            assert_eq!(
                (r.p50_s, r.p99_s, r.max_s),
                (Some(0.00534), Some(0.03194), Some(0.04926))
            );
            assert!(r.note.as_deref().is_some_and(|n| n.contains("before this run")));
            assert!(r.problems().is_empty(), "{:?}", r.problems());
            let same_day = chrono::DateTime::parse_from_rfc3339("2026-11-22T14:05:00Z")
                .expect("time")
                .to_utc();
            let rs = super::records(&v, "f.json", same_day);
            assert!(rs[0]
                .note
                .as_deref()
                .is_some_and(|n| !n.contains("before this run")));
        }
    }
}

fn implementations(a: &RunArgs) -> anyhow::Result<Vec<Implementation>> {
    a.impls
        .iter()
        .map(|s| match s.as_str() {
            "kuryr-rs" => Ok(Implementation::KuryrRs),
            "upstream" => Ok(Implementation::Upstream),
            "floor" => Ok(Implementation::Floor),
            other => anyhow::bail!("unknown implementation {other}"),
        })
        .collect()
}

fn save(run: &Run, out: &std::path::Path) -> anyhow::Result<PathBuf> {
    std::fs::create_dir_all(out)?;
    let file = out.join(format!("{}.json", run.run_id));
    let text = serde_json::to_string_pretty(run)? + "\n";
    std::fs::write(&file, &text)?;
    std::fs::write(out.join("latest.json"), &text)?;
    Ok(file)
}

async fn run(a: RunArgs) -> anyhow::Result<()> {
    let lab = Lab::load()?;
    let client = lab.kube_client().await?;
    kubeenv::ensure_crds(&client).await?;
    let mut profile = Profile::load(&a.profile).with_context(|| a.profile.display().to_string())?;
    profile.time_scale = a.time_scale;
    // Neutron's default 500-port quota is not what is measured: a 500-pod burst with pools, or 10k pods,
    // needs more (the scale scenario's zero-latency profile gets the same below).
    profile.neutron.quotas.insert("port".into(), -1);
    let now = chrono::Utc::now();
    let run_id = now.format("%Y%m%dT%H%M%SZ").to_string();
    let short_id = format!("{:06x}", fastrand::u32(..) & 0xff_ffff);
    let settings = Settings {
        work_dir: session::work_dir(&run_id)?,
        lab,
        client,
        run_id: short_id,
        profile,
        kuryr_bin: a.kuryr_bin.clone(),
        kuryr_pool_args: a.kuryr_pool_args.split_whitespace().map(str::to_string).collect(),
        upstream_venv: a.upstream_venv.clone(),
        nodes: a.nodes,
        sessions: Default::default(),
    };
    eprintln!("kuryr-bench: logs and configs in {}", settings.work_dir.display());
    let repo = std::env::current_dir()?;
    let mut result = Run {
        schema_version: SCHEMA_VERSION,
        run_id,
        started_at: now.to_rfc3339(),
        finished_at: None,
        command: a.command.clone(),
        machine: machine::machine(),
        commit: machine::commit(&repo),
        profile: a.profile.display().to_string(),
        time_scale: a.time_scale,
        repeats: a.repeats,
        records: Vec::new(),
    };
    let scenarios = if a.scenarios.is_empty() {
        vec![
            Scenario::Burst,
            Scenario::Churn,
            Scenario::Services,
            Scenario::Scale,
            Scenario::CniAdd,
            Scenario::Datapath,
        ]
    } else {
        a.scenarios.clone()
    };
    let impls = implementations(&a)?;
    let timeout = Duration::from_secs(a.timeout_s);
    let mut sink = |r: Record| -> anyhow::Result<()> {
        eprintln!(
            "{} {} {}: p50 {:?} p99 {:?} max {:?} writes/pod {:?} rss {:?} cpu {:?} {}",
            r.scenario.name(),
            r.implementation.name(),
            r.variant,
            r.p50_s,
            r.p99_s,
            r.max_s,
            r.neutron_writes_per_pod,
            r.rss_mib,
            r.cpu_s,
            r.note.as_deref().unwrap_or("")
        );
        // A repeated variant's record comes again after each repeat, replacing the earlier one.
        result.upsert(r);
        // Save as we go: a long run that dies keeps what it measured.
        save(&result, &a.out)?;
        Ok(())
    };
    for scenario in scenarios {
        match scenario {
            Scenario::Burst => burst_all(&settings, &a, &impls, timeout, &mut sink).await?,
            Scenario::Churn => churn_all(&settings, &a, &impls, timeout, &mut sink).await?,
            Scenario::Scale => scale_all(&settings, &a, &impls, timeout, &mut sink).await?,
            Scenario::Services => services_all(&settings, &a, &impls, timeout, &mut sink).await?,
            Scenario::Datapath => datapath_all(&settings, &a, &impls, &mut sink).await?,
            Scenario::CniAdd => cni_add_all(std::path::Path::new("bench/results"), now, &impls, &mut sink)?,
        }
    }
    result.finished_at = Some(chrono::Utc::now().to_rfc3339());
    let file = save(&result, &a.out)?;
    print!("{}", report::side_by_side(&result));
    eprintln!("kuryr-bench: wrote {} and latest.json", file.display());
    Ok(())
}

/// Which cloudsim bursts run: pools off, on, or both.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum BurstPools {
    Both,
    Off,
    On,
}

impl BurstPools {
    fn settings(self) -> &'static [bool] {
        match self {
            Self::Both => &[false, true],
            Self::Off => &[false],
            Self::On => &[true],
        }
    }
}

async fn burst_all(
    s: &Settings,
    a: &RunArgs,
    impls: &[Implementation],
    timeout: Duration,
    out: &mut Sink<'_>,
) -> anyhow::Result<()> {
    // (cloud, pools, pods, variant suffix, implementations measured)
    let mut groups = Vec::new();
    for &pools in a.burst_pools.settings() {
        groups.push((CloudKind::Sim, pools, a.burst_pods, "", impls.to_vec()));
    }
    // kuryr-rs once more per pools setting with the fixed 20 QPS limit it had by default before the
    // adaptive concurrency limit: what the adaptive limit changed, in the same run.
    if a.burst_fixed_rate_variant && impls.contains(&Implementation::KuryrRs) {
        for &pools in a.burst_pools.settings() {
            groups.push((
                CloudKind::Sim,
                pools,
                a.burst_pods,
                FIXED_RATE,
                vec![Implementation::KuryrRs],
            ));
        }
    }
    if a.burst_overload_workers > 0 {
        groups.push((CloudKind::Sim, false, a.burst_pods, OVERLOADED, impls.to_vec()));
    }
    if a.neutron_burst_pods > 0 {
        groups.push((
            CloudKind::Neutron,
            false,
            a.neutron_burst_pods,
            "",
            impls.to_vec(),
        ));
    }
    for (cloud, pools, pods, variant_suffix, mut who) in groups {
        let spec = |implementation| Spec {
            scenario: "burst",
            implementation,
            pools,
            cloud,
            upstream_handlers: "vif,kuryrport",
            kuryr_extra_args: if variant_suffix == FIXED_RATE {
                vec![
                    "--openstack-qps".into(),
                    "20".into(),
                    "--openstack-burst".into(),
                    "40".into(),
                ]
            } else {
                Vec::new()
            },
            profile: (variant_suffix == OVERLOADED).then(|| overloaded(&s.profile, a.burst_overload_workers)),
            variant_suffix,
        };
        if pools && who.contains(&Implementation::KuryrRs) && s.kuryr_pool_args.is_empty() {
            out(Record::not_run(
                Scenario::Burst,
                Implementation::KuryrRs,
                &spec(Implementation::KuryrRs).variant(),
                "skipped: --kuryr-pool-args is empty",
            ))?;
            who.retain(|i| *i != Implementation::KuryrRs);
        }
        repeats::measure(&who, a.repeats as usize, out, async |i| {
            let spec = spec(i);
            eprintln!("burst: {} {} ({pods} pods)", i.name(), spec.variant());
            burst::run(s, spec, &BurstOpts { pods, timeout }).await
        })
        .await?;
    }
    Ok(())
}

async fn churn_all(
    s: &Settings,
    a: &RunArgs,
    impls: &[Implementation],
    timeout: Duration,
    out: &mut Sink<'_>,
) -> anyhow::Result<()> {
    let who = controllers_only(impls);
    repeats::measure(&who, a.repeats as usize, out, async |implementation| {
        let spec = Spec {
            scenario: "churn",
            implementation,
            pools: true,
            cloud: CloudKind::Sim,
            upstream_handlers: "vif,kuryrport",
            kuryr_extra_args: Vec::new(),
            profile: None,
            variant_suffix: "",
        };
        if implementation == Implementation::KuryrRs && s.kuryr_pool_args.is_empty() {
            // Pool flags emptied on the command line: still measured, pools off, and says so.
            let spec = Spec { pools: false, ..spec };
            let mut r = churn::run(s, spec, &churn_opts(a, timeout)).await;
            r.note = Some(
                [
                    r.note.take(),
                    Some("--kuryr-pool-args is empty: churn measured with pools off".into()),
                ]
                .into_iter()
                .flatten()
                .collect::<Vec<_>>()
                .join("; "),
            );
            return r;
        }
        eprintln!("churn: {} {}", implementation.name(), spec.variant());
        churn::run(s, spec, &churn_opts(a, timeout)).await
    })
    .await
}

/// The implementations that are controllers of their own (the floor is measured in the burst and the
/// services scenarios only).
fn controllers_only(impls: &[Implementation]) -> Vec<Implementation> {
    impls
        .iter()
        .copied()
        .filter(|i| *i != Implementation::Floor)
        .collect()
}

fn churn_opts(a: &RunArgs, timeout: Duration) -> ChurnOpts {
    ChurnOpts {
        rate_per_s: a.churn_rate,
        duration: Duration::from_secs(a.churn_duration_s),
        lifetime: Duration::from_secs(a.churn_lifetime_s),
        timeout,
    }
}

async fn scale_all(
    s: &Settings,
    a: &RunArgs,
    impls: &[Implementation],
    timeout: Duration,
    out: &mut Sink<'_>,
) -> anyhow::Result<()> {
    let mut who = controllers_only(impls);
    if who.contains(&Implementation::Upstream) {
        out(Record::not_run(
            Scenario::Scale,
            Implementation::Upstream,
            "cloudsim/no-pools",
            "not run for upstream: the issue asks the scale figures of kuryr-rs; upstream's single Python process \
             would need ~10k pods wired through the proxy first (hours at its observed rate)",
        ))?;
        who.retain(|i| *i != Implementation::Upstream);
    }
    let services = if a.scale_services > 0 { a.scale_services } else { 0 };
    // Repeated like every other scenario (the RSS of one run moves by several MiB); each repeat's record is
    // kept whole in the combined one.
    repeats::measure(&who, a.repeats as usize, out, async |implementation| {
        let spec = Spec {
            scenario: "scale",
            implementation,
            pools: false,
            cloud: CloudKind::Sim,
            upstream_handlers: "vif,kuryrport",
            // Services on (Octavia ovn provider, the emulated service subnet found by the session), and
            // no client rate limit (the default; said again in case the default changes): the state is
            // built on a zero-latency cloud, the figures are the controller's footprint and resync, not
            // its pace against a cloud.
            kuryr_extra_args: {
                let mut v: Vec<String> = vec!["--openstack-qps".into(), "0".into()];
                if services > 0 {
                    v.extend(
                        ["--service-subnet", "{service_subnet}", "--lb-provider", "ovn"].map(String::from),
                    );
                }
                v
            },
            profile: Some({
                let mut p = Profile::zero();
                p.neutron.quotas.insert("port".into(), -1);
                p
            }),
            variant_suffix: "",
        };
        eprintln!("scale: {} pods, {services} Services", a.scale_pods);
        let o = ScaleOpts {
            pods: a.scale_pods,
            services,
            idle: Duration::from_secs(a.scale_idle_s),
            timeout,
        };
        scale::run(s, spec, &o).await
    })
    .await
}

async fn datapath_all(
    s: &Settings,
    a: &RunArgs,
    impls: &[Implementation],
    out: &mut Sink<'_>,
) -> anyhow::Result<()> {
    for implementation in controllers_only(impls) {
        if implementation == Implementation::Upstream {
            out(Record::not_run(
                Scenario::Datapath,
                implementation,
                "lab",
                "not run for upstream: the datapath compares the wiring (pods on the cloud network vs an overlay \
                 in the VMs), which upstream's nested drivers build the same way as kuryr-rs",
            ))?;
            continue;
        }
        let o = DatapathOpts {
            sizes: a.datapath_sizes.clone(),
            seconds: a.datapath_seconds,
            reps: a.datapath_reps,
            vms: a.datapath_vms,
        };
        eprintln!(
            "datapath: sizes {:?}, {} x {} s per figure",
            o.sizes, o.reps, o.seconds
        );
        for r in datapath::run(&s.lab, &o).await {
            out(r)?;
        }
    }
    Ok(())
}

async fn services_all(
    s: &Settings,
    a: &RunArgs,
    impls: &[Implementation],
    timeout: Duration,
    out: &mut Sink<'_>,
) -> anyhow::Result<()> {
    for provider in &a.services_providers {
        // The emulated cloud's default provider is the one measured (upstream names it in its kuryr.conf).
        let mut profile = s.profile.clone();
        profile.octavia.default_provider = provider.clone();
        if provider == "amphora" {
            profile.time_scale = a.services_amphora_time_scale;
        }
        // 200 VIP ports on top of the VMs': Neutron's default 500-port quota is not what is measured.
        profile.neutron.quotas.insert("port".into(), -1);
        let who = impls.to_vec();
        repeats::measure(&who, a.repeats as usize, out, async |implementation| {
            let spec = Spec {
                scenario: if provider == "ovn" {
                    "svc_ovn"
                } else {
                    "svc_amphora"
                },
                implementation,
                pools: false,
                cloud: CloudKind::Sim,
                upstream_handlers: "service,endpoints,kuryrloadbalancer",
                kuryr_extra_args: [
                    "--service-subnet",
                    "{service_subnet}",
                    "--lb-provider",
                    provider,
                    "--lb-default-provider",
                    provider,
                ]
                .map(String::from)
                .to_vec(),
                profile: Some(profile.clone()),
                variant_suffix: "",
            };
            eprintln!(
                "services: {} {provider} at time-scale {} ({} x {} endpoints, rolling {} by {})",
                implementation.name(),
                profile.time_scale,
                a.services,
                a.services_endpoints,
                a.services_rolling_pods,
                a.services_rolling_step
            );
            let o = ServicesOpts {
                services: a.services,
                endpoints: a.services_endpoints,
                rolling_pods: a.services_rolling_pods,
                rolling_step: a.services_rolling_step,
                provider: provider.clone(),
                timeout,
            };
            services::run(s, spec, &o).await
        })
        .await?;
    }
    Ok(())
}

#[cfg(test)]
mod args_tests {
    use clap::Parser as _;

    #[test]
    fn later_flags_replace_earlier_ones() {
        // bench/run --smoke passes its own flags first; the user's come after and win.
        let args = super::Args::try_parse_from([
            "kuryr-bench",
            "run",
            "burst",
            "--impls",
            "kuryr-rs",
            "--repeats",
            "1",
            "--kuryr-bin",
            "k",
            "--upstream-venv",
            "v",
            "--impls",
            "kuryr-rs,floor",
            "--repeats",
            "2",
        ])
        .expect("parses");
        let super::Cmd::Run(a) = args.cmd else {
            panic!("not run");
        };
        assert_eq!(a.impls, vec!["kuryr-rs".to_string(), "floor".to_string()]);
        assert_eq!(a.repeats, 2);
        assert!(super::Args::try_parse_from([
            "kuryr-bench",
            "run",
            "--repeats",
            "0",
            "--kuryr-bin",
            "k",
            "--upstream-venv",
            "v"
        ])
        .is_err());
    }
}
