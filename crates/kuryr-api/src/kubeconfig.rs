//! How the binaries reach Kubernetes: `--kubeconfig` when given, else the in-cluster service account, else
//! `$KUBECONFIG` / `~/.kube/config`. TLS verification is whatever that configuration says: on, unless a
//! kubeconfig cluster sets `insecure-skip-tls-verify: true`. kuryr-rs never turns it off by itself; when the
//! configuration does, [`tls_warning`] is the message every binary prints at start.

use std::path::Path;

/// Why no Kubernetes configuration could be loaded.
#[derive(Debug, thiserror::Error)]
pub enum KubeConfigError {
    #[error("reading {path}: {source}")]
    Read {
        path: String,
        #[source]
        source: kube::config::KubeconfigError,
    },
    #[error("{0}")]
    Kubeconfig(#[from] kube::config::KubeconfigError),
    #[error("{0}")]
    Infer(#[from] kube::config::InferConfigError),
}

/// The configuration from `path`, else inferred (in-cluster, then `$KUBECONFIG` / `~/.kube/config`).
pub async fn load(path: Option<&Path>) -> Result<kube::Config, KubeConfigError> {
    match path {
        Some(path) => {
            let kc = kube::config::Kubeconfig::read_from(path).map_err(|source| KubeConfigError::Read {
                path: path.display().to_string(),
                source,
            })?;
            Ok(kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default()).await?)
        }
        None => Ok(kube::Config::infer().await?),
    }
}

/// The loud warning when certificate verification is off for the API server, else `None`.
pub fn tls_warning(config: &kube::Config) -> Option<String> {
    config.accept_invalid_certs.then(|| {
        format!(
            "INSECURE: TLS certificate verification is OFF for Kubernetes ({}; kubeconfig \
             `insecure-skip-tls-verify: true`): anyone on the path can read the bearer token and every \
             object; set `certificate-authority` instead",
            config.cluster_url
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_insecure_config_gets_the_warning() {
        let mut c = kube::Config::new("https://api.example:6443".parse().unwrap());
        assert!(!c.accept_invalid_certs, "kube's default verifies");
        assert_eq!(tls_warning(&c), None);
        c.accept_invalid_certs = true;
        let w = tls_warning(&c).unwrap();
        assert!(
            w.starts_with("INSECURE") && w.contains("https://api.example:6443"),
            "{w}"
        );
    }
}
