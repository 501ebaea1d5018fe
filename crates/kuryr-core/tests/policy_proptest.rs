//! Property tests of the NetworkPolicy compiler on random clusters and policies:
//! - compiled security groups never allow more than Kubernetes (and, unless the compiler reported a
//!   rejection or narrowing, exactly as much), in every peer mode and with namespace isolation;
//! - CIDR subtraction covers exactly `cidr - except` with disjoint prefixes;
//! - applying a diff's plan to a simulated Neutron converges: a second diff is empty;
//! - rule and call counts for 100 pods x 20 policies (printed; recorded in docs/network-policy.md).

#![allow(clippy::unwrap_used)] // test helpers outside #[test] fns

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

use kuryr_core::policy::diff::{GroupRef, Plan};
use kuryr_core::policy::{
    compile, diff, Cidr, Cluster, CompileOptions, CompiledPolicy, CurrentAddressGroup, CurrentPort,
    CurrentRule, CurrentSg, CurrentState, DiffOptions, Endpoint, Family, K8sEvaluator, LabelSelector,
    NamedPort, Namespace, NamespaceMatch, Narrowing, NeutronEvaluator, Peer, PeerMode, Pod, PodKey, Policy,
    PolicyRule, PortMatch, PortSpec, Protocol, Remote, Requirement, Rule, Service, ServicePort, TargetPort,
};
use proptest::prelude::*;

// === random clusters and policies ===

