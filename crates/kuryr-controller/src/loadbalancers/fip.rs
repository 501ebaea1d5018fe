//! Floating IPs of type=LoadBalancer Services: one on the configured external network (or the Service's
//! `loadBalancerIP`), pointed at the VIP port, shown in the Service's `status.loadBalancer.ingress`;
//! released on delete (a user's own floating IP is only disassociated).

use kuryr_api::loadbalancer::{KuryrLoadBalancerStatus, LbPubIp, PubIpAllocMethod};
use kuryr_api::{Api, Patch, PatchParams, Service};
use kuryr_core::lb::allow;
use kuryr_core::lb::{claim_floating_ip, AllowList, ExistingFip, FipClaim, Problem};
use kuryr_openstack::neutron::floating_ips::{self, CreateFloatingIp};
use kuryr_openstack::neutron::Filter;
use kuryr_openstack::Owner;
use serde_json::json;
use tracing::info;

use crate::errors::{Error, Result};
use crate::services::context::LbContext;

/// Makes the floating IP match `want` (attach to `vip_port_id`) or not. A requested `lb_ip` goes through
/// the allow-list ([`claim_floating_ip`]): another project's, another object's or an already associated
/// floating IP is never taken; the refusal is returned (an Event and `Allowed=False`), the status is left
/// without a floating IP.
pub async fn ensure(
    ctx: &LbContext,
    owner: &Owner,
    st: &mut KuryrLoadBalancerStatus,
    want: bool,
    lb_ip: Option<&str>,
    vip_port_id: &str,
    allow: &AllowList,
) -> Result<Option<Problem>> {
    let cloud = &ctx.cloud;
    match (&st.service_pub_ip_info, want) {
        (None, false) => Ok(None),
        (Some(_), false) => {
            release(ctx, owner, st).await?;
            Ok(None)
        }
        (Some(have), true) => {
            // Drift: re-point ours if someone moved it; a user's floating IP that its owner moved elsewhere
            // is given up, not taken back.
            match floating_ips::get(cloud, &have.ip_id).await {
                Ok(f) if f.port_id.as_deref() == Some(vip_port_id) => Ok(None),
                Ok(f) if have.alloc_method == PubIpAllocMethod::User && f.port_id.is_some() => {
                    let port = f.port_id.unwrap_or_default();
                    st.service_pub_ip_info = None;
                    Ok(Some(Problem::new(
                        allow::LOAD_BALANCER_IP_NOT_ALLOWED,
                        format!(
                            "loadBalancerIP {}: its owner associated it with port {port}; given up",
                            f.floating_ip_address
                        ),
                    )))
                }
                Ok(f) => {
                    floating_ips::associate(cloud, &f.id, vip_port_id, None).await?;
                    Ok(None)
                }
                Err(e) if e.is_not_found() => {
                    st.service_pub_ip_info = None;
                    Ok(None)
                }
                Err(e) => Err(e.into()),
            }
        }
        (None, true) => {
            let (fip, method) = match lb_ip {
                Some(ip) => {
                    let mut found =
                        floating_ips::list(cloud, Filter::new().eq("floating_ip_address", ip)).await?;
                    let tagged =
                        |f: &floating_ips::FloatingIp| Owner::from_tags(&f.tags).map(|o| o == *owner);
                    // This Service's own first (a create whose status write was lost), else the first.
                    let pick = found.iter().position(|f| tagged(f) == Some(true)).unwrap_or(0);
                    let existing = found.get(pick).map(|f| ExistingFip {
                        network_id: &f.floating_network_id,
                        project_id: Some(f.project_id.as_str()).filter(|p| !p.is_empty()),
                        port_id: f.port_id.as_deref(),
                        tagged_for_us: tagged(f),
                    });
                    let project = ctx.project_id.clone().or_else(|| cloud.project_id());
                    match claim_floating_ip(ip, existing, allow, project.as_deref(), vip_port_id) {
                        FipClaim::Refused(p) => return Ok(Some(p)),
                        FipClaim::Create => (create(ctx, owner, Some(ip)).await?, PubIpAllocMethod::Pool),
                        FipClaim::Ours => (found.swap_remove(pick), PubIpAllocMethod::Pool),
                        FipClaim::Users => (found.swap_remove(pick), PubIpAllocMethod::User),
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
            Ok(None)
        }
    }
}

async fn create(ctx: &LbContext, owner: &Owner, address: Option<&str>) -> Result<floating_ips::FloatingIp> {
    let net = ctx
        .config
        .external_network_id
        .clone()
        .ok_or_else(|| Error::Config("type=LoadBalancer without --external-network".into()))?;
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
