//! Shared pieces of the policy fuzz targets: the reachability check both of them end with.

use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use kuryr_core::policy::{
    Cidr, Cluster, CompileOptions, CompiledPolicy, Endpoint, Family, K8sEvaluator, NeutronEvaluator, Peer,
    Policy, PortSpec, Protocol, Remote, TargetPort,
};

/// Addresses around a prefix's edges: first, last, and the neighbours just outside it.
pub fn edges(c: &Cidr, out: &mut Vec<IpAddr>) {
    let (w, first): (u32, u128) = match c.addr() {
        IpAddr::V4(a) => (32, u128::from(u32::from(a))),
        IpAddr::V6(a) => (128, u128::from(a)),
    };
    let host_bits = w - u32::from(c.prefix_len());
    let size_minus_one = if host_bits >= 128 {
        u128::MAX
    } else {
        (1u128 << host_bits) - 1
    };
    let max = if w == 32 { u128::from(u32::MAX) } else { u128::MAX };
    let last = first.saturating_add(size_minus_one).min(max);
    let mut push = |v: u128| {
        out.push(if w == 32 {
            Ipv4Addr::from(u32::try_from(v).unwrap()).into()
        } else {
            Ipv6Addr::from(v).into()
        })
    };
    push(first);
    push(last);
    if first > 0 {
        push(first - 1);
    }
    if last < max {
        push(last + 1);
    }
}

/// Probes: every port the policies, pods and Services mention and the ones just outside each range,
/// plus `extra`; at most 16, spread over what was collected.
pub fn probes(cluster: &Cluster, policies: &[Policy], extra: &[(Protocol, u16)]) -> Vec<(Protocol, u16)> {
    let mut ports = BTreeSet::new();
    let mut add = |p: Protocol, n: u16| {
        if n > 0 {
            ports.insert((p, n));
        }
    };
    for pol in policies {
        for r in pol.ingress.iter().chain(&pol.egress) {
            for pm in &r.ports {
                if let PortSpec::Range(a, b) = pm.port {
                    for n in [a.saturating_sub(1), a, b, b.saturating_add(1)] {
                        add(pm.protocol, n);
                    }
                }
            }
        }
    }
    for p in &cluster.pods {
        for np in &p.ports {
            add(np.protocol, np.port);
        }
    }
    for s in &cluster.services {
        for sp in &s.ports {
            add(sp.protocol, sp.port);
            if let TargetPort::Number(n) = sp.target {
                add(sp.protocol, n);
            }
        }
    }
    for &(p, n) in extra {
        add(p, n);
    }
    add(Protocol::Tcp, 80);
    let out: Vec<(Protocol, u16)> = ports.into_iter().collect();
    let step = out.len().div_ceil(16).max(1);
    out.into_iter().step_by(step).collect()
}

/// Outside addresses to probe: `extra`, the edges of every ipBlock and except (at most 8), an address
/// outside every range and a worker node; never a pod's address, nor a Service VIP: a VIP is no
/// endpoint (traffic to it is checked per backend through `allows_via_service`), and the compiler
/// admits the VIP as a source only because hairpin traffic alone carries it (`Builder::ingress`).
pub fn externals(cluster: &Cluster, policies: &[Policy], extra: &[IpAddr]) -> Vec<IpAddr> {
    let mut ips: BTreeSet<IpAddr> = extra.iter().copied().collect();
    let mut edge = Vec::new();
    for pol in policies {
        for r in pol.ingress.iter().chain(&pol.egress) {
            for p in &r.peers {
                if let Peer::IpBlock { cidr, except } = p {
                    edges(cidr, &mut edge);
                    for e in except {
                        edges(e, &mut edge);
                    }
                }
            }
        }
    }
    ips.extend(edge.into_iter().take(8));
    ips.insert(Ipv4Addr::new(198, 51, 100, 10).into());
    ips.insert(Ipv4Addr::new(100, 64, 0, 5).into());
    ips.retain(|ip| {
        cluster.pod_by_ip(ip).is_none() && !cluster.services.iter().any(|s| s.cluster_ip == Some(*ip))
    });
    ips.into_iter().collect()
}

