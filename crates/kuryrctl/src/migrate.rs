//! `kuryrctl migrate`: makes what upstream kuryr-kubernetes left adoptable by kuryr-controller, without
//! recreating anything. Upstream KuryrPorts' nested-VLAN VIFs do not name their trunk (kuryr-controller
//! detaches through it on release): the trunk carrying the port is looked up and written into the status.
//! Upstream ports, networks, subnets and load balancers carry upstream's `resource_tags` only: our ownership
//! tags are added (cluster, kind, uid as the controllers would have written them), so the garbage
//! collector and `kuryrctl status` see them as owned. Without `--apply` it only lists what it would do.

use std::collections::BTreeMap;

use kube::api::{Api, ListParams, PostParams};
use kuryr_api::{scoped, KuryrLoadBalancer, KuryrNetwork, KuryrPort, ResourceExt, VifType};
use kuryr_core::OwnerKind;
use kuryr_openstack::neutron::tagging::{self, Resource};
use kuryr_openstack::neutron::{networks, ports, subnets, trunks, Filter};
use kuryr_openstack::octavia::loadbalancers::{self, UpdateLoadBalancer};
use kuryr_openstack::{Cloud, Owner};
use serde::Serialize;

use crate::cli::{Cli, MigrateArgs};
use crate::output::{emit, toned, Format, Progress, Table, Tone};

#[derive(Debug, Clone, Serialize)]
pub struct Action {
    /// `namespace/name` of the Kubernetes object.
    pub object: String,
    pub action: String,
    pub cloud_id: String,
    pub done: bool,
}

fn has_owner(tags: &[String], cluster: &str) -> bool {
    Owner::from_tags(tags).is_some_and(|o| o.cluster == cluster)
}

async fn tag(cloud: &Cloud, res: Resource, id: &str, owner: &Owner) -> kuryr_openstack::Result<()> {
    for t in owner.tags()? {
        tagging::add(cloud, res, id, &t).await?;
    }
    Ok(())
}

pub async fn run(
    cli: &Cli,
    a: &MigrateArgs,
    fmt: Format,
    out: &mut dyn std::io::Write,
) -> anyhow::Result<i32> {
    let mut progress = Progress::new(4);
    let cloud = crate::connect::cloud(cli).await?;
    let client = crate::connect::kube_client(cli).await?;
    progress.step("connected");
    let mut actions = Vec::new();
    kuryrports(cli, a, &cloud, &client, &mut actions).await?;
    progress.step("KuryrPorts");
    kuryrnetworks(cli, a, &cloud, &client, &mut actions).await?;
    progress.step("KuryrNetworks");
    kuryrloadbalancers(cli, a, &cloud, &client, &mut actions).await?;
    progress.step("KuryrLoadBalancers");
    progress.finish();
    let mut t = Table::new(vec!["OBJECT", "ACTION", "CLOUD", "STATE"]);
    for x in &actions {
        let state = if x.done {
            toned("done", Tone::Good)
        } else {
            toned("would do (use --apply)", Tone::Warn)
        };
        t.row(vec![
            x.object.clone().into(),
            x.action.clone().into(),
            x.cloud_id.clone().into(),
            state,
        ]);
    }
    emit(out, fmt, &t, &actions)?;
    Ok(0)
}

async fn kuryrports(
    cli: &Cli,
    a: &MigrateArgs,
    cloud: &Cloud,
    client: &kube::Client,
    actions: &mut Vec<Action>,
) -> anyhow::Result<()> {
    let api: Api<KuryrPort> = scoped(client, a.namespace.as_deref());
    let kps = api.list(&ListParams::default()).await?.items;
    if kps.is_empty() {
        return Ok(());
    }
    // port id -> (trunk id, VLAN)
    let on_trunk: BTreeMap<String, (String, u32)> = trunks::list(cloud, Filter::new())
        .await?
        .into_iter()
        .flat_map(|t| {
            t.sub_ports
                .into_iter()
                .map(move |s| (s.port_id, (t.id.clone(), s.segmentation_id)))
        })
        .collect();
    for mut kp in kps {
        let object = format!("{}/{}", kp.namespace().unwrap_or_default(), kp.name_any());
        let pod_uid = kp.spec.pod_uid.clone();
        let Some(mut st) = kp.status.clone() else { continue };
        let mut changed = false;
        for entry in st.vifs.values_mut() {
            let vif = &mut entry.vif;
            if vif.vif_type == VifType::NestedVlan && vif.trunk_id.is_none() {
                if let Some((trunk, vlan)) = on_trunk.get(&vif.port_id) {
                    vif.trunk_id = Some(trunk.clone());
                    if vif.vlan_id.is_none() {
                        vif.vlan_id = u16::try_from(*vlan).ok();
                    }
                    changed = true;
                    actions.push(Action {
                        object: object.clone(),
                        action: format!("status: trunkId {trunk}"),
                        cloud_id: vif.port_id.clone(),
                        done: a.apply,
                    });
                }
            }
            let port = match ports::get(cloud, &vif.port_id).await {
                Ok(p) => p,
                Err(e) if e.is_not_found() => continue,
                Err(e) => return Err(e.into()),
            };
            if !has_owner(&port.tags, &cli.cluster_id) {
                if a.apply {
                    tag(
                        cloud,
                        Resource::Ports,
                        &port.id,
                        &Owner::new(&cli.cluster_id, OwnerKind::KuryrPort.as_str(), &pod_uid),
                    )
                    .await?;
                }
                actions.push(Action {
                    object: object.clone(),
                    action: format!("tag port {}/{pod_uid}", OwnerKind::KuryrPort),
                    cloud_id: port.id.clone(),
                    done: a.apply,
                });
            }
        }
        if changed && a.apply {
            kp.status = Some(st);
            api.replace_status(&kp.name_any(), &PostParams::default(), &kp)
                .await?;
        }
    }
    Ok(())
}

