//! Pod and Service churn for the chaos suite, driven by a seeded RNG, plus the little a kubelet would do:
//! once a pod's KuryrPort is Ready the pod is marked Running with the port's IP (Ready or not, at random),
//! so the endpoints controller gives the Services backends. Every API error is counted, never fatal: the
//! API server is restarted under the churn.

use std::collections::BTreeMap;

use kuryr_api::k8s_openapi::api::core::v1::{ServicePort, ServiceSpec};
use kuryr_api::k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kuryr_api::{
    Api, Client, DeleteParams, KuryrPort, ListParams, ObjectMeta, Patch, PatchParams, Pod, PostParams,
    ResourceExt, Service,
};
use serde::Serialize;
use serde_json::json;

/// Label values pods are spread over; at most one Service selects each.
const APPS: [&str; 4] = ["a", "b", "c", "d"];
pub const TARGET_PORT: i32 = 8080;

#[derive(Debug, Clone, Default, Serialize)]
pub struct ChurnStats {
    pub pods_created: u32,
    pub pods_deleted: u32,
    pub services_created: u32,
    pub services_deleted: u32,
    pub readiness_flips: u32,
    pub pods_started: u32,
    pub api_errors: u32,
}

pub struct Churn {
    client: Client,
    pub ns: String,
    /// Node name -> its InternalIP (the hostIP of its pods).
    nodes: BTreeMap<String, String>,
    pub rng: fastrand::Rng,
    seq: u32,
    pub max_pods: usize,
    pub stats: ChurnStats,
}

fn grace0() -> DeleteParams {
    DeleteParams {
        grace_period_seconds: Some(0),
        ..DeleteParams::default()
    }
}

impl Churn {
    pub fn new(client: Client, ns: &str, nodes: BTreeMap<String, String>, seed: u64) -> Self {
        Self {
            client,
            ns: ns.to_owned(),
            nodes,
            rng: fastrand::Rng::with_seed(seed),
            seq: 0,
            max_pods: 30,
            stats: ChurnStats::default(),
        }
    }

    fn pods(&self) -> Api<Pod> {
        Api::namespaced(self.client.clone(), &self.ns)
    }

    fn services(&self) -> Api<Service> {
        Api::namespaced(self.client.clone(), &self.ns)
    }

    fn count<T, E>(&mut self, r: Result<T, E>) -> Option<T> {
        match r {
            Ok(v) => Some(v),
            Err(_) => {
                self.stats.api_errors += 1;
                None
            }
        }
    }

    /// One random change: mostly pod creates and deletes, sometimes a Service replaced or a pod's
    /// readiness flipped.
    pub async fn step(&mut self) {
        let live = self.count(self.pods().list(&ListParams::default()).await);
        let Some(live) = live else { return };
        let live: Vec<Pod> = live
            .items
            .into_iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .collect();
        let roll = self.rng.u32(0..100);
        if roll < 45 && live.len() < self.max_pods {
            let n = self.rng.usize(1..=5).min(self.max_pods - live.len());
            self.create_pods(n).await;
        } else if roll < 80 && !live.is_empty() {
            let n = self.rng.usize(1..=3).min(live.len());
            for _ in 0..n {
                let victim = live[self.rng.usize(..live.len())].name_any();
                let r = self.pods().delete(&victim, &grace0()).await;
                if self.count(r).is_some() {
                    self.stats.pods_deleted += 1;
                }
            }
        } else if roll < 90 {
            self.replace_service().await;
        } else if let Some(p) = live.get(self.rng.usize(..live.len().max(1))) {
            let running = p
                .status
                .as_ref()
                .and_then(|s| s.phase.as_deref())
                .is_some_and(|ph| ph == "Running");
            if running {
                let ready = !pod_ready(p);
                let name = p.name_any();
                let r = self.set_ready(&name, ready).await;
                if self.count(r).is_some() {
                    self.stats.readiness_flips += 1;
                }
            }
        }
    }

    pub async fn create_pods(&mut self, n: usize) {
        let nodes: Vec<String> = self.nodes.keys().cloned().collect();
        for _ in 0..n {
            self.seq += 1;
            let name = format!("p{}", self.seq);
            let node = &nodes[self.rng.usize(..nodes.len())];
            let mut pod = lab_tests::cluster::scheduled_pod(&name, node);
            let app = APPS[self.rng.usize(..APPS.len())];
            pod.metadata.labels = Some([("app".to_owned(), app.to_owned())].into());
            let r = self.pods().create(&PostParams::default(), &pod).await;
            if self.count(r).is_some() {
                self.stats.pods_created += 1;
            }
        }
    }

