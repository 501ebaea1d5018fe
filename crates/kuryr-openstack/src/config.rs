//! How to reach and authenticate to the cloud, and the client's own knobs (rate limit, concurrency,
//! retries, timeouts).

use std::path::PathBuf;
use std::time::Duration;

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
    /// One token bucket shared by every call of this client (and its clones).
    pub rate_limit: RateLimit,
    /// Calls in flight at once.
    pub max_concurrency: usize,
    pub retry: RetryPolicy,
    pub connect_timeout: Duration,
    /// Whole request, answer body included (a hung server is a retryable timeout).
    pub request_timeout: Duration,
    /// Re-authenticate this long before the token expires (capped at a quarter of the token's lifetime,
    /// so short-lived tokens are renewed too).
    pub token_renew_margin: Duration,
}

impl ClientConfig {
    pub fn new(auth: AuthSource) -> Self {
        Self {
            auth,
            rate_limit: RateLimit::default(),
            max_concurrency: 32,
            retry: RetryPolicy::default(),
            connect_timeout: Duration::from_secs(5),
            request_timeout: Duration::from_secs(60),
            token_renew_margin: Duration::from_secs(120),
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

    pub fn with_retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }

    pub fn with_max_concurrency(mut self, n: usize) -> Self {
        self.max_concurrency = n.max(1);
        self
    }

    pub fn with_timeouts(mut self, connect: Duration, request: Duration) -> Self {
        self.connect_timeout = connect;
        self.request_timeout = request;
        self
    }
}
