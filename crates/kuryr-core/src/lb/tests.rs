use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{
    ClientIPConfig, ObjectReference, Service, ServicePort, ServiceSpec, SessionAffinityConfig,
};
use k8s_openapi::api::discovery::v1::{Endpoint, EndpointConditions, EndpointSlice};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kuryr_api::annotations;
use kuryr_api::loadbalancer::{LbProtocol, ServiceType, SessionAffinity};

use super::*;

fn svc(ns: &str, name: &str, ports: &[(&str, i32, &str, i32)]) -> Service {
    Service {
        metadata: ObjectMeta {
            namespace: Some(ns.into()),
            name: Some(name.into()),
            ..ObjectMeta::default()
        },
        spec: Some(ServiceSpec {
            cluster_ip: Some("198.19.0.10".into()),
            type_: Some("ClusterIP".into()),
            ports: Some(
                ports
                    .iter()
                    .map(|(n, p, proto, t)| ServicePort {
                        name: Some((*n).into()),
                        port: *p,
                        protocol: Some((*proto).into()),
                        target_port: Some(IntOrString::Int(*t)),
                        ..ServicePort::default()
                    })
                    .collect(),
            ),
            ..ServiceSpec::default()
        }),
        ..Service::default()
    }
}

fn endpoint(ip: &str, pod: &str, ready: bool) -> Endpoint {
    Endpoint {
        addresses: vec![ip.into()],
        conditions: Some(EndpointConditions {
            ready: Some(ready),
            serving: Some(ready),
            terminating: None,
        }),
        target_ref: Some(ObjectReference {
            kind: Some("Pod".into()),
            name: Some(pod.into()),
            namespace: Some("ns".into()),
            ..ObjectReference::default()
        }),
        ..Endpoint::default()
    }
}

/// EndpointSlices as the front end's cache holds them.
fn slim(slices: &[EndpointSlice]) -> Vec<kuryr_api::SlimEndpointSlice> {
    slices.iter().cloned().map(Into::into).collect()
}

/// One EndpointSlice of a Service: `ready` pods p0.., `not_ready` pods nr0.., the given ports.
fn endpoints(ready: &[&str], not_ready: &[&str], ports: &[(&str, i32, &str)]) -> Vec<EndpointSlice> {
    let mut eps: Vec<Endpoint> = ready
        .iter()
        .enumerate()
        .map(|(i, ip)| endpoint(ip, &format!("p{i}"), true))
        .collect();
    eps.extend(
        not_ready
            .iter()
            .enumerate()
            .map(|(i, ip)| endpoint(ip, &format!("nr{i}"), false)),
    );
    vec![EndpointSlice {
        metadata: ObjectMeta {
            name: Some("web-abcde".into()),
            ..ObjectMeta::default()
        },
        address_type: "IPv4".into(),
        endpoints: eps,
        ports: Some(
            ports
                .iter()
                .map(|(n, p, proto)| k8s_openapi::api::discovery::v1::EndpointPort {
                    name: Some((*n).into()),
                    port: Some(*p),
                    protocol: Some((*proto).into()),
                    ..Default::default()
                })
                .collect(),
        ),
    }]
}

fn caps(provider: &str, v: (u32, u32)) -> OctaviaCaps {
    OctaviaCaps {
        version: v,
        provider: provider.into(),
        ..OctaviaCaps::default()
    }
}

/// The problems other than ports left without endpoints (the specs of most tests here have none).
fn besides_drops(problems: Vec<Problem>) -> Vec<Problem> {
    problems
        .into_iter()
        .filter(|p| p.reason != "NoEndpointsDropped")
        .collect()
}

fn defaults() -> SpecDefaults {
    SpecDefaults {
        subnet_id: Some("svc-subnet".into()),
        project_id: Some("p".into()),
        provider: None,
        skip_default_kubernetes: false,
        secondary_subnet_id: None,
    }
}

fn two_port_spec() -> kuryr_api::KuryrLoadBalancerSpec {
    let s = svc(
        "ns",
        "web",
        &[("http", 80, "TCP", 8080), ("dns", 53, "UDP", 5353)],
    );
    let ep = endpoints(
        &["10.0.0.1", "10.0.0.2", "10.0.0.3"],
        &["10.0.0.9"],
        &[("http", 8080, "TCP"), ("dns", 5353, "UDP")],
    );
    service_spec(&s, endpoints::from_slices(&slim(&ep), false), &defaults())
        .unwrap()
        .0
}

#[test]
fn services_without_a_load_balancer_say_why() {
    let mut s = svc("default", "kubernetes", &[("https", 443, "TCP", 6443)]);
    let off = SpecDefaults {
        skip_default_kubernetes: true,
        ..defaults()
    };
    assert_eq!(
        service_spec(&s, vec![], &off).unwrap_err(),
        Skip::DefaultKubernetes
    );
    s.metadata.namespace = Some("ns".into());
    s.spec.as_mut().unwrap().cluster_ip = Some("None".into());
    assert_eq!(service_spec(&s, vec![], &defaults()).unwrap_err(), Skip::Headless);
    s.spec.as_mut().unwrap().type_ = Some("ExternalName".into());
    assert_eq!(
        service_spec(&s, vec![], &defaults()).unwrap_err(),
        Skip::ExternalName
    );
    s.spec.as_mut().unwrap().type_ = Some("Mystery".into());
    let skip = service_spec(&s, vec![], &defaults()).unwrap_err();
    assert_eq!(skip.reason(), "UnsupportedServiceType");
    assert!(skip.message().contains("Mystery"));
}

#[test]
fn a_node_port_service_has_its_cluster_ip_served_and_is_told_its_node_ports_are_not() {
    let mut s = svc("ns", "web", &[("http", 80, "TCP", 8080)]);
    s.spec.as_mut().unwrap().type_ = Some("NodePort".into());
    let (spec, problems) = service_spec(&s, vec![], &defaults()).unwrap();
    assert_eq!(spec.service_type, Some(ServiceType::ClusterIp));
    assert_eq!(spec.ports.len(), 1);
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert_eq!(problems[0].reason, "NodePortUnsupported");
}

