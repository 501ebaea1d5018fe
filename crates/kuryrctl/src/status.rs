//! `kuryrctl status`: each Kubernetes-side object next to the cloud objects its CRD status names, read from
//! the CRDs and the cloud (tagged lists, plus a direct read for anything the tag list lacks), with drift
//! marked: pod -> port -> VLAN -> node, Service -> LB -> listeners/members, namespace -> network,
//! policy -> security group.

use std::collections::BTreeMap;

use kube::api::{Api, ListParams};
use kuryr_api::{scoped as api, KuryrLoadBalancer, KuryrNetwork, KuryrNetworkPolicy, KuryrPort, ResourceExt};
use kuryr_openstack::neutron::{networks, ports, security_groups, trunks, Filter};
use kuryr_openstack::octavia::loadbalancers;
use kuryr_openstack::{Cloud, Owner};
use serde::Serialize;

use crate::cli::{Cli, StatusArgs};
use crate::output::{emit, toned, Format, Progress, Table, Tone};

#[derive(Debug, Clone, Default, Serialize)]
pub struct Row {
    pub kind: &'static str,
    /// `namespace/name` of the Kubernetes object.
    pub object: String,
    /// The main cloud object (port, load balancer, network, security group).
    pub cloud_id: String,
    /// Kind-specific: VLAN and node; listeners/members; subnet; rules.
    pub detail: String,
    pub state: String,
    /// Empty when the cloud matches the CRD status.
    pub drift: Vec<String>,
}

#[derive(Debug, Clone, Copy, Default)]
pub struct CloudPort<'a> {
    pub status: &'a str,
    pub tagged: bool,
    /// (trunk id, VLAN) when the port is a subport.
    pub on_trunk: Option<(&'a str, u32)>,
}

