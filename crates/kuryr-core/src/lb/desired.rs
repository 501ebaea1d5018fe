//! The load balancer tree a KuryrLoadBalancer spec asks for, cut down to what this cloud's Octavia can
//! build. Every cut is a [`Problem`]; the rest of the Service is still served.

use std::collections::BTreeMap;

use kuryr_api::loadbalancer::{
    HealthMonitorType, KuryrLoadBalancerSpec, LbHealthMonitor, LbProtocol, ServiceType, SessionAffinity,
};

use super::endpoints::ready_members;
use super::model::{
    AdditionalVip, DesiredHm, DesiredLb, DesiredListener, DesiredPool, ListenerKey, MemberSubnets, Problem,
    SessionPersistence,
};
use super::names;

/// Octavia API versions at which features appear (same thresholds as upstream and kuryr-openstack).
pub const UDP: (u32, u32) = (2, 1);
pub const ALLOWED_CIDRS: (u32, u32) = (2, 12);
pub const SAME_PORT_DIFFERENT_PROTOCOL: (u32, u32) = (2, 13);
pub const SCTP: (u32, u32) = (2, 23);
/// Octavia `additional_vips` (a second VIP, of the other IP family, for dual-stack Services).
pub const ADDITIONAL_VIPS: (u32, u32) = (2, 26);

pub const OVN: &str = "ovn";

/// Kubernetes' default `sessionAffinityConfig.clientIP.timeoutSeconds` (3 hours).
pub const DEFAULT_AFFINITY_TIMEOUT_S: u32 = 10800;

/// An option a provider's Octavia driver may not support, whatever the API version (older ovn providers
/// refuse both); learnt from its refusal ("does not support a requested option").
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ProviderFeature {
    /// A second VIP, of the other IP family (dual-stack Services).
    AdditionalVips,
    /// `session_persistence: SOURCE_IP` (sessionAffinity: ClientIP).
    SourceIpPersistence,
}

/// What the cloud's Octavia offers, and the provider this load balancer uses.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OctaviaCaps {
    pub version: (u32, u32),
    /// Effective provider (the spec's, else the cloud's default, e.g. `amphora`).
    pub provider: String,
    /// What this provider refused before.
    pub refused: std::collections::BTreeSet<ProviderFeature>,
}

impl OctaviaCaps {
    fn is_ovn(&self) -> bool {
        self.provider == OVN
    }

    fn refuses(&self, feature: ProviderFeature) -> bool {
        self.refused.contains(&feature)
    }

    /// The ovn provider only hashes SOURCE_IP_PORT; amphora has round robin.
    pub fn lb_algorithm(&self) -> &'static str {
        if self.is_ovn() {
            "SOURCE_IP_PORT"
        } else {
            "ROUND_ROBIN"
        }
    }

    fn at_least(&self, v: (u32, u32)) -> bool {
        self.version >= v
    }
}

fn version(v: (u32, u32)) -> String {
    format!("{}.{}", v.0, v.1)
}

