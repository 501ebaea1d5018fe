//! The compiler's input: pods, namespaces, Services and NetworkPolicies reduced to what NetworkPolicy
//! semantics look at. Conversions from k8s-openapi live here so that the compiler never sees `Option`
//! soup, `IntOrString` or defaulting rules.

use std::fmt;
use std::net::IpAddr;

use k8s_openapi::api::core::v1 as corev1;
use k8s_openapi::api::networking::v1 as netv1;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::cidr::Cidr;
use super::selectors::{LabelSelector, Labels};
use super::PolicyError;

/// `namespace/name` of a pod.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PodKey {
    pub namespace: String,
    pub name: String,
}

impl PodKey {
    pub fn new(namespace: impl Into<String>, name: impl Into<String>) -> Self {
        Self {
            namespace: namespace.into(),
            name: name.into(),
        }
    }
}

impl fmt::Display for PodKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// `namespace/name` of a NetworkPolicy.
pub type PolicyKey = PodKey;

/// The L4 protocols NetworkPolicy knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Protocol {
    Tcp,
    Udp,
    Sctp,
}

impl Protocol {
    pub const ALL: [Protocol; 3] = [Protocol::Tcp, Protocol::Udp, Protocol::Sctp];

    /// Kubernetes' spelling, defaulting to TCP as the API server does.
    pub fn from_k8s(p: Option<&str>) -> Result<Self, PolicyError> {
        match p.unwrap_or("TCP") {
            "TCP" => Ok(Protocol::Tcp),
            "UDP" => Ok(Protocol::Udp),
            "SCTP" => Ok(Protocol::Sctp),
            other => Err(PolicyError::UnsupportedProtocol(other.to_owned())),
        }
    }

    /// Neutron's spelling.
    pub fn neutron(self) -> &'static str {
        match self {
            Protocol::Tcp => "tcp",
            Protocol::Udp => "udp",
            Protocol::Sctp => "sctp",
        }
    }
}

impl fmt::Display for Protocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.neutron())
    }
}

/// A named container port of a pod.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NamedPort {
    pub name: String,
    pub protocol: Protocol,
    pub port: u16,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Namespace {
    pub name: String,
    pub labels: Labels,
}

impl Namespace {
    pub fn from_k8s(ns: &corev1::Namespace) -> Self {
        Self {
            name: ns.metadata.name.clone().unwrap_or_default(),
            labels: ns.metadata.labels.clone().unwrap_or_default(),
        }
    }
}

/// A pod with its Neutron port's IP (one address; dual-stack pods are not modelled yet).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pod {
    pub namespace: String,
    pub name: String,
    pub labels: Labels,
    pub ip: IpAddr,
    pub ports: Vec<NamedPort>,
}

impl Pod {
    pub fn key(&self) -> PodKey {
        PodKey::new(&self.namespace, &self.name)
    }

    /// The number a port name resolves to on this pod for `protocol`, as kube-proxy and NetworkPolicy
    /// resolve it (first matching container port).
    pub fn resolve_port(&self, name: &str, protocol: Protocol) -> Option<u16> {
        self.ports
            .iter()
            .find(|p| p.name == name && p.protocol == protocol)
            .map(|p| p.port)
    }

    /// `ip` is the pod's Neutron port address (KuryrPort status), which is authoritative for SGs even
    /// before the kubelet reports `status.podIP`.
    pub fn from_k8s(pod: &kuryr_api::SlimPod, ip: IpAddr) -> Result<Self, PolicyError> {
        let mut ports = Vec::new();
        for c in pod.spec.iter().flat_map(|s| s.containers.iter()) {
            for p in c.ports.iter().flatten() {
                if let Some(name) = &p.name {
                    ports.push(NamedPort {
                        name: name.clone(),
                        protocol: Protocol::from_k8s(p.protocol.as_deref())?,
                        port: port_number(p.container_port)?,
                    });
                }
            }
        }
        Ok(Self {
            namespace: pod.metadata.namespace.clone().unwrap_or_default(),
            name: pod.metadata.name.clone().unwrap_or_default(),
            labels: pod.metadata.labels.clone().unwrap_or_default(),
            ip,
            ports,
        })
    }
}

