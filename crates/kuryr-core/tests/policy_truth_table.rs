//! Truth table: the reachability Neutron would enforce for the compiled security groups equals the
//! Kubernetes answer for every (source, destination, protocol/port), for policy sets shaped like the
//! Kubernetes NetworkPolicy e2e and cyclonus suites. Cluster: namespaces x, y, z with pods a, b, c
//! each (as in the e2e suite), two outside addresses, one Service per pod plus a two-backend `web`
//! Service per namespace.

#![allow(clippy::unwrap_used)] // test helpers outside #[test] fns

use std::net::IpAddr;

use k8s_openapi::api::networking::v1::NetworkPolicy;
use kuryr_core::policy::{
    compile, Cidr, Cluster, CompileOptions, CompiledPolicy, Endpoint, Family, K8sEvaluator, NamedPort,
    Namespace, Narrowing, NeutronEvaluator, PeerMode, Pod, PodKey, Policy, Protocol, Remote, Service,
    ServicePort, TargetPort,
};
use serde_json::{json, Value};

/// Two outside addresses and a worker node (kubelet probes come from there).
const EXTERNAL: [&str; 3] = ["198.51.100.10", "203.0.113.10", "100.64.0.5"];
const PROBES: [(Protocol, u16); 7] = [
    (Protocol::Tcp, 80),
    (Protocol::Tcp, 81),
    (Protocol::Tcp, 8080),
    (Protocol::Udp, 53),
    (Protocol::Udp, 80),
    (Protocol::Sctp, 80),
    (Protocol::Tcp, 9999),
];

