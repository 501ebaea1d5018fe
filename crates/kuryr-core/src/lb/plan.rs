//! Desired vs observed → the Octavia writes that close the gap, in the order they must run. Every write
//! puts the load balancer in PENDING_UPDATE until the provider is done, so the controller carries out the
//! first op, waits for the tree to be ACTIVE again, observes, and plans anew: changes that arrive in the
//! meantime fold into the next plan instead of queueing behind each other.

use std::collections::BTreeMap;

use super::fit::{batches, creatable, Fit};
use super::model::{
    DesiredHm, DesiredLb, DesiredListener, DesiredPool, ListenerKey, MemberKey, MemberSubnets, ObservedLb,
    SessionPersistence,
};

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    /// One POST with listeners, pools, members and health monitors (as many members as fit the body).
    CreateLoadBalancer(DesiredLb),
    /// Cascade delete and build again (provider or VIP changed).
    Recreate {
        reason: String,
    },
    DeletePool {
        id: String,
    },
    DeleteListener {
        id: String,
    },
    CreateListener {
        key: ListenerKey,
        listener: DesiredListener,
    },
    /// The listener's default pool, without members (they follow in one batch).
    CreatePool {
        listener_id: String,
        key: ListenerKey,
        pool: DesiredPool,
    },
    UpdateListener {
        id: String,
        timeout_client_data: Option<u64>,
        timeout_member_data: Option<u64>,
        /// `Some` only when they change (the ovn provider refuses the attribute altogether).
        allowed_cidrs: Option<Vec<String>>,
    },
    /// Algorithm and session persistence (`None` clears it).
    UpdatePool {
        id: String,
        lb_algorithm: String,
        session_persistence: Option<SessionPersistence>,
    },
    /// The pool's whole member set in one call.
    ReplaceMembers {
        pool_id: String,
        members: BTreeMap<MemberKey, String>,
        subnets: MemberSubnets,
        /// Members the pool had that the set leaves out: the provider removes them too (the ovn provider
        /// one by one), so they count for the pending allowance.
        removed: usize,
    },
    /// Members added (or updated) in one call, the pool's others left alone (a set too large for one body).
    AddMembers {
        pool_id: String,
        members: BTreeMap<MemberKey, String>,
        subnets: MemberSubnets,
    },
    DeleteMember {
        pool_id: String,
        id: String,
    },
    CreateHealthMonitor {
        pool_id: String,
        hm: DesiredHm,
    },
    /// Also how a monitor is changed: ovn 19 leaves the listener PENDING_UPDATE after an in-place update.
    DeleteHealthMonitor {
        id: String,
    },
}

impl Op {
    /// Short name for logs and metrics.
    pub fn kind(&self) -> &'static str {
        match self {
            Op::CreateLoadBalancer(_) => "create_loadbalancer",
            Op::Recreate { .. } => "recreate",
            Op::DeletePool { .. } => "delete_pool",
            Op::DeleteListener { .. } => "delete_listener",
            Op::CreateListener { .. } => "create_listener",
            Op::CreatePool { .. } => "create_pool",
            Op::UpdateListener { .. } => "update_listener",
            Op::UpdatePool { .. } => "update_pool",
            Op::ReplaceMembers { .. } => "replace_members",
            Op::AddMembers { .. } => "add_members",
            Op::DeleteMember { .. } => "delete_member",
            Op::CreateHealthMonitor { .. } => "create_healthmonitor",
            Op::DeleteHealthMonitor { .. } => "delete_healthmonitor",
        }
    }

    /// Objects the provider makes, changes or removes for the op: listeners, pools, health monitors
    /// and members. The ovn provider handles them one by one, about a second each on a busy host
    /// (a create of 100 listeners with a pool and a member each took five minutes on the lab), so the
    /// time a write may stay pending grows with this count.
    pub fn objects(&self) -> usize {
        match self {
            Op::CreateLoadBalancer(lb) => lb
                .listeners
                .values()
                .map(|l| 2 + usize::from(l.pool.health_monitor.is_some()) + l.pool.members.len())
                .sum(),
            Op::ReplaceMembers { members, removed, .. } => members.len() + removed,
            Op::AddMembers { members, .. } => members.len(),
            Op::Recreate { .. } => 0,
            _ => 1,
        }
    }

    /// Whether the op touches members only (listeners, pools and monitors stay as they were read).
    pub fn members_only(&self) -> bool {
        matches!(
            self,
            Op::ReplaceMembers { .. } | Op::AddMembers { .. } | Op::DeleteMember { .. }
        )
    }
}