/// `namespace`/`name`: the Service's. `member_subnets`: subnets of the backends (the pod subnets).
pub fn desired_lb(
    namespace: &str,
    name: &str,
    spec: &KuryrLoadBalancerSpec,
    caps: &OctaviaCaps,
    member_subnets: &MemberSubnets,
) -> (DesiredLb, Vec<Problem>) {
    let mut problems = Vec::new();
    let mut listeners = BTreeMap::new();
    let lb_type = spec.service_type.unwrap_or(ServiceType::ClusterIp);

    // sessionAffinity ClientIP: SOURCE_IP persistence, unless this provider refused it before.
    let client_ip = spec.session_affinity == Some(SessionAffinity::ClientIp);
    let client_ip = if client_ip && caps.refuses(ProviderFeature::SourceIpPersistence) {
        problems.push(Problem::new(
            "SessionAffinityUnsupported",
            format!(
                "sessionAffinity ClientIP: provider {} refused SOURCE_IP session persistence; it only \
                 hashes source IP and port, so clients are not pinned to one backend",
                caps.provider
            ),
        ));
        false
    } else {
        client_ip
    };
    // Kubernetes defaults sessionAffinityConfig.clientIP.timeoutSeconds; a spec written without it gets
    // that default too.
    let affinity_timeout = spec
        .session_affinity_timeout_seconds
        .and_then(|t| u32::try_from(t).ok())
        .filter(|t| *t > 0)
        .unwrap_or(DEFAULT_AFFINITY_TIMEOUT_S);
    // Ports whose ClientIP persistence has no effect (see below).
    let mut unpinned = Vec::new();
    // Ports without a ready endpoint on the ovn provider (see below).
    let mut dropped = Vec::new();

    let mut expose = lb_type == ServiceType::LoadBalancer;
    let mut allowed_cidrs = Vec::new();
    if !spec.load_balancer_source_ranges.is_empty() {
        let why = if caps.is_ovn() {
            Some("the ovn provider has no allowed_cidrs".to_owned())
        } else if !caps.at_least(ALLOWED_CIDRS) {
            Some(format!(
                "allowed_cidrs needs Octavia API {} (cloud has {})",
                version(ALLOWED_CIDRS),
                version(caps.version)
            ))
        } else {
            None
        };
        match why {
            Some(why) => {
                // Fail closed: the VIP stays reachable inside the cluster only.
                expose = false;
                problems.push(Problem::new(
                    "SourceRangesUnsupported",
                    format!(
                        "loadBalancerSourceRanges cannot be enforced ({why}): no floating IP is attached"
                    ),
                ));
            }
            None => allowed_cidrs = spec.load_balancer_source_ranges.clone(),
        }
    }

    let mut additional_vips: Vec<AdditionalVip> = spec
        .additional_vips
        .iter()
        .map(|v| AdditionalVip {
            subnet_id: v.subnet_id.clone(),
            ip_address: v.ip.clone(),
        })
        .collect();
    if !additional_vips.is_empty() {
        let why = if !caps.at_least(ADDITIONAL_VIPS) {
            Some(format!(
                "additional_vips needs Octavia API {} (cloud has {})",
                version(ADDITIONAL_VIPS),
                version(caps.version)
            ))
        } else if caps.refuses(ProviderFeature::AdditionalVips) {
            Some(format!(
                "provider {} does not support additional_vips",
                caps.provider
            ))
        } else {
            None
        };
        if let Some(why) = why {
            let ips: Vec<&str> = additional_vips.iter().map(|v| v.ip_address.as_str()).collect();
            problems.push(Problem::new(
                "DualStackUnsupported",
                format!(
                    "{why}: served on {} only, not on {}",
                    spec.ip.as_deref().unwrap_or_default(),
                    ips.join(", ")
                ),
            ));
            additional_vips.clear();
        }
    }

    let timeout = |t: Option<i32>| t.filter(|t| *t > 0).and_then(|t| u64::try_from(t).ok());
    for port in &spec.ports {
        let Some(number) = u32::try_from(port.port).ok().filter(|p| (1..=65535).contains(p)) else {
            problems.push(Problem::new(
                "InvalidPort",
                format!("port {} is out of range", port.port),
            ));
            continue;
        };
        let key = ListenerKey::new(port.protocol, number);
        let label = format!("{}/{number}", names::protocol(port.protocol));
        let gate = match port.protocol {
            LbProtocol::Udp if !caps.at_least(UDP) => Some(("UdpUnsupported", UDP)),
            LbProtocol::Sctp if !caps.at_least(SCTP) => Some(("SctpUnsupported", SCTP)),
            _ => None,
        };
        if let Some((reason, v)) = gate {
            problems.push(Problem::new(
                reason,
                format!(
                    "port {label} not served: {} listeners need Octavia API {} (cloud has {})",
                    names::protocol(port.protocol),
                    version(v),
                    version(caps.version)
                ),
            ));
            continue;
        }
        if listeners.contains_key(&key) {
            problems.push(Problem::new(
                "DuplicatePort",
                format!("port {label} listed twice"),
            ));
            continue;
        }
        let shares_port = listeners.keys().any(|k: &ListenerKey| k.port == number);
        if shares_port && !caps.at_least(SAME_PORT_DIFFERENT_PROTOCOL) {
            problems.push(Problem::new(
                "MixedProtocolUnsupported",
                format!(
                    "port {label} not served: one port with two protocols needs Octavia API {} (cloud has {})",
                    version(SAME_PORT_DIFFERENT_PROTOCOL),
                    version(caps.version)
                ),
            ));
            continue;
        }
        let listener_name = names::listener(namespace, name, port.protocol, number);
        let health_monitor =
            spec.health_monitor
                .as_ref()
                .and_then(|hm| match health_monitor(hm, port.protocol, caps) {
                    Ok(hm) => Some(hm),
                    Err(why) => {
                        problems.push(Problem::new(
                            "HealthMonitorUnsupported",
                            format!("port {label}: no health monitor: {why}"),
                        ));
                        None
                    }
                });
        // Octavia takes a persistence_timeout for UDP and SCTP pools only (400 on others). Measured on
        // ovn-octavia-provider 11.0.0: it sets OVN's affinity_timeout only from that timeout, so a TCP pool
        // gets no affinity at all.
        let session_persistence = client_ip.then(|| match port.protocol {
            LbProtocol::Udp | LbProtocol::Sctp => SessionPersistence::source_ip(Some(affinity_timeout)),
            LbProtocol::Tcp => {
                if caps.is_ovn() {
                    unpinned.push(label.clone());
                }
                SessionPersistence::source_ip(None)
            }
        });
        let members = ready_members(port, &spec.endpoint_slices);
        // Only once the Service's EndpointSlices are known: a new Service's come a moment after it (for a
        // selector-less one, mirrored from its Endpoints), and 137 of 200 such Services in a bench burst
        // were told a drop they never had.
        if members.is_empty() && caps.is_ovn() && !spec.endpoint_slices.is_empty() {
            dropped.push(label.clone());
        }
        listeners.insert(
            key,
            DesiredListener {
                name: listener_name.clone(),
                timeout_client_data: timeout(spec.timeout_client_data),
                timeout_member_data: timeout(spec.timeout_member_data),
                allowed_cidrs: allowed_cidrs.clone(),
                pool: DesiredPool {
                    name: listener_name,
                    lb_algorithm: caps.lb_algorithm().to_owned(),
                    session_persistence,
                    members,
                    member_subnets: member_subnets.clone(),
                    health_monitor,
                },
            },
        );
    }
    if !unpinned.is_empty() {
        problems.push(Problem::new(
            "SessionAffinityUnsupported",
            format!(
                "sessionAffinity ClientIP has no effect on {}: Octavia takes no persistence_timeout for TCP \
                 pools and without one the ovn provider sets no OVN affinity, so clients are spread by source \
                 IP and port (UDP and SCTP ports are pinned)",
                unpinned.join(", ")
            ),
        ));
    }
    // Kubernetes refuses a connection to a port without endpoints. An OVN load balancer can (its
    // `options:reject`), but the ovn provider never sets it and Octavia's API has no field for it: such
    // a VIP drops, and clients wait for their timeout instead of failing at once.
    if !dropped.is_empty() {
        problems.push(Problem::new(
            "NoEndpointsDropped",
            format!(
                "no ready endpoint on {}: the ovn provider drops connections there, where Kubernetes refuses \
                 them, so clients time out instead of failing at once",
                dropped.join(", ")
            ),
        ));
    }
    (
        DesiredLb {
            name: names::loadbalancer(namespace, name),
            vip_address: spec.ip.clone(),
            vip_subnet_id: spec.subnet_id.clone(),
            additional_vips,
            provider: spec.provider.clone(),
            listeners,
            expose,
        },
        problems,
    )
}

