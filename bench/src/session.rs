//! One (implementation, variant) measured in isolation: its own namespace, cluster id, Nodes, cloud and
//! controller process, all removed at the end.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use kuryr_api::{Api, Client, Pod};
use kuryr_cloudsim::Profile;
use lab_tests::Lab;

use crate::calls::CallCounts;
use crate::cloud::BenchCloud;
use crate::controllers::{self, Controller, KuryrRsOpts, UpstreamOpts};
use crate::floor::Floor;
use crate::kubeenv::{self, SharedWireLog};
use crate::record::Implementation;

/// Which cloud a session runs against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CloudKind {
    Sim,
    Neutron,
}

/// Settings shared by every session of a run.
pub struct Settings {
    pub lab: Lab,
    pub client: Client,
    pub run_id: String,
    pub work_dir: PathBuf,
    pub profile: Profile,
    pub kuryr_bin: PathBuf,
    pub kuryr_pool_args: Vec<String>,
    pub upstream_venv: PathBuf,
    pub nodes: usize,
    /// Sessions started so far: numbers each one's namespace, so a repeat never meets the namespace of
    /// the one before it, which the API server may still be deleting.
    pub sessions: std::sync::atomic::AtomicU32,
}

/// What a session is.
#[derive(Debug, Clone)]
pub struct Spec {
    pub scenario: &'static str,
    pub implementation: Implementation,
    /// Pools on (kuryr-rs pool flags / upstream `nested` driver) or off.
    pub pools: bool,
    pub cloud: CloudKind,
    pub upstream_handlers: &'static str,
    /// More kuryr-controller flags (Services on, ...).
    pub kuryr_extra_args: Vec<String>,
    /// cloudsim profile override (the scale scenario builds its state on a zero-latency cloud).
    pub profile: Option<Profile>,
    /// Appended to the variant (`/<suffix>`) when not empty: a second session of the same cloud and
    /// pools setting with other controller flags.
    pub variant_suffix: &'static str,
}

impl Spec {
    pub fn variant(&self) -> String {
        let cloud = match self.cloud {
            CloudKind::Sim => "cloudsim",
            CloudKind::Neutron => "neutron",
        };
        let pools = if self.pools { "pools" } else { "no-pools" };
        if self.variant_suffix.is_empty() {
            format!("{cloud}/{pools}")
        } else {
            format!("{cloud}/{pools}/{}", self.variant_suffix)
        }
    }
}

pub struct Session {
    pub spec: Spec,
    pub ns: String,
    pub cluster_id: String,
    pub cloud: BenchCloud,
    pub controller: Option<Controller>,
    /// The floor's in-process controller (implementation `floor`), instead of a child process.
    pub floor: Option<Floor>,
    pub pods: Api<Pod>,
    pub wire: SharedWireLog,
    watch: tokio::task::JoinHandle<()>,
    pub started: Instant,
    /// Whether the warm-up pods' KuryrPorts were released (deleted) by the controller.
    pub warm_released: bool,
    client: Client,
}

fn short(i: Implementation) -> &'static str {
    match i {
        Implementation::KuryrRs => "rs",
        Implementation::Upstream => "up",
        Implementation::Floor => "fl",
    }
}

impl Session {
    pub async fn start(s: &Settings, spec: Spec) -> anyhow::Result<Session> {
        let mut tag = format!(
            "{}-{}-{}",
            spec.scenario.replace('_', ""),
            short(spec.implementation),
            if spec.pools { "p" } else { "np" }
        );
        if !spec.variant_suffix.is_empty() {
            tag.push('-');
            tag.extend(spec.variant_suffix.chars().filter(char::is_ascii_alphanumeric));
        }
        let n = s.sessions.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        tag.push_str(&format!("-{n}"));
        let ns = format!("bench-{}-{tag}", s.run_id);
        let cluster_id = ns.clone();
        let dir = s.work_dir.join(&tag);
        std::fs::create_dir_all(&dir)?;
        let cloud = match spec.cloud {
            CloudKind::Sim => {
                let tag = format!("kuryr.cluster={cluster_id}");
                BenchCloud::sim(
                    spec.profile.clone().unwrap_or_else(|| s.profile.clone()),
                    s.nodes,
                    &ns,
                    &tag,
                    &dir,
                )
                .await?
            }
            CloudKind::Neutron => BenchCloud::lab(&s.lab, &dir).await?,
        };
        kubeenv::create_namespace(&s.client, &ns).await?;
        let mut session = Session {
            pods: Api::namespaced(s.client.clone(), &ns),
            wire: Default::default(),
            watch: tokio::spawn(async {}),
            spec,
            ns,
            cluster_id,
            cloud,
            controller: None,
            floor: None,
            started: Instant::now(),
            warm_released: false,
            client: s.client.clone(),
        };
        if let Err(e) = session.setup(s, &dir).await {
            session.finish().await;
            return Err(e);
        }
        Ok(session)
    }