fn port_number(n: i32) -> Result<u16, PolicyError> {
    u16::try_from(n)
        .ok()
        .filter(|p| *p != 0)
        .ok_or(PolicyError::InvalidPort(n))
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TargetPort {
    Number(u16),
    Name(String),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServicePort {
    pub protocol: Protocol,
    pub port: u16,
    pub target: TargetPort,
}

/// A ClusterIP Service: its VIP is the Octavia load balancer's VIP.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Service {
    pub namespace: String,
    pub name: String,
    pub cluster_ip: Option<IpAddr>,
    /// A dual-stack Service's clusterIP of the other family (its load balancer's additional VIP).
    pub other_cluster_ips: Vec<IpAddr>,
    /// `None`: a Service without selector (manual Endpoints), whose backends we don't know.
    pub selector: Option<Labels>,
    pub ports: Vec<ServicePort>,
}

impl Service {
    pub fn key(&self) -> PodKey {
        PodKey::new(&self.namespace, &self.name)
    }

    /// Every VIP of the Service: its clusterIP, then a dual-stack Service's other one.
    pub fn vips(&self) -> impl Iterator<Item = IpAddr> + '_ {
        self.cluster_ip
            .into_iter()
            .chain(self.other_cluster_ips.iter().copied())
    }

    /// Whether `pod` backs this Service (same namespace, every selector label present).
    pub fn selects(&self, pod: &Pod) -> bool {
        match &self.selector {
            Some(sel) if !sel.is_empty() => {
                pod.namespace == self.namespace && sel.iter().all(|(k, v)| pod.labels.get(k) == Some(v))
            }
            _ => false,
        }
    }

    /// The port `pod` receives this Service port's traffic on, if `pod` is a backend for it.
    pub fn backend_port(&self, port: &ServicePort, pod: &Pod) -> Option<u16> {
        if !self.selects(pod) {
            return None;
        }
        match &port.target {
            TargetPort::Number(n) => Some(*n),
            TargetPort::Name(name) => pod.resolve_port(name, port.protocol),
        }
    }

    pub fn from_k8s(svc: &corev1::Service) -> Result<Self, PolicyError> {
        let spec = svc.spec.clone().unwrap_or_default();
        let cluster_ip: Option<IpAddr> = spec.cluster_ip.as_deref().and_then(|ip| ip.parse().ok());
        let other_cluster_ips = spec
            .cluster_ips
            .iter()
            .flatten()
            .filter_map(|ip| ip.parse::<IpAddr>().ok())
            .filter(|ip| Some(*ip) != cluster_ip)
            .collect();
        let mut ports = Vec::new();
        for p in spec.ports.iter().flatten() {
            let port = port_number(p.port)?;
            let target = match &p.target_port {
                None => TargetPort::Number(port),
                Some(IntOrString::Int(n)) => TargetPort::Number(port_number(*n)?),
                Some(IntOrString::String(s)) => TargetPort::Name(s.clone()),
            };
            ports.push(ServicePort {
                protocol: Protocol::from_k8s(p.protocol.as_deref())?,
                port,
                target,
            });
        }
        Ok(Self {
            namespace: svc.metadata.namespace.clone().unwrap_or_default(),
            name: svc.metadata.name.clone().unwrap_or_default(),
            cluster_ip,
            other_cluster_ips,
            selector: spec.selector,
            ports,
        })
    }
}

/// Everything the compiler and both evaluators look at.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Cluster {
    pub namespaces: Vec<Namespace>,
    pub pods: Vec<Pod>,
    pub services: Vec<Service>,
}

impl Cluster {
    /// Labels of a namespace; an unknown namespace has none (and so matches only `{}`).
    pub fn namespace_labels(&self, name: &str) -> Labels {
        self.namespaces
            .iter()
            .find(|n| n.name == name)
            .map(|n| n.labels.clone())
            .unwrap_or_default()
    }

    pub fn pod(&self, key: &PodKey) -> Option<&Pod> {
        self.pods
            .iter()
            .find(|p| p.namespace == key.namespace && p.name == key.name)
    }

    pub fn pod_by_ip(&self, ip: &IpAddr) -> Option<&Pod> {
        self.pods.iter().find(|p| p.ip == *ip)
    }
}

/// One end of a connection: a pod, or an address outside the cluster's pods.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Endpoint {
    Pod(PodKey),
    External(IpAddr),
}

