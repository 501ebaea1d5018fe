//! Authentication and endpoints. openstack_sdk does what it is good at — clouds.yaml/env parsing, the auth
//! plugins (password, application credential, token, ...) and the token's catalog — and this module keeps
//! the result: a token, its expiry and the two versioned API roots, swapped together as one snapshot.
//!
//! Why not let the SDK re-authenticate on its own: after its transparent re-auth the discovered endpoint
//! versions are gone and every later call 404s (pitfall 2 in docs/openstack-client.md), and a cached token
//! gets "renewed" by token exchange with the same expiry. Here every renewal is a fresh login through a
//! fresh SDK session, and the endpoints are resolved again from that login's catalog, so a token and the
//! URLs it is used with can never drift apart.

use std::path::PathBuf;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use chrono::{DateTime, Utc};
use openstack_sdk::api::AsyncClient;
use openstack_sdk::config::{CloudConfig, ConfigFile};
use openstack_sdk::types::ServiceType;
use openstack_sdk::AsyncOpenStack;
use reqwest::Url;
use secrecy::{ExposeSecret, SecretString};
use tracing::{debug, info};

use crate::adaptive::CallKind;
use crate::config::{AuthSource, ClientConfig};
use crate::errors::{Error, Result, Service};
use crate::gate::Gate;

/// The SDK finds auth plugins through `inventory`; its build script fails to reference the plugin crates,
/// so the linker may drop them and the method is "not supported" at runtime (pitfall 3). Naming their
/// anchors here keeps them linked.
fn anchor_auth_plugins() {
    let anchors: [&(dyn std::any::Any + Sync); 3] = [
        &openstack_sdk_auth_password::ANCHOR,
        &openstack_sdk_auth_applicationcredential::ANCHOR,
        &openstack_sdk_auth_token::ANCHOR,
    ];
    std::hint::black_box(anchors);
}

/// Versioned API roots, each ending with `/`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoints {
    /// e.g. `http://neutron:9696/v2.0/`
    pub network: Url,
    /// e.g. `http://octavia:9876/v2/`
    pub load_balancer: Url,
}

impl Endpoints {
    /// From catalog (or override) URLs, with or without the version segment.
    pub fn from_catalog(network: &str, load_balancer: &str) -> Result<Self> {
        Ok(Self {
            network: versioned(network, &["v2.0"], "v2.0")?,
            load_balancer: versioned(load_balancer, &["v2", "v2.0"], "v2")?,
        })
    }

    pub fn base(&self, service: Service) -> &Url {
        match service {
            Service::Network => &self.network,
            // Keystone is only reached through the SDK.
            Service::LoadBalancer | Service::Identity => &self.load_balancer,
        }
    }

    /// The unversioned root of a service (where its version document is).
    pub fn root(&self, service: Service) -> Url {
        let mut u = self.base(service).clone();
        if let Ok(mut segs) = u.path_segments_mut() {
            segs.pop_if_empty().pop().push("");
        }
        u
    }
}

fn versioned(raw: &str, accepted: &[&str], add: &str) -> Result<Url> {
    let mut url = Url::parse(raw).map_err(|e| Error::Config(format!("bad endpoint URL {raw:?}: {e}")))?;
    let last = url
        .path_segments()
        .and_then(|mut s| s.rfind(|x| !x.is_empty()))
        .unwrap_or("")
        .to_owned();
    let mut segs = url
        .path_segments_mut()
        .map_err(|()| Error::Config(format!("endpoint URL {raw:?} cannot be a base")))?;
    segs.pop_if_empty();
    if !accepted.contains(&last.as_str()) {
        segs.push(add);
    }
    segs.push("");
    drop(segs);
    url.set_query(None);
    Ok(url)
}

/// What a call needs: the token (none under noauth) and the endpoints it goes with.
#[derive(Clone)]
pub struct Credentials {
    pub token: Option<SecretString>,
    pub endpoints: Endpoints,
    /// Bumped by every successful re-authentication.
    pub generation: u64,
    pub expires_at: Option<DateTime<Utc>>,
    issued_at: Option<DateTime<Utc>>,
    pub project_id: Option<String>,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("endpoints", &self.endpoints)
            .field("generation", &self.generation)
            .field("expires_at", &self.expires_at)
            .field("project_id", &self.project_id)
            .finish_non_exhaustive()
    }
}

impl Credentials {
    /// Whether the token should be renewed now: within `margin` of expiry, the margin capped at a quarter of
    /// the token's lifetime.
    pub fn needs_renewal(&self, now: DateTime<Utc>, margin: Duration) -> bool {
        let Some(exp) = self.expires_at else {
            return false;
        };
        let lifetime = self
            .issued_at
            .and_then(|i| (exp - i).to_std().ok())
            .unwrap_or(margin.saturating_mul(4));
        let margin = margin.min(lifetime / 4);
        let margin = chrono::Duration::from_std(margin).unwrap_or(chrono::Duration::zero());
        now + margin >= exp
    }
}