    async fn setup(&mut self, s: &Settings, dir: &Path) -> anyhow::Result<()> {
        kubeenv::create_nodes(&s.client, &self.cloud.vms).await?;
        let (wire, watch) = kubeenv::watch_wiring(&s.client, &self.ns);
        self.wire = wire;
        self.watch = watch;
        if self.spec.implementation == Implementation::Floor {
            self.floor = Some(Floor::start(&s.client, &self.ns, &self.cloud, &self.cluster_id).await?);
        } else {
            self.controller = Some(self.start_controller(s, dir).await?);
        }
        self.started = Instant::now();
        Ok(())
    }

    /// Stops the controller and starts it again (same flags); returns the new one's start instant.
    pub async fn restart(&mut self, s: &Settings) -> anyhow::Result<Instant> {
        if let Some(c) = self.controller.take() {
            c.stop().await;
        }
        let dir = s.work_dir.join(format!("{}-restart", self.ns));
        std::fs::create_dir_all(&dir)?;
        let t = Instant::now();
        self.controller = Some(self.start_controller(s, &dir).await?);
        Ok(t)
    }

    async fn start_controller(&self, s: &Settings, dir: &Path) -> anyhow::Result<Controller> {
        match self.spec.implementation {
            Implementation::KuryrRs => {
                // kuryr-controller's pools are on by default: a no-pools session says so.
                let mut extra = if self.spec.pools {
                    s.kuryr_pool_args.clone()
                } else {
                    vec!["--ports-pool=false".to_string()]
                };
                // `{service_subnet}` stands for the emulated cloud's service subnet, known only now.
                extra.extend(
                    self.spec
                        .kuryr_extra_args
                        .iter()
                        .map(|a| a.replace("{service_subnet}", &self.cloud.service_subnet_id)),
                );
                controllers::start_kuryr_rs(
                    &KuryrRsOpts {
                        bin: &s.kuryr_bin,
                        kubeconfig: &s.lab.kubeconfig,
                        cluster_id: &self.cluster_id,
                        namespace: &self.ns,
                        extra_args: &extra,
                    },
                    &self.cloud,
                    dir,
                    "kuryr-rs",
                )
            }
            Implementation::Upstream => {
                let (addr, proxy) = crate::proxy::spawn(s.client.clone(), &self.ns).await?;
                controllers::start_upstream(
                    UpstreamOpts {
                        venv: &s.upstream_venv,
                        api_root: format!("http://{addr}"),
                        cluster_id: &self.cluster_id,
                        pool_driver: if self.spec.pools { "nested" } else { "noop" },
                        handlers: self.spec.upstream_handlers,
                        lb_provider: self.lb_provider(),
                        proxy,
                    },
                    &self.cloud,
                    dir,
                    "upstream",
                )
            }
            Implementation::Floor => anyhow::bail!("the floor runs in the harness, not as a process"),
        }
    }

    /// The Octavia provider upstream names for its load balancers: the emulated cloud's default (a
    /// services session sets it to the provider measured); amphora on the real cloud.
    fn lb_provider(&self) -> String {
        self.cloud
            .sim
            .as_ref()
            .map(|sim| sim.profile().octavia.default_provider)
            .unwrap_or_else(|| "amphora".into())
    }

    pub fn host_ip(&self) -> bool {
        self.spec.implementation == Implementation::Upstream
    }

