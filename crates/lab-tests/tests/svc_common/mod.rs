//! Shared by the services_* tests: the cloud to run on (an in-process cloudsim bootstrapped like the lab,
//! or the lab's real Octavia with one provider), an in-process kuryr-controller running only the Services
//! side, scoped to its own namespace and cluster id, and "pods" without a kubelet: created with
//! `spec.nodeName` and their status patched (Running, podIP, Ready) so the lab's real
//! kube-controller-manager builds Endpoints from them.
#![allow(dead_code)]

pub mod slice_watch;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use futures::future::try_join_all;
use kuryr_api::k8s_openapi::api::core::v1::{ServicePort, ServiceSpec};
use kuryr_api::k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kuryr_api::{
    Api, Client, DeleteParams, Event, KuryrLoadBalancer, ListParams, ObjectMeta, Patch, PatchParams, Pod,
    PostParams, ResourceExt, Service,
};
use kuryr_cloudsim::profile::Dist;
use kuryr_cloudsim::{Profile, Sim, SimHandle};
use kuryr_controller::metrics::Metrics;
use kuryr_controller::services::{self, ServicesConfig};
use kuryr_controller::Config;
use kuryr_openstack::neutron::{floating_ips, Filter};
use kuryr_openstack::octavia::loadbalancers;
use kuryr_openstack::{ClientConfig, Cloud, Owner};
use lab_tests::{cluster, Lab};
use serde_json::json;

/// How long a Service test waits for a state before it fails: an upper bound, never a figure asserted. CI's
/// slow machine of stop 49 (2.4× slower than the ones before) took 90 s for one ovn member write beside the
/// suite's other Octavia tests.
pub const WAIT: Duration = Duration::from_secs(360);

/// Where the load balancers are made.
pub struct Backend {
    pub kind: String,
    /// The controller's handle (its metrics count the controller's calls only).
    pub cloud: Cloud,
    /// The test's own handle, for reads.
    pub check: Cloud,
    pub sim: Option<SimHandle>,
    pub provider: String,
    pub project_id: Option<String>,
    pub pod_network_id: String,
    pub pod_subnet_id: String,
    pub service_subnet_id: String,
    pub external_network_id: String,
    _dir: Option<std::path::PathBuf>,
}

impl Drop for Backend {
    fn drop(&mut self) {
        if let Some(d) = &self._dir {
            let _ = std::fs::remove_dir_all(d);
        }
    }
}

impl Backend {
    /// cloudsim with `provider` as Octavia's default; `tweak` adjusts the profile (e.g. `max_version`).
    pub async fn sim(provider: &str, tweak: impl FnOnce(&mut Profile)) -> anyhow::Result<Backend> {
        let mut profile = Profile::zero();
        profile.time_scale = 1.0;
        profile.octavia.default_provider = provider.to_owned();
        crate::simnets::short_provisioning(&mut profile);
        // ovn's quirk as on the lab: a removed member lingers in the status tree for a moment.
        if let Some(ovn) = profile.octavia.providers.get_mut("ovn") {
            ovn.member_removal_lag = Dist::Ms(300.0);
        }
        tweak(&mut profile);
        let (_, sim) = Sim::new(profile).spawn_on("127.0.0.1:0").await?;
        let dir =
            std::env::temp_dir().join(format!("kuryr-svc-{}-{}", std::process::id(), fastrand::u64(..)));
        std::fs::create_dir_all(&dir)?;
        let yaml = dir.join("clouds.yaml");
        std::fs::write(&yaml, sim.clouds_yaml("sim"))?;
        let cloud = Cloud::connect(ClientConfig::clouds_yaml(Some(yaml.clone()), "sim")).await?;
        let check = Cloud::connect(ClientConfig::clouds_yaml(Some(yaml), "sim")).await?;
        let nets = crate::simnets::like_the_lab(&check).await?;
        Ok(Backend {
            kind: format!("sim-{provider}"),
            cloud,
            check,
            sim: Some(sim),
            provider: provider.to_owned(),
            project_id: None,
            pod_network_id: nets.pod_network_id,
            pod_subnet_id: nets.pod_subnet_id,
            service_subnet_id: nets.service_subnet_id,
            external_network_id: nets.external_network_id,
            _dir: Some(dir),
        })
    }

    /// The controller's client again, with this request timeout (how long the controller holds a cleanup
    /// for a create a killed predecessor may have sent). cloudsim only: its clouds.yaml is ours.
    pub async fn with_request_timeout(mut self, timeout: Duration) -> anyhow::Result<Backend> {
        let dir = self
            ._dir
            .as_ref()
            .context("a lab backend has no clouds.yaml of ours")?;
        let config = ClientConfig::clouds_yaml(Some(dir.join("clouds.yaml")), "sim")
            .with_timeouts(Duration::from_secs(5), timeout);
        self.cloud = Cloud::connect(config).await?;
        Ok(self)
    }

