//! Provisioning-status transitions. A change locks the load balancer (PENDING_*), and after the
//! provider's duration everything pending in its tree settles at once: PENDING_DELETE objects go,
//! the others become ACTIVE. LB faults can instead leave it stuck or end it in ERROR.

use serde_json::Value;

use super::model::{is_pending, ACTIVE, ERROR, NO_MONITOR, OFFLINE, ONLINE, PENDING_DELETE, PENDING_UPDATE};
use crate::errors::{ApiError, ApiResult};
use crate::faults::{LbOutcome, LbPhase};
use crate::state::{lock, Jobs, Shared};
use crate::util::octavia_now;
use crate::world::World;

pub fn lb_not_found(id: &str) -> ApiError {
    ApiError::oct_not_found("Load Balancer", id)
}

/// Locks the LB for a child change (Octavia's test_and_set): only an ACTIVE LB is mutable.
pub fn lock_for_child(w: &mut World, lb_id: &str, listener_ids: &[String]) -> ApiResult<()> {
    let lb = w.lbs.get_mut(lb_id).ok_or_else(|| lb_not_found(lb_id))?;
    if lb.provisioning_status != ACTIVE {
        return Err(ApiError::immutable("Load Balancer", lb_id));
    }
    lb.provisioning_status = PENDING_UPDATE.to_owned();
    lb.epoch += 1;
    lb.updated_at = Some(octavia_now());
    for l in listener_ids {
        if let Some(l) = w.listeners.get_mut(l) {
            if l.provisioning_status == ACTIVE {
                l.provisioning_status = PENDING_UPDATE.to_owned();
            }
        }
    }
    Ok(())
}

/// Listeners whose pools include `pool_id` (default pools).
pub fn listeners_of_pool(w: &World, pool_id: &str) -> Vec<String> {
    w.pools
        .get(pool_id)
        .map(|p| p.listeners.iter().map(|l| l.id.clone()).collect())
        .unwrap_or_default()
}

/// Schedules the end of the LB's current transition with the provider's timing, unless a fault
/// keeps it stuck. `items` adds the per-member cost of batch updates.
pub fn schedule(sh: &Shared, w: &World, jobs: &mut Jobs, lb_id: &str, phase: LbPhase, items: usize) {
    let Some(lb) = w.lbs.get(lb_id) else { return };
    let timing = jobs
        .profile
        .octavia
        .providers
        .get(&lb.provider)
        .cloned()
        .unwrap_or_default();
    let dist = match phase {
        LbPhase::Create => &timing.lb_create,
        LbPhase::Delete => &timing.delete,
        LbPhase::Update | LbPhase::Any => &timing.update,
    };
    let mut delay = jobs.delay(dist);
    for _ in 0..items {
        delay += jobs.delay(&timing.member_batch_per_item);
    }
    let outcome = lock(&sh.faults).roll_lb(phase, &lb.id, &lb.name, &lb.provider, &mut jobs.rng);
    let epoch = lb.epoch;
    let id = lb.id.clone();
    let current = move |w: &World| w.lbs.get(&id).is_some_and(|l| l.epoch == epoch);
    let id = lb.id.clone();
    match outcome {
        Some(LbOutcome::Stuck) => {}
        Some(LbOutcome::Error) => jobs.at(delay, move |w, _| {
            if current(w) {
                fail(w, &id);
            }
        }),
        None if phase == LbPhase::Delete => jobs.at(delay, move |w, _| {
            if current(w) {
                remove_lb(w, &id);
            }
        }),
        None if phase == LbPhase::Create && !timing.tree_extra.is_zero() => {
            let extra = timing.tree_extra.clone();
            jobs.at(delay, move |w, jobs| {
                if !current(w) {
                    return;
                }
                // The ovn provider reports the LB ACTIVE before its listeners, pools and members.
                if let Some(lb) = w.lbs.get_mut(&id) {
                    lb.provisioning_status = ACTIVE.to_owned();
                    lb.operating_status = if lb.admin_state_up { ONLINE } else { OFFLINE }.to_owned();
                }
                let children = tree_ids(w, &id);
                let d2 = jobs.delay(&extra);
                jobs.at(d2, move |w, _| settle_objects(w, &children));
            })
        }
        None if !timing.member_removal_lag.is_zero() => {
            let lag = timing.member_removal_lag.clone();
            jobs.at(delay, move |w, jobs| {
                if !current(w) {
                    return;
                }
                // ovn: the LB and pool read ACTIVE while removed members are still listed.
                let removed = settle_keeping_removed_members(w, &id);
                if !removed.is_empty() {
                    let d2 = jobs.delay(&lag);
                    jobs.at(d2, move |w, _| {
                        for m in &removed {
                            let gone = w
                                .members
                                .get(m)
                                .is_some_and(|x| x.provisioning_status == PENDING_DELETE);
                            if gone {
                                remove_member(w, m);
                            }
                        }
                    });
                }
            })
        }
        None => jobs.at(delay, move |w, _| {
            if current(w) {
                settle(w, &id);
            }
        }),
    }
}

