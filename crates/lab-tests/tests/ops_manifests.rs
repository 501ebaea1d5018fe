//! deploy/: every manifest of the kustomize base passes a server-side dry run against the lab's
//! kube-apiserver (through kube-rs, and through `kubectl apply --dry-run=server -k` when kubectl is
//! installed); RBAC has no wildcards; the workloads can start on a fresh cluster where kuryr-rs is the CNI
//! (controller on the host network, one per node, credentials readable; the daemon writes the conflist
//! itself; explicit pull policy and a real tag). And the Grafana dashboard uses only metric names the binaries export (collected from their
//! registries).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{bail, ensure, Context as _};
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::GroupVersionKind;
use kube::discovery::{pinned_kind, Scope};
use lab_tests::Lab;
use prometheus_client::registry::Registry;

fn deploy_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy")
}

/// The files the kustomization lists, and their YAML documents.
fn manifests() -> anyhow::Result<Vec<(String, serde_yaml::Value)>> {
    let kust: serde_yaml::Value =
        serde_yaml::from_str(&std::fs::read_to_string(deploy_dir().join("kustomization.yaml"))?)?;
    let mut docs = Vec::new();
    for r in kust["resources"].as_sequence().context("resources")? {
        let file = r.as_str().context("resource path")?;
        let text = std::fs::read_to_string(deploy_dir().join(file)).with_context(|| file.to_owned())?;
        for doc in serde_yaml::Deserializer::from_str(&text) {
            let v = serde_yaml::Value::deserialize(doc)?;
            if !v.is_null() {
                docs.push((file.to_owned(), v));
            }
        }
    }
    Ok(docs)
}

use serde::Deserialize;

#[tokio::test]
async fn every_manifest_passes_a_server_side_dry_run_on_the_lab() -> anyhow::Result<()> {
    let lab = Lab::require();
    let client = lab.kube_client().await?;
    lab_tests::cluster::install_crds(&client).await?;
    let docs = manifests()?;
    ensure!(docs.len() >= 14, "only {} documents", docs.len());
    let pp = PatchParams::apply("kuryr-manifest-check").dry_run().force();
    for (file, doc) in &docs {
        let obj: DynamicObject = serde_yaml::from_value(doc.clone()).with_context(|| file.clone())?;
        let types = obj.types.clone().context("apiVersion/kind")?;
        let gvk = GroupVersionKind::try_from(&types)?;
        let (ar, caps) = pinned_kind(&client, &gvk)
            .await
            .with_context(|| format!("{file}: {gvk:?}"))?;
        let name = obj.metadata.name.clone().context("name")?;
        let api: Api<DynamicObject> = match caps.scope {
            Scope::Namespaced => Api::namespaced_with(
                client.clone(),
                obj.metadata.namespace.as_deref().unwrap_or("kube-system"),
                &ar,
            ),
            Scope::Cluster => Api::all_with(client.clone(), &ar),
        };
        // A kuryr-rs installed from its image (./demo.sh: lab/overlay's exec probes) owns fields of the same
        // objects, and an apply is judged merged with them (an exec and an httpGet probe: "more than 1 handler
        // type"). The manifest alone is what is checked: a dry-run create under another name when the object
        // exists (a CRD's name is fixed by its spec, and the installed ones are these very files).
        let installed = api.get_opt(&name).await?.is_some();
        let checked = if installed && types.kind != "CustomResourceDefinition" {
            let mut fresh = obj.clone();
            fresh.metadata.name = Some(format!("{name}-manifest-check"));
            let pp = PostParams {
                dry_run: true,
                ..PostParams::default()
            };
            api.create(&pp, &fresh).await
        } else {
            api.patch(&name, &pp, &Patch::Apply(&obj)).await
        };
        checked.with_context(|| format!("{file}: {} {name} refused by the API server", types.kind))?;
    }
    kubectl_dry_run(&lab)?;
    Ok(())
}

