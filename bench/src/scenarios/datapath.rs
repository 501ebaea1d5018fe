//! datapath: the seeds' headline claim in the lab. Pod-to-pod TCP throughput (iperf3) and TCP
//! request/response round trip (sockperf ping-pong) across message sizes (64 B … 16 KiB, the seeds' uperf
//! matrix), between two lab VMs, for pods wired Kuryr-style on the cloud network through OVN versus pods
//! behind a VXLAN overlay inside the VMs carried over the same OVN (the wiring is in [`net`]).
//!
//! Records (all `kuryr-rs`, the wiring kuryr-rs makes vs a flannel-style overlay, not an implementation):
//! per size `lab/ovn-direct/<n>B` and `lab/vxlan-overlay/<n>B` (RR round trip in `p50_s`/`p99_s`/`max_s`,
//! throughput and microseconds in `extra`), and one `lab/ratio` whose `extra.sizes` holds per size
//! `throughput_ratio` = direct ÷ overlay and `rr_latency_ratio` = overlay ÷ direct (both > 1: the cloud
//! network is ahead), read by bench/plot.py.

pub mod net;
pub mod switch;
pub mod tools;
pub mod vm;

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use anyhow::{ensure, Context as _};
use kuryr_openstack::{ClientConfig, Cloud, Owner};
use lab_tests::Lab;
use serde_json::{json, Value};

use crate::record::{Implementation, Record, Run, Scenario};
use net::{Ctx, Plumbing, Pod, LINK_PREFIX, NETNS_PREFIX, OWNER_CLUSTER};
use tools::{median, PingPong};

pub const DIRECT: &str = "lab/ovn-direct";
pub const OVERLAY: &str = "lab/vxlan-overlay";
pub const RATIO: &str = "lab/ratio";
/// The same between two VM nodes (qemu guests on trunk parents): nested-vlan subports vs VXLAN in the guests.
pub const VM_DIRECT: &str = "vm/nested-vlan";
pub const VM_OVERLAY: &str = "vm/vxlan-overlay";
pub const VM_RATIO: &str = "vm/ratio";
/// The seeds' uperf matrix: 64 B to 16 KiB.
pub const SIZES: [usize; 5] = [64, 256, 1024, 4096, 16384];

pub struct DatapathOpts {
    pub sizes: Vec<usize>,
    /// Seconds per iperf3 and per sockperf run (iperf3 adds one omitted warm-up second).
    pub seconds: u64,
    /// Runs per (path, size); the figures are their medians.
    pub reps: usize,
    /// Also between two VM nodes (`lab/lab vms up`, brought up with two nodes if fewer run).
    pub vms: bool,
}

/// What one (path, size) measured over its runs.
#[derive(Debug, Default, Clone)]
struct Samples {
    mbps: Vec<f64>,
    retransmits: Vec<u64>,
    rr: Vec<PingPong>,
    /// VM paths: this machine's CPU seconds in the guests per GB streamed, their idle rate taken out.
    cpu_s_per_gb: Vec<f64>,
    errors: Vec<String>,
}

impl Samples {
    fn merge(&mut self, other: Samples) {
        self.mbps.extend(other.mbps);
        self.retransmits.extend(other.retransmits);
        self.rr.extend(other.rr);
        self.cpu_s_per_gb.extend(other.cpu_s_per_gb);
        self.errors.extend(other.errors);
    }

    fn mbps(&self) -> Option<f64> {
        median(&self.mbps)
    }

    fn rr(&self, f: fn(&PingPong) -> f64) -> Option<f64> {
        median(&self.rr.iter().map(f).collect::<Vec<_>>())
    }

    fn rr_max(&self) -> Option<f64> {
        self.rr.iter().map(|p| p.max_us).reduce(f64::max)
    }
}

