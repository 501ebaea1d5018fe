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
            s if s.starts_with("PENDING") || s == "DOWN" || s == "waiting" => Tone::Warn,
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
            rows.push(Row {
                kind: "pod",
                object: format!("{}[{ifname}]", key(kp)),
                cloud_id: vif.port_id.clone(),
                detail: format!(
                    "vlan {} ip {ip} node {}",
                    vif.vlan_id.map_or("-".to_owned(), |v| v.to_string()),
                    kp.spec.pod_node_name
                ),
                state: port.map_or("missing".to_owned(), |p| p.status.clone()),
                drift: pod_drift(vif, cp),
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
}