#[test]
fn a_two_port_service_becomes_two_listeners_with_ready_members_at_the_target_port() {
    let spec = two_port_spec();
    assert_eq!(spec.ip.as_deref(), Some("198.19.0.10"));
    assert_eq!(spec.service_type, Some(ServiceType::ClusterIp));
    let (lb, problems) = desired_lb(
        "ns",
        "web",
        &spec,
        &caps("amphora", (2, 30)),
        &MemberSubnets::single(Some("pods")),
    );
    assert!(problems.is_empty(), "{problems:?}");
    assert_eq!(lb.name, "ns/web");
    assert_eq!(lb.listeners.len(), 2);
    let http = &lb.listeners[&ListenerKey::new(LbProtocol::Tcp, 80)];
    assert_eq!(http.name, "ns/web:TCP:80");
    assert_eq!(http.pool.lb_algorithm, "ROUND_ROBIN");
    let members: Vec<_> = http.pool.members.keys().cloned().collect();
    // The not-ready address is left out.
    assert_eq!(
        members,
        vec![
            ("10.0.0.1".to_owned(), 8080),
            ("10.0.0.2".to_owned(), 8080),
            ("10.0.0.3".to_owned(), 8080)
        ]
    );
    assert_eq!(http.pool.members[&("10.0.0.1".to_owned(), 8080)], "ns/p0:8080");
    let dns = &lb.listeners[&ListenerKey::new(LbProtocol::Udp, 53)];
    assert!(dns.pool.members.keys().all(|(_, p)| *p == 5353));
    assert!(!lb.expose);
}

#[test]
fn publish_not_ready_addresses_counts_every_address() {
    let ep = endpoints(&["10.0.0.1"], &["10.0.0.9"], &[("", 8080, "TCP")]);
    let slices = endpoints::from_slices(&slim(&ep), true);
    let s = svc("ns", "web", &[("", 80, "TCP", 8080)]);
    let spec = service_spec(&s, slices, &defaults()).unwrap().0;
    let (lb, _) = desired_lb(
        "ns",
        "web",
        &spec,
        &caps("ovn", (2, 30)),
        &MemberSubnets::default(),
    );
    assert_eq!(lb.listeners.values().next().unwrap().pool.members.len(), 2);
}

#[test]
fn endpoint_slices_v1_keep_readiness_and_skip_fqdn() {
    let slice = |name: &str, ready: Option<bool>, ip: &str, at: &str| EndpointSlice {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..ObjectMeta::default()
        },
        address_type: at.into(),
        endpoints: vec![Endpoint {
            addresses: vec![ip.into()],
            conditions: Some(EndpointConditions {
                ready,
                ..EndpointConditions::default()
            }),
            ..Endpoint::default()
        }],
        ports: Some(vec![k8s_openapi::api::discovery::v1::EndpointPort {
            name: Some("http".into()),
            port: Some(8080),
            protocol: Some("TCP".into()),
            ..Default::default()
        }]),
    };
    let slices = [
        slice("b", Some(false), "10.0.0.2", "IPv4"),
        slice("a", None, "10.0.0.1", "IPv4"),
        slice("c", Some(true), "db.example", "FQDN"),
    ];
    let out = endpoints::from_slices(&slim(&slices), false);
    assert_eq!(out.len(), 2);
    assert_eq!(pool_members(out.clone()), vec![("10.0.0.1".to_owned(), 8080)]);
    let s = svc("ns", "web", &[("http", 80, "TCP", 8080)]);
    let spec = service_spec(&s, out, &defaults()).unwrap().0;
    let (lb, _) = desired_lb(
        "ns",
        "web",
        &spec,
        &caps("amphora", (2, 30)),
        &MemberSubnets::default(),
    );
    // Manual endpoints (no targetRef) are named by address.
    assert_eq!(
        lb.listeners.values().next().unwrap().pool.members[&("10.0.0.1".to_owned(), 8080)],
        "10.0.0.1:8080"
    );
}

#[test]
fn old_octavia_serves_the_ports_it_can_and_names_the_rest() {
    let s = svc(
        "ns",
        "mix",
        &[
            ("a", 53, "TCP", 53),
            ("b", 53, "UDP", 53),
            ("c", 9, "SCTP", 9),
            ("d", 80, "TCP", 80),
        ],
    );
    let spec = service_spec(&s, vec![], &defaults()).unwrap().0;
    let (lb, problems) = desired_lb(
        "ns",
        "mix",
        &spec,
        &caps("amphora", (2, 12)),
        &MemberSubnets::default(),
    );
    let keys: Vec<_> = lb.listeners.keys().map(|k| (k.protocol, k.port)).collect();
    assert_eq!(keys, vec![(LbProtocol::Tcp, 53), (LbProtocol::Tcp, 80)]);
    let reasons: Vec<_> = problems.iter().map(|p| p.reason).collect();
    assert_eq!(reasons, vec!["MixedProtocolUnsupported", "SctpUnsupported"]);
    // A current Octavia takes them all.
    let (lb, problems) = desired_lb(
        "ns",
        "mix",
        &spec,
        &caps("ovn", (2, 30)),
        &MemberSubnets::default(),
    );
    assert_eq!(lb.listeners.len(), 4);
    let problems = besides_drops(problems);
    assert!(problems.is_empty());
}

#[test]
fn session_affinity_is_source_ip_persistence_and_an_event_where_ovn_differs_or_refuses() {
    let mut s = svc("ns", "web", &[("http", 80, "TCP", 8080)]);
    s.spec.as_mut().unwrap().session_affinity = Some("ClientIP".into());
    let spec = service_spec(&s, vec![], &defaults()).unwrap().0;
    assert_eq!(spec.session_affinity, Some(SessionAffinity::ClientIp));
    let (lb, problems) = desired_lb(
        "ns",
        "web",
        &spec,
        &caps("amphora", (2, 30)),
        &MemberSubnets::default(),
    );
    assert!(problems.is_empty());
    let pool = &lb.listeners.values().next().unwrap().pool;
    assert_eq!(
        pool.session_persistence,
        Some(SessionPersistence::source_ip(None))
    );
    let (lb, problems) = desired_lb(
        "ns",
        "web",
        &spec,
        &caps("ovn", (2, 30)),
        &MemberSubnets::default(),
    );
    // Asked of the ovn provider too, said to be without effect there (no timeout for TCP pools).
    assert_eq!(problems[0].reason, "SessionAffinityUnsupported");
    assert!(problems[0].message.contains("TCP pools"), "{problems:?}");
    assert!(problems[0].message.contains("TCP/80"), "{problems:?}");
    let pool = &lb.listeners.values().next().unwrap().pool;
    assert_eq!(
        pool.session_persistence,
        Some(SessionPersistence::source_ip(None))
    );
    assert_eq!(pool.lb_algorithm, "SOURCE_IP_PORT");
    // An older ovn provider that refused it: no persistence, and the Event says so.
    let old_ovn = OctaviaCaps {
        refused: [ProviderFeature::SourceIpPersistence].into(),
        ..caps("ovn", (2, 30))
    };
    let (lb, problems) = desired_lb("ns", "web", &spec, &old_ovn, &MemberSubnets::default());
    assert_eq!(problems[0].reason, "SessionAffinityUnsupported");
    assert!(problems[0].message.contains("refused"), "{problems:?}");
    let pool = &lb.listeners.values().next().unwrap().pool;
    assert_eq!(pool.session_persistence, None);
}

