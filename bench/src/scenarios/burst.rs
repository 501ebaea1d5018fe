//! burst: N pods created at once across the nodes; time-to-wire = pod create call -> KuryrPort wired
//! (every VIF active), Neutron writes per pod from cloudsim's call log, controller peak RSS and the
//! CPU-seconds it spent during the burst.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;

use crate::calls::CallCounts;
use crate::kubeenv;
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
    let mut session = Session::start(s, spec).await?;
    let result = burst(&mut session, o).await;
    let drained = session.drain(o.timeout).await;
    session.finish().await;
    let mut record = result?;
    if !drained {
        record.extra.insert("drained".into(), false.into());
    }
    Ok(record)
}

pub async fn burst(session: &mut Session, o: &BurstOpts) -> anyhow::Result<Record> {
    session.warm_up(o.timeout).await?;
    let seq0 = session.last_seq();
    let cpu0 = session
        .controller
        .as_ref()
        .and_then(|c| c.footprint())
        .map(|f| f.cpu_s);
    let wait0 = session.ratelimit_wait_s().await;
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
    let all = session.wait_wired(&names, o.timeout).await?;
    let created = created.lock().map(|m| m.clone()).unwrap_or_default();
    let (samples, missing) = {
        let log = kubeenv::lock(&session.wire);
        let mut samples = Vec::new();
        let mut missing = 0usize;
        for n in &names {
            match (log.wired.get(n), created.get(n)) {
                (Some(w), Some(c)) => samples.push(w.saturating_duration_since(*c).as_secs_f64()),
                _ => missing += 1,
            }
        }
        (samples, missing)
    };
    let mut r = Record::new(
        Scenario::Burst,
        session.spec.implementation,
        session.spec.variant(),
    );
    r.pods = Some(o.pods as u64);
    r.set_latencies(samples);
    r.extra.insert("nodes".into(), vms.len().into());
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
    if let Some(f) = session.controller.as_ref().and_then(|c| c.footprint()) {
        r.rss_mib = Some(crate::stats::round_ms(f.vm_hwm_mib));
        r.cpu_s = cpu0.map(|c0| crate::stats::round_ms(f.cpu_s - c0));
    }
    Ok(r)
}