    /// One pod per node, wired then deleted: the controller is up, caches are warm and (with pools) every
    /// node's pool exists.
    pub async fn warm_up(&mut self, timeout: Duration) -> anyhow::Result<()> {
        let names: Vec<String> = (0..self.cloud.vms.len()).map(|i| format!("warm-{i}")).collect();
        for (name, vm) in names.iter().zip(self.cloud.vms.clone()) {
            kubeenv::create_pod(&self.pods, name, &vm, self.host_ip()).await?;
        }
        let ok = self.wait_wired(&names, timeout).await?;
        anyhow::ensure!(
            ok,
            "warm-up pods not wired within {timeout:?}; {}",
            self.log_tail()
        );
        kubeenv::delete_pods(&self.pods, &names).await;
        let gone = kubeenv::wait_until(&self.wire, timeout, |l| {
            names.iter().all(|n| l.gone.contains_key(n))
        })
        .await;
        anyhow::ensure!(
            gone,
            "warm-up KuryrPorts not released within {timeout:?}; {}",
            self.log_tail()
        );
        self.warm_released = true;
        Ok(())
    }

    /// Waits for every name to be wired, failing early if the controller died.
    pub async fn wait_wired(&mut self, names: &[String], timeout: Duration) -> anyhow::Result<bool> {
        let deadline = Instant::now() + timeout;
        loop {
            if kubeenv::wait_until(&self.wire, Duration::from_secs(2), |l| {
                names.iter().all(|n| l.wired.contains_key(n))
            })
            .await
            {
                return Ok(true);
            }
            if let Some(c) = self.controller.as_mut() {
                c.ensure_running()?;
            }
            if let Some(f) = self.floor.as_ref() {
                f.ensure_running()?;
            }
            if Instant::now() > deadline {
                return Ok(false);
            }
        }
    }

    pub fn log_tail(&self) -> String {
        if let Some(f) = &self.floor {
            return format!(
                "floor's last error: {}",
                f.last_error().unwrap_or_else(|| "none".into())
            );
        }
        self.controller
            .as_ref()
            .map(|c| {
                format!(
                    "controller log {}:\n{}",
                    c.log.display(),
                    controllers::tail(&c.log, 20)
                )
            })
            .unwrap_or_default()
    }

    /// The controller's CPU-seconds so far (None for the floor: it is the harness's own process).
    pub fn cpu_s(&self) -> Option<f64> {
        Some(self.controller.as_ref()?.footprint()?.cpu_s)
    }

    /// The controller's footprint into `r`: `rss_mib` its VmHWM (the peak since it started, warm-up
    /// included), `extra.vm_rss_mib` its VmRSS now, `cpu_s` since `cpu0`. Nothing for the floor.
    pub fn record_footprint(&self, r: &mut crate::record::Record, cpu0: Option<f64>) {
        let Some(f) = self.controller.as_ref().and_then(|c| c.footprint()) else {
            return;
        };
        r.rss_mib = Some(crate::stats::round_ms(f.vm_hwm_mib));
        r.extra
            .insert("vm_rss_mib".into(), crate::stats::round_ms(f.vm_rss_mib).into());
        r.cpu_s = cpu0.map(|c0| crate::stats::round_ms(f.cpu_s - c0));
    }

    /// kuryr-rs's `/metrics` and `/readyz` address (None for upstream and the floor).
    pub fn metrics_url(&self) -> Option<String> {
        self.controller.as_ref()?.metrics_url.clone()
    }

    /// kuryr-rs: the seconds its OpenStack calls have waited for its client's rate limiter so far, summed
    /// over calls (`kuryr_openstack_ratelimit_wait_seconds_total`); None for upstream (no limiter).
    pub async fn ratelimit_wait_s(&self) -> Option<f64> {
        let url = self.metrics_url()?;
        let text = reqwest::get(format!("{url}/metrics"))
            .await
            .ok()?
            .text()
            .await
            .ok()?;
        Some(controllers::counter_sum(
            &text,
            "kuryr_openstack_ratelimit_wait_seconds_total",
            "",
        ))
    }

