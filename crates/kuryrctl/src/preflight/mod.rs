//! `kuryrctl preflight`: is this cloud ready for kuryr-rs? Extensions, Octavia version and providers, the
//! security-group firewall, and each quota against what the cluster needs; and what an install needs: the
//! CRDs of this build, every Node's VM port (a trunk parent for nested-vlan), the configured subnets and
//! external network. Exit code 1 on any FAIL.

pub mod checks;
pub mod crd_drift;
pub mod lookups;
pub mod needs;
pub mod settings;

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Namespace, Node, Pod, Service};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use kube::api::{Api, ListParams};
use kuryr_openstack::errors::Service as OsService;
use kuryr_openstack::neutron::{extensions, quotas};
use kuryr_openstack::octavia::{self, listeners, loadbalancers, pools};
use kuryr_openstack::{Cloud, Request};
use serde::Serialize;

pub use checks::{evaluate, Check, Facts, Outcome, ProjectQuota, QuotaLine};
pub use needs::Counts;
pub use settings::Settings;

use crate::cli::{Cli, PreflightArgs};
use crate::output::{emit, toned, Format, Progress, Table, Tone};

#[derive(Debug, Serialize)]
pub struct Report {
    /// `kuryrctl <version> (<commit>)`: the build whose CRDs and lookups were checked against.
    pub version: String,
    pub passed: bool,
    pub counts: Counts,
    pub counts_source: String,
    pub checks: Vec<Check>,
}

pub async fn run(
    cli: &Cli,
    a: &PreflightArgs,
    fmt: Format,
    out: &mut dyn std::io::Write,
) -> anyhow::Result<i32> {
    // Before connecting: a bad settings file is the operator's to fix, not a check line.
    let settings = settings::resolve(a)?;
    let mut progress = Progress::new(9);
    let cloud = crate::connect::cloud(cli).await?;
    progress.step("connected to OpenStack");
    let project = crate::connect::project(cli, &cloud)
        .ok_or_else(|| anyhow::anyhow!("no project: pass --project-id or use a project-scoped cloud"))?;
    let kube = if a.no_kubernetes {
        None
    } else {
        Some(crate::connect::kube_client(cli).await)
    };
    let facts = gather(&cloud, &project, kube, a, &settings, &mut progress).await;
    progress.finish();
    let report = report(facts);
    if fmt == Format::Table {
        writeln!(out, "{}", report.version)?;
    }
    emit(out, fmt, &table(&report), &report)?;
    Ok(if report.passed { 0 } else { 1 })
}

pub fn report(facts: Facts) -> Report {
    let checks = evaluate(&facts);
    Report {
        version: kuryr_version::line("kuryrctl"),
        passed: checks.iter().all(|c| c.outcome != Outcome::Fail),
        counts: facts.counts,
        counts_source: facts.counts_source,
        checks,
    }
}

pub fn table(r: &Report) -> Table {
    let mut t = Table::new(vec![
        "CHECK", "RESULT", "LIMIT", "USED", "NEEDS", "SEED MIN", "DETAIL",
    ]);
    for c in &r.checks {
        let tone = match c.outcome {
            Outcome::Pass => Tone::Good,
            Outcome::Warn => Tone::Warn,
            Outcome::Fail => Tone::Bad,
            Outcome::Skip => Tone::Plain,
        };
        let (limit, used, needs, seed) = match &c.quota {
            Some(q) => (
                if q.limit < 0 {
                    "unlimited".to_owned()
                } else {
                    q.limit.to_string()
                },
                q.used.map_or("?".to_owned(), |u| u.to_string()),
                q.needed.to_string(),
                q.seed_minimum.map_or("-".to_owned(), |m| m.to_string()),
            ),
            None => Default::default(),
        };
        t.row(vec![
            c.check.clone().into(),
            toned(c.outcome.label(), tone),
            limit.into(),
            used.into(),
            needs.into(),
            seed.into(),
            c.detail.clone().into(),
        ]);
    }
    t
}

/// The progress steps that read Kubernetes (stepped over at once when it is not read).
const KUBERNETES_STEPS: [&str; 3] = ["cluster counts", "kuryr CRDs", "node ports"];

fn err_text(e: impl std::fmt::Display) -> String {
    e.to_string()
}

