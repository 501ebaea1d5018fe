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

/// A cloud object `migrate` may have to tag as ours, with the tags it carries now.
enum Untagged<'a> {
    /// Tagged one tag at a time (`PUT .../tags/{tag}`), the tags it has kept.
    Neutron(Resource, &'a str, &'a [String]),
    /// Its tags replaced whole (Octavia has no single-tag call), the tags it has kept.
    LoadBalancer(&'a str, &'a [String]),
}

impl Untagged<'_> {
    fn id(&self) -> &str {
        match self {
            Untagged::Neutron(_, id, _) | Untagged::LoadBalancer(id, _) => id,
        }
    }

    fn tags(&self) -> &[String] {
        match self {
            Untagged::Neutron(_, _, tags) | Untagged::LoadBalancer(_, tags) => tags,
        }
    }

    async fn tag(&self, cloud: &Cloud, owner: &Owner) -> kuryr_openstack::Result<()> {
        match self {
            Untagged::Neutron(res, id, _) => {
                for t in owner.tags()? {
                    tagging::add(cloud, *res, id, &t).await?;
                }
            }
            Untagged::LoadBalancer(id, kept) => {
                let mut tags = kept.to_vec();
                tags.extend(owner.tags()?);
                let req = UpdateLoadBalancer {
                    tags: Some(tags),
                    ..UpdateLoadBalancer::default()
                };
                loadbalancers::update(cloud, id, &req).await?;
            }
        }
        Ok(())
    }
}

/// What one run plans and, with `--apply`, does.
struct Plan<'a> {
    cloud: &'a Cloud,
    cluster_id: &'a str,
    apply: bool,
    actions: Vec<Action>,
}

impl Plan<'_> {
    /// The one way an object is adopted: unless this cluster owns it already, tag it (with `--apply`) and
    /// record the action.
    async fn adopt(
        &mut self,
        object: &str,
        action: String,
        obj: Untagged<'_>,
        owner: &Owner,
    ) -> anyhow::Result<()> {
        if Owner::from_tags(obj.tags()).is_some_and(|o| o.cluster == self.cluster_id) {
            return Ok(());
        }
        if self.apply {
            obj.tag(self.cloud, owner).await?;
        }
        self.record(object, action, obj.id());
        Ok(())
    }

    fn record(&mut self, object: &str, action: String, cloud_id: &str) {
        self.actions.push(Action {
            object: object.to_owned(),
            action,
            cloud_id: cloud_id.to_owned(),
            done: self.apply,
        });
    }
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
    let mut plan = Plan {
        cloud: &cloud,
        cluster_id: &cli.cluster_id,
        apply: a.apply,
        actions: Vec::new(),
    };
    kuryrports(a, &client, &mut plan).await?;
    progress.step("KuryrPorts");
    kuryrnetworks(a, &client, &mut plan).await?;
    progress.step("KuryrNetworks");
    kuryrloadbalancers(a, &client, &mut plan).await?;
    progress.step("KuryrLoadBalancers");
    progress.finish();
    let actions = plan.actions;
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

async fn kuryrports(a: &MigrateArgs, client: &kube::Client, plan: &mut Plan<'_>) -> anyhow::Result<()> {
    let api: Api<KuryrPort> = scoped(client, a.namespace.as_deref());
    let kps = api.list(&ListParams::default()).await?.items;
    if kps.is_empty() {
        return Ok(());
    }
    // port id -> (trunk id, VLAN)
    let on_trunk: BTreeMap<String, (String, u32)> = trunks::list(plan.cloud, Filter::new())
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
                    plan.record(&object, format!("status: trunkId {trunk}"), &vif.port_id);
                }
            }
            let port = match ports::get(plan.cloud, &vif.port_id).await {
                Ok(p) => p,
                Err(e) if e.is_not_found() => continue,
                Err(e) => return Err(e.into()),
            };
            let owner = Owner::new(plan.cluster_id, OwnerKind::KuryrPort.as_str(), &pod_uid);
            plan.adopt(
                &object,
                format!("tag port {}/{pod_uid}", OwnerKind::KuryrPort),
                Untagged::Neutron(Resource::Ports, &port.id, &port.tags),
                &owner,
            )
            .await?;
        }
        if changed && plan.apply {
            kp.status = Some(st);
            api.replace_status(&kp.name_any(), &PostParams::default(), &kp)
                .await?;
        }
    }
    Ok(())
}

async fn kuryrnetworks(a: &MigrateArgs, client: &kube::Client, plan: &mut Plan<'_>) -> anyhow::Result<()> {
    let api: Api<KuryrNetwork> = scoped(client, a.namespace.as_deref());
    for kn in api.list(&ListParams::default()).await?.items {
        let object = format!("{}/{}", kn.namespace().unwrap_or_default(), kn.name_any());
        let owner = Owner::new(
            plan.cluster_id,
            OwnerKind::KuryrNetwork.as_str(),
            kn.uid().unwrap_or_default(),
        );
        let st = kn.status.clone().unwrap_or_default();
        if let Some(id) = &st.net_id {
            if let Ok(n) = networks::get(plan.cloud, id).await {
                let obj = Untagged::Neutron(Resource::Networks, id, &n.tags);
                plan.adopt(&object, "tag network".into(), obj, &owner).await?;
            }
        }
        if let Some(id) = &st.subnet_id {
            if let Ok(s) = subnets::get(plan.cloud, id).await {
                let obj = Untagged::Neutron(Resource::Subnets, id, &s.tags);
                plan.adopt(&object, "tag subnet".into(), obj, &owner).await?;
            }
        }
    }
    Ok(())
}

async fn kuryrloadbalancers(
    a: &MigrateArgs,
    client: &kube::Client,
    plan: &mut Plan<'_>,
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
        let Ok(lb) = loadbalancers::get(plan.cloud, &lb_id).await else {
            continue;
        };
        let owner = Owner::new(plan.cluster_id, OwnerKind::Service.as_str(), &svc_uid);
        let obj = Untagged::LoadBalancer(&lb_id, &lb.tags);
        plan.adopt(&object, "tag load balancer".into(), obj, &owner)
            .await?;
    }
    Ok(())
}