    /// The cloudsim call log since `since_seq` (None on the real cloud).
    pub fn calls_since(&self, since_seq: u64) -> Option<CallCounts> {
        let sim = self.cloud.sim.as_ref()?;
        let calls = sim.calls();
        Some(CallCounts::of(calls.iter().filter(|c| c.seq > since_seq)))
    }

    /// The cloudsim call log in `(after_seq, up_to_seq]` (None on the real cloud).
    pub fn calls_between(&self, after_seq: u64, up_to_seq: u64) -> Option<CallCounts> {
        let sim = self.cloud.sim.as_ref()?;
        let calls = sim.calls();
        Some(CallCounts::of(
            calls.iter().filter(|c| c.seq > after_seq && c.seq <= up_to_seq),
        ))
    }

    pub fn last_seq(&self) -> u64 {
        self.cloud
            .sim
            .as_ref()
            .and_then(|s| s.calls().last().map(|c| c.seq))
            .unwrap_or(0)
    }

    /// Deletes every pod of the namespace and waits (bounded) for the controller to release them.
    pub async fn drain(&mut self, timeout: Duration) -> bool {
        let names: Vec<String> = match self.pods.list(&Default::default()).await {
            Ok(l) => l.items.iter().filter_map(|p| p.metadata.name.clone()).collect(),
            Err(_) => return false,
        };
        kubeenv::delete_pods(&self.pods, &names).await;
        let kps = kubeenv::kuryrport_api(&self.client, &self.ns);
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            match kps.list(&Default::default()).await {
                Ok(l) if l.items.is_empty() => return true,
                _ => tokio::time::sleep(Duration::from_millis(500)).await,
            }
        }
        false
    }

    /// The Neutron ports the namespace's KuryrPorts name (either implementation's shape).
    async fn kuryrport_port_ids(&self) -> Vec<String> {
        let kps = kubeenv::kuryrport_api(&self.client, &self.ns);
        match kps.list(&Default::default()).await {
            Ok(l) => l
                .items
                .iter()
                .filter_map(|o| serde_json::to_value(o).ok())
                .flat_map(|v| crate::cleanup::port_ids(&v))
                .collect(),
            Err(e) => {
                eprintln!("listing {}'s KuryrPorts for their ports failed: {e:#}", self.ns);
                Vec::new()
            }
        }
    }

    /// Stops the controller, removes the namespace, the Nodes and (real cloud) every port tagged with
    /// this session's cluster id or named by its KuryrPorts.
    pub async fn finish(mut self) {
        if let Some(c) = self.controller.take() {
            c.stop().await;
        }
        if let Some(f) = self.floor.take() {
            f.stop();
        }
        self.watch.abort();
        // Read before the namespace goes: a session that failed before its drain leaves KuryrPorts whose
        // ports only they name (upstream's carry no tag on the real cloud).
        let port_ids = match self.cloud.sim {
            None => self.kuryrport_port_ids().await,
            Some(_) => Vec::new(),
        };
        kubeenv::delete_namespace(&self.client, &self.ns, kubeenv::TEARDOWN_LIMIT).await;
        kubeenv::delete_nodes(&self.client, &self.cloud.vms).await;
        if self.cloud.sim.is_none() {
            if let Err(e) = crate::cleanup::delete_tagged(&self.cloud.cloud, &self.cluster_id).await {
                eprintln!("cleanup of {} ports failed: {e:#}", self.cluster_id);
            }
            if let Err(e) = crate::cleanup::delete_ids(&self.cloud.cloud, port_ids).await {
                eprintln!("cleanup of {}'s KuryrPorts' ports failed: {e:#}", self.ns);
            }
            let prefix = format!("{}/", self.ns);
            if let Err(e) =
                crate::cleanup::delete_named(&self.cloud.cloud, &self.cloud.network_id, &prefix).await
            {
                eprintln!("cleanup of {prefix}* ports failed: {e:#}");
            }
        }
    }
}

/// Where a run keeps its logs and configs.
pub fn work_dir(run_id: &str) -> anyhow::Result<PathBuf> {
    let d = std::env::temp_dir().join(format!("kuryr-bench-{run_id}"));
    std::fs::create_dir_all(&d).with_context(|| d.display().to_string())?;
    Ok(d)
}