/// Reads everything [`evaluate`] needs. Nothing here fails the command: what cannot be read becomes a
/// failed or warned line.
pub async fn gather(
    cloud: &Cloud,
    project: &str,
    kube: Option<anyhow::Result<kube::Client>>,
    a: &PreflightArgs,
    settings: &Settings,
    progress: &mut Progress,
) -> Facts {
    let mut f = Facts {
        vif_driver: settings.vif_driver,
        ..Facts::default()
    };
    match extensions::list(cloud).await {
        Ok(exts) => f.neutron_extensions = exts.into_iter().map(|e| e.alias).collect(),
        Err(e) => f.agents = Err(err_text(e)),
    }
    progress.step("neutron extensions");
    match cloud.octavia_features().await {
        Ok(o) => {
            f.octavia_version = Ok(o.version);
            f.octavia_providers = o.providers.clone();
        }
        Err(e) => f.octavia_version = Err(err_text(e)),
    }
    progress.step("octavia version and providers");
    f.agents = agent_types(cloud).await;
    progress.step("neutron agents");
    f.neutron_quota = neutron_quota(cloud, project, f.neutron_extensions.contains("quota_details")).await;
    if f.octavia_version.is_ok() {
        f.octavia_quota = octavia_quota(cloud, project).await;
    }
    let details = f.neutron_extensions.contains("quota_details");
    for p in &settings.namespace_projects {
        f.project_quotas.push(ProjectQuota {
            project: p.clone(),
            counts: None,
            neutron_quota: neutron_quota(cloud, p, details).await,
        });
    }
    progress.step("quotas");
    if let Some(g) = &settings.pod_subnet {
        f.pod_subnet = Some(lookups::subnet(cloud, g).await);
    }
    if let Some(g) = &settings.service_subnet {
        f.service_subnet = Some(lookups::subnet(cloud, g).await);
    }
    if let Some(g) = &settings.secondary_pod_subnet {
        f.secondary_pod_subnet = Some(lookups::subnet(cloud, g).await);
    }
    if let Some(g) = &settings.secondary_service_subnet {
        f.secondary_service_subnet = Some(lookups::subnet(cloud, g).await);
    }
    if let Some(g) = &settings.external_network {
        f.external_network = Some(lookups::network(cloud, g).await);
    }
    for g in &settings.additional_subnets {
        f.additional_subnets.push(lookups::subnet(cloud, g).await);
    }
    progress.step("configured subnets and network");
    let flags = Counts {
        nodes: a.nodes.unwrap_or(0),
        namespaces: a.namespaces.unwrap_or(0),
        services: a.services.unwrap_or(0),
        service_ports: a.services.unwrap_or(0),
        lb_services: 0,
        policies: a.policies.unwrap_or(0),
        pods: a.pods.unwrap_or(0),
        pool_batch: a.pool_batch,
    };
    match kube {
        None => {
            f.counts = flags;
            f.counts_source = "flags".into();
            KUBERNETES_STEPS.iter().for_each(|s| progress.step(s));
        }
        Some(Err(e)) => {
            f.counts = flags;
            f.counts_source = format!("flags (Kubernetes unreachable: {e:#})");
            let why = format!("Kubernetes unreachable: {e:#}");
            f.installed_crds = Some(Err(why.clone()));
            f.nodes = Some(Err(why));
            KUBERNETES_STEPS.iter().for_each(|s| progress.step(s));
        }
        Some(Ok(client)) => {
            f.kubernetes_version = Some(client.apiserver_version().await.map_err(err_text));
            match kube_counts(&client, a).await {
                Ok(counts) => {
                    f.counts = counts;
                    f.counts_source = "kubernetes".into();
                    if let Ok(per) = project_counts(&client, &settings.namespace_projects).await {
                        for q in &mut f.project_quotas {
                            q.counts = Some(per.get(&q.project).copied().unwrap_or_default());
                        }
                    }
                }
                Err(e) => {
                    f.counts = flags;
                    f.counts_source = format!("flags (Kubernetes unreadable: {e:#})");
                }
            }
            progress.step(KUBERNETES_STEPS[0]);
            f.installed_crds = Some(lookups::installed_crds(&client).await);
            progress.step(KUBERNETES_STEPS[1]);
            // Read whatever the default driver: a Node's pod-vif label may ask for a nested one.
            f.nodes = Some(lookups::node_ports(&client, cloud).await);
            progress.step(KUBERNETES_STEPS[2]);
        }
    }
    f
}

