//! NetworkPolicy objects as the API server hands them over (built by `arbitrary` as JSON, with free-form
//! CIDRs, operators, protocols, ports and policyTypes where a mistake could slip through) converted
//! by `Policy::from_k8s_or_fail_closed` and compiled in a small fixed cluster.
//!
//! Asserts: no panic; a policy that converts keeps the spec's rules (ports in 1..=65535 with
//! port <= endPort, ipBlock excepts strictly inside their CIDR, Ingress isolated unless policyTypes
//! says otherwise); one that doesn't is replaced by a stand-in that allows nothing; either way the
//! compiled security groups never allow more than Kubernetes would (kuryr_fuzz::check_reachability).

#![no_main]

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};

use arbitrary::Arbitrary;
use kuryr_api::NetworkPolicy;
use kuryr_core::policy::{
    compile, Cluster, CompileOptions, Family, NamedPort, Namespace, Peer, PeerMode, Pod, Policy, PortSpec,
    Protocol, Service, ServicePort, TargetPort,
};
use kuryr_fuzz::{check_reachability, externals, probes};
use libfuzzer_sys::fuzz_target;
use serde_json::{json, Map, Value};

const KEYS: [&str; 3] = ["app", "role", "team"];
const VALUES: [&str; 3] = ["a", "b", "c"];
const CIDRS: [&str; 10] = [
    "10.0.0.0/16",
    "10.0.0.0/24",
    "10.0.0.1/32",
    "10.96.0.0/12",
    "0.0.0.0/0",
    "100.64.0.0/24",
    "198.51.100.0/24",
    "::/0",
    "fd00:10::/64",
    "10.0.0.0/8",
];

#[derive(Arbitrary, Debug)]
enum Op {
    In,
    NotIn,
    Exists,
    DoesNotExist,
    Raw(String),
}

#[derive(Arbitrary, Debug)]
struct SelIn {
    labels: Vec<(u8, u8)>,
    exprs: Vec<(u8, Op, Option<Vec<u8>>)>,
}

#[derive(Arbitrary, Debug)]
enum CidrIn {
    Known(u8),
    /// Octets and a length: host bits may be set, the length may be too long.
    Built([u8; 4], u8),
    Raw(String),
}

#[derive(Arbitrary, Debug)]
struct BlockIn {
    cidr: CidrIn,
    except: Option<Vec<CidrIn>>,
}

#[derive(Arbitrary, Debug)]
struct PeerIn {
    pods: Option<SelIn>,
    namespaces: Option<SelIn>,
    block: Option<BlockIn>,
}

#[derive(Arbitrary, Debug)]
enum ProtoIn {
    Tcp,
    Udp,
    Sctp,
    Raw(String),
}

#[derive(Arbitrary, Debug)]
enum PortIn {
    Number(i32),
    Small(u8),
    Name(u8),
    RawName(String),
}

#[derive(Arbitrary, Debug)]
struct PortRuleIn {
    protocol: Option<ProtoIn>,
    port: Option<PortIn>,
    end_port: Option<i32>,
}

#[derive(Arbitrary, Debug)]
struct RuleIn {
    peers: Option<Vec<PeerIn>>,
    ports: Option<Vec<PortRuleIn>>,
}

#[derive(Arbitrary, Debug)]
enum TypeIn {
    Ingress,
    Egress,
    Raw(String),
}

#[derive(Arbitrary, Debug)]
struct NpIn {
    ns: bool,
    pod_selector: Option<SelIn>,
    ingress: Option<Vec<RuleIn>>,
    egress: Option<Vec<RuleIn>>,
    types: Option<Vec<TypeIn>>,
}

#[derive(Arbitrary, Debug)]
struct Input {
    policies: Vec<NpIn>,
    address_groups: bool,
    namespace_isolation: bool,
}

