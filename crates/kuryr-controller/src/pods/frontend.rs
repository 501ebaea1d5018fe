//! The Pod front end: one reconcile per Pod, on a reflector cache (the KuryrPort comes from the KuryrPort
//! controller's cache, not from a GET). `kuryr_core::pod::pod_actions` decides; this carries it out. The pod
//! carries no finalizer of ours (see `kuryr_core::pod`): its KuryrPort, owned by it, holds the ports; a pod
//! finalizer an earlier controller left is taken off once the KuryrPort is gone.

use std::sync::Arc;
use std::time::Duration;

use kube::runtime::controller::Action;
use kube::runtime::events::EventType;
use kuryr_api::k8s_openapi::jiff::Timestamp;
use kuryr_api::{finalizers, Api, KuryrPort, PostParams, Resource, ResourceExt, SlimPod};
use kuryr_core::pod::{self, FinalizerChange, KuryrPortChange};
use tracing::{debug, info, instrument};

use crate::context::Context;
use crate::errors::{Error, Result};
use crate::pods::attachments;
use crate::toolkit::finalizer::{self, MANAGER};
use crate::toolkit::{delete_exact, Reconciled, Topic, Uid};

pub const CONTROLLER: &str = "pod";

impl Reconciled for SlimPod {
    const CONTROLLER: &'static str = CONTROLLER;
}
/// While a KuryrPort is being deleted: look again soon, in case its deletion event reached the cache
/// before it reached this controller's trigger (or the other way round).
const WAIT_FOR_KURYRPORT: Duration = Duration::from_secs(1);
/// How long a KuryrPort this controller made may be missing from its cache before it is made again.
const CACHE_LAG: Duration = Duration::from_secs(5);
/// Latest next look at a terminating pod whose containers still run.
const DRAIN_LOOK: Duration = Duration::from_secs(30);
/// Re-check of a pod in another controller's namespace (it may be relabelled into the selector). A pod
/// settled here waits for a change instead: the decision reads only the Pod and KuryrPort caches, whose
/// watches bring every change, and a timer per pod held ~1.2 KB in the controller's scheduler.
const RESYNC: Duration = Duration::from_secs(600);

#[instrument(skip(pod, ctx), fields(namespace = pod.namespace(), name = pod.name_any()))]
pub async fn reconcile(pod: Arc<SlimPod>, ctx: Arc<Context>) -> Result<Action> {
    ctx.metrics.reconciled(CONTROLLER);
    let ns = pod.namespace().ok_or(Error::MissingField("metadata.namespace"))?;
    let name = pod.name_any();
    let uid = Uid::of(pod.as_ref());
    if !ctx.selected(&ns).await? {
        // Another controller's namespace: its pods are neither wired nor released here.
        return Ok(Action::requeue(RESYNC));
    }
    if let Some(left) = pod::draining_for(&pod, Timestamp::now()) {
        // Its containers still run: the network stays until the kubelet reports them stopped (that status
        // update comes back here) or the grace period ends.
        debug!(
            left_s = left.as_secs(),
            "terminating pod still running; keeping its ports"
        );
        return Ok(Action::requeue(left.min(DRAIN_LOOK)));
    }
    let kp = ctx.kuryrport(&ns, &name)?;
    let actions = pod::pod_actions(&pod, kp.as_ref());
    let pods: Api<SlimPod> = Api::namespaced(ctx.client.clone(), &ns);
    let kps: Api<KuryrPort> = Api::namespaced(ctx.client.clone(), &ns);
    if !pod::is_deleting(&pod) {
        tell_refused(&pod, &ctx).await;
    }

    if actions.kuryrport == KuryrPortChange::Create && !create_once(&kps, &pod, &ctx, &uid).await? {
        debug!("KuryrPort created, not in the cache yet");
        return Ok(Action::requeue(WAIT_FOR_KURYRPORT));
    }
    if actions.kuryrport == KuryrPortChange::Delete {
        if let Some(kp) = &kp {
            delete_kuryrport(&kps, kp).await?;
        }
        ctx.ledger.succeeded(&uid);
        return Ok(Action::requeue(WAIT_FOR_KURYRPORT));
    }
    if actions.finalizer == FinalizerChange::Remove {
        // Deletion path only: make sure with the server that the KuryrPort is really gone (the cache may
        // lag behind a create); the pod is let go only then.
        match kps.get_opt(&name).await.map_err(Error::kube("get_kuryrport"))? {
            Some(kp) => {
                if kp.metadata.deletion_timestamp.is_none() {
                    delete_kuryrport(&kps, &kp).await?;
                }
                return Ok(Action::requeue(WAIT_FOR_KURYRPORT));
            }
            None => {
                finalizer::remove(&pods, &pod, finalizers::POD).await?;
                info!("KuryrPort gone, pod finalizer removed");
            }
        }
    }
    ctx.ledger.succeeded(&uid);
    if kp
        .as_ref()
        .is_some_and(|kp| kp.metadata.deletion_timestamp.is_some())
    {
        return Ok(Action::requeue(WAIT_FOR_KURYRPORT));
    }
    Ok(Action::await_change())
}

