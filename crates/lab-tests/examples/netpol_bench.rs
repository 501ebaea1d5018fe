//! Bench (not a test): security groups, rules and Neutron calls of the NetworkPolicy controller's path
//! (watch objects → `inputs::build` → compile → observe → diff → execute) on an in-process cloudsim, for
//! 100 pods × 20 policies, then for a no-op resync, one pod's label change and one pod deleted.
//!
//! `cargo run -p lab-tests --example netpol_bench [-- OUT.json]` (default bench/results/netpol-100x20.json).
//! The scenario is the one of docs/network-policy.md: 5 namespaces × 20 pods (8 web, 6 api, 4 db, 2 cache),
//! a Service per app and namespace, 4 policies per namespace.

use std::collections::BTreeMap;
use std::sync::Arc;

use anyhow::Context as _;
use kuryr_api::{KuryrPort, Namespace, NetworkPolicy, Service, SlimPod};
use kuryr_cloudsim::{Profile, Sim};
use kuryr_controller::policies::controller::{converge, SyncReport};
use kuryr_controller::policies::inputs::{build, Objects};
use kuryr_controller::policies::neutron::Target;
use kuryr_controller::policies::PolicyConfig;
use kuryr_openstack::neutron::ports::{self, CreatePort, FixedIpRequest};
use kuryr_openstack::neutron::{networks, quotas, subnets};
use kuryr_openstack::{ClientConfig, Cloud, Owner};
use serde_json::{json, Value};

const CLUSTER: &str = "bench";
const APPS: [(&str, &str, u16, usize); 4] = [
    ("web", "http", 80, 8),
    ("api", "http", 8080, 6),
    ("db", "pg", 5432, 4),
    ("cache", "redis", 6379, 2),
];

fn obj<T: serde::de::DeserializeOwned>(v: Value) -> anyhow::Result<Arc<T>> {
    Ok(Arc::new(serde_json::from_value(v)?))
}

struct World {
    namespaces: Vec<Arc<Namespace>>,
    pods: Vec<Arc<SlimPod>>,
    kuryrports: Vec<Arc<KuryrPort>>,
    policies: Vec<Arc<NetworkPolicy>>,
    services: Vec<Arc<Service>>,
}

impl World {
    fn objects(&self) -> Objects<'_> {
        Objects {
            namespaces: &self.namespaces,
            pods: &self.pods,
            kuryrports: &self.kuryrports,
            policies: &self.policies,
            services: &self.services,
        }
    }
}

