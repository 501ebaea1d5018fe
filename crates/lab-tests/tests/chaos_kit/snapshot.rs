//! Reads a [`Snapshot`] from a namespace of a Kubernetes cluster and the cloud: the objects the invariants
//! talk about, each from its own source of truth (Kubernetes for pods, endpoints and custom resources;
//! Neutron and Octavia for ports, trunks, load balancers and members).

use std::collections::BTreeMap;

use kuryr_api::k8s_openapi::api::discovery::v1::EndpointSlice;
use kuryr_api::owners::live_uids;
use kuryr_api::{Api, Client, KuryrLoadBalancer, KuryrPort, ListParams, Pod, ResourceExt, Service};
use kuryr_openstack::neutron::{ports, trunks, Filter};
use kuryr_openstack::octavia::{loadbalancers, members};
use kuryr_openstack::owned::{self, TaggedResource};
use kuryr_openstack::{Cloud, Owner};

use super::invariants::{
    KlbView, KpView, LbView, PodView, PortView, ServiceView, Snapshot, TaggedView, VifView,
};

/// Where to look: one namespace, one cluster id, the nodes' trunks.
pub struct Scope<'a> {
    pub client: &'a Client,
    pub ns: &'a str,
    pub cloud: &'a Cloud,
    pub cluster_id: &'a str,
    pub project_id: Option<&'a str>,
    /// node name -> trunk id
    pub node_trunks: &'a BTreeMap<String, String>,
    /// The cloud is the lab's real Neutron on OVN: a port Neutron calls DOWN is asked about in OVN too
    /// ([`PortView::ovn_up`]).
    pub ask_ovn: bool,
}

pub async fn take(s: &Scope<'_>) -> anyhow::Result<Snapshot> {
    let mut snap = Snapshot {
        node_trunks: s.node_trunks.clone(),
        ..Snapshot::default()
    };
    // Cloud first, owners after: an object created meanwhile has its owner in the later list.
    let tagged = ports::list(s.cloud, Filter::new().tags(&Owner::cluster_filter(s.cluster_id))).await?;
    for trunk in s.node_trunks.values() {
        let t = trunks::get(s.cloud, trunk).await?;
        snap.trunks.insert(
            trunk.clone(),
            t.sub_ports
                .into_iter()
                .map(|p| (p.port_id, p.segmentation_id))
                .collect(),
        );
    }
    let lb_tags = vec![("tags".to_owned(), Owner::cluster_filter(s.cluster_id).join(","))];
    for lb in loadbalancers::list(s.cloud, lb_tags).await? {
        let mut view = LbView {
            id: lb.id.clone(),
            owner_uid: Owner::from_tags(&lb.tags).map(|o| o.uid).unwrap_or_default(),
            provisioning_status: lb.provisioning_status.clone(),
            ..LbView::default()
        };
        for pool in &lb.pools {
            let got = members::list(s.cloud, &pool.id).await?;
            view.pools.insert(
                pool.id.clone(),
                got.into_iter().map(|m| (m.address, m.protocol_port)).collect(),
            );
        }
        snap.lbs.push(view);
    }
    snap.other_tagged = owned::list(s.cloud, s.cluster_id, s.project_id)
        .await?
        .into_iter()
        .filter(|o| !matches!(o.resource, TaggedResource::Port | TaggedResource::LoadBalancer))
        .map(|o| TaggedView {
            resource: o.resource.label().to_owned(),
            id: o.id,
            owner_uid: o.owner.uid,
        })
        .collect();
    let ovn_up = if s.ask_ovn && tagged.iter().any(|p| p.status != "ACTIVE") {
        Some(lab_tests::ovn::up_ports()?)
    } else {
        None
    };
    snap.ports = tagged
        .into_iter()
        .map(|p| {
            let owner = Owner::from_tags(&p.tags);
            PortView {
                ovn_up: match &ovn_up {
                    Some(up) if p.status != "ACTIVE" => Some(up.contains(&p.id)),
                    _ => None,
                },
                id: p.id,
                owner_kind: owner.as_ref().map(|o| o.kind.clone()).unwrap_or_default(),
                owner_uid: owner.map(|o| o.uid).unwrap_or_default(),
                status: p.status,
            }
        })
        .collect();

    snap.live_uids = live_uids(s.client).await?;
    let lp = ListParams::default();
    for pod in Api::<Pod>::namespaced(s.client.clone(), s.ns).list(&lp).await? {
        if pod.metadata.deletion_timestamp.is_some() {
            snap.terminating_pods.push(pod.name_any());
            continue;
        }
        snap.pods.push(PodView {
            name: pod.name_any(),
            uid: pod.uid().unwrap_or_default(),
            node: pod.spec.and_then(|s| s.node_name).unwrap_or_default(),
        });
    }
    for kp in Api::<KuryrPort>::namespaced(s.client.clone(), s.ns)
        .list(&lp)
        .await?
    {
        let ready = lab_tests::cluster::is_ready(&kp);
        let vifs = kp
            .status
            .as_ref()
            .map(|st| {
                st.vifs
                    .values()
                    .map(|v| VifView {
                        port_id: v.vif.port_id.clone(),
                        vlan: v.vif.vlan_id,
                        trunk: v.vif.trunk_id.clone(),
                        active: v.vif.active,
                    })
                    .collect()
            })
            .unwrap_or_default();
        snap.kps.push(KpView {
            name: kp.name_any(),
            pod_uid: kp.spec.pod_uid.clone(),
            ready,
            deleting: kp.metadata.deletion_timestamp.is_some(),
            vifs,
        });
    }
    // Ready backends per Service, from its EndpointSlices (what the controller itself reads); a nil `ready`
    // condition means ready.
    let mut ready_by_service: BTreeMap<String, std::collections::BTreeSet<(String, u32)>> = BTreeMap::new();
    for slice in Api::<EndpointSlice>::namespaced(s.client.clone(), s.ns)
        .list(&lp)
        .await?
    {
        let Some(svc) = slice.labels().get(kuryr_api::labels::SERVICE_NAME).cloned() else {
            continue;
        };
        let set = ready_by_service.entry(svc).or_default();
        for ep in &slice.endpoints {
            if ep.conditions.as_ref().and_then(|c| c.ready) == Some(false) {
                continue;
            }
            for a in &ep.addresses {
                for p in slice.ports.clone().unwrap_or_default() {
                    set.insert((
                        a.clone(),
                        p.port.and_then(|p| u32::try_from(p).ok()).unwrap_or_default(),
                    ));
                }
            }
        }
    }
    for svc in Api::<Service>::namespaced(s.client.clone(), s.ns)
        .list(&lp)
        .await?
    {
        if svc.metadata.deletion_timestamp.is_some() {
            snap.terminating_services.push(svc.name_any());
            continue;
        }
        let ready = ready_by_service.remove(&svc.name_any()).unwrap_or_default();
        snap.services.push(ServiceView {
            name: svc.name_any(),
            uid: svc.uid().unwrap_or_default(),
            ready_backends: ready,
        });
    }
    for klb in Api::<KuryrLoadBalancer>::namespaced(s.client.clone(), s.ns)
        .list(&lp)
        .await?
    {
        snap.klbs.push(KlbView {
            name: klb.name_any(),
            lb_id: klb
                .status
                .as_ref()
                .and_then(|st| st.loadbalancer.as_ref())
                .map(|l| l.id.clone())
                .filter(|id| !id.is_empty()),
        });
    }
    Ok(snap)
}
