//! burst: N pods created at once across the nodes; time-to-wire = pod create call -> KuryrPort wired
//! (every VIF active), Neutron writes per pod from cloudsim's call log, the API server's requests from
//! the pods' first create to the last one wired, controller peak RSS and the CPU-seconds it spent during
//! the burst, and the time of each phase of the session.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;

use crate::apimetrics;
use crate::calls::CallCounts;
use crate::kubeenv;
use crate::phases::Phases;
use crate::record::{Record, Scenario};
use crate::session::{Session, Settings, Spec};

pub struct BurstOpts {
    pub pods: usize,
    pub timeout: Duration,
}

pub async fn run(s: &Settings, spec: Spec, o: &BurstOpts) -> Record {
    let variant = spec.variant();
    let implementation = spec.implementation;
    match measure(s, spec, o).await {
        Ok(r) => r,
        Err(e) => Record::not_run(
            Scenario::Burst,
            implementation,
            &variant,
            format!("failed: {e:#}"),
        ),
    }
}

async fn measure(s: &Settings, spec: Spec, o: &BurstOpts) -> anyhow::Result<Record> {
    let mut phases = Phases::start();
    let mut session = Session::start(s, spec).await?;
    phases.mark("setup");
    let result = burst(s, &mut session, o, &mut phases).await;
    let drained = session.drain(o.timeout).await;
    phases.mark("drain");
    session.finish().await;
    phases.mark("teardown");
    let mut record = result?;
    record.phases_s = phases.seconds();
    if !drained {
        record.extra.insert("drained".into(), false.into());
    }
    Ok(record)
}

pub async fn burst(
    s: &Settings,
    session: &mut Session,
    o: &BurstOpts,
    phases: &mut Phases,
) -> anyhow::Result<Record> {
    session.warm_up(o.timeout).await?;
    phases.mark("warm_up");
    let seq0 = session.last_seq();
    let cpu0 = session.cpu_s();
    let wait0 = session.ratelimit_wait_s().await;
    let api0 = apimetrics::try_scrape(&s.client).await;
    let limits = match session.metrics_url() {
        Some(url) => Some(crate::limits::Sampler::start(url, "neutron").await),
        None => None,
    };
    phases.mark("scrape");
    let vms = session.cloud.vms.clone();
    let names: Vec<String> = (0..o.pods).map(|i| format!("burst-{i}")).collect();
    let created: Arc<Mutex<HashMap<String, Instant>>> = Arc::default();
    let start = Instant::now();
    let host_ip = session.host_ip();
    let pods = session.pods.clone();
    let errors: Vec<String> = futures::stream::iter(names.iter().enumerate())
        .map(|(i, name)| {
            let (pods, created, vm) = (pods.clone(), created.clone(), vms[i % vms.len()].clone());
            async move {
                let t = Instant::now();
                let r = kubeenv::create_pod(&pods, name, &vm, host_ip).await;
                if let Ok(mut m) = created.lock() {
                    m.insert(name.clone(), t);
                }
                r.err().map(|e| format!("{name}: {e:#}"))
            }
        })
        .buffer_unordered(32)
        .filter_map(|e| async move { e })
        .collect()
        .await;
    anyhow::ensure!(
        errors.is_empty(),
        "pod creates failed: {:?}",
        &errors[..errors.len().min(3)]
    );
    let created_in = start.elapsed().as_secs_f64();
    phases.mark("create");
    let all = session.wait_wired(&names, o.timeout).await?;
    phases.mark("wait_wired");
    let neutron_client = match limits {
        Some(l) => Some(l.finish().await),
        None => None,
    };
    // Right away: what the controller does after the last pod is wired is not the burst's.
    let api = match (api0, apimetrics::try_scrape(&s.client).await) {
        (Some(a0), Some(a1)) => Some(apimetrics::delta(&a0, &a1)),
        _ => None,
    };
    phases.mark("scrape");
    let created = created.lock().map(|m| m.clone()).unwrap_or_default();
    let (samples, missing, pod_phases) = {
        let log = crate::lock(&session.wire);
        let mut samples = Vec::new();
        let mut missing = 0usize;
        for n in &names {
            match (log.wired.get(n), created.get(n)) {
                (Some(w), Some(c)) => samples.push(w.saturating_duration_since(*c).as_secs_f64()),
                _ => missing += 1,
            }
        }
        (samples, missing, pod_phases(&names, &created, &log))
    };
    let mut r = Record::new(
        Scenario::Burst,
        session.spec.implementation,
        session.spec.variant(),
    );
    r.pods = Some(o.pods as u64);
    r.set_latencies(samples);
    r.extra.insert("nodes".into(), vms.len().into());
    r.extra.insert("pod_phases_s".into(), pod_phases);
    r.extra
        .insert("warm_up_released".into(), session.warm_released.into());
    r.extra
        .insert("create_calls_s".into(), crate::stats::round_ms(created_in).into());
    r.extra.insert(
        "wall_s".into(),
        crate::stats::round_ms(start.elapsed().as_secs_f64()).into(),
    );
    if !all {
        r.note = Some(format!(
            "{missing} of {} pods not wired within {:?}: p99/max cover wired pods only",
            o.pods, o.timeout
        ));
        r.extra.insert("not_wired".into(), missing.into());
    }
    if let (Some(w0), Some(w1)) = (wait0, session.ratelimit_wait_s().await) {
        // Summed over calls: many calls waiting at once count each their own wait.
        r.extra.insert(
            "client_ratelimit_wait_s".into(),
            crate::stats::round_ms(w1 - w0).into(),
        );
    }
    if let Some(c) = session.calls_since(seq0) {
        r.neutron_writes_per_pod = CallCounts::per(c.neutron_writes, o.pods as u64);
        r.extra.insert("calls".into(), c.to_json());
    }
    session.record_footprint(&mut r, cpu0);
    if let Some(n) = neutron_client {
        r.extra.insert("neutron_client".into(), n);
    }
    r.api_requests = api;
    if let Some(f) = &session.floor {
        use std::sync::atomic::Ordering::Relaxed;
        r.extra.insert(
            "floor_ports_created".into(),
            f.counts.ports_created.load(Relaxed).into(),
        );
        r.extra
            .insert("floor_errors".into(), f.counts.errors.load(Relaxed).into());
    }
    Ok(r)
}

