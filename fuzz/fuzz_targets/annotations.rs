//! Annotations users may set: a Service's `openstack.org/kuryr-*` (listener timeouts, provider, health
//! monitor) through `service_spec` into the KuryrLoadBalancer spec and the Octavia tree it asks for, and
//! a Pod's static-pod annotations.
//!
//! Asserts: no panic; each annotation is honoured exactly when its value is valid and otherwise reported
//! as a problem naming it; whatever the annotations, the KuryrLoadBalancer spec passes the CRD schema's
//! ranges (so the API server never refuses the write and the Service stays served), survives a JSON
//! round trip, and the health monitors sent to Octavia pass Octavia's API validation.

#![no_main]

use std::collections::BTreeMap;

use arbitrary::Arbitrary;
use kuryr_api::annotations;
use kuryr_api::k8s_openapi::api::core::v1::{ClientIPConfig, PodSpec, ServiceSpec, SessionAffinityConfig};
use kuryr_api::k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kuryr_api::loadbalancer::{KuryrLoadBalancerSpec, LbHealthMonitor};
use kuryr_api::{ObjectMeta, Pod, Service, ServicePort, SlimPod};
use kuryr_core::lb::model::DesiredHm;
use kuryr_core::lb::service::parse_health_monitor;
use kuryr_core::lb::{
    desired_lb, plan, service_spec, MemberSubnets, OctaviaCaps, ProviderFeature, Skip, SpecDefaults,
    Unlimited,
};
use kuryr_core::pod::{disposition, PodDisposition};
use libfuzzer_sys::fuzz_target;
use serde_json::{json, Value};

#[derive(Arbitrary, Debug)]
enum SvcType {
    ClusterIp,
    LoadBalancer,
    NodePort,
    ExternalName,
    Unset,
    Raw(String),
}

#[derive(Arbitrary, Debug)]
enum ClusterIp {
    Unset,
    Empty,
    Headless,
    V4(u32),
}

#[derive(Arbitrary, Debug)]
enum Proto {
    Unset,
    Tcp,
    Udp,
    Sctp,
    Raw(String),
}

#[derive(Arbitrary, Debug)]
enum Target {
    Number(u16),
    Name(String),
}

/// A Service port as the API server admits it (numbers in range); names and target names are free.
#[derive(Arbitrary, Debug)]
struct PortIn {
    name: Option<String>,
    port: u16,
    protocol: Proto,
    target: Option<Target>,
    node_port: Option<u16>,
}

#[derive(Arbitrary, Debug)]
enum Key {
    TimeoutClientData,
    TimeoutMemberData,
    Provider,
    HealthMonitor,
    ConfigSource,
    ConfigMirror,
    Other(String),
}

#[derive(Arbitrary, Debug)]
enum Val {
    Raw(String),
    /// A number, optionally padded with spaces.
    Int(i64, bool),
    Word(u8),
    Hm(HmIn),
}

#[derive(Arbitrary, Debug)]
struct HmIn {
    kind: u8,
    delay: Option<i64>,
    timeout: Option<i64>,
    max_retries: Option<i64>,
    max_retries_down: Option<i64>,
    url_path: Option<String>,
    expected_codes: Option<String>,
    monitor_port: Option<i64>,
    unknown_field: bool,
}

#[derive(Arbitrary, Debug)]
struct Input {
    default_kubernetes: bool,
    /// The operator's `--lb-default-kubernetes=false`.
    skip_default_kubernetes: bool,
    svc_type: SvcType,
    cluster_ip: ClusterIp,
    ports: Vec<PortIn>,
    client_ip_affinity: Option<Option<u32>>,
    external_traffic_local: bool,
    source_ranges: Vec<String>,
    lb_ip: Option<String>,
    annotations: Vec<(Key, Val)>,
    default_provider: Option<String>,
    node_name: Option<String>,
}

const WORDS: [&str; 10] = [
    "", "true", "false", "TCP", "http", "yes", "no", "ovn", "amphora", " HTTP ",
];
const HM_TYPES: [&str; 8] = [
    "TCP",
    "HTTP",
    "HTTPS",
    "PING",
    "UDP-CONNECT",
    "SCTP",
    "TLS-HELLO",
    "tcp",
];