/// The create of a new load balancer: the whole tree when it fits one request (see [`super::fit`]).
pub fn create_op(desired: &DesiredLb, fit: &dyn Fit) -> Op {
    Op::CreateLoadBalancer(creatable(desired, fit))
}

/// Every op needed, in order, each fitting one request. Empty: Octavia matches the spec.
pub fn plan(desired: &DesiredLb, observed: Option<&ObservedLb>, fit: &dyn Fit) -> Vec<Op> {
    let Some(obs) = observed else {
        return vec![create_op(desired, fit)];
    };
    if let Some(p) = desired.provider.as_deref() {
        if !obs.provider.is_empty() && obs.provider != p {
            return vec![Op::Recreate {
                reason: format!("provider changed from {} to {p}", obs.provider),
            }];
        }
    }
    if let Some(vip) = desired.vip_address.as_deref() {
        if !obs.vip_address.is_empty() && obs.vip_address != vip {
            return vec![Op::Recreate {
                reason: format!("VIP changed from {} to {vip}", obs.vip_address),
            }];
        }
    }
    // Octavia cannot change a load balancer's additional VIPs: a Service that became dual-stack (or single)
    // gets a new one.
    let mut want_vips: Vec<&str> = desired
        .additional_vips
        .iter()
        .map(|v| v.ip_address.as_str())
        .collect();
    want_vips.sort_unstable();
    if !obs.vip_address.is_empty() && want_vips != obs.additional_vips {
        return vec![Op::Recreate {
            reason: format!(
                "additional VIPs changed from {:?} to {want_vips:?}",
                obs.additional_vips
            ),
        }];
    }
    let mut ops = Vec::new();
    // Removals first: they free ports and never depend on anything else.
    for (key, l) in &obs.listeners {
        if !desired.listeners.contains_key(key) {
            if let Some(p) = &l.pool {
                ops.push(Op::DeletePool { id: p.id.clone() });
            }
            ops.push(Op::DeleteListener { id: l.id.clone() });
        }
    }
    for id in &obs.orphan_pools {
        ops.push(Op::DeletePool { id: id.clone() });
    }
    for (key, want) in &desired.listeners {
        let Some(have) = obs.listeners.get(key) else {
            ops.push(Op::CreateListener {
                key: *key,
                listener: want.clone(),
            });
            continue;
        };
        let differs = |have: Option<u64>, want: Option<u64>| want.is_some() && have != want;
        let cidrs_differ = sorted(&have.allowed_cidrs) != sorted(&want.allowed_cidrs);
        if differs(have.timeout_client_data, want.timeout_client_data)
            || differs(have.timeout_member_data, want.timeout_member_data)
            || cidrs_differ
        {
            ops.push(Op::UpdateListener {
                id: have.id.clone(),
                timeout_client_data: want.timeout_client_data,
                timeout_member_data: want.timeout_member_data,
                allowed_cidrs: cidrs_differ.then(|| want.allowed_cidrs.clone()),
            });
        }
        let Some(pool) = &have.pool else {
            ops.push(Op::CreatePool {
                listener_id: have.id.clone(),
                key: *key,
                pool: want.pool.clone(),
            });
            continue;
        };
        let persistence_differs = match (&want.pool.session_persistence, &pool.session_persistence) {
            (Some(w), Some(h)) => !w.satisfied_by(h),
            (w, h) => w.is_some() != h.is_some(),
        };
        if pool.lb_algorithm != want.pool.lb_algorithm || persistence_differs {
            ops.push(Op::UpdatePool {
                id: pool.id.clone(),
                lb_algorithm: want.pool.lb_algorithm.clone(),
                session_persistence: want.pool.session_persistence.clone(),
            });
        }
        ops.extend(member_ops(&pool.id, &want.pool, &pool.members, fit));
        match (&pool.health_monitor, &want.pool.health_monitor) {
            (None, Some(hm)) => ops.push(Op::CreateHealthMonitor {
                pool_id: pool.id.clone(),
                hm: hm.clone(),
            }),
            (Some(have), want) if !want.as_ref().is_some_and(|w| hm_matches(&have.spec, w)) => {
                ops.push(Op::DeleteHealthMonitor { id: have.id.clone() });
            }
            _ => {}
        }
    }
    ops
}

