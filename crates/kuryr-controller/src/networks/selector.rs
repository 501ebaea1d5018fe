//! The subnet a pod's port goes on: the default pod subnet, or (namespace mode) the namespace's, which the
//! KuryrNetwork controller makes (the first pod of a namespace asks for it and waits).

use std::time::Duration;

use kuryr_api::conditions::{is_condition_true, READY};
use kuryr_core::neutron::Subnet;
use kuryr_core::vif::PodFacts;
use kuryr_core::{NamespaceSubnets, SubnetSelector};
use kuryr_openstack::neutron::{networks, subnets};

use crate::context::Context;
use crate::convert;
use crate::errors::{Error, Result};
use crate::networks::{reconcile, SubnetMode};

/// The subnet for `pod`'s port, per the configured [`SubnetMode`].
pub async fn pod_subnet(ctx: &Context, pod: &PodFacts) -> Result<Subnet> {
    match ctx.config.networks.mode {
        SubnetMode::Default => default_subnet(ctx).await,
        SubnetMode::Namespace => {
            let subnet = namespace_subnet(ctx, &pod.namespace).await?;
            let sel = NamespaceSubnets {
                by_namespace: [(pod.namespace.clone(), subnet.id.clone())].into(),
            };
            Ok(sel.select(pod, std::slice::from_ref(&subnet))?.clone())
        }
    }
}

/// The configured pod subnet with its network's MTU, read once.
pub async fn default_subnet(ctx: &Context) -> Result<Subnet> {
    let s = ctx
        .networks
        .default_subnet
        .get_or_try_init(|| read_subnet(ctx, &ctx.config.pod_subnet_id))
        .await?;
    Ok(s.clone())
}

/// Subnet `id` as Neutron has it, with its network's MTU.
async fn read_subnet(ctx: &Context, id: &str) -> Result<Subnet> {
    let s = subnets::get(&ctx.cloud, id).await?;
    let n = networks::get(&ctx.cloud, &s.network_id).await?;
    Ok(convert::subnet(&s, &n))
}

/// An extra network's subnet (with its network's MTU), read once per process.
pub async fn additional_subnet(ctx: &Context, subnet_id: &str) -> Result<Subnet> {
    if let Some(s) = ctx.networks.additional(subnet_id) {
        return Ok(s);
    }
    let subnet = read_subnet(ctx, subnet_id).await?;
    ctx.networks.remember_additional(subnet_id, subnet.clone());
    Ok(subnet)
}

/// How long a pod waits for the KuryrNetwork controller to make its namespace's network before its
/// reconcile fails (and is retried).
const NETWORK_WAIT: Duration = Duration::from_secs(30);

/// The namespace's subnet (with its network's MTU): cached, else from a Ready KuryrNetwork's status, else
/// asked of the KuryrNetwork controller (the KuryrNetwork is created if missing, as the Namespace front end
/// does in eager mode) and waited for: only that controller makes Neutron networks and writes their status.
pub async fn namespace_subnet(ctx: &Context, namespace: &str) -> Result<Subnet> {
    if let Some(s) = ctx.networks.subnet(namespace) {
        return Ok(s);
    }
    let kn = reconcile::get_or_create(ctx, namespace).await?;
    if let Some(st) = kn
        .status
        .as_ref()
        .filter(|st| is_condition_true(&st.conditions, READY))
    {
        if let (Some(sid), Some(nid)) = (&st.subnet_id, &st.net_id) {
            let (s, n) = (
                subnets::get(&ctx.cloud, sid).await?,
                networks::get(&ctx.cloud, nid).await?,
            );
            let subnet = convert::subnet(&s, &n);
            ctx.networks.remember(namespace, subnet.clone());
            return Ok(subnet);
        }
    }
    ctx.networks
        .wait_subnet(namespace, NETWORK_WAIT)
        .await
        .ok_or_else(|| Error::NetworkNotReady(namespace.to_owned()))
}
