//! The subnet a pod's port goes on: the default pod subnet, or (namespace mode) the namespace's, whose
//! network is created right now if the first pod needs it before the KuryrNetwork controller made it.

use kuryr_core::neutron::Subnet;
use kuryr_core::vif::PodFacts;
use kuryr_core::{NamespaceSubnets, SubnetSelector};
use kuryr_openstack::neutron::{networks, subnets};

use crate::context::Context;
use crate::convert;
use crate::errors::Result;
use crate::networks::{driver, reconcile, SubnetMode};
use crate::ports::parent;

/// The subnet for `pod`'s port, per the configured [`SubnetMode`].
pub async fn pod_subnet(ctx: &Context, pod: &PodFacts) -> Result<Subnet> {
    match ctx.config.networks.mode {
        SubnetMode::Default => parent::pod_subnet(ctx).await,
        SubnetMode::Namespace => {
            let subnet = namespace_subnet(ctx, &pod.namespace).await?;
            let sel = NamespaceSubnets {
                by_namespace: [(pod.namespace.clone(), subnet.id.clone())].into(),
            };
            Ok(sel.select(pod, std::slice::from_ref(&subnet))?.clone())
        }
    }
}

/// The namespace's subnet (with its network's MTU): cached, else from the KuryrNetwork status, else made
/// now (KuryrNetwork created if missing, Neutron objects found by tags or created, status written).
pub async fn namespace_subnet(ctx: &Context, namespace: &str) -> Result<Subnet> {
    if let Some(s) = ctx.networks.subnet(namespace) {
        return Ok(s);
    }
    let lock = ctx.networks.lock_for(namespace);
    let _held = lock.lock().await;
    if let Some(s) = ctx.networks.subnet(namespace) {
        return Ok(s);
    }
    let kn = reconcile::get_or_create(ctx, namespace).await?;
    let st = kn.status.clone().unwrap_or_default();
    let subnet = match (&st.subnet_id, &st.net_id) {
        (Some(sid), Some(nid)) => {
            let (s, n) = (
                subnets::get(&ctx.cloud, sid).await?,
                networks::get(&ctx.cloud, nid).await?,
            );
            convert::subnet(&s, &n)
        }
        _ => {
            let uid = kn.metadata.uid.clone().unwrap_or_default();
            let made = driver::ensure(ctx, namespace, &uid).await?;
            reconcile::write_ready(ctx, &kn, &made).await?;
            convert::subnet(&made.subnet, &made.network)
        }
    };
    ctx.networks.remember(namespace, subnet.clone());
    Ok(subnet)
}