/// Which namespaces a pod peer may live in.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum NamespaceMatch {
    /// The policy's own namespace (a peer with `podSelector` only).
    Exact(String),
    /// Namespaces whose labels match (`{}`: all namespaces).
    Selector(LabelSelector),
}

impl NamespaceMatch {
    pub fn matches(&self, namespace: &str, labels: &Labels) -> bool {
        match self {
            NamespaceMatch::Exact(n) => n == namespace,
            NamespaceMatch::Selector(s) => s.matches(labels),
        }
    }
}

impl fmt::Display for NamespaceMatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NamespaceMatch::Exact(n) => write!(f, "ns={n}"),
            NamespaceMatch::Selector(s) => write!(f, "nssel={s}"),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Peer {
    Pods {
        namespaces: NamespaceMatch,
        pods: LabelSelector,
    },
    IpBlock {
        cidr: Cidr,
        except: Vec<Cidr>,
    },
}

/// Which ports a rule opens.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PortSpec {
    /// Every port of the protocol (`port` absent).
    All,
    /// `port`..=`endPort` (a single port has both ends equal).
    Range(u16, u16),
    /// A container port name, resolved on the destination pod.
    Named(String),
}

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PortMatch {
    pub protocol: Protocol,
    pub port: PortSpec,
}

/// One ingress or egress rule: traffic to/from any of `peers` (none: everyone) on any of `ports`
/// (none: every port and protocol).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PolicyRule {
    pub peers: Vec<Peer>,
    pub ports: Vec<PortMatch>,
}

/// A NetworkPolicy after defaulting (`policyTypes`, protocol) and validation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Policy {
    pub namespace: String,
    pub name: String,
    pub pod_selector: LabelSelector,
    /// Ingress rules; ignored unless `isolates_ingress`.
    pub ingress: Vec<PolicyRule>,
    /// Egress rules; ignored unless `isolates_egress`.
    pub egress: Vec<PolicyRule>,
    pub isolates_ingress: bool,
    pub isolates_egress: bool,
}

impl Policy {
    pub fn key(&self) -> PolicyKey {
        PodKey::new(&self.namespace, &self.name)
    }

    /// Whether the policy applies to `pod` (same namespace, podSelector matches).
    pub fn selects(&self, pod: &Pod) -> bool {
        pod.namespace == self.namespace && self.pod_selector.matches(&pod.labels)
    }

    pub fn from_k8s(np: &netv1::NetworkPolicy) -> Result<Self, PolicyError> {
        let namespace = np.metadata.namespace.clone().unwrap_or_default();
        let name = np.metadata.name.clone().unwrap_or_default();
        let spec = np.spec.clone().unwrap_or_default();
        let pod_selector = spec
            .pod_selector
            .as_ref()
            .map(LabelSelector::from_k8s)
            .transpose()?
            .unwrap_or_default();
        let ingress = spec
            .ingress
            .iter()
            .flatten()
            .map(|r| convert_rule(&namespace, r.from.as_deref(), r.ports.as_deref()))
            .collect::<Result<Vec<_>, _>>()?;
        let egress = spec
            .egress
            .iter()
            .flatten()
            .map(|r| convert_rule(&namespace, r.to.as_deref(), r.ports.as_deref()))
            .collect::<Result<Vec<_>, _>>()?;
        // Defaulting as the API server does: Ingress always, Egress when egress rules exist.
        let (isolates_ingress, isolates_egress) = match &spec.policy_types {
            Some(types) if !types.is_empty() => {
                for t in types {
                    if t != "Ingress" && t != "Egress" {
                        return Err(PolicyError::Invalid(format!("unknown policyType {t}")));
                    }
                }
                (
                    types.iter().any(|t| t == "Ingress"),
                    types.iter().any(|t| t == "Egress"),
                )
            }
            _ => (true, !egress.is_empty()),
        };
        Ok(Self {
            namespace,
            name,
            pod_selector,
            ingress,
            egress,
            isolates_ingress,
            isolates_egress,
        })
    }
}

