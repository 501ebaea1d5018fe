//! Desired vs observed → the Octavia writes that close the gap, in the order they must run. Every write
//! puts the load balancer in PENDING_UPDATE until the provider is done, so the controller carries out the
//! first op, waits for the tree to be ACTIVE again, observes, and plans anew: changes that arrive in the
//! meantime fold into the next plan instead of queueing behind each other.

use std::collections::BTreeMap;

use super::model::{DesiredHm, DesiredLb, DesiredListener, DesiredPool, ListenerKey, MemberKey, ObservedLb};

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    /// One POST with listeners, pools, members and health monitors.
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
        session_persistence: Option<String>,
    },
    /// The pool's whole member set in one call.
    ReplaceMembers {
        pool_id: String,
        members: BTreeMap<MemberKey, String>,
        subnet_id: Option<String>,
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
            Op::CreateHealthMonitor { .. } => "create_healthmonitor",
            Op::DeleteHealthMonitor { .. } => "delete_healthmonitor",
        }
    }
}

/// Every op needed, in order. Empty: Octavia matches the spec.
pub fn plan(desired: &DesiredLb, observed: Option<&ObservedLb>) -> Vec<Op> {
    let Some(obs) = observed else {
        return vec![Op::CreateLoadBalancer(desired.clone())];
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
        if pool.lb_algorithm != want.pool.lb_algorithm
            || pool.session_persistence != want.pool.session_persistence
        {
            ops.push(Op::UpdatePool {
                id: pool.id.clone(),
                lb_algorithm: want.pool.lb_algorithm.clone(),
                session_persistence: want.pool.session_persistence.clone(),
            });
        }
        let same_members = pool.members.len() == want.pool.members.len()
            && want.pool.members.keys().all(|k| pool.members.contains_key(k));
        if !same_members {
            ops.push(Op::ReplaceMembers {
                pool_id: pool.id.clone(),
                members: want.pool.members.clone(),
                subnet_id: want.pool.member_subnet_id.clone(),
            });
        }
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
