//! KuryrNetwork controller (under `kuryrnetwork.finalizers.kuryr.openstack.org`): `apply` makes the
//! namespace's network exist and records it in the status; `cleanup` (the Namespace is going, and the
//! KuryrNetwork with it) deletes it once its ports are gone, retrying while they drain. The Namespace front
//! end creates KuryrNetworks eagerly when configured and keeps their `nsLabels` in step.

use std::sync::Arc;
use std::time::Duration;

use kube::runtime::controller::Action;
use kube::runtime::finalizer::{finalizer, Event as Finalizer};
use kuryr_api::conditions::{set_condition, Condition, ConditionStatus, READY};
use kuryr_api::k8s_openapi::jiff::Timestamp;
use kuryr_api::{
    finalizers, Api, KuryrNetwork, KuryrNetworkSpec, KuryrNetworkStatus, Namespace, ObjectMeta, Patch,
    PatchParams, PostParams, Resource, ResourceExt, API_VERSION,
};
use serde_json::json;
use tracing::{info, instrument, warn};

use crate::context::Context;
use crate::errors::{Error, Result};
use crate::networks::driver::{self, NamespaceNetwork};
use crate::toolkit::{Reconciled, Topic, Uid};

pub const CONTROLLER: &str = "kuryrnetwork";

impl Reconciled for KuryrNetwork {
    const CONTROLLER: &'static str = CONTROLLER;
}

impl Reconciled for Namespace {
    const CONTROLLER: &'static str = "namespace";
}
const STATUS_MANAGER: &str = "kuryr-controller-status";
const SPEC_MANAGER: &str = "kuryr-controller";
const RESYNC: Duration = Duration::from_secs(600);

#[instrument(skip(kn, ctx), fields(namespace = kn.namespace()))]
pub async fn reconcile(kn: Arc<KuryrNetwork>, ctx: Arc<Context>) -> Result<Action> {
    ctx.metrics.reconciled(CONTROLLER);
    let ns = kn.namespace().ok_or(Error::MissingField("metadata.namespace"))?;
    if !ctx.selected(&ns).await? {
        // Another controller's (several clusters sharing one API server): neither make nor delete it.
        return Ok(Action::await_change());
    }
    let api: Api<KuryrNetwork> = Api::namespaced(ctx.client.clone(), &ns);
    let uid = Uid::of(kn.as_ref());
    let result = finalizer(&api, finalizers::KURYRNETWORK, kn.clone(), |event| async {
        match event {
            Finalizer::Apply(kn) => apply(&kn, &ctx).await,
            Finalizer::Cleanup(kn) => cleanup(&kn, &ctx).await,
        }
    })
    .await;
    let result = crate::toolkit::finalizer::outcome(result);
    match &result {
        Ok(_) => ctx.ledger.succeeded(&uid),
        Err(e) => report(&kn, &ctx, e).await,
    }
    result
}

async fn apply(kn: &KuryrNetwork, ctx: &Context) -> Result<Action> {
    let ns = kn.spec.ns_name.clone();
    let lock = ctx.networks.lock_for(&ns);
    let _held = lock.lock().await;
    let uid = kn.metadata.uid.clone().unwrap_or_default();
    let project = crate::projects::recorded(ctx, Some(kn.spec.project_id.as_str()));
    let made = driver::ensure(ctx, &ns, &uid, project).await?;
    let st = kn.status.clone().unwrap_or_default();
    let mut want = st.clone();
    made.fill(&mut want);
    want.ns_labels = Some(kn.spec.ns_labels.clone());
    if want != st || !kuryr_api::conditions::is_condition_true(&st.conditions, READY) {
        write_ready(ctx, kn, &made).await?;
    }
    ctx.networks.remember(&ns, made.core_subnets());
    Ok(Action::requeue(RESYNC))
}

async fn cleanup(kn: &KuryrNetwork, ctx: &Context) -> Result<Action> {
    let ns = kn.spec.ns_name.clone();
    let lock = ctx.networks.lock_for(&ns);
    let _held = lock.lock().await;
    ctx.networks.forget(&ns);
    let uid = kn.metadata.uid.clone().unwrap_or_default();
    // Ports of this namespace's KuryrPorts are released by the KuryrPort controller: wait for them.
    let mut busy_ports: Vec<String> = Vec::new();
    let all = ctx.kuryrports.state();
    for cached in all
        .iter()
        .filter(|kp| kp.namespace().as_deref() == Some(ns.as_str()))
    {
        let st = ctx.book.status_of(&cached.unpack()?);
        busy_ports.extend(st.vifs.values().map(|v| v.vif.port_id.clone()));
    }
    let busy = |id: &str| busy_ports.iter().any(|p| p == id);
    let waiting = driver::delete(ctx, &uid, &busy).await?;
    if waiting > 0 {
        info!(
            namespace = ns,
            ports = waiting,
            "waiting for the namespace's ports to go"
        );
        return Err(Error::Draining(waiting));
    }
    info!(namespace = ns, "namespace network deleted");
    Ok(Action::await_change())
}

/// Whole status by server-side apply (as for KuryrPorts): `Ready=True` with the network's ids.
async fn write_ready(ctx: &Context, kn: &KuryrNetwork, made: &NamespaceNetwork) -> Result<()> {
    let mut st = kn.status.clone().unwrap_or_default();
    made.fill(&mut st);
    st.ns_labels = Some(kn.spec.ns_labels.clone());
    st.observed_generation = kn.metadata.generation;
    let cond = Condition::new(
        READY,
        ConditionStatus::True,
        "NetworkReady",
        format!("subnet {} ({})", made.subnet.id, made.subnet.cidr),
    )
    .with_transition_time(Timestamp::now())
    .with_observed_generation(kn.metadata.generation);
    set_condition(&mut st.conditions, cond);
    write_status(ctx, kn, &st).await
}

