//! The Neutron side of a namespace network. Every object carries the KuryrNetwork's ownership tags and is
//! looked up by them before anything is created, so a crash between two calls is completed by the next
//! reconcile instead of leaving a second network behind.

use kuryr_api::KuryrNetworkStatus;
use kuryr_core::neutron::{ROUTER_INTERFACE_DEVICE_OWNER as ROUTER_INTERFACE, SUBPORT_DEVICE_OWNER};
use kuryr_core::OwnerKind;
use kuryr_openstack::neutron::networks::{self, CreateNetwork, Network};
use kuryr_openstack::neutron::routers::{self, Interface};
use kuryr_openstack::neutron::subnetpools::{self, CreateSubnetPool};
use kuryr_openstack::neutron::subnets::{self, CreateSubnet, Subnet};
use kuryr_openstack::neutron::{ports, Filter};
use kuryr_openstack::Owner;
use tracing::info;

use crate::context::Context;
use crate::errors::{Error, Result};

/// Uid of the subnet pool this cluster creates when none is configured.
pub const POOL_UID: &str = "namespaces";

pub fn owner(ctx: &Context, kn_uid: &str) -> Owner {
    Owner::new(&ctx.config.cluster_id, OwnerKind::KuryrNetwork.as_str(), kn_uid)
}

/// What exists for one namespace.
#[derive(Clone, Debug, PartialEq)]
pub struct NamespaceNetwork {
    pub network: Network,
    pub subnet: Subnet,
    /// Dual-stack: the subnet of the other family.
    pub secondary: Option<Subnet>,
    pub router_id: String,
}

impl NamespaceNetwork {
    /// The KuryrNetwork status fields it fills.
    pub fn fill(&self, st: &mut KuryrNetworkStatus) {
        st.net_id = Some(self.network.id.clone());
        st.subnet_id = Some(self.subnet.id.clone());
        st.subnet_cidr = Some(self.subnet.cidr.clone());
        st.secondary_subnet_id = self.secondary.as_ref().map(|s| s.id.clone());
        st.secondary_subnet_cidr = self.secondary.as_ref().map(|s| s.cidr.clone());
        st.router_id = Some(self.router_id.clone());
    }

    /// Its subnets as pods take them (primary first), with the network's MTU.
    pub fn core_subnets(&self) -> Vec<kuryr_core::neutron::Subnet> {
        std::iter::once(&self.subnet)
            .chain(self.secondary.as_ref())
            .map(|s| kuryr_convert::subnet(s, &self.network))
            .collect()
    }
}

/// The configured subnet pool, or the one this cluster created (found by its tags), or a new one.
pub async fn subnet_pool(ctx: &Context) -> Result<String> {
    if let Some(id) = &ctx.config.networks.subnet_pool_id {
        return Ok(id.clone());
    }
    let id = ctx
        .networks
        .pool
        .get_or_try_init(|| async {
            let owner = Owner::new(&ctx.config.cluster_id, OwnerKind::SubnetPool.as_str(), POOL_UID);
            let found = subnetpools::list(&ctx.cloud, Filter::new().tags(&owner.filter())).await?;
            if let Some(p) = found.into_iter().next() {
                return Ok::<_, Error>(p.id);
            }
            let req = CreateSubnetPool {
                name: format!("kuryr-namespaces-{}", ctx.config.cluster_id),
                prefixes: ctx.config.networks.pool_prefixes.clone(),
                default_prefixlen: Some(ctx.config.networks.prefixlen),
                project_id: Some(ctx.project_id.clone()),
                ..CreateSubnetPool::default()
            };
            let p = subnetpools::create(&ctx.cloud, &req, &owner.tags()?).await?;
            info!(pool = p.id, prefixes = ?p.prefixes, "subnet pool for namespace subnets created");
            Ok(p.id)
        })
        .await?;
    Ok(id.clone())
}

/// The configured router, or the one the default pod subnet is plugged into.
pub async fn router(ctx: &Context) -> Result<String> {
    if let Some(id) = &ctx.config.networks.router_id {
        return Ok(id.clone());
    }
    let id = ctx
        .networks
        .router
        .get_or_try_init(|| async {
            let f = Filter::new()
                .eq("device_owner", ROUTER_INTERFACE)
                .fixed_ip_subnet(&ctx.config.pod_subnet_id);
            let found = ports::list(&ctx.cloud, f).await?;
            found.into_iter().next().map(|p| p.device_id).ok_or_else(|| {
                Error::Config(format!(
                    "namespace networks without --namespace-router: pod subnet {} has no router",
                    ctx.config.pod_subnet_id
                ))
            })
        })
        .await?;
    Ok(id.clone())
}