/// Runs the scenario; on failure one record saying why (everything built is removed either way).
pub async fn run(lab: &Lab, o: &DatapathOpts) -> Vec<Record> {
    let mut out = match measure(lab, o).await {
        Ok(records) => records,
        Err(e) => vec![Record::not_run(
            Scenario::Datapath,
            Implementation::KuryrRs,
            "lab",
            format!("failed: {e:#}"),
        )],
    };
    if o.vms {
        match measure_vms(lab, o).await {
            Ok(records) => out.extend(records),
            Err(e) => out.push(Record::not_run(
                Scenario::Datapath,
                Implementation::KuryrRs,
                "vm",
                format!("failed: {e:#}"),
            )),
        }
    }
    out
}

/// `kuryr-bench cleanup`: what an interrupted datapath run left (namespaces, devices, ports, pairs).
pub async fn cleanup(lab: &Lab) -> anyhow::Result<()> {
    let cloud = login(lab).await?;
    let n = net::cleanup_leftovers(lab, &cloud).await?;
    eprintln!("datapath: removed {n} leftovers");
    Ok(())
}

/// The lab cloud, as the lab's clouds.yaml names it.
async fn login(lab: &Lab) -> anyhow::Result<Cloud> {
    Cloud::connect(ClientConfig::clouds_yaml(
        Some(lab.clouds_yaml.clone()),
        lab.cloud.clone(),
    ))
    .await
    .context("login to the lab cloud")
}

fn preflight(lab: &Lab) -> anyhow::Result<()> {
    for tool in ["iperf3", "sockperf", "ethtool", "bridge"] {
        ensure!(
            net::sh("sh", &["-c", &format!("command -v {tool}")]).is_ok(),
            "{tool} is not installed (bench/run installs iperf3 and sockperf: apt-get install -y iperf3 sockperf)"
        );
    }
    ensure!(lab.vms.len() >= 2, "the lab has fewer than two VMs");
    Ok(())
}

async fn measure(lab: &Lab, o: &DatapathOpts) -> anyhow::Result<Vec<Record>> {
    let t0 = Instant::now();
    preflight(lab)?;
    let cloud = login(lab).await?;
    let left = net::cleanup_leftovers(lab, &cloud).await?;
    if left > 0 {
        eprintln!("datapath: removed {left} leftovers of an earlier run");
    }
    let run_id = format!("{:04x}", fastrand::u16(..));
    let owner = Owner::new(OWNER_CLUSTER, "datapath", &run_id);
    let ctx = Ctx {
        cloud: &cloud,
        lab,
        owner: &owner,
    };
    let loadavg = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let mut p = Plumbing::default();
    let result = build_and_measure(&ctx, &run_id, o, &mut p).await;
    let problems = net::teardown(Some(&cloud), &p).await;
    let (setup, samples) = result?;
    let more = [("loadavg_before", json!(loadavg.trim()))];
    Ok(assemble(
        o,
        &samples,
        [DIRECT, OVERLAY, RATIO],
        setup,
        &more,
        t0,
        &problems,
    ))
}

/// A path's records per size and the ratio record (`names`: direct, overlay, ratio) with the setup, `more`
/// keys, the wall time and any teardown problems in every note.
fn assemble(
    o: &DatapathOpts,
    samples: &[Vec<Samples>; 2],
    [direct, overlay, ratio_name]: [&str; 3],
    setup: Value,
    more: &[(&str, Value)],
    t0: Instant,
    problems: &[String],
) -> Vec<Record> {
    let mut records = records(o, samples, [direct, overlay]);
    let mut ratio = ratio_record(o, samples, ratio_name);
    ratio.extra.insert("setup".into(), setup);
    for (k, v) in more {
        ratio.extra.insert((*k).into(), v.clone());
    }
    ratio.extra.insert(
        "wall_s".into(),
        json!((t0.elapsed().as_secs_f64() * 10.0).round() / 10.0),
    );
    records.push(ratio);
    if !problems.is_empty() {
        for r in &mut records {
            let note = r.note.take().unwrap_or_default();
            r.note = Some(format!("{note}; teardown problems: {}", problems.join("; ")));
        }
    }
    records
}