    /// The lab's Keystone, Neutron and Octavia, load balancers on `provider`.
    pub async fn lab(lab: &Lab, provider: &str) -> anyhow::Result<Backend> {
        let cfg = || ClientConfig::clouds_yaml(Some(lab.clouds_yaml.clone()), lab.cloud.clone());
        let cloud = Cloud::connect(cfg()).await.context("login to the lab cloud")?;
        let check = Cloud::connect(cfg()).await?;
        Ok(Backend {
            kind: format!("lab-{provider}"),
            cloud,
            check,
            sim: None,
            provider: provider.to_owned(),
            project_id: Some(lab.project_id.clone()),
            pod_network_id: lab.pod_network_id.clone(),
            pod_subnet_id: lab.pod_subnet_id.clone(),
            service_subnet_id: lab.service_subnet_id.clone(),
            external_network_id: lab.external_network_id.clone(),
            _dir: None,
        })
    }

    /// Calls of `op` the client sent again because the answer did not come in time (the first may have
    /// landed: a load balancer create's second is then refused, its VIP taken).
    pub fn timeout_retries(&self, op: &str) -> u64 {
        let snap = self.cloud.metrics().snapshot();
        snap.retries
            .get(&(op.to_owned(), "timeout".to_owned()))
            .copied()
            .unwrap_or(0)
    }

    /// Octavia writes the controller made so far (every attempt, retries included).
    pub fn octavia_writes(&self) -> BTreeMap<String, u64> {
        let snap = self.cloud.metrics().snapshot();
        let mut out = BTreeMap::new();
        for ((op, _), s) in &snap.calls {
            let write = [
                ".create",
                ".update",
                ".delete",
                ".batch_update",
                ".batch_add",
                ".cascade_delete",
            ]
            .iter()
            .any(|w| op.ends_with(w));
            if op.starts_with("octavia.") && write {
                *out.entry(op.clone()).or_insert(0) += s.count;
            }
        }
        out
    }
}

/// Writes in `after` that are not in `before`, by op.
pub fn delta(before: &BTreeMap<String, u64>, after: &BTreeMap<String, u64>) -> BTreeMap<String, u64> {
    after
        .iter()
        .map(|(k, v)| (k.clone(), v - before.get(k).copied().unwrap_or(0)))
        .filter(|(_, v)| *v > 0)
        .collect()
}

type ControllerTask = tokio::task::JoinHandle<anyhow::Result<()>>;

/// The Services side of kuryr-controller on its own task, and what stops it.
fn spawn_controller(
    client: &Client,
    backend: &Backend,
    config: &Config,
    metrics: &Metrics,
) -> (tokio::sync::oneshot::Sender<()>, ControllerTask) {
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(services::run(
        client.clone(),
        backend.cloud.clone(),
        config.clone(),
        metrics.clone(),
        async {
            let _ = stopped.await;
        },
    ));
    (stop, task)
}

/// How a [`Harness`]'s controller keeps to its namespace.
enum Scoping {
    /// `--namespace`: it watches only that namespace.
    Namespace,
    /// `--namespace-selector`: it watches every namespace and serves those its label selects.
    Selector,
}

/// A namespace, a cluster id and the Services side of kuryr-controller scoped to both.
pub struct Harness {
    pub client: Client,
    pub ns: String,
    pub cluster_id: String,
    pub backend: Backend,
    pub metrics: Metrics,
    /// How long `wait_klb` and `wait_gone` wait ([`WAIT`] unless a test knows its provider is slower).
    pub wait: Duration,
    config: Config,
    stop: tokio::sync::oneshot::Sender<()>,
    task: ControllerTask,
}

impl Harness {
    pub async fn start(
        lab: &Lab,
        backend: Backend,
        tweak: impl FnOnce(&mut ServicesConfig),
    ) -> anyhow::Result<Harness> {
        Self::start_scoped(lab, backend, Scoping::Namespace, tweak).await
    }

    /// [`Harness::start`] with the controller watching every namespace and serving only its own, which it
    /// selects by a label (`--namespace-selector`), as several controllers sharing an API server do.
    pub async fn start_selecting(
        lab: &Lab,
        backend: Backend,
        tweak: impl FnOnce(&mut ServicesConfig),
    ) -> anyhow::Result<Harness> {
        Self::start_scoped(lab, backend, Scoping::Selector, tweak).await
    }

