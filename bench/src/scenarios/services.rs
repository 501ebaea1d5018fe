//! services: N Services × E endpoints created at once, then a rolling update of a P-pod Deployment
//! behind one Service (S endpoints replaced per step, one Endpoints and one EndpointSlice update per step).
//!
//! The Services have no selector and the harness writes their backends (the lab has no kubelet, so no pod
//! would ever be Ready for the endpoint controllers), just before each Service, both ways at once: the
//! Endpoints upstream reads and the EndpointSlice kuryr-rs reads (the Endpoints labelled skip-mirror).
//! Before 2026-11-29 (run `20261129T172552Z` and earlier) only the Endpoints were written, and kuryr-rs
//! read the slices kube-controller-manager's mirroring controller made of them at its own pace: 137 of
//! 200 Services were built before their slice came, then got their members in a second write. The
//! floor reads the Endpoints. The endpoint addresses are
//! synthetic, on the emulated pod subnet (no pod exists: the Services path is measured without the pod
//! path).
//!
//! A Service is **ready** when both (a) the emulated cloud has its load balancer (named `ns/name` by both
//! controllers) with the whole tree ACTIVE and exactly the expected members, read in place, without an
//! API call, and (b) its controller says so in the KuryrLoadBalancer status: the same members, and
//! (kuryr-rs) condition Ready=True or (upstream, which has no conditions) a load balancer recorded.
//! Octavia writes come from cloudsim's call log: the create phase's window divided by the Services, the
//! rolling update's window divided by its steps.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use kube::runtime::watcher;
use kuryr_api::k8s_openapi::api::core::v1::{
    EndpointAddress, EndpointPort, EndpointSubset, Endpoints, Service, ServicePort, ServiceSpec,
};
use kuryr_api::k8s_openapi::api::discovery::v1::{
    Endpoint as SliceEndpoint, EndpointConditions, EndpointPort as SlicePort, EndpointSlice,
};
use kuryr_api::k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kuryr_api::{Api, ObjectMeta, Patch, PatchParams, PostParams, ResourceExt};
use kuryr_cloudsim::world::World;
use serde_json::{json, Value};

use crate::calls::CallCounts;
use crate::kubeenv;
use crate::lock;
use crate::record::{Implementation, Record, Scenario};
use crate::services_floor::ServicesFloor;
use crate::session::{Session, Settings, Spec};
use crate::stats::{round_ms, Summary};

/// Service port and the endpoints' target port (named, as a Deployment's container port would be).
const PORT: i32 = 80;
const TARGET_PORT: i32 = 8080;
const PORT_NAME: &str = "http";

pub struct ServicesOpts {
    pub services: usize,
    pub endpoints: usize,
    pub rolling_pods: usize,
    pub rolling_step: usize,
    /// Octavia provider measured (`ovn`, `amphora`).
    pub provider: String,
    pub timeout: Duration,
}

/// The record's variant: `cloudsim/<provider>`.
pub fn variant(provider: &str) -> String {
    format!("cloudsim/{provider}")
}

pub async fn run(s: &Settings, spec: Spec, o: &ServicesOpts) -> Record {
    let implementation = spec.implementation;
    match measure(s, spec, o).await {
        Ok(r) => r,
        Err(e) => Record::not_run(
            Scenario::Services,
            implementation,
            &variant(&o.provider),
            format!("failed: {e:#}"),
        ),
    }
}

async fn measure(s: &Settings, spec: Spec, o: &ServicesOpts) -> anyhow::Result<Record> {
    let mut phases = crate::phases::Phases::start();
    let mut session = Session::start(s, spec).await?;
    phases.mark("setup");
    let result = services(s, &mut session, o).await;
    phases.mark("measure");
    session.finish().await;
    phases.mark("teardown");
    let mut r = result?;
    r.phases_s = phases.seconds();
    Ok(r)
}

