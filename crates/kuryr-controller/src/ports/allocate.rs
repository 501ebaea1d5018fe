//! How a KuryrPort's ports are made. What they are made from is looked up once (the VIF type and its driver,
//! the node's trunk or Neutron host, the project and SGs, each interface's subnets), then every port is made
//! in one pass: from a pool, or a port of the pod's own. Giving a port back is [`crate::ports::release`]'s.

use std::sync::Arc;

use kube::runtime::events::EventType;
use kuryr_api::port::DEFAULT_IFNAME;
use kuryr_api::{KuryrPort, Resource, Vif, VifType};
use kuryr_core::kuryrport::facts;
use kuryr_core::neutron::Subnet;
use kuryr_core::pool::{PoolKey, PoolParent};
use kuryr_core::vif::PodFacts;
use kuryr_core::{driver_for, VifDriver};
use tracing::warn;

use crate::context::Context;
use crate::errors::{Error, Result};
use crate::networks::selector;
use crate::ports::pool::{self, Target};
use crate::ports::trunk::Parent;
use crate::ports::{macvlan, nested_vlan, node_vif, podport};

/// The ports made in one round, the default interface's first. Each is lent ([`pool::Lent`]) until the
/// status names it or it went back, so the loose-port scan leaves it alone.
#[derive(Default)]
pub struct Made {
    /// (interface, VIF) of every port made.
    pub ports: Vec<(String, Vif)>,
    /// Held for their drop only.
    _lent: Vec<pool::Lent>,
}

/// How the ports of one pod are made.
enum Way {
    /// From the pool of (parent, network, project), whose ports `driver` makes. The parent: the node's trunk
    /// (nested-vlan), else the host (neutron-vif).
    Pooled {
        parent: Option<Parent>,
        driver: Box<dyn VifDriver + Send + Sync>,
    },
    /// A port of the pod's own, a subport of the node's trunk (nested-vlan).
    Subport(Parent),
    /// A port of the pod's own, its address paired on the VM's port (nested-macvlan).
    Paired,
    /// A port of the pod's own, bound to the node (neutron-vif): on the host Neutron names, when not the
    /// node's name.
    Bound(Option<String>),
}