fn labels(kv: &[(&str, &str)]) -> kuryr_core::policy::Labels {
    kv.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

fn arb_requirement() -> impl Strategy<Value = Requirement> {
    prop_oneof![
        Just(Requirement::In("app".into(), vec!["a".into()])),
        Just(Requirement::In("app".into(), vec!["a".into(), "b".into()])),
        Just(Requirement::NotIn("app".into(), vec!["c".into()])),
        Just(Requirement::Exists("role".into())),
        Just(Requirement::DoesNotExist("role".into())),
        Just(Requirement::In("team".into(), vec!["red".into()])),
    ]
}

fn arb_selector() -> impl Strategy<Value = LabelSelector> {
    prop::collection::vec(arb_requirement(), 0..3).prop_map(LabelSelector::new)
}

fn arb_peer() -> impl Strategy<Value = Peer> {
    let block = |cidr: &str, except: &[&str]| Peer::IpBlock {
        cidr: cidr.parse().unwrap(),
        except: except.iter().map(|e| e.parse().unwrap()).collect(),
    };
    prop_oneof![
        3 => (prop_oneof![Just("n0"), Just("n1")], arb_selector())
            .prop_map(|(ns, pods)| Peer::Pods { namespaces: NamespaceMatch::Exact(ns.into()), pods }),
        3 => (arb_selector(), arb_selector())
            .prop_map(|(ns, pods)| Peer::Pods { namespaces: NamespaceMatch::Selector(ns), pods }),
        1 => Just(block("10.0.0.0/16", &["10.0.1.0/24"])),
        1 => Just(block("10.0.1.2/32", &[])),
        1 => Just(block("198.51.100.0/24", &[])),
        1 => Just(block("0.0.0.0/0", &["10.0.0.0/8"])),
        1 => Just(block("0.0.0.0/0", &[])),
        1 => Just(block("2001:db8::/32", &["2001:db8::/64"])),
        1 => Just(block("10.0.0.0/8", &["10.0.0.0/24", "10.0.1.1/32"])),
    ]
}

fn arb_port() -> impl Strategy<Value = PortMatch> {
    let pm = |protocol, port| PortMatch { protocol, port };
    prop_oneof![
        Just(pm(Protocol::Tcp, PortSpec::Range(80, 80))),
        Just(pm(Protocol::Tcp, PortSpec::Range(80, 8080))),
        Just(pm(Protocol::Tcp, PortSpec::All)),
        Just(pm(Protocol::Udp, PortSpec::Range(53, 53))),
        Just(pm(Protocol::Tcp, PortSpec::Named("http".into()))),
        Just(pm(Protocol::Udp, PortSpec::Named("dns".into()))),
    ]
}

fn arb_rule() -> impl Strategy<Value = PolicyRule> {
    (
        prop::collection::vec(arb_peer(), 0..3),
        prop::collection::vec(arb_port(), 0..3),
    )
        .prop_map(|(peers, ports)| PolicyRule { peers, ports })
}

fn arb_policy(i: usize) -> impl Strategy<Value = Policy> {
    (
        prop_oneof![Just("n0"), Just("n1")],
        arb_selector(),
        prop::collection::vec(arb_rule(), 0..3),
        prop::collection::vec(arb_rule(), 0..3),
        prop_oneof![Just((true, false)), Just((false, true)), Just((true, true))],
    )
        .prop_map(
            move |(ns, pod_selector, ingress, egress, (isolates_ingress, isolates_egress))| Policy {
                namespace: ns.into(),
                name: format!("p{i}"),
                pod_selector,
                ingress,
                egress,
                isolates_ingress,
                isolates_egress,
            },
        )
}

fn arb_pod(i: usize) -> impl Strategy<Value = Pod> {
    (
        0..2usize,
        prop::option::of(prop_oneof![Just("a"), Just("b"), Just("c")]),
        prop::option::of(prop_oneof![Just("x"), Just("y")]),
        prop::option::of(prop_oneof![Just(80u16), Just(8080u16)]),
        any::<bool>(),
    )
        .prop_map(move |(ns, app, role, http, dns)| {
            let mut l = BTreeMap::new();
            if let Some(a) = app {
                l.insert("app".to_string(), a.to_string());
            }
            if let Some(r) = role {
                l.insert("role".to_string(), r.to_string());
            }
            let mut ports = Vec::new();
            if let Some(p) = http {
                ports.push(NamedPort {
                    name: "http".into(),
                    protocol: Protocol::Tcp,
                    port: p,
                });
            }
            if dns {
                ports.push(NamedPort {
                    name: "dns".into(),
                    protocol: Protocol::Udp,
                    port: 53,
                });
            }
            Pod {
                namespace: format!("n{ns}"),
                name: format!("pod{i}"),
                labels: l,
                ip: format!("10.0.{ns}.{}", i + 1).parse().unwrap(),
                ports,
            }
        })
}

fn arb_cluster() -> impl Strategy<Value = Cluster> {
    (
        (0..6usize).prop_flat_map(|n| (0..n).map(arb_pod).collect::<Vec<_>>()),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(|(pods, red0, red1)| {
            let ns = |name: &str, red: bool| Namespace {
                name: name.into(),
                labels: if red {
                    labels(&[("team", "red")])
                } else {
                    labels(&[("team", "blue")])
                },
            };
            let services = vec![
                Service {
                    namespace: "n0".into(),
                    name: "svc".into(),
                    cluster_ip: Some("10.96.0.10".parse().unwrap()),
                    other_cluster_ips: Vec::new(),
                    selector: Some(labels(&[("app", "a")])),
                    ports: vec![ServicePort {
                        protocol: Protocol::Tcp,
                        port: 80,
                        target: TargetPort::Name("http".into()),
                    }],
                },
                Service {
                    // Service port and target port differ, so a VIP opened on the wrong port shows.
                    namespace: "n1".into(),
                    name: "svc2".into(),
                    cluster_ip: Some("10.96.1.10".parse().unwrap()),
                    other_cluster_ips: Vec::new(),
                    selector: Some(labels(&[("role", "x")])),
                    ports: vec![
                        ServicePort {
                            protocol: Protocol::Tcp,
                            port: 8080,
                            target: TargetPort::Number(80),
                        },
                        ServicePort {
                            protocol: Protocol::Udp,
                            port: 53,
                            target: TargetPort::Name("dns".into()),
                        },
                    ],
                },
            ];
            Cluster {
                namespaces: vec![ns("n0", red0), ns("n1", red1)],
                pods,
                services,
            }
        })
}

fn arb_policies() -> impl Strategy<Value = Vec<Policy>> {
    (0..5usize).prop_flat_map(|n| (0..n).map(arb_policy).collect::<Vec<_>>())
}

fn arb_options() -> impl Strategy<Value = CompileOptions> {
    (
        prop_oneof![Just(PeerMode::SecurityGroups), Just(PeerMode::AddressGroups)],
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(|(peer_mode, namespace_isolation, dual_stack)| CompileOptions {
            peer_mode,
            namespace_isolation,
            families: if dual_stack {
                vec![Family::V4, Family::V6]
            } else {
                vec![Family::V4]
            },
            pod_cidrs: vec!["10.0.0.0/16".parse().unwrap()],
            service_cidrs: vec!["10.96.0.0/12".parse().unwrap()],
            node_cidrs: vec!["100.64.0.0/24".parse().unwrap()],
            ..CompileOptions::default()
        })
}

const PROBES: [(Protocol, u16); 4] = [
    (Protocol::Tcp, 80),
    (Protocol::Tcp, 8080),
    (Protocol::Tcp, 81),
    (Protocol::Udp, 53),
];

fn endpoints(c: &Cluster) -> Vec<Endpoint> {
    let mut v: Vec<Endpoint> = c.pods.iter().map(|p| Endpoint::Pod(p.key())).collect();
    // Outside addresses (IPv4 and IPv6), one inside the pod range that is no pod, one in the
    // Service range, a worker node.
    for ip in [
        "198.51.100.10",
        "10.0.9.9",
        "10.96.0.77",
        "2001:db8:1::1",
        "100.64.0.5",
    ] {
        v.push(Endpoint::External(ip.parse().unwrap()));
    }
    v
}

proptest! {
    // 512 by default; PROPTEST_CASES overrides (CI soak runs use more).
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(512),
        ..ProptestConfig::default()
    })]

    #[test]
    fn compiled_rules_never_allow_more_than_the_policies(
        cluster in arb_cluster(), policies in arb_policies(), opts in arb_options()
    ) {
        let compiled = compile(&cluster, &policies, &opts).unwrap();
        let k8s = K8sEvaluator::new(&cluster, &policies, &opts);
        let neutron = NeutronEvaluator::new(&cluster, &compiled);
        let exact = compiled.rejected.is_empty();
        let eps = endpoints(&cluster);
        for src in &eps {
            for dst in &eps {
                if matches!((src, dst), (Endpoint::External(_), Endpoint::External(_))) {
                    continue;
                }
                for (proto, port) in PROBES {
                    let want = k8s.allows(src, dst, proto, port);
                    let got = neutron.allows(src, dst, proto, port);
                    prop_assert!(!got || want, "wider: {:?} -> {:?} {}/{}", src, dst, proto, port);
                    // Egress to "anywhere" leaves out the Service range (VIPs open per Service), so
                    // an address there that is no VIP is reachable in Kubernetes but not here.
                    let in_service_range = match dst {
                        Endpoint::External(ip) => opts.service_cidrs.iter().any(|c| c.contains(ip)),
                        Endpoint::Pod(_) => false,
                    };
                    // A single-stack cluster writes no IPv6 rules: its pods have no IPv6 address.
                    let family_off = [src, dst].iter().any(|e| match e {
                        Endpoint::External(ip) => !opts.families.contains(&Family::of(ip)),
                        Endpoint::Pod(_) => false,
                    });
                    if exact && !in_service_range && !family_off {
                        prop_assert_eq!(got, want, "{:?} -> {:?} {}/{}", src, dst, proto, port);
                    }
                }
            }
        }
        for src in &cluster.pods {
            for svc in &cluster.services {
                for sp in &svc.ports {
                    for b in &cluster.pods {
                        let want = k8s.allows_via_service(&src.key(), svc, sp, &b.key());
                        let got = neutron.allows_via_service(&src.key(), svc, sp, &b.key());
                        let (Some(want), Some(got)) = (want, got) else { continue };
                        prop_assert!(!got || want, "wider via Service: {} -> {}", src.key(), b.key());
                        let narrowed = compiled.narrowings.iter().any(|n| {
                            let (policy, service, port) = n.subject();
                            *service == svc.key() && port == sp.port
                                && policies.iter().any(|p| p.key() == *policy && p.selects(src))
                        });
                        if exact && !narrowed {
                            prop_assert_eq!(got, want, "via Service: {} -> {}", src.key(), b.key());
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn cidr_subtraction_covers_exactly_the_remaining_addresses(
        base_len in 20u8..=28, excepts in prop::collection::vec((0u32..4096, 22u8..=32), 0..4), probes in prop::collection::vec(0u32..4096, 32)
    ) {
        let base = Cidr::new("10.1.0.0".parse().unwrap(), base_len).unwrap();
        let ip = |off: u32| -> IpAddr { std::net::Ipv4Addr::from(u32::from(std::net::Ipv4Addr::new(10, 1, 0, 0)) + off).into() };
        let except: Vec<Cidr> = excepts.iter().map(|(off, len)| Cidr::new(ip(*off), *len).unwrap()).collect();
        let out = base.subtract(&except);
        for (i, a) in out.iter().enumerate() {
            for b in &out[i + 1..] {
                prop_assert!(!a.covers(b) && !b.covers(a), "{} and {} overlap", a, b);
            }
        }
        for off in probes {
            let addr = ip(off);
            let want = base.contains(&addr) && !except.iter().any(|e| e.contains(&addr));
            prop_assert_eq!(out.iter().any(|c| c.contains(&addr)), want, "{}", addr);
        }
    }

    #[test]
    fn applying_a_plan_converges_and_a_second_diff_is_empty(
        cluster in arb_cluster(), before in arb_policies(), after in arb_policies(), opts in arb_options()
    ) {
        let opts_diff = DiffOptions::default();
        let mut neutron = FakeNeutron::with_ports(&cluster);
        let first = compile(&cluster, &before, &opts).unwrap();
        let want = desired_view(&first);
        neutron.apply(&diff(&first, &neutron.state, &opts_diff), &opts_diff);
        prop_assert!(diff(&first, &neutron.state, &opts_diff).is_empty());
        prop_assert_eq!(neutron.as_desired(), want);

        let second = compile(&cluster, &after, &opts).unwrap();
        let want = desired_view(&second);
        let plan = diff(&second, &neutron.state, &opts_diff);
        neutron.apply(&plan, &opts_diff);
        prop_assert!(diff(&second, &neutron.state, &opts_diff).is_empty(), "not converged");
        prop_assert_eq!(neutron.as_desired(), want);
    }
}

// === a fake Neutron that executes plans ===

/// Executes plans the way the controller will, enforcing Neutron's refusals that matter for
/// ordering: a group in use by a port can't be deleted, nor an address group a rule names.
struct FakeNeutron {
    state: CurrentState,
    next: usize,
}

type View = (
    BTreeMap<String, BTreeSet<Rule>>,
    BTreeMap<String, BTreeSet<Cidr>>,
    BTreeMap<PodKey, BTreeSet<String>>,
);

impl FakeNeutron {
    fn with_ports(cluster: &Cluster) -> Self {
        let ports = cluster
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
            .collect();
        Self {
            state: CurrentState {
                ports,
                ..CurrentState::default()
            },
            next: 0,
        }
    }

    fn id(&mut self, kind: &str) -> String {
        self.next += 1;
        format!("{kind}-{}", self.next)
    }

    fn apply(&mut self, plan: &Plan, opts: &DiffOptions) {
        let mut key_to_id: BTreeMap<String, String> = BTreeMap::new();
        let mut ag_key_to_id: BTreeMap<String, String> = BTreeMap::new();
        for (g, addresses) in &plan.create_address_groups {
            let id = self.id("ag");
            self.state.address_groups.push(CurrentAddressGroup {
                id: id.clone(),
                name: g.name.clone(),
                addresses: addresses.iter().copied().collect(),
            });
            ag_key_to_id.insert(g.key.clone(), id);
        }
        for g in &plan.create_security_groups {
            let id = self.id("sg");
            let rules = opts
                .new_sg_default_rules
                .iter()
                .map(|r| CurrentRule {
                    id: format!("{id}-default-{:?}", r.family),
                    rule: r.clone(),
                })
                .collect();
            self.state.security_groups.push(CurrentSg {
                id: id.clone(),
                name: g.name.clone(),
                rules,
            });
            key_to_id.insert(g.key.clone(), id);
        }
        let resolve_sg = |r: &GroupRef, key_to_id: &BTreeMap<String, String>| match r {
            GroupRef::Existing(id) => id.clone(),
            GroupRef::New(k) => key_to_id[k].clone(),
        };
        for adds in &plan.add_rules {
            let sg_id = resolve_sg(&adds.group, &key_to_id);
            let mut new_rules = Vec::new();
            for r in &adds.rules {
                let remote = match &r.remote {
                    Remote::Group(k) => {
                        Remote::Group(key_to_id.get(k).or(plan.sg_ids.get(k)).unwrap().clone())
                    }
                    Remote::AddressGroup(k) => {
                        Remote::AddressGroup(ag_key_to_id.get(k).or(plan.ag_ids.get(k)).unwrap().clone())
                    }
                    other => other.clone(),
                };
                new_rules.push(CurrentRule {
                    id: self.id("rule"),
                    rule: Rule { remote, ..r.clone() },
                });
            }
            let sg = self
                .state
                .security_groups
                .iter_mut()
                .find(|s| s.id == sg_id)
                .unwrap();
            sg.rules.extend(new_rules);
        }
        for ch in &plan.add_addresses {
            let GroupRef::Existing(id) = &ch.group else {
                panic!("address add to a new group")
            };
            let ag = self
                .state
                .address_groups
                .iter_mut()
                .find(|a| a.id == *id)
                .unwrap();
            ag.addresses.extend(ch.addresses.iter().copied());
        }
        for pu in &plan.port_updates {
            let ids: BTreeSet<String> = pu
                .security_groups
                .iter()
                .map(|r| resolve_sg(r, &key_to_id))
                .collect();
            let port = self.state.ports.get_mut(&pu.pod).unwrap();
            assert_eq!(port.id, pu.port_id);
            port.security_groups = ids;
        }
        for ch in &plan.remove_addresses {
            let GroupRef::Existing(id) = &ch.group else {
                panic!("address removal from a new group")
            };
            let ag = self
                .state
                .address_groups
                .iter_mut()
                .find(|a| a.id == *id)
                .unwrap();
            for a in &ch.addresses {
                ag.addresses.remove(a);
            }
        }
        for id in &plan.delete_rules {
            let mut found = false;
            for sg in &mut self.state.security_groups {
                let n = sg.rules.len();
                sg.rules.retain(|r| r.id != *id);
                found |= sg.rules.len() != n;
            }
            assert!(found, "rule {id} not found");
        }
        for (key, rule) in &plan.delete_default_rules {
            let sg_id = key_to_id[key].clone();
            let sg = self
                .state
                .security_groups
                .iter_mut()
                .find(|s| s.id == sg_id)
                .unwrap();
            let n = sg.rules.len();
            sg.rules.retain(|r| r.rule != *rule);
            assert_eq!(sg.rules.len() + 1, n, "default rule not found once");
        }
        for id in &plan.delete_security_groups {
            assert!(
                !self.state.ports.values().any(|p| p.security_groups.contains(id)),
                "security group {id} deleted while in use by a port"
            );
            self.state.security_groups.retain(|s| s.id != *id);
            // Rules naming the deleted group go with it (Neutron's FK cascade).
            for sg in &mut self.state.security_groups {
                sg.rules.retain(|r| r.rule.remote != Remote::Group(id.clone()));
            }
        }
        for id in &plan.delete_address_groups {
            assert!(
                !self
                    .state
                    .security_groups
                    .iter()
                    .flat_map(|s| &s.rules)
                    .any(|r| r.rule.remote == Remote::AddressGroup(id.clone())),
                "address group {id} deleted while a rule names it"
            );
            self.state.address_groups.retain(|a| a.id != *id);
        }
    }

    /// The state in desired terms (keys instead of ids), to compare with the compiled state.
    fn as_desired(&self) -> View {
        let name_to_key = NAMES.with(|n| {
            n.borrow()
                .iter()
                .map(|(k, v)| (v.clone(), k.clone()))
                .collect::<BTreeMap<_, _>>()
        });
        let sg_key: BTreeMap<&str, String> = self
            .state
            .security_groups
            .iter()
            .map(|s| (s.id.as_str(), name_to_key[&s.name].clone()))
            .collect();
        let ag_key: BTreeMap<&str, String> = self
            .state
            .address_groups
            .iter()
            .map(|a| (a.id.as_str(), name_to_key[&a.name].clone()))
            .collect();
        let sgs = self
            .state
            .security_groups
            .iter()
            .map(|s| {
                let rules = s
                    .rules
                    .iter()
                    .map(|r| {
                        let remote = match &r.rule.remote {
                            Remote::Group(id) => Remote::Group(sg_key[id.as_str()].clone()),
                            Remote::AddressGroup(id) => Remote::AddressGroup(ag_key[id.as_str()].clone()),
                            other => other.clone(),
                        };
                        Rule {
                            remote,
                            ..r.rule.clone()
                        }
                    })
                    .collect();
                (sg_key[s.id.as_str()].clone(), rules)
            })
            .collect();
        let ags = self
            .state
            .address_groups
            .iter()
            .map(|a| (ag_key[a.id.as_str()].clone(), a.addresses.clone()))
            .collect();
        let ports = self
            .state
            .ports
            .iter()
            .map(|(k, p)| {
                (
                    k.clone(),
                    p.security_groups
                        .iter()
                        .map(|id| sg_key[id.as_str()].clone())
                        .collect(),
                )
            })
            .collect();
        (sgs, ags, ports)
    }
}

thread_local! {
    /// key -> Neutron name of every group any compilation in this thread produced.
    static NAMES: std::cell::RefCell<BTreeMap<String, String>> = const { std::cell::RefCell::new(BTreeMap::new()) };
}

fn desired_view(c: &CompiledPolicy) -> View {
    NAMES.with(|n| {
        let mut n = n.borrow_mut();
        for sg in &c.security_groups {
            n.insert(sg.key.clone(), sg.name.clone());
        }
        for ag in &c.address_groups {
            n.insert(ag.key.clone(), ag.name.clone());
        }
    });
    (
        c.security_groups
            .iter()
            .map(|s| (s.key.clone(), s.rules.clone()))
            .collect(),
        c.address_groups
            .iter()
            .map(|a| (a.key.clone(), a.addresses.clone()))
            .collect(),
        c.memberships.clone(),
    )
}

// === rule and call counts at scale ===

fn np(ns: &str, name: &str, spec: serde_json::Value) -> Policy {
    let np: k8s_openapi::api::networking::v1::NetworkPolicy = serde_json::from_value(
        serde_json::json!({"metadata": {"namespace": ns, "name": name}, "spec": spec}),
    )
    .unwrap();
    Policy::from_k8s(&np).unwrap()
}

/// 5 namespaces x 20 pods (8 web, 6 api, 4 db, 2 cache), a Service per app and namespace, and 4
/// policies per namespace: default deny, web from everywhere on a named port, api from web, db
/// ingress from api plus egress to cache and the outside.
fn hundred_pods() -> (Cluster, Vec<Policy>) {
    let apps = [
        ("web", "http", 80u16),
        ("api", "http", 8080),
        ("db", "pg", 5432),
        ("cache", "redis", 6379),
    ];
    let per_app = [8usize, 6, 4, 2];
    let mut c = Cluster::default();
    let mut policies = Vec::new();
    for n in 0..5 {
        let ns = format!("team-{n}");
        let env = if n % 2 == 0 { "prod" } else { "dev" };
        c.namespaces.push(Namespace {
            name: ns.clone(),
            labels: labels(&[("team", &ns), ("env", env)]),
        });
        let mut i = 0;
        for ((app, pname, pnum), count) in apps.iter().zip(per_app) {
            for _ in 0..count {
                i += 1;
                c.pods.push(Pod {
                    namespace: ns.clone(),
                    name: format!("{app}-{i}"),
                    labels: labels(&[("app", app), ("pod-template-hash", &format!("h{}", i % 3))]),
                    ip: format!("10.{n}.0.{i}").parse().unwrap(),
                    ports: vec![NamedPort {
                        name: pname.to_string(),
                        protocol: Protocol::Tcp,
                        port: *pnum,
                    }],
                });
            }
            c.services.push(Service {
                namespace: ns.clone(),
                name: app.to_string(),
                cluster_ip: Some(format!("10.96.{n}.{}", i).parse().unwrap()),
                other_cluster_ips: Vec::new(),
                selector: Some(labels(&[("app", app)])),
                ports: vec![ServicePort {
                    protocol: Protocol::Tcp,
                    port: *pnum,
                    target: TargetPort::Name(pname.to_string()),
                }],
            });
        }
        policies.push(np(&ns, "default-deny", serde_json::json!({"podSelector": {}})));
        policies.push(np(&ns, "web", serde_json::json!({"podSelector": {"matchLabels": {"app": "web"}},
            "ingress": [{"from": [{"namespaceSelector": {}}, {"ipBlock": {"cidr": "0.0.0.0/0", "except": ["10.0.0.0/8"]}}], "ports": [{"port": "http"}]}]})));
        policies.push(np(&ns, "api", serde_json::json!({"podSelector": {"matchLabels": {"app": "api"}},
            "ingress": [{"from": [{"podSelector": {"matchLabels": {"app": "web"}}}, {"namespaceSelector": {"matchLabels": {"env": "prod"}}, "podSelector": {"matchLabels": {"app": "web"}}}], "ports": [{"port": 8080}]}]})));
        policies.push(np(&ns, "db", serde_json::json!({"podSelector": {"matchLabels": {"app": "db"}}, "policyTypes": ["Ingress", "Egress"],
            "ingress": [{"from": [{"podSelector": {"matchLabels": {"app": "api"}}}], "ports": [{"port": 5432}]}],
            "egress": [{"to": [{"podSelector": {"matchLabels": {"app": "cache"}}}], "ports": [{"port": "redis"}]},
                       {"to": [{"ipBlock": {"cidr": "0.0.0.0/0", "except": ["10.0.0.0/8"]}}], "ports": [{"port": 443}]}]})));
    }
    (c, policies)
}

/// Upstream's scheme: one rule per (policy rule, peer pod IP or CIDR, port), deduplicated; as a set
/// so that the rule calls a change costs there can be counted too.
fn upstream_rules(c: &Cluster, policies: &[Policy]) -> BTreeSet<(String, String, String, usize)> {
    let mut out = BTreeSet::new();
    for p in policies {
        let ingress = p
            .ingress
            .iter()
            .enumerate()
            .filter(|_| p.isolates_ingress)
            .map(|(i, r)| (format!("in{i}"), r));
        let egress = p
            .egress
            .iter()
            .enumerate()
            .filter(|_| p.isolates_egress)
            .map(|(i, r)| (format!("eg{i}"), r));
        for (ri, r) in ingress.chain(egress) {
            let mut peers = Vec::new();
            if r.peers.is_empty() {
                peers.push("any".to_string());
            }
            for peer in &r.peers {
                match peer {
                    Peer::Pods { namespaces, pods } => peers.extend(
                        c.pods
                            .iter()
                            .filter(|x| {
                                namespaces.matches(&x.namespace, &c.namespace_labels(&x.namespace))
                                    && pods.matches(&x.labels)
                            })
                            .map(|x| x.ip.to_string()),
                    ),
                    Peer::IpBlock { cidr, except } => {
                        peers.extend(cidr.subtract(except).iter().map(|c| c.to_string()))
                    }
                }
            }
            for peer in peers {
                for port in 0..r.ports.len().max(1) {
                    out.insert((p.key().to_string(), ri.clone(), peer.clone(), port));
                }
            }
        }
    }
    out
}

fn describe(plan: &Plan) -> String {
    format!(
        "{} calls (AG creates {}, address adds {}, address removes {}, SG creates {}, bulk rule creates {} carrying {} rules, default-rule deletes {}, port updates {}, rule deletes {}, SG deletes {})",
        plan.api_calls(),
        plan.create_address_groups.len(),
        plan.add_addresses.len(),
        plan.remove_addresses.len(),
        plan.create_security_groups.len(),
        plan.add_rules.len(),
        plan.rules_created(),
        plan.delete_default_rules.len(),
        plan.port_updates.len(),
        plan.delete_rules.len(),
        plan.delete_security_groups.len()
    )
}

#[test]
fn a_hundred_pods_and_twenty_policies_need_rules_bounded_by_selectors_not_pods() {
    let (mut c, policies) = hundred_pods();
    assert_eq!((c.pods.len(), policies.len()), (100, 20));
    let opts = CompileOptions {
        service_cidrs: vec!["10.96.0.0/12".parse().unwrap()],
        ..CompileOptions::default()
    };
    let d = DiffOptions::default();
    let compiled = compile(&c, &policies, &opts).unwrap();
    assert!(compiled.rejected.is_empty());
    // db pods may not talk to other db pods, so they can't use their own Service (hairpin).
    assert!(
        compiled
            .narrowings
            .iter()
            .all(|n| matches!(n, Narrowing::HairpinBlocked { .. })),
        "{:?}",
        compiled.narrowings
    );
    let mut neutron = FakeNeutron::with_ports(&c);
    let initial = diff(&compiled, &neutron.state, &d);
    neutron.apply(&initial, &d);
    let upstream = upstream_rules(&c, &policies).len();
    let sgs = compiled.security_groups.len();
    let rules = compiled.rule_count();
    let kinds = |prefix: &str| {
        compiled
            .security_groups
            .iter()
            .filter(|s| s.key.starts_with(prefix))
            .count()
    };
    let variants = compiled
        .security_groups
        .iter()
        .filter(|s| s.key.starts_with("np/") && s.key.matches('/').count() > 2)
        .count();
    println!(
        "100 pods x 20 policies: {sgs} security groups ({} policy, {variants} named-port variants, {} selector groups, {} permissive), {rules} rules (upstream scheme: {upstream} rules), {} narrowings",
        kinds("np/") - variants,
        kinds("sel/"),
        kinds("allow/"),
        compiled.narrowings.len()
    );
    let upstream_before = upstream_rules(&c, &policies);
    println!("  from scratch: {}", describe(&initial));

    // One pod changes labels (api -> web): only its port changes.
    let pod = c
        .pods
        .iter_mut()
        .find(|p| p.name == "api-9" && p.namespace == "team-0")
        .unwrap();
    pod.labels.insert("app".into(), "web".into());
    pod.ports = vec![NamedPort {
        name: "http".into(),
        protocol: Protocol::Tcp,
        port: 80,
    }];
    let relabelled = compile(&c, &policies, &opts).unwrap();
    let plan = diff(&relabelled, &neutron.state, &d);
    let upstream_after = upstream_rules(&c, &policies);
    println!(
        "  one pod label change: {} (upstream scheme: {} rule calls + 1 port update)",
        describe(&plan),
        upstream_before.symmetric_difference(&upstream_after).count()
    );
    assert_eq!(plan.port_updates.len(), 1);
    assert_eq!(plan.api_calls(), 1, "{plan:#?}");
    neutron.apply(&plan, &d);

    // A new pod: its port is created with its SGs; nothing else changes.
    c.pods.push(Pod {
        namespace: "team-3".into(),
        name: "web-new".into(),
        labels: labels(&[("app", "web")]),
        ip: "10.3.0.99".parse().unwrap(),
        ports: vec![NamedPort {
            name: "http".into(),
            protocol: Protocol::Tcp,
            port: 80,
        }],
    });
    let grown = compile(&c, &policies, &opts).unwrap();
    let plan = diff(&grown, &neutron.state, &d);
    println!("  one new pod (port created with its SGs): {}", describe(&plan));
    assert_eq!(plan.api_calls(), 0, "{plan:#?}");

    // Doubling the pods leaves the rule count alone; upstream's grows with them.
    let (mut big, _) = hundred_pods();
    let extra: Vec<Pod> = big
        .pods
        .iter()
        .map(|p| {
            let IpAddr::V4(a) = p.ip else {
                unreachable!("IPv4 only")
            };
            let [o0, o1, _, o3] = a.octets();
            Pod {
                name: format!("{}-b", p.name),
                ip: std::net::Ipv4Addr::new(o0, o1, 1, o3).into(),
                ..p.clone()
            }
        })
        .collect();
    big.pods.extend(extra);
    let doubled = compile(&big, &policies, &opts).unwrap();
    println!(
        "200 pods x 20 policies: {} security groups, {} rules (upstream scheme: {} rules)",
        doubled.security_groups.len(),
        doubled.rule_count(),
        upstream_rules(&big, &policies).len()
    );
    assert_eq!(doubled.rule_count(), rules);
    assert!(rules * 5 < upstream, "{rules} vs upstream {upstream}");
}

#[test]
fn in_address_group_mode_a_label_change_costs_address_group_updates_not_rules() {
    let (mut c, policies) = hundred_pods();
    let opts = CompileOptions {
        peer_mode: PeerMode::AddressGroups,
        service_cidrs: vec!["10.96.0.0/12".parse().unwrap()],
        ..CompileOptions::default()
    };
    let d = DiffOptions::default();
    let compiled = compile(&c, &policies, &opts).unwrap();
    let mut neutron = FakeNeutron::with_ports(&c);
    let initial = diff(&compiled, &neutron.state, &d);
    neutron.apply(&initial, &d);
    println!(
        "address groups, 100 pods x 20 policies: {} security groups, {} address groups, {} rules",
        compiled.security_groups.len(),
        compiled.address_groups.len(),
        compiled.rule_count()
    );
    println!("  from scratch: {}", describe(&initial));
    let pod = c
        .pods
        .iter_mut()
        .find(|p| p.name == "api-9" && p.namespace == "team-0")
        .unwrap();
    pod.labels.insert("app".into(), "web".into());
    pod.ports = vec![NamedPort {
        name: "http".into(),
        protocol: Protocol::Tcp,
        port: 80,
    }];
    let plan = diff(&compile(&c, &policies, &opts).unwrap(), &neutron.state, &d);
    println!("  one pod label change: {}", describe(&plan));
    assert_eq!(plan.rules_created() + plan.delete_rules.len(), 0);
    assert!(plan.api_calls() <= 8, "{plan:#?}");
}