fn labels(kv: &[(&str, &str)]) -> kuryr_core::policy::Labels {
    kv.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

fn port(name: &str, protocol: Protocol, port: u16) -> NamedPort {
    NamedPort {
        name: name.into(),
        protocol,
        port,
    }
}

fn cluster() -> Cluster {
    let namespaces = vec![
        Namespace {
            name: "x".into(),
            labels: labels(&[("ns", "x"), ("env", "prod")]),
        },
        Namespace {
            name: "y".into(),
            labels: labels(&[("ns", "y"), ("env", "dev")]),
        },
        Namespace {
            name: "z".into(),
            labels: labels(&[("ns", "z")]),
        },
    ];
    let mut pods = Vec::new();
    let mut services = Vec::new();
    for (ni, ns) in ["x", "y", "z"].iter().enumerate() {
        for (pi, name) in ["a", "b", "c"].iter().enumerate() {
            let app = if *name == "c" { "db" } else { "web" };
            // `http` names different numbers on different pods: named ports must resolve per pod.
            let http = if *name == "c" { 8080 } else { 80 };
            pods.push(Pod {
                namespace: ns.to_string(),
                name: name.to_string(),
                labels: labels(&[("pod", name), ("app", app)]),
                ip: format!("10.0.{}.{}", ni + 1, pi + 1).parse().unwrap(),
                ports: vec![
                    port("http", Protocol::Tcp, http),
                    port("metrics", Protocol::Tcp, 81),
                    port("dns", Protocol::Udp, 53),
                ],
            });
            services.push(Service {
                namespace: ns.to_string(),
                name: format!("s-{name}"),
                cluster_ip: Some(format!("10.96.{}.{}", ni + 1, pi + 1).parse().unwrap()),
                other_cluster_ips: Vec::new(),
                selector: Some(labels(&[("pod", name)])),
                ports: vec![ServicePort {
                    protocol: Protocol::Tcp,
                    port: 80,
                    target: TargetPort::Number(80),
                }],
            });
        }
        services.push(Service {
            namespace: ns.to_string(),
            name: "web".into(),
            cluster_ip: Some(format!("10.96.{}.100", ni + 1).parse().unwrap()),
            other_cluster_ips: Vec::new(),
            selector: Some(labels(&[("app", "web")])),
            ports: vec![
                ServicePort {
                    protocol: Protocol::Tcp,
                    port: 8000,
                    target: TargetPort::Name("http".into()),
                },
                ServicePort {
                    protocol: Protocol::Tcp,
                    port: 81,
                    target: TargetPort::Number(81),
                },
            ],
        });
    }
    Cluster {
        namespaces,
        pods,
        services,
    }
}

fn options(mode: &str) -> CompileOptions {
    let mut o = CompileOptions {
        pod_cidrs: vec!["10.0.0.0/16".parse().unwrap()],
        service_cidrs: vec!["10.96.0.0/12".parse().unwrap()],
        node_cidrs: vec!["100.64.0.0/24".parse().unwrap()],
        ..CompileOptions::default()
    };
    match mode {
        "address-groups" => o.peer_mode = PeerMode::AddressGroups,
        "namespace-isolation" => o.namespace_isolation = true,
        _ => {}
    }
    o
}

fn np(ns: &str, name: &str, spec: Value) -> NetworkPolicy {
    serde_json::from_value(json!({"metadata": {"namespace": ns, "name": name}, "spec": spec})).unwrap()
}

fn endpoints(c: &Cluster) -> Vec<Endpoint> {
    let mut v: Vec<Endpoint> = c.pods.iter().map(|p| Endpoint::Pod(p.key())).collect();
    v.extend(
        EXTERNAL
            .iter()
            .map(|ip| Endpoint::External(ip.parse::<IpAddr>().unwrap())),
    );
    v
}

fn ep(s: &str) -> Endpoint {
    match s.split_once('/') {
        Some((ns, name)) => Endpoint::Pod(PodKey::new(ns, name)),
        None => Endpoint::External(s.parse().unwrap()),
    }
}

/// Compares both evaluators on every triple; returns (triples checked, service triples checked).
fn check(case: &str, nps: &[NetworkPolicy], mode: &str) -> (usize, usize, CompiledPolicy) {
    let c = cluster();
    let opts = options(mode);
    let policies: Vec<Policy> = nps.iter().map(|p| Policy::from_k8s(p).unwrap()).collect();
    let compiled = compile(&c, &policies, &opts).unwrap();
    assert!(
        compiled.rejected.is_empty(),
        "{case}: rejected {:?}",
        compiled.rejected
    );
    let k8s = K8sEvaluator::new(&c, &policies, &opts);
    let neutron = NeutronEvaluator::new(&c, &compiled);
    let mut mismatches = Vec::new();
    let mut checked = 0;
    let eps = endpoints(&c);
    for src in &eps {
        for dst in &eps {
            if matches!((src, dst), (Endpoint::External(_), Endpoint::External(_))) {
                continue;
            }
            for (proto, port) in PROBES {
                checked += 1;
                let want = k8s.allows(src, dst, proto, port);
                let got = neutron.allows(src, dst, proto, port);
                if want != got {
                    mismatches.push(format!(
                        "{src:?} -> {dst:?} {proto}/{port}: kubernetes {want}, neutron {got}"
                    ));
                }
            }
        }
    }
    // Through Services: exact unless the compiler reported a narrowing for that (source, Service).
    let mut svc_checked = 0;
    for src in &c.pods {
        for svc in &c.services {
            for sp in &svc.ports {
                for backend in &c.pods {
                    let (Some(want), Some(got)) = (
                        k8s.allows_via_service(&src.key(), svc, sp, &backend.key()),
                        neutron.allows_via_service(&src.key(), svc, sp, &backend.key()),
                    ) else {
                        continue;
                    };
                    svc_checked += 1;
                    let narrowed = compiled.narrowings.iter().any(|n| {
                        let (policy, service, port) = n.subject();
                        *service == svc.key()
                            && port == sp.port
                            && policies.iter().any(|p| p.key() == *policy && p.selects(src))
                    });
                    if got && !want || (want != got && !narrowed) {
                        mismatches.push(format!(
                            "{} -> svc {}:{} -> {}: kubernetes {want}, neutron {got}",
                            src.key(),
                            svc.key(),
                            sp.port,
                            backend.key()
                        ));
                    }
                }
            }
        }
    }
    assert!(
        mismatches.is_empty(),
        "{case} [{mode}]: {} mismatches:\n{}",
        mismatches.len(),
        mismatches.join("\n")
    );
    (checked, svc_checked, compiled)
}

struct Case {
    name: &'static str,
    policies: Vec<NetworkPolicy>,
    /// Hand-checked facts (src, dst, protocol, port, allowed) so that the reference evaluator is
    /// itself checked against the spec, not only against the compiler.
    facts: Vec<(&'static str, &'static str, Protocol, u16, bool)>,
}

fn case(
    name: &'static str,
    policies: Vec<NetworkPolicy>,
    facts: Vec<(&'static str, &'static str, Protocol, u16, bool)>,
) -> Case {
    Case {
        name,
        policies,
        facts,
    }
}

use Protocol::{Sctp, Tcp, Udp};

fn cases() -> Vec<Case> {
    let deny_all_x = || {
        np(
            "x",
            "deny-all",
            json!({"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}),
        )
    };
    vec![
        case(
            "no policies: everything reaches everything",
            vec![],
            vec![
                ("x/a", "y/b", Tcp, 80, true),
                ("z/c", "x/a", Udp, 53, true),
                ("198.51.100.10", "x/a", Tcp, 9999, true),
            ],
        ),
        case(
            "deny all ingress in x",
            vec![np("x", "deny-ingress", json!({"podSelector": {}}))],
            vec![
                ("x/b", "x/a", Tcp, 80, false),
                ("y/a", "x/a", Tcp, 80, false),
                ("x/a", "y/a", Tcp, 80, true),
                ("x/a", "x/a", Tcp, 80, true),
                // The node's kubelet probes still get through.
                ("100.64.0.5", "x/a", Tcp, 80, true),
            ],
        ),
        case(
            "deny all egress in x",
            vec![np(
                "x",
                "deny-egress",
                json!({"podSelector": {}, "policyTypes": ["Egress"]}),
            )],
            vec![
                ("x/a", "x/b", Tcp, 80, false),
                ("x/a", "198.51.100.10", Tcp, 80, false),
                ("y/a", "x/a", Tcp, 80, true),
            ],
        ),
        case(
            "deny all both directions in x",
            vec![deny_all_x()],
            vec![
                ("x/a", "y/a", Tcp, 80, false),
                ("y/a", "x/a", Tcp, 80, false),
                ("y/a", "z/a", Tcp, 80, true),
            ],
        ),
        case(
            "allow all ingress to x",
            vec![np("x", "allow-all", json!({"podSelector": {}, "ingress": [{}]}))],
            vec![
                ("z/c", "x/a", Sctp, 80, true),
                ("203.0.113.10", "x/b", Tcp, 9999, true),
            ],
        ),
        case(
            "allow all egress from x",
            vec![np(
                "x",
                "allow-all-egress",
                json!({"podSelector": {}, "egress": [{}], "policyTypes": ["Egress"]}),
            )],
            vec![("x/a", "198.51.100.10", Udp, 80, true)],
        ),
        case(
            "deny all and allow all together: the union allows",
            vec![
                np("x", "deny", json!({"podSelector": {}})),
                np("x", "allow", json!({"podSelector": {}, "ingress": [{}]})),
            ],
            vec![("y/a", "x/a", Tcp, 80, true)],
        ),
        case(
            "allow same namespace",
            vec![np(
                "x",
                "same-ns",
                json!({"podSelector": {}, "ingress": [{"from": [{"podSelector": {}}]}]}),
            )],
            vec![
                ("x/b", "x/a", Tcp, 80, true),
                ("y/b", "x/a", Tcp, 80, false),
                ("198.51.100.10", "x/a", Tcp, 80, false),
            ],
        ),
        case(
            "allow b to a in the same namespace",
            vec![np(
                "x",
                "b-to-a",
                json!({
            "podSelector": {"matchLabels": {"pod": "a"}},
            "ingress": [{"from": [{"podSelector": {"matchLabels": {"pod": "b"}}}]}]}),
            )],
            vec![
                ("x/b", "x/a", Tcp, 80, true),
                ("x/c", "x/a", Tcp, 80, false),
                ("y/b", "x/a", Tcp, 80, false),
                ("x/c", "x/b", Tcp, 80, true),
            ],
        ),
        case(
            "allow from all namespaces",
            vec![np(
                "x",
                "all-ns",
                json!({
            "podSelector": {"matchLabels": {"pod": "a"}},
            "ingress": [{"from": [{"namespaceSelector": {}}]}]}),
            )],
            vec![
                ("z/c", "x/a", Tcp, 80, true),
                ("198.51.100.10", "x/a", Tcp, 80, false),
            ],
        ),
        case(
            "namespace selector by label",
            vec![np(
                "x",
                "from-y",
                json!({
            "podSelector": {}, "ingress": [{"from": [{"namespaceSelector": {"matchLabels": {"ns": "y"}}}]}]}),
            )],
            vec![
                ("y/c", "x/a", Tcp, 80, true),
                ("z/c", "x/a", Tcp, 80, false),
                ("x/b", "x/a", Tcp, 80, false),
            ],
        ),
        case(
            "namespace and pod selector combined in one peer",
            vec![np(
                "x",
                "y-and-b",
                json!({
            "podSelector": {}, "ingress": [{"from": [{"namespaceSelector": {"matchLabels": {"ns": "y"}}, "podSelector": {"matchLabels": {"pod": "b"}}}]}]}),
            )],
            vec![
                ("y/b", "x/a", Tcp, 80, true),
                ("y/a", "x/a", Tcp, 80, false),
                ("x/b", "x/a", Tcp, 80, false),
            ],
        ),
        case(
            "namespace or pod selector as two peers",
            vec![np(
                "x",
                "y-or-b",
                json!({
            "podSelector": {}, "ingress": [{"from": [{"namespaceSelector": {"matchLabels": {"ns": "y"}}}, {"podSelector": {"matchLabels": {"pod": "b"}}}]}]}),
            )],
            vec![
                ("y/a", "x/a", Tcp, 80, true),
                ("x/b", "x/a", Tcp, 80, true),
                ("z/b", "x/a", Tcp, 80, false),
            ],
        ),
        case(
            "namespace selector with In expression",
            vec![np(
                "z",
                "from-prod-dev",
                json!({
            "podSelector": {}, "ingress": [{"from": [{"namespaceSelector": {"matchExpressions": [{"key": "env", "operator": "In", "values": ["prod", "dev"]}]}}]}]}),
            )],
            vec![("x/a", "z/a", Tcp, 80, true), ("z/b", "z/a", Tcp, 80, false)],
        ),
        case(
            "namespace selector with NotIn expression",
            vec![np(
                "x",
                "not-x",
                json!({
            "podSelector": {}, "ingress": [{"from": [{"namespaceSelector": {"matchExpressions": [{"key": "ns", "operator": "NotIn", "values": ["x"]}]}}]}]}),
            )],
            vec![("z/a", "x/a", Tcp, 80, true), ("x/b", "x/a", Tcp, 80, false)],
        ),
        case(
            "pod selector with NotIn and DoesNotExist",
            vec![np(
                "y",
                "not-db",
                json!({
            "podSelector": {"matchExpressions": [{"key": "tier", "operator": "DoesNotExist"}]},
            "ingress": [{"from": [{"namespaceSelector": {}, "podSelector": {"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["db"]}]}}]}]}),
            )],
            vec![("x/a", "y/a", Tcp, 80, true), ("x/c", "y/a", Tcp, 80, false)],
        ),
        case(
            "ingress on TCP 80 only",
            vec![np(
                "x",
                "tcp-80",
                json!({
            "podSelector": {"matchLabels": {"pod": "a"}}, "ingress": [{"ports": [{"port": 80}]}]}),
            )],
            vec![
                ("y/a", "x/a", Tcp, 80, true),
                ("y/a", "x/a", Tcp, 81, false),
                ("y/a", "x/a", Udp, 80, false),
                ("198.51.100.10", "x/a", Tcp, 80, true),
            ],
        ),
        case(
            "ingress on UDP 53 only",
            vec![np(
                "x",
                "udp-53",
                json!({
            "podSelector": {}, "ingress": [{"ports": [{"port": 53, "protocol": "UDP"}]}]}),
            )],
            vec![("y/a", "x/a", Udp, 53, true), ("y/a", "x/a", Tcp, 80, false)],
        ),
        case(
            "ingress on every TCP port (protocol without port)",
            vec![np(
                "x",
                "tcp-any",
                json!({
            "podSelector": {}, "ingress": [{"ports": [{"protocol": "TCP"}]}]}),
            )],
            vec![("y/a", "x/a", Tcp, 9999, true), ("y/a", "x/a", Udp, 53, false)],
        ),
        case(
            "ingress on an endPort range 80-81",
            vec![np(
                "x",
                "range",
                json!({
            "podSelector": {}, "ingress": [{"ports": [{"port": 80, "endPort": 81}]}]}),
            )],
            vec![("y/a", "x/a", Tcp, 81, true), ("y/a", "x/a", Tcp, 8080, false)],
        ),
        case(
            "ingress on a wide endPort range from a namespace",
            vec![np(
                "y",
                "range-wide",
                json!({
            "podSelector": {}, "ingress": [{"from": [{"namespaceSelector": {"matchLabels": {"ns": "x"}}}], "ports": [{"port": 81, "endPort": 9000}]}]}),
            )],
            vec![
                ("x/a", "y/a", Tcp, 8080, true),
                ("x/a", "y/a", Tcp, 80, false),
                ("z/a", "y/a", Tcp, 8080, false),
            ],
        ),
        case(
            "ingress on named port http resolved per pod",
            vec![np(
                "x",
                "named-http",
                json!({
            "podSelector": {}, "ingress": [{"ports": [{"port": "http"}]}]}),
            )],
            vec![
                ("y/a", "x/a", Tcp, 80, true),
                ("y/a", "x/a", Tcp, 8080, false),
                ("y/a", "x/c", Tcp, 8080, true),
                ("y/a", "x/c", Tcp, 80, false),
            ],
        ),
        case(
            "ingress on named UDP port dns",
            vec![np(
                "x",
                "named-dns",
                json!({
            "podSelector": {}, "ingress": [{"ports": [{"port": "dns", "protocol": "UDP"}]}]}),
            )],
            vec![("y/a", "x/a", Udp, 53, true), ("y/a", "x/a", Tcp, 53, false)],
        ),
        case(
            "ingress on a named port from a namespace",
            vec![np(
                "z",
                "named-from-y",
                json!({
            "podSelector": {}, "ingress": [{"from": [{"namespaceSelector": {"matchLabels": {"ns": "y"}}}], "ports": [{"port": "http"}, {"port": 81}]}]}),
            )],
            vec![
                ("y/a", "z/c", Tcp, 8080, true),
                ("x/a", "z/c", Tcp, 8080, false),
                ("y/a", "z/a", Tcp, 81, true),
            ],
        ),
        case(
            "ingress from an ipBlock covering namespace y",
            vec![np(
                "x",
                "block-y",
                json!({
            "podSelector": {}, "ingress": [{"from": [{"ipBlock": {"cidr": "10.0.2.0/24"}}]}]}),
            )],
            vec![("y/c", "x/a", Tcp, 80, true), ("z/c", "x/a", Tcp, 80, false)],
        ),
        case(
            "ingress from an ipBlock with except",
            vec![np(
                "x",
                "block-except",
                json!({
            "podSelector": {}, "ingress": [{"from": [{"ipBlock": {"cidr": "10.0.0.0/16", "except": ["10.0.2.0/24"]}}]}]}),
            )],
            vec![
                ("z/c", "x/a", Tcp, 80, true),
                ("y/c", "x/a", Tcp, 80, false),
                ("198.51.100.10", "x/a", Tcp, 80, false),
            ],
        ),
        case(
            "ingress from an outside ipBlock",
            vec![np(
                "x",
                "block-outside",
                json!({
            "podSelector": {}, "ingress": [{"from": [{"ipBlock": {"cidr": "198.51.100.0/24"}}]}]}),
            )],
            vec![
                ("198.51.100.10", "x/a", Tcp, 80, true),
                ("203.0.113.10", "x/a", Tcp, 80, false),
                ("y/a", "x/a", Tcp, 80, false),
            ],
        ),
        case(
            "ingress from an ipBlock whose except carves out one pod",
            vec![np(
                "x",
                "block-one-pod",
                json!({
            "podSelector": {}, "ingress": [{"from": [{"ipBlock": {"cidr": "10.0.3.0/24", "except": ["10.0.3.2/32"]}}]}]}),
            )],
            vec![("z/a", "x/a", Tcp, 80, true), ("z/b", "x/a", Tcp, 80, false)],
        ),
        case(
            "ingress from everything except the pod network",
            vec![np(
                "y",
                "not-pods",
                json!({
            "podSelector": {}, "ingress": [{"from": [{"ipBlock": {"cidr": "0.0.0.0/0", "except": ["10.0.0.0/8"]}}]}]}),
            )],
            vec![
                ("198.51.100.10", "y/a", Tcp, 80, true),
                ("x/a", "y/a", Tcp, 80, false),
            ],
        ),
        case(
            "egress to namespace y only",
            vec![np(
                "x",
                "egress-y",
                json!({
            "podSelector": {}, "policyTypes": ["Egress"], "egress": [{"to": [{"namespaceSelector": {"matchLabels": {"ns": "y"}}}]}]}),
            )],
            vec![
                ("x/a", "y/a", Tcp, 80, true),
                ("x/a", "z/a", Tcp, 80, false),
                ("x/a", "x/b", Tcp, 80, false),
            ],
        ),
        case(
            "egress to db pods anywhere on named port http",
            vec![np(
                "x",
                "egress-db-http",
                json!({
            "podSelector": {}, "policyTypes": ["Egress"],
            "egress": [{"to": [{"namespaceSelector": {}, "podSelector": {"matchLabels": {"app": "db"}}}], "ports": [{"port": "http"}]}]}),
            )],
            vec![
                ("x/a", "y/c", Tcp, 8080, true),
                ("x/a", "y/c", Tcp, 80, false),
                ("x/a", "y/a", Tcp, 80, false),
            ],
        ),
        case(
            "egress to an outside ipBlock on TCP 80",
            vec![np(
                "x",
                "egress-outside",
                json!({
            "podSelector": {}, "policyTypes": ["Egress"],
            "egress": [{"to": [{"ipBlock": {"cidr": "198.51.100.0/24"}}], "ports": [{"port": 80}]}]}),
            )],
            vec![
                ("x/a", "198.51.100.10", Tcp, 80, true),
                ("x/a", "198.51.100.10", Tcp, 81, false),
                ("x/a", "203.0.113.10", Tcp, 80, false),
            ],
        ),
        case(
            "egress anywhere on named port metrics",
            vec![np(
                "y",
                "egress-metrics",
                json!({
            "podSelector": {"matchLabels": {"pod": "a"}}, "policyTypes": ["Egress"], "egress": [{"ports": [{"port": "metrics"}]}]}),
            )],
            vec![
                ("y/a", "x/c", Tcp, 81, true),
                ("y/a", "x/c", Tcp, 80, false),
                ("y/a", "198.51.100.10", Tcp, 81, false),
            ],
        ),
        case(
            "egress anywhere on TCP 80 and UDP 53 (DNS-style)",
            vec![np(
                "z",
                "egress-80-53",
                json!({
            "podSelector": {}, "policyTypes": ["Egress"], "egress": [{"ports": [{"port": 80}, {"port": 53, "protocol": "UDP"}]}]}),
            )],
            vec![
                ("z/a", "198.51.100.10", Udp, 53, true),
                ("z/a", "x/a", Tcp, 80, true),
                ("z/a", "x/a", Tcp, 81, false),
            ],
        ),
        case(
            "several policies in one namespace are a union",
            vec![
                deny_all_x(),
                np(
                    "x",
                    "b-to-a-80",
                    json!({"podSelector": {"matchLabels": {"pod": "a"}}, "ingress": [{"from": [{"podSelector": {"matchLabels": {"pod": "b"}}}], "ports": [{"port": 80}]}]}),
                ),
                np(
                    "x",
                    "y-to-x-81",
                    json!({"podSelector": {}, "ingress": [{"from": [{"namespaceSelector": {"matchLabels": {"ns": "y"}}}], "ports": [{"port": 81}]}]}),
                ),
                np(
                    "x",
                    "b-egress-a",
                    json!({"podSelector": {"matchLabels": {"pod": "b"}}, "policyTypes": ["Egress"], "egress": [{"to": [{"podSelector": {"matchLabels": {"pod": "a"}}}]}]}),
                ),
            ],
            vec![
                ("x/b", "x/a", Tcp, 80, true),
                ("x/b", "x/a", Tcp, 81, false),
                ("y/a", "x/a", Tcp, 81, true),
                ("y/a", "x/a", Tcp, 80, false),
                ("x/c", "x/a", Tcp, 80, false),
                ("x/a", "x/b", Tcp, 80, false),
            ],
        ),
        case(
            "policies in several namespaces",
            vec![
                np("y", "deny", json!({"podSelector": {}})),
                np(
                    "z",
                    "egress-x",
                    json!({"podSelector": {}, "policyTypes": ["Egress"], "egress": [{"to": [{"namespaceSelector": {"matchLabels": {"ns": "x"}}}]}]}),
                ),
                np(
                    "x",
                    "from-z",
                    json!({"podSelector": {"matchLabels": {"pod": "c"}}, "ingress": [{"from": [{"namespaceSelector": {"matchLabels": {"ns": "z"}}}]}]}),
                ),
            ],
            vec![
                ("z/a", "x/c", Tcp, 80, true),
                ("z/a", "y/c", Tcp, 80, false),
                ("x/a", "x/c", Tcp, 80, false),
                ("x/a", "y/a", Tcp, 80, false),
            ],
        ),
        case(
            "policyTypes Egress ignores ingress rules",
            vec![np(
                "x",
                "egress-only",
                json!({
            "podSelector": {}, "policyTypes": ["Egress"], "ingress": [{"from": [{"podSelector": {}}]}], "egress": [{"to": [{"podSelector": {}}]}]}),
            )],
            vec![("y/a", "x/a", Tcp, 80, true), ("x/a", "y/a", Tcp, 80, false)],
        ),
        case(
            "pod selector with In expression allows only c",
            vec![np(
                "x",
                "ab-from-c",
                json!({
            "podSelector": {"matchExpressions": [{"key": "pod", "operator": "In", "values": ["a", "b"]}]},
            "ingress": [{"from": [{"podSelector": {"matchLabels": {"pod": "c"}}}]}]}),
            )],
            vec![
                ("x/c", "x/a", Tcp, 80, true),
                ("x/a", "x/b", Tcp, 80, false),
                ("x/a", "x/c", Tcp, 80, true),
            ],
        ),
        case(
            "ingress and egress in one policy",
            vec![np(
                "x",
                "both",
                json!({
            "podSelector": {"matchLabels": {"pod": "a"}}, "policyTypes": ["Ingress", "Egress"],
            "ingress": [{"from": [{"namespaceSelector": {"matchLabels": {"ns": "y"}}}]}],
            "egress": [{"to": [{"namespaceSelector": {"matchLabels": {"ns": "z"}}}], "ports": [{"port": 80}, {"port": "metrics"}]}]}),
            )],
            vec![
                ("y/a", "x/a", Tcp, 80, true),
                ("x/a", "z/a", Tcp, 81, true),
                ("x/a", "z/a", Tcp, 8080, false),
                ("x/a", "y/a", Tcp, 80, false),
            ],
        ),
        case(
            "deny all egress everywhere",
            vec![
                np(
                    "x",
                    "deny-egress",
                    json!({"podSelector": {}, "policyTypes": ["Egress"]}),
                ),
                np(
                    "y",
                    "deny-egress",
                    json!({"podSelector": {}, "policyTypes": ["Egress"]}),
                ),
                np(
                    "z",
                    "deny-egress",
                    json!({"podSelector": {}, "policyTypes": ["Egress"]}),
                ),
            ],
            vec![
                ("x/a", "y/a", Tcp, 80, false),
                ("198.51.100.10", "x/a", Tcp, 80, true),
                ("x/a", "x/a", Tcp, 80, true),
            ],
        ),
        case(
            "SCTP port",
            vec![np(
                "x",
                "sctp",
                json!({"podSelector": {}, "ingress": [{"ports": [{"port": 80, "protocol": "SCTP"}]}]}),
            )],
            vec![("y/a", "x/a", Sctp, 80, true), ("y/a", "x/a", Tcp, 80, false)],
        ),
        case(
            "egress to web pods lets a pod use the web Service",
            vec![np(
                "y",
                "egress-web",
                json!({
            "podSelector": {"matchLabels": {"pod": "c"}}, "policyTypes": ["Egress"],
            "egress": [{"to": [{"podSelector": {"matchLabels": {"app": "web"}}}], "ports": [{"port": 80}, {"port": 81}]}]}),
            )],
            vec![("y/c", "y/a", Tcp, 80, true), ("y/c", "x/a", Tcp, 80, false)],
        ),
        case(
            "egress to an ipBlock over pods and Services",
            vec![np(
                "x",
                "egress-block",
                json!({
            "podSelector": {}, "policyTypes": ["Egress"], "egress": [{"to": [{"ipBlock": {"cidr": "10.0.0.0/8", "except": ["10.0.3.0/24"]}}]}]}),
            )],
            vec![("x/a", "y/a", Tcp, 80, true), ("x/a", "z/a", Tcp, 80, false)],
        ),
    ]
}

#[test]
fn compiled_security_groups_match_kubernetes_semantics_for_every_triple() {
    let cases = cases();
    assert!(cases.len() >= 40, "only {} cases", cases.len());
    let mut triples = 0;
    let mut svc_triples = 0;
    let mut sets = 0;
    let c = cluster();
    for case in &cases {
        let policies: Vec<Policy> = case
            .policies
            .iter()
            .map(|p| Policy::from_k8s(p).unwrap())
            .collect();
        let opts = options("security-groups");
        let k8s = K8sEvaluator::new(&c, &policies, &opts);
        for (src, dst, proto, port, want) in &case.facts {
            assert_eq!(
                k8s.allows(&ep(src), &ep(dst), *proto, *port),
                *want,
                "{}: fact {src} -> {dst} {proto}/{port}",
                case.name
            );
        }
        for mode in ["security-groups", "address-groups", "namespace-isolation"] {
            let (t, s, _) = check(case.name, &case.policies, mode);
            triples += t;
            svc_triples += s;
            sets += 1;
        }
    }
    println!(
        "truth table: {} policy sets ({} policies) x 3 modes = {sets} compilations, {triples} (src, dst, port) triples, {svc_triples} Service triples",
        cases.len(),
        cases.iter().map(|c| c.policies.len()).sum::<usize>()
    );
}

#[test]
fn namespace_isolation_blocks_other_namespaces_but_not_the_outside() {
    let c = cluster();
    let opts = options("namespace-isolation");
    let compiled = compile(&c, &[], &opts).unwrap();
    let n = NeutronEvaluator::new(&c, &compiled);
    assert!(n.allows(&ep("x/a"), &ep("x/b"), Tcp, 80));
    assert!(!n.allows(&ep("y/a"), &ep("x/b"), Tcp, 80));
    assert!(n.allows(&ep("198.51.100.10"), &ep("x/b"), Tcp, 80));
    // A policy opens what namespace isolation closes.
    let p = Policy::from_k8s(&np("x", "from-y", json!({"podSelector": {}, "ingress": [{"from": [{"namespaceSelector": {"matchLabels": {"ns": "y"}}}]}]}))).unwrap();
    let compiled = compile(&c, std::slice::from_ref(&p), &opts).unwrap();
    let n = NeutronEvaluator::new(&c, &compiled);
    assert!(n.allows(&ep("y/a"), &ep("x/b"), Tcp, 80));
    assert!(!n.allows(&ep("z/a"), &ep("x/b"), Tcp, 80));
}

#[test]
fn a_pod_reaches_itself_through_its_service_under_deny_all_ingress() {
    let c = cluster();
    let opts = options("security-groups");
    let p = Policy::from_k8s(&np("x", "deny", json!({"podSelector": {}}))).unwrap();
    let compiled = compile(&c, std::slice::from_ref(&p), &opts).unwrap();
    let n = NeutronEvaluator::new(&c, &compiled);
    let svc = c
        .services
        .iter()
        .find(|s| s.name == "s-a" && s.namespace == "x")
        .unwrap();
    let me = PodKey::new("x", "a");
    assert_eq!(n.allows_via_service(&me, svc, &svc.ports[0], &me), Some(true));
    assert_eq!(
        n.allows_via_service(&PodKey::new("x", "b"), svc, &svc.ports[0], &me),
        Some(false)
    );
}

#[test]
fn egress_to_a_service_opens_its_vip_only_when_every_backend_is_allowed() {
    let c = cluster();
    let opts = options("security-groups");
    // Allows egress to x/a only; `web` in x is backed by a and b.
    let p = Policy::from_k8s(&np(
        "x",
        "to-a",
        json!({
        "podSelector": {"matchLabels": {"pod": "c"}}, "policyTypes": ["Egress"],
        "egress": [{"to": [{"podSelector": {"matchLabels": {"pod": "a"}}}]}]}),
    ))
    .unwrap();
    let compiled = compile(&c, std::slice::from_ref(&p), &opts).unwrap();
    let vip_a: IpAddr = "10.96.1.1".parse().unwrap();
    let vip_web: IpAddr = "10.96.1.100".parse().unwrap();
    let sg = compiled.security_group("np/x/to-a").unwrap();
    let remotes: Vec<&Remote> = sg.rules.iter().map(|r| &r.remote).collect();
    assert!(
        remotes.contains(&&Remote::Prefix(Cidr::host(vip_a))),
        "{remotes:?}"
    );
    assert!(
        !remotes.contains(&&Remote::Prefix(Cidr::host(vip_web))),
        "{remotes:?}"
    );
    assert!(compiled
        .narrowings
        .iter()
        .any(|n| matches!(n, Narrowing::ServicePartiallyAllowed { service, .. } if service.name == "web")));
}

#[test]
fn a_dual_stack_services_vips_of_both_families_are_opened_and_must_be_in_the_service_ranges() {
    let mut c = cluster();
    let vip6: IpAddr = "fd42:19::a".parse().unwrap();
    let svc = c
        .services
        .iter_mut()
        .find(|s| s.namespace == "x" && s.name == "s-a")
        .unwrap();
    svc.other_cluster_ips = vec![vip6];
    let mut opts = options("security-groups");
    opts.families = vec![Family::V4, Family::V6];
    let p = Policy::from_k8s(&np(
        "x",
        "to-a",
        json!({
        "podSelector": {"matchLabels": {"pod": "c"}}, "policyTypes": ["Egress"],
        "egress": [{"to": [{"podSelector": {"matchLabels": {"pod": "a"}}}]}]}),
    ))
    .unwrap();
    // The IPv6 VIP outside the configured ranges: refused, as an IPv4 one would be.
    assert!(compile(&c, std::slice::from_ref(&p), &opts).is_err());
    opts.service_cidrs.push("fd42:19::/112".parse().unwrap());
    let compiled = compile(&c, std::slice::from_ref(&p), &opts).unwrap();
    let sg = compiled.security_group("np/x/to-a").unwrap();
    let remotes: Vec<&Remote> = sg.rules.iter().map(|r| &r.remote).collect();
    for vip in ["10.96.1.1".parse().unwrap(), vip6] {
        assert!(
            remotes.contains(&&Remote::Prefix(Cidr::host(vip))),
            "{vip}: {remotes:?}"
        );
    }
}