/// A ClientIP Service with TCP, UDP and SCTP ports and `timeoutSeconds` (None: the API server's default).
fn affinity_spec(timeout: Option<i32>) -> kuryr_api::KuryrLoadBalancerSpec {
    let mut s = svc(
        "ns",
        "mix",
        &[
            ("http", 80, "TCP", 8080),
            ("dns", 53, "UDP", 5353),
            ("sig", 9, "SCTP", 9),
        ],
    );
    let sp = s.spec.as_mut().unwrap();
    sp.session_affinity = Some("ClientIP".into());
    sp.session_affinity_config = timeout.map(|t| SessionAffinityConfig {
        client_ip: Some(ClientIPConfig {
            timeout_seconds: Some(t),
        }),
    });
    service_spec(&s, vec![], &defaults()).unwrap().0
}

fn persistence_of(lb: &DesiredLb, protocol: LbProtocol, port: u32) -> Option<SessionPersistence> {
    lb.listeners[&ListenerKey::new(protocol, port)]
        .pool
        .session_persistence
        .clone()
}

#[test]
fn client_ip_gives_udp_and_sctp_pools_the_affinity_timeout_and_tcp_pools_none() {
    let spec = affinity_spec(Some(600));
    for provider in ["ovn", "amphora"] {
        let (lb, problems) = desired_lb(
            "ns",
            "mix",
            &spec,
            &caps(provider, (2, 30)),
            &MemberSubnets::default(),
        );
        let want = Some(SessionPersistence::source_ip(Some(600)));
        assert_eq!(persistence_of(&lb, LbProtocol::Udp, 53), want, "{provider}");
        assert_eq!(persistence_of(&lb, LbProtocol::Sctp, 9), want, "{provider}");
        // Octavia refuses a persistence_timeout on a TCP pool.
        assert_eq!(
            persistence_of(&lb, LbProtocol::Tcp, 80),
            Some(SessionPersistence::source_ip(None)),
            "{provider}"
        );
        if provider == "ovn" {
            // Only the TCP port is named: UDP and SCTP get OVN affinity.
            let problems = besides_drops(problems);
            assert_eq!(problems.len(), 1, "{problems:?}");
            assert_eq!(problems[0].reason, "SessionAffinityUnsupported");
            assert!(problems[0].message.contains("TCP/80"), "{problems:?}");
            assert!(!problems[0].message.contains("UDP/53"), "{problems:?}");
            assert!(!problems[0].message.contains("SCTP/9"), "{problems:?}");
        } else {
            assert!(problems.is_empty(), "{problems:?}");
        }
    }
    // A UDP-only ClientIP Service on ovn: pinned, nothing to say.
    let mut udp = spec.clone();
    udp.ports.retain(|p| p.protocol == LbProtocol::Udp);
    let (_, problems) = desired_lb(
        "ns",
        "mix",
        &udp,
        &caps("ovn", (2, 30)),
        &MemberSubnets::default(),
    );
    let problems = besides_drops(problems);
    assert!(problems.is_empty(), "{problems:?}");
    // No timeoutSeconds in the spec: Kubernetes' default.
    let (lb, _) = desired_lb(
        "ns",
        "mix",
        &affinity_spec(None),
        &caps("ovn", (2, 30)),
        &MemberSubnets::default(),
    );
    assert_eq!(
        persistence_of(&lb, LbProtocol::Udp, 53),
        Some(SessionPersistence::source_ip(Some(10800)))
    );
}