    async fn start_scoped(
        lab: &Lab,
        backend: Backend,
        scoping: Scoping,
        tweak: impl FnOnce(&mut ServicesConfig),
    ) -> anyhow::Result<Harness> {
        lab_tests::trace_controllers();
        let client = lab.kube_client().await?;
        cluster::install_crds(&client).await?;
        let run_id = format!("{:08x}", fastrand::u32(..));
        let ns = format!("svc-{}-{run_id}", backend.kind);
        let cluster_id = format!("svctest-{}-{run_id}", backend.kind);
        let mut config = Config::new(&cluster_id, &backend.pod_subnet_id);
        match scoping {
            Scoping::Namespace => {
                cluster::create_namespace(&client, &ns).await?;
                config.namespace = Some(ns.clone());
            }
            Scoping::Selector => {
                let label = format!("kuryr-test-svcsel-{run_id}");
                let object = serde_json::from_value(
                    json!({"metadata": {"name": ns, "labels": {label.clone(): "yes"}}}),
                )?;
                cluster::create_namespace_object(&client, &object).await?;
                config.namespace_selector = Some(format!("{label}=yes"));
            }
        }
        config.project_id = backend.project_id.clone();
        let mut sc = ServicesConfig::new(&backend.service_subnet_id);
        sc.member_subnet_id = Some(backend.pod_subnet_id.clone());
        sc.external_network_id = Some(backend.external_network_id.clone());
        sc.provider = Some(backend.provider.clone());
        sc.default_provider = backend.provider.clone();
        // Short on cloudsim (the fault tests wait it out); on the lab a busy Octavia is slow, not stuck (90 s
        // for one ovn member write on CI's slow machine of stop 49).
        sc.pending_limit = Duration::from_secs(if backend.sim.is_some() { 6 } else { 300 });
        sc.coalesce = Duration::from_millis(700);
        sc.poll_min = Duration::from_millis(100);
        sc.poll_max = Duration::from_secs(1);
        tweak(&mut sc);
        config.services = Some(sc);
        let metrics = Metrics::default();
        let (stop, task) = spawn_controller(&client, &backend, &config, &metrics);
        Ok(Harness {
            client,
            ns,
            cluster_id,
            backend,
            metrics,
            wait: WAIT,
            config,
            stop,
            task,
        })
    }

    /// SIGKILL's stand-in: the controller task is dropped where it stands (the client abandons its
    /// requests in flight, the cloud carries them out), then a new one starts with the same settings.
    pub fn kill_and_restart(&mut self) {
        self.task.abort();
        let (stop, task) = spawn_controller(&self.client, &self.backend, &self.config, &self.metrics);
        self.stop = stop;
        self.task = task;
    }

    pub fn pods(&self) -> Api<Pod> {
        Api::namespaced(self.client.clone(), &self.ns)
    }

    pub fn services(&self) -> Api<Service> {
        Api::namespaced(self.client.clone(), &self.ns)
    }

    /// The clusterIP of Service `name`.
    pub async fn cluster_ip(&self, name: &str) -> anyhow::Result<String> {
        self.services()
            .get(name)
            .await?
            .spec
            .and_then(|s| s.cluster_ip)
            .with_context(|| format!("Service {name} has no clusterIP"))
    }

    pub fn klbs(&self) -> Api<KuryrLoadBalancer> {
        Api::namespaced(self.client.clone(), &self.ns)
    }

    pub fn owner_filter(&self) -> String {
        Owner::cluster_filter(&self.cluster_id).join(",")
    }

    /// Load balancers tagged with this test's cluster id.
    pub async fn tagged_lbs(&self) -> anyhow::Result<Vec<loadbalancers::LoadBalancer>> {
        Ok(loadbalancers::list(&self.backend.check, vec![("tags".into(), self.owner_filter())]).await?)
    }

