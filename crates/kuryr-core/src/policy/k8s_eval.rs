//! The NetworkPolicy spec, evaluated directly: the reference the compiled security groups are checked
//! against. Deliberately naive (no indexes, no caching) so it is easy to read against the spec.

use std::net::IpAddr;

use super::model::{
    port_matches, Cluster, Endpoint, Peer, Pod, PodKey, Policy, PolicyRule, Protocol, Service, ServicePort,
};
use super::{Cidr, CompileOptions};

/// "May `src` open a connection to `dst` on `protocol`/`port`?" by Kubernetes semantics.
pub struct K8sEvaluator<'a> {
    cluster: &'a Cluster,
    policies: &'a [Policy],
    /// `Some(pod CIDRs)` when namespace isolation is on.
    namespace_isolation: Option<&'a [Cidr]>,
    node_cidrs: &'a [Cidr],
}

/// Whether `peer` matches endpoint `ep` (pod peers match pods only; ipBlocks match any address).
pub(crate) fn peer_matches(cluster: &Cluster, peer: &Peer, ep: &Endpoint) -> bool {
    match peer {
        Peer::Pods { namespaces, pods } => match ep {
            Endpoint::Pod(key) => cluster.pod(key).is_some_and(|p| {
                namespaces.matches(&p.namespace, &cluster.namespace_labels(&p.namespace))
                    && pods.matches(&p.labels)
            }),
            Endpoint::External(_) => false,
        },
        Peer::IpBlock { cidr, except } => endpoint_ip(cluster, ep)
            .is_some_and(|ip| cidr.contains(&ip) && !except.iter().any(|e| e.contains(&ip))),
    }
}

/// Whether one rule allows traffic with `peer` on `protocol`/`port`; named ports resolve on
/// `port_owner`, the destination pod.
pub(crate) fn rule_matches(
    cluster: &Cluster,
    rule: &PolicyRule,
    peer: &Endpoint,
    protocol: Protocol,
    port: u16,
    port_owner: Option<&Pod>,
) -> bool {
    (rule.peers.is_empty() || rule.peers.iter().any(|p| peer_matches(cluster, p, peer)))
        && (rule.ports.is_empty()
            || rule
                .ports
                .iter()
                .any(|pm| port_matches(pm, protocol, port, port_owner)))
}

pub(crate) fn endpoint_ip(cluster: &Cluster, ep: &Endpoint) -> Option<IpAddr> {
    match ep {
        Endpoint::Pod(k) => cluster.pod(k).map(|p| p.ip),
        Endpoint::External(ip) => Some(*ip),
    }
}

impl<'a> K8sEvaluator<'a> {
    pub fn new(cluster: &'a Cluster, policies: &'a [Policy], opts: &'a CompileOptions) -> Self {
        Self {
            cluster,
            policies,
            namespace_isolation: opts.namespace_isolation.then_some(opts.pod_cidrs.as_slice()),
            node_cidrs: &opts.node_cidrs,
        }
    }

    pub fn allows(&self, src: &Endpoint, dst: &Endpoint, protocol: Protocol, port: u16) -> bool {
        // A pod can't block traffic to itself: it never leaves the pod.
        if src == dst {
            return true;
        }
        self.egress_allows(src, dst, protocol, port) && self.ingress_allows(src, dst, protocol, port)
    }

    fn egress_allows(&self, src: &Endpoint, dst: &Endpoint, protocol: Protocol, port: u16) -> bool {
        let Some(src_pod) = self.pod_of(src) else {
            return true;
        };
        let dst_pod = self.pod_of(dst);
        let mut isolating = self
            .policies
            .iter()
            .filter(|p| p.isolates_egress && p.selects(src_pod))
            .peekable();
        if isolating.peek().is_none() {
            return true;
        }
        isolating.any(|p| {
            p.egress
                .iter()
                .any(|r| rule_matches(self.cluster, r, dst, protocol, port, dst_pod))
        })
    }

    fn ingress_allows(&self, src: &Endpoint, dst: &Endpoint, protocol: Protocol, port: u16) -> bool {
        let Some(dst_pod) = self.pod_of(dst) else {
            return true;
        };
        // "Pods cannot block access from their resident node" (NetworkPolicy docs); we extend it
        // to every worker node, as upstream did.
        if let Endpoint::External(ip) = src {
            if self.node_cidrs.iter().any(|c| c.contains(ip)) {
                return true;
            }
        }
        let mut isolating = self
            .policies
            .iter()
            .filter(|p| p.isolates_ingress && p.selects(dst_pod))
            .peekable();
        if isolating.peek().is_none() {
            return match (self.namespace_isolation, src) {
                (None, _) => true,
                (Some(_), Endpoint::Pod(k)) => k.namespace == dst_pod.namespace,
                (Some(pod_cidrs), Endpoint::External(ip)) => !pod_cidrs.iter().any(|c| c.contains(ip)),
            };
        }
        isolating.any(|p| {
            p.ingress
                .iter()
                .any(|r| rule_matches(self.cluster, r, src, protocol, port, Some(dst_pod)))
        })
    }

    /// `src` connects to a Service port and the load balancer picks `backend`: `None` when `backend`
    /// doesn't serve that port. Kubernetes checks policy after DNAT, i.e. against the backend pod and
    /// its target port; a pod reaching itself through its own Service (hairpin) is always allowed.
    pub fn allows_via_service(
        &self,
        src: &PodKey,
        svc: &Service,
        svc_port: &ServicePort,
        backend: &PodKey,
    ) -> Option<bool> {
        let backend_pod = self.cluster.pod(backend)?;
        svc.cluster_ip?;
        let target = svc.backend_port(svc_port, backend_pod)?;
        Some(self.allows(
            &Endpoint::Pod(src.clone()),
            &Endpoint::Pod(backend.clone()),
            svc_port.protocol,
            target,
        ))
    }

    fn pod_of(&self, ep: &Endpoint) -> Option<&'a Pod> {
        match ep {
            Endpoint::Pod(k) => self.cluster.pod(k),
            Endpoint::External(_) => None,
        }
    }
}
