//! scale: N pods (and M Services with 5 endpoints each, when the Services controller is on) known to
//! kuryr-rs; its RSS and CPU-seconds once all are wired, then the resync after a restart: time from the
//! new process's start until it has reconciled every KuryrPort once (its `kuryr_reconciles_total`).
//! The state is built on a zero-latency cloudsim (the figures are about the controller, not the cloud).

use std::time::{Duration, Instant};

use futures::StreamExt;
use kuryr_api::k8s_openapi::api::core::v1::{
    EndpointAddress, EndpointPort, EndpointSubset, Endpoints, Service, ServicePort, ServiceSpec,
};
use kuryr_api::{Api, ObjectMeta, PostParams};

use crate::controllers::counter_sum;
use crate::kubeenv;
use crate::record::{Record, Scenario};
use crate::session::{Session, Settings, Spec};

pub struct ScaleOpts {
    pub pods: usize,
    pub services: usize,
    /// Idle time after the build before the RSS is read again.
    pub idle: Duration,
    pub timeout: Duration,
}

/// Measures, tears the session down and returns the record. The teardown cannot take the figures with it:
/// it only logs what it fails to remove, and is bounded (`kubeenv::TEARDOWN_LIMIT`).
pub async fn run(s: &Settings, spec: Spec, o: &ScaleOpts) -> Record {
    let variant = spec.variant();
    let implementation = spec.implementation;
    let not_run = |e: anyhow::Error| {
        Record::not_run(
            Scenario::Scale,
            implementation,
            &variant,
            format!("failed: {e:#}"),
        )
    };
    let mut session = match Session::start(s, spec).await {
        Ok(session) => session,
        Err(e) => return not_run(e),
    };
    let record = scale(s, &mut session, o).await.unwrap_or_else(not_run);
    // No drain: releasing 10k ports one pod at a time is not measured here and would take minutes; the
    // emulated cloud goes with the session and finish() strips the finalizers the stopped controller
    // leaves (bounded by kubeenv::TEARDOWN_LIMIT).
    let t = Instant::now();
    session.finish().await;
    eprintln!("scale: teardown took {:.1} s", t.elapsed().as_secs_f64());
    record
}

fn service(name: &str) -> Service {
    Service {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..ObjectMeta::default()
        },
        spec: Some(ServiceSpec {
            ports: Some(vec![ServicePort {
                port: 80,
                target_port: Some(
                    kuryr_api::k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(8080),
                ),
                protocol: Some("TCP".into()),
                ..ServicePort::default()
            }]),
            ..ServiceSpec::default()
        }),
        ..Service::default()
    }
}

/// Endpoints of `name`: `ips` on port 8080 (no selector: the harness is the endpoints controller).
pub fn endpoints(name: &str, ips: &[String]) -> Endpoints {
    Endpoints {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..ObjectMeta::default()
        },
        subsets: Some(vec![EndpointSubset {
            addresses: Some(
                ips.iter()
                    .map(|ip| EndpointAddress {
                        ip: ip.clone(),
                        ..EndpointAddress::default()
                    })
                    .collect(),
            ),
            ports: Some(vec![EndpointPort {
                port: 8080,
                protocol: Some("TCP".into()),
                ..EndpointPort::default()
            }]),
            ..EndpointSubset::default()
        }]),
    }
}

/// A member address inside the emulated pod subnet (198.18.96.0 upwards), by index.
pub fn member_ip(i: usize) -> String {
    format!("198.18.{}.{}", 96 + (i / 250) % 32, 1 + i % 250)
}

