//! Floating IPs of type=LoadBalancer Services: one on the configured external network (or the Service's
//! `loadBalancerIP`), pointed at the VIP port, shown in the Service's `status.loadBalancer.ingress`;
//! released on delete (a user's own floating IP is only disassociated).

use kuryr_api::loadbalancer::{KuryrLoadBalancerStatus, LbPubIp, PubIpAllocMethod};
use kuryr_api::{Api, Patch, PatchParams, Service};
use kuryr_openstack::neutron::floating_ips::{self, CreateFloatingIp};
use kuryr_openstack::neutron::Filter;
use kuryr_openstack::Owner;
use serde_json::json;
use tracing::info;

use crate::errors::{Error, Result};
use crate::services::LbContext;

/// Makes the floating IP match `want` (attach to `vip_port_id`) or not; returns whether `st` changed.
pub async fn ensure(
    ctx: &LbContext,
    owner: &Owner,
    st: &mut KuryrLoadBalancerStatus,
    want: bool,
    lb_ip: Option<&str>,
    vip_port_id: &str,
) -> Result<bool> {
    let cloud = &ctx.cloud;
    match (&st.service_pub_ip_info, want) {
        (None, false) => Ok(false),
        (Some(_), false) => {
            release(ctx, owner, st).await?;
            Ok(true)
        }
        (Some(have), true) => {
            // Drift: re-point it if someone moved it.
            match floating_ips::get(cloud, &have.ip_id).await {
                Ok(f) if f.port_id.as_deref() == Some(vip_port_id) => Ok(false),
                Ok(f) => {
                    floating_ips::associate(cloud, &f.id, vip_port_id, None).await?;
                    Ok(false)
                }
                Err(e) if e.is_not_found() => {
                    st.service_pub_ip_info = None;
                    Ok(true)
                }
                Err(e) => Err(e.into()),
            }
        }
        (None, true) => {
            let (fip, method) = match lb_ip {
                Some(ip) => {
                    let found =
                        floating_ips::list(cloud, Filter::new().eq("floating_ip_address", ip)).await?;
                    match found.into_iter().next() {
                        Some(f) => {
                            let mine = Owner::from_tags(&f.tags).is_some_and(|o| o == *owner);
                            (
                                f,
                                if mine {
                                    PubIpAllocMethod::Pool
                                } else {
                                    PubIpAllocMethod::User
                                },
                            )
                        }
                        None => (create(ctx, owner, Some(ip)).await?, PubIpAllocMethod::Pool),
                    }
                }
                None => {
                    let tagged = floating_ips::list(cloud, Filter::new().tags(&owner.filter())).await?;
                    match tagged.into_iter().next() {
                        Some(f) => (f, PubIpAllocMethod::Pool),
                        None => (create(ctx, owner, None).await?, PubIpAllocMethod::Pool),
                    }
                }
            };
            if fip.port_id.as_deref() != Some(vip_port_id) {
                floating_ips::associate(cloud, &fip.id, vip_port_id, None).await?;
            }
            info!(fip = fip.floating_ip_address, "floating IP on the VIP");
            st.service_pub_ip_info = Some(LbPubIp {
                ip_id: fip.id,
                ip_addr: fip.floating_ip_address,
                alloc_method: method,
            });
            Ok(true)
        }
    }
}

async fn create(ctx: &LbContext, owner: &Owner, address: Option<&str>) -> Result<floating_ips::FloatingIp> {
    let net = ctx
        .config
        .external_network_id
        .clone()
        .ok_or_else(|| Error::Unsupported("type=LoadBalancer without --external-network".into()))?;
    let req = CreateFloatingIp {
        floating_network_id: net,
        floating_ip_address: address.map(str::to_owned),
        description: Some("kuryr-rs LoadBalancer Service".into()),
        project_id: ctx.project_id.clone(),
        ..CreateFloatingIp::default()
    };
    Ok(floating_ips::create(&ctx.cloud, &req, &owner.tags()?).await?)
}

/// Gives the floating IP back: deletes ours (and any other tagged for this Service), disassociates a user's.
pub async fn release(ctx: &LbContext, owner: &Owner, st: &mut KuryrLoadBalancerStatus) -> Result<()> {
    let cloud = &ctx.cloud;
    if let Some(info) = st.service_pub_ip_info.take() {
        match info.alloc_method {
            PubIpAllocMethod::Pool => floating_ips::delete(cloud, &info.ip_id).await?,
            PubIpAllocMethod::User => match floating_ips::disassociate(cloud, &info.ip_id).await {
                Err(e) if !e.is_not_found() => return Err(e.into()),
                _ => {}
            },
        }
    }
    for f in floating_ips::list(cloud, Filter::new().tags(&owner.filter())).await? {
        floating_ips::delete(cloud, &f.id).await?;
    }
    Ok(())
}

/// `status.loadBalancer.ingress` of the Service.
pub async fn publish(ctx: &LbContext, ns: &str, name: &str, ip: Option<&str>) -> Result<()> {
    let api: Api<Service> = Api::namespaced(ctx.client.clone(), ns);
    let ingress = match ip {
        Some(ip) => json!([{ "ip": ip }]),
        None => serde_json::Value::Null,
    };
    match api
        .patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"loadBalancer": {"ingress": ingress}}})),
        )
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(e) => Err(Error::kube("patch_service_status")(e)),
    }
}
