//! The Service front end: one reconcile per Service, endpoints from the watch caches. `kuryr_core::lb`
//! decides the KuryrLoadBalancer spec (or why there is none); this writes it, owned by the Service.
//!
//! The Service carries no finalizer of ours: deleting it is immediate, as Kubernetes' conformance expects of
//! a ClusterIP Service (a deleted collection lists empty at once). The cloud side is held by the
//! KuryrLoadBalancer instead: the garbage collector deletes it with its owner, and its finalizer keeps it
//! until the load balancer is gone. A Service that still has the finalizer (set by earlier versions and by
//! upstream) loses it once its KuryrLoadBalancer has gone.

use std::sync::Arc;
use std::time::Duration;

use kube::api::{Patch, PatchParams, PostParams};
use kube::runtime::controller::Action;
use kube::runtime::events::EventType;
use kube::runtime::reflector::ObjectRef;
use kuryr_api::loadbalancer::LbEndpointSlice;
use kuryr_api::{finalizers, Api, KuryrLoadBalancer, ObjectMeta, Resource, ResourceExt, Service};
use kuryr_core::lb::{endpoints, service_spec, SpecDefaults};
use serde_json::json;
use tracing::{info, instrument};

use super::context::LbContext;
use super::service_of;
use crate::errors::{Error, Result};
use crate::toolkit::finalizer::{self, MANAGER};
use crate::toolkit::{delete_exact, Reconciled, Topic, Uid};

pub const CONTROLLER: &str = "service";
/// While the KuryrLoadBalancer is being deleted.
const WAIT_FOR_KLB: Duration = Duration::from_secs(1);
/// A new Service whose Endpoints the endpoints controller has not written yet: building its load balancer
/// now would cost a second write a moment later.
const ENDPOINTS_GRACE: Duration = Duration::from_secs(3);
const RESYNC: Duration = Duration::from_secs(600);

#[instrument(skip(svc, ctx), fields(namespace = svc.namespace(), name = svc.name_any()))]
pub async fn reconcile(svc: Arc<Service>, ctx: Arc<LbContext>) -> Result<Action> {
    ctx.metrics.reconciled(CONTROLLER);
    let ns = svc.namespace().ok_or(Error::MissingField("metadata.namespace"))?;
    let name = svc.name_any();
    let uid = Uid::of(svc.as_ref());
    let svcs: Api<Service> = Api::namespaced(ctx.client.clone(), &ns);
    let klbs: Api<KuryrLoadBalancer> = Api::namespaced(ctx.client.clone(), &ns);
    if !ctx.serves(&ns, &name).await? {
        // Another controller's namespace (`--namespace-selector`): neither built nor released here.
        return Ok(Action::requeue(RESYNC));
    }

    if svc.metadata.deletion_timestamp.is_some() {
        return release(&svcs, &klbs, &svc, &ctx).await;
    }
    if ctx.namespace_terminating(&ns) {
        // The load balancer goes with the namespace: no spec write for endpoints that are leaving too.
        return Ok(Action::await_change());
    }
    let publish = svc
        .spec
        .as_ref()
        .and_then(|s| s.publish_not_ready_addresses)
        .unwrap_or(false);
    let (slices, have_endpoints) = backends(&ctx, &ns, &name, publish);
    let defaults = SpecDefaults {
        subnet_id: Some(ctx.config.service_subnet_id.clone()),
        secondary_subnet_id: ctx.config.secondary_service_subnet_id.clone(),
        project_id: ctx.project_id.clone(),
        provider: ctx.config.provider.clone(),
        skip_default_kubernetes: !ctx.config.serves_default_kubernetes(),
    };
    let (spec, problems) = match service_spec(&svc, slices, &defaults) {
        Ok(found) => found,
        Err(skip) => {
            if ctx.ledger.news(&uid, Topic::Spec, vec![skip.reason().to_owned()]) {
                info!(reason = skip.reason(), "no load balancer: {}", skip.message());
                if skip != kuryr_core::lb::Skip::DefaultKubernetes {
                    ctx.events
                        .publish(
                            &svc.object_ref(&()),
                            EventType::Normal,
                            skip.reason(),
                            "SkipLoadBalancer",
                            skip.message(),
                        )
                        .await;
                }
            }
            // E.g. the type changed to ExternalName: the load balancer goes.
            return release(&svcs, &klbs, &svc, &ctx).await;
        }
    };
    let has_selector = svc
        .spec
        .as_ref()
        .and_then(|s| s.selector.as_ref())
        .is_some_and(|s| !s.is_empty());
    let existing = ctx.klb(&ns, &name)?;
    if existing.is_none() && has_selector && !have_endpoints && young(&svc) {
        return Ok(Action::requeue(Duration::from_millis(500)));
    }
    let messages: Vec<String> = problems
        .iter()
        .map(|p| format!("{}: {}", p.reason, p.message))
        .collect();
    if ctx.ledger.news(&uid, Topic::Annotations, messages) {
        for p in &kuryr_core::lb::Problem::by_reason(&problems) {
            ctx.events
                .publish(
                    &svc.object_ref(&()),
                    EventType::Warning,
                    p.reason,
                    "ReadService",
                    p.message.clone(),
                )
                .await;
        }
    }

    match existing {
        // The KuryrLoadBalancer of an earlier Service of this name, which the garbage collector has not
        // reached yet: it goes first (its load balancer with it), or this Service would take it over.
        Some(klb) if klb.metadata.deletion_timestamp.is_none() && !owned_by(&klb, &svc) => {
            delete_klb(&klbs, &klb).await?;
            return Ok(Action::requeue(WAIT_FOR_KLB));
        }
        None => {
            let klb = KuryrLoadBalancer {
                metadata: ObjectMeta {
                    name: Some(name.clone()),
                    namespace: Some(ns.clone()),
                    owner_references: svc.controller_owner_ref(&()).map(|o| vec![o]),
                    ..ObjectMeta::default()
                },
                spec,
                status: None,
            };
            let pp = PostParams {
                field_manager: Some(MANAGER.into()),
                ..PostParams::default()
            };
            match klbs.create(&pp, &klb).await {
                Ok(_) => info!("KuryrLoadBalancer created"),
                // The cache had not caught up with our own create yet: the next round patches it.
                Err(kube::Error::Api(s)) if s.code == 409 => {
                    return Ok(Action::requeue(Duration::from_millis(200)))
                }
                Err(e) => return Err(Error::kube("create_kuryrloadbalancer")(e)),
            }
        }
        Some(klb) if klb.metadata.deletion_timestamp.is_some() => {
            return Ok(Action::requeue(WAIT_FOR_KLB));
        }
        Some(klb) if klb.spec != spec => {
            let patch: json_patch::Patch =
                serde_json::from_value(json!([{"op": "replace", "path": "/spec", "value": spec}]))?;
            klbs.patch(&name, &PatchParams::default(), &Patch::<()>::Json(patch))
                .await
                .map_err(Error::kube("patch_kuryrloadbalancer"))?;
        }
        Some(_) => {}
    }
    ctx.ledger.succeeded(&uid);
    Ok(Action::requeue(RESYNC))
}