async fn write_status(ctx: &Context, kn: &KuryrNetwork, st: &KuryrNetworkStatus) -> Result<()> {
    let ns = kn.namespace().ok_or(Error::MissingField("metadata.namespace"))?;
    let api: Api<KuryrNetwork> = Api::namespaced(ctx.client.clone(), &ns);
    let body = json!({
        "apiVersion": API_VERSION, "kind": "KuryrNetwork",
        "metadata": {"name": kn.name_any()}, "status": st,
    });
    api.patch_status(
        &kn.name_any(),
        &PatchParams::apply(STATUS_MANAGER).force(),
        &Patch::Apply(&body),
    )
    .await
    .map_err(Error::kube("patch_kuryrnetwork_status"))?;
    Ok(())
}

/// The namespace's KuryrNetwork, created (with its finalizer, so that a namespace deleted right away still
/// has its network cleaned up) if missing. Refuses a namespace being deleted.
pub async fn get_or_create(ctx: &Context, namespace: &str) -> Result<KuryrNetwork> {
    let api: Api<KuryrNetwork> = Api::namespaced(ctx.client.clone(), namespace);
    if let Some(kn) = api
        .get_opt(namespace)
        .await
        .map_err(Error::kube("get_kuryrnetwork"))?
    {
        if kn.metadata.deletion_timestamp.is_some() {
            return Err(Error::NamespaceDeleting(namespace.to_owned()));
        }
        return Ok(kn);
    }
    let ns: Api<Namespace> = Api::all(ctx.client.clone());
    let meta = ns
        .get(namespace)
        .await
        .map_err(Error::kube("get_namespace"))?
        .metadata;
    let project = crate::projects::choice(ctx, meta.annotations.as_ref()).project_id;
    let labels = meta.labels.unwrap_or_default();
    let kn = KuryrNetwork {
        metadata: ObjectMeta {
            name: Some(namespace.to_owned()),
            namespace: Some(namespace.to_owned()),
            finalizers: Some(vec![finalizers::KURYRNETWORK.to_owned()]),
            ..ObjectMeta::default()
        },
        spec: KuryrNetworkSpec {
            ns_name: namespace.to_owned(),
            project_id: project,
            ns_labels: labels,
        },
        status: None,
    };
    match api.create(&PostParams::default(), &kn).await {
        Ok(kn) => Ok(kn),
        // Created meanwhile by the Namespace front end.
        Err(kube::Error::Api(e)) if e.code == 409 => {
            api.get(namespace).await.map_err(Error::kube("get_kuryrnetwork"))
        }
        Err(e) => Err(Error::kube("create_kuryrnetwork")(e)),
    }
}

/// Namespace front end: eager mode creates the KuryrNetwork; labels are copied into an existing one.
#[instrument(skip(ns, ctx), fields(namespace = ns.name_any()))]
pub async fn namespace(ns: Arc<Namespace>, ctx: Arc<Context>) -> Result<Action> {
    ctx.metrics.reconciled(<Namespace as Reconciled>::CONTROLLER);
    if ns.metadata.deletion_timestamp.is_some() {
        ctx.ledger.forget(&Uid::of(ns.as_ref()));
        return Ok(Action::await_change());
    }
    let name = ns.name_any();
    // Annotations not honoured (extra networks; a project not in --namespace-projects): say so once.
    let ann = ns.metadata.annotations.as_ref();
    let mut refused = kuryr_core::annotations::refused_on_namespace(ann);
    refused.extend(crate::projects::choice(&ctx, ann).refused);
    ctx.tell(ns.as_ref(), Topic::Annotations, "ReadNamespace", &refused)
        .await;
    let api: Api<KuryrNetwork> = Api::namespaced(ctx.client.clone(), &name);
    let existing = api
        .get_opt(&name)
        .await
        .map_err(Error::kube("get_kuryrnetwork"))?;
    match existing {
        None if ctx.config.networks.eager => {
            get_or_create(&ctx, &name).await?;
        }
        Some(kn) if Some(&kn.spec.ns_labels) != ns.metadata.labels.as_ref() => {
            let body = json!({
                "apiVersion": API_VERSION, "kind": "KuryrNetwork",
                "metadata": {"name": name},
                "spec": {"nsName": name, "projectId": kn.spec.project_id,
                         "nsLabels": ns.metadata.labels.clone().unwrap_or_default()},
            });
            api.patch(
                &name,
                &PatchParams::apply(SPEC_MANAGER).force(),
                &Patch::Apply(&body),
            )
            .await
            .map_err(Error::kube("patch_kuryrnetwork"))?;
        }
        _ => {}
    }
    Ok(Action::await_change())
}

async fn report(kn: &KuryrNetwork, ctx: &Context, err: &Error) {
    ctx.events.failed(&kn.object_ref(&()), err).await;
    if kn.metadata.deletion_timestamp.is_some() {
        return;
    }
    let mut st = kn.status.clone().unwrap_or_default();
    let cond = Condition::new(READY, ConditionStatus::False, err.reason(), err.to_string())
        .with_transition_time(Timestamp::now())
        .with_observed_generation(kn.metadata.generation);
    set_condition(&mut st.conditions, cond);
    if let Err(e) = write_status(ctx, kn, &st).await {
        warn!(
            error = &e as &dyn std::error::Error,
            "cannot record the failure in the status"
        );
    }
}