/// Where a pod's time-to-wire went, over the wired pods: from its create call until its KuryrPort was first
/// seen (`to_kuryrport`: the front end, the pod's own write included), and from then until it was wired
/// (`kuryrport_to_wired`: the port); p50, p99 and max of each (seconds).
fn pod_phases(
    names: &[String],
    created: &HashMap<String, Instant>,
    log: &kubeenv::WireLog,
) -> serde_json::Value {
    let (mut front, mut port) = (Vec::new(), Vec::new());
    for n in names {
        if let (Some(c), Some(s), Some(w)) = (created.get(n), log.seen.get(n), log.wired.get(n)) {
            front.push(s.saturating_duration_since(*c).as_secs_f64());
            port.push(w.saturating_duration_since(*s).as_secs_f64());
        }
    }
    let summary = |v: &[f64]| {
        crate::stats::Summary::of(v).map_or(
            serde_json::Value::Null,
            |s| serde_json::json!({"p50": s.p50, "p99": s.p99, "max": s.max}),
        )
    };
    serde_json::json!({"to_kuryrport": summary(&front), "kuryrport_to_wired": summary(&port)})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pods_wait_splits_at_its_kuryrport() {
        let t0 = Instant::now();
        let at = |ms| t0 + Duration::from_millis(ms);
        let names: Vec<String> = ["a", "b", "c"].map(String::from).to_vec();
        let created = HashMap::from([("a".into(), at(0)), ("b".into(), at(100)), ("c".into(), at(0))]);
        let log = kubeenv::WireLog {
            seen: HashMap::from([("a".into(), at(300)), ("b".into(), at(200)), ("c".into(), at(50))]),
            // c never wired: in neither phase.
            wired: HashMap::from([("a".into(), at(1300)), ("b".into(), at(2200))]),
            gone: HashMap::new(),
        };
        let p = pod_phases(&names, &created, &log);
        assert_eq!(p["to_kuryrport"]["p50"], 0.1);
        assert_eq!(p["to_kuryrport"]["max"], 0.3);
        assert_eq!(p["kuryrport_to_wired"]["p50"], 1.0);
        assert_eq!(p["kuryrport_to_wired"]["p99"], 2.0);
    }
}
