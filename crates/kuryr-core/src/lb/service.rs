//! Which Services get a load balancer, and the KuryrLoadBalancer spec each one gets.

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kuryr_api::annotations;
use kuryr_api::loadbalancer::{
    ExternalTrafficPolicy, HealthMonitorType, KuryrLoadBalancerSpec, LbAdditionalVip, LbEndpointSlice,
    LbHealthMonitor, LbPort, ServiceType, SessionAffinity,
};

use super::endpoints::protocol;
use super::model::Problem;

/// Why a Service gets no load balancer (upstream skipped the same ones).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Skip {
    /// `clusterIP: None`: DNS only.
    Headless,
    /// A DNS CNAME, nothing to balance.
    ExternalName,
    /// `default/kubernetes`, when the operator turned its load balancer off.
    DefaultKubernetes,
    /// A type this controller does not know (NodePort is served as ClusterIP, with a Problem).
    UnsupportedType(String),
    /// No clusterIP allocated (yet).
    NoClusterIp,
    /// No port the cloud could balance.
    NoPorts,
}

impl Skip {
    pub fn reason(&self) -> &'static str {
        match self {
            Skip::Headless => "Headless",
            Skip::ExternalName => "ExternalName",
            Skip::DefaultKubernetes => "DefaultKubernetesService",
            Skip::UnsupportedType(_) => "UnsupportedServiceType",
            Skip::NoClusterIp => "NoClusterIP",
            Skip::NoPorts => "NoPorts",
        }
    }

    pub fn message(&self) -> String {
        match self {
            Skip::Headless => "headless Service (clusterIP: None): no load balancer".into(),
            Skip::ExternalName => "ExternalName Service: no load balancer".into(),
            Skip::DefaultKubernetes => {
                "default/kubernetes is not load-balanced (lb-default-kubernetes is off)".into()
            }
            Skip::UnsupportedType(t) => {
                format!(
                    "Service type {t} is not served (ClusterIP, NodePort's clusterIP and LoadBalancer are)"
                )
            }
            Skip::NoClusterIp => "the Service has no clusterIP yet".into(),
            Skip::NoPorts => "the Service has no TCP, UDP or SCTP port".into(),
        }
    }
}

/// Settings of the controller that go into every spec.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SpecDefaults {
    /// The VIP subnet (the cluster's service subnet).
    pub subnet_id: Option<String>,
    /// Dual-stack: the service subnet of the other IP family (on the same network), for the Service's
    /// second clusterIP.
    pub secondary_subnet_id: Option<String>,
    pub project_id: Option<String>,
    /// Octavia provider when the Service names none.
    pub provider: Option<String>,
    /// Leave `default/kubernetes` alone (its clients then need another way to the API servers).
    pub skip_default_kubernetes: bool,
}