    /// Stops the controller, cleans up after a failure (it would put finalizers back if still running),
    /// deletes the pods (grace 0: no kubelet confirms) and the namespace.
    pub async fn finish(self, result: anyhow::Result<()>) -> anyhow::Result<()> {
        let _ = self.stop.send(());
        let stopped = tokio::time::timeout(Duration::from_secs(30), self.task).await;
        if result.is_err() {
            cluster::strip_finalizers(&Api::<Service>::namespaced(self.client.clone(), &self.ns)).await;
            cluster::strip_finalizers(&Api::<KuryrLoadBalancer>::namespaced(
                self.client.clone(),
                &self.ns,
            ))
            .await;
            let check = &self.backend.check;
            let tags = vec![(
                "tags".to_owned(),
                Owner::cluster_filter(&self.cluster_id).join(","),
            )];
            for lb in loadbalancers::list(check, tags).await.unwrap_or_default() {
                // A pending LB refuses the delete: wait it out (bounded) so nothing is left.
                let opts = kuryr_openstack::WaitOptions {
                    timeout: Duration::from_secs(120),
                    ..Default::default()
                };
                let _ = kuryr_openstack::waiter::wait_lb_active(check, &lb.id, &opts).await;
                let _ = loadbalancers::delete(check, &lb.id, true).await;
            }
            let fips = floating_ips::list(
                check,
                Filter::new().tags(&Owner::cluster_filter(&self.cluster_id)),
            )
            .await
            .unwrap_or_default();
            for f in fips {
                let _ = floating_ips::delete(check, &f.id).await;
            }
        }
        let pods = Api::<Pod>::namespaced(self.client.clone(), &self.ns);
        let dp = DeleteParams {
            grace_period_seconds: Some(0),
            ..DeleteParams::default()
        };
        for p in pods
            .list(&ListParams::default())
            .await
            .map(|l| l.items)
            .unwrap_or_default()
        {
            let _ = pods.delete(&p.name_any(), &dp).await;
        }
        cluster::delete_namespace(&self.client, &self.ns).await;
        result?;
        match stopped {
            Ok(Ok(Ok(()))) => Ok(()),
            Ok(Ok(Err(e))) => Err(e),
            Ok(Err(e)) => bail!("controller task panicked: {e}"),
            Err(_) => bail!("controller did not stop within 30 s"),
        }
    }

    /// Pods `names` on vm1 with `labels`, then Running + Ready with the given IPs (all at once, so the
    /// endpoints controller sees one change).
    pub async fn ready_pods(
        &self,
        pods: &[(String, String)],
        labels: &[(&str, &str)],
        ready: bool,
    ) -> anyhow::Result<()> {
        let api = self.pods();
        try_join_all(pods.iter().map(|(name, _)| {
            let api = api.clone();
            let pod = mk_pod(name, labels);
            async move { api.create(&PostParams::default(), &pod).await }
        }))
        .await?;
        try_join_all(pods.iter().map(|(name, ip)| {
            let api = api.clone();
            let st = json!({"status": {
                "phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}], "hostIP": "198.18.0.11",
                "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}],
            }});
            async move {
                api.patch_status(name, &PatchParams::default(), &Patch::Merge(&st))
                    .await
            }
        }))
        .await?;
        Ok(())
    }