fn key_name(k: &Key) -> String {
    match k {
        Key::TimeoutClientData => annotations::TIMEOUT_CLIENT_DATA.into(),
        Key::TimeoutMemberData => annotations::TIMEOUT_MEMBER_DATA.into(),
        Key::Provider => annotations::LB_PROVIDER.into(),
        Key::HealthMonitor => annotations::HEALTH_MONITOR.into(),
        Key::ConfigSource => annotations::CONFIG_SOURCE.into(),
        Key::ConfigMirror => "kubernetes.io/config.mirror".into(),
        Key::Other(s) => s.clone(),
    }
}

fn value(v: &Val) -> String {
    match v {
        Val::Raw(s) => s.clone(),
        Val::Int(n, pad) if *pad => format!(" {n}\t"),
        Val::Int(n, _) => n.to_string(),
        Val::Word(i) => WORDS[usize::from(*i) % WORDS.len()].into(),
        Val::Hm(h) => {
            let mut o = serde_json::Map::new();
            o.insert(
                "type".into(),
                json!(HM_TYPES[usize::from(h.kind) % HM_TYPES.len()]),
            );
            let mut put = |k: &str, v: Option<Value>| {
                if let Some(v) = v {
                    o.insert(k.into(), v);
                }
            };
            put("delaySeconds", h.delay.map(Value::from));
            put("timeoutSeconds", h.timeout.map(Value::from));
            put("maxRetries", h.max_retries.map(Value::from));
            put("maxRetriesDown", h.max_retries_down.map(Value::from));
            put("urlPath", h.url_path.clone().map(Value::from));
            put("expectedCodes", h.expected_codes.clone().map(Value::from));
            put("monitorPort", h.monitor_port.map(Value::from));
            if h.unknown_field {
                o.insert("probeEverything".into(), json!(true));
            }
            Value::Object(o).to_string()
        }
    }
}

fn in_range(v: Option<i32>, lo: i32, hi: i32) -> bool {
    v.is_none_or(|v| (lo..=hi).contains(&v))
}

/// The ranges the KuryrLoadBalancer CRD schema declares (kuryr-api `#[schemars(range(...))]`): the API
/// server refuses the whole object when one is violated.
fn check_crd_ranges(spec: &KuryrLoadBalancerSpec) {
    assert!(in_range(spec.timeout_client_data, 0, i32::MAX), "{spec:?}");
    assert!(in_range(spec.timeout_member_data, 0, i32::MAX), "{spec:?}");
    assert!(
        in_range(spec.session_affinity_timeout_seconds, 1, 86400),
        "{spec:?}"
    );
    for p in &spec.ports {
        assert!((1..=65535).contains(&p.port), "{p:?}");
        assert!(!p.target_port.is_empty(), "{p:?}");
        assert!(in_range(p.node_port, 1, 65535), "{p:?}");
    }
    if let Some(hm) = &spec.health_monitor {
        check_hm_ranges(hm);
    }
}

fn check_hm_ranges(hm: &LbHealthMonitor) {
    assert!(
        in_range(hm.delay_seconds, 1, i32::MAX),
        "delaySeconds out of the CRD range: {hm:?}"
    );
    assert!(
        in_range(hm.timeout_seconds, 1, i32::MAX),
        "timeoutSeconds out of the CRD range: {hm:?}"
    );
    assert!(
        in_range(hm.max_retries, 1, 10),
        "maxRetries out of the CRD range: {hm:?}"
    );
    assert!(
        in_range(hm.max_retries_down, 1, 10),
        "maxRetriesDown out of the CRD range: {hm:?}"
    );
    assert!(
        in_range(hm.monitor_port, 1, 65535),
        "monitorPort out of the CRD range: {hm:?}"
    );
}

/// Octavia's `expected_codes` pattern: `^(\d{3}(\s*,\s*\d{3})*)$|^(\d{3}-\d{3})$`.
fn octavia_expected_codes(s: &str) -> bool {
    let three = |t: &str| t.len() == 3 && t.bytes().all(|b| b.is_ascii_digit());
    if let Some((a, b)) = s.split_once('-') {
        return three(a) && three(b);
    }
    let parts: Vec<&str> = s.split(',').collect();
    let last = parts.len() - 1;
    parts.iter().enumerate().all(|(i, p)| {
        three(p.trim())
            && (i > 0 || !p.starts_with(char::is_whitespace))
            && (i < last || !p.ends_with(char::is_whitespace))
    })
}