/// Creates the pod's KuryrPort unless this controller just did (its cache may lag: then false).
async fn create_once(kps: &Api<KuryrPort>, pod: &SlimPod, ctx: &Context, uid: &Uid) -> Result<bool> {
    ctx.book.first_seen(uid);
    if ctx.book.kuryrport_just_created(uid, CACHE_LAG) {
        return Ok(false);
    }
    create_kuryrport(kps, pod, ctx).await?;
    ctx.book.kuryrport_created(uid);
    Ok(true)
}

/// Annotations that would choose cloud resources (upstream's project and extra-network annotations) are not
/// honoured: a Warning Event each, once per change; the pod is wired as if they were absent.
async fn tell_refused(pod: &SlimPod, ctx: &Context) {
    let ann = pod.metadata.annotations.as_ref();
    let refused = if ctx.config.additional_subnets.is_empty() {
        kuryr_core::annotations::refused(ann)
    } else {
        kuryr_core::annotations::refused_with_networks(ann)
    };
    ctx.tell(pod, Topic::Annotations, "ReadPod", &refused).await;
}

async fn create_kuryrport(kps: &Api<KuryrPort>, pod: &SlimPod, ctx: &Context) -> Result<()> {
    let Some(mut desired) = pod::desired_kuryrport(pod) else {
        return Ok(());
    };
    // The namespace's own project, when it has one: the KuryrPort keeps it for the pod's lifetime.
    if let Some(ns) = pod.metadata.namespace.as_deref() {
        let project = crate::projects::of_namespace(ctx, ns).await?;
        if project != ctx.project_id {
            desired.spec.project_id = Some(project);
        }
        // Extra networks, as the NetworkAttachmentDefinitions say now: decided once, with the KuryrPort.
        desired.spec.additional_networks = attachments::of_pod(ctx, pod, ns).await?;
    }
    let pp = PostParams {
        field_manager: Some(MANAGER.into()),
        ..PostParams::default()
    };
    match kps.create(&pp, &desired).await {
        Ok(_) => {
            info!(node = desired.spec.pod_node_name, "KuryrPort created");
            Ok(())
        }
        // The cache had not caught up with our own create yet.
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
        Err(e) => {
            let err = Error::kube("create_kuryrport")(e);
            ctx.events
                .publish(
                    &pod.object_ref(&()),
                    EventType::Warning,
                    err.reason(),
                    "CreateKuryrPort",
                    err.to_string(),
                )
                .await;
            Err(err)
        }
    }
}

/// Deletes exactly the KuryrPort we saw (uid precondition), so a newer one of the same name survives.
async fn delete_kuryrport(kps: &Api<KuryrPort>, kp: &KuryrPort) -> Result<()> {
    delete_exact(kps, kp)
        .await
        .map_err(Error::kube("delete_kuryrport"))?;
    Ok(())
}