/// The Octavia monitor for one pool: UDP pools get UDP-CONNECT and SCTP pools SCTP whatever was asked,
/// since a TCP probe cannot test them; the ovn provider has TCP and UDP-CONNECT only.
fn health_monitor(
    hm: &LbHealthMonitor,
    protocol: LbProtocol,
    caps: &OctaviaCaps,
) -> Result<DesiredHm, String> {
    let kind = match (protocol, hm.monitor_type) {
        (LbProtocol::Udp, _) => "UDP-CONNECT",
        (LbProtocol::Sctp, _) => "SCTP",
        (LbProtocol::Tcp, HealthMonitorType::Tcp) => "TCP",
        (LbProtocol::Tcp, HealthMonitorType::Http) => "HTTP",
        (LbProtocol::Tcp, HealthMonitorType::Https) => "HTTPS",
        (LbProtocol::Tcp, HealthMonitorType::Ping) => "PING",
        (LbProtocol::Tcp, HealthMonitorType::TlsHello) => "TLS-HELLO",
        (LbProtocol::Tcp, other) => {
            return Err(format!("{other:?} monitors cannot probe a TCP pool"));
        }
    };
    if caps.is_ovn() && !matches!(kind, "TCP" | "UDP-CONNECT") {
        return Err(format!("the ovn provider has no {kind} monitors"));
    }
    let http = matches!(kind, "HTTP" | "HTTPS");
    // Values Octavia would refuse fall back to the defaults (the CRD schema keeps them out of specs,
    // this keeps them out of Octavia whatever wrote the spec). A probe's timeout never exceeds its
    // delay: with only a timeout given, the delay grows to it.
    let positive = |v: Option<i32>| v.and_then(|v| u32::try_from(v).ok()).filter(|v| *v > 0);
    let retries = |v: Option<i32>| positive(v).filter(|v| (1..=10).contains(v));
    let timeout = positive(hm.timeout_seconds);
    let delay = positive(hm.delay_seconds).unwrap_or_else(|| timeout.unwrap_or(0).max(5));
    Ok(DesiredHm {
        kind: kind.to_owned(),
        delay,
        timeout: timeout.unwrap_or(3).min(delay),
        max_retries: retries(hm.max_retries).unwrap_or(3),
        max_retries_down: retries(hm.max_retries_down),
        url_path: if http {
            hm.url_path.clone().or(Some("/".into()))
        } else {
            None
        },
        expected_codes: if http {
            hm.expected_codes.clone().or(Some("200".into()))
        } else {
            None
        },
    })
}

