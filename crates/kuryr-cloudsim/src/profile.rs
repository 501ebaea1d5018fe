//! The profile: latency distributions per operation, background-transition durations, IPAM conflict
//! model, Keystone users, extension list and initial faults. Loaded from YAML (or JSON), replaceable at
//! runtime through `/_sim/profile`. Every duration is in milliseconds and is multiplied by `time_scale`
//! (fault `hold_ms` and token lifetimes are not: they race the client's real clock).

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::faults::{FaultRule, LbFaultRule};

#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    #[error("reading profile {path}: {source}")]
    Read { path: String, source: std::io::Error },
    #[error("parsing profile {path}: {source}")]
    Parse { path: String, source: serde_yaml::Error },
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AuthMode {
    /// Tokens from `POST /v3/auth/tokens` are required on every Neutron/Octavia call.
    #[default]
    Keystone,
    /// Anything goes; the project comes from the body, `X-Project-Id` or the default project.
    Noauth,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Profile {
    /// Multiplies every latency and transition duration (0 = instant, 0.01 = 100x faster).
    pub time_scale: f64,
    /// Seed for every random draw (latency samples, fault and conflict rolls); random when absent.
    pub seed: Option<u64>,
    pub auth: AuthMode,
    pub latency: LatencyProfile,
    pub ipam_conflict: IpamConflict,
    pub neutron: NeutronProfile,
    pub octavia: OctaviaProfile,
    pub keystone: KeystoneProfile,
    /// Request faults active from the start (see `faults.rs`).
    pub faults: Vec<FaultRule>,
    /// Load balancer provisioning faults active from the start.
    pub lb_faults: Vec<LbFaultRule>,
    /// How many calls the call log keeps (oldest dropped first).
    pub call_log_capacity: usize,
    /// Request body limits (oslo.middleware's sizelimit, `max_request_body_size`): a larger body is
    /// answered 413 before the API sees it. Octavia wraps its API in it (114,688 bytes by default);
    /// Neutron's api-paste pipeline has no sizelimit filter (a proxy in front may add one).
    pub max_request_body: BodyLimits,
    /// A service that suffers under load (`load.rs`): none by default.
    pub load: crate::load::LoadProfile,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BodyLimits {
    pub neutron: Option<usize>,
    pub octavia: Option<usize>,
}

impl Default for BodyLimits {
    fn default() -> Self {
        Self {
            neutron: None,
            octavia: Some(114_688),
        }
    }
}

impl Default for Profile {
    fn default() -> Self {
        Self {
            time_scale: 1.0,
            seed: None,
            auth: AuthMode::Keystone,
            latency: LatencyProfile::default(),
            ipam_conflict: IpamConflict::default(),
            neutron: NeutronProfile::default(),
            octavia: OctaviaProfile::default(),
            keystone: KeystoneProfile::default(),
            faults: Vec::new(),
            lb_faults: Vec::new(),
            call_log_capacity: 200_000,
            max_request_body: BodyLimits::default(),
            load: crate::load::LoadProfile::default(),
        }
    }
}

impl Profile {
    /// Zero latency, instant transitions, no faults: what in-process tests want.
    pub fn zero() -> Self {
        Self {
            time_scale: 0.0,
            ..Self::default()
        }
    }

    pub fn with_auth(mut self, auth: AuthMode) -> Self {
        self.auth = auth;
        self
    }

    pub fn load(path: &Path) -> Result<Self, ProfileError> {
        let text = std::fs::read_to_string(path).map_err(|source| ProfileError::Read {
            path: path.display().to_string(),
            source,
        })?;
        Self::from_yaml(&text).map_err(|source| ProfileError::Parse {
            path: path.display().to_string(),
            source,
        })
    }

    /// YAML is a superset of JSON, so this reads both.
    pub fn from_yaml(text: &str) -> Result<Self, serde_yaml::Error> {
        serde_yaml::from_str(text)
    }

    /// A duration scaled by `time_scale`.
    pub fn scaled(&self, ms: f64) -> Duration {
        let ms = (ms * self.time_scale).max(0.0);
        if ms.is_finite() {
            Duration::from_secs_f64(ms / 1000.0)
        } else {
            Duration::ZERO
        }
    }
}

/// A latency distribution in milliseconds. `5` is shorthand for `{fixed: 5}`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Dist {
    Ms(f64),
    Spec(DistSpec),
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum DistSpec {
    Fixed(f64),
    Uniform {
        min: f64,
        max: f64,
    },
    /// Log-normal fitted through the median and the 99th percentile; `cap` bounds the tail.
    Lognormal {
        p50: f64,
        p99: f64,
        #[serde(default)]
        cap: Option<f64>,
    },
}

impl Default for Dist {
    fn default() -> Self {
        Dist::Ms(0.0)
    }
}

/// z-score of the 99th percentile of the standard normal distribution.
const Z99: f64 = 2.326_347_874;

impl Dist {
    pub fn sample_ms(&self, rng: &mut fastrand::Rng) -> f64 {
        match self {
            Dist::Ms(ms) => *ms,
            Dist::Spec(DistSpec::Fixed(ms)) => *ms,
            Dist::Spec(DistSpec::Uniform { min, max }) => min + (max - min).max(0.0) * rng.f64(),
            Dist::Spec(DistSpec::Lognormal { p50, p99, cap }) => {
                if *p50 <= 0.0 {
                    return 0.0;
                }
                let mu = p50.ln();
                let sigma = ((p99.max(*p50)).ln() - mu) / Z99;
                // Box-Muller; 1 - f64() keeps the logarithm's argument in (0, 1].
                let (u1, u2) = (1.0 - rng.f64(), rng.f64());
                let z = (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos();
                let v = (mu + sigma * z).exp();
                cap.map_or(v, |c| v.min(c))
            }
        }
    }

    pub fn is_zero(&self) -> bool {
        match self {
            Dist::Ms(ms) | Dist::Spec(DistSpec::Fixed(ms)) => *ms <= 0.0,
            Dist::Spec(DistSpec::Uniform { max, .. }) => *max <= 0.0,
            Dist::Spec(DistSpec::Lognormal { p50, .. }) => *p50 <= 0.0,
        }
    }
}

/// API latency of one operation: a distribution, or `{base, per_item}` for bulk calls (the per-item
/// part is sampled once and multiplied by the number of items).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(untagged)]
pub enum LatencySpec {
    Bulk {
        base: Dist,
        #[serde(default)]
        per_item: Option<Dist>,
    },
    Plain(Dist),
}

impl Default for LatencySpec {
    fn default() -> Self {
        LatencySpec::Plain(Dist::default())
    }
}

impl LatencySpec {
    pub fn sample_ms(&self, items: usize, rng: &mut fastrand::Rng) -> f64 {
        match self {
            LatencySpec::Plain(d) => d.sample_ms(rng),
            LatencySpec::Bulk { base, per_item } => {
                base.sample_ms(rng) + per_item.as_ref().map_or(0.0, |d| d.sample_ms(rng) * items as f64)
            }
        }
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LatencyProfile {
    /// Used for every op without an entry.
    pub default: LatencySpec,
    /// Keyed by op name (`neutron.ports.bulk_create`), by `op@provider` for `octavia.loadbalancers.create`,
    /// or by a prefix ending in `*` (`neutron.*`). Exact beats the longest prefix beats `default`.
    pub ops: BTreeMap<String, LatencySpec>,
}

impl LatencyProfile {
    pub fn lookup(&self, op: &str, provider: Option<&str>) -> &LatencySpec {
        if let Some(p) = provider {
            if let Some(s) = self.ops.get(&format!("{op}@{p}")) {
                return s;
            }
        }
        if let Some(s) = self.ops.get(op) {
            return s;
        }
        self.ops
            .iter()
            .filter(|(k, _)| k.strip_suffix('*').is_some_and(|prefix| op.starts_with(prefix)))
            .max_by_key(|(k, _)| k.len())
            .map_or(&self.default, |(_, s)| s)
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IpamConflictKind {
    /// 409 `IpAddressAlreadyAllocated` naming the IP the port would have got.
    #[default]
    AlreadyAllocated,
    /// 409 `IpAddressGenerationFailure` for the network.
    GenerationFailure,
}

/// Probability that a port create fails with an IPAM conflict:
/// `min(max_rate, base_rate + per_concurrent * (other port creates in flight))`, per item for bulk calls.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct IpamConflict {
    pub base_rate: f64,
    pub per_concurrent: f64,
    pub max_rate: f64,
    pub error: IpamConflictKind,
}

impl Default for IpamConflict {
    fn default() -> Self {
        Self {
            base_rate: 0.0,
            per_concurrent: 0.0,
            max_rate: 1.0,
            error: IpamConflictKind::AlreadyAllocated,
        }
    }
}

impl IpamConflict {
    pub fn probability(&self, concurrent: usize, items: usize) -> f64 {
        let others = concurrent.saturating_sub(1) as f64;
        let p = (self.base_rate + self.per_concurrent * others).clamp(0.0, self.max_rate.clamp(0.0, 1.0));
        1.0 - (1.0 - p).powi(items.max(1) as i32)
    }
}

/// Extensions a Neutron 29 ML2/OVN server with the trunk plugin lists.
pub const DEFAULT_EXTENSIONS: &[&str] = &[
    "address-scope",
    "agent",
    "allowed-address-pairs",
    "availability_zone",
    "binding",
    "binding-extended",
    "default-subnetpools",
    "empty-string-filtering",
    "external-net",
    "extra_dhcp_opt",
    "extraroute",
    "filter-validation",
    "fip-port-details",
    "ip-substring-filtering",
    "multi-provider",
    "net-mtu",
    "net-mtu-writable",
    "network_availability_zone",
    "pagination",
    "port-device-profile",
    "port-mac-address-regenerate",
    "port-security",
    "project-id",
    "provider",
    "quotas",
    "quota_details",
    "revision-if-match",
    "router",
    "security-group",
    "security-groups-remote-address-group",
    "sorting",
    "standard-attr-description",
    "standard-attr-revisions",
    "standard-attr-tag",
    "standard-attr-timestamp",
    "stateful-security-group",
    "subnet_allocation",
    "subnet-service-types",
    "tag-ports-during-bulk-creation",
    "trunk",
    "trunk-details",
];

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct NeutronProfile {
    /// Delay after `binding:host_id` is set until the port goes ACTIVE (the VM's NIC is "plugged").
    pub port_active_delay: Dist,
    /// Delay after a port becomes a subport (of a trunk whose parent is ACTIVE) until it goes ACTIVE.
    pub subport_active_delay: Dist,
    /// Real ML2/OVN only activates subports whose parent is ACTIVE.
    pub subport_requires_active_parent: bool,
    /// Whether setting `binding:host_id` makes a port go ACTIVE at all.
    pub bound_port_goes_active: bool,
    /// Replaces the extension list when set.
    pub extensions: Option<Vec<String>>,
    /// Removed from the extension list (e.g. `[trunk]` to test a cloud without trunks).
    pub disabled_extensions: Vec<String>,
    /// Default quotas (Neutron's defaults when absent); `-1` is unlimited.
    pub quotas: BTreeMap<String, i64>,
    /// MTU of new networks (geneve on OVN: 1442).
    pub network_mtu: u32,
}

impl Default for NeutronProfile {
    fn default() -> Self {
        Self {
            port_active_delay: Dist::Ms(0.0),
            subport_active_delay: Dist::Ms(0.0),
            subport_requires_active_parent: true,
            bound_port_goes_active: true,
            extensions: None,
            disabled_extensions: Vec::new(),
            quotas: BTreeMap::new(),
            network_mtu: 1442,
        }
    }
}

impl NeutronProfile {
    pub fn extension_aliases(&self) -> Vec<String> {
        let base: Vec<String> = match &self.extensions {
            Some(list) => list.clone(),
            None => DEFAULT_EXTENSIONS.iter().map(|s| (*s).to_owned()).collect(),
        };
        base.into_iter()
            .filter(|a| !self.disabled_extensions.contains(a))
            .collect()
    }

    pub fn has_extension(&self, alias: &str) -> bool {
        if self.disabled_extensions.iter().any(|a| a == alias) {
            return false;
        }
        match &self.extensions {
            Some(list) => list.iter().any(|a| a == alias),
            None => DEFAULT_EXTENSIONS.contains(&alias),
        }
    }
}

/// How long an Octavia provider takes to move objects out of PENDING_*.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ProviderTiming {
    pub description: String,
    /// PENDING_CREATE -> ACTIVE of the load balancer.
    pub lb_create: Dist,
    /// Extra time after the LB is ACTIVE until the children of a fully-populated create are ACTIVE
    /// (the ovn provider reports the LB ACTIVE first).
    pub tree_extra: Dist,
    /// Any change to a listener, pool, member or health monitor (LB back to ACTIVE).
    pub update: Dist,
    /// Added per created/updated/deleted member of a batch member update.
    pub member_batch_per_item: Dist,
    /// PENDING_DELETE -> gone (LB, cascade, or one child).
    pub delete: Dist,
    /// After a change settles, members removed by it stay listed (list and status tree) as
    /// PENDING_DELETE this much longer while the LB and pool already read ACTIVE. The ovn provider does
    /// this after a batch member update (lab: gone from the list ~0.75 s and from the tree ~0.95 s later).
    pub member_removal_lag: Dist,
    /// The provider refuses `additional_vips` (501 `ProviderUnsupportedOptionError`), as providers
    /// without dual-stack load balancers do.
    pub no_additional_vips: bool,
    /// The provider refuses SOURCE_IP session persistence (400 "does not support a requested option"), as
    /// ovn providers before SOURCE_IP affinity did.
    #[serde(default)]
    pub no_source_ip_persistence: bool,
}

impl Default for ProviderTiming {
    fn default() -> Self {
        Self {
            description: String::new(),
            lb_create: Dist::Ms(0.0),
            tree_extra: Dist::Ms(0.0),
            update: Dist::Ms(0.0),
            member_batch_per_item: Dist::Ms(0.0),
            delete: Dist::Ms(0.0),
            member_removal_lag: Dist::Ms(0.0),
            no_additional_vips: false,
            no_source_ip_persistence: false,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct OctaviaProfile {
    /// Highest API version in the root version document (`2.30` is Octavia 19's).
    pub max_version: String,
    pub default_provider: String,
    /// Enabled providers; only `amphora` and `ovn` have built-in validation rules.
    pub providers: BTreeMap<String, ProviderTiming>,
    /// Real Octavia creates the VIP port before validating a fully-populated body, and leaks it on a 400.
    pub leak_vip_port_on_graph_error: bool,
}

impl Default for OctaviaProfile {
    fn default() -> Self {
        let mut providers = BTreeMap::new();
        providers.insert(
            "amphora".to_owned(),
            ProviderTiming {
                description: "Amphora provider.".to_owned(),
                ..ProviderTiming::default()
            },
        );
        providers.insert(
            "ovn".to_owned(),
            ProviderTiming {
                description: "Octavia OVN driver.".to_owned(),
                ..ProviderTiming::default()
            },
        );
        Self {
            max_version: "2.30".to_owned(),
            default_provider: "amphora".to_owned(),
            providers,
            leak_vip_port_on_graph_error: true,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct KeystoneUser {
    pub id: String,
    pub name: String,
    pub password: String,
    pub domain: String,
    /// Name of the project the user has roles on (its scope).
    pub project: String,
    pub roles: Vec<String>,
}

impl Default for KeystoneUser {
    fn default() -> Self {
        Self {
            id: String::new(),
            name: String::new(),
            password: String::new(),
            domain: "Default".to_owned(),
            project: String::new(),
            roles: vec!["admin".to_owned(), "member".to_owned(), "reader".to_owned()],
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct KeystoneProject {
    pub id: String,
    pub name: String,
    pub domain: String,
}

impl Default for KeystoneProject {
    fn default() -> Self {
        Self {
            id: String::new(),
            name: String::new(),
            domain: "Default".to_owned(),
        }
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AppCredential {
    pub id: String,
    pub name: String,
    pub secret: String,
    /// User name; the credential is scoped to that user's project.
    pub user: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct KeystoneProfile {
    pub token_ttl_s: u64,
    pub region: String,
    /// Base URL put in the catalog; taken from the request's Host header when absent.
    pub public_url: Option<String>,
    pub projects: Vec<KeystoneProject>,
    pub users: Vec<KeystoneUser>,
    pub application_credentials: Vec<AppCredential>,
    /// Project used in noauth mode when the request names none.
    pub default_project: String,
}

pub const SERVICE_PROJECT_ID: &str = "00000000000000000000000000000001";
pub const ADMIN_PROJECT_ID: &str = "00000000000000000000000000000002";

impl Default for KeystoneProfile {
    fn default() -> Self {
        Self {
            token_ttl_s: 3600,
            region: "RegionOne".to_owned(),
            public_url: None,
            projects: vec![
                KeystoneProject {
                    id: SERVICE_PROJECT_ID.to_owned(),
                    name: "service".to_owned(),
                    ..Default::default()
                },
                KeystoneProject {
                    id: ADMIN_PROJECT_ID.to_owned(),
                    name: "admin".to_owned(),
                    ..Default::default()
                },
            ],
            users: vec![
                KeystoneUser {
                    id: "0000000000000000000000000000000a".to_owned(),
                    name: "kuryr".to_owned(),
                    password: "kuryr-secret".to_owned(),
                    project: "service".to_owned(),
                    ..Default::default()
                },
                KeystoneUser {
                    id: "0000000000000000000000000000000b".to_owned(),
                    name: "admin".to_owned(),
                    password: "admin-secret".to_owned(),
                    project: "admin".to_owned(),
                    ..Default::default()
                },
            ],
            application_credentials: vec![AppCredential {
                id: "0000000000000000000000000000a001".to_owned(),
                name: "kuryr-appcred".to_owned(),
                secret: "appcred-secret".to_owned(),
                user: "kuryr".to_owned(),
            }],
            default_project: SERVICE_PROJECT_ID.to_owned(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn yaml_accepts_shorthand_and_tagged_distributions() {
        let p = Profile::from_yaml(
            r#"
time_scale: 0.5
latency:
  default: 3
  ops:
    neutron.ports.create: {lognormal: {p50: 100, p99: 400}}
    neutron.ports.bulk_create: {base: {fixed: 50}, per_item: {uniform: {min: 10, max: 20}}}
    "octavia.*": {fixed: 7}
"#,
        )
        .unwrap();
        let mut rng = fastrand::Rng::with_seed(1);
        assert_eq!(
            p.latency
                .lookup("neutron.networks.list", None)
                .sample_ms(1, &mut rng),
            3.0
        );
        assert_eq!(
            p.latency
                .lookup("octavia.pools.create", None)
                .sample_ms(1, &mut rng),
            7.0
        );
        let bulk = p
            .latency
            .lookup("neutron.ports.bulk_create", None)
            .sample_ms(10, &mut rng);
        assert!((150.0..=250.0).contains(&bulk), "{bulk}");
        assert_eq!(p.scaled(1000.0), Duration::from_millis(500));
    }

    #[test]
    fn shipped_profiles_parse() {
        let default = Profile::from_yaml(include_str!("../profiles/default.yaml")).unwrap();
        assert_eq!(default.time_scale, 0.0);
        let real = Profile::from_yaml(include_str!("../profiles/realistic.yaml")).unwrap();
        assert!(real.octavia.providers.contains_key("ovn"));
        let mut rng = fastrand::Rng::with_seed(3);
        let bulk = real
            .latency
            .lookup("neutron.ports.bulk_create", None)
            .sample_ms(10, &mut rng);
        assert!(bulk > 250.0, "{bulk}");
        assert!(
            real.latency
                .lookup("octavia.loadbalancers.create", Some("ovn"))
                .sample_ms(1, &mut rng)
                > 0.0
        );
    }

    #[test]
    fn lognormal_matches_its_percentiles() {
        let d = Dist::Spec(DistSpec::Lognormal {
            p50: 100.0,
            p99: 1000.0,
            cap: None,
        });
        let mut rng = fastrand::Rng::with_seed(7);
        let mut v: Vec<f64> = (0..20_000).map(|_| d.sample_ms(&mut rng)).collect();
        v.sort_by(f64::total_cmp);
        let p50 = v[10_000];
        let p99 = v[19_800];
        assert!((85.0..115.0).contains(&p50), "p50 {p50}");
        assert!((800.0..1250.0).contains(&p99), "p99 {p99}");
    }

    #[test]
    fn conflict_probability_rises_with_concurrency_and_items() {
        let c = IpamConflict {
            base_rate: 0.0,
            per_concurrent: 0.1,
            max_rate: 0.5,
            ..Default::default()
        };
        assert_eq!(c.probability(1, 1), 0.0);
        assert!((c.probability(3, 1) - 0.2).abs() < 1e-9);
        assert!((c.probability(100, 1) - 0.5).abs() < 1e-9);
        assert!(c.probability(3, 10) > c.probability(3, 1));
    }
}
