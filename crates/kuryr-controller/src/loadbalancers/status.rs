//! The KuryrLoadBalancer status: every Octavia id (from what [`super::octavia::observe`] read), the floating
//! IP, and the `Ready` and `Supported` conditions.

use kuryr_api::conditions::{set_condition, Condition, ConditionStatus, READY};
use kuryr_api::loadbalancer::{
    KuryrLoadBalancerStatus, LbAdditionalVip, LbListener, LbLoadBalancer, LbMember, LbPool, OperatingStatus,
    ProvisioningStatus,
};
use kuryr_api::{Api, KuryrLoadBalancer, Patch, PatchParams, ResourceExt};
use kuryr_core::lb::{ObservedLb, Problem};
use kuryr_openstack::octavia::loadbalancers::LoadBalancer;
use serde_json::json;

use crate::errors::{Error, Result};

/// Condition saying whether everything the Service asks for could be built.
pub const SUPPORTED: &str = "Supported";
/// Condition saying whether everything the Service asks for is within the operator's allow-lists.
pub const ALLOWED: &str = "Allowed";

fn parse<T: serde::de::DeserializeOwned>(s: &str) -> Option<T> {
    serde_json::from_value(json!(s)).ok()
}

/// `st` with the load balancer part replaced by what Octavia has (FIP and conditions kept).
/// Members listed in the status at most. A member row is ~230 bytes: 5,000 of them with the spec's copy of
/// the endpoints go over etcd's request limit (1.5 MiB by default), and the status write fails
/// ("etcdserver: request is too large"). Octavia is the record of members; the Ready message gives the
/// count (`member_count`).
pub const STATUS_MEMBERS_MAX: usize = 1000;

pub fn record(
    st: &mut KuryrLoadBalancerStatus,
    lb: &LoadBalancer,
    obs: Option<&ObservedLb>,
    subnet: Option<&str>,
) {
    st.loadbalancer = Some(LbLoadBalancer {
        id: lb.id.clone(),
        name: lb.name.clone(),
        ip: lb.vip_address.clone(),
        port_id: lb.vip_port_id.clone(),
        project_id: lb.project_id.clone(),
        provider: Some(lb.provider.clone()).filter(|p| !p.is_empty()),
        security_groups: Vec::new(),
        subnet_id: lb.vip_subnet_id.clone(),
        additional_vips: lb
            .additional_vips
            .iter()
            .map(|v| LbAdditionalVip {
                ip: v.ip_address.clone(),
                subnet_id: v.subnet_id.clone(),
            })
            .collect(),
        provisioning_status: parse::<ProvisioningStatus>(&lb.provisioning_status),
        operating_status: parse::<OperatingStatus>(&lb.operating_status),
    });
    let Some(obs) = obs else { return };
    st.listeners.clear();
    st.pools.clear();
    st.members.clear();
    for (key, l) in &obs.listeners {
        st.listeners.push(LbListener {
            id: l.id.clone(),
            loadbalancer_id: lb.id.clone(),
            name: l.name.clone(),
            port: i32::try_from(key.port).unwrap_or_default(),
            project_id: lb.project_id.clone(),
            protocol: key.protocol,
            timeout_client_data: l.timeout_client_data.and_then(|t| i32::try_from(t).ok()),
            timeout_member_data: l.timeout_member_data.and_then(|t| i32::try_from(t).ok()),
            allowed_cidrs: l.allowed_cidrs.clone(),
            provisioning_status: Some(ProvisioningStatus::Active),
        });
        let Some(p) = &l.pool else { continue };
        st.pools.push(LbPool {
            id: p.id.clone(),
            listener_id: Some(l.id.clone()),
            loadbalancer_id: lb.id.clone(),
            name: p.name.clone(),
            project_id: lb.project_id.clone(),
            protocol: key.protocol,
            lb_algorithm: Some(p.lb_algorithm.clone()),
            healthmonitor_id: p.health_monitor.as_ref().map(|h| h.id.clone()),
            provisioning_status: Some(ProvisioningStatus::Active),
        });
        for ((ip, port), id) in p
            .members
            .iter()
            .take(STATUS_MEMBERS_MAX.saturating_sub(st.members.len()))
        {
            st.members.push(LbMember {
                id: id.clone(),
                ip: ip.clone(),
                name: String::new(),
                pool_id: p.id.clone(),
                port: i32::try_from(*port).unwrap_or_default(),
                project_id: lb.project_id.clone(),
                subnet_id: subnet.unwrap_or_default().to_owned(),
                monitor_port: None,
                provisioning_status: Some(ProvisioningStatus::Active),
                operating_status: None,
            });
        }
    }
}

pub fn ready(
    st: &mut KuryrLoadBalancerStatus,
    generation: Option<i64>,
    ready: bool,
    reason: &str,
    msg: String,
) {
    set_condition(
        &mut st.conditions,
        Condition::new(READY, ConditionStatus::from_bool(ready), reason, msg)
            .with_observed_generation(generation),
    );
    if ready {
        st.observed_generation = generation;
    }
}

pub fn supported(st: &mut KuryrLoadBalancerStatus, generation: Option<i64>, problems: &[Problem]) {
    let c = match problems.first() {
        None => Condition::new(SUPPORTED, ConditionStatus::True, "AllSupported", ""),
        Some(first) => Condition::new(
            SUPPORTED,
            ConditionStatus::False,
            first.reason,
            problems
                .iter()
                .map(|p| p.message.as_str())
                .collect::<Vec<_>>()
                .join("; "),
        ),
    };
    set_condition(&mut st.conditions, c.with_observed_generation(generation));
}

/// The status names no load balancer any more (it is being replaced, or created anew).
pub fn forget_lb(st: &mut KuryrLoadBalancerStatus) {
    st.loadbalancer = None;
    st.listeners.clear();
    st.pools.clear();
    st.members.clear();
}

/// Writes the status subresource if it changed; the object's new resourceVersion when it did.
pub async fn write(
    api: &Api<KuryrLoadBalancer>,
    klb: &KuryrLoadBalancer,
    st: &KuryrLoadBalancerStatus,
) -> Result<Option<String>> {
    if klb.status.as_ref() == Some(st) {
        return Ok(None);
    }
    // Absent optional parts must be sent as null, or the merge patch keeps the old ones.
    let mut v = serde_json::to_value(st)?;
    if let Some(o) = v.as_object_mut() {
        for k in ["loadbalancer", "service_pub_ip_info"] {
            o.entry(k).or_insert(serde_json::Value::Null);
        }
    }
    api.patch_status(
        &klb.name_any(),
        &PatchParams::default(),
        &Patch::Merge(json!({ "status": v })),
    )
    .await
    .map(|k| k.resource_version())
    .map_err(Error::kube("patch_kuryrloadbalancer_status"))
}

/// `Allowed`: True, or False with the first refusal's reason and every refusal's message.
pub fn allowed(st: &mut KuryrLoadBalancerStatus, generation: Option<i64>, refused: &[Problem]) {
    let c = match refused.first() {
        None => Condition::new(ALLOWED, ConditionStatus::True, "AllAllowed", ""),
        Some(first) => Condition::new(
            ALLOWED,
            ConditionStatus::False,
            first.reason,
            refused
                .iter()
                .map(|p| p.message.as_str())
                .collect::<Vec<_>>()
                .join("; "),
        ),
    };
    set_condition(&mut st.conditions, c.with_observed_generation(generation));
}
