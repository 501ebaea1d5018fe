//! A Service's backends in the KuryrLoadBalancer's EndpointSlice shape, from its EndpointSlices
//! (discovery.k8s.io/v1, however many the endpointslice controller split them into). Readiness, serving and
//! terminating are kept per endpoint (upstream's conversion dropped not-ready addresses and gave every slice
//! every address); [`ready_members`] then picks what becomes an Octavia member.

use std::collections::BTreeMap;

use kuryr_api::loadbalancer::{
    LbEndpoint, LbEndpointConditions, LbEndpointPort, LbEndpointSlice, LbPort, LbProtocol,
};
use kuryr_api::SlimEndpointSlice;

use super::model::MemberKey;
use super::names;

pub fn protocol(p: Option<&str>) -> Option<LbProtocol> {
    match p.unwrap_or("TCP") {
        "TCP" => Some(LbProtocol::Tcp),
        "UDP" => Some(LbProtocol::Udp),
        "SCTP" => Some(LbProtocol::Sctp),
        _ => None,
    }
}

/// EndpointSlices v1 of one Service. FQDN slices carry no IPs and are left out.
pub fn from_slices<'a>(
    slices: impl IntoIterator<Item = &'a SlimEndpointSlice>,
    publish_not_ready: bool,
) -> Vec<LbEndpointSlice> {
    let mut slices: Vec<&SlimEndpointSlice> =
        slices.into_iter().filter(|s| s.address_type != "FQDN").collect();
    // Stable order, so an unchanged set of slices gives an unchanged spec.
    slices.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    slices
        .into_iter()
        .map(|s| LbEndpointSlice {
            endpoints: s
                .endpoints
                .iter()
                .map(|e| {
                    let c = e.conditions.as_ref();
                    // `ready` absent means ready (API semantics); terminating endpoints report ready=false.
                    let ready = publish_not_ready || c.and_then(|c| c.ready).unwrap_or(true);
                    LbEndpoint {
                        addresses: e.addresses.clone(),
                        conditions: Some(LbEndpointConditions {
                            ready: Some(ready),
                            serving: c.and_then(|c| c.serving),
                            terminating: c.and_then(|c| c.terminating),
                        }),
                        hostname: e.hostname.clone(),
                        target_ref: e.target_ref.clone(),
                        topology: None,
                        node_name: e.node_name.clone(),
                    }
                })
                .collect(),
            ports: s
                .ports
                .iter()
                .map(|p| LbEndpointPort {
                    name: p.name.clone().filter(|n| !n.is_empty()),
                    port: p.port,
                    protocol: protocol(p.protocol.as_deref()),
                })
                .collect(),
            address_type: Some(s.address_type.clone()),
        })
        .collect()
}

/// The members of the pool serving `port`: every ready address of every slice that has the Service port's
/// endpoint port (matched by name and protocol, as the endpoints controllers name them after the Service
/// port), at that endpoint port's number. Not-ready endpoints were marked ready already when the Service
/// publishes them. When no endpoint is ready, the ones still serving while they terminate are the members,
/// as kube-proxy does it: a rolling update that takes the last ready pod away drains its connections
/// instead of dropping them.
pub fn ready_members(port: &LbPort, slices: &[LbEndpointSlice]) -> BTreeMap<MemberKey, String> {
    let ready = members_where(port, slices, |c| c.and_then(|c| c.ready).unwrap_or(true));
    if !ready.is_empty() {
        return ready;
    }
    members_where(port, slices, |c| {
        c.is_some_and(|c| c.serving == Some(true) && c.terminating == Some(true))
    })
}

fn members_where(
    port: &LbPort,
    slices: &[LbEndpointSlice],
    keep: impl Fn(Option<&LbEndpointConditions>) -> bool,
) -> BTreeMap<MemberKey, String> {
    let want_name = port.name.as_deref().filter(|n| !n.is_empty());
    let mut out = BTreeMap::new();
    for slice in slices {
        let Some(target) = slice.ports.iter().find(|p| {
            p.name.as_deref().filter(|n| !n.is_empty()) == want_name
                && p.protocol.unwrap_or_default() == port.protocol
        }) else {
            continue;
        };
        let Some(number) = target.port.and_then(|n| u32::try_from(n).ok()).filter(|n| *n > 0) else {
            continue;
        };
        for e in slice.endpoints.iter().filter(|e| keep(e.conditions.as_ref())) {
            let tr = e.target_ref.as_ref();
            let pod = tr
                .filter(|t| t.kind.as_deref().is_none_or(|k| k == "Pod"))
                .and_then(|t| t.name.as_deref());
            let ns = tr.and_then(|t| t.namespace.as_deref());
            for ip in &e.addresses {
                out.insert((ip.clone(), number), names::member(ns, pod, ip, number));
            }
        }
    }
    out
}