/// What Octavia's API accepts for a health monitor (octavia/api/v2/types/health_monitor.py), plus
/// kuryr's own rule that a probe's timeout never exceeds its delay.
fn check_octavia_hm(hm: &DesiredHm) {
    assert!(
        (1..=10).contains(&hm.max_retries),
        "Octavia refuses max_retries: {hm:?}"
    );
    assert!(
        hm.max_retries_down.is_none_or(|r| (1..=10).contains(&r)),
        "Octavia refuses max_retries_down: {hm:?}"
    );
    assert!(hm.timeout <= hm.delay, "probe timeout exceeds its delay: {hm:?}");
    assert!(
        i32::try_from(hm.delay).is_ok() && i32::try_from(hm.timeout).is_ok(),
        "{hm:?}"
    );
    if let Some(p) = &hm.url_path {
        assert!(
            p.starts_with('/') && !p.chars().any(|c| c.is_whitespace() || c.is_control()),
            "Octavia refuses url_path {p:?}"
        );
    }
    if let Some(c) = &hm.expected_codes {
        assert!(octavia_expected_codes(c), "Octavia refuses expected_codes {c:?}");
    }
}

fn build_service(input: &Input, ann: &BTreeMap<String, String>) -> Service {
    let ports = input
        .ports
        .iter()
        .take(8)
        .map(|p| ServicePort {
            name: p.name.clone(),
            port: i32::from(p.port.max(1)),
            protocol: match &p.protocol {
                Proto::Unset => None,
                Proto::Tcp => Some("TCP".into()),
                Proto::Udp => Some("UDP".into()),
                Proto::Sctp => Some("SCTP".into()),
                Proto::Raw(s) => Some(s.clone()),
            },
            target_port: p.target.as_ref().map(|t| match t {
                Target::Number(n) => IntOrString::Int(i32::from((*n).max(1))),
                Target::Name(s) => IntOrString::String(s.clone()),
            }),
            node_port: p.node_port.map(|n| i32::from(n.max(1))),
            ..ServicePort::default()
        })
        .collect();
    Service {
        metadata: ObjectMeta {
            namespace: Some(
                if input.default_kubernetes {
                    "default"
                } else {
                    "shop"
                }
                .into(),
            ),
            name: Some(
                if input.default_kubernetes {
                    "kubernetes"
                } else {
                    "web"
                }
                .into(),
            ),
            annotations: Some(ann.clone()),
            ..ObjectMeta::default()
        },
        spec: Some(ServiceSpec {
            type_: match &input.svc_type {
                SvcType::ClusterIp => Some("ClusterIP".into()),
                SvcType::LoadBalancer => Some("LoadBalancer".into()),
                SvcType::NodePort => Some("NodePort".into()),
                SvcType::ExternalName => Some("ExternalName".into()),
                SvcType::Unset => None,
                SvcType::Raw(s) => Some(s.clone()),
            },
            cluster_ip: match input.cluster_ip {
                ClusterIp::Unset => None,
                ClusterIp::Empty => Some(String::new()),
                ClusterIp::Headless => Some("None".into()),
                ClusterIp::V4(a) => Some(std::net::Ipv4Addr::from(a).to_string()),
            },
            ports: Some(ports),
            session_affinity: input.client_ip_affinity.map(|_| "ClientIP".into()),
            session_affinity_config: input.client_ip_affinity.flatten().map(|t| SessionAffinityConfig {
                client_ip: Some(ClientIPConfig {
                    // The API server admits 1..=86400.
                    timeout_seconds: Some(1 + i32::try_from(t % 86400).unwrap()),
                }),
            }),
            external_traffic_policy: input.external_traffic_local.then(|| "Local".into()),
            load_balancer_source_ranges: Some(input.source_ranges.clone()),
            load_balancer_ip: input.lb_ip.clone(),
            ..ServiceSpec::default()
        }),
        status: None,
    }
}

fn check_pod(input: &Input, ann: &BTreeMap<String, String>) {
    let pod = Pod {
        metadata: ObjectMeta {
            annotations: Some(ann.clone()),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            node_name: input.node_name.clone(),
            ..PodSpec::default()
        }),
        status: None,
    };
    let want_static = ann.contains_key("kubernetes.io/config.mirror")
        || ann.get(annotations::CONFIG_SOURCE).is_some_and(|s| s != "api");
    match disposition(&SlimPod::from(pod)) {
        PodDisposition::Wire {
            node_name,
            static_pod,
        } => {
            assert_eq!(static_pod, want_static);
            assert!(!node_name.is_empty());
        }
        PodDisposition::Unscheduled => assert!(input.node_name.as_deref().is_none_or(str::is_empty)),
        other => panic!("a running, scheduled pod got {other:?}"),
    }
}

