//! churn: steady pod create/delete with pools warm. Pod i is created at i/rate s and deleted `lifetime`
//! later; time-to-wire per pod and Neutron writes per pod amortized over the whole window (creates,
//! deletes and pool refills alike).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::apimetrics;
use crate::calls::CallCounts;
use crate::kubeenv;
use crate::phases::Phases;
use crate::record::{Record, Scenario};
use crate::session::{Session, Settings, Spec};

pub struct ChurnOpts {
    pub rate_per_s: f64,
    pub duration: Duration,
    pub lifetime: Duration,
    pub timeout: Duration,
}

pub async fn run(s: &Settings, spec: Spec, o: &ChurnOpts) -> Record {
    let variant = spec.variant();
    let implementation = spec.implementation;
    match measure(s, spec, o).await {
        Ok(r) => r,
        Err(e) => Record::not_run(
            Scenario::Churn,
            implementation,
            &variant,
            format!("failed: {e:#}"),
        ),
    }
}

async fn measure(s: &Settings, spec: Spec, o: &ChurnOpts) -> anyhow::Result<Record> {
    let mut phases = Phases::start();
    let mut session = Session::start(s, spec).await?;
    phases.mark("setup");
    let result = churn(s, &mut session, o, &mut phases).await;
    session.drain(o.timeout).await;
    phases.mark("drain");
    session.finish().await;
    phases.mark("teardown");
    let mut r = result?;
    r.phases_s = phases.seconds();
    Ok(r)
}

async fn churn(
    s: &Settings,
    session: &mut Session,
    o: &ChurnOpts,
    phases: &mut Phases,
) -> anyhow::Result<Record> {
    session.warm_up(o.timeout).await?;
    phases.mark("warm_up");
    let seq0 = session.last_seq();
    let cpu0 = session.cpu_s();
    let api0 = apimetrics::try_scrape(&s.client).await;
    let wait0 = session.ratelimit_wait_s().await;
    let vms = session.cloud.vms.clone();
    let n = (o.rate_per_s * o.duration.as_secs_f64()).round() as usize;
    let names: Vec<String> = (0..n).map(|i| format!("churn-{i}")).collect();
    let created: Arc<Mutex<HashMap<String, Instant>>> = Arc::default();
    let start = Instant::now();
    let host_ip = session.host_ip();
    let mut tasks = Vec::new();
    for (i, name) in names.iter().enumerate() {
        let at = start + Duration::from_secs_f64(i as f64 / o.rate_per_s);
        tokio::time::sleep_until(at.into()).await;
        let (pods, created, vm, name) = (
            session.pods.clone(),
            created.clone(),
            vms[i % vms.len()].clone(),
            name.clone(),
        );
        let lifetime = o.lifetime;
        tasks.push(tokio::spawn(async move {
            let t = Instant::now();
            kubeenv::create_pod(&pods, &name, &vm, host_ip).await?;
            if let Ok(mut m) = created.lock() {
                m.insert(name.clone(), t);
            }
            tokio::time::sleep(lifetime).await;
            kubeenv::delete_pods(&pods, std::slice::from_ref(&name)).await;
            anyhow::Ok(())
        }));
    }
    for t in tasks {
        t.await??;
    }
    // Every pod released: the writes of its deletion belong to the window too.
    let released = kubeenv::wait_until(&session.wire, o.timeout, |l| {
        names.iter().all(|n| l.gone.contains_key(n))
    })
    .await;
    phases.mark("churn");
    let api = match (api0, apimetrics::try_scrape(&s.client).await) {
        (Some(a0), Some(a1)) => Some(apimetrics::delta(&a0, &a1)),
        _ => None,
    };
    let created = created.lock().map(|m| m.clone()).unwrap_or_default();
    let (samples, missing) = {
        let log = crate::lock(&session.wire);
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
        Scenario::Churn,
        session.spec.implementation,
        session.spec.variant(),
    );
    r.pods = Some(n as u64);
    r.set_latencies(samples);
    r.extra.insert("rate_per_s".into(), o.rate_per_s.into());
    r.extra
        .insert("duration_s".into(), o.duration.as_secs_f64().into());
    r.extra
        .insert("lifetime_s".into(), o.lifetime.as_secs_f64().into());
    r.extra.insert("all_released".into(), released.into());
    if missing > 0 {
        r.note = Some(format!(
            "{missing} of {n} pods never seen wired (deleted before wiring or failed)"
        ));
    }
    if let (Some(w0), Some(w1)) = (wait0, session.ratelimit_wait_s().await) {
        r.extra.insert(
            "client_ratelimit_wait_s".into(),
            crate::stats::round_ms(w1 - w0).into(),
        );
    }
    if let Some(c) = session.calls_since(seq0) {
        r.neutron_writes_per_pod = CallCounts::per(c.neutron_writes, n as u64);
        r.extra.insert("calls".into(), c.to_json());
    }
    session.record_footprint(&mut r, cpu0);
    r.api_requests = api;
    Ok(r)
}
