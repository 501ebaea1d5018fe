//! Kubernetes-side helpers for tests that run controllers against the lab: CRDs, a namespace of their own,
//! scheduled pods (no kubelet needed), waiting for KuryrPorts to be Ready, and cleanup after a failure.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use k8s_openapi::api::core::v1::{Container, Namespace, Pod, PodSpec, ServiceAccount};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::ResourceExt;
use kuryr_api::KuryrPort;

const CRD_MANAGER: &str = "kuryr-crd-test";

/// The Kuryr CRDs, applied and established (field manager `kuryr-crd-test`).
pub async fn install_crds(client: &kube::Client) -> anyhow::Result<()> {
    crate::kube::install_crds(client, CRD_MANAGER).await
}

/// The Network Plumbing WG's NetworkAttachmentDefinition CRD (Multus installs it on a real cluster).
pub async fn install_network_attachment_crd(client: &kube::Client) -> anyhow::Result<()> {
    use kube::CustomResourceExt;
    crate::kube::install_crd(
        client,
        CRD_MANAGER,
        &kuryr_api::NetworkAttachmentDefinition::crd(),
    )
    .await
}

pub async fn create_namespace(client: &kube::Client, name: &str) -> anyhow::Result<()> {
    create_namespace_object(client, &named(name)).await
}

/// Creates namespace `name` on an API server without ServiceAccount admission (the chaos suite's private
/// one, whose controller manager runs no ServiceAccount controller): pods can be created at once.
pub async fn create_namespace_unadmitted(client: &kube::Client, name: &str) -> anyhow::Result<()> {
    create(client, &named(name)).await.map(drop)
}

/// Creates `ns` and returns once pods can be created in it: the lab's API server runs ServiceAccount
/// admission, which refuses pods of a namespace whose `default` ServiceAccount the controller manager has
/// not made yet (a few ms on a quiet machine, seconds on a loaded one).
pub async fn create_namespace_object(client: &kube::Client, ns: &Namespace) -> anyhow::Result<()> {
    let name = create(client, ns).await?;
    wait_default_service_account(client, &name).await
}

fn named(name: &str) -> Namespace {
    Namespace {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            ..ObjectMeta::default()
        },
        ..Namespace::default()
    }
}

/// Creates `ns`; returns its name.
async fn create(client: &kube::Client, ns: &Namespace) -> anyhow::Result<String> {
    let name = ns.metadata.name.clone().context("namespace without a name")?;
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), ns)
        .await
        .with_context(|| format!("create namespace {name}"))?;
    Ok(name)
}

/// Waits (up to 120 s) for the `default` ServiceAccount of namespace `ns`.
pub async fn wait_default_service_account(client: &kube::Client, ns: &str) -> anyhow::Result<()> {
    let sas: Api<ServiceAccount> = Api::namespaced(client.clone(), ns);
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        if sas.get_opt("default").await?.is_some() {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("namespace {ns}: no `default` ServiceAccount after 120 s (is kube-controller-manager running?)");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

pub async fn delete_namespace(client: &kube::Client, name: &str) {
    let _ = Api::<Namespace>::all(client.clone())
        .delete(name, &DeleteParams::default())
        .await;
}

/// A pod already scheduled on `node` (the lab has no kubelet on most VMs: it stays Pending).
pub fn scheduled_pod(name: &str, node: &str) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            node_name: Some(node.into()),
            containers: vec![Container {
                name: "pause".into(),
                image: Some("registry.k8s.io/pause:3.9".into()),
                ..Container::default()
            }],
            ..PodSpec::default()
        }),
        ..Pod::default()
    }
}

/// Every VIF active and the `Ready` condition true.
pub fn is_ready(kp: &KuryrPort) -> bool {
    kp.status
        .as_ref()
        .is_some_and(|s| s.all_active() && kuryr_api::conditions::is_condition_true(&s.conditions, "Ready"))
}

