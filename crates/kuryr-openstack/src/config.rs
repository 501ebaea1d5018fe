//! How to reach and authenticate to the cloud, and the client's own knobs (rate limit, concurrency,
//! retries, timeouts).

use std::path::PathBuf;
use std::time::Duration;

use crate::adaptive::AimdConfig;
use crate::ratelimit::RateLimit;
use crate::retry::RetryPolicy;

/// Where the credentials come from.
#[derive(Debug, Clone)]
pub enum AuthSource {
    /// A cloud from clouds.yaml: `file` when given, else `OS_CLIENT_CONFIG_FILE`, else the standard
    /// locations (`./clouds.yaml`, `~/.config/openstack/`, `/etc/openstack/`). Any `auth_type` the SDK
    /// supports (password, v3applicationcredential, token, ...) or `none` for a cloud without Keystone.
    CloudsYaml { file: Option<PathBuf>, cloud: String },
    /// `OS_CLOUD` (+ clouds.yaml as above) when set, else the `OS_*` variables (`OS_AUTH_URL`,
    /// `OS_USERNAME`, `OS_APPLICATION_CREDENTIAL_ID`, ...).
    Env,
    /// No Keystone (Neutron/Octavia with `auth_strategy = noauth`): fixed endpoints, no token. Neutron acts
    /// as admin; `project_id` is put into create bodies that lack one.
    NoAuth {
        network_url: String,
        load_balancer_url: String,
        project_id: Option<String>,
    },
}

#[derive(Debug, Clone)]
pub struct ClientConfig {
    pub auth: AuthSource,
    /// An optional rate ceiling per service (a token bucket each); off by default: the adaptive
    /// concurrency limit is what keeps the cloud from being flooded.
    pub rate_limit: RateLimit,
    /// Calls in flight at once, per service: where the adaptive limit starts, its floor and its ceiling.
    pub concurrency: AimdConfig,
    pub retry: RetryPolicy,
    pub connect_timeout: Duration,
    /// Whole request, answer body included (a hung server is a retryable timeout).
    pub request_timeout: Duration,
    /// Re-authenticate this long before the token expires (capped at a quarter of the token's lifetime,
    /// so short-lived tokens are renewed too).
    pub token_renew_margin: Duration,
    /// The cloud's request body limit (`max_request_body_size`): bulk bodies are split to fit it, and a
    /// body over it is refused here instead of by a 413.
    pub max_request_body: usize,
}

impl AuthSource {
    /// The files the SDK reads for this source, in its order: `OS_CLIENT_CONFIG_PATH` entries, the vendor
    /// file, the first `clouds.{yaml,yml,json}` of the standard locations, the given file (or
    /// `OS_CLIENT_CONFIG_FILE`), the first `secure.{yaml,yml,json}`. Empty for `OS_*` variables without
    /// `OS_CLOUD` and for noauth. Binaries check these for credentials others can read before connecting.
    pub fn config_files(&self) -> Vec<PathBuf> {
        let file = match self {
            AuthSource::NoAuth { .. } => return Vec::new(),
            AuthSource::Env if !std::env::var("OS_CLOUD").is_ok_and(|c| !c.is_empty()) => return Vec::new(),
            AuthSource::Env => None,
            AuthSource::CloudsYaml { file, .. } => file.clone(),
        };
        let file = file.or_else(|| std::env::var_os("OS_CLIENT_CONFIG_FILE").map(PathBuf::from));
        use openstack_sdk::config::{
            find_clouds_file, find_config_files_specified_in_env, find_secure_file, find_vendor_file,
        };
        let mut out: Vec<PathBuf> = find_config_files_specified_in_env().into_iter().collect();
        out.extend(find_vendor_file());
        out.extend(find_clouds_file());
        out.extend(file);
        out.extend(find_secure_file());
        out.dedup();
        out
    }
}

impl ClientConfig {
    pub fn new(auth: AuthSource) -> Self {
        Self {
            auth,
            rate_limit: RateLimit::default(),
            concurrency: AimdConfig::default(),
            retry: RetryPolicy::default(),
            connect_timeout: Duration::from_secs(5),
            request_timeout: Duration::from_secs(60),
            token_renew_margin: Duration::from_secs(120),
            max_request_body: crate::fit::DEFAULT_MAX_REQUEST_BODY,
        }
    }

    pub fn clouds_yaml(file: Option<PathBuf>, cloud: impl Into<String>) -> Self {
        Self::new(AuthSource::CloudsYaml {
            file,
            cloud: cloud.into(),
        })
    }

    pub fn with_rate_limit(mut self, rate_limit: RateLimit) -> Self {
        self.rate_limit = rate_limit;
        self
    }

    pub fn with_max_request_body(mut self, bytes: usize) -> Self {
        self.max_request_body = bytes;
        self
    }

    pub fn with_retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }

    /// The ceiling of the adaptive limit (per service); the start and floor are lowered to fit under it.
    pub fn with_max_concurrency(mut self, n: usize) -> Self {
        let n = n.max(1);
        self.concurrency.max = n;
        self.concurrency.initial = self.concurrency.initial.min(n);
        self.concurrency.min = self.concurrency.min.min(n);
        self
    }

    pub fn with_concurrency(mut self, concurrency: AimdConfig) -> Self {
        self.concurrency = concurrency;
        self
    }

    pub fn with_timeouts(mut self, connect: Duration, request: Duration) -> Self {
        self.connect_timeout = connect;
        self.request_timeout = request;
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn clouds(text: &str) -> (PathBuf, ClientConfig) {
        let dir =
            std::env::temp_dir().join(format!("kuryr-tls-{}-{}", std::process::id(), fastrand::u64(..)));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("clouds.yaml");
        std::fs::write(&file, text).unwrap();
        (dir, ClientConfig::clouds_yaml(Some(file), "c"))
    }

    const CLOUD: &str = "clouds:\n  c:\n    auth_type: password\n    auth: {auth_url: 'https://k:5000/v3', username: u, password: p}\n";

    #[test]
    fn tls_verification_is_on_unless_the_cloud_says_verify_false() {
        for (extra, off) in [
            ("", false),
            ("    verify: true\n", false),
            ("    cacert: /etc/ssl/ca.pem\n", false),
            ("    verify: false\n", true),
        ] {
            let (dir, cfg) = clouds(&format!("{CLOUD}{extra}"));
            assert_eq!(cfg.tls_verification_disabled().unwrap(), off, "{extra:?}");
            std::fs::remove_dir_all(dir).unwrap();
        }
        let noauth = ClientConfig::new(AuthSource::NoAuth {
            network_url: "http://n".into(),
            load_balancer_url: "http://o".into(),
            project_id: None,
        });
        assert!(!noauth.tls_verification_disabled().unwrap());
    }

    #[test]
    fn the_given_clouds_yaml_is_among_the_files_read() {
        let (dir, cfg) = clouds(CLOUD);
        let file = dir.join("clouds.yaml");
        assert!(
            cfg.auth.config_files().contains(&file),
            "{:?}",
            cfg.auth.config_files()
        );
        let noauth = AuthSource::NoAuth {
            network_url: "http://n".into(),
            load_balancer_url: "http://o".into(),
            project_id: None,
        };
        assert!(noauth.config_files().is_empty());
        std::fs::remove_dir_all(dir).unwrap();
    }
}