/// The spec of `svc`'s KuryrLoadBalancer, with problems found in its annotations (each one ignored: the
/// Service is served as if the annotation were absent). `slices` are its backends (see
/// [`super::endpoints`]).
pub fn service_spec(
    svc: &Service,
    slices: Vec<LbEndpointSlice>,
    defaults: &SpecDefaults,
) -> Result<(KuryrLoadBalancerSpec, Vec<Problem>), Skip> {
    let ns = svc.metadata.namespace.as_deref().unwrap_or_default();
    let name = svc.metadata.name.as_deref().unwrap_or_default();
    if defaults.skip_default_kubernetes && ns == "default" && name == "kubernetes" {
        return Err(Skip::DefaultKubernetes);
    }
    let spec = svc.spec.clone().unwrap_or_default();
    let service_type = match spec.type_.as_deref().unwrap_or("ClusterIP") {
        "ClusterIP" => ServiceType::ClusterIp,
        "LoadBalancer" => ServiceType::LoadBalancer,
        // Its clusterIP is a ClusterIP Service's; only its node ports are not served.
        "NodePort" => ServiceType::ClusterIp,
        "ExternalName" => return Err(Skip::ExternalName),
        other => return Err(Skip::UnsupportedType(other.to_owned())),
    };
    let ip = match spec.cluster_ip.as_deref() {
        Some("None") => return Err(Skip::Headless),
        None | Some("") => return Err(Skip::NoClusterIp),
        Some(ip) => ip.to_owned(),
    };
    let mut problems = Vec::new();
    if spec.type_.as_deref() == Some("NodePort") {
        problems.push(Problem::new(
            "NodePortUnsupported",
            "type NodePort: its clusterIP is served, its node ports are not (pods are reached directly; \
             use type LoadBalancer for a floating IP)",
        ));
    }
    if spec.internal_traffic_policy.as_deref() == Some("Local") {
        problems.push(Problem::new(
            "InternalTrafficPolicyUnsupported",
            "internalTrafficPolicy Local: one Octavia load balancer serves the whole cluster, not one per \
             node, so every client reaches every endpoint, its own node's or not",
        ));
    }
    let others: Vec<String> = spec
        .cluster_ips
        .iter()
        .flatten()
        .filter(|c| **c != ip && !c.is_empty() && *c != "None")
        .cloned()
        .collect();
    let additional_vips = match &defaults.secondary_subnet_id {
        Some(subnet) => others
            .into_iter()
            .map(|ip| LbAdditionalVip {
                ip,
                subnet_id: subnet.clone(),
            })
            .collect(),
        None if !others.is_empty() => {
            problems.push(Problem::new(
                "DualStackUnsupported",
                format!(
                    "no secondary service subnet is configured: served on {ip} only, not on {}",
                    others.join(", ")
                ),
            ));
            Vec::new()
        }
        None => Vec::new(),
    };
    let mut ports = Vec::new();
    for p in spec.ports.iter().flatten() {
        let Some(proto) = protocol(p.protocol.as_deref()) else {
            problems.push(Problem::new(
                "UnsupportedProtocol",
                format!(
                    "port {} protocol {} cannot be load-balanced",
                    p.port,
                    p.protocol.as_deref().unwrap_or_default()
                ),
            ));
            continue;
        };
        let target_port = match &p.target_port {
            Some(IntOrString::Int(n)) => n.to_string(),
            Some(IntOrString::String(s)) if !s.is_empty() => s.clone(),
            _ => p.port.to_string(),
        };
        ports.push(LbPort {
            name: p.name.clone().filter(|n| !n.is_empty()),
            port: p.port,
            protocol: proto,
            target_port,
            node_port: p.node_port,
        });
    }
    if ports.is_empty() {
        return Err(Skip::NoPorts);
    }
    let annotations = svc.metadata.annotations.clone().unwrap_or_default();
    let mut timeout = |key: &str| match annotations.get(key) {
        None => None,
        Some(v) => match v.trim().parse::<i32>() {
            Ok(n) if n >= 0 => Some(n),
            _ => {
                problems.push(Problem::new(
                    "InvalidAnnotation",
                    format!("{key}: {v:?} is not a number of milliseconds"),
                ));
                None
            }
        },
    };
    let timeout_client_data = timeout(annotations::TIMEOUT_CLIENT_DATA);
    let timeout_member_data = timeout(annotations::TIMEOUT_MEMBER_DATA);
    let health_monitor = match annotations.get(annotations::HEALTH_MONITOR) {
        None => None,
        Some(v) => match parse_health_monitor(v) {
            Ok(hm) => hm,
            Err(msg) => {
                problems.push(Problem::new(
                    "InvalidAnnotation",
                    format!("{}: {msg}", annotations::HEALTH_MONITOR),
                ));
                None
            }
        },
    };
    problems.extend(crate::annotations::refused(Some(&annotations)));
    let provider = annotations
        .get(annotations::LB_PROVIDER)
        .map(|p| p.trim().to_owned())
        .filter(|p| !p.is_empty())
        .or_else(|| defaults.provider.clone());
    let session_affinity = match spec.session_affinity.as_deref() {
        Some("ClientIP") => Some(SessionAffinity::ClientIp),
        _ => None,
    };
    let session_affinity_timeout_seconds = session_affinity.and_then(|_| {
        spec.session_affinity_config
            .as_ref()?
            .client_ip
            .as_ref()?
            .timeout_seconds
    });
    let external_traffic_policy = match spec.external_traffic_policy.as_deref() {
        Some("Local") if service_type == ServiceType::LoadBalancer => Some(ExternalTrafficPolicy::Local),
        _ => None,
    };
    let load_balancer_source_ranges = if service_type == ServiceType::LoadBalancer {
        spec.load_balancer_source_ranges.clone().unwrap_or_default()
    } else {
        Vec::new()
    };
    let lb_ip = (service_type == ServiceType::LoadBalancer)
        .then(|| spec.load_balancer_ip.clone())
        .flatten()
        .filter(|s| !s.is_empty());
    Ok((
        KuryrLoadBalancerSpec {
            ip: Some(ip),
            lb_ip,
            ports,
            project_id: defaults.project_id.clone(),
            security_groups_ids: Vec::new(),
            subnet_id: defaults.subnet_id.clone(),
            additional_vips,
            service_type: Some(service_type),
            provider,
            timeout_client_data,
            timeout_member_data,
            endpoint_slices: slices,
            session_affinity,
            session_affinity_timeout_seconds,
            external_traffic_policy,
            load_balancer_source_ranges,
            health_monitor,
        },
        problems,
    ))
}