async fn kuryrnetworks(
    cli: &Cli,
    a: &MigrateArgs,
    cloud: &Cloud,
    client: &kube::Client,
    actions: &mut Vec<Action>,
) -> anyhow::Result<()> {
    let api: Api<KuryrNetwork> = scoped(client, a.namespace.as_deref());
    for kn in api.list(&ListParams::default()).await?.items {
        let object = format!("{}/{}", kn.namespace().unwrap_or_default(), kn.name_any());
        let owner = Owner::new(
            &cli.cluster_id,
            OwnerKind::KuryrNetwork.as_str(),
            kn.uid().unwrap_or_default(),
        );
        let st = kn.status.clone().unwrap_or_default();
        if let Some(id) = &st.net_id {
            if let Ok(n) = networks::get(cloud, id).await {
                if !has_owner(&n.tags, &cli.cluster_id) {
                    if a.apply {
                        tag(cloud, Resource::Networks, id, &owner).await?;
                    }
                    actions.push(Action {
                        object: object.clone(),
                        action: "tag network".into(),
                        cloud_id: id.clone(),
                        done: a.apply,
                    });
                }
            }
        }
        if let Some(id) = &st.subnet_id {
            if let Ok(s) = subnets::get(cloud, id).await {
                if !has_owner(&s.tags, &cli.cluster_id) {
                    if a.apply {
                        tag(cloud, Resource::Subnets, id, &owner).await?;
                    }
                    actions.push(Action {
                        object: object.clone(),
                        action: "tag subnet".into(),
                        cloud_id: id.clone(),
                        done: a.apply,
                    });
                }
            }
        }
    }
    Ok(())
}

async fn kuryrloadbalancers(
    cli: &Cli,
    a: &MigrateArgs,
    cloud: &Cloud,
    client: &kube::Client,
    actions: &mut Vec<Action>,
) -> anyhow::Result<()> {
    let api: Api<KuryrLoadBalancer> = scoped(client, a.namespace.as_deref());
    for klb in api.list(&ListParams::default()).await?.items {
        let object = format!("{}/{}", klb.namespace().unwrap_or_default(), klb.name_any());
        let Some(lb_id) = klb
            .status
            .as_ref()
            .and_then(|s| s.loadbalancer.as_ref())
            .map(|l| l.id.clone())
        else {
            continue;
        };
        // As the LB controller tags: the Service's uid (upstream made it the owner), else the KLB's.
        let Some(svc_uid) = klb
            .owner_references()
            .iter()
            .find(|o| o.kind == "Service")
            .map(|o| o.uid.clone())
            .or_else(|| klb.uid())
        else {
            continue;
        };
        let Ok(lb) = loadbalancers::get(cloud, &lb_id).await else {
            continue;
        };
        if has_owner(&lb.tags, &cli.cluster_id) {
            continue;
        }
        if a.apply {
            let mut tags = lb.tags.clone();
            tags.extend(Owner::new(&cli.cluster_id, OwnerKind::Service.as_str(), &svc_uid).tags()?);
            let req = UpdateLoadBalancer {
                tags: Some(tags),
                ..UpdateLoadBalancer::default()
            };
            loadbalancers::update(cloud, &lb_id, &req).await?;
        }
        actions.push(Action {
            object,
            action: "tag load balancer".into(),
            cloud_id: lb_id,
            done: a.apply,
        });
    }
    Ok(())
}
