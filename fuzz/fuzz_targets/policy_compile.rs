//! The NetworkPolicy compiler on random clusters and policies built by `arbitrary`: pods with labels and
//! named ports (IPv4, and IPv6 in dual-stack clusters), namespaces with labels, Services with VIPs and
//! target ports, policies with selectors, ipBlocks with excepts, port ranges and named ports, in both
//! peer modes, with and without namespace isolation.
//!
//! Asserts (kuryr_fuzz::check_reachability): no panic; compiled security groups never allow a
//! (source, destination, protocol, port) that the Kubernetes evaluator denies, directly or through a
//! Service, and allow exactly as much when nothing was rejected or narrowed; the compiled state is well
//! formed. Also: the result does not depend on the order of the policies, and diffing it against an
//! empty cloud never panics.

#![no_main]

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use arbitrary::Arbitrary;
use kuryr_core::policy::{
    compile, diff, Cidr, Cluster, CompileOptions, CompiledPolicy, CurrentPort, CurrentState, DiffOptions,
    Family, LabelSelector, NamedPort, Namespace, NamespaceMatch, Peer, PeerMode, Pod, Policy, PolicyRule,
    PortMatch, PortSpec, Protocol, Requirement, Service, ServicePort, TargetPort,
};
use kuryr_fuzz::{check_reachability, externals, probes};
use libfuzzer_sys::fuzz_target;

const KEYS: [&str; 3] = ["app", "role", "team"];
const VALUES: [&str; 3] = ["a", "b", "c"];
const PORT_NAMES: [&str; 3] = ["http", "dns", "metrics"];
const NAMESPACES: [&str; 3] = ["n0", "n1", "n2"];

#[derive(Arbitrary, Debug, Clone, Copy)]
enum ProtoIn {
    Tcp,
    Udp,
    Sctp,
}

impl ProtoIn {
    fn get(self) -> Protocol {
        match self {
            ProtoIn::Tcp => Protocol::Tcp,
            ProtoIn::Udp => Protocol::Udp,
            ProtoIn::Sctp => Protocol::Sctp,
        }
    }
}

#[derive(Arbitrary, Debug)]
enum ReqIn {
    In(u8, Vec<u8>),
    NotIn(u8, Vec<u8>),
    Exists(u8),
    DoesNotExist(u8),
}

#[derive(Arbitrary, Debug)]
struct PodIn {
    ns: u8,
    labels: Vec<(u8, u8)>,
    ports: Vec<(u8, ProtoIn, u16)>,
    v6: bool,
}

#[derive(Arbitrary, Debug)]
enum TargetIn {
    Number(u16),
    Name(u8),
}

#[derive(Arbitrary, Debug)]
struct SvcIn {
    ns: u8,
    vip: Option<u16>,
    selector: Option<Vec<(u8, u8)>>,
    ports: Vec<(ProtoIn, u16, TargetIn)>,
}

/// An address in one of the ranges that matter.
#[derive(Arbitrary, Debug, Clone, Copy)]
enum AddrIn {
    Pods(u16),
    Services(u16),
    Nodes(u8),
    Outside(u32),
    Pods6(u16),
    Outside6(u128),
    Zero,
}

impl AddrIn {
    fn get(self) -> IpAddr {
        match self {
            AddrIn::Pods(x) => Ipv4Addr::from(0x0a00_0000 | u32::from(x)).into(),
            AddrIn::Services(x) => Ipv4Addr::from(0x0a60_0000 | u32::from(x)).into(),
            AddrIn::Nodes(x) => Ipv4Addr::new(100, 64, 0, x).into(),
            AddrIn::Outside(x) => Ipv4Addr::from(x).into(),
            AddrIn::Pods6(x) => Ipv6Addr::new(0xfd00, 0x10, 0, 0, 0, 0, 0, x).into(),
            AddrIn::Outside6(x) => Ipv6Addr::from(x).into(),
            AddrIn::Zero => Ipv4Addr::UNSPECIFIED.into(),
        }
    }
}