/// A selector-less ClusterIP Service with one named TCP port.
pub fn service(name: &str) -> Service {
    Service {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..ObjectMeta::default()
        },
        spec: Some(ServiceSpec {
            ports: Some(vec![ServicePort {
                name: Some(PORT_NAME.into()),
                port: PORT,
                target_port: Some(IntOrString::Int(TARGET_PORT)),
                protocol: Some("TCP".into()),
                ..ServicePort::default()
            }]),
            ..ServiceSpec::default()
        }),
        ..Service::default()
    }
}

/// The Endpoints of `name`: `ips` on the named target port.
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
                name: Some(PORT_NAME.into()),
                port: TARGET_PORT,
                protocol: Some("TCP".into()),
                ..EndpointPort::default()
            }]),
            ..EndpointSubset::default()
        }]),
    }
}

/// The EndpointSlice of `name` (`ips` on the named target port, all ready), written by the harness itself
/// as the owner of a selector-less Service should: the mirroring controller copies Endpoints into slices
/// at its own pace (kube-controller-manager's API rate), which would be measured instead of the
/// controller reading them. Its Endpoints carry the skip-mirror label so no second slice is made.
pub fn endpoint_slice(name: &str, ips: &[String]) -> EndpointSlice {
    EndpointSlice {
        metadata: ObjectMeta {
            name: Some(format!("{name}-bench")),
            labels: Some(BTreeMap::from([
                (kuryr_api::labels::SERVICE_NAME.to_string(), name.to_string()),
                (
                    "endpointslice.kubernetes.io/managed-by".to_string(),
                    "kuryr-bench".to_string(),
                ),
            ])),
            ..ObjectMeta::default()
        },
        address_type: "IPv4".into(),
        endpoints: ips
            .iter()
            .map(|ip| SliceEndpoint {
                addresses: vec![ip.clone()],
                conditions: Some(EndpointConditions {
                    ready: Some(true),
                    ..EndpointConditions::default()
                }),
                ..SliceEndpoint::default()
            })
            .collect(),
        ports: Some(vec![SlicePort {
            name: Some(PORT_NAME.into()),
            port: Some(TARGET_PORT),
            protocol: Some("TCP".into()),
            ..SlicePort::default()
        }]),
    }
}

/// `endpoints(name, ips)` with the label that keeps the mirroring controller off them.
fn unmirrored_endpoints(name: &str, ips: &[String]) -> Endpoints {
    let mut ep = endpoints(name, ips);
    ep.metadata.labels = Some(BTreeMap::from([(
        "endpointslice.kubernetes.io/skip-mirror".to_string(),
        "true".to_string(),
    )]));
    ep
}

/// Endpoint address `i` on the emulated pod subnet (198.18.64.0/18): 198.18.72.1 upwards, clear of the
/// VMs' parent ports (198.18.64.11+) and of the scale scenario's addresses (198.18.96.0+).
pub fn endpoint_ip(i: usize) -> String {
    format!("198.18.{}.{}", 72 + (i / 250) % 24, 1 + i % 250)
}

/// The members a load balancer must have for `ips`: `ip:port`.
pub fn member_set(ips: &[String]) -> BTreeSet<String> {
    ips.iter().map(|ip| format!("{ip}:{TARGET_PORT}")).collect()
}

/// What a KuryrLoadBalancer says: whether its controller reports the load balancer provisioned, and the
/// members it records (`ip:port`).
pub fn klb_view(implementation: Implementation, klb: &Value) -> (bool, BTreeSet<String>) {
    let status = &klb["status"];
    let settled = match implementation {
        // The floor (`services_floor.rs`) writes the condition as kuryr-rs does.
        Implementation::KuryrRs | Implementation::Floor => status["conditions"]
            .as_array()
            .is_some_and(|cs| cs.iter().any(|c| c["type"] == "Ready" && c["status"] == "True")),
        Implementation::Upstream => status["loadbalancer"]["id"].is_string(),
    };
    let members = status["members"]
        .as_array()
        .map(|ms| {
            ms.iter()
                .filter_map(|m| Some(format!("{}:{}", m["ip"].as_str()?, m["port"].as_i64()?)))
                .collect()
        })
        .unwrap_or_default();
    (settled, members)
}