impl Policy {
    /// Converts a NetworkPolicy, or, when it is invalid, a stand-in that isolates the pods it means
    /// to select in the directions it declares and allows nothing — never wider than the author
    /// asked for. An unparseable podSelector isolates the whole namespace.
    pub fn from_k8s_or_fail_closed(np: &netv1::NetworkPolicy) -> (Self, Option<PolicyError>) {
        match Self::from_k8s(np) {
            Ok(p) => (p, None),
            Err(e) => {
                let spec = np.spec.clone().unwrap_or_default();
                let pod_selector = spec
                    .pod_selector
                    .as_ref()
                    .and_then(|s| LabelSelector::from_k8s(s).ok())
                    .unwrap_or_default();
                let types = spec.policy_types.unwrap_or_default();
                let declared = |t: &str| types.is_empty() || types.iter().any(|x| x == t);
                let policy = Self {
                    namespace: np.metadata.namespace.clone().unwrap_or_default(),
                    name: np.metadata.name.clone().unwrap_or_default(),
                    pod_selector,
                    ingress: Vec::new(),
                    egress: Vec::new(),
                    isolates_ingress: declared("Ingress"),
                    isolates_egress: declared("Egress"),
                };
                (policy, Some(e))
            }
        }
    }
}

fn convert_rule(
    namespace: &str,
    peers: Option<&[netv1::NetworkPolicyPeer]>,
    ports: Option<&[netv1::NetworkPolicyPort]>,
) -> Result<PolicyRule, PolicyError> {
    let peers = peers
        .unwrap_or_default()
        .iter()
        .map(|p| convert_peer(namespace, p))
        .collect::<Result<_, _>>()?;
    let ports = ports
        .unwrap_or_default()
        .iter()
        .map(convert_port)
        .collect::<Result<_, _>>()?;
    Ok(PolicyRule { peers, ports })
}

fn convert_peer(namespace: &str, p: &netv1::NetworkPolicyPeer) -> Result<Peer, PolicyError> {
    match (&p.ip_block, &p.namespace_selector, &p.pod_selector) {
        (Some(b), None, None) => {
            let cidr: Cidr = b.cidr.parse()?;
            let except = b
                .except
                .iter()
                .flatten()
                .map(|e| e.parse())
                .collect::<Result<Vec<Cidr>, _>>()?;
            if let Some(e) = except
                .iter()
                .find(|e| !cidr.covers(e) || e.prefix_len() == cidr.prefix_len())
            {
                return Err(PolicyError::Invalid(format!(
                    "ipBlock except {e} is not strictly inside {cidr}"
                )));
            }
            Ok(Peer::IpBlock { cidr, except })
        }
        (Some(_), _, _) => Err(PolicyError::Invalid("ipBlock combined with a selector".into())),
        (None, None, None) => Err(PolicyError::Invalid("empty peer".into())),
        (None, ns, pods) => Ok(Peer::Pods {
            namespaces: match ns {
                Some(s) => NamespaceMatch::Selector(LabelSelector::from_k8s(s)?),
                None => NamespaceMatch::Exact(namespace.to_owned()),
            },
            pods: pods
                .as_ref()
                .map(LabelSelector::from_k8s)
                .transpose()?
                .unwrap_or_default(),
        }),
    }
}

fn convert_port(p: &netv1::NetworkPolicyPort) -> Result<PortMatch, PolicyError> {
    let protocol = Protocol::from_k8s(p.protocol.as_deref())?;
    let port = match (&p.port, p.end_port) {
        (None, None) => PortSpec::All,
        (None, Some(_)) => return Err(PolicyError::Invalid("endPort without port".into())),
        (Some(IntOrString::String(_)), Some(_)) => {
            return Err(PolicyError::Invalid("endPort with a named port".into()))
        }
        (Some(IntOrString::String(name)), None) => PortSpec::Named(name.clone()),
        (Some(IntOrString::Int(n)), end) => {
            let start = port_number(*n)?;
            let end = end.map(port_number).transpose()?.unwrap_or(start);
            if end < start {
                return Err(PolicyError::Invalid(format!("endPort {end} below port {start}")));
            }
            PortSpec::Range(start, end)
        }
    };
    Ok(PortMatch { protocol, port })
}