async fn agent_types(cloud: &Cloud) -> Result<Vec<String>, String> {
    let op = "neutron.agents.list";
    let resp = cloud
        .execute(Request::new(
            OsService::Network,
            op,
            reqwest::Method::GET,
            "agents",
        ))
        .await
        .map_err(err_text)?;
    let v = resp.json(OsService::Network, op).map_err(err_text)?;
    Ok(v["agents"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|x| x["agent_type"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default())
}

async fn neutron_quota(cloud: &Cloud, project: &str, details: bool) -> BTreeMap<String, QuotaLine> {
    if details {
        if let Ok(d) = quotas::details(cloud, project).await {
            return d
                .into_iter()
                .map(|(k, v)| {
                    (
                        k,
                        QuotaLine {
                            limit: v.limit,
                            used: Some(v.used + v.reserved),
                        },
                    )
                })
                .collect();
        }
    }
    quotas::get(cloud, project)
        .await
        .map(|q| {
            q.into_iter()
                .map(|(k, limit)| (k, QuotaLine { limit, used: None }))
                .collect()
        })
        .unwrap_or_default()
}

async fn octavia_quota(cloud: &Cloud, project: &str) -> BTreeMap<String, QuotaLine> {
    let Ok(limits) = octavia::quotas::get(cloud, project).await else {
        return BTreeMap::new();
    };
    let q = || vec![("project_id".to_owned(), project.to_owned())];
    let used_lbs = loadbalancers::list(cloud, q()).await.ok().map(|l| l.len());
    let used_listeners = listeners::list(cloud, q()).await.ok().map(|l| l.len());
    let used_pools = pools::list(cloud, q()).await.ok().map(|l| l.len());
    let limit = |a: &str, b: &str| limits.get(a).or_else(|| limits.get(b)).copied().unwrap_or(-1);
    let line = |limit: i64, used: Option<usize>| QuotaLine {
        limit,
        used: used.and_then(|u| i64::try_from(u).ok()),
    };
    BTreeMap::from([
        (
            "load_balancer".to_owned(),
            line(limit("load_balancer", "loadbalancer"), used_lbs),
        ),
        (
            "listener".to_owned(),
            line(limit("listener", "listener"), used_listeners),
        ),
        ("pool".to_owned(), line(limit("pool", "pool"), used_pools)),
    ])
}

/// Per listed project, the namespaces annotated with it and their pods and NetworkPolicies.
async fn project_counts(
    client: &kube::Client,
    projects: &[String],
) -> anyhow::Result<BTreeMap<String, Counts>> {
    let mut out: BTreeMap<String, Counts> = BTreeMap::new();
    if projects.is_empty() {
        return Ok(out);
    }
    let lp = ListParams::default();
    let mut of_ns: BTreeMap<String, String> = BTreeMap::new();
    for ns in Api::<Namespace>::all(client.clone())
        .list_metadata(&lp)
        .await?
        .items
    {
        let asked = ns
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(kuryr_api::annotations::PROJECT))
            .map(|p| p.trim().to_owned());
        if let (Some(name), Some(p)) = (ns.metadata.name, asked.filter(|p| projects.contains(p))) {
            out.entry(p.clone()).or_default().namespaces += 1;
            of_ns.insert(name, p);
        }
    }
    let pods = Api::<Pod>::all(client.clone()).list_metadata(&lp).await?.items;
    for ns in pods.iter().filter_map(|p| p.metadata.namespace.as_ref()) {
        if let Some(p) = of_ns.get(ns) {
            out.entry(p.clone()).or_default().pods += 1;
        }
    }
    let policies = Api::<NetworkPolicy>::all(client.clone())
        .list_metadata(&lp)
        .await?
        .items;
    for ns in policies.iter().filter_map(|p| p.metadata.namespace.as_ref()) {
        if let Some(p) = of_ns.get(ns) {
            out.entry(p.clone()).or_default().policies += 1;
        }
    }
    Ok(out)
}

/// Counts from the cluster (flags given explicitly win).
async fn kube_counts(client: &kube::Client, a: &PreflightArgs) -> anyhow::Result<Counts> {
    let lp = ListParams::default();
    let nodes = Api::<Node>::all(client.clone())
        .list_metadata(&lp)
        .await?
        .items
        .len();
    let namespaces = Api::<Namespace>::all(client.clone())
        .list_metadata(&lp)
        .await?
        .items
        .len();
    let pods = Api::<Pod>::all(client.clone())
        .list_metadata(&lp)
        .await?
        .items
        .len();
    let policies = Api::<NetworkPolicy>::all(client.clone())
        .list_metadata(&lp)
        .await?
        .items
        .len();
    let services = Api::<Service>::all(client.clone()).list(&lp).await?.items;
    // Headless Services get no load balancer.
    let balanced: Vec<&Service> = services
        .iter()
        .filter(|s| s.spec.as_ref().and_then(|s| s.cluster_ip.as_deref()) != Some("None"))
        .collect();
    let service_ports: usize = balanced
        .iter()
        .map(|s| s.spec.as_ref().and_then(|s| s.ports.as_ref()).map_or(0, Vec::len))
        .sum();
    let lb_services = balanced
        .iter()
        .filter(|s| s.spec.as_ref().and_then(|s| s.type_.as_deref()) == Some("LoadBalancer"))
        .count();
    let n = |x: usize| u64::try_from(x).unwrap_or(u64::MAX);
    Ok(Counts {
        nodes: a.nodes.unwrap_or(n(nodes)),
        namespaces: a.namespaces.unwrap_or(n(namespaces)),
        services: a.services.unwrap_or(n(balanced.len())),
        service_ports: a.services.unwrap_or(n(service_ports)),
        lb_services: n(lb_services),
        policies: a.policies.unwrap_or(n(policies)),
        pods: a.pods.unwrap_or(n(pods)),
        pool_batch: a.pool_batch,
    })
}
