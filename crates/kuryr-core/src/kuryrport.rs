//! What the KuryrPort controller decides about one KuryrPort: the pod facts its drivers plan with, the
//! status it writes (the VIF entries and the `Ready` condition), the pool a port belongs to, and the steps
//! that give a pod's port back when the KuryrPort is finalized.

use std::collections::BTreeSet;

use kuryr_api::conditions::{self, Condition, ConditionStatus};
use kuryr_api::k8s_openapi::jiff::Timestamp;
use kuryr_api::port::DEFAULT_IFNAME;
use kuryr_api::vif::{Vif, VifType};
use kuryr_api::{KuryrPort, KuryrPortStatus, PodVif};

use crate::error::CoreError;
use crate::pool::{Pool, PoolKey, PoolParent, ReleaseDecision};
use crate::pool_sizing::PoolLimits;
use crate::vif::PodFacts;

/// `Ready` reasons besides the [`CoreError::reason`] of a failure.
pub const REASON_ALLOCATING: &str = "Allocating";
pub const REASON_WAITING_FOR_ACTIVE: &str = "WaitingForActivePort";
pub const REASON_ACTIVE: &str = "PortsActive";

/// The pod's facts as its KuryrPort records them (the KuryrPort controller may not have the Pod at hand).
pub fn facts(
    kp: &KuryrPort,
    project_id: &str,
    security_groups: impl IntoIterator<Item = String>,
) -> Result<PodFacts, CoreError> {
    let namespace = kp.metadata.namespace.clone().unwrap_or_default();
    let name = kp.metadata.name.clone().unwrap_or_default();
    if kp.spec.pod_node_name.is_empty() {
        return Err(CoreError::PodNotScheduled { namespace, name });
    }
    Ok(PodFacts {
        namespace,
        name,
        uid: kp.spec.pod_uid.clone(),
        node_name: kp.spec.pod_node_name.clone(),
        project_id: project_id.to_owned(),
        security_groups: security_groups.into_iter().collect(),
    })
}

/// Records `vif` as interface `ifname` (`eth0` is the default one). Returns whether anything changed, so
/// a no-op status write can be skipped.
pub fn set_vif(status: &mut KuryrPortStatus, ifname: &str, vif: Vif) -> bool {
    let entry = Box::new(PodVif {
        default: ifname == DEFAULT_IFNAME,
        vif,
    });
    if status.vifs.get(ifname) == Some(&entry) {
        return false;
    }
    status.vifs.insert(ifname.to_owned(), entry);
    true
}

/// The `Ready` condition for `status`: false with the error's reason when the last attempt failed, false
/// while ports are missing or not ACTIVE yet, true once all are.
pub fn ready_condition(
    status: &KuryrPortStatus,
    failure: Option<&CoreError>,
    generation: Option<i64>,
    now: Timestamp,
) -> Condition {
    let (state, reason, message) = match failure {
        Some(e) => (ConditionStatus::False, e.reason(), e.to_string()),
        None if status.vifs.is_empty() => (
            ConditionStatus::False,
            REASON_ALLOCATING,
            "no port allocated yet".to_owned(),
        ),
        None if !status.all_active() => {
            let waiting: Vec<&str> = status
                .vifs
                .iter()
                .filter(|(_, v)| !v.vif.active)
                .map(|(n, _)| n.as_str())
                .collect();
            (
                ConditionStatus::False,
                REASON_WAITING_FOR_ACTIVE,
                format!("not ACTIVE yet: {}", waiting.join(", ")),
            )
        }
        None => (ConditionStatus::True, REASON_ACTIVE, String::new()),
    };
    Condition::new(conditions::READY, state, reason, message)
        .with_transition_time(now)
        .with_observed_generation(generation)
}

/// The pool a pod's port goes back to; `None` for types that are not pooled (macvlan, dpdk) and for
/// nested-vlan VIFs that lost their trunk id.
pub fn pool_key(vif: &Vif, node_name: &str, project_id: &str) -> Option<PoolKey> {
    let parent = match vif.vif_type {
        VifType::NestedVlan => PoolParent::Trunk(vif.trunk_id.clone()?),
        VifType::NeutronVif => PoolParent::Host(node_name.to_owned()),
        VifType::NestedMacvlan | VifType::NestedDpdk => return None,
    };
    Some(PoolKey {
        parent,
        network_id: vif.network_id.clone(),
        project_id: project_id.to_owned(),
    })
}

/// One cloud call (or bookkeeping step) of giving a port back, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReleaseStep {
    /// Set the pool's default SGs on the port before it is reused.
    ResetSecurityGroups {
        port_id: String,
        security_groups: BTreeSet<String>,
    },
    /// [`Pool::add_free`] the port (it stays a subport, keeping its VLAN).
    ReturnToPool { key: PoolKey, port_id: String },
    /// `remove_subports`, then [`VlanAllocator::release`](crate::vlan::VlanAllocator::release).
    RemoveSubport { trunk_id: String, port_id: String },
    /// Remove the pod IP's pair from the VM port ([`remove_pair`](crate::vrrp::remove_pair)), then
    /// [`VrrpMacs::release`](crate::vrrp::VrrpMacs::release).
    RemoveAddressPair { vm_port_id: String, ip: String },
    /// Delete the port (404 counts as done).
    DeletePort { port_id: String },
}

/// How to give back the port of `vif`. `pool` is the pool of [`pool_key`], when pooling is on: the port is
/// recycled there unless it is full; otherwise it is detached and deleted.
pub fn release_plan(vif: &Vif, pool: Option<&Pool>, limits: PoolLimits) -> Vec<ReleaseStep> {
    let port_id = vif.port_id.clone();
    if let Some(pool) = pool {
        let current: BTreeSet<String> = vif.security_group_ids.iter().cloned().collect();
        if let ReleaseDecision::Recycle { sg_reset } = pool.on_release(&current, limits) {
            let mut steps = Vec::new();
            if let Some(security_groups) = sg_reset {
                steps.push(ReleaseStep::ResetSecurityGroups {
                    port_id: port_id.clone(),
                    security_groups,
                });
            }
            steps.push(ReleaseStep::ReturnToPool {
                key: pool.key().clone(),
                port_id,
            });
            return steps;
        }
    }
    let mut steps = Vec::new();
    match vif.vif_type {
        VifType::NestedVlan => {
            if let Some(trunk_id) = vif.trunk_id.clone() {
                steps.push(ReleaseStep::RemoveSubport {
                    trunk_id,
                    port_id: port_id.clone(),
                });
            }
        }
        VifType::NestedMacvlan => {
            if let Some(vm_port_id) = vif.parent_port_id.clone() {
                for ip in &vif.ips {
                    steps.push(ReleaseStep::RemoveAddressPair {
                        vm_port_id: vm_port_id.clone(),
                        ip: ip.address.clone(),
                    });
                }
            }
        }
        VifType::NeutronVif | VifType::NestedDpdk => {}
    }
    steps.push(ReleaseStep::DeletePort { port_id });
    steps
}

#[cfg(test)]
mod tests;