/// The node VM's port a nested-macvlan VIF names (`parentPortId`), as the cloud has it.
#[derive(Debug, Clone, Copy)]
pub enum ParentPort<'a> {
    /// The VIF names no parent port.
    Unnamed,
    /// Neutron has no such port.
    Missing,
    /// It could not be read (the reason).
    Unreadable(&'a str),
    Found(&'a ports::Port),
}

/// Drift between a nested-macvlan VIF and its node VM's port, which is what carries the pod's traffic:
/// the VM port must pair the pod's IP with the VIF's VRRP MAC (the pod's macvlan sends with that MAC, and
/// OVN's port security drops what the pairs do not allow), keep the MAC by which the node finds its NIC
/// (`parentMac`), and be bound to a host. Neutron's `status` of the VM port is not checked: on ML2/OVN it
/// can read DOWN for minutes while the port is bound and passes traffic (docs/pod-networking.md).
pub fn macvlan_parent_drift(vif: &kuryr_api::Vif, parent: ParentPort<'_>) -> Vec<String> {
    let id = vif.parent_port_id.as_deref().unwrap_or_default();
    let vm = match parent {
        ParentPort::Unnamed => return vec!["status names no parent (VM) port".into()],
        ParentPort::Missing => return vec![format!("parent port {id} missing")],
        ParentPort::Unreadable(why) => return vec![format!("cannot read parent port {id}: {why}")],
        ParentPort::Found(p) => p,
    };
    let mut d = Vec::new();
    let ips: Vec<&str> = vif.ips.iter().map(|i| i.address.as_str()).collect();
    if ips.is_empty() {
        d.push("status has no IP to pair".into());
    }
    match vif.vrrp_mac.as_deref() {
        None => d.push("status has no VRRP MAC".into()),
        Some(want) => {
            for ip in &ips {
                let pairs: Vec<&ports::AddressPair> = vm
                    .allowed_address_pairs
                    .iter()
                    .filter(|p| p.ip_address == *ip)
                    .collect();
                let same_mac = |p: &&ports::AddressPair| {
                    p.mac_address
                        .as_deref()
                        .is_some_and(|m| m.eq_ignore_ascii_case(want))
                };
                if pairs.is_empty() {
                    d.push(format!("parent port {id} has no address pair for {ip}"));
                } else if !pairs.iter().any(same_mac) {
                    let macs: Vec<&str> = pairs
                        .iter()
                        .map(|p| p.mac_address.as_deref().unwrap_or("its own MAC"))
                        .collect();
                    d.push(format!(
                        "parent port {id} pairs {ip} with {}, status says {want}",
                        macs.join(", ")
                    ));
                }
            }
        }
    }
    if let Some(mac) = vif.parent_mac.as_deref() {
        if !vm.mac_address.eq_ignore_ascii_case(mac) {
            d.push(format!(
                "parent port {id} has MAC {}, status says {mac}",
                vm.mac_address
            ));
        }
    }
    // (`binding:*` is admin-only by Neutron's default policy: hidden, it is not judged.)
    let hidden = vm.binding_vif_type.is_empty();
    if !hidden
        && (vm.binding_host_id.is_empty()
            || matches!(vm.binding_vif_type.as_str(), "unbound" | "binding_failed"))
    {
        d.push(format!(
            "parent port {id} is not bound (host {:?}, vif_type {:?})",
            vm.binding_host_id, vm.binding_vif_type
        ));
    }
    if !vm.admin_state_up {
        d.push(format!("parent port {id} is administratively down"));
    }
    d
}

/// Drift between a KuryrPort's VIF and its port in the cloud.
pub fn pod_drift(vif: &kuryr_api::Vif, port: Option<CloudPort<'_>>) -> Vec<String> {
    let Some(p) = port else {
        return vec!["port missing".into()];
    };
    let mut d = Vec::new();
    if !p.tagged {
        d.push("port not tagged for this cluster".into());
    }
    if let Some(vlan) = vif.vlan_id {
        match p.on_trunk {
            None => d.push(format!("port is not a subport (status says VLAN {vlan})")),
            Some((_, cloud_vlan)) if cloud_vlan != u32::from(vlan) => {
                d.push(format!("VLAN {cloud_vlan} in the cloud, {vlan} in the status"))
            }
            Some((trunk, _)) if vif.trunk_id.as_deref().is_some_and(|t| t != trunk) => d.push(format!(
                "on trunk {trunk}, status says {}",
                vif.trunk_id.as_deref().unwrap_or("")
            )),
            _ => {}
        }
    }
    // A nested-macvlan pod's port is never bound (its traffic leaves through the VM's port, which carries
    // the pod's address pair): DOWN is its normal state, not drift.
    let bound_port = vif.vif_type != kuryr_api::VifType::NestedMacvlan;
    if bound_port && vif.active && p.status != "ACTIVE" {
        d.push(format!("status says active, port is {}", p.status));
    }
    d
}

pub async fn run(
    cli: &Cli,
    a: &StatusArgs,
    fmt: Format,
    out: &mut dyn std::io::Write,
) -> anyhow::Result<i32> {
    let mut progress = Progress::new(6);
    let cloud = crate::connect::cloud(cli).await?;
    let client = crate::connect::kube_client(cli).await?;
    progress.step("connected");
    let mut rows = Vec::new();
    rows.extend(pod_rows(cli, a, &cloud, &client).await?);
    progress.step("pods");
    rows.extend(service_rows(cli, a, &cloud, &client).await?);
    progress.step("services");
    rows.extend(namespace_rows(a, &cloud, &client).await?);
    progress.step("namespaces");
    rows.extend(policy_rows(a, &cloud, &client).await?);
    progress.step("policies");
    progress.finish();
    if a.drift_only {
        rows.retain(|r| !r.drift.is_empty());
    }
    let mut t = Table::new(vec!["KIND", "OBJECT", "CLOUD", "DETAIL", "STATE", "DRIFT"]);
    for r in &rows {
        let state_tone = match r.state.as_str() {
            "ACTIVE" => Tone::Good,
            s if s.starts_with("PENDING") || s == "DOWN" || s == "waiting" || s == "releasing" => Tone::Warn,
            "ERROR" | "missing" => Tone::Bad,
            _ => Tone::Plain,
        };
        let drift = if r.drift.is_empty() {
            toned("-", Tone::Good)
        } else {
            toned(r.drift.join("; "), Tone::Bad)
        };
        t.row(vec![
            r.kind.into(),
            r.object.clone().into(),
            r.cloud_id.clone().into(),
            r.detail.clone().into(),
            toned(r.state.clone(), state_tone),
            drift,
        ]);
    }
    emit(out, fmt, &t, &rows)?;
    Ok(if rows.iter().any(|r| !r.drift.is_empty()) {
        3
    } else {
        0
    })
}

/// CRD objects, or none when the CRD is not installed.
async fn list_or_empty<K>(api: Api<K>) -> anyhow::Result<Vec<K>>
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned,
{
    match api.list(&ListParams::default()).await {
        Ok(l) => Ok(l.items),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(Vec::new()),
        Err(e) => Err(e.into()),
    }
}

fn key(o: &impl ResourceExt) -> String {
    format!("{}/{}", o.namespace().unwrap_or_default(), o.name_any())
}

async fn pod_rows(
    cli: &Cli,
    a: &StatusArgs,
    cloud: &Cloud,
    client: &kube::Client,
) -> anyhow::Result<Vec<Row>> {
    let kps = list_or_empty(api::<KuryrPort>(client, a.namespace.as_deref())).await?;
    if kps.is_empty() {
        return Ok(Vec::new());
    }
    let tagged: BTreeMap<String, ports::Port> =
        ports::list(cloud, Filter::new().tags(&Owner::cluster_filter(&cli.cluster_id)))
            .await?
            .into_iter()
            .map(|p| (p.id.clone(), p))
            .collect();
    let mut filter = Filter::new();
    if let Some(p) = crate::connect::project(cli, cloud) {
        filter = filter.project(p);
    }
    let on_trunk: BTreeMap<String, (String, u32)> = trunks::list(cloud, filter)
        .await?
        .into_iter()
        .flat_map(|t| {
            t.sub_ports
                .into_iter()
                .map(move |s| (s.port_id, (t.id.clone(), s.segmentation_id)))
        })
        .collect();
    // The node VM ports nested-macvlan VIFs name, each read once.
    let mut parents: BTreeMap<String, Result<ports::Port, String>> = BTreeMap::new();
    for kp in &kps {
        for pv in kp.status.iter().flat_map(|s| s.vifs.values()) {
            let vif = &pv.vif;
            let Some(id) = vif.parent_port_id.as_deref() else {
                continue;
            };
            if vif.vif_type != kuryr_api::VifType::NestedMacvlan || parents.contains_key(id) {
                continue;
            }
            let read = match ports::get(cloud, id).await {
                Ok(p) => Ok(p),
                Err(e) if e.is_not_found() => Err(String::new()),
                Err(e) => Err(e.to_string()),
            };
            parents.insert(id.to_owned(), read);
        }
    }
    let mut rows = Vec::new();
    for kp in &kps {
        let vifs = kp.status.as_ref().map(|s| s.vifs.clone()).unwrap_or_default();
        if vifs.is_empty() {
            rows.push(Row {
                kind: "pod",
                object: key(kp),
                detail: format!("node {}", kp.spec.pod_node_name),
                state: "waiting".into(),
                ..Row::default()
            });
            continue;
        }
        for (ifname, pv) in vifs {
            let vif = &pv.vif;
            let fetched;
            let port = match tagged.get(&vif.port_id) {
                Some(p) => Some(p),
                None => {
                    fetched = ports::get(cloud, &vif.port_id).await.ok();
                    fetched.as_ref()
                }
            };
            let cp = port.map(|p| CloudPort {
                status: &p.status,
                tagged: tagged.contains_key(&p.id),
                on_trunk: on_trunk.get(&p.id).map(|(t, v)| (t.as_str(), *v)),
            });
            let ip = vif.ips.first().map(|i| i.address.clone()).unwrap_or_default();
            let mut drift = pod_drift(vif, cp);
            let mut detail = format!(
                "vlan {} ip {ip} node {}",
                vif.vlan_id.map_or("-".to_owned(), |v| v.to_string()),
                kp.spec.pod_node_name
            );
            if vif.vif_type == kuryr_api::VifType::NestedMacvlan {
                let parent = match vif.parent_port_id.as_deref().and_then(|id| parents.get(id)) {
                    None => ParentPort::Unnamed,
                    Some(Ok(p)) => ParentPort::Found(p),
                    Some(Err(why)) if why.is_empty() => ParentPort::Missing,
                    Some(Err(why)) => ParentPort::Unreadable(why),
                };
                drift.extend(macvlan_parent_drift(vif, parent));
                detail = format!(
                    "macvlan {} on {} ip {ip} node {}",
                    vif.vrrp_mac.as_deref().unwrap_or("-"),
                    vif.parent_port_id.as_deref().unwrap_or("-"),
                    kp.spec.pod_node_name
                );
            }
            let mut state = port.map_or("missing".to_owned(), |p| p.status.clone());
            if kp.metadata.deletion_timestamp.is_some() {
                // Being released: the controller removes the pair, then the port; neither is drift.
                state = "releasing".into();
                drift.clear();
            }
            rows.push(Row {
                kind: "pod",
                object: format!("{}[{ifname}]", key(kp)),
                cloud_id: vif.port_id.clone(),
                detail,
                state,
                drift,
            });
        }
    }
    Ok(rows)
}

async fn service_rows(
    cli: &Cli,
    a: &StatusArgs,
    cloud: &Cloud,
    client: &kube::Client,
) -> anyhow::Result<Vec<Row>> {
    let klbs = list_or_empty(api::<KuryrLoadBalancer>(client, a.namespace.as_deref())).await?;
    if klbs.is_empty() {
        return Ok(Vec::new());
    }
    let q = vec![(
        "tags".to_owned(),
        Owner::cluster_filter(&cli.cluster_id).join(","),
    )];
    let lbs: BTreeMap<String, loadbalancers::LoadBalancer> = loadbalancers::list(cloud, q)
        .await?
        .into_iter()
        .map(|l| (l.id.clone(), l))
        .collect();
    let mut rows = Vec::new();
    for klb in &klbs {
        let st = klb.status.clone().unwrap_or_default();
        let Some(lb) = st.loadbalancer.as_ref() else {
            rows.push(Row {
                kind: "service",
                object: key(klb),
                state: "waiting".into(),
                ..Row::default()
            });
            continue;
        };
        let fetched;
        let cloud_lb = match lbs.get(&lb.id) {
            Some(l) => Some(l),
            None => {
                fetched = loadbalancers::get(cloud, &lb.id).await.ok();
                fetched.as_ref()
            }
        };
        let mut drift = Vec::new();
        match cloud_lb {
            None => drift.push("load balancer missing".to_owned()),
            Some(c) => {
                if !lbs.contains_key(&c.id) {
                    drift.push("load balancer not tagged for this cluster".into());
                }
                if c.listeners.len() != st.listeners.len() {
                    drift.push(format!(
                        "{} listeners in the cloud, {} in the status",
                        c.listeners.len(),
                        st.listeners.len()
                    ));
                }
                if c.provisioning_status == "ERROR" {
                    drift.push("load balancer in ERROR".into());
                }
            }
        }
        rows.push(Row {
            kind: "service",
            object: key(klb),
            cloud_id: lb.id.clone(),
            detail: format!(
                "vip {} listeners {} members {}",
                lb.ip,
                st.listeners.len(),
                st.members.len()
            ),
            state: cloud_lb.map_or("missing".to_owned(), |c| c.provisioning_status.clone()),
            drift,
        });
    }
    Ok(rows)
}

async fn namespace_rows(a: &StatusArgs, cloud: &Cloud, client: &kube::Client) -> anyhow::Result<Vec<Row>> {
    let kns = list_or_empty(api::<KuryrNetwork>(client, a.namespace.as_deref())).await?;
    let mut rows = Vec::new();
    for kn in &kns {
        let st = kn.status.clone().unwrap_or_default();
        let Some(net_id) = st.net_id.clone() else {
            rows.push(Row {
                kind: "namespace",
                object: kn.spec.ns_name.clone(),
                state: "waiting".into(),
                ..Row::default()
            });
            continue;
        };
        let net = networks::get(cloud, &net_id).await;
        let mut drift = Vec::new();
        match &net {
            Err(e) if e.is_not_found() => drift.push("network missing".to_owned()),
            Err(e) => drift.push(format!("cannot read network: {e}")),
            Ok(n) => {
                if let Some(sub) = &st.subnet_id {
                    if !n.subnets.contains(sub) {
                        drift.push(format!("subnet {sub} not on the network"));
                    }
                }
            }
        }
        rows.push(Row {
            kind: "namespace",
            object: kn.spec.ns_name.clone(),
            cloud_id: net_id,
            detail: format!(
                "subnet {} {}",
                st.subnet_id.unwrap_or_default(),
                st.subnet_cidr.unwrap_or_default()
            ),
            state: net.as_ref().map_or("missing".to_owned(), |n| n.status.clone()),
            drift,
        });
    }
    Ok(rows)
}

async fn policy_rows(a: &StatusArgs, cloud: &Cloud, client: &kube::Client) -> anyhow::Result<Vec<Row>> {
    let knps = list_or_empty(api::<KuryrNetworkPolicy>(client, a.namespace.as_deref())).await?;
    let mut rows = Vec::new();
    for knp in &knps {
        let st = knp.status.clone().unwrap_or_default();
        let Some(sg_id) = st.security_group_id.clone() else {
            rows.push(Row {
                kind: "policy",
                object: key(knp),
                state: "waiting".into(),
                ..Row::default()
            });
            continue;
        };
        let sg = security_groups::get(cloud, &sg_id).await;
        let mut drift = Vec::new();
        let state = match &sg {
            Err(e) if e.is_not_found() => {
                drift.push("security group missing".to_owned());
                "missing".to_owned()
            }
            Err(e) => {
                drift.push(format!("cannot read security group: {e}"));
                "unknown".to_owned()
            }
            Ok(g) => {
                let ours: std::collections::BTreeSet<&str> = st
                    .security_group_rules
                    .iter()
                    .filter_map(|r| r.id.as_deref())
                    .collect();
                let missing = ours
                    .iter()
                    .filter(|id| !g.security_group_rules.iter().any(|r| r.id == **id))
                    .count();
                if missing > 0 {
                    drift.push(format!("{missing} rules of the status missing in the cloud"));
                }
                "present".to_owned()
            }
        };
        rows.push(Row {
            kind: "policy",
            object: key(knp),
            cloud_id: sg_id,
            detail: format!("{} rules", st.security_group_rules.len()),
            state,
            drift,
        });
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vif(vlan: Option<u16>, active: bool) -> kuryr_api::Vif {
        serde_json::from_value(serde_json::json!({
            "type": "nested-vlan", "portId": "p1", "networkId": "n1", "mac": "fa:16:3e:00:00:01",
            "vlanId": vlan, "trunkId": "t1", "active": active,
        }))
        .unwrap()
    }

    #[test]
    fn a_matching_subport_has_no_drift_and_each_mismatch_is_named() {
        let ok = CloudPort {
            status: "ACTIVE",
            tagged: true,
            on_trunk: Some(("t1", 101)),
        };
        assert!(pod_drift(&vif(Some(101), true), Some(ok)).is_empty());
        assert_eq!(pod_drift(&vif(Some(101), true), None), vec!["port missing"]);
        let moved = CloudPort {
            on_trunk: Some(("t1", 202)),
            ..ok
        };
        assert_eq!(
            pod_drift(&vif(Some(101), true), Some(moved)),
            vec!["VLAN 202 in the cloud, 101 in the status"]
        );
        let detached = CloudPort {
            on_trunk: None,
            status: "DOWN",
            tagged: false,
        };
        let d = pod_drift(&vif(Some(101), true), Some(detached));
        assert_eq!(d.len(), 3, "{d:?}");
        let elsewhere = CloudPort {
            on_trunk: Some(("t9", 101)),
            ..ok
        };
        assert_eq!(
            pod_drift(&vif(Some(101), true), Some(elsewhere)),
            vec!["on trunk t9, status says t1"]
        );
    }

    #[test]
    fn an_unbound_macvlan_pod_port_is_down_by_design_not_drift() {
        let mut macvlan = vif(None, true);
        macvlan.vif_type = kuryr_api::VifType::NestedMacvlan;
        let down = CloudPort {
            status: "DOWN",
            tagged: true,
            on_trunk: None,
        };
        assert!(pod_drift(&macvlan, Some(down)).is_empty());
        // The same DOWN port behind a VLAN VIF that says active is drift.
        assert_eq!(
            pod_drift(&vif(None, true), Some(down)),
            vec!["status says active, port is DOWN"]
        );
    }

    fn macvlan_vif() -> kuryr_api::Vif {
        serde_json::from_value(serde_json::json!({
            "type": "nested-macvlan", "portId": "pod1", "networkId": "n1", "mac": "fa:16:3e:00:00:02",
            "ips": [{"address": "198.18.0.40", "cidr": "198.18.0.0/18"}],
            "vrrpMac": "00:00:5e:00:01:03", "parentPortId": "vm1", "parentMac": "fa:16:3e:00:00:0a",
            "active": true,
        }))
        .unwrap()
    }

    fn vm_port(pairs: &[(&str, Option<&str>)]) -> ports::Port {
        ports::Port {
            id: "vm1".into(),
            mac_address: "fa:16:3e:00:00:0a".into(),
            status: "ACTIVE".into(),
            binding_host_id: "hv1".into(),
            binding_vif_type: "ovs".into(),
            admin_state_up: true,
            allowed_address_pairs: pairs
                .iter()
                .map(|(ip, mac)| ports::AddressPair {
                    ip_address: (*ip).into(),
                    mac_address: mac.map(Into::into),
                })
                .collect(),
            ..ports::Port::default()
        }
    }

    #[test]
    fn a_macvlan_pod_paired_on_its_vm_port_has_no_drift_whatever_neutron_says_of_the_vm_port() {
        let mut vm = vm_port(&[
            ("198.18.0.41", Some("00:00:5e:00:01:04")),
            ("198.18.0.40", Some("00:00:5E:00:01:03")),
        ]);
        assert!(macvlan_parent_drift(&macvlan_vif(), ParentPort::Found(&vm)).is_empty());
        // ML2/OVN can leave a bound VM port DOWN in Neutron while OVN has it up: not drift.
        vm.status = "DOWN".into();
        assert!(macvlan_parent_drift(&macvlan_vif(), ParentPort::Found(&vm)).is_empty());
    }

    #[test]
    fn a_macvlan_pod_whose_pair_is_gone_or_differs_is_drift() {
        let vif = macvlan_vif();
        assert_eq!(
            macvlan_parent_drift(&vif, ParentPort::Found(&vm_port(&[]))),
            vec!["parent port vm1 has no address pair for 198.18.0.40"]
        );
        assert_eq!(
            macvlan_parent_drift(
                &vif,
                ParentPort::Found(&vm_port(&[("198.18.0.40", Some("00:00:5e:00:01:07"))]))
            ),
            vec!["parent port vm1 pairs 198.18.0.40 with 00:00:5e:00:01:07, status says 00:00:5e:00:01:03"]
        );
        // A pair given without a MAC means the VM port's own MAC: not the pod's VRRP MAC.
        assert_eq!(
            macvlan_parent_drift(&vif, ParentPort::Found(&vm_port(&[("198.18.0.40", None)]))),
            vec!["parent port vm1 pairs 198.18.0.40 with its own MAC, status says 00:00:5e:00:01:03"]
        );
        // The pod's MAC paired with another IP does not count.
        assert_eq!(
            macvlan_parent_drift(
                &vif,
                ParentPort::Found(&vm_port(&[("198.18.0.99", Some("00:00:5e:00:01:03"))]))
            ),
            vec!["parent port vm1 has no address pair for 198.18.0.40"]
        );
    }

    #[test]
    fn a_macvlan_pods_vm_port_missing_unbound_or_with_another_mac_is_drift() {
        let vif = macvlan_vif();
        assert_eq!(
            macvlan_parent_drift(&vif, ParentPort::Missing),
            vec!["parent port vm1 missing"]
        );
        assert_eq!(
            macvlan_parent_drift(&vif, ParentPort::Unreadable("503")),
            vec!["cannot read parent port vm1: 503"]
        );
        let mut unnamed = vif.clone();
        unnamed.parent_port_id = None;
        assert_eq!(
            macvlan_parent_drift(&unnamed, ParentPort::Unnamed),
            vec!["status names no parent (VM) port"]
        );
        let paired = [("198.18.0.40", Some("00:00:5e:00:01:03"))];
        let mut unbound = vm_port(&paired);
        unbound.binding_host_id = String::new();
        unbound.binding_vif_type = "unbound".into();
        assert_eq!(
            macvlan_parent_drift(&vif, ParentPort::Found(&unbound)),
            vec![r#"parent port vm1 is not bound (host "", vif_type "unbound")"#]
        );
        // A credential that does not see bindings (non-admin) judges none.
        let mut hidden = vm_port(&paired);
        hidden.binding_host_id = String::new();
        hidden.binding_vif_type = String::new();
        assert!(macvlan_parent_drift(&vif, ParentPort::Found(&hidden)).is_empty());
        let mut disabled = vm_port(&paired);
        disabled.admin_state_up = false;
        assert_eq!(
            macvlan_parent_drift(&vif, ParentPort::Found(&disabled)),
            vec!["parent port vm1 is administratively down"]
        );
        let mut other_mac = vm_port(&paired);
        other_mac.mac_address = "fa:16:3e:00:00:0b".into();
        assert_eq!(
            macvlan_parent_drift(&vif, ParentPort::Found(&other_mac)),
            vec!["parent port vm1 has MAC fa:16:3e:00:00:0b, status says fa:16:3e:00:00:0a"]
        );
        let mut no_mac = vif.clone();
        no_mac.vrrp_mac = None;
        assert_eq!(
            macvlan_parent_drift(&no_mac, ParentPort::Found(&vm_port(&paired))),
            vec!["status has no VRRP MAC"]
        );
    }
}
