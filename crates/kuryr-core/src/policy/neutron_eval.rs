//! Reachability as Neutron enforces a compiled state: security groups are stateful allow-lists, a
//! port's effective rules are the union of its groups' rules, and a connection needs the source
//! port's egress AND the destination port's ingress to allow it (replies then pass on conntrack).

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

use super::compile::{CompiledPolicy, DesiredSg, Direction, Remote, Rule};
use super::model::{Cluster, Endpoint, Pod, PodKey, Protocol, Service, ServicePort};
use super::{Cidr, Family};

pub struct NeutronEvaluator<'a> {
    cluster: &'a Cluster,
    compiled: &'a CompiledPolicy,
    sgs: BTreeMap<&'a str, &'a DesiredSg>,
    /// remote_group_id → fixed IPs of the ports carrying that group.
    group_ips: BTreeMap<&'a str, BTreeSet<IpAddr>>,
    address_groups: BTreeMap<&'a str, &'a BTreeSet<Cidr>>,
}

impl<'a> NeutronEvaluator<'a> {
    pub fn new(cluster: &'a Cluster, compiled: &'a CompiledPolicy) -> Self {
        let sgs = compiled
            .security_groups
            .iter()
            .map(|sg| (sg.key.as_str(), sg))
            .collect();
        let mut group_ips: BTreeMap<&str, BTreeSet<IpAddr>> = BTreeMap::new();
        for (pod, keys) in &compiled.memberships {
            if let Some(p) = cluster.pod(pod) {
                for k in keys {
                    group_ips.entry(k.as_str()).or_default().insert(p.ip);
                }
            }
        }
        let address_groups = compiled
            .address_groups
            .iter()
            .map(|ag| (ag.key.as_str(), &ag.addresses))
            .collect();
        Self {
            cluster,
            compiled,
            sgs,
            group_ips,
            address_groups,
        }
    }

    fn rule_matches(
        &self,
        r: &Rule,
        direction: Direction,
        remote_ip: IpAddr,
        protocol: Protocol,
        port: u16,
    ) -> bool {
        r.direction == direction
            && r.family == Family::of(&remote_ip)
            && r.protocol.is_none_or(|p| p == protocol)
            && r.ports.is_none_or(|(a, b)| (a..=b).contains(&port))
            && match &r.remote {
                Remote::Any => true,
                Remote::Prefix(c) => c.contains(&remote_ip),
                Remote::Group(k) => self
                    .group_ips
                    .get(k.as_str())
                    .is_some_and(|ips| ips.contains(&remote_ip)),
                Remote::AddressGroup(k) => self
                    .address_groups
                    .get(k.as_str())
                    .is_some_and(|a| a.iter().any(|c| c.contains(&remote_ip))),
            }
    }

    /// Whether `pod`'s port lets a packet through in `direction` with `remote_ip` on the far side.
    pub fn port_allows(
        &self,
        pod: &PodKey,
        direction: Direction,
        remote_ip: IpAddr,
        protocol: Protocol,
        port: u16,
    ) -> bool {
        let Some(keys) = self.compiled.memberships.get(pod) else {
            return false;
        };
        keys.iter()
            .filter_map(|k| self.sgs.get(k.as_str()))
            .flat_map(|sg| sg.rules.iter())
            .any(|r| self.rule_matches(r, direction, remote_ip, protocol, port))
    }

    fn ip(&self, ep: &Endpoint) -> Option<IpAddr> {
        super::k8s_eval::endpoint_ip(self.cluster, ep)
    }

    pub fn allows(&self, src: &Endpoint, dst: &Endpoint, protocol: Protocol, port: u16) -> bool {
        // Traffic to the pod's own address stays inside its network namespace.
        if src == dst {
            return true;
        }
        let (Some(src_ip), Some(dst_ip)) = (self.ip(src), self.ip(dst)) else {
            return false;
        };
        let egress = match src {
            Endpoint::Pod(k) => self.port_allows(k, Direction::Egress, dst_ip, protocol, port),
            Endpoint::External(_) => true,
        };
        let ingress = match dst {
            Endpoint::Pod(k) => self.port_allows(k, Direction::Ingress, src_ip, protocol, port),
            Endpoint::External(_) => true,
        };
        egress && ingress
    }

    /// `src` connects to `svc_port` of `svc` and the load balancer (Octavia's OVN provider: DNAT in
    /// OVN, client IP kept) picks `backend`. The source port's egress sees the VIP (OVN evaluates
    /// from-lport ACLs before load balancing); the backend's ingress sees the client, or the VIP
    /// for hairpin traffic. `None` when `backend` doesn't serve that port.
    pub fn allows_via_service(
        &self,
        src: &PodKey,
        svc: &Service,
        svc_port: &ServicePort,
        backend: &PodKey,
    ) -> Option<bool> {
        let backend_pod: &Pod = self.cluster.pod(backend)?;
        let vip = svc.cluster_ip?;
        let target = svc.backend_port(svc_port, backend_pod)?;
        let src_ip = self.cluster.pod(src)?.ip;
        let egress = self.port_allows(src, Direction::Egress, vip, svc_port.protocol, svc_port.port);
        let seen_source = if src == backend { vip } else { src_ip };
        let ingress = self.port_allows(
            backend,
            Direction::Ingress,
            seen_source,
            svc_port.protocol,
            target,
        );
        Some(egress && ingress)
    }
}