fn pick(list: &[&'static str], i: u8) -> &'static str {
    list[usize::from(i) % list.len()]
}

fn sel(s: &SelIn) -> Value {
    let labels: Map<String, Value> = s
        .labels
        .iter()
        .take(3)
        .map(|&(k, v)| (pick(&KEYS, k).to_owned(), json!(pick(&VALUES, v))))
        .collect();
    let exprs: Vec<Value> = s
        .exprs
        .iter()
        .take(3)
        .map(|(k, op, vs)| {
            let op = match op {
                Op::In => "In".to_owned(),
                Op::NotIn => "NotIn".to_owned(),
                Op::Exists => "Exists".to_owned(),
                Op::DoesNotExist => "DoesNotExist".to_owned(),
                Op::Raw(s) => s.clone(),
            };
            let mut e = json!({"key": pick(&KEYS, *k), "operator": op});
            if let Some(vs) = vs {
                e["values"] = vs.iter().take(3).map(|&v| json!(pick(&VALUES, v))).collect();
            }
            e
        })
        .collect();
    json!({"matchLabels": labels, "matchExpressions": exprs})
}

fn cidr(c: &CidrIn) -> Value {
    match c {
        CidrIn::Known(i) => json!(pick(&CIDRS, *i)),
        CidrIn::Built(o, len) => json!(format!("{}/{}", Ipv4Addr::from(*o), len % 40)),
        CidrIn::Raw(s) => json!(s),
    }
}

fn rule(r: &RuleIn, peers_key: &str) -> Value {
    let mut o = Map::new();
    if let Some(peers) = &r.peers {
        let list: Vec<Value> = peers
            .iter()
            .take(3)
            .map(|p| {
                let mut v = Map::new();
                if let Some(s) = &p.pods {
                    v.insert("podSelector".into(), sel(s));
                }
                if let Some(s) = &p.namespaces {
                    v.insert("namespaceSelector".into(), sel(s));
                }
                if let Some(b) = &p.block {
                    let mut bv = json!({"cidr": cidr(&b.cidr)});
                    if let Some(ex) = &b.except {
                        bv["except"] = ex.iter().take(3).map(cidr).collect();
                    }
                    v.insert("ipBlock".into(), bv);
                }
                Value::Object(v)
            })
            .collect();
        o.insert(peers_key.into(), json!(list));
    }
    if let Some(ports) = &r.ports {
        let list: Vec<Value> = ports
            .iter()
            .take(3)
            .map(|p| {
                let mut v = Map::new();
                if let Some(pr) = &p.protocol {
                    let s = match pr {
                        ProtoIn::Tcp => "TCP".to_owned(),
                        ProtoIn::Udp => "UDP".to_owned(),
                        ProtoIn::Sctp => "SCTP".to_owned(),
                        ProtoIn::Raw(s) => s.clone(),
                    };
                    v.insert("protocol".into(), json!(s));
                }
                if let Some(port) = &p.port {
                    let pv = match port {
                        PortIn::Number(n) => json!(n),
                        PortIn::Small(n) => json!(78 + i32::from(*n % 8)),
                        PortIn::Name(n) => json!(pick(&["http", "dns", "metrics"], *n)),
                        PortIn::RawName(s) => json!(s),
                    };
                    v.insert("port".into(), pv);
                }
                if let Some(e) = p.end_port {
                    v.insert("endPort".into(), json!(e));
                }
                Value::Object(v)
            })
            .collect();
        o.insert("ports".into(), json!(list));
    }
    Value::Object(o)
}

fn network_policy(i: usize, p: &NpIn) -> Option<NetworkPolicy> {
    let mut spec = Map::new();
    if let Some(s) = &p.pod_selector {
        spec.insert("podSelector".into(), sel(s));
    }
    if let Some(rs) = &p.ingress {
        spec.insert(
            "ingress".into(),
            rs.iter().take(3).map(|r| rule(r, "from")).collect(),
        );
    }
    if let Some(rs) = &p.egress {
        spec.insert(
            "egress".into(),
            rs.iter().take(3).map(|r| rule(r, "to")).collect(),
        );
    }
    if let Some(ts) = &p.types {
        let list: Vec<Value> = ts
            .iter()
            .take(3)
            .map(|t| match t {
                TypeIn::Ingress => json!("Ingress"),
                TypeIn::Egress => json!("Egress"),
                TypeIn::Raw(s) => json!(s),
            })
            .collect();
        spec.insert("policyTypes".into(), json!(list));
    }
    let ns = if p.ns { "n1" } else { "n0" };
    serde_json::from_value(json!({
        "metadata": {"namespace": ns, "name": format!("np{i}")},
        "spec": spec,
    }))
    .ok()
}

fn cluster() -> Cluster {
    let l = |kv: &[(&str, &str)]| -> BTreeMap<String, String> {
        kv.iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    };
    let pod = |ns: &str, name: &str, labels, ip: [u8; 4], ports: Vec<NamedPort>| Pod {
        namespace: ns.into(),
        name: name.into(),
        labels,
        ip: IpAddr::from(ip),
        ports,
    };
    let np = |name: &str, protocol, port| NamedPort {
        name: name.into(),
        protocol,
        port,
    };
    Cluster {
        namespaces: vec![
            Namespace {
                name: "n0".into(),
                labels: l(&[("team", "a")]),
            },
            Namespace {
                name: "n1".into(),
                labels: l(&[("team", "b")]),
            },
        ],
        pods: vec![
            pod(
                "n0",
                "pod0",
                l(&[("app", "a")]),
                [10, 0, 0, 1],
                vec![np("http", Protocol::Tcp, 80)],
            ),
            pod(
                "n0",
                "pod1",
                l(&[("app", "b"), ("role", "a")]),
                [10, 0, 0, 2],
                vec![np("dns", Protocol::Udp, 53)],
            ),
            pod(
                "n1",
                "pod2",
                l(&[("app", "a")]),
                [10, 0, 1, 3],
                vec![np("http", Protocol::Tcp, 8080)],
            ),
            pod("n1", "pod3", l(&[]), [10, 0, 1, 4], vec![]),
        ],
        services: vec![Service {
            namespace: "n0".into(),
            name: "svc".into(),
            cluster_ip: Some(IpAddr::from([10, 96, 0, 10])),
            other_cluster_ips: Vec::new(),
            selector: Some(l(&[("app", "a")])),
            ports: vec![ServicePort {
                protocol: Protocol::Tcp,
                port: 80,
                target: TargetPort::Name("http".into()),
            }],
        }],
    }
}

fn check_converted(np: &NetworkPolicy, p: &Policy, valid: bool) {
    assert_eq!(Some(&p.namespace), np.metadata.namespace.as_ref());
    assert_eq!(Some(&p.name), np.metadata.name.as_ref());
    let spec = np.spec.clone().unwrap_or_default();
    let types = spec.policy_types.clone().unwrap_or_default();
    if !valid {
        assert!(
            p.ingress.is_empty() && p.egress.is_empty(),
            "an invalid policy must allow nothing: {p:?}"
        );
        if types.is_empty() {
            assert!(p.isolates_ingress && p.isolates_egress, "{p:?}");
        }
        return;
    }
    if types.is_empty() {
        assert!(p.isolates_ingress);
        assert_eq!(p.isolates_egress, !p.egress.is_empty());
    } else {
        assert_eq!(p.isolates_ingress, types.iter().any(|t| t == "Ingress"));
        assert_eq!(p.isolates_egress, types.iter().any(|t| t == "Egress"));
    }
    assert_eq!(p.ingress.len(), spec.ingress.as_ref().map_or(0, Vec::len));
    assert_eq!(p.egress.len(), spec.egress.as_ref().map_or(0, Vec::len));
    for r in p.ingress.iter().chain(&p.egress) {
        for pm in &r.ports {
            if let PortSpec::Range(a, b) = pm.port {
                assert!(a >= 1 && a <= b, "{pm:?}");
            }
        }
        for peer in &r.peers {
            if let Peer::IpBlock { cidr, except } = peer {
                for e in except {
                    assert!(
                        cidr.covers(e) && e.prefix_len() > cidr.prefix_len(),
                        "{cidr} except {e}"
                    );
                }
            }
        }
    }
}

fuzz_target!(|input: Input| {
    let nps: Vec<NetworkPolicy> = input
        .policies
        .iter()
        .take(2)
        .enumerate()
        .filter_map(|(i, p)| network_policy(i, p))
        .collect();
    let mut policies = Vec::new();
    for np in &nps {
        let (p, err) = Policy::from_k8s_or_fail_closed(np);
        assert_eq!(err.is_none(), Policy::from_k8s(np).is_ok());
        check_converted(np, &p, err.is_none());
        policies.push(p);
    }
    let cluster = cluster();
    let opts = CompileOptions {
        families: vec![Family::V4],
        peer_mode: if input.address_groups {
            PeerMode::AddressGroups
        } else {
            PeerMode::SecurityGroups
        },
        namespace_isolation: input.namespace_isolation,
        pod_cidrs: vec!["10.0.0.0/16".parse().unwrap()],
        service_cidrs: vec!["10.96.0.0/12".parse().unwrap()],
        node_cidrs: vec!["100.64.0.0/24".parse().unwrap()],
        ..CompileOptions::default()
    };
    let compiled = compile(&cluster, &policies, &opts).expect("valid options and no quota: compiles");
    let probes = probes(&cluster, &policies, &[(Protocol::Udp, 53), (Protocol::Tcp, 8080)]);
    let externals = externals(&cluster, &policies, &[IpAddr::from([10, 0, 9, 9])]);
    check_reachability(&cluster, &policies, &opts, &compiled, &externals, &probes);
});
