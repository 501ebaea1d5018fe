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