/// A resolved cloud: either Keystone-authenticated (through the SDK) or noauth.
pub(crate) enum Session {
    Keystone(Box<Keystone>),
    NoAuth(Arc<Credentials>),
}

pub(crate) struct Keystone {
    gate: Arc<Gate>,
    config: CloudConfig,
    current: RwLock<Arc<Credentials>>,
    /// Single-flight for logins: concurrent 401s or renewals wait for one login.
    login: tokio::sync::Mutex<()>,
    margin: Duration,
    /// After a failed early renewal, no new attempt before this (calls go on with the still-valid token).
    renew_after: std::sync::Mutex<Option<std::time::Instant>>,
}

/// Reads the SDK's cloud config for an auth source.
pub(crate) fn load_cloud_config(source: &AuthSource) -> Result<Option<CloudConfig>> {
    let (file, cloud) = match source {
        AuthSource::NoAuth { .. } => return Ok(None),
        AuthSource::CloudsYaml { file, cloud } => (file.clone(), cloud.clone()),
        AuthSource::Env => match std::env::var("OS_CLOUD") {
            Ok(cloud) if !cloud.is_empty() => (None, cloud),
            _ => {
                let cfg =
                    CloudConfig::from_env().map_err(|e| Error::Config(format!("OS_* environment: {e}")))?;
                return Ok(Some(cfg));
            }
        },
    };
    // The SDK looks at OS_CLIENT_CONFIG_PATH and the standard paths, not OS_CLIENT_CONFIG_FILE.
    let file = file.or_else(|| std::env::var_os("OS_CLIENT_CONFIG_FILE").map(PathBuf::from));
    let files = ConfigFile::new_with_user_specified_configs(file.as_ref(), None::<PathBuf>)
        .map_err(|e| Error::Config(format!("clouds.yaml: {e}")))?;
    let cfg = files
        .get_cloud_config(&cloud)
        .map_err(|e| Error::Config(format!("clouds.yaml cloud {cloud:?}: {e}")))?
        .ok_or_else(|| Error::Config(format!("cloud {cloud:?} not found in clouds.yaml")))?;
    Ok(Some(cfg))
}

fn option_str(cfg: &CloudConfig, key: &str) -> Option<String> {
    cfg.options
        .get(key)
        .and_then(|v| v.clone().into_string().ok())
        .filter(|s| !s.is_empty())
}

/// TLS settings of the cloud (clouds.yaml `cacert`, `verify`), applied to the calls this crate makes too,
/// not only to the SDK's logins.
#[derive(Debug, Clone, Default)]
pub(crate) struct Tls {
    pub cacert: Option<PathBuf>,
    pub insecure: bool,
}

impl Tls {
    pub(crate) fn of(source: &AuthSource) -> Result<Tls> {
        Ok(match load_cloud_config(source)? {
            Some(cfg) => Tls {
                cacert: cfg.cacert.map(PathBuf::from),
                insecure: cfg.verify == Some(false),
            },
            None => Tls::default(),
        })
    }

    pub(crate) fn apply(&self, mut b: reqwest::ClientBuilder) -> Result<reqwest::ClientBuilder> {
        if let Some(path) = &self.cacert {
            let pem =
                std::fs::read(path).map_err(|e| Error::Config(format!("cacert {}: {e}", path.display())))?;
            let certs = reqwest::Certificate::from_pem_bundle(&pem)
                .map_err(|e| Error::Config(format!("cacert {}: {e}", path.display())))?;
            for c in certs {
                b = b.add_root_certificate(c);
            }
        }
        if self.insecure {
            tracing::warn!(
                "INSECURE: TLS certificate verification disabled by the cloud config (verify: false)"
            );
            b = b.danger_accept_invalid_certs(true);
        }
        Ok(b)
    }
}

impl ClientConfig {
    /// Whether TLS certificate verification is off for this cloud (clouds.yaml `verify: false`). Binaries
    /// say so loudly at start; nothing in kuryr-rs turns it off otherwise.
    pub fn tls_verification_disabled(&self) -> crate::Result<bool> {
        Ok(Tls::of(&self.auth)?.insecure)
    }
}

