//! The subnet a pod's port goes on: the default pod subnet, or (namespace mode) the namespace's, which the
//! KuryrNetwork controller makes (the first pod of a namespace asks for it and waits).

use std::time::Duration;

use kuryr_api::conditions::{is_condition_true, READY};
use kuryr_core::neutron::Subnet;
use kuryr_core::policy::Family;
use kuryr_core::vif::PodFacts;
use kuryr_core::{NamespaceSubnets, SubnetSelector};
use kuryr_openstack::neutron::{networks, subnets};

use crate::context::Context;
use crate::errors::{Error, Result};
use crate::networks::{reconcile, SubnetMode};
use kuryr_convert as convert;

/// The subnets for `pod`'s port, per the configured [`SubnetMode`]: one, or (dual-stack) one of each IP
/// family on one network, the primary first.
pub async fn pod_subnets(ctx: &Context, pod: &PodFacts) -> Result<Vec<Subnet>> {
    match ctx.config.networks.mode {
        SubnetMode::Default => default_subnets(ctx).await,
        SubnetMode::Namespace => {
            let subnets = namespace_subnets(ctx, &pod.namespace).await?;
            let primary = subnets.first().map(|s| s.id.clone()).unwrap_or_default();
            let sel = NamespaceSubnets {
                by_namespace: [(pod.namespace.clone(), primary)].into(),
            };
            sel.select(pod, &subnets)?;
            Ok(subnets)
        }
    }
}

/// The configured pod subnet (and the secondary one, dual-stack) with its network's MTU, read once.
pub async fn default_subnets(ctx: &Context) -> Result<Vec<Subnet>> {
    let s = ctx
        .networks
        .default_subnets
        .get_or_try_init(|| async {
            let mut out = vec![read_subnet(ctx, &ctx.config.pod_subnet_id).await?];
            if let Some(id) = &ctx.config.secondary_pod_subnet_id {
                out.push(read_subnet(ctx, id).await?);
            }
            kuryr_core::subnet::check_dual_stack(&out).map_err(Error::Config)?;
            Ok::<_, Error>(out)
        })
        .await?;
    Ok(s.clone())
}

/// The IP families pods have addresses of ([`crate::Config::pod_families`]; the pod subnet read for its family
/// in default mode).
pub async fn pod_families(ctx: &Context) -> Result<Vec<Family>> {
    let primary = match ctx.config.networks.mode {
        SubnetMode::Default => default_subnets(ctx)
            .await?
            .first()
            .and_then(kuryr_core::subnet::family_of)
            .unwrap_or(Family::V4),
        SubnetMode::Namespace => Family::V4,
    };
    Ok(ctx.config.pod_families(primary))
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

/// The namespace's subnets (with their network's MTU; two when dual-stack): cached, else from a Ready
/// KuryrNetwork's status, else asked of the KuryrNetwork controller (the KuryrNetwork is created if missing,
/// as the Namespace front end does in eager mode) and waited for: only that controller makes Neutron
/// networks and writes their status.
pub async fn namespace_subnets(ctx: &Context, namespace: &str) -> Result<Vec<Subnet>> {
    if let Some(s) = ctx.networks.subnets(namespace) {
        return Ok(s);
    }
    let kn = reconcile::get_or_create(ctx, namespace).await?;
    let dual = ctx.config.networks.secondary_subnet_pool_id.is_some();
    if let Some(st) = kn
        .status
        .as_ref()
        .filter(|st| is_condition_true(&st.conditions, READY))
        // Dual-stack turned on since: the controller's next round adds the second subnet.
        .filter(|st| !dual || st.secondary_subnet_id.is_some())
    {
        if let (Some(sid), Some(nid)) = (&st.subnet_id, &st.net_id) {
            let n = networks::get(&ctx.cloud, nid).await?;
            let mut out = vec![convert::subnet(&subnets::get(&ctx.cloud, sid).await?, &n)];
            if let Some(sid) = &st.secondary_subnet_id {
                out.push(convert::subnet(&subnets::get(&ctx.cloud, sid).await?, &n));
            }
            ctx.networks.remember(namespace, out.clone());
            return Ok(out);
        }
    }
    ctx.networks
        .wait_subnets(namespace, NETWORK_WAIT)
        .await
        .ok_or_else(|| Error::NetworkNotReady(namespace.to_owned()))
}
