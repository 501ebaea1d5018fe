//! A KuryrPort as its cache holds it: packed ([`crate::packed`]), with the ids of the ports its status
//! names beside the body. One KuryrPort per pod makes this the largest cache at scale (2.3 KB each parsed,
//! `tests/footprint.rs`); its readers unpack one object at a time (a reconcile of it, the Pod front end's
//! look at its pod's), and the searches across all of them (ports in use, a port named by another
//! KuryrPort) read the port ids only.

use kuryr_api::KuryrPort;

use crate::packed::{Packed, Summary};
use crate::toolkit::Reconciled;

pub type CachedKp = Packed<KuryrPort, NamedPorts>;

impl Reconciled for CachedKp {
    const CONTROLLER: &'static str = super::reconcile::CONTROLLER;
}

/// The ids of the ports a KuryrPort's status names, one per interface.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NamedPorts(Box<[Box<str>]>);

impl NamedPorts {
    pub fn iter(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(|id| &**id)
    }

    pub fn contains(&self, port_id: &str) -> bool {
        self.iter().any(|id| id == port_id)
    }
}

impl Summary<KuryrPort> for NamedPorts {
    fn of(kp: &KuryrPort) -> Self {
        let ids = kp.status.iter().flat_map(|st| st.vifs.values());
        Self(ids.map(|v| v.vif.port_id.as_str().into()).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kuryr_api::{KuryrPortSpec, ResourceExt};

    #[test]
    fn a_cached_kuryrport_names_its_status_ports_and_unpacks_whole() {
        let vif = |port: &str| {
            serde_json::json!({"default": true, "vif": {"type": "nested-vlan", "portId": port,
                "networkId": "n", "mac": "fa:16:3e:00:00:01", "ips": [], "active": true}})
        };
        let kp: KuryrPort = serde_json::from_value(serde_json::json!({
            "apiVersion": "openstack.org/v1", "kind": "KuryrPort",
            "metadata": {"name": "web-0", "namespace": "shop", "uid": "kp-1", "resourceVersion": "3"},
            "spec": {"podUid": "pod-1", "podNodeName": "node-1"},
            "status": {"vifs": {"eth0": vif("p-1"), "eth1": vif("p-2")}}
        }))
        .expect("a KuryrPort");
        let cached = CachedKp::pack(kp.clone()).expect("packs");
        assert_eq!(cached.summary().iter().collect::<Vec<_>>(), ["p-1", "p-2"]);
        assert!(cached.summary().contains("p-2") && !cached.summary().contains("p-3"));
        assert_eq!(cached.unpack().expect("unpacks"), kp);
        assert_eq!(cached.name_any(), "web-0");

        let spec: KuryrPortSpec =
            serde_json::from_value(serde_json::json!({"podUid": "pod-2", "podNodeName": "node-1"}))
                .expect("a spec");
        let bare = CachedKp::pack(KuryrPort::new("new", spec)).expect("packs");
        assert_eq!(bare.summary(), &NamedPorts::default());
    }
}