impl Session {
    pub(crate) async fn open(source: &AuthSource, margin: Duration, gate: Arc<Gate>) -> Result<Session> {
        anchor_auth_plugins();
        if let AuthSource::NoAuth {
            network_url,
            load_balancer_url,
            project_id,
        } = source
        {
            return Ok(Session::NoAuth(Arc::new(Credentials {
                token: None,
                endpoints: Endpoints::from_catalog(network_url, load_balancer_url)?,
                generation: 0,
                expires_at: None,
                issued_at: None,
                project_id: project_id.clone(),
            })));
        }
        let cfg =
            load_cloud_config(source)?.ok_or_else(|| Error::Config("no cloud configuration".to_owned()))?;
        let auth_type = cfg.auth_type.clone().unwrap_or_default();
        if matches!(auth_type.as_str(), "none" | "noauth") {
            let net = option_str(&cfg, "network_endpoint_override")
                .or_else(|| cfg.auth.as_ref().and_then(|a| a.endpoint.clone()))
                .ok_or_else(|| Error::Config("noauth cloud without network_endpoint_override".to_owned()))?;
            let lb = option_str(&cfg, "load_balancer_endpoint_override").ok_or_else(|| {
                Error::Config("noauth cloud without load_balancer_endpoint_override".to_owned())
            })?;
            let project_id = cfg.auth.as_ref().and_then(|a| a.project_id.clone());
            return Ok(Session::NoAuth(Arc::new(Credentials {
                token: None,
                endpoints: Endpoints::from_catalog(&net, &lb)?,
                generation: 0,
                expires_at: None,
                issued_at: None,
                project_id,
            })));
        }
        let creds = gated_login(&gate, &cfg, 1).await?;
        Ok(Session::Keystone(Box::new(Keystone {
            gate,
            config: cfg,
            current: RwLock::new(Arc::new(creds)),
            login: tokio::sync::Mutex::new(()),
            margin,
            renew_after: std::sync::Mutex::new(None),
        })))
    }

    /// Credentials for the next call, renewing the token first when it is about to expire.
    pub(crate) async fn current(&self) -> Result<(Arc<Credentials>, bool)> {
        match self {
            Session::NoAuth(c) => Ok((c.clone(), false)),
            Session::Keystone(k) => {
                let cur = k.snapshot();
                let expired = cur.expires_at.is_some_and(|exp| exp <= Utc::now());
                if cur.needs_renewal(Utc::now(), k.margin) && (expired || k.may_renew_early()) {
                    match k.relogin(cur.generation).await {
                        Ok(renewed) => return Ok((k.snapshot(), renewed)),
                        // Keystone briefly away: the old token still works until it expires.
                        Err(e) if !expired => {
                            tracing::warn!(error = %e, "early token renewal failed; using the current token");
                            k.hold_early_renewal(Duration::from_secs(2));
                        }
                        Err(e) => return Err(e),
                    }
                }
                Ok((cur, false))
            }
        }
    }

    /// After a 401 with credentials of `generation`: log in again unless someone already did.
    pub(crate) async fn refresh(&self, generation: u64) -> Result<bool> {
        match self {
            Session::NoAuth(_) => Err(Error::Auth("401 from a noauth cloud".to_owned())),
            Session::Keystone(k) => k.relogin(generation).await,
        }
    }

    pub(crate) fn snapshot(&self) -> Arc<Credentials> {
        match self {
            Session::NoAuth(c) => c.clone(),
            Session::Keystone(k) => k.snapshot(),
        }
    }
}

impl Keystone {
    fn may_renew_early(&self) -> bool {
        let at = *self.renew_after.lock().unwrap_or_else(|p| p.into_inner());
        at.is_none_or(|t| std::time::Instant::now() >= t)
    }

    fn hold_early_renewal(&self, d: Duration) {
        *self.renew_after.lock().unwrap_or_else(|p| p.into_inner()) = Some(std::time::Instant::now() + d);
    }