    pub async fn set_ready(&self, name: &str, ready: bool) -> anyhow::Result<()> {
        let st = json!({"status": {"conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]}});
        self.pods()
            .patch_status(name, &PatchParams::default(), &Patch::Merge(&st))
            .await?;
        Ok(())
    }

    pub async fn delete_pods(&self, names: &[String]) -> anyhow::Result<()> {
        let dp = DeleteParams {
            grace_period_seconds: Some(0),
            ..DeleteParams::default()
        };
        let api = self.pods();
        try_join_all(names.iter().map(|n| {
            let (api, dp) = (api.clone(), dp.clone());
            async move { api.delete(n, &dp).await }
        }))
        .await?;
        Ok(())
    }

    /// Waits until the KuryrLoadBalancer `name` is Ready for its current spec and `pred` holds.
    pub async fn wait_klb(
        &self,
        name: &str,
        what: &str,
        pred: impl Fn(&KuryrLoadBalancer) -> bool,
    ) -> anyhow::Result<KuryrLoadBalancer> {
        let deadline = Instant::now() + self.wait;
        let mut last = None;
        loop {
            if let Some(k) = self.klbs().get_opt(name).await? {
                let ready = k.status.as_ref().is_some_and(|s| {
                    kuryr_api::conditions::is_condition_true(&s.conditions, "Ready")
                        && s.observed_generation == k.metadata.generation
                });
                if ready && pred(&k) {
                    return Ok(k);
                }
                last = Some(k);
            }
            if Instant::now() > deadline {
                let spec_endpoints: usize = last
                    .as_ref()
                    .map(|k| k.spec.endpoint_slices.iter().map(|s| s.endpoints.len()).sum())
                    .unwrap_or_default();
                bail!(
                    "{name}: {what} not reached within {:?}; generation {:?}, {spec_endpoints} endpoints in the spec; last status: {}",
                    self.wait,
                    last.as_ref().and_then(|k| k.metadata.generation),
                    serde_json::to_string(&last.and_then(|k| k.status)).unwrap_or_default()
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Waits until the Service and its KuryrLoadBalancer are gone.
    pub async fn wait_gone(&self, name: &str) -> anyhow::Result<()> {
        let deadline = Instant::now() + self.wait;
        while self.services().get_opt(name).await?.is_some() || self.klbs().get_opt(name).await?.is_some() {
            if Instant::now() > deadline {
                bail!(
                    "{name}: Service or KuryrLoadBalancer still there after {:?}",
                    self.wait
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Ok(())
    }

    /// Events in the namespace with this reason.
    pub async fn events(&self, reason: &str) -> anyhow::Result<Vec<Event>> {
        let api: Api<Event> = Api::namespaced(self.client.clone(), &self.ns);
        Ok(api
            .list(&ListParams::default())
            .await?
            .items
            .into_iter()
            .filter(|e| e.reason.as_deref() == Some(reason))
            .collect())
    }
}

pub fn mk_pod(name: &str, labels: &[(&str, &str)]) -> Pod {
    let mut pod = cluster::scheduled_pod(name, "vm1");
    pod.metadata.labels = Some(labels.iter().map(|(k, v)| ((*k).into(), (*v).into())).collect());
    pod
}

/// `ports`: (name, port, protocol, targetPort). `selector` None: selector-less.
pub fn mk_service(
    name: &str,
    ports: &[(&str, i32, &str, i32)],
    selector: Option<&[(&str, &str)]>,
) -> Service {
    Service {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..ObjectMeta::default()
        },
        spec: Some(ServiceSpec {
            selector: selector.map(|s| s.iter().map(|(k, v)| ((*k).into(), (*v).into())).collect()),
            ports: Some(
                ports
                    .iter()
                    .map(|(n, p, proto, t)| ServicePort {
                        name: Some((*n).into()),
                        port: *p,
                        protocol: Some((*proto).into()),
                        target_port: Some(IntOrString::Int(*t)),
                        ..ServicePort::default()
                    })
                    .collect(),
            ),
            ..ServiceSpec::default()
        }),
        ..Service::default()
    }
}

/// Random pod IPs in a /24 of the pod subnet nobody else uses in these tests.
pub fn pod_ips(n: usize) -> Vec<String> {
    let third = 20 + fastrand::u8(..40);
    (0..n).map(|i| format!("198.18.{third}.{}", 10 + i)).collect()
}

/// Listener, pool and member counts in the status.
pub fn shape(k: &KuryrLoadBalancer) -> (usize, usize, usize) {
    k.status
        .as_ref()
        .map_or((0, 0, 0), |s| (s.listeners.len(), s.pools.len(), s.members.len()))
}

/// The LB id in the status.
pub fn lb_id(k: &KuryrLoadBalancer) -> String {
    k.status
        .as_ref()
        .and_then(|s| s.loadbalancer.as_ref())
        .map(|l| l.id.clone())
        .unwrap_or_default()
}

/// The floating IP of a type=LoadBalancer Service, checked the way an operator would: it sits on the
/// load balancer's VIP port, comes from the external network, and is the Service's ingress IP.
pub async fn exposed_floating_ip(
    h: &Harness,
    svc: &str,
    k: &KuryrLoadBalancer,
) -> anyhow::Result<floating_ips::FloatingIp> {
    let st = k.status.clone().unwrap_or_default();
    let info = st.service_pub_ip_info.context("no floating IP in the status")?;
    let vip_port = st.loadbalancer.map(|l| l.port_id).unwrap_or_default();
    let fip = floating_ips::get(&h.backend.check, &info.ip_id).await?;
    anyhow::ensure!(
        fip.port_id.as_deref() == Some(vip_port.as_str()),
        "floating IP on {:?}, the VIP port is {vip_port}",
        fip.port_id
    );
    anyhow::ensure!(
        fip.floating_network_id == h.backend.external_network_id,
        "floating IP on network {}, not the external network",
        fip.floating_network_id
    );
    let ingress = h
        .services()
        .get(svc)
        .await?
        .status
        .and_then(|s| s.load_balancer)
        .and_then(|l| l.ingress)
        .and_then(|i| i.first().and_then(|i| i.ip.clone()));
    anyhow::ensure!(
        ingress.as_deref() == Some(fip.floating_ip_address.as_str()),
        "Service ingress {ingress:?}, floating IP {}",
        fip.floating_ip_address
    );
    Ok(fip)
}

/// `Supported` condition of the KuryrLoadBalancer: (status, reason).
pub fn supported(k: &KuryrLoadBalancer) -> Option<(String, String)> {
    let c = kuryr_api::conditions::find_condition(&k.status.as_ref()?.conditions, "Supported")?;
    Some((format!("{:?}", c.status), c.reason.clone()))
}
