//! Clients from the global flags.

use anyhow::Context as _;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kuryr_openstack::{AuthSource, ClientConfig, Cloud};

use crate::cli::Cli;

pub async fn kube_client(cli: &Cli) -> anyhow::Result<kube::Client> {
    let config = match &cli.kubeconfig {
        Some(path) => {
            let kc = Kubeconfig::read_from(path).with_context(|| format!("reading {}", path.display()))?;
            kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default()).await?
        }
        None => kube::Config::infer().await?,
    };
    Ok(kube::Client::try_from(config)?)
}

pub fn cloud_config(cli: &Cli) -> ClientConfig {
    match (&cli.os_cloud, &cli.clouds_yaml) {
        (None, None) => ClientConfig::new(AuthSource::Env),
        (cloud, file) => {
            ClientConfig::clouds_yaml(file.clone(), cloud.clone().unwrap_or_else(|| "kuryr".into()))
        }
    }
}

pub async fn cloud(cli: &Cli) -> anyhow::Result<Cloud> {
    Cloud::connect(cloud_config(cli))
        .await
        .context("connecting to OpenStack")
}

/// `--project-id`, else the token's project.
pub fn project(cli: &Cli, cloud: &Cloud) -> Option<String> {
    cli.project_id.clone().or_else(|| cloud.project_id())
}