async fn world(cloud: &Cloud) -> anyhow::Result<World> {
    let net = networks::create(cloud, &networks::CreateNetwork::named("bench-pods"), &[]).await?;
    let subnet = subnets::create(cloud, &subnets::CreateSubnet::v4(&net.id, "10.0.0.0/16"), &[]).await?;
    let mut w = World {
        namespaces: Vec::new(),
        pods: Vec::new(),
        kuryrports: Vec::new(),
        policies: Vec::new(),
        services: Vec::new(),
    };
    for n in 0..5 {
        let ns = format!("team-{n}");
        let env = if n % 2 == 0 { "prod" } else { "dev" };
        w.namespaces.push(obj(
            json!({"metadata": {"name": ns, "labels": {"team": ns, "env": env}}}),
        )?);
        let mut reqs = Vec::new();
        let mut names = Vec::new();
        for (app, pname, pnum, count) in APPS {
            for _ in 0..count {
                let name = format!("{app}-{}", names.len() + 1);
                let uid = format!("uid-{ns}-{name}");
                reqs.push(
                    CreatePort {
                        fixed_ips: vec![FixedIpRequest {
                            subnet_id: Some(subnet.id.clone()),
                            ip_address: None,
                        }],
                        ..CreatePort::on_network(&net.id)
                    }
                    .tagged(Owner::new(CLUSTER, "KuryrPort", &uid).tags()?),
                );
                w.pods.push(obj(json!({
                    "metadata": {"namespace": ns, "name": name, "uid": uid,
                                 "labels": {"app": app, "pod-template-hash": format!("h{}", names.len() % 3)}},
                    "spec": {"containers": [{"name": "c", "ports": [{"name": pname, "containerPort": pnum}]}]}
                }))?);
                names.push(name);
            }
            w.services.push(obj(json!({
                "metadata": {"namespace": ns, "name": app},
                "spec": {"clusterIP": format!("10.96.{n}.{}", names.len()), "selector": {"app": app},
                         "ports": [{"port": pnum, "targetPort": pname}]}
            }))?);
        }
        let made = ports::bulk_create(cloud, &reqs).await?;
        for (name, port) in names.iter().zip(&made) {
            w.kuryrports.push(obj(json!({
                "apiVersion": "openstack.org/v1", "kind": "KuryrPort",
                "metadata": {"namespace": ns, "name": name},
                "spec": {"podUid": "u", "podNodeName": "n"},
                "status": {"vifs": {"eth0": {"default": true, "vif": {"type": "nested-vlan", "portId": port.id,
                    "networkId": net.id, "mac": port.mac_address,
                    "ips": [{"address": port.ip().unwrap_or_default(), "cidr": "10.0.0.0/16"}]}}}}
            }))?);
        }
        let np = |name: &str, spec: Value| {
            obj::<NetworkPolicy>(json!({"metadata": {"namespace": ns, "name": name}, "spec": spec}))
        };
        w.policies.push(np("default-deny", json!({"podSelector": {}}))?);
        w.policies.push(np("web", json!({"podSelector": {"matchLabels": {"app": "web"}},
            "ingress": [{"from": [{"namespaceSelector": {}}, {"ipBlock": {"cidr": "0.0.0.0/0", "except": ["10.0.0.0/8"]}}],
                         "ports": [{"port": "http"}]}]}))?);
        w.policies.push(np("api", json!({"podSelector": {"matchLabels": {"app": "api"}},
            "ingress": [{"from": [{"podSelector": {"matchLabels": {"app": "web"}}},
                                  {"namespaceSelector": {"matchLabels": {"env": "prod"}}, "podSelector": {"matchLabels": {"app": "web"}}}],
                         "ports": [{"port": 8080}]}]}))?);
        w.policies.push(np("db", json!({"podSelector": {"matchLabels": {"app": "db"}}, "policyTypes": ["Ingress", "Egress"],
            "ingress": [{"from": [{"podSelector": {"matchLabels": {"app": "api"}}}], "ports": [{"port": 5432}]}],
            "egress": [{"to": [{"podSelector": {"matchLabels": {"app": "cache"}}}], "ports": [{"port": "redis"}]},
                       {"to": [{"ipBlock": {"cidr": "0.0.0.0/0", "except": ["10.0.0.0/8"]}}], "ports": [{"port": 443}]}]}))?);
    }
    Ok(w)
}

/// One converge, with the Neutron calls it made (by op) from the client's own counters.
async fn measure(
    cloud: &Cloud,
    w: &World,
    config: &PolicyConfig,
) -> anyhow::Result<(SyncReport, BTreeMap<String, u64>)> {
    let before = cloud.metrics().snapshot();
    let target = Target {
        cloud,
        cluster_id: CLUSTER,
        project_id: &cloud.project_id().unwrap_or_default(),
        namespace_projects: &BTreeMap::new(),
    };
    let inputs = build(&w.objects(), true);
    let report = converge(&target, &inputs, &config.compile_options())
        .await?
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let after = cloud.metrics().snapshot();
    let mut by_op = BTreeMap::new();
    for op in after.calls.keys().map(|(op, _)| op.clone()) {
        let n = after.count(&op) - before.count(&op);
        if n > 0 {
            by_op.insert(op, n);
        }
    }
    Ok((report, by_op))
}

fn summary(what: &str, r: &SyncReport, calls: &BTreeMap<String, u64>) -> Value {
    let total: u64 = calls.values().sum();
    println!(
        "{what:<28} {:>4} SGs {:>5} rules {:>5} Neutron calls (plan {:>4}): {calls:?}",
        r.compiled.security_groups.len(),
        r.compiled.rule_count(),
        total,
        r.plan_calls
    );
    json!({
        "security_groups": r.compiled.security_groups.len(),
        "rules": r.compiled.rule_count(),
        "neutron_calls": total,
        "plan_calls": r.plan_calls,
        "calls_by_op": calls,
        "groups_created": r.applied.groups_created,
        "rules_created": r.applied.rules_created,
        "rules_deleted": r.applied.rules_deleted,
        "ports_updated": r.applied.ports_updated,
        "groups_deleted": r.applied.groups_deleted,
    })
}