/// The same matrix between two VM nodes: nested-vlan subports vs VXLAN inside the guests. Two VM nodes are
/// brought up when fewer run (and down again after).
async fn measure_vms(lab: &Lab, o: &DatapathOpts) -> anyhow::Result<Vec<Record>> {
    let t0 = Instant::now();
    preflight(lab)?;
    let mut started = false;
    if vm::nodes(lab).map_or(0, |n| n.len()) < 2 {
        eprintln!("datapath: bringing up two VM nodes (KURYR_LAB_VM_NODES=2 lab/lab vms up)");
        let st = tokio::process::Command::new(net::lab_script())
            .args(["vms", "up"])
            .env("KURYR_LAB_VM_NODES", "2")
            .status()
            .await?;
        ensure!(st.success(), "lab/lab vms up failed: {st}");
        started = true;
    }
    let result = measure_on_vms(lab, o, t0).await;
    if started {
        let _ = tokio::process::Command::new(net::lab_script())
            .args(["vms", "down"])
            .status()
            .await;
    }
    result
}

async fn measure_on_vms(lab: &Lab, o: &DatapathOpts, t0: Instant) -> anyhow::Result<Vec<Record>> {
    let nodes = vm::nodes(lab)?;
    ensure!(
        nodes.len() >= 2,
        "fewer than two VM nodes running: {:?}",
        nodes.iter().map(|n| &n.name).collect::<Vec<_>>()
    );
    let vms = [&nodes[0], &nodes[1]];
    let cloud = login(lab).await?;
    let run_id = format!("{:04x}", fastrand::u16(..));
    let owner = Owner::new(OWNER_CLUSTER, "datapath", &run_id);
    let ctx = Ctx {
        cloud: &cloud,
        lab,
        owner: &owner,
    };
    // The guests' own CPU while nothing is streamed (TCG: their idle costs this machine), taken out below.
    let read = || vm::qemu_cpu_seconds(lab, &vms);
    let idle_rate = match read() {
        Some(a) => {
            let w = Instant::now();
            tokio::time::sleep(Duration::from_secs(5)).await;
            read().map_or(0.0, |b| (b - a) / w.elapsed().as_secs_f64())
        }
        None => 0.0,
    };
    let mut p = vm::VmPlumbing::default();
    let result = async {
        let (paths, setup) = vm::build(&ctx, vms, &run_id, &mut p).await?;
        for [a, b] in &paths {
            wait_reachable(a, b, Duration::from_secs(60)).await?;
        }
        let mut servers = Vec::new();
        for [_, b] in &paths {
            servers.extend(tools::servers(b)?);
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
        let meter = CpuMeter {
            read: &read,
            idle_rate,
        };
        let refs = [[&paths[0][0], &paths[0][1]], [&paths[1][0], &paths[1][1]]];
        let samples = matrix(lab, refs, o, [VM_DIRECT, VM_OVERLAY], Some(&meter)).await;
        for s in servers {
            s.stop().await;
        }
        anyhow::Ok((setup, samples))
    }
    .await;
    let problems = vm::teardown(&ctx, &p).await;
    let (mut setup, samples) = result?;
    if let Value::Object(m) = &mut setup {
        m.insert("tools".into(), tool_versions());
        m.insert("seconds".into(), json!(o.seconds));
        m.insert("reps".into(), json!(o.reps));
        m.insert("guest_idle_cpu_rate".into(), json!(round2(idle_rate)));
        m.insert(
            "accel".into(),
            json!("tcg (software emulation: /dev/kvm here is PVM, docs/lab.md)"),
        );
    }
    Ok(assemble(
        o,
        &samples,
        [VM_DIRECT, VM_OVERLAY, VM_RATIO],
        setup,
        &[],
        t0,
        &problems,
    ))
}

/// Pings until the path answers (address pairs and flows take a moment), at most `limit`.
async fn wait_reachable(from: &Pod, to: &Pod, limit: Duration) -> anyhow::Result<()> {
    let deadline = Instant::now() + limit;
    loop {
        match net::reachable(from, to).await {
            Ok(()) => return Ok(()),
            Err(e) if Instant::now() > deadline => return Err(e),
            Err(_) => tokio::time::sleep(Duration::from_millis(500)).await,
        }
    }
}

/// Builds both paths, runs the matrix; the setup description and the samples by (path, size index).
async fn build_and_measure(
    ctx: &Ctx<'_>,
    run_id: &str,
    o: &DatapathOpts,
    p: &mut Plumbing,
) -> anyhow::Result<(Value, [Vec<Samples>; 2])> {
    let lab = ctx.lab;
    let (vm1, vm2) = (&lab.vms[0], &lab.vms[1]);
    let mtu = net::mtu(&vm1.netns, "eth0")?.min(net::mtu(&vm2.netns, "eth0")?);
    let vrrp = net::free_vrrp_ids(ctx.cloud, &lab.pod_network_id, 2).await?;
    let name = |kind: &str, i: usize| {
        (
            format!("{NETNS_PREFIX}{run_id}-{kind}{i}"),
            format!("{LINK_PREFIX}{run_id}m{i}"),
        )
    };
    let mut direct = Vec::new();
    for (i, vm) in [vm1, vm2].into_iter().enumerate() {
        let (ns, link) = name("d", i + 1);
        direct.push(net::direct_pod(ctx, vm, (&ns, &link), vrrp[i], p).await?);
    }
    let (o1, o2) = (name("o", 1).0, name("o", 2).0);
    let overlay = net::overlay([vm1, vm2], [&o1, &o2], &format!("{LINK_PREFIX}{run_id}"), mtu, p)?;
    let paths: [[&Pod; 2]; 2] = [[&direct[0], &direct[1]], [&overlay[0], &overlay[1]]];
    for [a, b] in paths {
        wait_reachable(a, b, Duration::from_secs(30)).await?;
    }
    let mut servers = Vec::new();
    for [_, b] in paths {
        servers.extend(tools::servers(b)?);
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let samples = matrix(lab, paths, o, [DIRECT, OVERLAY], None).await;
    for s in servers {
        s.stop().await;
    }
    let setup = json!({
        "vms": [vm1.name, vm2.name],
        "vm_mtu": mtu,
        "overlay_mtu": mtu - 50,
        "direct": {"pods": [direct[0].ip, direct[1].ip], "vrrp_ids": vrrp,
                   "wiring": "macvlan (bridge) of the VM's eth0 with a VRRP MAC; own Neutron port (default SG); pair on the VM port"},
        "overlay": {"pods": [overlay[0].ip, overlay[1].ip], "vxlan_id": net::VXLAN_ID, "vxlan_port": net::VXLAN_PORT,
                    "wiring": "veth to the VM namespace, routed per /24 through a VXLAN device between the VMs' eth0 IPs"},
        "tools": tool_versions(),
        "seconds": o.seconds,
        "reps": o.reps,
    });
    Ok((setup, samples))
}

fn tool_versions() -> Value {
    let first = |cmd: &str, arg: &str| {
        net::sh(cmd, &[arg]).ok().and_then(|s| {
            s.lines()
                .next()
                .map(|l| l.replace("sockperf: ", "").trim().to_owned())
        })
    };
    json!({"iperf3": first("iperf3", "--version"), "sockperf": first("sockperf", "--version")})
}

/// This machine's CPU seconds spent on the paths so far, and their idle rate (CPU seconds per second).
struct CpuMeter<'a> {
    read: &'a (dyn Fn() -> Option<f64> + Sync),
    idle_rate: f64,
}

/// Every (rep, size, path): iperf3 then sockperf, the paths' order alternating per rep; with `cpu`, the CPU
/// each stream cost per GB. A figure during which the lab's switch died is dropped and the run stops there
/// ([`switch`]).
async fn matrix(
    lab: &Lab,
    paths: [[&Pod; 2]; 2],
    o: &DatapathOpts,
    names: [&str; 2],
    cpu: Option<&CpuMeter<'_>>,
) -> [Vec<Samples>; 2] {
    let watch = switch::SwitchWatch::new(lab);
    let mut out = [
        vec![Samples::default(); o.sizes.len()],
        vec![Samples::default(); o.sizes.len()],
    ];
    for rep in 0..o.reps {
        for (si, &size) in o.sizes.iter().enumerate() {
            let order = if rep % 2 == 0 { [0, 1] } else { [1, 0] };
            for pi in order {
                let [a, b] = paths[pi];
                let s = &mut out[pi][si];
                let fig = figure(a, b, size, rep, o, cpu).await;
                if !watch.alive() {
                    let why = watch.last_abort();
                    eprintln!(
                        "datapath: ovs-vswitchd died during run {rep} {size} B {} ({why}): figure dropped, run stopped",
                        names[pi]
                    );
                    s.errors.push(format!(
                        "run {rep}: ovs-vswitchd died ({why}); figure dropped, the run stopped (lab/lab up starts the lab again)"
                    ));
                    return out;
                }
                s.merge(fig);
                eprintln!(
                    "datapath: run {rep} {size} B {}: {:?} Mbit/s, RR p50 {:?} us",
                    names[pi],
                    s.mbps.last().map(|v| v.round()),
                    s.rr.last().map(|p| p.p50_us)
                );
            }
        }
    }
    out
}

/// One (rep, size, path) figure: an iperf3 stream, then a sockperf ping-pong.
async fn figure(
    a: &Pod,
    b: &Pod,
    size: usize,
    rep: usize,
    o: &DatapathOpts,
    cpu: Option<&CpuMeter<'_>>,
) -> Samples {
    let mut s = Samples::default();
    let before = cpu.and_then(|c| (c.read)().map(|v| (v, Instant::now())));
    match tools::stream(a, &b.ip, size, o.seconds).await {
        Ok(st) => {
            s.mbps.push(st.mbps);
            s.retransmits.extend(st.retransmits);
            if let (Some(c), Some((t0, at))) = (cpu, before) {
                if let Some(t1) = (c.read)() {
                    // iperf3 streams secs + the omitted first second at about the measured rate.
                    let gb = st.mbps * (o.seconds + 1) as f64 / 8.0 / 1000.0;
                    let busy = t1 - t0 - c.idle_rate * at.elapsed().as_secs_f64();
                    if gb > 0.0 {
                        s.cpu_s_per_gb.push(busy.max(0.0) / gb);
                    }
                }
            }
        }
        Err(e) => s.errors.push(format!("iperf3 run {rep}: {e:#}")),
    }
    match tools::ping_pong(a, &b.ip, size, o.seconds).await {
        Ok(pp) => s.rr.push(pp),
        Err(e) => s.errors.push(format!("sockperf run {rep}: {e:#}")),
    }
    s
}

fn us_to_s(us: f64) -> f64 {
    (us * 1000.0).round() / 1e9
}

fn round2(v: f64) -> f64 {
    (v * 100.0).round() / 100.0
}

fn path_record(variant: &str, size: usize, s: &Samples, o: &DatapathOpts) -> Record {
    let mut r = Record::new(
        Scenario::Datapath,
        Implementation::KuryrRs,
        format!("{variant}/{size}B"),
    );
    r.pods = Some(2);
    r.p50_s = s.rr(|p| p.p50_us).map(us_to_s);
    r.p99_s = s.rr(|p| p.p99_us).map(us_to_s);
    r.max_s = s.rr_max().map(us_to_s);
    let extra = json!({
        "message_bytes": size,
        "throughput_mbps": s.mbps().map(round2),
        "rr_latency_us": {
            "p50": s.rr(|p| p.p50_us).map(round2),
            "p99": s.rr(|p| p.p99_us).map(round2),
            "max": s.rr_max().map(round2),
            "avg": s.rr(|p| p.avg_us).map(round2),
        },
        "runs": {
            "throughput_mbps": s.mbps.iter().copied().map(round2).collect::<Vec<_>>(),
            "retransmits": s.retransmits,
            "rr_p50_us": s.rr.iter().map(|p| p.p50_us).collect::<Vec<_>>(),
            "rr_observations": s.rr.iter().map(|p| p.observations).collect::<Vec<_>>(),
        },
        "errors": s.errors,
    });
    if let Value::Object(m) = extra {
        r.extra = m;
    }
    if !s.cpu_s_per_gb.is_empty() {
        r.extra.insert(
            "host_cpu_s_per_gb".into(),
            json!(median(&s.cpu_s_per_gb).map(round2)),
        );
    }
    r.note = Some(format!(
        "datapath: p50_s/p99_s/max_s are TCP request/response round trips (sockperf ping-pong --full-rtt, \
         {size}-byte messages; median of {} runs of {} s), not time-to-wire; throughput (iperf3, {size}-byte \
         writes, receiver side) in extra; controller and cloud-call figures do not apply",
        o.reps, o.seconds
    ));
    r
}

fn records(o: &DatapathOpts, samples: &[Vec<Samples>; 2], names: [&str; 2]) -> Vec<Record> {
    let mut out = Vec::new();
    for (si, &size) in o.sizes.iter().enumerate() {
        out.push(path_record(names[0], size, &samples[0][si], o));
        out.push(path_record(names[1], size, &samples[1][si], o));
    }
    out
}

fn ratio_record(o: &DatapathOpts, samples: &[Vec<Samples>; 2], name: &str) -> Record {
    let q = |a: Option<f64>, b: Option<f64>| crate::stats::ratio(a, b).map(|v| (v * 1000.0).round() / 1000.0);
    let sizes: Vec<Value> = o
        .sizes
        .iter()
        .enumerate()
        .map(|(si, &size)| {
            let (d, v) = (&samples[0][si], &samples[1][si]);
            json!({
                "bytes": size,
                "direct_mbps": d.mbps().map(round2),
                "overlay_mbps": v.mbps().map(round2),
                "throughput_ratio": q(d.mbps(), v.mbps()),
                "direct_rr_p50_us": d.rr(|p| p.p50_us).map(round2),
                "overlay_rr_p50_us": v.rr(|p| p.p50_us).map(round2),
                "rr_latency_ratio": q(v.rr(|p| p.p50_us), d.rr(|p| p.p50_us)),
                "direct_rr_p99_us": d.rr(|p| p.p99_us).map(round2),
                "overlay_rr_p99_us": v.rr(|p| p.p99_us).map(round2),
                "rr_p99_ratio": q(v.rr(|p| p.p99_us), d.rr(|p| p.p99_us)),
                "direct_cpu_s_per_gb": median(&d.cpu_s_per_gb).map(round2),
                "overlay_cpu_s_per_gb": median(&v.cpu_s_per_gb).map(round2),
                "cpu_per_byte_ratio": q(median(&v.cpu_s_per_gb), median(&d.cpu_s_per_gb)),
            })
        })
        .collect();
    let mut r = Record::new(Scenario::Datapath, Implementation::KuryrRs, name);
    r.extra.insert("sizes".into(), Value::Array(sizes));
    r.note = Some(
        "datapath ratios per message size: throughput_ratio = direct (OVN) ÷ overlay (VXLAN over OVN) Mbit/s; \
         rr_latency_ratio = overlay ÷ direct RR p50 (rr_p99_ratio: p99); cpu_per_byte_ratio (VM nodes: this \
         machine's CPU in the guests per GB streamed, idle taken out) = overlay ÷ direct; above 1 the cloud \
         network is ahead"
            .into(),
    );
    r
}

fn cell(v: Option<&Value>, digits: usize) -> String {
    match v.and_then(Value::as_f64) {
        Some(x) => format!("{x:.digits$}"),
        None => "—".into(),
    }
}

fn ratio_cell(v: Option<&Value>) -> String {
    match v.and_then(Value::as_f64) {
        Some(x) => format!("{x:.2}×"),
        None => "—".into(),
    }
}

/// Markdown table of a run's datapath ratio record `name` ([`RATIO`], [`VM_RATIO`]; empty when it has none).
pub fn table(run: &Run, name: &str) -> String {
    let Some(r) = run.find(Scenario::Datapath, Implementation::KuryrRs, name) else {
        return String::new();
    };
    let mut out = String::from(
        "| message | throughput OVN direct (Mbit/s) | VXLAN overlay (Mbit/s) | direct ÷ overlay | RR p50 direct (µs) | \
         RR p50 overlay (µs) | overlay ÷ direct | RR p99 direct (µs) | RR p99 overlay (µs) | CPU s/GB direct | \
         CPU s/GB overlay |\n\
         |---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for s in r
        .extra
        .get("sizes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let g = |k: &str| s.get(k);
        let _ = writeln!(
            out,
            "| {} B | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            g("bytes").and_then(Value::as_u64).unwrap_or(0),
            cell(g("direct_mbps"), 0),
            cell(g("overlay_mbps"), 0),
            ratio_cell(g("throughput_ratio")),
            cell(g("direct_rr_p50_us"), 0),
            cell(g("overlay_rr_p50_us"), 0),
            ratio_cell(g("rr_latency_ratio")),
            cell(g("direct_rr_p99_us"), 0),
            cell(g("overlay_rr_p99_us"), 0),
            cell(g("direct_cpu_s_per_gb"), 1),
            cell(g("overlay_cpu_s_per_gb"), 1),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn samples(mbps: &[f64], p50: &[f64]) -> Samples {
        Samples {
            mbps: mbps.to_vec(),
            retransmits: vec![0; mbps.len()],
            cpu_s_per_gb: Vec::new(),
            rr: p50
                .iter()
                .map(|&p| PingPong {
                    p50_us: p,
                    p99_us: p * 2.0,
                    max_us: p * 10.0,
                    avg_us: p * 1.1,
                    observations: 1000,
                })
                .collect(),
            errors: Vec::new(),
        }
    }

    #[test]
    fn records_ratios_and_table_from_samples() {
        let o = DatapathOpts {
            sizes: vec![64, 16384],
            seconds: 3,
            reps: 2,
            vms: false,
        };
        let direct = vec![
            samples(&[100.0, 300.0], &[40.0, 60.0]),
            samples(&[2000.0, 2000.0], &[80.0, 80.0]),
        ];
        let overlay = vec![samples(&[100.0, 100.0], &[100.0, 100.0]), Samples::default()];
        let all = [direct, overlay];
        let mut recs = records(&o, &all, [DIRECT, OVERLAY]);
        recs.push(ratio_record(&o, &all, RATIO));
        let run = Run::sample(recs);
        assert!(run.problems().is_empty(), "{:?}", run.problems());
        let d64 = run
            .find(Scenario::Datapath, Implementation::KuryrRs, "lab/ovn-direct/64B")
            .expect("direct 64 B");
        assert_eq!(d64.extra["throughput_mbps"], json!(200.0));
        assert_eq!(
            (d64.p50_s, d64.p99_s, d64.max_s),
            (Some(50e-6), Some(100e-6), Some(600e-6))
        );
        let empty = run
            .find(
                Scenario::Datapath,
                Implementation::KuryrRs,
                "lab/vxlan-overlay/16384B",
            )
            .expect("overlay 16 KiB");
        assert_eq!(empty.p50_s, None);
        assert!(empty.note.is_some());
        let ratio = run
            .find(Scenario::Datapath, Implementation::KuryrRs, RATIO)
            .expect("ratio record");
        let s64 = &ratio.extra["sizes"][0];
        assert_eq!(s64["throughput_ratio"], json!(2.0));
        assert_eq!(s64["rr_latency_ratio"], json!(2.0));
        assert_eq!(ratio.extra["sizes"][1]["throughput_ratio"], Value::Null);
        let t = table(&run, RATIO);
        assert!(
            t.contains("| 64 B | 200 | 100 | 2.00× | 50 | 100 | 2.00× | 100 | 200 | — | — |"),
            "{t}"
        );
        assert!(t.contains("| 16384 B | 2000 | — | — |"), "{t}");
    }
}