#[derive(Arbitrary, Debug)]
enum PeerIn {
    /// `podSelector` only: the policy's namespace.
    Pods(Vec<ReqIn>),
    /// `namespaceSelector` (+ `podSelector`).
    NamespacesPods(Vec<ReqIn>, Vec<ReqIn>),
    Block {
        addr: AddrIn,
        len: u8,
        excepts: Vec<(u8, u128)>,
    },
}

#[derive(Arbitrary, Debug)]
enum PortSpecIn {
    All,
    Range(u16, u16),
    Single(u16),
    Named(u8),
}

#[derive(Arbitrary, Debug)]
struct RuleIn {
    peers: Vec<PeerIn>,
    ports: Vec<(ProtoIn, PortSpecIn)>,
}

#[derive(Arbitrary, Debug)]
struct PolicyIn {
    ns: u8,
    selector: Vec<ReqIn>,
    ingress: Vec<RuleIn>,
    egress: Vec<RuleIn>,
    /// 0: Ingress, 1: Egress, 2: both.
    types: u8,
}

#[derive(Arbitrary, Debug)]
struct Input {
    ns_labels: [Vec<(u8, u8)>; 3],
    pods: Vec<PodIn>,
    services: Vec<SvcIn>,
    policies: Vec<PolicyIn>,
    address_groups: bool,
    namespace_isolation: bool,
    dual_stack: bool,
    externals: Vec<AddrIn>,
    probes: Vec<(ProtoIn, u16)>,
}

fn pick<T: Copy>(list: &[T], i: u8) -> T {
    list[usize::from(i) % list.len()]
}