/// Index of team-0's pod `name` (pods and KuryrPorts are in the same order).
fn pod_index(w: &World, name: &str) -> anyhow::Result<usize> {
    w.pods
        .iter()
        .position(|p| {
            p.metadata.name.as_deref() == Some(name) && p.metadata.namespace.as_deref() == Some("team-0")
        })
        .with_context(|| format!("pod {name}"))
}

async fn relabel(
    cloud: &Cloud,
    w: &mut World,
    config: &PolicyConfig,
    pod: &str,
    app: &str,
    what: &str,
) -> anyhow::Result<Value> {
    let i = pod_index(w, pod)?;
    let mut p = (*w.pods[i]).clone();
    p.metadata
        .labels
        .get_or_insert_with(Default::default)
        .insert("app".into(), app.into());
    w.pods[i] = Arc::new(p);
    let (r, c) = measure(cloud, w, config).await?;
    Ok(summary(what, &r, &c))
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let out = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "bench/results/netpol-100x20.json".into());
    let (_, handle) = Sim::new(Profile::zero()).spawn_on("127.0.0.1:0").await?;
    let dir = std::env::temp_dir().join(format!("kuryr-netpol-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let yaml = dir.join("clouds.yaml");
    std::fs::write(&yaml, handle.clouds_yaml("sim"))?;
    let cloud = Cloud::connect(ClientConfig::clouds_yaml(Some(yaml), "sim")).await?;
    let _ = std::fs::remove_dir_all(&dir);
    // Neutron's defaults (10 SGs, 100 rules) are far below what 20 policies need: raise them, as an
    // operator would (docs/network-policy.md, Quotas).
    let project = cloud.project_id().context("project")?;
    let limits = [
        ("security_group", 200),
        ("security_group_rule", 2000),
        ("port", 500),
    ];
    quotas::update(
        &cloud,
        &project,
        &limits.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
    )
    .await?;
    let mut w = world(&cloud).await?;
    let opts = PolicyConfig {
        enabled: true,
        service_cidrs: vec!["10.96.0.0/12".parse()?],
        ..PolicyConfig::default()
    };
    println!("100 pods x 20 policies through the controller path on cloudsim:");
    let (r0, c0) = measure(&cloud, &w, &opts).await?;
    let initial = summary("from an empty cloud", &r0, &c0);
    let (r1, c1) = measure(&cloud, &w, &opts).await?;
    let resync = summary("resync, nothing changed", &r1, &c1);
    // One api pod of team-0 becomes web: its named port `http` is 8080, a number web's named-port rule
    // did not cover yet, so one variant group is added besides its port update.
    let label = relabel(
        &cloud,
        &mut w,
        &opts,
        "api-9",
        "web",
        "one label change (api->web)",
    )
    .await?;
    // One web pod of team-0 becomes api: only memberships change.
    let label2 = relabel(
        &cloud,
        &mut w,
        &opts,
        "web-1",
        "api",
        "one label change (web->api)",
    )
    .await?;
    // One pod deleted with its port (the KuryrPort controller's call, not counted): groups lose a member.
    let i = pod_index(&w, "db-16")?;
    let port_id = w.kuryrports[i]
        .status
        .as_ref()
        .and_then(|s| s.default_vif())
        .map(|(_, v)| v.port_id.clone())
        .context("port")?;
    ports::delete(&cloud, &port_id).await?;
    w.pods.remove(i);
    w.kuryrports.remove(i);
    let (r3, c3) = measure(&cloud, &w, &opts).await?;
    let removed = summary("one pod deleted", &r3, &c3);
    let result = json!({
        "bench": "netpol-100x20",
        "backend": "kuryr-cloudsim (Profile::zero)",
        "path": "kuryr_controller::policies::controller::converge (inputs::build -> compile -> observe -> diff -> execute)",
        "pods": 100, "policies": 20, "namespaces": 5,
        "initial": initial, "resync": resync, "label_change_api_to_web": label,
        "label_change_web_to_api": label2, "pod_deleted": removed,
        "upstream_scheme_rules": 756,
    });
    if let Some(parent) = std::path::Path::new(&out).parent() {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::write(&out, serde_json::to_string_pretty(&result)? + "\n")?;
    println!("written to {out}");
    drop(handle);
    Ok(())
}