/// A load balancer in the emulated cloud: whether its whole tree is ACTIVE, and its members.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tree {
    pub active: bool,
    pub members: BTreeSet<String>,
}

/// Every load balancer whose name starts with `prefix`, by name.
pub fn trees(w: &World, prefix: &str) -> HashMap<String, Vec<Tree>> {
    let active = |s: &str| s == "ACTIVE";
    let mut out: HashMap<String, Vec<Tree>> = HashMap::new();
    for lb in w.lbs.values().filter(|lb| lb.name.starts_with(prefix)) {
        let listeners_ok = lb.listeners.iter().all(|l| {
            w.listeners
                .get(&l.id)
                .is_some_and(|l| active(&l.provisioning_status))
        });
        let mut all = active(&lb.provisioning_status) && listeners_ok;
        let mut members = BTreeSet::new();
        for p in lb.pools.iter().filter_map(|p| w.pools.get(&p.id)) {
            all &= active(&p.provisioning_status);
            for m in p.members.iter().filter_map(|m| w.members.get(&m.id)) {
                all &= active(&m.provisioning_status);
                members.insert(format!("{}:{}", m.address, m.protocol_port));
            }
        }
        out.entry(lb.name.clone())
            .or_default()
            .push(Tree { active: all, members });
    }
    out
}

/// Whether Service `name` is ready with `expected` members (see the module's doc).
pub fn is_ready(
    implementation: Implementation,
    klb: Option<&Value>,
    trees: &HashMap<String, Vec<Tree>>,
    lb_name: &str,
    expected: &BTreeSet<String>,
) -> bool {
    let reported = klb.is_some_and(|k| {
        let (settled, members) = klb_view(implementation, k);
        settled && &members == expected
    });
    reported
        && trees
            .get(lb_name)
            .is_some_and(|ts| ts.iter().any(|t| t.active && &t.members == expected))
}

type KlbStore = Arc<Mutex<HashMap<String, Value>>>;

/// Keeps the latest version of every KuryrLoadBalancer of the namespace.
fn watch_klbs(session: &Session, client: &kuryr_api::Client) -> (KlbStore, tokio::task::JoinHandle<()>) {
    let store: KlbStore = Arc::default();
    let api = kubeenv::klb_api(client, &session.ns);
    let st = store.clone();
    let task = tokio::spawn(async move {
        let stream = watcher(api, watcher::Config::default());
        futures::pin_mut!(stream);
        loop {
            match stream.try_next().await {
                Ok(Some(watcher::Event::Apply(o) | watcher::Event::InitApply(o))) => {
                    let v = serde_json::to_value(&o).unwrap_or_default();
                    lock(&st).insert(o.name_any(), v);
                }
                Ok(Some(watcher::Event::Delete(o))) => {
                    lock(&st).remove(&o.name_any());
                }
                Ok(Some(_)) => {}
                Ok(None) => break,
                Err(e) => {
                    tracing::warn!("kuryrloadbalancer watch: {e}");
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            }
        }
    });
    (store, task)
}

/// What the harness waits for: per Service, its expected members and when the change was made.
struct Waiter<'a> {
    session: &'a mut Session,
    klbs: KlbStore,
}