/// Whether `svc` is the KuryrLoadBalancer's owner (an upstream one without owner references counts).
fn owned_by(klb: &KuryrLoadBalancer, svc: &Service) -> bool {
    let owners = klb.owner_references();
    owners.is_empty() || owners.iter().any(|o| Some(&o.uid) == svc.metadata.uid.as_ref())
}

/// Deletes exactly this KuryrLoadBalancer (uid precondition); gone already is fine.
async fn delete_klb(klbs: &Api<KuryrLoadBalancer>, klb: &KuryrLoadBalancer) -> Result<()> {
    if delete_exact(klbs, klb)
        .await
        .map_err(Error::kube("delete_kuryrloadbalancer"))?
    {
        info!("KuryrLoadBalancer deleted");
    }
    Ok(())
}

/// Created less than [`ENDPOINTS_GRACE`] ago.
fn young(svc: &Service) -> bool {
    svc.metadata.creation_timestamp.as_ref().is_some_and(|t| {
        let age = kuryr_api::k8s_openapi::jiff::Timestamp::now().duration_since(t.0);
        age.as_secs_f64() < ENDPOINTS_GRACE.as_secs_f64()
    })
}

/// The Service's backends from its EndpointSlices, and whether it has any slice at all.
fn backends(ctx: &LbContext, ns: &str, name: &str, publish: bool) -> (Vec<LbEndpointSlice>, bool) {
    let svc = ObjectRef::<Service>::new(name).within(ns);
    let mine: Vec<_> = ctx
        .slices
        .state()
        .into_iter()
        .filter(|s| service_of(s).as_ref() == Some(&svc))
        .collect();
    let found = !mine.is_empty();
    (endpoints::from_slices(mine.iter().map(|s| &**s), publish), found)
}

/// Deletes the KuryrLoadBalancer (uid precondition) and lets the Service go once it is gone.
async fn release(
    svcs: &Api<Service>,
    klbs: &Api<KuryrLoadBalancer>,
    svc: &Service,
    ctx: &LbContext,
) -> Result<Action> {
    let name = svc.name_any();
    // Ask the server, not the cache: the Service may only go once the KuryrLoadBalancer really has.
    match klbs
        .get_opt(&name)
        .await
        .map_err(Error::kube("get_kuryrloadbalancer"))?
    {
        Some(klb) => {
            if klb.metadata.deletion_timestamp.is_none() {
                delete_klb(klbs, &klb).await?;
            }
            Ok(Action::requeue(WAIT_FOR_KLB))
        }
        None => {
            if finalizer::has(svc, finalizers::SERVICE) {
                finalizer::remove(svcs, svc, finalizers::SERVICE).await?;
                info!("load balancer gone, Service finalizer removed");
            }
            if svc.metadata.deletion_timestamp.is_some() {
                ctx.ledger.forget(&Uid::of(svc));
            }
            Ok(Action::await_change())
        }
    }
}

impl Reconciled for Service {
    const CONTROLLER: &'static str = CONTROLLER;
}
