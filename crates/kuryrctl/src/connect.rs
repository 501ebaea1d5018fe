//! Clients from the global flags. Credentials files others can read are refused, and a configuration that
//! turns TLS verification off is announced on stderr, as kuryr-controller does (docs/security.md).

use anyhow::Context as _;
use kuryr_openstack::{secret_files, AuthSource, ClientConfig, Cloud};

use crate::cli::Cli;

pub async fn kube_client(cli: &Cli) -> anyhow::Result<kube::Client> {
    let config = kuryr_api::kubeconfig::load(cli.kubeconfig.as_deref()).await?;
    if let Some(w) = kuryr_api::kubeconfig::tls_warning(&config) {
        warn_loudly(&w);
    }
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
    let config = cloud_config(cli);
    secret_files::guard_cloud_files(&config.auth)?;
    let cloud = Cloud::connect(config).await.context("connecting to OpenStack")?;
    if let Some(w) = cloud.tls_warning() {
        warn_loudly(&w);
    }
    Ok(cloud)
}

/// On stderr, whatever the log filter.
fn warn_loudly(message: &str) {
    eprintln!("kuryrctl: WARNING: {message}");
}

/// `--project-id`, else the token's project.
pub fn project(cli: &Cli, cloud: &Cloud) -> Option<String> {
    cli.project_id.clone().or_else(|| cloud.project_id())
}