/// Finds or creates the namespace's network, subnet and router interface (each step idempotent); the
/// network and subnet in `project` (the namespace's: [`crate::projects`]).
pub async fn ensure(ctx: &Context, namespace: &str, kn_uid: &str, project: &str) -> Result<NamespaceNetwork> {
    let owner = owner(ctx, kn_uid);
    let tags = owner.tags()?;
    let mut nets = networks::list(&ctx.cloud, Filter::new().tags(&owner.filter())).await?;
    // Oldest first: a duplicate from a lost create answer is removed with the namespace.
    nets.sort_by(|a, b| a.id.cmp(&b.id));
    let network = match nets.into_iter().next() {
        Some(n) => n,
        None => {
            let req = CreateNetwork {
                project_id: Some(project.to_owned()),
                ..CreateNetwork::named(format!("kuryr-ns-{namespace}"))
            };
            let n = networks::create(&ctx.cloud, &req, &tags).await?;
            info!(namespace, network = n.id, "namespace network created");
            n
        }
    };
    let found = subnets::list(&ctx.cloud, Filter::new().eq("network_id", &network.id)).await?;
    let secondary_pool = ctx.config.networks.secondary_subnet_pool_id.clone();
    // The primary subnet is the one not from the secondary pool (an older subnet of a namespace made
    // before dual-stack was turned on is primary too).
    let (second, first): (Vec<Subnet>, Vec<Subnet>) = found
        .into_iter()
        .partition(|s| secondary_pool.is_some() && s.subnetpool_id.as_deref() == secondary_pool.as_deref());
    let subnet = match first.into_iter().next() {
        Some(s) => s,
        None => {
            let req = CreateSubnet {
                network_id: network.id.clone(),
                ip_version: 4,
                name: Some(format!("kuryr-ns-{namespace}")),
                subnetpool_id: Some(subnet_pool(ctx).await?),
                prefixlen: Some(ctx.config.networks.prefixlen),
                enable_dhcp: Some(false),
                project_id: Some(project.to_owned()),
                ..CreateSubnet::default()
            };
            create_subnet(ctx, namespace, &req, &tags).await?
        }
    };
    let secondary = match (&secondary_pool, second.into_iter().next()) {
        (None, _) => None,
        (Some(_), Some(s)) => Some(s),
        (Some(pool), None) => {
            let pool_version = subnetpools::get(&ctx.cloud, pool).await?.ip_version;
            let req = CreateSubnet {
                network_id: network.id.clone(),
                ip_version: pool_version,
                name: Some(format!("kuryr-ns-{namespace}-v{pool_version}")),
                subnetpool_id: Some(pool.clone()),
                enable_dhcp: Some(false),
                project_id: Some(project.to_owned()),
                ..CreateSubnet::default()
            };
            Some(create_subnet(ctx, namespace, &req, &tags).await?)
        }
    };
    let router_id = router(ctx).await?;
    let plugged = ports::list(
        &ctx.cloud,
        Filter::new()
            .eq("device_id", &router_id)
            .eq("network_id", &network.id),
    )
    .await?;
    for s in std::iter::once(&subnet).chain(secondary.as_ref()) {
        if !plugged
            .iter()
            .any(|p| p.fixed_ips.iter().any(|f| f.subnet_id == s.id))
        {
            routers::add_interface(&ctx.cloud, &router_id, &Interface::Subnet(s.id.clone())).await?;
            info!(
                namespace,
                router = router_id,
                subnet = s.id,
                "namespace subnet plugged into the router"
            );
        }
    }
    Ok(NamespaceNetwork {
        network,
        subnet,
        secondary,
        router_id,
    })
}

async fn create_subnet(
    ctx: &Context,
    namespace: &str,
    req: &CreateSubnet,
    tags: &[String],
) -> Result<Subnet> {
    let s = subnets::create(&ctx.cloud, req, tags).await?;
    info!(
        namespace,
        subnet = s.id,
        cidr = s.cidr,
        "namespace subnet created"
    );
    Ok(s)
}

/// Deletes everything tagged for the KuryrNetwork: kuryr's own leftover ports (pool ports, ports whose pod
/// is gone) are detached and deleted, the router interface removed, then subnets and networks. Ports of
/// pods still being released (`busy`) and foreign ports are waited for: returns how many (0: all gone).
pub async fn delete(ctx: &Context, kn_uid: &str, busy: &(dyn Fn(&str) -> bool + Sync)) -> Result<usize> {
    let owner = owner(ctx, kn_uid);
    let cluster_tag = Owner::cluster_filter(&ctx.config.cluster_id);
    let nets = networks::list(&ctx.cloud, Filter::new().tags(&owner.filter())).await?;
    let mut waiting = 0;
    for net in &nets {
        for p in ports::list(&ctx.cloud, Filter::new().eq("network_id", &net.id)).await? {
            let ours = cluster_tag.iter().all(|t| p.tags.contains(t));
            if p.device_owner == ROUTER_INTERFACE {
                routers::remove_interface(&ctx.cloud, &p.device_id, &Interface::Port(p.id.clone())).await?;
            } else if p.device_owner.starts_with("network:") {
                // DHCP / OVN metadata ports: Neutron deletes them with the network.
            } else if ours && !busy(&p.id) {
                if p.device_owner == SUBPORT_DEVICE_OWNER {
                    match p.device_id.as_str() {
                        "" => ctx.trunks.detach_anywhere(&ctx.cloud, &[&p.id]).await?,
                        trunk => ctx.trunks.detach(&ctx.cloud, trunk, &p.id).await?,
                    }
                }
                ports::delete(&ctx.cloud, &p.id).await?;
            } else {
                waiting += 1;
            }
        }
    }
    if waiting > 0 {
        return Ok(waiting);
    }
    for s in subnets::list(&ctx.cloud, Filter::new().tags(&owner.filter())).await? {
        subnets::delete(&ctx.cloud, &s.id).await?;
    }
    for n in &nets {
        networks::delete(&ctx.cloud, &n.id).await?;
        info!(network = n.id, "namespace network deleted");
    }
    Ok(0)
}