fuzz_target!(|input: Input| {
    let ann: BTreeMap<String, String> = input
        .annotations
        .iter()
        .take(12)
        .map(|(k, v)| (key_name(k), value(v)))
        .collect();
    check_pod(&input, &ann);

    if let Some(v) = ann.get(annotations::HEALTH_MONITOR) {
        if let Ok(Some(hm)) = parse_health_monitor(v) {
            check_hm_ranges(&hm);
            // An accepted monitor, written back as JSON, is accepted as the same monitor.
            let again = parse_health_monitor(&serde_json::to_string(&hm).unwrap());
            assert_eq!(again, Ok(Some(hm)));
        }
    }

    let svc = build_service(&input, &ann);
    let defaults = SpecDefaults {
        subnet_id: Some("subnet-1".into()),
        secondary_subnet_id: Some("subnet-6".into()),
        project_id: Some("project-1".into()),
        provider: input.default_provider.clone(),
        skip_default_kubernetes: input.skip_default_kubernetes,
    };
    let (spec, problems) = match service_spec(&svc, Vec::new(), &defaults) {
        Ok(r) => r,
        Err(skip) => {
            // Skipped for being default/kubernetes exactly when it is and the operator turned it off.
            assert_eq!(
                skip == Skip::DefaultKubernetes,
                input.default_kubernetes && input.skip_default_kubernetes,
                "{skip:?}"
            );
            assert!(!skip.message().is_empty() && !skip.reason().is_empty());
            return;
        }
    };
    assert!(
        !(input.default_kubernetes && input.skip_default_kubernetes),
        "default/kubernetes got a load balancer with lb-default-kubernetes off"
    );
    let complains = |key: &str| problems.iter().any(|p| p.message.contains(key));

    // Listener timeouts: a non-negative decimal (surrounding whitespace allowed), else a problem.
    for (key, got) in [
        (annotations::TIMEOUT_CLIENT_DATA, spec.timeout_client_data),
        (annotations::TIMEOUT_MEMBER_DATA, spec.timeout_member_data),
    ] {
        let want = ann
            .get(key)
            .and_then(|v| v.trim().parse::<i32>().ok())
            .filter(|n| *n >= 0);
        assert_eq!(got, want, "{key}");
        if ann.contains_key(key) && want.is_none() {
            assert!(complains(key), "invalid {key} not reported: {problems:?}");
        }
    }
    // Provider: the trimmed annotation, else the controller's default.
    let want_provider = ann
        .get(annotations::LB_PROVIDER)
        .map(|p| p.trim().to_owned())
        .filter(|p| !p.is_empty())
        .or(input.default_provider.clone());
    assert_eq!(spec.provider, want_provider);
    // Health monitor: honoured exactly when it parses, else reported.
    if let Some(v) = ann.get(annotations::HEALTH_MONITOR) {
        match parse_health_monitor(v) {
            Ok(hm) => assert_eq!(spec.health_monitor, hm),
            Err(_) => {
                assert_eq!(spec.health_monitor, None);
                assert!(complains(annotations::HEALTH_MONITOR), "{problems:?}");
            }
        }
    } else {
        assert_eq!(spec.health_monitor, None);
    }

    check_crd_ranges(&spec);
    let text = serde_json::to_string(&spec).unwrap();
    let back: KuryrLoadBalancerSpec = serde_json::from_str(&text).unwrap();
    assert_eq!(back, spec);

    let everything_refused = [
        ProviderFeature::AdditionalVips,
        ProviderFeature::SourceIpPersistence,
    ];
    for (provider, version, refused) in [
        ("amphora", (2, 0), &[][..]),
        ("amphora", (2, 26), &[][..]),
        ("ovn", (2, 26), &[][..]),
        ("ovn", (2, 26), &everything_refused[..]),
    ] {
        let caps = OctaviaCaps {
            version,
            provider: provider.into(),
            refused: refused.iter().copied().collect(),
        };
        let (desired, _problems) =
            desired_lb("shop", "web", &spec, &caps, &MemberSubnets::single(Some("pods")));
        for (key, l) in &desired.listeners {
            assert!((1..=65535).contains(&key.port));
            if let Some(hm) = &l.pool.health_monitor {
                check_octavia_hm(hm);
            }
        }
        let ops = plan(&desired, None, &Unlimited);
        assert_eq!(ops.len(), 1, "a missing load balancer is created in one call");
    }
});