/// What every port of one KuryrPort is made from.
struct Plan {
    pod: PodFacts,
    way: Way,
    /// Each interface with its subnets (one network): the default one, then the extra networks served.
    interfaces: Vec<(String, Vec<Subnet>)>,
    /// What the pod is wired without: (reason, message) of a Warning Event each.
    unwired: Vec<(&'static str, String)>,
}

/// Makes every port of `kp`, each put in `made` as soon as it exists, so that a failure after it gives it
/// back. What the VIF type cannot give the pod is told as a Warning Event, not failed.
pub async fn ports(ctx: &Arc<Context>, kp: &KuryrPort, made: &mut Made) -> Result<()> {
    let plan = plan(kp, ctx).await?;
    let pod = &plan.pod;
    for (ifname, subnets) in plan.interfaces {
        let vif = match &plan.way {
            Way::Pooled { parent, driver } => {
                let target = Target {
                    key: PoolKey {
                        parent: match parent {
                            Some(p) => PoolParent::Trunk(p.trunk_id.clone()),
                            None => PoolParent::Host(pod.node_name.clone()),
                        },
                        network_id: subnets.first().map(|s| s.network_id.clone()).unwrap_or_default(),
                        project_id: ctx.project_id.clone(),
                    },
                    node_name: pod.node_name.clone(),
                    parent: parent.clone(),
                    subnets,
                };
                pool::acquire(ctx, pod, driver.as_ref(), &target, &pod.security_groups).await?
            }
            Way::Subport(parent) => nested_vlan::create_subport(ctx, pod, parent, &subnets).await?,
            // One address per pod: see `macvlan::allocate`.
            Way::Paired => macvlan::allocate(ctx, pod, &subnets[..subnets.len().min(1)]).await?,
            Way::Bound(host) => podport::bound(ctx, pod, &subnets, host.as_deref()).await?,
        };
        made._lent.push(pool::Lent::new(ctx, &vif.port_id));
        made.ports.push((ifname, vif));
    }
    for (reason, msg) in plan.unwired {
        warn!("{msg}");
        let object = kp.object_ref(&());
        ctx.events
            .publish(&object, EventType::Warning, reason, "Wire", msg)
            .await;
    }
    Ok(())
}

/// Looks up what the ports of `kp` are made from. Pools hold the controller's project's ports: a pod of a
/// namespace in a project of its own gets ports of its own, made in that project.
async fn plan(kp: &KuryrPort, ctx: &Context) -> Result<Plan> {
    let vif_type = match kp.spec.vif_type {
        Some(t) => t,
        None => node_vif::of_node(ctx, &kp.spec.pod_node_name)?,
    };
    let neutron_host = node_vif::neutron_host(ctx, &kp.spec.pod_node_name);
    let project = crate::projects::recorded(ctx, kp.spec.project_id.as_deref());
    // Its KuryrPort's SGs when it names some, else the controller's defaults (resolved to ids, so pool ports
    // compare equal); in a namespace's own project, that project's `default` group (Neutron puts a port only
    // in groups of its own project).
    let sgs = match &kp.spec.security_group_ids {
        Some(ids) if !ids.is_empty() => ids.iter().cloned().collect(),
        _ if project != ctx.project_id => pool::project_default_sg(ctx, project).await?,
        _ => pool::default_sgs(ctx).await?,
    };
    let pod = facts(kp, project, sgs)?;
    let mut interfaces = vec![(DEFAULT_IFNAME.to_owned(), selector::pod_subnets(ctx, &pod).await?)];
    let mut unwired = Vec::new();
    let extra = &kp.spec.additional_networks;
    // Extra networks (`k8s.v1.cni.cncf.io/networks`): a port of its own each, a subport on a VLAN of its own
    // (nested-vlan) or a bound port (neutron-vif). nested-macvlan has only the VM's port, on the pod network.
    if matches!(vif_type, VifType::NestedVlan | VifType::NeutronVif) {
        for net in extra {
            let subnet = selector::additional_subnet(ctx, &net.subnet_id).await?;
            interfaces.push((net.interface.clone(), vec![subnet]));
        }
    } else if !extra.is_empty() {
        // The pod is served on its default network; the rest is told.
        let msg = format!(
            "{} additional network(s) not attached: VIF type {vif_type} gives a pod one port only \
             (nested-vlan and neutron-vif give more)",
            extra.len()
        );
        unwired.push(("AdditionalNetworksUnsupported", msg));
    }
    if vif_type == VifType::NestedMacvlan && ctx.config.dual_stack() {
        let msg = "dual-stack: wired with the pod subnet's family only (nested-macvlan pairs one address \
                   per pod on the VM's port; nested-vlan and neutron-vif give both)";
        unwired.push(("DualStackUnsupported", msg.to_owned()));
    }
    let driver = driver_for(vif_type, &ctx.config.driver)
        .ok_or_else(|| Error::Unsupported(format!("VIF type {vif_type}")))?;
    let pooled = ctx.config.pools_enabled && driver.pools_ports() && pod.project_id == ctx.project_id;
    let way = match vif_type {
        VifType::NestedVlan => {
            let node = ctx
                .node(&pod.node_name)
                .ok_or_else(|| Error::NodeNotFound(pod.node_name.clone()))?;
            let parent = ctx.trunks.parent_of(&ctx.cloud, &node).await?;
            if pooled {
                Way::Pooled {
                    parent: Some(parent),
                    driver,
                }
            } else {
                Way::Subport(parent)
            }
        }
        VifType::NeutronVif if pooled => Way::Pooled { parent: None, driver },
        VifType::NeutronVif => Way::Bound(neutron_host),
        VifType::NestedMacvlan => Way::Paired,
        VifType::NestedDpdk => return Err(Error::Unsupported("VIF type nested-dpdk".into())),
    };
    Ok(Plan {
        pod,
        way,
        interfaces,
        unwired,
    })
}
