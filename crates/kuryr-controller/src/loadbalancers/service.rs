//! The Service a KuryrLoadBalancer stands for: whose ownership tags its cloud objects carry, and where its
//! Events go besides the KuryrLoadBalancer.

use kuryr_api::{KuryrLoadBalancer, ObjectReference, ResourceExt};
use kuryr_core::owner::OwnerKind;
use kuryr_openstack::Owner;

use crate::services::context::LbContext;

/// The Service's ownership: its uid (from the owner reference), else the KuryrLoadBalancer's.
pub fn owner(ctx: &LbContext, klb: &KuryrLoadBalancer) -> Owner {
    let uid = klb
        .owner_references()
        .iter()
        .find(|o| o.kind == "Service")
        .map(|o| o.uid.clone())
        .or_else(|| klb.uid())
        .unwrap_or_default();
    Owner::new(&ctx.cluster_id, OwnerKind::Service.as_str(), uid)
}

pub fn service_ref(klb: &KuryrLoadBalancer) -> ObjectReference {
    ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Service".into()),
        name: klb.metadata.name.clone(),
        namespace: klb.metadata.namespace.clone(),
        uid: klb
            .owner_references()
            .iter()
            .find(|o| o.kind == "Service")
            .map(|o| o.uid.clone()),
        ..ObjectReference::default()
    }
}