fn labels(pairs: &[(u8, u8)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .take(3)
        .map(|&(k, v)| (pick(&KEYS, k).to_owned(), pick(&VALUES, v).to_owned()))
        .collect()
}

fn selector(reqs: &[ReqIn]) -> LabelSelector {
    let values = |vs: &[u8]| -> Vec<String> {
        // The API server refuses In/NotIn without values.
        let mut out: Vec<String> = vs.iter().take(3).map(|&v| pick(&VALUES, v).to_owned()).collect();
        if out.is_empty() {
            out.push(VALUES[0].to_owned());
        }
        out
    };
    LabelSelector::new(reqs.iter().take(3).map(|r| match r {
        ReqIn::In(k, vs) => Requirement::In(pick(&KEYS, *k).into(), values(vs)),
        ReqIn::NotIn(k, vs) => Requirement::NotIn(pick(&KEYS, *k).into(), values(vs)),
        ReqIn::Exists(k) => Requirement::Exists(pick(&KEYS, *k).into()),
        ReqIn::DoesNotExist(k) => Requirement::DoesNotExist(pick(&KEYS, *k).into()),
    }))
}

fn width(f: Family) -> u8 {
    match f {
        Family::V4 => 32,
        Family::V6 => 128,
    }
}

fn peer(p: &PeerIn, ns: &str) -> Peer {
    match p {
        PeerIn::Pods(pods) => Peer::Pods {
            namespaces: NamespaceMatch::Exact(ns.to_owned()),
            pods: selector(pods),
        },
        PeerIn::NamespacesPods(nss, pods) => Peer::Pods {
            namespaces: NamespaceMatch::Selector(selector(nss)),
            pods: selector(pods),
        },
        PeerIn::Block { addr, len, excepts } => {
            let ip = addr.get();
            let w = width(Family::of(&ip));
            let len = len % (w + 1);
            let cidr = Cidr::new(ip, len).unwrap();
            let mut except = Vec::new();
            if len < w {
                for &(extra, bits) in excepts.iter().take(3) {
                    // Strictly inside: longer prefix, same leading bits.
                    let elen = len + 1 + extra % (w - len);
                    let base = match cidr.addr() {
                        IpAddr::V4(a) => u128::from(u32::from(a)),
                        IpAddr::V6(a) => u128::from(a),
                    };
                    let host_bits = u32::from(w - len);
                    let mask = if host_bits >= 128 {
                        u128::MAX
                    } else {
                        (1u128 << host_bits) - 1
                    };
                    let v = base | (bits & mask);
                    let eip: IpAddr = match cidr.family() {
                        Family::V4 => Ipv4Addr::from(u32::try_from(v & u128::from(u32::MAX)).unwrap()).into(),
                        Family::V6 => Ipv6Addr::from(v).into(),
                    };
                    except.push(Cidr::new(eip, elen).unwrap());
                }
            }
            Peer::IpBlock { cidr, except }
        }
    }
}

fn port_match(proto: ProtoIn, spec: &PortSpecIn) -> PortMatch {
    let port = match *spec {
        PortSpecIn::All => PortSpec::All,
        PortSpecIn::Range(a, b) => {
            let a = a.max(1);
            PortSpec::Range(a, b.max(a))
        }
        PortSpecIn::Single(a) => PortSpec::Range(a.max(1), a.max(1)),
        PortSpecIn::Named(n) => PortSpec::Named(pick(&PORT_NAMES, n).to_owned()),
    };
    PortMatch {
        protocol: proto.get(),
        port,
    }
}

fn rules(list: &[RuleIn], ns: &str) -> Vec<PolicyRule> {
    list.iter()
        .take(3)
        .map(|r| PolicyRule {
            peers: r.peers.iter().take(3).map(|p| peer(p, ns)).collect(),
            ports: r.ports.iter().take(3).map(|(pr, s)| port_match(*pr, s)).collect(),
        })
        .collect()
}

fn build(input: &Input) -> (Cluster, Vec<Policy>, CompileOptions) {
    let dual = input.dual_stack;
    let namespaces = NAMESPACES
        .iter()
        .zip(&input.ns_labels)
        .map(|(n, l)| Namespace {
            name: (*n).to_owned(),
            labels: labels(l),
        })
        .collect();
    let pods = input
        .pods
        .iter()
        .take(8)
        .enumerate()
        .map(|(i, p)| {
            let ns = usize::from(p.ns) % NAMESPACES.len();
            let host = u8::try_from(i + 1).unwrap();
            let ip: IpAddr = if dual && p.v6 {
                Ipv6Addr::new(
                    0xfd00,
                    0x10,
                    0,
                    0,
                    0,
                    0,
                    u16::try_from(ns).unwrap(),
                    u16::from(host),
                )
                .into()
            } else {
                Ipv4Addr::new(10, 0, u8::try_from(ns).unwrap(), host).into()
            };
            // Port names are unique within a pod (API validation).
            let mut seen = BTreeSet::new();
            let ports = p
                .ports
                .iter()
                .take(3)
                .filter(|(n, _, _)| seen.insert(pick(&PORT_NAMES, *n)))
                .map(|&(n, proto, port)| NamedPort {
                    name: pick(&PORT_NAMES, n).to_owned(),
                    protocol: proto.get(),
                    port: port.max(1),
                })
                .collect();
            Pod {
                namespace: NAMESPACES[ns].to_owned(),
                name: format!("pod{i}"),
                labels: labels(&p.labels),
                ip,
                ports,
            }
        })
        .collect();
    let services = input
        .services
        .iter()
        .take(3)
        .enumerate()
        .map(|(i, s)| Service {
            namespace: pick(&NAMESPACES, s.ns).to_owned(),
            name: format!("svc{i}"),
            cluster_ip: s.vip.map(|v| Ipv4Addr::from(0x0a60_0000 | u32::from(v)).into()),
            other_cluster_ips: Vec::new(),
            selector: s.selector.as_ref().map(|l| labels(l)),
            ports: s
                .ports
                .iter()
                .take(3)
                .map(|(proto, port, t)| ServicePort {
                    protocol: proto.get(),
                    port: (*port).max(1),
                    target: match t {
                        TargetIn::Number(n) => TargetPort::Number((*n).max(1)),
                        TargetIn::Name(n) => TargetPort::Name(pick(&PORT_NAMES, *n).to_owned()),
                    },
                })
                .collect(),
        })
        .collect();
    let policies = input
        .policies
        .iter()
        .take(5)
        .enumerate()
        .map(|(i, p)| {
            let ns = pick(&NAMESPACES, p.ns);
            let (isolates_ingress, isolates_egress) = match p.types % 3 {
                0 => (true, false),
                1 => (false, true),
                _ => (true, true),
            };
            Policy {
                namespace: ns.to_owned(),
                name: format!("p{i}"),
                pod_selector: selector(&p.selector),
                ingress: rules(&p.ingress, ns),
                egress: rules(&p.egress, ns),
                isolates_ingress,
                isolates_egress,
            }
        })
        .collect();
    let cidr = |s: &str| s.parse::<Cidr>().unwrap();
    let mut opts = CompileOptions {
        families: vec![Family::V4],
        peer_mode: if input.address_groups {
            PeerMode::AddressGroups
        } else {
            PeerMode::SecurityGroups
        },
        namespace_isolation: input.namespace_isolation,
        pod_cidrs: vec![cidr("10.0.0.0/16")],
        service_cidrs: vec![cidr("10.96.0.0/12")],
        node_cidrs: vec![cidr("100.64.0.0/24")],
        ..CompileOptions::default()
    };
    if dual {
        opts.families.push(Family::V6);
        opts.pod_cidrs.push(cidr("fd00:10::/64"));
        opts.service_cidrs.push(cidr("fd00:96::/108"));
    }
    (
        Cluster {
            namespaces,
            pods,
            services,
        },
        policies,
        opts,
    )
}

type Shape = (
    BTreeMap<String, BTreeSet<kuryr_core::policy::Rule>>,
    BTreeMap<String, BTreeSet<Cidr>>,
);

fn shape(c: &CompiledPolicy) -> Shape {
    (
        c.security_groups
            .iter()
            .map(|s| (s.key.clone(), s.rules.clone()))
            .collect(),
        c.address_groups
            .iter()
            .map(|a| (a.key.clone(), a.addresses.clone()))
            .collect(),
    )
}

fuzz_target!(|input: Input| {
    let (cluster, policies, opts) = build(&input);
    let compiled = compile(&cluster, &policies, &opts).expect("valid options and no quota: compiles");
    let extra: Vec<(Protocol, u16)> = input.probes.iter().take(4).map(|&(p, n)| (p.get(), n)).collect();
    let probes = probes(&cluster, &policies, &extra);
    let extra: Vec<IpAddr> = input.externals.iter().take(4).map(|a| a.get()).collect();
    let externals = externals(&cluster, &policies, &extra);
    check_reachability(&cluster, &policies, &opts, &compiled, &externals, &probes);

    // Policy order does not matter.
    let mut reversed = policies.clone();
    reversed.reverse();
    let again = compile(&cluster, &reversed, &opts).unwrap();
    assert_eq!(
        shape(&again),
        shape(&compiled),
        "policy order changed the compiled groups"
    );
    assert_eq!(
        again.memberships, compiled.memberships,
        "policy order changed the memberships"
    );

    // A first sync against an empty cloud.
    let current = CurrentState {
        ports: cluster
            .pods
            .iter()
            .enumerate()
            .map(|(i, p)| {
                (
                    p.key(),
                    CurrentPort {
                        id: format!("port-{i}"),
                        security_groups: BTreeSet::new(),
                    },
                )
            })
            .collect(),
        ..CurrentState::default()
    };
    let plan = diff(&compiled, &current, &DiffOptions::default());
    assert_eq!(plan.create_security_groups.len(), compiled.security_groups.len());
});