/// A destination or source port set as Kubernetes resolves it: does `pm` cover (`protocol`, `port`)
/// on a pod whose named ports are `named` (`None` for non-pod addresses, where names never resolve)?
pub fn port_matches(pm: &PortMatch, protocol: Protocol, port: u16, named: Option<&Pod>) -> bool {
    if pm.protocol != protocol {
        return false;
    }
    match &pm.port {
        PortSpec::All => true,
        PortSpec::Range(a, b) => (*a..=*b).contains(&port),
        PortSpec::Named(name) => named.and_then(|p| p.resolve_port(name, protocol)) == Some(port),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn np(spec: serde_json::Value) -> netv1::NetworkPolicy {
        serde_json::from_value(serde_json::json!({"metadata": {"namespace": "x", "name": "p"}, "spec": spec}))
            .unwrap()
    }

    #[test]
    fn policy_types_default_to_ingress_plus_egress_when_egress_rules_exist() {
        let p = Policy::from_k8s(&np(serde_json::json!({"podSelector": {}}))).unwrap();
        assert!(p.isolates_ingress && !p.isolates_egress);
        let p = Policy::from_k8s(&np(serde_json::json!({"podSelector": {}, "egress": [{}]}))).unwrap();
        assert!(p.isolates_ingress && p.isolates_egress);
        let p = Policy::from_k8s(&np(
            serde_json::json!({"podSelector": {}, "policyTypes": ["Egress"]}),
        ))
        .unwrap();
        assert!(!p.isolates_ingress && p.isolates_egress);
    }

    #[test]
    fn a_peer_with_only_a_pod_selector_means_the_policy_namespace() {
        let p = Policy::from_k8s(&np(serde_json::json!({"podSelector": {},
            "ingress": [{"from": [{"podSelector": {"matchLabels": {"a": "b"}}}], "ports": [{"port": 80, "endPort": 90}, {"port": "http"}]}]})))
        .unwrap();
        assert_eq!(
            p.ingress[0].peers[0],
            Peer::Pods {
                namespaces: NamespaceMatch::Exact("x".into()),
                pods: LabelSelector::from_labels([("a", "b")])
            }
        );
        assert_eq!(
            p.ingress[0].ports[0],
            PortMatch {
                protocol: Protocol::Tcp,
                port: PortSpec::Range(80, 90)
            }
        );
        assert_eq!(p.ingress[0].ports[1].port, PortSpec::Named("http".into()));
    }

    #[test]
    fn invalid_policies_are_rejected_with_a_reason() {
        let bad = [
            serde_json::json!({"podSelector": {}, "ingress": [{"ports": [{"port": "http", "endPort": 90}]}]}),
            serde_json::json!({"podSelector": {}, "ingress": [{"ports": [{"port": 90, "endPort": 80}]}]}),
            serde_json::json!({"podSelector": {}, "ingress": [{"ports": [{"port": 80, "protocol": "ICMP"}]}]}),
            serde_json::json!({"podSelector": {}, "ingress": [{"ports": [{"port": 70000}]}]}),
            serde_json::json!({"podSelector": {}, "ingress": [{"from": [{}]}]}),
            serde_json::json!({"podSelector": {}, "ingress": [{"from": [{"ipBlock": {"cidr": "10.0.0.0/8"}, "podSelector": {}}]}]}),
            serde_json::json!({"podSelector": {}, "ingress": [{"from": [{"ipBlock": {"cidr": "10.0.0.0/8", "except": ["11.0.0.0/16"]}}]}]}),
            serde_json::json!({"podSelector": {}, "ingress": [{"from": [{"ipBlock": {"cidr": "10.0.0.1/8"}}]}]}),
            serde_json::json!({"podSelector": {}, "policyTypes": ["Sideways"]}),
        ];
        for spec in bad {
            assert!(Policy::from_k8s(&np(spec.clone())).is_err(), "{spec}");
        }
    }

    #[test]
    fn an_invalid_policy_fails_closed_isolating_its_pods() {
        let (p, err) = Policy::from_k8s_or_fail_closed(&np(serde_json::json!({
            "podSelector": {"matchLabels": {"app": "db"}}, "policyTypes": ["Egress"],
            "egress": [{"ports": [{"port": "http", "endPort": 90}]}]})));
        assert!(err.is_some());
        assert!(p.isolates_egress && !p.isolates_ingress && p.egress.is_empty());
        assert_eq!(p.pod_selector, LabelSelector::from_labels([("app", "db")]));
    }
}