/// Waits until each named KuryrPort of `ns` is Ready; returns them by name.
pub async fn wait_ready(
    client: &kube::Client,
    ns: &str,
    names: &[String],
    timeout: Duration,
) -> anyhow::Result<BTreeMap<String, KuryrPort>> {
    let kps: Api<KuryrPort> = Api::namespaced(client.clone(), ns);
    let deadline = Instant::now() + timeout;
    loop {
        let ready: BTreeMap<String, KuryrPort> = kps
            .list(&ListParams::default())
            .await?
            .items
            .into_iter()
            .filter(|kp| names.contains(&kp.name_any()) && is_ready(kp))
            .map(|kp| (kp.name_any(), kp))
            .collect();
        if ready.len() == names.len() {
            return Ok(ready);
        }
        if Instant::now() > deadline {
            let missing: Vec<_> = names.iter().filter(|n| !ready.contains_key(*n)).collect();
            bail!("KuryrPorts not Ready within {timeout:?}: {missing:?}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// After a failure: every object `api` lists loses its finalizers (best effort: errors are ignored, what is
/// left shows in the caller's checks).
pub async fn strip_finalizers<K>(api: &Api<K>)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let strip = serde_json::json!({"metadata": {"finalizers": null}});
    for o in api
        .list(&ListParams::default())
        .await
        .map(|l| l.items)
        .unwrap_or_default()
    {
        let _ = api
            .patch(&o.name_any(), &PatchParams::default(), &Patch::Merge(&strip))
            .await;
    }
}

/// After a failure: strip finalizers from pods and KuryrPorts of `ns` and delete the pods.
pub async fn strip_and_delete_all(client: &kube::Client, ns: &str) {
    strip_finalizers(&Api::<KuryrPort>::namespaced(client.clone(), ns)).await;
    let strip = serde_json::json!({"metadata": {"finalizers": null}});
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    if let Ok(list) = pods.list(&ListParams::default()).await {
        for pod in list {
            let _ = pods
                .patch(&pod.name_any(), &PatchParams::default(), &Patch::Merge(&strip))
                .await;
            let _ = pods
                .delete(
                    &pod.name_any(),
                    &DeleteParams {
                        grace_period_seconds: Some(0),
                        ..DeleteParams::default()
                    },
                )
                .await;
        }
    }
}

/// Path of a workspace binary, built first (`cargo build -p <package> --bin <bin>`; a no-op when fresh).
/// Tests in this crate cannot use `CARGO_BIN_EXE_*` for another package's binaries. Under `./test.sh`
/// (`KURYR_WORKSPACE_BINARIES` set to the directory its build stage filled) the binary is taken from there
/// as it is: `cargo test --no-run` built every workspace binary with the test build's features, which a
/// `cargo build -p` would compile a second time with its own (37 s for kuryr-controller on 2 cores).
pub fn workspace_binary(package: &str, bin: &str) -> anyhow::Result<PathBuf> {
    if let Some(dir) = std::env::var_os("KURYR_WORKSPACE_BINARIES") {
        let path = PathBuf::from(dir).join(bin);
        if !path.exists() {
            bail!(
                "{} not found (KURYR_WORKSPACE_BINARIES: the build stage did not make it)",
                path.display()
            );
        }
        return Ok(path);
    }
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = std::process::Command::new(cargo)
        .args(["build", "--locked", "-p", package, "--bin", bin])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .status()
        .context("running cargo build")?;
    if !status.success() {
        bail!("cargo build -p {package} --bin {bin} failed");
    }
    // This test binary is target/<profile>/deps/<name>: the binary sits in target/<profile>.
    let exe = std::env::current_exe()?;
    let dir = exe
        .parent()
        .and_then(|d| d.parent())
        .context("test binary outside target/<profile>/deps")?;
    let path = dir.join(bin);
    if !path.exists() {
        bail!("{} not found after building it", path.display());
    }
    Ok(path)
}

/// What a test needs to stay out of others' way: a client, its own namespace and cluster id (random
/// suffix), the CRDs installed.
pub struct Isolated {
    pub client: kube::Client,
    pub ns: String,
    pub cluster_id: String,
}

/// Creates the namespace `<prefix>-<random>`; the cluster id is `<prefix>test-<random>`.
pub async fn isolated(lab: &crate::Lab, prefix: &str) -> anyhow::Result<Isolated> {
    let client = lab.kube_client().await?;
    install_crds(&client).await?;
    let run_id = format!("{:08x}", fastrand::u32(..));
    let ns = format!("{prefix}-{run_id}");
    create_namespace(&client, &ns).await?;
    Ok(Isolated {
        client,
        ns,
        cluster_id: format!("{prefix}test-{run_id}"),
    })
}