    /// Creates a Service for every app that has none yet.
    pub async fn ensure_services(&mut self) {
        let Some(list) = self.count(self.services().list(&ListParams::default()).await) else {
            return;
        };
        for app in APPS {
            let has = list.items.iter().any(|s| {
                s.metadata.deletion_timestamp.is_none()
                    && s.spec
                        .as_ref()
                        .and_then(|sp| sp.selector.as_ref())
                        .and_then(|sel| sel.get("app"))
                        .is_some_and(|a| a == app)
            });
            if !has {
                self.create_service(app).await;
            }
        }
    }

    async fn create_service(&mut self, app: &str) {
        self.seq += 1;
        let svc = service(&format!("svc-{app}-{}", self.seq), app);
        let r = self.services().create(&PostParams::default(), &svc).await;
        if self.count(r).is_some() {
            self.stats.services_created += 1;
        }
    }

    /// Deletes one Service and makes a new one (new name) for the same app.
    async fn replace_service(&mut self) {
        let Some(list) = self.count(self.services().list(&ListParams::default()).await) else {
            return;
        };
        let live: Vec<&Service> = list
            .items
            .iter()
            .filter(|s| s.metadata.deletion_timestamp.is_none())
            .collect();
        if let Some(victim) = live.get(self.rng.usize(..live.len().max(1))) {
            let name = victim.name_any();
            let r = self.services().delete(&name, &DeleteParams::default()).await;
            if self.count(r).is_some() {
                self.stats.services_deleted += 1;
            }
        }
        self.ensure_services().await;
    }

    async fn set_ready(&self, name: &str, ready: bool) -> kube::Result<Pod> {
        let st = json!({"status": {"conditions": [
            {"type": "Ready", "status": if ready { "True" } else { "False" }}]}});
        self.pods()
            .patch_status(name, &PatchParams::default(), &Patch::Merge(&st))
            .await
    }

    /// What kubelet would do once the network is up: pods whose KuryrPort is Ready become Running with
    /// the port's IP; one in five starts not Ready.
    pub async fn kubelet(&mut self) {
        let kps: Api<KuryrPort> = Api::namespaced(self.client.clone(), &self.ns);
        let Some(kps) = self.count(kps.list(&ListParams::default()).await) else {
            return;
        };
        let Some(pods) = self.count(self.pods().list(&ListParams::default()).await) else {
            return;
        };
        for pod in pods.items {
            let started = pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running");
            if started || pod.metadata.deletion_timestamp.is_some() {
                continue;
            }
            let Some(kp) = kps
                .items
                .iter()
                .find(|k| k.name_any() == pod.name_any() && Some(&k.spec.pod_uid) == pod.uid().as_ref())
            else {
                continue;
            };
            if !lab_tests::cluster::is_ready(kp) {
                continue;
            }
            let Some(ip) = kp
                .status
                .as_ref()
                .and_then(|s| s.vifs.get("eth0"))
                .and_then(|v| v.vif.ips.first())
                .map(|i| i.address.clone())
            else {
                continue;
            };
            let node = pod
                .spec
                .as_ref()
                .and_then(|s| s.node_name.clone())
                .unwrap_or_default();
            let host_ip = self.nodes.get(&node).cloned().unwrap_or_default();
            let ready = self.rng.u32(0..5) != 0;
            let st = json!({"status": {
                "phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}], "hostIP": host_ip,
                "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}],
            }});
            let r = self
                .pods()
                .patch_status(&pod.name_any(), &PatchParams::default(), &Patch::Merge(&st))
                .await;
            if self.count(r).is_some() {
                self.stats.pods_started += 1;
            }
        }
    }

    /// Deletes every pod and Service of the namespace (the end of the run).
    pub async fn delete_all(&mut self) {
        if let Some(list) = self.count(self.pods().list(&ListParams::default()).await) {
            for p in list {
                let r = self.pods().delete(&p.name_any(), &grace0()).await;
                self.count(r);
            }
        }
        if let Some(list) = self.count(self.services().list(&ListParams::default()).await) {
            for s in list {
                let r = self
                    .services()
                    .delete(&s.name_any(), &DeleteParams::default())
                    .await;
                self.count(r);
            }
        }
    }
}

fn pod_ready(p: &Pod) -> bool {
    p.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .any(|c| c.type_ == "Ready" && c.status == "True")
}

fn service(name: &str, app: &str) -> Service {
    Service {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..ObjectMeta::default()
        },
        spec: Some(ServiceSpec {
            selector: Some([("app".to_owned(), app.to_owned())].into()),
            ports: Some(vec![ServicePort {
                name: Some("web".into()),
                port: 80,
                protocol: Some("TCP".into()),
                target_port: Some(IntOrString::Int(TARGET_PORT)),
                ..ServicePort::default()
            }]),
            ..ServiceSpec::default()
        }),
        ..Service::default()
    }
}