/// `kubectl apply --dry-run=server -k deploy/` (kustomize rendering included), when kubectl is installed.
fn kubectl_dry_run(lab: &Lab) -> anyhow::Result<()> {
    // The lab's own kubectl (lab/lib/k8s.sh links its release's binaries there); the machine's otherwise.
    let lab_kubectl = lab.state_dir.join("k8s").join("bin").join("kubectl");
    let kubectl = if lab_kubectl.exists() {
        lab_kubectl
    } else {
        std::path::PathBuf::from("kubectl")
    };
    let out = match std::process::Command::new(&kubectl)
        .arg("--kubeconfig")
        .arg(&lab.kubeconfig)
        .args(["apply", "--dry-run=server", "-k"])
        .arg(deploy_dir())
        .output()
    {
        Ok(out) => out,
        Err(e) => {
            eprintln!("SKIP kubectl apply -k: kubectl not runnable ({e}); the kube-rs dry run above covered each manifest");
            return Ok(());
        }
    };
    if !out.status.success() {
        bail!(
            "kubectl apply --dry-run=server -k deploy/: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(())
}

#[test]
fn rbac_has_no_wildcards_and_the_workloads_can_run_on_a_fresh_cluster() -> anyhow::Result<()> {
    let docs = manifests()?;
    for (file, doc) in &docs {
        if let Some(rules) = doc["rules"].as_sequence() {
            for rule in rules {
                for key in ["apiGroups", "resources", "verbs"] {
                    let values = rule[key].as_sequence().map(Vec::as_slice).unwrap_or_default();
                    ensure!(
                        !values.iter().any(|v| v.as_str() == Some("*")),
                        "{file}: wildcard in {key}"
                    );
                }
            }
        }
    }
    let kustomization: serde_yaml::Value =
        serde_yaml::from_str(&std::fs::read_to_string(deploy_dir().join("kustomization.yaml"))?)?;
    let tag = kustomization["images"][0]["newTag"].as_str().unwrap_or_default();
    ensure!(
        !tag.is_empty() && tag != "latest",
        "the base names a real image tag (latest means pull policy Always and whatever the registry has): {tag:?}"
    );
    for (file, doc) in &docs {
        let spec = &doc["spec"]["template"]["spec"];
        for list in ["initContainers", "containers"] {
            for c in spec[list].as_sequence().map(Vec::as_slice).unwrap_or_default() {
                ensure!(
                    c["imagePullPolicy"] == "IfNotPresent",
                    "{file}: {} has no explicit IfNotPresent pull policy",
                    c["name"].as_str().unwrap_or_default()
                );
            }
        }
    }

    // The controller: on the host network (a pod network needs it first), one per node, allowed on nodes
    // whose network is not ready yet, credentials readable by its group only.
    let deployment = docs
        .iter()
        .find(|(_, d)| d["kind"] == "Deployment" && d["metadata"]["name"] == "kuryr-controller")
        .context("controller Deployment")?;
    let d = &deployment.1["spec"];
    ensure!(d["replicas"].as_u64() == Some(2), "replicas");
    let pod = &d["template"]["spec"];
    ensure!(pod["hostNetwork"] == true, "controller on the host network");
    ensure!(
        pod["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
            .as_sequence()
            .is_some_and(|t| !t.is_empty()),
        "required anti-affinity"
    );
    let tolerates = |key: &str| {
        pod["tolerations"]
            .as_sequence()
            .is_some_and(|ts| ts.iter().any(|t| t["key"] == key))
    };
    ensure!(tolerates("node.kubernetes.io/not-ready"), "not-ready toleration");
    ensure!(
        pod["priorityClassName"] == "system-cluster-critical",
        "controller priority class"
    );
    let group = pod["securityContext"]["fsGroup"].as_u64().context("fsGroup")?;
    ensure!(
        pod["securityContext"]["runAsGroup"].as_u64() == Some(group)
            || pod["securityContext"]["runAsUser"].as_u64() == Some(group),
        "fsGroup is the controller's own group"
    );
    let clouds = pod["volumes"]
        .as_sequence()
        .and_then(|vs| vs.iter().find(|v| v["name"] == "clouds"))
        .context("clouds volume")?;
    let mode = clouds["secret"]["defaultMode"].as_u64().context("secret mode")?;
    ensure!(
        mode & 0o040 != 0 && mode & 0o007 == 0,
        "the clouds.yaml Secret is group-readable and not world-readable: {mode:o}"
    );
    let c = &pod["containers"][0];
    let args = serde_yaml::to_string(&c["command"])?;
    ensure!(
        args.contains("--config"),
        "the controller is not pointed at its config file"
    );
    for probe in ["livenessProbe", "readinessProbe"] {
        ensure!(c[probe]["httpGet"]["path"].is_string(), "controller {probe}");
    }
    let config = docs
        .iter()
        .find(|(_, d)| d["kind"] == "ConfigMap" && d["metadata"]["name"] == "kuryr-config")
        .context("controller ConfigMap")?;
    let settings: serde_yaml::Value =
        serde_yaml::from_str(config.1["data"]["kuryr.yaml"].as_str().context("kuryr.yaml")?)?;
    for key in ["pod_subnet", "service_subnet", "external_network", "cluster_id"] {
        ensure!(settings[key].is_string(), "the controller config sets {key}");
    }

    // The daemon: the plugin binary from the init step, the conflist from the daemon once it serves.
    let ds = docs
        .iter()
        .find(|(_, d)| d["kind"] == "DaemonSet")
        .context("DaemonSet")?;
    let pod = &ds.1["spec"]["template"]["spec"];
    ensure!(
        pod["initContainers"][0]["name"] == "install-cni",
        "CNI install step"
    );
    let init = serde_yaml::to_string(&pod["initContainers"][0]["command"])?;
    ensure!(
        !init.contains("conflist") && !init.contains("net.d"),
        "the init step writes no conflist (the daemon does, once it serves)"
    );
    let daemon = &pod["containers"][0];
    let conf_dir = daemon["env"]
        .as_sequence()
        .and_then(|es| es.iter().find(|e| e["name"] == "KURYR_CNI_CONF_DIR"))
        .and_then(|e| e["value"].as_str())
        .context("KURYR_CNI_CONF_DIR")?;
    ensure!(
        daemon["volumeMounts"]
            .as_sequence()
            .is_some_and(|ms| ms.iter().any(|m| m["mountPath"] == conf_dir)),
        "{conf_dir} is mounted from the host"
    );
    ensure!(
        daemon["readinessProbe"]["httpGet"]["path"] == "/readyz",
        "daemon readiness"
    );
    ensure!(
        ds.1["spec"]["updateStrategy"]["rollingUpdate"]["maxUnavailable"].as_u64() == Some(1),
        "daemon rolls one node at a time"
    );
    Ok(())
}

/// Metric names as queried: `X_total` for counters, `X_bucket|_sum|_count` for histograms, `X` for gauges.
/// Labelled families are only encoded once they have a series, so one is recorded in each through the
/// binaries' own recording methods.
fn exported() -> anyhow::Result<BTreeSet<String>> {
    let mut controller = Registry::default();
    let m = kuryr_controller::metrics::Metrics::register(&mut controller);
    kuryr_controller::metrics::Metrics::register_cloud(
        &mut controller,
        Arc::new(kuryr_openstack::Metrics::default()),
    );
    m.reconciled("kuryrport");
    m.failed("kuryrport", "x".into());
    m.wired(std::time::Duration::from_millis(10));
    m.gc_collected("port");
    m.gc_failed("port");
    m.gc_swept(&[("ACTIVE".to_owned(), 1)].into());
    let pool = [("parent", "trunk:t".to_owned()), ("network", "n".to_owned())];
    m.pool_free_ports.get_or_create(&pool).set(1);
    m.pool_in_flight_ports.get_or_create(&pool).set(1);
    m.pool_waiting_pods.get_or_create(&pool).set(1);
    m.call_observer().observe(&kuryr_openstack::CallRecord {
        op: "neutron.ports.list",
        method: "GET",
        status: 200,
        duration: std::time::Duration::from_millis(5),
        attempt: 1,
    });
    let mut cni = Registry::default();
    let c = kuryr_cni::daemon::metrics::Metrics::default();
    c.register(&mut cni);
    c.observe("ADD", "ok", 0.01);
    let mut names = BTreeSet::new();
    for reg in [&controller, &cni] {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, reg)?;
        for line in text.lines() {
            let Some(rest) = line.strip_prefix("# TYPE ") else {
                continue;
            };
            let mut it = rest.split_whitespace();
            let (Some(name), Some(kind)) = (it.next(), it.next()) else {
                continue;
            };
            match kind {
                "counter" => {
                    names.insert(format!("{name}_total"));
                }
                "histogram" => {
                    for s in ["bucket", "sum", "count"] {
                        names.insert(format!("{name}_{s}"));
                    }
                }
                _ => {
                    names.insert(name.to_owned());
                }
            }
        }
    }
    Ok(names)
}

#[test]
fn the_grafana_dashboard_uses_only_exported_metrics() -> anyhow::Result<()> {
    let exported = exported()?;
    ensure!(
        exported.contains("kuryr_pod_wire_seconds_bucket"),
        "registries not read: {exported:?}"
    );
    let dash: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(
        deploy_dir().join("grafana/kuryr-dashboard.json"),
    )?)?;
    let mut used = BTreeSet::new();
    for panel in dash["panels"].as_array().context("panels")? {
        for target in panel["targets"].as_array().context("targets")? {
            let expr = target["expr"].as_str().context("expr")?;
            let mut rest = expr;
            while let Some(i) = rest.find("kuryr_") {
                let tail = &rest[i..];
                let end = tail
                    .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                    .unwrap_or(tail.len());
                used.insert(tail[..end].to_owned());
                rest = &tail[end..];
            }
        }
    }
    let unknown: Vec<_> = used.iter().filter(|m| !exported.contains(*m)).collect();
    ensure!(
        unknown.is_empty(),
        "the dashboard queries metrics no binary exports: {unknown:?}"
    );
    for must in [
        "kuryr_pod_wire_seconds_bucket",
        "kuryr_openstack_calls_total",
        "kuryr_loadbalancers",
        "kuryr_cni_request_duration_seconds_bucket",
        "kuryr_pool_free_ports",
    ] {
        ensure!(used.contains(must), "the dashboard does not show {must}");
    }
    Ok(())
}