/// Checks the compiled state against the NetworkPolicy spec on every (source, destination, probe):
/// - Neutron never allows what Kubernetes denies;
/// - unless the compiler reported a rejection (or a narrowing, for Service traffic), it allows exactly
///   what Kubernetes allows — except destinations in the Service range that are no VIP (egress to
///   "anywhere" leaves that range out) and addresses of a family the cluster does not run;
/// - the compiled state is well formed: every group a port carries or a rule names exists, port
///   ranges are ordered, Neutron names are unique and fit Neutron's 255 characters.
pub fn check_reachability(
    cluster: &Cluster,
    policies: &[Policy],
    opts: &CompileOptions,
    compiled: &CompiledPolicy,
    externals: &[IpAddr],
    probes: &[(Protocol, u16)],
) {
    let sg_keys: BTreeSet<&str> = compiled.security_groups.iter().map(|s| s.key.as_str()).collect();
    let ag_keys: BTreeSet<&str> = compiled.address_groups.iter().map(|a| a.key.as_str()).collect();
    let mut names = BTreeSet::new();
    for sg in &compiled.security_groups {
        assert!(names.insert(sg.name.as_str()), "two groups named {}", sg.name);
        assert!(sg.name.len() <= 255, "name too long for Neutron: {}", sg.name);
        for r in &sg.rules {
            if let Some((a, b)) = r.ports {
                assert!(a <= b, "{r:?}");
            }
            match &r.remote {
                Remote::Group(k) => assert!(sg_keys.contains(k.as_str()), "rule names missing group {k}"),
                Remote::AddressGroup(k) => {
                    assert!(
                        ag_keys.contains(k.as_str()),
                        "rule names missing address group {k}"
                    )
                }
                Remote::Prefix(c) => assert_eq!(c.family(), r.family, "{r:?}"),
                Remote::Any => {}
            }
        }
    }
    let mut ag_names = BTreeSet::new();
    for ag in &compiled.address_groups {
        assert!(
            ag_names.insert(ag.name.as_str()),
            "two address groups named {}",
            ag.name
        );
        assert!(ag.name.len() <= 255, "name too long for Neutron: {}", ag.name);
    }
    for (pod, keys) in &compiled.memberships {
        for k in keys {
            assert!(sg_keys.contains(k.as_str()), "{pod} carries missing group {k}");
        }
    }

    let k8s = K8sEvaluator::new(cluster, policies, opts);
    let neutron = NeutronEvaluator::new(cluster, compiled);
    let exact = compiled.rejected.is_empty();
    let mut eps: Vec<Endpoint> = cluster.pods.iter().map(|p| Endpoint::Pod(p.key())).collect();
    eps.extend(externals.iter().map(|ip| Endpoint::External(*ip)));
    for src in &eps {
        for dst in &eps {
            if matches!((src, dst), (Endpoint::External(_), Endpoint::External(_))) {
                continue;
            }
            let in_service_range = match dst {
                Endpoint::External(ip) => opts.service_cidrs.iter().any(|c| c.contains(ip)),
                Endpoint::Pod(_) => false,
            };
            let family_off = [src, dst].iter().any(|e| match e {
                Endpoint::External(ip) => !opts.families.contains(&Family::of(ip)),
                Endpoint::Pod(_) => false,
            });
            for &(proto, port) in probes {
                let want = k8s.allows(src, dst, proto, port);
                let got = neutron.allows(src, dst, proto, port);
                assert!(
                    !got || want,
                    "Neutron allows more than the policies: {src:?} -> {dst:?} {proto}/{port}\n{}",
                    context(cluster, policies, compiled, [src, dst])
                );
                if exact && !in_service_range && !family_off {
                    assert_eq!(
                        got,
                        want,
                        "{src:?} -> {dst:?} {proto}/{port}\n{}",
                        context(cluster, policies, compiled, [src, dst])
                    );
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
                    let (Some(want), Some(got)) = (want, got) else {
                        continue;
                    };
                    assert!(
                        !got || want,
                        "wider via Service {}: {} -> {}",
                        svc.key(),
                        src.key(),
                        b.key()
                    );
                    let narrowed = compiled.narrowings.iter().any(|n| {
                        let (policy, service, port) = n.subject();
                        *service == svc.key()
                            && port == sp.port
                            && policies.iter().any(|p| p.key() == *policy && p.selects(src))
                    });
                    if exact && !narrowed {
                        assert_eq!(
                            got,
                            want,
                            "via Service {}: {} -> {}",
                            svc.key(),
                            src.key(),
                            b.key()
                        );
                    }
                }
            }
        }
    }
}

/// What a failure report needs: the pods involved with their labels and IPs, the policies, and the
/// rules of every group those pods carry.
fn context(cluster: &Cluster, policies: &[Policy], compiled: &CompiledPolicy, eps: [&Endpoint; 2]) -> String {
    let mut out = String::new();
    for ep in eps {
        let Endpoint::Pod(key) = ep else { continue };
        let pod = cluster.pod(key);
        out += &format!("pod {key}: {pod:?}\n");
        for k in compiled.memberships.get(key).into_iter().flatten() {
            if let Some(sg) = compiled.security_groups.iter().find(|s| &s.key == k) {
                out += &format!("  group {k}: {:?}\n", sg.rules);
            }
        }
    }
    out += &format!("namespaces: {:?}\n", cluster.namespaces);
    for p in policies {
        out += &format!("policy {p:?}\n");
    }
    out += &format!(
        "rejected: {:?}\nnarrowings: {:?}",
        compiled.rejected, compiled.narrowings
    );
    out
}