/// `settle`, except that members being deleted stay, PENDING_DELETE; returns their ids.
fn settle_keeping_removed_members(w: &mut World, lb_id: &str) -> Vec<String> {
    let (listeners, pools, members, hms) = tree_ids(w, lb_id);
    let (removed, rest): (Vec<String>, Vec<String>) = members.into_iter().partition(|m| {
        w.members
            .get(m)
            .is_some_and(|x| x.provisioning_status == PENDING_DELETE)
    });
    settle_objects(w, &(listeners, pools, rest, hms));
    if let Some(lb) = w.lbs.get_mut(lb_id) {
        lb.provisioning_status = ACTIVE.to_owned();
        lb.operating_status = online(lb.admin_state_up);
        lb.updated_at = Some(octavia_now());
    }
    removed
}

/// Ids of every child in the LB's tree: (listeners, pools, members, health monitors).
type Tree = (Vec<String>, Vec<String>, Vec<String>, Vec<String>);

fn tree_ids(w: &World, lb_id: &str) -> Tree {
    let Some(lb) = w.lbs.get(lb_id) else {
        return Default::default();
    };
    let listeners = lb.listeners.iter().map(|l| l.id.clone()).collect();
    let pools: Vec<String> = lb.pools.iter().map(|p| p.id.clone()).collect();
    let mut members = Vec::new();
    let mut hms = Vec::new();
    for p in pools.iter().filter_map(|p| w.pools.get(p)) {
        members.extend(p.members.iter().map(|m| m.id.clone()));
        hms.extend(p.healthmonitor_id.clone());
    }
    (listeners, pools, members, hms)
}

fn online(admin_up: bool) -> String {
    if admin_up { ONLINE } else { OFFLINE }.to_owned()
}

/// Settles the given children (those still pending) without touching the LB.
fn settle_objects(w: &mut World, (listeners, pools, members, hms): &Tree) {
    for id in hms {
        match w.healthmonitors.get(id).map(|h| h.provisioning_status.clone()) {
            Some(s) if s == PENDING_DELETE => remove_hm(w, id),
            Some(s) if is_pending(&s) => {
                if let Some(h) = w.healthmonitors.get_mut(id) {
                    h.provisioning_status = ACTIVE.to_owned();
                    h.operating_status = online(h.admin_state_up);
                }
            }
            _ => {}
        }
    }
    for id in members {
        match w.members.get(id).map(|m| m.provisioning_status.clone()) {
            Some(s) if s == PENDING_DELETE => remove_member(w, id),
            Some(s) if is_pending(&s) => {
                let monitored = w
                    .members
                    .get(id)
                    .and_then(|m| w.pools.get(&m.pool_id))
                    .is_some_and(|p| p.healthmonitor_id.is_some());
                if let Some(m) = w.members.get_mut(id) {
                    m.provisioning_status = ACTIVE.to_owned();
                    m.operating_status = match (m.admin_state_up, monitored) {
                        (false, _) => OFFLINE,
                        (true, true) => ONLINE,
                        (true, false) => NO_MONITOR,
                    }
                    .to_owned();
                }
            }
            _ => {}
        }
    }
    for id in pools {
        match w.pools.get(id).map(|p| p.provisioning_status.clone()) {
            Some(s) if s == PENDING_DELETE => remove_pool(w, id),
            Some(s) if is_pending(&s) => {
                if let Some(p) = w.pools.get_mut(id) {
                    if std::mem::take(&mut p.fail_on_settle) {
                        p.provisioning_status = ERROR.to_owned();
                    } else {
                        p.provisioning_status = ACTIVE.to_owned();
                        p.operating_status = online(p.admin_state_up);
                    }
                }
            }
            _ => {}
        }
    }
    for id in listeners {
        match w.listeners.get(id).map(|l| l.provisioning_status.clone()) {
            Some(s) if s == PENDING_DELETE => remove_listener(w, id),
            Some(s) if is_pending(&s) => {
                if let Some(l) = w.listeners.get_mut(id) {
                    l.provisioning_status = ACTIVE.to_owned();
                    l.operating_status = online(l.admin_state_up);
                }
            }
            _ => {}
        }
    }
}