#[test]
fn a_changed_affinity_timeout_is_one_pool_update_and_a_provider_default_is_corrected_once() {
    let c = caps("ovn", (2, 30));
    let (lb, _) = desired_lb(
        "ns",
        "mix",
        &affinity_spec(Some(600)),
        &c,
        &MemberSubnets::default(),
    );
    let mut obs = observed_from(&lb);
    assert!(plan(&lb, Some(&obs), &Unlimited).is_empty());
    // The UDP pool made without a timeout reports a provider default: corrected, once.
    let udp = ListenerKey::new(LbProtocol::Udp, 53);
    let pool = obs.listeners.get_mut(&udp).unwrap().pool.as_mut().unwrap();
    pool.session_persistence = Some(SessionPersistence::source_ip(Some(360)));
    let ops = plan(&lb, Some(&obs), &Unlimited);
    assert_eq!(
        ops,
        vec![Op::UpdatePool {
            id: "p53".into(),
            lb_algorithm: "SOURCE_IP_PORT".into(),
            session_persistence: Some(SessionPersistence::source_ip(Some(600))),
        }]
    );
    // A TCP pool reporting a timeout nobody asked for is left alone.
    let tcp = ListenerKey::new(LbProtocol::Tcp, 80);
    let pool = obs.listeners.get_mut(&tcp).unwrap().pool.as_mut().unwrap();
    pool.session_persistence = Some(SessionPersistence::source_ip(Some(360)));
    assert_eq!(plan(&lb, Some(&obs), &Unlimited), ops);
    // The Service's timeout changed: the UDP and SCTP pools are updated, each once.
    let obs = observed_from(&lb);
    let (changed, _) = desired_lb(
        "ns",
        "mix",
        &affinity_spec(Some(900)),
        &c,
        &MemberSubnets::default(),
    );
    let ops = plan(&changed, Some(&obs), &Unlimited);
    let updated: Vec<(&str, Option<u32>)> = ops
        .iter()
        .map(|o| match o {
            Op::UpdatePool {
                id,
                session_persistence: Some(sp),
                ..
            } => (id.as_str(), sp.timeout_s),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(updated, vec![("p9", Some(900)), ("p53", Some(900))]);
    // Once carried out, nothing more.
    assert!(plan(&changed, Some(&observed_from(&changed)), &Unlimited).is_empty());
}

#[test]
fn source_ranges_become_allowed_cidrs_or_keep_the_service_internal() {
    let mut s = svc("ns", "web", &[("http", 80, "TCP", 8080)]);
    let sp = s.spec.as_mut().unwrap();
    sp.type_ = Some("LoadBalancer".into());
    sp.load_balancer_source_ranges = Some(vec!["203.0.113.0/24".into()]);
    sp.load_balancer_ip = Some("203.0.113.50".into());
    let spec = service_spec(&s, vec![], &defaults()).unwrap().0;
    assert_eq!(spec.lb_ip.as_deref(), Some("203.0.113.50"));
    let (lb, problems) = desired_lb(
        "ns",
        "web",
        &spec,
        &caps("amphora", (2, 30)),
        &MemberSubnets::default(),
    );
    assert!(problems.is_empty() && lb.expose);
    assert_eq!(
        lb.listeners.values().next().unwrap().allowed_cidrs,
        vec!["203.0.113.0/24"]
    );
    let (lb, problems) = desired_lb(
        "ns",
        "web",
        &spec,
        &caps("ovn", (2, 30)),
        &MemberSubnets::default(),
    );
    assert!(!lb.expose, "fails closed: no floating IP");
    assert_eq!(problems[0].reason, "SourceRangesUnsupported");
    let (lb, _) = desired_lb(
        "ns",
        "web",
        &spec,
        &caps("amphora", (2, 11)),
        &MemberSubnets::default(),
    );
    assert!(!lb.expose);
}

#[test]
fn annotations_set_timeouts_provider_and_health_monitors_and_bad_ones_are_reported() {
    let mut s = svc("ns", "web", &[("http", 80, "TCP", 8080), ("dns", 53, "UDP", 53)]);
    s.metadata.annotations = Some(BTreeMap::from([
        (annotations::TIMEOUT_CLIENT_DATA.to_owned(), "70000".to_owned()),
        (annotations::TIMEOUT_MEMBER_DATA.to_owned(), "soon".to_owned()),
        (annotations::LB_PROVIDER.to_owned(), "ovn".to_owned()),
        (annotations::HEALTH_MONITOR.to_owned(), "true".to_owned()),
    ]));
    let (spec, problems) = service_spec(&s, vec![], &defaults()).unwrap();
    assert_eq!(spec.timeout_client_data, Some(70000));
    assert_eq!(spec.timeout_member_data, None);
    assert_eq!(spec.provider.as_deref(), Some("ovn"));
    assert_eq!(problems.len(), 1);
    assert!(problems[0].message.contains(annotations::TIMEOUT_MEMBER_DATA));
    let (lb, problems) = desired_lb(
        "ns",
        "web",
        &spec,
        &caps("ovn", (2, 30)),
        &MemberSubnets::default(),
    );
    let problems = besides_drops(problems);
    assert!(problems.is_empty(), "{problems:?}");
    let kinds: Vec<_> = lb
        .listeners
        .values()
        .map(|l| l.pool.health_monitor.as_ref().unwrap().kind.clone())
        .collect();
    assert_eq!(kinds, vec!["UDP-CONNECT", "TCP"]);
    assert_eq!(
        lb.listeners.values().next().unwrap().timeout_client_data,
        Some(70000)
    );
    // HTTP monitors do not exist on ovn: the pool goes without, and says so.
    s.metadata.annotations.as_mut().unwrap().insert(
        annotations::HEALTH_MONITOR.into(),
        r#"{"type":"HTTP","delaySeconds":2}"#.into(),
    );
    let spec = service_spec(&s, vec![], &defaults()).unwrap().0;
    let (_, problems) = desired_lb(
        "ns",
        "web",
        &spec,
        &caps("ovn", (2, 30)),
        &MemberSubnets::default(),
    );
    assert_eq!(problems[0].reason, "HealthMonitorUnsupported");
    assert!(service::parse_health_monitor(r#"{"type":"TCP","delaySeconds":1,"timeoutSeconds":5}"#).is_err());
    assert!(service::parse_health_monitor("maybe").is_err());
}

#[test]
fn a_project_annotation_is_refused_and_the_spec_keeps_the_controllers_project() {
    let mut s = svc("ns", "web", &[("http", 80, "TCP", 8080)]);
    s.metadata.annotations = Some(BTreeMap::from([(
        annotations::PROJECT.to_owned(),
        "other-tenant".to_owned(),
    )]));
    let (spec, problems) = service_spec(&s, vec![], &defaults()).unwrap();
    assert_eq!(spec.project_id, defaults().project_id);
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert_eq!(problems[0].reason, "AnnotationNotAllowed");
    assert!(problems[0].message.contains("other-tenant"));
}

fn observed_from(lb: &DesiredLb) -> ObservedLb {
    ObservedLb {
        id: "lb".into(),
        provider: "amphora".into(),
        vip_address: lb.vip_address.clone().unwrap_or_default(),
        vip_port_id: "vip".into(),
        additional_vips: lb.additional_vips.iter().map(|v| v.ip_address.clone()).collect(),
        listeners: lb
            .listeners
            .iter()
            .map(|(k, l)| {
                (
                    *k,
                    Box::new(ObservedListener {
                        id: format!("l{}", k.port),
                        name: l.name.clone(),
                        timeout_client_data: l.timeout_client_data,
                        timeout_member_data: l.timeout_member_data,
                        allowed_cidrs: l.allowed_cidrs.clone(),
                        pool: Some(ObservedPool {
                            id: format!("p{}", k.port),
                            name: l.pool.name.clone(),
                            lb_algorithm: l.pool.lb_algorithm.clone(),
                            session_persistence: l.pool.session_persistence.clone(),
                            members: l
                                .pool
                                .members
                                .keys()
                                .map(|m| (m.clone(), format!("m-{}", m.0)))
                                .collect(),
                            health_monitor: l.pool.health_monitor.clone().map(|spec| ObservedHm {
                                id: "hm".into(),
                                spec,
                            }),
                        }),
                    }),
                )
            })
            .collect(),
        orphan_pools: vec![],
    }
}

#[test]
fn a_new_service_is_one_create_and_a_settled_one_needs_nothing() {
    let spec = two_port_spec();
    let (lb, _) = desired_lb(
        "ns",
        "web",
        &spec,
        &caps("amphora", (2, 30)),
        &MemberSubnets::default(),
    );
    let ops = plan(&lb, None, &Unlimited);
    assert_eq!(ops.len(), 1);
    assert!(matches!(ops[0], Op::CreateLoadBalancer(_)));
    assert!(plan(&lb, Some(&observed_from(&lb)), &Unlimited).is_empty());
}

fn pool_members(slices: Vec<kuryr_api::loadbalancer::LbEndpointSlice>) -> Vec<(String, u32)> {
    let s = svc("ns", "web", &[("http", 80, "TCP", 8080)]);
    let spec = service_spec(&s, slices, &defaults()).unwrap().0;
    let (lb, _) = desired_lb(
        "ns",
        "web",
        &spec,
        &caps("ovn", (2, 30)),
        &MemberSubnets::default(),
    );
    lb.listeners
        .values()
        .next()
        .unwrap()
        .pool
        .members
        .keys()
        .cloned()
        .collect()
}

#[test]
fn a_service_split_over_several_slices_gets_every_ready_endpoint_as_a_member() {
    // The endpointslice controller puts at most 100 endpoints in a slice: 250 endpoints are three slices.
    let ips: Vec<String> = (0..250)
        .map(|i| format!("10.1.{}.{}", i / 200, i % 200 + 1))
        .collect();
    let mut slices = Vec::new();
    for (n, chunk) in ips.chunks(100).enumerate() {
        let refs: Vec<&str> = chunk.iter().map(String::as_str).collect();
        let mut slice = endpoints(&refs, &[], &[("http", 8080, "TCP")]).remove(0);
        slice.metadata.name = Some(format!("web-{n}"));
        slices.push(slice);
    }
    let out = endpoints::from_slices(&slim(&slices), false);
    assert_eq!(out.len(), 3);
    let members = pool_members(out);
    assert_eq!(members.len(), 250);
    assert!(ips.iter().all(|ip| members.contains(&(ip.clone(), 8080))));
}

#[test]
fn terminating_endpoints_that_still_serve_are_members_only_while_no_endpoint_is_ready() {
    let terminating = |ip: &str, serving: bool| Endpoint {
        conditions: Some(EndpointConditions {
            ready: Some(false),
            serving: Some(serving),
            terminating: Some(true),
        }),
        ..endpoint(ip, "old", false)
    };
    let mut slices = endpoints(&["10.0.0.1"], &[], &[("http", 8080, "TCP")]);
    slices[0].endpoints.push(terminating("10.0.0.7", true));
    assert_eq!(
        pool_members(endpoints::from_slices(&slim(&slices), false)),
        vec![("10.0.0.1".to_owned(), 8080)]
    );
    // The last ready pod is going away: the one still serving drains, the one no longer serving does not.
    slices[0].endpoints.remove(0);
    slices[0].endpoints.push(terminating("10.0.0.8", false));
    assert_eq!(
        pool_members(endpoints::from_slices(&slim(&slices), false)),
        vec![("10.0.0.7".to_owned(), 8080)]
    );
}

#[test]
fn an_endpoints_change_is_one_member_replace_per_pool_touched() {
    let spec = two_port_spec();
    let c = caps("amphora", (2, 30));
    let (lb, _) = desired_lb("ns", "web", &spec, &c, &MemberSubnets::default());
    let obs = observed_from(&lb);
    // Scale 3 -> 20: both pools change, one replace each, with the whole new set.
    let ips: Vec<String> = (1..=20).map(|i| format!("10.0.0.{i}")).collect();
    let refs: Vec<&str> = ips.iter().map(String::as_str).collect();
    let ep = endpoints(&refs, &[], &[("http", 8080, "TCP"), ("dns", 5353, "UDP")]);
    let mut spec20 = spec.clone();
    spec20.endpoint_slices = endpoints::from_slices(&slim(&ep), false);
    let (lb20, _) = desired_lb("ns", "web", &spec20, &c, &MemberSubnets::default());
    let ops = plan(&lb20, Some(&obs), &Unlimited);
    assert_eq!(ops.len(), 2, "{ops:?}");
    for op in &ops {
        let Op::ReplaceMembers { members, .. } = op else {
            panic!("{op:?}")
        };
        assert_eq!(members.len(), 20);
    }
    // Only the http port's endpoints change: one replace.
    let mut only_http = spec.clone();
    only_http.endpoint_slices[0]
        .ports
        .retain(|p| p.name.as_deref() == Some("http"));
    only_http
        .endpoint_slices
        .push(kuryr_api::loadbalancer::LbEndpointSlice {
            endpoints: spec.endpoint_slices[0].endpoints.clone(),
            ports: spec.endpoint_slices[0]
                .ports
                .iter()
                .filter(|p| p.name.as_deref() == Some("dns"))
                .cloned()
                .collect(),
            address_type: None,
        });
    only_http.endpoint_slices[0].endpoints.truncate(1);
    let (lb1, _) = desired_lb("ns", "web", &only_http, &c, &MemberSubnets::default());
    let ops = plan(&lb1, Some(&obs), &Unlimited);
    assert_eq!(ops.len(), 1, "{ops:?}");
    assert!(matches!(&ops[0], Op::ReplaceMembers { pool_id, .. } if pool_id == "p80"));
}

#[test]
fn listener_and_pool_changes_are_diffs_and_lost_objects_are_rebuilt() {
    let spec = two_port_spec();
    let c = caps("amphora", (2, 30));
    let (lb, _) = desired_lb("ns", "web", &spec, &c, &MemberSubnets::default());
    let mut obs = observed_from(&lb);
    // Timeout annotation changed.
    let mut t = spec.clone();
    t.timeout_client_data = Some(90000);
    let (lbt, _) = desired_lb("ns", "web", &t, &c, &MemberSubnets::default());
    let ops = plan(&lbt, Some(&obs), &Unlimited);
    assert_eq!(ops.len(), 2);
    assert!(ops.iter().all(|o| matches!(
        o,
        Op::UpdateListener {
            timeout_client_data: Some(90000),
            ..
        }
    )));
    // A port removed from the Service: its pool, then its listener, go.
    let mut one = spec.clone();
    one.ports.retain(|p| p.port == 80);
    let (lb1, _) = desired_lb("ns", "web", &one, &c, &MemberSubnets::default());
    let ops = plan(&lb1, Some(&obs), &Unlimited);
    assert_eq!(
        ops,
        vec![
            Op::DeletePool { id: "p53".into() },
            Op::DeleteListener { id: "l53".into() }
        ]
    );
    // Deleted behind our back: the listener comes back, then its pool (with members in one batch).
    obs.listeners.remove(&ListenerKey::new(LbProtocol::Udp, 53));
    let ops = plan(&lb, Some(&obs), &Unlimited);
    assert!(matches!(&ops[..], [Op::CreateListener { key, .. }] if key.port == 53));
    obs.listeners
        .get_mut(&ListenerKey::new(LbProtocol::Tcp, 80))
        .unwrap()
        .pool = None;
    let ops = plan(&lb, Some(&obs), &Unlimited);
    assert!(ops
        .iter()
        .any(|o| matches!(o, Op::CreatePool { listener_id, .. } if listener_id == "l80")));
    // Session persistence switched on: a pool update. Provider changed: recreate.
    let mut sa = spec.clone();
    sa.session_affinity = Some(SessionAffinity::ClientIp);
    let (lbs, _) = desired_lb("ns", "web", &sa, &c, &MemberSubnets::default());
    let ops = plan(&lbs, Some(&observed_from(&lb)), &Unlimited);
    assert!(ops.iter().all(|o| matches!(
        o,
        Op::UpdatePool {
            session_persistence: Some(_),
            ..
        }
    )));
    let mut ovn = spec;
    ovn.provider = Some("ovn".into());
    let (lbo, _) = desired_lb(
        "ns",
        "web",
        &ovn,
        &caps("ovn", (2, 30)),
        &MemberSubnets::default(),
    );
    assert!(matches!(
        &plan(&lbo, Some(&observed_from(&lb)), &Unlimited)[..],
        [Op::Recreate { .. }]
    ));
}

#[test]
fn health_monitor_changes_are_delete_then_create() {
    let mut spec = two_port_spec();
    spec.health_monitor = service::parse_health_monitor("tcp").unwrap();
    let c = caps("amphora", (2, 30));
    let (lb, _) = desired_lb("ns", "web", &spec, &c, &MemberSubnets::default());
    let obs = observed_from(&lb);
    spec.health_monitor.as_mut().unwrap().delay_seconds = Some(9);
    let (changed, _) = desired_lb("ns", "web", &spec, &c, &MemberSubnets::default());
    let ops = plan(&changed, Some(&obs), &Unlimited);
    assert!(
        ops.iter().all(|o| matches!(o, Op::DeleteHealthMonitor { .. })),
        "{ops:?}"
    );
    let mut gone = obs.clone();
    for l in gone.listeners.values_mut() {
        l.pool.as_mut().unwrap().health_monitor = None;
    }
    let ops = plan(&changed, Some(&gone), &Unlimited);
    assert!(ops
        .iter()
        .all(|o| matches!(o, Op::CreateHealthMonitor { hm, .. } if hm.delay == 9)));
}

#[test]
fn error_and_long_pending_trees_are_repaired() {
    let limit = Duration::from_secs(60);
    let states = |s: &[&str]| s.iter().map(|s| ProvisioningStatus::parse(s)).collect::<Vec<_>>();
    let ok = states(&["ACTIVE", "ACTIVE"]);
    assert_eq!(assess(&ok, Duration::ZERO, limit), Assessment::Active);
    let pending = states(&["ACTIVE", "PENDING_UPDATE"]);
    assert_eq!(
        assess(&pending, Duration::from_secs(5), limit),
        Assessment::Wait {
            status: ProvisioningStatus::PendingUpdate
        }
    );
    assert!(matches!(
        assess(&pending, Duration::from_secs(61), limit),
        Assessment::Repair { kind: RepairKind::Stuck, reason } if reason.contains("PENDING_UPDATE")
    ));
    assert!(matches!(
        assess(&states(&["ERROR"]), Duration::ZERO, limit),
        Assessment::Repair { kind: RepairKind::Error, reason } if reason.contains("ERROR")
    ));
    assert!(matches!(
        assess(&[], Duration::ZERO, limit),
        Assessment::Wait { .. }
    ));
    assert!(!ProvisioningStatus::parse("ACTIVE").is_pending());
    assert_eq!(ProvisioningStatus::parse("NEW_ONE").as_str(), "NEW_ONE");
}

#[test]
fn default_kubernetes_gets_the_api_servers_as_members() {
    let s = svc("default", "kubernetes", &[("https", 443, "TCP", 6443)]);
    // The API server's endpoint reconciler writes addresses without a targetRef.
    let mut ep = endpoints(&["192.168.10.4", "192.168.10.5"], &[], &[("https", 6443, "TCP")]);
    for e in &mut ep[0].endpoints {
        e.target_ref = None;
    }
    let (spec, problems) = service_spec(&s, endpoints::from_slices(&slim(&ep), false), &defaults()).unwrap();
    assert!(problems.is_empty(), "{problems:?}");
    let (lb, problems) = desired_lb(
        "default",
        "kubernetes",
        &spec,
        &caps("ovn", (2, 30)),
        &MemberSubnets::single(Some("nodes")),
    );
    assert!(problems.is_empty(), "{problems:?}");
    let l = lb.listeners.values().next().unwrap();
    let members: Vec<_> = l.pool.members.keys().cloned().collect();
    assert_eq!(
        members,
        vec![
            ("192.168.10.4".to_string(), 6443),
            ("192.168.10.5".to_string(), 6443)
        ]
    );
    assert_eq!(l.pool.member_subnets, MemberSubnets::single(Some("nodes")));
}

/// One http port with the given member IPs (10.1.x.y).
fn sized_lb(n: usize) -> DesiredLb {
    let ips: Vec<String> = (0..n)
        .map(|i| format!("10.1.{}.{}", i / 250, i % 250 + 1))
        .collect();
    let refs: Vec<&str> = ips.iter().map(String::as_str).collect();
    let s = svc("ns", "big", &[("http", 80, "TCP", 8080)]);
    let slices = endpoints::from_slices(&slim(&endpoints(&refs, &[], &[("http", 8080, "TCP")])), false);
    let spec = service_spec(&s, slices, &defaults()).unwrap().0;
    desired_lb(
        "ns",
        "big",
        &spec,
        &caps("ovn", (2, 30)),
        &MemberSubnets::default(),
    )
    .0
}

fn member_count(lb: &DesiredLb) -> usize {
    lb.listeners.values().map(|l| l.pool.members.len()).sum()
}

/// Carries out member ops on an observed tree the way Octavia does.
fn apply_member_op(obs: &mut ObservedLb, op: &Op) {
    let pool = obs.listeners.values_mut().find_map(|l| l.pool.as_mut()).unwrap();
    match op {
        Op::ReplaceMembers { members, .. } => {
            pool.members = members
                .keys()
                .map(|k| (k.clone(), format!("m-{}", k.0)))
                .collect();
        }
        Op::AddMembers { members, .. } => {
            for k in members.keys() {
                pool.members.insert(k.clone(), format!("m-{}", k.0));
            }
        }
        Op::DeleteMember { id, .. } => pool.members.retain(|_, v| v != id),
        other => panic!("not a member op: {other:?}"),
    }
}

/// Plans and carries out one op at a time, as the controller does, until nothing is left; the writes.
fn converge_members(want: &DesiredLb, mut obs: ObservedLb, fit: &dyn Fit) -> (Vec<&'static str>, ObservedLb) {
    let mut kinds = Vec::new();
    loop {
        let ops = plan(want, Some(&obs), fit);
        let Some(op) = ops.first() else {
            return (kinds, obs);
        };
        assert!(kinds.len() < 100, "no end: {kinds:?}");
        kinds.push(op.kind());
        apply_member_op(&mut obs, op);
    }
}

fn pool_of(obs: &ObservedLb) -> &BTreeMap<MemberKey, String> {
    &obs.listeners
        .values()
        .find_map(|l| l.pool.as_ref())
        .unwrap()
        .members
}

#[test]
fn a_create_too_large_for_one_body_carries_what_fits_and_the_rest_follows_in_additive_batches() {
    use super::fit::testing::ByCount;
    let lb = sized_lb(1000);
    let fit = ByCount {
        create: 300,
        batch: 320,
        bare_create_fits: true,
    };
    let Op::CreateLoadBalancer(first) = plan(&lb, None, &fit).remove(0) else {
        panic!("not a create")
    };
    assert_eq!(
        member_count(&first),
        300,
        "the create carries as many members as fit"
    );
    assert!(fit.create_fits(&first));
    let (kinds, done) = converge_members(&lb, observed_from(&first), &fit);
    // 700 left, 320 per body: ⌈700/320⌉ = 3 additive batches, nothing else.
    assert_eq!(kinds, vec!["add_members"; 3]);
    assert_eq!(pool_of(&done).len(), 1000);
    assert!(lb
        .listeners
        .values()
        .all(|l| l.pool.members.keys().all(|k| pool_of(&done).contains_key(k))));
    // Not even the listeners fit: a bare load balancer, listeners and pools made one by one after.
    let tiny = ByCount {
        create: 0,
        batch: 320,
        bare_create_fits: false,
    };
    let Op::CreateLoadBalancer(bare) = plan(&lb, None, &tiny).remove(0) else {
        panic!("not a create")
    };
    assert!(bare.listeners.is_empty());
    let mut obs = observed_from(&bare);
    obs.listeners.clear();
    assert!(matches!(
        plan(&lb, Some(&obs), &tiny)[0],
        Op::CreateListener { .. }
    ));
}

#[test]
fn members_over_one_body_take_the_fewest_writes_and_never_drop_a_wanted_member_when_adding_is_as_cheap() {
    use super::fit::testing::ByCount;
    let fit = ByCount {
        create: 320,
        batch: 320,
        bare_create_fits: true,
    };
    let big = sized_lb(5000);
    let small = sized_lb(10);
    // 5000 → 10: the ten fit one body: one replace removes the other 4990.
    let (kinds, done) = converge_members(&small, observed_from(&big), &fit);
    assert_eq!(kinds, vec!["replace_members"]);
    assert_eq!(pool_of(&done).len(), 10);
    // 10 → 5000: 4990 missing, ⌈4990/320⌉ = 16 additive batches; the ten present stay throughout.
    let (kinds, done) = converge_members(&big, observed_from(&small), &fit);
    assert_eq!(kinds, vec!["add_members"; 16]);
    assert_eq!(pool_of(&done).len(), 5000);
    // 5000 → 4999: one delete, not a rebuild.
    let mut fewer = big.clone();
    let pool = &mut fewer.listeners.values_mut().next().unwrap().pool;
    let gone = pool.members.keys().nth(7).unwrap().clone();
    pool.members.remove(&gone);
    let (kinds, done) = converge_members(&fewer, observed_from(&big), &fit);
    assert_eq!(kinds, vec!["delete_member"]);
    assert!(!pool_of(&done).contains_key(&gone));
    // Every backend replaced (a rollout): deleting 5000 one by one would be 5000 writes; resetting is
    // ⌈5000/320⌉ = 16 (one replace, then 15 additive batches).
    let mut moved = big.clone();
    let pool = &mut moved.listeners.values_mut().next().unwrap().pool;
    pool.members = pool
        .members
        .iter()
        .map(|((ip, _), n)| ((ip.replace("10.1.", "10.2."), 8080), n.clone()))
        .collect();
    let (kinds, done) = converge_members(&moved, observed_from(&big), &fit);
    assert_eq!(kinds.len(), 16, "{kinds:?}");
    assert_eq!(kinds[0], "replace_members");
    assert!(kinds[1..].iter().all(|k| *k == "add_members"));
    assert_eq!(
        pool_of(&done),
        &moved
            .listeners
            .values()
            .next()
            .unwrap()
            .pool
            .members
            .keys()
            .map(|k| (k.clone(), format!("m-{}", k.0)))
            .collect()
    );
}

#[test]
fn every_member_write_is_one_the_fit_accepts() {
    use super::fit::testing::ByCount;
    let fit = ByCount {
        create: 100,
        batch: 100,
        bare_create_fits: true,
    };
    let big = sized_lb(1234);
    let half = sized_lb(600);
    for (want, from) in [(&big, &half), (&half, &big)] {
        for op in plan(want, Some(&observed_from(from)), &fit) {
            if let Op::ReplaceMembers { members, .. } | Op::AddMembers { members, .. } = &op {
                assert!(members.len() <= 100, "{} members in one body", members.len());
            }
        }
    }
}

#[test]
fn a_write_counts_every_object_the_provider_makes_for_the_pending_allowance() {
    let lb = sized_lb(5);
    // One listener, its pool, five members.
    assert_eq!(create_op(&lb, &Unlimited).objects(), 7);
    let obs = observed_from(&sized_lb(0));
    let ops = plan(&lb, Some(&obs), &Unlimited);
    assert_eq!(
        ops.iter().map(Op::objects).collect::<Vec<_>>(),
        vec![5],
        "{ops:?}"
    );
    let gone = DesiredLb {
        listeners: BTreeMap::new(),
        ..lb.clone()
    };
    let ops = plan(&gone, Some(&observed_from(&lb)), &Unlimited);
    // The pool and the listener, one each.
    assert_eq!(ops.iter().map(Op::objects).sum::<usize>(), 2, "{ops:?}");
    // 5 -> 2 is one replace of 2 members that removes 3: the provider handles all 5.
    let ops = plan(&sized_lb(2), Some(&observed_from(&lb)), &Unlimited);
    assert_eq!(
        ops.iter().map(Op::objects).collect::<Vec<_>>(),
        vec![5],
        "{ops:?}"
    );
}

fn dual_stack_svc() -> Service {
    let mut s = svc("ns", "web", &[("http", 80, "TCP", 8080)]);
    let spec = s.spec.as_mut().unwrap();
    spec.cluster_ips = Some(vec!["198.19.0.10".into(), "fd42:19::10".into()]);
    spec.ip_families = Some(vec!["IPv4".into(), "IPv6".into()]);
    spec.ip_family_policy = Some("PreferDualStack".into());
    s
}

/// The KuryrLoadBalancer spec of [`dual_stack_svc`] with a secondary service subnet configured.
fn dual_stack_spec() -> kuryr_api::KuryrLoadBalancerSpec {
    let dual = SpecDefaults {
        secondary_subnet_id: Some("svc-subnet-v6".into()),
        ..defaults()
    };
    service_spec(&dual_stack_svc(), vec![], &dual).unwrap().0
}

#[test]
fn a_dual_stack_service_gets_its_second_cluster_ip_as_an_additional_vip_on_the_secondary_subnet() {
    let dual = SpecDefaults {
        secondary_subnet_id: Some("svc-subnet-v6".into()),
        ..defaults()
    };
    let (spec, problems) = service_spec(&dual_stack_svc(), vec![], &dual).unwrap();
    assert!(problems.is_empty(), "{problems:?}");
    assert_eq!(spec.ip.as_deref(), Some("198.19.0.10"));
    assert_eq!(
        spec.additional_vips,
        vec![kuryr_api::loadbalancer::LbAdditionalVip {
            ip: "fd42:19::10".into(),
            subnet_id: "svc-subnet-v6".into()
        }]
    );
    let (lb, problems) = desired_lb(
        "ns",
        "web",
        &spec,
        &caps("ovn", (2, 30)),
        &MemberSubnets::default(),
    );
    let problems = besides_drops(problems);
    assert!(problems.is_empty(), "{problems:?}");
    assert_eq!(
        lb.additional_vips,
        vec![AdditionalVip {
            subnet_id: "svc-subnet-v6".into(),
            ip_address: "fd42:19::10".into()
        }]
    );

    // Without a secondary service subnet: served on the first family, and told.
    let (spec, problems) = service_spec(&dual_stack_svc(), vec![], &defaults()).unwrap();
    assert!(spec.additional_vips.is_empty());
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert_eq!(problems[0].reason, "DualStackUnsupported");
    assert!(problems[0].message.contains("fd42:19::10"), "{problems:?}");
}

#[test]
fn internal_traffic_policy_local_is_served_cluster_wide_and_told() {
    let mut s = svc("ns", "web", &[("http", 80, "TCP", 8080)]);
    let (_, problems) = service_spec(&s, vec![], &defaults()).unwrap();
    assert!(problems.is_empty(), "{problems:?}");
    s.spec.as_mut().unwrap().internal_traffic_policy = Some("Local".into());
    let (spec, problems) = service_spec(&s, vec![], &defaults()).unwrap();
    assert_eq!(spec.ports.len(), 1, "still served");
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert_eq!(problems[0].reason, "InternalTrafficPolicyUnsupported");
}

#[test]
fn additional_vips_need_octavia_2_26_and_a_provider_that_has_them() {
    let spec = dual_stack_spec();
    let (lb, problems) = desired_lb(
        "ns",
        "web",
        &spec,
        &caps("ovn", (2, 25)),
        &MemberSubnets::default(),
    );
    assert!(lb.additional_vips.is_empty());
    let problems = besides_drops(problems);
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert_eq!(problems[0].reason, "DualStackUnsupported");
    assert!(problems[0].message.contains("2.26"), "{problems:?}");
    let refused = OctaviaCaps {
        refused: [ProviderFeature::AdditionalVips].into(),
        ..caps("amphora", (2, 30))
    };
    let (lb, problems) = desired_lb("ns", "web", &spec, &refused, &MemberSubnets::default());
    assert!(lb.additional_vips.is_empty());
    assert!(problems[0].message.contains("provider amphora"), "{problems:?}");
}

#[test]
fn a_load_balancer_whose_additional_vips_differ_is_recreated_and_one_that_matches_is_kept() {
    let spec = dual_stack_spec();
    let (lb, _) = desired_lb(
        "ns",
        "web",
        &spec,
        &caps("ovn", (2, 30)),
        &MemberSubnets::default(),
    );
    let same = observed_from(&lb);
    assert!(plan(&lb, Some(&same), &Unlimited).is_empty());
    let mut single = same.clone();
    single.additional_vips.clear();
    let ops = plan(&lb, Some(&single), &Unlimited);
    assert!(
        matches!(&ops[..], [Op::Recreate { reason }] if reason.contains("additional VIPs")),
        "{ops:?}"
    );
}

#[test]
fn members_are_declared_on_the_pod_subnet_of_their_family() {
    let subnets = MemberSubnets {
        v4: Some("pods".into()),
        v6: Some("pods-v6".into()),
    };
    assert_eq!(subnets.for_address("10.0.0.5").map(String::as_str), Some("pods"));
    assert_eq!(
        subnets.for_address("fd42:18::5").map(String::as_str),
        Some("pods-v6")
    );
    let one = MemberSubnets::single(Some("pods"));
    assert_eq!(one.for_address("fd42:18::5").map(String::as_str), Some("pods"));
}

#[test]
fn a_port_without_ready_endpoints_on_ovn_is_told_to_drop_where_kubernetes_refuses() {
    let told = |spec: &kuryr_api::KuryrLoadBalancerSpec, provider: &str| {
        desired_lb(
            "ns",
            "web",
            spec,
            &caps(provider, (2, 30)),
            &MemberSubnets::default(),
        )
    };
    // two_port_spec: TCP/80 and UDP/53 have ready endpoints.
    let mut spec = two_port_spec();
    assert!(told(&spec, "ovn").1.is_empty());
    // No EndpointSlice known yet (they come a moment after a new Service): nothing to tell.
    let slices = std::mem::take(&mut spec.endpoint_slices);
    assert!(told(&spec, "ovn").1.is_empty());
    // Its slices known, none of their endpoints ready.
    spec.endpoint_slices = slices;
    for slice in &mut spec.endpoint_slices {
        for e in &mut slice.endpoints {
            if let Some(c) = e.conditions.as_mut() {
                c.ready = Some(false);
            }
        }
    }
    let (lb, problems) = told(&spec, "ovn");
    // The listeners stay (an endpoint may come back at any time); the problem names both ports.
    assert_eq!(lb.listeners.len(), 2);
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert_eq!(problems[0].reason, "NoEndpointsDropped");
    assert!(problems[0].message.contains("TCP/80"), "{problems:?}");
    assert!(problems[0].message.contains("UDP/53"), "{problems:?}");
    // Only the ovn provider is known to drop (its load balancer is OVN's).
    assert!(told(&spec, "amphora").1.is_empty());
}
