//! From watch caches to the compiler's input. A pod counts once its KuryrPort (same namespace and name)
//! names a port with an address: that address is what SGs see, and that port is what gets the SG list.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::Arc;

use kuryr_api::{KuryrPort, Namespace, NetworkPolicy, ResourceExt, Service, SlimPod};
use kuryr_core::policy::{self, Cluster, PodKey, Policy, PolicyError, PolicyKey};

/// Everything one sync compiles.
#[derive(Clone, Debug, Default)]
pub struct Inputs {
    pub cluster: Cluster,
    /// Invalid ones included, as their fail-closed stand-ins.
    pub policies: Vec<Policy>,
    /// Why a policy was replaced by its fail-closed stand-in.
    pub invalid: BTreeMap<PolicyKey, PolicyError>,
    /// Pod → its Neutron port id.
    pub ports: BTreeMap<PodKey, String>,
}

/// The caches' contents, unfiltered.
pub struct Objects<'a> {
    pub namespaces: &'a [Arc<Namespace>],
    pub pods: &'a [Arc<SlimPod>],
    pub kuryrports: &'a [Arc<KuryrPort>],
    pub policies: &'a [Arc<NetworkPolicy>],
    pub services: &'a [Arc<Service>],
}

/// Builds the model from the objects of the namespaces in `namespaces` (already scope-filtered).
/// `with_services`: model ClusterIP Services (needs the Service CIDRs configured).
pub fn build(o: &Objects<'_>, with_services: bool) -> Inputs {
    let mut inputs = Inputs::default();
    let ns_names: std::collections::BTreeSet<String> = o.namespaces.iter().map(|n| n.name_any()).collect();
    let ours = |ns: Option<String>| ns.is_some_and(|n| ns_names.contains(&n));
    let mut namespaces: Vec<policy::Namespace> = o
        .namespaces
        .iter()
        .map(|n| policy::Namespace::from_k8s(n))
        .collect();
    namespaces.sort_by(|a, b| a.name.cmp(&b.name));
    inputs.cluster.namespaces = namespaces;

    let ports: BTreeMap<(String, String), (String, IpAddr)> = o
        .kuryrports
        .iter()
        .filter(|kp| ours(kp.namespace()))
        // Being deleted: its port is going back to a pool or away; groups set on it now would stay on
        // a pool port (and keep a gone policy's group in use).
        .filter(|kp| kp.metadata.deletion_timestamp.is_none())
        .filter_map(|kp| {
            let st = kp.status.as_ref()?;
            let (_, vif) = st.default_vif()?;
            let ip: IpAddr = vif.ips.first()?.address.parse().ok()?;
            Some(((kp.namespace()?, kp.name_any()), (vif.port_id.clone(), ip)))
        })
        .collect();
    for pod in o.pods.iter().filter(|p| ours(p.namespace())) {
        let key = (pod.namespace().unwrap_or_default(), pod.name_any());
        let Some((port_id, ip)) = ports.get(&key) else {
            continue;
        };
        match policy::Pod::from_k8s(pod, *ip) {
            Ok(p) => {
                inputs.ports.insert(p.key(), port_id.clone());
                inputs.cluster.pods.push(p);
            }
            // Only a bad container port gets here (the API server validates them): model the pod
            // without named ports rather than drop it (a dropped pod would keep stale SGs).
            Err(e) => {
                tracing::warn!(pod = %PodKey::new(&key.0, &key.1), error = %e, "pod ports not understood");
                let mut bare = (**pod).clone();
                if let Some(spec) = bare.spec.as_mut() {
                    spec.containers.iter_mut().for_each(|c| c.ports = None);
                }
                if let Ok(p) = policy::Pod::from_k8s(&bare, *ip) {
                    inputs.ports.insert(p.key(), port_id.clone());
                    inputs.cluster.pods.push(p);
                }
            }
        }
    }
    inputs.cluster.pods.sort_by_key(|p| p.key());

    if with_services {
        for svc in o.services.iter().filter(|s| ours(s.namespace())) {
            if let Ok(s) = policy::Service::from_k8s(svc) {
                if s.cluster_ip.is_some() {
                    inputs.cluster.services.push(s);
                }
            }
        }
        inputs.cluster.services.sort_by_key(|s| s.key());
    }

    for np in o.policies.iter().filter(|p| ours(p.namespace())) {
        let (p, err) = Policy::from_k8s_or_fail_closed(np);
        if let Some(e) = err {
            inputs.invalid.insert(p.key(), e);
        }
        inputs.policies.push(p);
    }
    inputs.policies.sort_by_key(|p| p.key());
    inputs
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj<T: serde::de::DeserializeOwned>(v: serde_json::Value) -> Arc<T> {
        Arc::new(serde_json::from_value(v).unwrap())
    }

    #[test]
    fn pods_count_once_their_kuryrport_names_a_port_and_only_in_watched_namespaces() {
        let namespaces = vec![obj::<Namespace>(
            json!({"metadata": {"name": "a", "labels": {"team": "x"}}}),
        )];
        let pods = vec![
            obj::<SlimPod>(
                json!({"metadata": {"namespace": "a", "name": "wired", "labels": {"app": "web"}},
                "spec": {"containers": [{"name": "c", "ports": [{"name": "http", "containerPort": 8080}]}]}}),
            ),
            obj::<SlimPod>(
                json!({"metadata": {"namespace": "a", "name": "unwired"}, "spec": {"containers": []}}),
            ),
            obj::<SlimPod>(
                json!({"metadata": {"namespace": "other", "name": "wired"}, "spec": {"containers": []}}),
            ),
        ];
        let kp = |ns: &str| {
            obj::<KuryrPort>(json!({"apiVersion": "openstack.org/v1", "kind": "KuryrPort",
                "metadata": {"namespace": ns, "name": "wired"},
                "spec": {"podUid": "u", "podNodeName": "n"},
                "status": {"vifs": {"eth0": {"default": true, "vif": {"type": "nested-vlan", "portId": format!("port-{ns}"),
                    "networkId": "net", "mac": "fa:16:3e:00:00:01", "ips": [{"address": "10.0.0.5", "cidr": "10.0.0.0/24"}]}}}}}))
        };
        let kuryrports = vec![kp("a"), kp("other")];
        let policies = vec![
            obj::<NetworkPolicy>(
                json!({"metadata": {"namespace": "a", "name": "ok"}, "spec": {"podSelector": {}}}),
            ),
            obj::<NetworkPolicy>(json!({"metadata": {"namespace": "a", "name": "bad"},
                "spec": {"podSelector": {}, "ingress": [{"ports": [{"protocol": "ICMP"}]}]}})),
            obj::<NetworkPolicy>(
                json!({"metadata": {"namespace": "other", "name": "x"}, "spec": {"podSelector": {}}}),
            ),
        ];
        let inputs = build(
            &Objects {
                namespaces: &namespaces,
                pods: &pods,
                kuryrports: &kuryrports,
                policies: &policies,
                services: &[],
            },
            false,
        );
        assert_eq!(inputs.cluster.pods.len(), 1);
        let pod = &inputs.cluster.pods[0];
        assert_eq!(pod.key(), PodKey::new("a", "wired"));
        assert_eq!(pod.ip.to_string(), "10.0.0.5");
        assert_eq!(pod.resolve_port("http", policy::Protocol::Tcp), Some(8080));
        assert_eq!(inputs.ports[&pod.key()], "port-a");
        assert_eq!(inputs.policies.len(), 2);
        assert_eq!(inputs.invalid.len(), 1);
        assert!(inputs.invalid.contains_key(&PodKey::new("a", "bad")));
        assert_eq!(inputs.cluster.namespaces.len(), 1);
    }

    #[test]
    fn a_pod_whose_kuryrport_is_being_deleted_has_no_port_to_protect() {
        let namespaces = vec![obj::<Namespace>(json!({"metadata": {"name": "a"}}))];
        let pods = vec![obj::<SlimPod>(
            json!({"metadata": {"namespace": "a", "name": "leaving"}, "spec": {"containers": []}}),
        )];
        let kuryrports = vec![obj::<KuryrPort>(
            json!({"apiVersion": "openstack.org/v1", "kind": "KuryrPort",
            "metadata": {"namespace": "a", "name": "leaving", "deletionTimestamp": "2026-11-29T10:00:00Z",
                         "finalizers": ["kuryr.openstack.org/kuryrport-finalizer"]},
            "spec": {"podUid": "u", "podNodeName": "n"},
            "status": {"vifs": {"eth0": {"default": true, "vif": {"type": "neutron-vif", "portId": "port-a",
                "networkId": "net", "mac": "fa:16:3e:00:00:01", "ips": [{"address": "10.0.0.5", "cidr": "10.0.0.0/24"}]}}}}}),
        )];
        let inputs = build(
            &Objects {
                namespaces: &namespaces,
                pods: &pods,
                kuryrports: &kuryrports,
                policies: &[],
                services: &[],
            },
            false,
        );
        assert!(
            inputs.ports.is_empty(),
            "its port is going back to a pool: no groups set on it"
        );
        assert!(inputs.cluster.pods.is_empty());
    }
}