async fn scale(s: &Settings, session: &mut Session, o: &ScaleOpts) -> anyhow::Result<Record> {
    let vms = session.cloud.vms.clone();
    let names: Vec<String> = (0..o.pods).map(|i| format!("scale-{i}")).collect();
    let pods = session.pods.clone();
    let start = Instant::now();
    let errors: Vec<String> = futures::stream::iter(names.iter().enumerate())
        .map(|(i, name)| {
            let (pods, vm) = (pods.clone(), vms[i % vms.len()].clone());
            async move {
                kubeenv::create_pod(&pods, name, &vm, false)
                    .await
                    .err()
                    .map(|e| format!("{name}: {e:#}"))
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
    let wired = session.wait_wired(&names, o.timeout).await?;
    let wired_in = start.elapsed().as_secs_f64();
    let client = s.client.clone();
    let services_on = o.services > 0;
    if services_on {
        let svcs: Api<Service> = Api::namespaced(client.clone(), &session.ns);
        let eps: Api<Endpoints> = Api::namespaced(client.clone(), &session.ns);
        let errors: Vec<String> = futures::stream::iter(0..o.services)
            .map(|i| {
                let (svcs, eps) = (svcs.clone(), eps.clone());
                async move {
                    let name = format!("svc-{i}");
                    let ips: Vec<String> = (0..5).map(|k| member_ip(i * 5 + k)).collect();
                    let r = async {
                        svcs.create(&PostParams::default(), &service(&name)).await?;
                        eps.create(&PostParams::default(), &endpoints(&name, &ips))
                            .await?;
                        anyhow::Ok(())
                    }
                    .await;
                    r.err().map(|e| format!("{name}: {e:#}"))
                }
            })
            .buffer_unordered(32)
            .filter_map(|e| async move { e })
            .collect()
            .await;
        anyhow::ensure!(
            errors.is_empty(),
            "service creates failed: {:?}",
            &errors[..errors.len().min(3)]
        );
        // Wait (bounded) until cloudsim has seen a load balancer create per Service.
        let deadline = Instant::now() + o.timeout;
        while session.calls_since(0).map_or(0, |c| {
            c.by_op.get("octavia.loadbalancers.create").copied().unwrap_or(0)
        }) < o.services as u64
            && Instant::now() < deadline
        {
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }
    // Let the controller settle, then read its footprint.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let fp = session.controller.as_ref().and_then(|c| c.footprint());
    let mut r = Record::new(
        Scenario::Scale,
        session.spec.implementation,
        session.spec.variant(),
    );
    r.pods = Some(o.pods as u64);
    r.extra.insert("services".into(), o.services.into());
    r.extra.insert("all_wired".into(), wired.into());
    r.extra
        .insert("build_s".into(), crate::stats::round_ms(wired_in).into());
    if let Some(f) = fp {
        // rss_mib is VmRSS here (resident 5 s after the build); the peak is VmHWM, under its own name
        // (`peak_rss_mib` in schema-1 files).
        r.rss_mib = Some(crate::stats::round_ms(f.vm_rss_mib));
        r.cpu_s = Some(crate::stats::round_ms(f.cpu_s));
        r.extra
            .insert("vm_hwm_mib".into(), crate::stats::round_ms(f.vm_hwm_mib).into());
        if let Some(anon) = f.anon_mib {
            r.extra
                .insert("rss_anon_mib".into(), crate::stats::round_ms(anon).into());
        }
    }
    // Idle, then again: what an operator sees once the build is over (the apiserver connections the
    // build opened are closed by then; whether the memory they held is given back is what this shows).
    if !o.idle.is_zero() {
        tokio::time::sleep(o.idle).await;
        if let Some(f) = session.controller.as_ref().and_then(|c| c.footprint()) {
            r.extra
                .insert("idle_rss_mib".into(), crate::stats::round_ms(f.vm_rss_mib).into());
            if let Some(anon) = f.anon_mib {
                r.extra
                    .insert("idle_rss_anon_mib".into(), crate::stats::round_ms(anon).into());
            }
        }
        r.extra.insert("idle_s".into(), o.idle.as_secs().into());
    }
    // Restart and time the resync.
    let t0 = session.restart(s).await?;
    let url = session
        .controller
        .as_ref()
        .and_then(|c| c.metrics_url.clone())
        .ok_or_else(|| anyhow::anyhow!("no metrics address"))?;
    let http = reqwest::Client::new();
    let deadline = Instant::now() + o.timeout;
    let mut resync = None;
    while Instant::now() < deadline {
        if let Ok(resp) = http.get(format!("{url}/metrics")).send().await {
            let text = resp.text().await.unwrap_or_default();
            if counter_sum(&text, "kuryr_reconciles_total", "controller=\"kuryrport\"") >= o.pods as f64 {
                resync = Some(t0.elapsed().as_secs_f64());
                break;
            }
        }
        if let Some(c) = session.controller.as_mut() {
            c.ensure_running()?;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    r.resync_s = resync.map(crate::stats::round_ms);
    if let Some(f) = session.controller.as_ref().and_then(|c| c.footprint()) {
        r.extra.insert(
            "after_resync_rss_mib".into(),
            crate::stats::round_ms(f.vm_rss_mib).into(),
        );
        // The restarted process's high-water mark: its initial lists are the largest transient.
        r.extra.insert(
            "after_resync_vm_hwm_mib".into(),
            crate::stats::round_ms(f.vm_hwm_mib).into(),
        );
        r.extra
            .insert("resync_cpu_s".into(), crate::stats::round_ms(f.cpu_s).into());
    }
    if resync.is_none() {
        r.note = Some(format!(
            "resync did not reach {} KuryrPort reconciles within {:?}",
            o.pods, o.timeout
        ));
    }
    Ok(r)
}

#[cfg(test)]
mod tests {
    #[test]
    fn member_ips_stay_in_the_emulated_pod_subnet() {
        assert_eq!(super::member_ip(0), "198.18.96.1");
        assert_eq!(super::member_ip(9999), "198.18.103.250");
        let e = super::endpoints("s", &["198.18.96.1".into()]);
        assert_eq!(e.subsets.as_ref().map(|s| s.len()), Some(1));
    }
}