    fn snapshot(&self) -> Arc<Credentials> {
        self.current.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Returns whether this call logged in (false when another caller already had).
    async fn relogin(&self, seen: u64) -> Result<bool> {
        let _guard = self.login.lock().await;
        let cur = self.snapshot();
        if cur.generation != seen {
            return Ok(false);
        }
        let creds = gated_login(&self.gate, &self.config, seen + 1).await?;
        info!(
            generation = creds.generation,
            expires_at = ?creds.expires_at,
            "re-authenticated with Keystone"
        );
        *self.current.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(creds);
        Ok(true)
    }
}

/// Op name of a login in the metrics (Keystone's `POST /v3/auth/tokens`).
pub const LOGIN_OP: &str = "keystone.tokens.issue";

/// A login through the client's gate: it waits for a slot and a rate-limiter token like any call, and is
/// counted and timed as `keystone.tokens.issue` (201 on success; 401 when Keystone refused the
/// credentials; 0, "transport", when it could not be reached or answered otherwise).
async fn gated_login(gate: &Gate, cfg: &CloudConfig, generation: u64) -> Result<Credentials> {
    let pass = gate.enter(Service::Identity, CallKind::new(LOGIN_OP, 0)).await?;
    let start = std::time::Instant::now();
    let result = login(cfg, generation).await;
    // The SDK's errors do not say timeout from refusal reliably: a login teaches the limit nothing.
    drop(pass);
    let status = match &result {
        Ok(_) => 201,
        Err(e) if refused(&e.to_string()) => 401,
        Err(_) => 0,
    };
    gate.record(LOGIN_OP, "POST", status, start.elapsed(), 1);
    result
}

fn refused(message: &str) -> bool {
    let m = message.to_ascii_lowercase();
    m.contains("401") || m.contains("unauthorized") || m.contains("requires authentication")
}

/// A fresh login through a new SDK session (no token cache, on disk or in memory).
async fn login(cfg: &CloudConfig, generation: u64) -> Result<Credentials> {
    let os = AsyncOpenStack::builder(cfg)
        .disable_auth_cache(true)
        .connect()
        .await
        .map_err(|e| {
            let cloud = cfg.name.as_deref().unwrap_or("(unnamed)");
            Error::Auth(format!("login to cloud {cloud:?} failed: {e}"))
        })?;
    let token = os
        .get_auth_token()
        .ok_or_else(|| Error::Auth("Keystone returned no token".to_owned()))?;
    let info = os.get_auth_info();
    let (expires_at, issued_at, project_id) = match &info {
        Some(i) => (
            Some(i.token.expires_at),
            i.token.issued_at,
            i.token.project.as_ref().and_then(|p| p.id.clone()),
        ),
        None => (None, None, None),
    };
    let network = catalog_url(&os, ServiceType::Network).await?;
    let load_balancer = catalog_url(&os, ServiceType::LoadBalancer).await?;
    let endpoints = Endpoints::from_catalog(&network, &load_balancer)?;
    debug!(?endpoints, ?expires_at, "logged in");
    if token.expose_secret().is_empty() {
        return Err(Error::Auth("Keystone returned an empty token".to_owned()));
    }
    Ok(Credentials {
        token: Some(token),
        endpoints,
        generation,
        expires_at,
        issued_at,
        project_id,
    })
}

/// The catalog's (or `<service>_endpoint_override`'s) URL for a service, interface and region as configured.
async fn catalog_url(os: &AsyncOpenStack, st: ServiceType) -> Result<String> {
    let ep = os
        .get_service_endpoint(&st, None)
        .await
        .map_err(|e| Error::Config(format!("no {st} endpoint in the catalog: {e}")))?;
    Ok(ep.url().as_str().to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_get_exactly_one_version_segment() {
        let e = Endpoints::from_catalog("http://h:9696", "http://h:9876/").unwrap();
        assert_eq!(e.network.as_str(), "http://h:9696/v2.0/");
        assert_eq!(e.load_balancer.as_str(), "http://h:9876/v2/");
        let e = Endpoints::from_catalog("http://h/networking/v2.0/", "http://h/load-balancer/v2.0").unwrap();
        assert_eq!(e.network.as_str(), "http://h/networking/v2.0/");
        assert_eq!(e.load_balancer.as_str(), "http://h/load-balancer/v2.0/");
        let e = Endpoints::from_catalog("http://h/networking", "http://h/load-balancer").unwrap();
        assert_eq!(e.network.as_str(), "http://h/networking/v2.0/");
        assert_eq!(e.root(Service::LoadBalancer).as_str(), "http://h/load-balancer/");
        assert!(Endpoints::from_catalog("not a url", "x").is_err());
    }

    fn creds(lifetime_s: i64, left_s: i64) -> (Credentials, DateTime<Utc>) {
        let now = Utc::now();
        let exp = now + chrono::Duration::seconds(left_s);
        let c = Credentials {
            token: None,
            endpoints: Endpoints::from_catalog("http://h", "http://h").unwrap(),
            generation: 1,
            expires_at: Some(exp),
            issued_at: Some(exp - chrono::Duration::seconds(lifetime_s)),
            project_id: None,
        };
        (c, now)
    }

    #[test]
    fn renewal_margin_scales_with_short_tokens() {
        let m = Duration::from_secs(120);
        // One-hour token: renewed in its last two minutes.
        let (c, now) = creds(3600, 3000);
        assert!(!c.needs_renewal(now, m));
        let (c, now) = creds(3600, 100);
        assert!(c.needs_renewal(now, m));
        // 20 s token: margin is 5 s, not 120 s.
        let (c, now) = creds(20, 10);
        assert!(!c.needs_renewal(now, m));
        let (c, now) = creds(20, 4);
        assert!(c.needs_renewal(now, m));
    }
}