/// `"true"` / `"TCP"` / `"HTTP"` (defaults for the rest), `"false"` (none), or the KuryrLoadBalancer's
/// `healthMonitor` object as JSON, e.g. `{"type":"HTTP","delaySeconds":3,"urlPath":"/healthz"}`.
pub fn parse_health_monitor(v: &str) -> Result<Option<LbHealthMonitor>, String> {
    let v = v.trim();
    let simple = |t| {
        Ok(Some(LbHealthMonitor {
            monitor_type: t,
            delay_seconds: None,
            timeout_seconds: None,
            max_retries: None,
            max_retries_down: None,
            url_path: None,
            expected_codes: None,
            monitor_port: None,
        }))
    };
    match v.to_ascii_lowercase().as_str() {
        "" | "false" | "no" => return Ok(None),
        "true" | "yes" | "tcp" => return simple(HealthMonitorType::Tcp),
        "http" => return simple(HealthMonitorType::Http),
        _ => {}
    }
    let hm: LbHealthMonitor = serde_json::from_str(v).map_err(|e| format!("{v:?}: {e}"))?;
    check_health_monitor(&hm)?;
    Ok(Some(hm))
}

/// What the KuryrLoadBalancer CRD schema and Octavia's API accept for a monitor. An annotation outside it
/// would make the API server refuse the whole KuryrLoadBalancer (the Service would get no load balancer at
/// all) or Octavia refuse the monitor on every sync; refused here, it is one problem and no monitor.
fn check_health_monitor(hm: &LbHealthMonitor) -> Result<(), String> {
    let range = |name: &str, v: Option<i32>, lo: i32, hi: i32| match v {
        Some(n) if !(lo..=hi).contains(&n) => Err(format!("{name} {n} is outside {lo}..={hi}")),
        _ => Ok(()),
    };
    range("delaySeconds", hm.delay_seconds, 1, i32::MAX)?;
    range("timeoutSeconds", hm.timeout_seconds, 1, i32::MAX)?;
    range("maxRetries", hm.max_retries, 1, 10)?;
    range("maxRetriesDown", hm.max_retries_down, 1, 10)?;
    range("monitorPort", hm.monitor_port, 1, 65535)?;
    if let (Some(d), Some(t)) = (hm.delay_seconds, hm.timeout_seconds) {
        if t > d {
            return Err(format!("timeoutSeconds {t} exceeds delaySeconds {d}"));
        }
    }
    if let Some(p) = &hm.url_path {
        if !p.starts_with('/') || p.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(format!("urlPath {p:?} is not an absolute URL path"));
        }
    }
    if let Some(c) = &hm.expected_codes {
        if !valid_expected_codes(c) {
            return Err(format!(
                "expectedCodes {c:?} is not a status code, a comma list of them or a range like 200-299"
            ));
        }
    }
    Ok(())
}

/// Octavia's `expected_codes`: `^(\d{3}(\s*,\s*\d{3})*)$|^(\d{3}-\d{3})$`.
fn valid_expected_codes(s: &str) -> bool {
    let code = |t: &str| t.len() == 3 && t.bytes().all(|b| b.is_ascii_digit());
    if let Some((a, b)) = s.split_once('-') {
        return code(a) && code(b);
    }
    let parts: Vec<&str> = s.split(',').collect();
    let last = parts.len() - 1;
    parts.iter().enumerate().all(|(i, p)| {
        code(p.trim())
            && (i > 0 || !p.starts_with(char::is_whitespace))
            && (i < last || !p.ends_with(char::is_whitespace))
    })
}
