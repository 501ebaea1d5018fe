//! Which load balancer is ours: the one the status records, else one found by its ownership tags (a create
//! whose status write was lost, or a status cache that has not caught up). Its status tree is the one read
//! a poll makes (it 404s when the LB is gone); the LB object comes from the status, or the tag list.

use std::time::Instant;

use kuryr_api::loadbalancer::LbLoadBalancer;
use kuryr_core::lb::{ProvisioningStatus, RepairKind};
use kuryr_openstack::octavia::{loadbalancers, status as tree, IdRef};
use tracing::info;

use super::octavia;
use super::repair::repaired;
use super::round::{Next, Round};
use crate::errors::Result;

pub enum Located {
    /// Ours, with the status tree just read.
    Found(Box<loadbalancers::LoadBalancer>, tree::StatusTree),
    /// There is none in Octavia: build one.
    Missing,
    /// Not now: the round ends here.
    Again(Next),
}

pub async fn locate(round: &mut Round<'_>) -> Result<Located> {
    let ctx = round.ctx;
    // A replacement whose status write was lost (409, an API server restart) leaves the status naming the
    // load balancer given up on: go on as that write would have, or it is replaced a second time.
    if round
        .st
        .loadbalancer
        .as_ref()
        .is_some_and(|rec| ctx.schedule().is_abandoned(&rec.id))
    {
        super::status::forget_lb(&mut round.st);
    }
    let Some(rec) = round.st.loadbalancer.clone() else {
        // Let a new Service's endpoints burst settle before the tag list, so it is made once.
        if let Some(wait) = round.coalesce() {
            return Ok(Located::Again(Next::wait(wait)));
        }
        let Some(lb) = adopt(round).await? else {
            return Ok(Located::Missing);
        };
        return match tree::get(&ctx.cloud, &lb.id).await {
            Ok(t) => Ok(Located::Found(Box::new(lb), t)),
            // Gone since the list: build one.
            Err(e) if e.is_not_found() => Ok(Located::Missing),
            Err(e) => Err(e.into()),
        };
    };
    match tree::get(&ctx.cloud, &rec.id).await {
        Ok(t) => match from_status(&rec, &t) {
            Some(lb) => Ok(Located::Found(Box::new(lb), t)),
            // A status without the VIP or provider (written elsewhere): read the LB once.
            None => match loadbalancers::get(&ctx.cloud, &rec.id).await {
                Ok(lb) => Ok(Located::Found(Box::new(lb), t)),
                Err(e) if e.is_not_found() => Ok(Located::Again(Next::now())),
                Err(e) => Err(e.into()),
            },
        },
        Err(e) if e.is_not_found() => {
            ctx.schedule().forget_observed(&rec.id);
            // A replacement made while the status write was lost (a kill, an API server restart) holds the
            // Service's VIP: adopt it, or every create is refused for the address it holds.
            if let Some(lb) = adopt(round).await?.filter(|lb| lb.id != rec.id) {
                match tree::get(&ctx.cloud, &lb.id).await {
                    Ok(t) => {
                        info!(
                            lost = rec.id,
                            lb_id = lb.id,
                            "the recorded load balancer is gone; adopting the tagged one"
                        );
                        return Ok(Located::Found(Box::new(lb), t));
                    }
                    Err(e) if e.is_not_found() => {}
                    Err(e) => return Err(e.into()),
                }
            }
            repaired(
                round,
                RepairKind::Lost,
                format!("load balancer {} is gone; building it again", rec.id),
            )
            .await;
            Ok(Located::Missing)
        }
        Err(e) => Err(e.into()),
    }
}

/// The load balancer the status records, as far as the status and a fresh tree tell it (`None` when the
/// status lacks what the controller needs of it: VIP address and port, provider).
fn from_status(rec: &LbLoadBalancer, tree: &tree::StatusTree) -> Option<loadbalancers::LoadBalancer> {
    let provider = rec.provider.clone().filter(|p| !p.is_empty())?;
    if rec.ip.is_empty() || rec.port_id.is_empty() {
        return None;
    }
    let root = &tree.loadbalancer;
    let ids = |v: Vec<&str>| v.into_iter().map(|id| IdRef { id: id.to_owned() }).collect();
    Some(loadbalancers::LoadBalancer {
        id: rec.id.clone(),
        name: rec.name.clone(),
        project_id: rec.project_id.clone(),
        provider,
        vip_address: rec.ip.clone(),
        vip_port_id: rec.port_id.clone(),
        vip_subnet_id: rec.subnet_id.clone(),
        additional_vips: rec
            .additional_vips
            .iter()
            .map(|v| loadbalancers::AdditionalVip {
                subnet_id: v.subnet_id.clone(),
                ip_address: v.ip.clone(),
            })
            .collect(),
        provisioning_status: root.node.provisioning_status.clone(),
        operating_status: root.node.operating_status.clone(),
        listeners: ids(root.listeners.iter().map(|l| l.node.id.as_str()).collect()),
        pools: ids(root
            .listeners
            .iter()
            .flat_map(|l| l.pools.iter().map(|p| p.node.id.as_str()))
            .collect()),
        ..loadbalancers::LoadBalancer::default()
    })
}

/// A load balancer tagged for this Service that is not one we gave up on (nor one being deleted). The
/// observer's last listing answers for a Service this process never sent a create for: every load balancer
/// of the cluster was in it, so none of this owner there is none in Octavia (made by an earlier process,
/// it was there before this one listed) — one tag-filtered list saved per new Service.
async fn adopt(round: &Round<'_>) -> Result<Option<loadbalancers::LoadBalancer>> {
    let ctx = round.ctx;
    let uid = round.uid.as_str();
    // One lock at a time: the schedule's guard is not held while the index's is taken.
    let created = ctx.schedule().ever_created(uid);
    if !created && ctx.observer.index().lists_none_of(&round.owner.uid) {
        ctx.schedule().listed(uid, false, Instant::now());
        return Ok(None);
    }
    let mut found = octavia::find_tagged(&ctx.cloud, &round.owner).await?;
    let all = found.len();
    {
        let schedule = ctx.schedule();
        found.retain(|lb| {
            !schedule.is_abandoned(&lb.id)
                && ProvisioningStatus::parse(&lb.provisioning_status) != ProvisioningStatus::PendingDelete
        });
    }
    // The list just made tells whether there are strays: no second list for them until there is reason.
    ctx.schedule()
        .listed(uid, all > 1 || all > found.len(), Instant::now());
    if let Some(lb) = found.first() {
        info!(lb_id = lb.id, "load balancer found by its tags");
    }
    Ok(found.into_iter().next())
}
