//! A Kubernetes client for the lab's kube-apiserver (token auth, the lab CA).

use kube::config::{KubeConfigOptions, Kubeconfig};

use crate::Lab;

impl Lab {
    /// A client built from the lab's kubeconfig, exactly as an operator's `KUBECONFIG` would be used.
    pub async fn kube_client(&self) -> anyhow::Result<kube::Client> {
        let kubeconfig = Kubeconfig::read_from(&self.kubeconfig)?;
        let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await?;
        Ok(kube::Client::try_from(config)?)
    }
}

/// Applies kuryr's CRDs (server-side apply under `manager`) and waits until each is established.
pub async fn install_crds(client: &kube::Client, manager: &str) -> anyhow::Result<()> {
    for crd in kuryr_api::crds::crds() {
        install_crd(client, manager, &crd).await?;
    }
    Ok(())
}

/// Applies `crd` (server-side, as `manager`) and waits until it is established.
pub async fn install_crd(
    client: &kube::Client,
    manager: &str,
    crd: &kuryr_api::CustomResourceDefinition,
) -> anyhow::Result<()> {
    use kube::api::{Api, Patch, PatchParams};
    use kube::runtime::wait::{await_condition, conditions};
    use kube::ResourceExt;
    use kuryr_api::CustomResourceDefinition;
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let name = crd.name_any();
    api.patch(&name, &PatchParams::apply(manager).force(), &Patch::Apply(crd))
        .await
        .map_err(|e| anyhow::anyhow!("applying CRD {name}: {e}"))?;
    let established = await_condition(api.clone(), &name, conditions::is_crd_established());
    tokio::time::timeout(std::time::Duration::from_secs(30), established).await??;
    Ok(())
}