/// The whole tree and the LB back to ACTIVE.
pub fn settle(w: &mut World, lb_id: &str) {
    let tree = tree_ids(w, lb_id);
    settle_objects(w, &tree);
    if let Some(lb) = w.lbs.get_mut(lb_id) {
        lb.provisioning_status = ACTIVE.to_owned();
        lb.operating_status = online(lb.admin_state_up);
        lb.updated_at = Some(octavia_now());
    }
}

/// The provider failed: the LB and whatever was pending end in ERROR.
pub fn fail(w: &mut World, lb_id: &str) {
    let (listeners, pools, members, hms) = tree_ids(w, lb_id);
    macro_rules! err {
        ($map:expr, $ids:expr) => {
            for id in $ids {
                if let Some(o) = $map.get_mut(&id) {
                    if is_pending(&o.provisioning_status) {
                        o.provisioning_status = ERROR.to_owned();
                    }
                }
            }
        };
    }
    err!(w.listeners, listeners);
    err!(w.pools, pools);
    err!(w.members, members);
    err!(w.healthmonitors, hms);
    if let Some(lb) = w.lbs.get_mut(lb_id) {
        lb.provisioning_status = ERROR.to_owned();
        lb.operating_status = ERROR.to_owned();
        lb.updated_at = Some(octavia_now());
    }
}

/// Admin override (`/_sim/loadbalancers/{id}/status`); cancels pending timers.
pub fn force(w: &mut World, lb_id: &str, provisioning: &str, operating: Option<&str>) -> ApiResult<Value> {
    let lb = w.lbs.get_mut(lb_id).ok_or_else(|| lb_not_found(lb_id))?;
    lb.epoch += 1;
    match provisioning {
        ACTIVE => settle(w, lb_id),
        ERROR => fail(w, lb_id),
        other => lb.provisioning_status = other.to_owned(),
    }
    let lb = w.lbs.get_mut(lb_id).ok_or_else(|| lb_not_found(lb_id))?;
    if let Some(op) = operating {
        lb.operating_status = op.to_owned();
    }
    Ok(super::to_json(&*lb))
}

// === removal ===

pub fn remove_member(w: &mut World, id: &str) {
    if let Some(m) = w.members.remove(id) {
        if let Some(p) = w.pools.get_mut(&m.pool_id) {
            p.members.retain(|r| r.id != id);
        }
    }
}

pub fn remove_hm(w: &mut World, id: &str) {
    if let Some(h) = w.healthmonitors.remove(id) {
        if let Some(p) = w.pools.get_mut(&h.pool_id) {
            p.healthmonitor_id = None;
        }
    }
}

pub fn remove_pool(w: &mut World, id: &str) {
    let Some(p) = w.pools.remove(id) else { return };
    for m in &p.members {
        w.members.remove(&m.id);
    }
    if let Some(h) = &p.healthmonitor_id {
        w.healthmonitors.remove(h);
    }
    if let Some(lb) = w.lbs.get_mut(&p.lb_id) {
        lb.pools.retain(|r| r.id != id);
    }
    for l in &p.listeners {
        if let Some(l) = w.listeners.get_mut(&l.id) {
            if l.default_pool_id.as_deref() == Some(id) {
                l.default_pool_id = None;
            }
        }
    }
}

pub fn remove_listener(w: &mut World, id: &str) {
    let Some(l) = w.listeners.remove(id) else { return };
    if let Some(lb) = w.lbs.get_mut(&l.lb_id) {
        lb.listeners.retain(|r| r.id != id);
    }
    if let Some(p) = l.default_pool_id.and_then(|p| w.pools.get_mut(&p)) {
        p.listeners.retain(|r| r.id != id);
    }
}

/// Cascade: the LB, its tree, and the VIP port Octavia made.
pub fn remove_lb(w: &mut World, id: &str) {
    let (listeners, pools, _, _) = tree_ids(w, id);
    for l in &listeners {
        remove_listener(w, l);
    }
    for p in &pools {
        remove_pool(w, p);
    }
    if let Some(lb) = w.lbs.remove(id) {
        if lb.vip_owned {
            w.remove_port(&lb.vip_port_id);
        }
        for p in &lb.additional_vip_ports {
            w.remove_port(p);
        }
    }
}
