//! Octavia object names, as upstream built them (`ns/name`, `ns/name:TCP:80`), so operators recognise them
//! in `openstack loadbalancer list`. The ovn provider refuses unnamed pools: every pool gets one.

use kuryr_api::loadbalancer::LbProtocol;

pub fn protocol(p: LbProtocol) -> &'static str {
    match p {
        LbProtocol::Tcp => "TCP",
        LbProtocol::Udp => "UDP",
        LbProtocol::Sctp => "SCTP",
    }
}

pub fn loadbalancer(namespace: &str, name: &str) -> String {
    format!("{namespace}/{name}")
}

/// Listener and its default pool share the name.
pub fn listener(namespace: &str, name: &str, p: LbProtocol, port: u32) -> String {
    format!("{namespace}/{name}:{}:{port}", protocol(p))
}

/// `ns/pod:port` for a pod backend, `ip:port` for a manual endpoint.
pub fn member(namespace: Option<&str>, pod: Option<&str>, ip: &str, port: u32) -> String {
    match (namespace, pod) {
        (Some(ns), Some(pod)) => format!("{ns}/{pod}:{port}"),
        _ => format!("{ip}:{port}"),
    }
}