impl Waiter<'_> {
    /// Polls every 50 ms until every Service of `expected` whose start is known in `started` is ready
    /// (or `timeout`); returns each one's seconds from its start to ready. `done_starting` says the
    /// starts are all in (a Service never started is never waited for past that).
    async fn wait(
        &mut self,
        expected: &HashMap<String, BTreeSet<String>>,
        started: &Mutex<HashMap<String, Instant>>,
        done_starting: impl Fn() -> bool,
        timeout: Duration,
    ) -> anyhow::Result<HashMap<String, f64>> {
        let implementation = self.session.spec.implementation;
        let prefix = format!("{}/", self.session.ns);
        let sim = self
            .session
            .cloud
            .sim
            .as_ref()
            .ok_or_else(|| anyhow::anyhow!("the services scenario runs on cloudsim"))?;
        let deadline = Instant::now() + timeout;
        let mut ready: HashMap<String, f64> = HashMap::new();
        let mut last_check = Instant::now();
        loop {
            let now = Instant::now();
            let trees = sim.inspect(|w| trees(w, &prefix));
            let starts = lock(started).clone();
            {
                let klbs = lock(&self.klbs);
                for (name, want) in expected {
                    if ready.contains_key(name) {
                        continue;
                    }
                    let Some(t0) = starts.get(name) else { continue };
                    let lb = format!("{prefix}{name}");
                    if is_ready(implementation, klbs.get(name), &trees, &lb, want) {
                        ready.insert(name.clone(), now.saturating_duration_since(*t0).as_secs_f64());
                    }
                }
            }
            let finished = done_starting();
            if ready.len() == expected.len()
                || (finished && ready.len() == starts.len() && !starts.is_empty())
            {
                return Ok(ready);
            }
            if now > deadline {
                return Ok(ready);
            }
            if now.duration_since(last_check) > Duration::from_secs(2) {
                last_check = now;
                if let Some(c) = self.session.controller.as_mut() {
                    c.ensure_running()?;
                }
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

fn apis(session: &Session, client: &kuryr_api::Client) -> (Api<Service>, Api<Endpoints>, Api<EndpointSlice>) {
    (
        Api::namespaced(client.clone(), &session.ns),
        Api::namespaced(client.clone(), &session.ns),
        Api::namespaced(client.clone(), &session.ns),
    )
}

/// Creates the Endpoints and the EndpointSlice (`ips` per name), then the Service, `started` stamped
/// before the Service create.
async fn create_all(
    svcs: Api<Service>,
    eps: Api<Endpoints>,
    slices: Api<EndpointSlice>,
    set: Vec<(String, Vec<String>)>,
    started: Arc<Mutex<HashMap<String, Instant>>>,
) -> Vec<String> {
    futures::stream::iter(set)
        .map(|(name, ips)| {
            let (svcs, eps, slices, started) = (svcs.clone(), eps.clone(), slices.clone(), started.clone());
            async move {
                let r = async {
                    let pp = PostParams::default();
                    let (ep, slice) = (unmirrored_endpoints(&name, &ips), endpoint_slice(&name, &ips));
                    let (ep, slice) = tokio::join!(eps.create(&pp, &ep), slices.create(&pp, &slice));
                    ep?;
                    slice?;
                    let t = Instant::now();
                    svcs.create(&PostParams::default(), &service(&name)).await?;
                    lock(&started).insert(name.clone(), t);
                    anyhow::Ok(())
                }
                .await;
                r.err().map(|e| format!("{name}: {e:#}"))
            }
        })
        .buffer_unordered(32)
        .filter_map(|e| async move { e })
        .collect()
        .await
}

/// Creates `set` and waits until every Service is ready; returns the seconds to ready of each one that was.
async fn create_and_wait(
    waiter: &mut Waiter<'_>,
    client: &kuryr_api::Client,
    set: Vec<(String, Vec<String>)>,
    timeout: Duration,
) -> anyhow::Result<HashMap<String, f64>> {
    let (svcs, eps, slices) = apis(waiter.session, client);
    let expected: HashMap<String, BTreeSet<String>> =
        set.iter().map(|(n, ips)| (n.clone(), member_set(ips))).collect();
    let started: Arc<Mutex<HashMap<String, Instant>>> = Arc::default();
    let creating = tokio::spawn(create_all(svcs, eps, slices, set, started.clone()));
    let ready = waiter
        .wait(&expected, &started, || creating.is_finished(), timeout)
        .await?;
    let errors = creating.await?;
    anyhow::ensure!(
        errors.is_empty(),
        "{} Service/Endpoints creates failed: {:?}",
        errors.len(),
        &errors[..errors.len().min(3)]
    );
    Ok(ready)
}

/// The machine's 1-minute load average (a shared 2-core lab: context for the figures).
fn load_average() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

fn summary_json(samples: &[f64]) -> Value {
    match Summary::of(samples) {
        Some(s) => json!({"p50_s": s.p50, "p99_s": s.p99, "max_s": s.max}),
        None => Value::Null,
    }
}

async fn services(s: &Settings, session: &mut Session, o: &ServicesOpts) -> anyhow::Result<Record> {
    let client = s.client.clone();
    // The floor's Services half (the session runs its pods half, idle here).
    let floor = match session.spec.implementation {
        Implementation::Floor => Some(
            ServicesFloor::start(
                &client,
                &session.ns,
                &session.cloud,
                &session.cluster_id,
                &o.provider,
            )
            .await?,
        ),
        _ => None,
    };
    let (klbs, watch) = watch_klbs(session, &client);
    let result = phases(&client, session, klbs, o).await;
    watch.abort();
    match (result, floor) {
        (Err(e), Some(f)) => Err(e.context(format!(
            "services floor's last error: {}",
            f.last_error().unwrap_or_else(|| "none".into())
        ))),
        (result, _) => result,
    }
}

async fn phases(
    client: &kuryr_api::Client,
    session: &mut Session,
    klbs: KlbStore,
    o: &ServicesOpts,
) -> anyhow::Result<Record> {
    let implementation = session.spec.implementation;
    let time_scale = session.cloud.sim.as_ref().map(|s| s.profile().time_scale);
    let mut waiter = Waiter { session, klbs };
    let mut next_ip = 0usize;
    let mut ips = |n: usize| -> Vec<String> {
        let v = (next_ip..next_ip + n).map(endpoint_ip).collect();
        next_ip += n;
        v
    };

    // Warm-up: one Service, ready before anything is counted (controller up, token, version discovery).
    let warm = create_and_wait(
        &mut waiter,
        client,
        vec![("warm".to_string(), ips(o.endpoints))],
        o.timeout,
    )
    .await?;
    anyhow::ensure!(
        warm.len() == 1,
        "warm-up Service not ready within {:?}; {}",
        o.timeout,
        waiter.session.log_tail()
    );

    // 1. N Services x E endpoints at once.
    let seq0 = waiter.session.last_seq();
    let cpu0 = waiter.session.cpu_s();
    let api0 = crate::apimetrics::try_scrape(client).await;
    let load0 = load_average();
    // Whether the creates queued behind the client's Octavia limit (kuryr-rs only: it has the metrics).
    let limits = match waiter.session.metrics_url() {
        Some(url) => Some(crate::limits::Sampler::start(url, "octavia").await),
        None => None,
    };
    let start = Instant::now();
    let set: Vec<(String, Vec<String>)> = (0..o.services)
        .map(|i| (format!("svc-{i}"), ips(o.endpoints)))
        .collect();
    let ready = create_and_wait(&mut waiter, client, set, o.timeout).await?;
    let create_wall = start.elapsed().as_secs_f64();
    let octavia_client = match limits {
        Some(l) => Some(l.finish().await),
        None => None,
    };
    let seq1 = waiter.session.last_seq();
    let not_ready = o.services - ready.len();
    let mut samples: Vec<f64> = ready.values().copied().collect();
    samples.sort_by(f64::total_cmp);

    // 2. The rolling update: one Service with P endpoints, S replaced per step.
    let mut addrs = ips(o.rolling_pods);
    let web = create_and_wait(
        &mut waiter,
        client,
        vec![("web".to_string(), addrs.clone())],
        o.timeout,
    )
    .await?;
    let web_create = web.get("web").copied();
    let seq2 = waiter.session.last_seq();
    let step = o.rolling_step.clamp(1, o.rolling_pods.max(1));
    let steps = o.rolling_pods.div_ceil(step);
    let (_, eps, slices) = apis(waiter.session, client);
    let mut step_samples = Vec::new();
    let mut steps_done = 0u64;
    for k in 0..steps {
        let n = step.min(o.rolling_pods - k * step);
        addrs.drain(..n);
        addrs.extend(ips(n));
        let started = Mutex::new(HashMap::from([("web".to_string(), Instant::now())]));
        let pp = PatchParams::default();
        let ep = Patch::Merge(json!({"subsets": endpoints("web", &addrs).subsets}));
        let slice = Patch::Merge(json!({"endpoints": endpoint_slice("web", &addrs).endpoints}));
        let (ep, slice) = tokio::join!(eps.patch("web", &pp, &ep), slices.patch("web-bench", &pp, &slice));
        ep?;
        slice?;
        steps_done += 1;
        let expected = HashMap::from([("web".to_string(), member_set(&addrs))]);
        let r = waiter.wait(&expected, &started, || true, o.timeout).await?;
        match r.get("web") {
            Some(s) => step_samples.push(*s),
            None => break,
        }
    }
    let seq3 = waiter.session.last_seq();
    let session = &*waiter.session;

    let mut r = Record::new(Scenario::Services, implementation, variant(&o.provider));
    r.set_latencies(samples);
    r.extra.insert("provider".into(), o.provider.clone().into());
    if let Some(ts) = time_scale {
        r.extra.insert("time_scale".into(), ts.into());
    }
    r.extra.insert("services".into(), o.services.into());
    r.extra.insert("endpoints_per_service".into(), o.endpoints.into());
    r.extra
        .insert("create_wall_s".into(), round_ms(create_wall).into());
    if let Some(c) = octavia_client {
        r.extra.insert("octavia_client".into(), c);
    }
    r.extra.insert(
        "rolling_update".into(),
        json!({
            "endpoints": o.rolling_pods,
            "replaced_per_step": step,
            "steps": steps_done,
            "service_create_s": web_create.map(round_ms),
            "samples_s": step_samples.iter().map(|s| round_ms(*s)).collect::<Vec<_>>(),
            "time_to_ready": summary_json(&step_samples),
        }),
    );
    // Every write that reached Octavia counts; those it accepted (the 1 + 2L + N·P of upstream's
    // sequence) are in extra, the difference being writes refused with 409 while PENDING_UPDATE.
    if let Some(c) = session.calls_between(seq0, seq1) {
        r.octavia_writes_per_service_create = CallCounts::per(c.octavia_writes, o.services as u64);
        r.extra.insert(
            "octavia_writes_accepted_per_service_create".into(),
            CallCounts::per(c.octavia_writes - c.octavia_writes_refused, o.services as u64).into(),
        );
        r.extra.insert("calls_create".into(), c.to_json());
    }
    if let Some(c) = session.calls_between(seq2, seq3) {
        r.octavia_writes_per_endpoints_change = CallCounts::per(c.octavia_writes, steps_done);
        r.extra.insert(
            "octavia_writes_accepted_per_endpoints_change".into(),
            CallCounts::per(c.octavia_writes - c.octavia_writes_refused, steps_done).into(),
        );
        r.extra.insert("calls_rolling_update".into(), c.to_json());
    }
    if let Some(c) = session.calls_between(seq1, seq2) {
        r.extra.insert("calls_rolling_service_create".into(), c.to_json());
    }
    if let Some(l) = load0 {
        r.extra.insert("load_avg_1m_at_start".into(), l.into());
    }
    if let Some(wait) = session.ratelimit_wait_s().await {
        r.extra
            .insert("client_ratelimit_wait_s".into(), round_ms(wait).into());
    }
    session.record_footprint(&mut r, cpu0);
    // The whole measured window: the Services at once and the rolling update.
    if let (Some(a0), Some(a1)) = (api0, crate::apimetrics::try_scrape(client).await) {
        r.api_requests = Some(crate::apimetrics::delta(&a0, &a1));
    }
    let mut notes = Vec::new();
    if not_ready > 0 {
        notes.push(format!(
            "{not_ready} of {} Services not ready within {:?}: p99/max cover ready ones only, writes per create divide by all",
            o.services, o.timeout
        ));
        r.extra.insert("not_ready".into(), not_ready.into());
    }
    if step_samples.len() < steps {
        notes.push(format!(
            "rolling update: step {} of {steps} not ready within {:?}",
            step_samples.len() + 1,
            o.timeout
        ));
    }
    if !notes.is_empty() {
        r.note = Some(notes.join("; "));
    }
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoint_ips_stay_on_the_pod_subnet_clear_of_the_vms() {
        assert_eq!(endpoint_ip(0), "198.18.72.1");
        assert_eq!(endpoint_ip(249), "198.18.72.250");
        assert_eq!(endpoint_ip(250), "198.18.73.1");
        assert_eq!(endpoint_ip(5999), "198.18.95.250");
        let e = endpoints("web", &["198.18.72.1".into()]);
        let subset = &e.subsets.as_ref().expect("subsets")[0];
        assert_eq!(
            subset.ports.as_ref().expect("ports")[0].name.as_deref(),
            Some(PORT_NAME)
        );
        let svc = service("web");
        let port = &svc.spec.as_ref().and_then(|s| s.ports.clone()).expect("ports")[0];
        assert_eq!((port.name.as_deref(), port.port), (Some(PORT_NAME), PORT));
        assert!(svc.spec.as_ref().and_then(|s| s.selector.clone()).is_none());
    }

    #[test]
    fn klb_views_of_every_implementation() {
        let want = member_set(&["198.18.72.1".into(), "198.18.72.2".into()]);
        let ours = json!({"status": {
            "conditions": [{"type": "Ready", "status": "True"}],
            "members": [{"ip": "198.18.72.1", "port": 8080}, {"ip": "198.18.72.2", "port": 8080}]}});
        assert_eq!(klb_view(Implementation::KuryrRs, &ours), (true, want.clone()));
        // The services floor writes kuryr-rs's shape.
        assert_eq!(klb_view(Implementation::Floor, &ours), (true, want.clone()));
        let provisioning =
            json!({"status": {"conditions": [{"type": "Ready", "status": "False"}], "members": []}});
        assert!(!klb_view(Implementation::KuryrRs, &provisioning).0);
        let theirs = json!({"status": {"loadbalancer": {"id": "lb"},
            "members": [{"ip": "198.18.72.2", "port": 8080, "pool_id": "p"}, {"ip": "198.18.72.1", "port": 8080}]}});
        assert_eq!(klb_view(Implementation::Upstream, &theirs), (true, want));
        assert!(!klb_view(Implementation::Upstream, &json!({"status": {}})).0);
        assert!(!klb_view(Implementation::KuryrRs, &json!({})).0);
    }

    #[test]
    fn ready_needs_the_controller_and_the_cloud_to_agree() {
        let want = member_set(&["198.18.72.1".into()]);
        let klb = json!({"status": {"loadbalancer": {"id": "lb"}, "members": [{"ip": "198.18.72.1", "port": 8080}]}});
        let tree = |active, members: &BTreeSet<String>| {
            HashMap::from([(
                "ns/a".to_string(),
                vec![Tree {
                    active,
                    members: members.clone(),
                }],
            )])
        };
        let up = Implementation::Upstream;
        assert!(is_ready(up, Some(&klb), &tree(true, &want), "ns/a", &want));
        // The cloud still provisioning, or with other members, or no KuryrLoadBalancer yet.
        assert!(!is_ready(up, Some(&klb), &tree(false, &want), "ns/a", &want));
        assert!(!is_ready(
            up,
            Some(&klb),
            &tree(true, &BTreeSet::new()),
            "ns/a",
            &want
        ));
        assert!(!is_ready(up, None, &tree(true, &want), "ns/a", &want));
        assert!(!is_ready(up, Some(&klb), &tree(true, &want), "ns/b", &want));
    }

    #[test]
    fn trees_of_the_emulated_cloud_are_read_per_name() {
        let w = World::default();
        assert!(trees(&w, "ns/").is_empty());
    }
}