#[cfg(test)]
mod health_monitor_tests {
    use kuryr_api::loadbalancer::{LbPort, ServiceType};

    use super::super::service::parse_health_monitor;
    use super::*;

    fn spec_with(hm: LbHealthMonitor) -> KuryrLoadBalancerSpec {
        KuryrLoadBalancerSpec {
            ports: vec![LbPort {
                port: 80,
                protocol: LbProtocol::Tcp,
                target_port: "80".into(),
                ..LbPort::default()
            }],
            service_type: Some(ServiceType::ClusterIp),
            health_monitor: Some(hm),
            ..KuryrLoadBalancerSpec::default()
        }
    }

    fn desired_hm(json: &str) -> DesiredHm {
        let hm = serde_json::from_str(json).unwrap();
        let caps = OctaviaCaps {
            version: (2, 26),
            provider: "amphora".into(),
            ..OctaviaCaps::default()
        };
        let (lb, _) = desired_lb("ns", "svc", &spec_with(hm), &caps, &MemberSubnets::default());
        lb.listeners
            .values()
            .next()
            .unwrap()
            .pool
            .health_monitor
            .clone()
            .unwrap()
    }

    // Found by fuzz/fuzz_targets/annotations.rs: these annotations were accepted, then the API server
    // refused the KuryrLoadBalancer (the CRD schema's ranges) or Octavia the monitor.
    #[test]
    fn monitors_outside_the_crd_schema_or_octavia_api_are_refused() {
        for bad in [
            r#"{"type":"PING","delaySeconds":0}"#,
            r#"{"type":"TCP","timeoutSeconds":-1}"#,
            r#"{"type":"TCP","maxRetries":11}"#,
            r#"{"type":"TCP","maxRetriesDown":0}"#,
            r#"{"type":"TCP","monitorPort":70000}"#,
            r#"{"type":"HTTP","urlPath":"healthz"}"#,
            r#"{"type":"HTTP","expectedCodes":"2xx"}"#,
            r#"{"type":"HTTP","expectedCodes":" 200"}"#,
        ] {
            assert!(parse_health_monitor(bad).is_err(), "{bad}");
        }
        for good in [
            r#"{"type":"HTTP","delaySeconds":3,"urlPath":"/healthz","expectedCodes":"200, 204"}"#,
            r#"{"type":"HTTP","expectedCodes":"200-299","maxRetries":10,"maxRetriesDown":1}"#,
        ] {
            assert!(parse_health_monitor(good).unwrap().is_some(), "{good}");
        }
    }

    #[test]
    fn a_timeout_alone_stretches_the_default_delay_and_bad_retries_fall_back() {
        let hm = desired_hm(r#"{"type":"TCP","timeoutSeconds":10}"#);
        assert_eq!((hm.delay, hm.timeout), (10, 10));
        let hm = desired_hm(r#"{"type":"TCP","delaySeconds":2}"#);
        assert_eq!((hm.delay, hm.timeout), (2, 2));
        let hm = desired_hm(
            r#"{"type":"TCP","delaySeconds":4,"timeoutSeconds":9,"maxRetries":50,"maxRetriesDown":0}"#,
        );
        assert_eq!(
            (hm.delay, hm.timeout, hm.max_retries, hm.max_retries_down),
            (4, 4, 3, None)
        );
        let hm = desired_hm(r#"{"type":"TCP"}"#);
        assert_eq!((hm.delay, hm.timeout, hm.max_retries), (5, 3, 3));
    }
}