/// The writes that make a pool's members `want`'s, each fitting one body (the choice is explained in
/// [`super::fit`]).
fn member_ops(
    pool_id: &str,
    want: &DesiredPool,
    have: &BTreeMap<MemberKey, String>,
    fit: &dyn Fit,
) -> Vec<Op> {
    let same = have.len() == want.members.len() && want.members.keys().all(|k| have.contains_key(k));
    if same {
        return Vec::new();
    }
    let subnets = &want.member_subnets;
    let all: Vec<(&MemberKey, &String)> = want.members.iter().collect();
    let replace = |members: BTreeMap<MemberKey, String>| Op::ReplaceMembers {
        pool_id: pool_id.to_owned(),
        removed: have.keys().filter(|k| !members.contains_key(*k)).count(),
        members,
        subnets: want.member_subnets.clone(),
    };
    let add = |members| Op::AddMembers {
        pool_id: pool_id.to_owned(),
        members,
        subnets: want.member_subnets.clone(),
    };
    if fit.members_fitting(&all, subnets) >= all.len() {
        return vec![replace(want.members.clone())];
    }
    let (kept, missing): (Vec<_>, Vec<_>) = all.iter().copied().partition(|(k, _)| have.contains_key(*k));
    let stale: Vec<&String> = have
        .iter()
        .filter(|(k, _)| !want.members.contains_key(*k))
        .map(|(_, id)| id)
        .collect();
    let adding = batches(&missing, subnets, fit);
    let reset_order: Vec<(&MemberKey, &String)> = kept.into_iter().chain(missing.iter().copied()).collect();
    let resetting = batches(&reset_order, subnets, fit);
    if adding.len() + stale.len() <= resetting.len() {
        let mut ops: Vec<Op> = adding.into_iter().map(add).collect();
        ops.extend(stale.into_iter().map(|id| Op::DeleteMember {
            pool_id: pool_id.to_owned(),
            id: id.clone(),
        }));
        ops
    } else {
        let mut bodies = resetting.into_iter();
        let first = bodies.next().map(replace);
        first.into_iter().chain(bodies.map(add)).collect()
    }
}

fn sorted(v: &[String]) -> Vec<&String> {
    let mut v: Vec<&String> = v.iter().collect();
    v.sort();
    v
}

/// Octavia fills in what was not asked for (`max_retries_down` 3, HTTP fields on HTTP monitors): only what
/// the spec names is compared.
fn hm_matches(have: &DesiredHm, want: &DesiredHm) -> bool {
    let same = |h: &Option<String>, w: &Option<String>| w.is_none() || h == w;
    have.kind == want.kind
        && have.delay == want.delay
        && have.timeout == want.timeout
        && have.max_retries == want.max_retries
        && (want.max_retries_down.is_none() || have.max_retries_down == want.max_retries_down)
        && same(&have.url_path, &want.url_path)
        && same(&have.expected_codes, &want.expected_codes)
}
