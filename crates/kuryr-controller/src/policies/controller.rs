//! The NetworkPolicy loop: watches feed caches and wake one sync task; a sync compiles everything, runs the
//! plan against Neutron and publishes the KuryrNetworkPolicies. Bursts of changes are coalesced (a short
//! pause after the first wake-up), failures retried with backoff, and a periodic resync repairs drift
//! made behind kuryr's back.

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::{FutureExt, StreamExt};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{watcher, WatchStreamExt};
use kuryr_api::{scoped, KuryrPort, Namespace, NetworkPolicy, ResourceExt, Service, SlimPod};
use kuryr_core::policy::{
    compile, diff, CompileOptions, CompiledPolicy, DiffOptions, Narrowing, PolicyError,
};
use tokio::sync::Notify;
use tracing::{info, info_span, warn, Instrument};

use crate::context::Context;
use crate::errors::{Error, Result};
use crate::policies::inputs::{build, Inputs, Objects};
use crate::policies::neutron::{execute, observe, Applied, Target};
use crate::policies::status::{policy_status, publish, Verdict};
use crate::{scope, slim};
use kuryr_core::backoff::retry_delay;

pub const CONTROLLER: &str = "networkpolicy";
/// Pause after a wake-up so that a burst of events (a Deployment scaling) makes one sync.
const COALESCE: Duration = Duration::from_millis(200);
const RESYNC: Duration = Duration::from_secs(300);

/// The caches a sync reads.
#[derive(Clone)]
pub struct Caches {
    pub namespaces: Store<Namespace>,
    pub pods: Store<SlimPod>,
    pub kuryrports: Store<KuryrPort>,
    pub policies: Store<NetworkPolicy>,
    pub services: Store<Service>,
}

/// What the loop remembers between syncs: per NetworkPolicy uid, the last KuryrNetworkPolicy written.
#[derive(Default)]
pub struct LoopState {
    written: HashMap<String, (serde_json::Value, Verdict)>,
}

/// What one sync did (for logs, tests and the bench).
#[derive(Clone, Debug, Default)]
pub struct SyncReport {
    pub compiled: CompiledPolicy,
    pub applied: Applied,
    pub plan_calls: usize,
}

/// Runs the watches and the sync loop until `shutdown`.
pub async fn run(ctx: Arc<Context>, shutdown: impl Future<Output = ()> + Send + 'static) {
    let client = ctx.client.clone();
    let wake = Arc::new(Notify::new());
    let (ns_api, ns_wc) = scope::namespace_watch(&client, &ctx.config);
    let wc = watcher::Config::default();
    let (namespaces, w_ns) = reflector::store();
    let (pods, w_pods) = reflector::store();
    let (kuryrports, w_kps) = reflector::store();
    let (policies, w_nps) = reflector::store();
    let (services, w_svcs) = reflector::store();
    macro_rules! feed {
        ($api:expr, $wc:expr, $writer:expr, $slim:expr, $what:literal) => {{
            let wake = wake.clone();
            watcher($api, $wc)
                .default_backoff()
                .modify($slim)
                .reflect($writer)
                .touched_objects()
                .for_each(move |r| {
                    match r {
                        Ok(_) => wake.notify_one(),
                        Err(e) => warn!(error = &e as &dyn std::error::Error, $what),
                    }
                    futures::future::ready(())
                })
                .boxed()
        }};
    }
    let c = &ctx.config;
    let watches = futures::future::join_all(vec![
        feed!(ns_api, ns_wc, w_ns, slim::meta, "namespace watch"),
        feed!(
            scoped::<SlimPod>(&client, c.namespace.as_deref()),
            wc.clone(),
            w_pods,
            slim::pod,
            "pod watch"
        ),
        feed!(
            scoped::<KuryrPort>(&client, c.namespace.as_deref()),
            wc.clone(),
            w_kps,
            slim::kuryrport,
            "kuryrport watch"
        ),
        feed!(
            scoped::<NetworkPolicy>(&client, c.namespace.as_deref()),
            wc.clone(),
            w_nps,
            slim::meta,
            "networkpolicy watch"
        ),
        feed!(
            scoped::<Service>(&client, c.namespace.as_deref()),
            wc.clone(),
            w_svcs,
            slim::policy_service,
            "service watch"
        ),
    ]);
    let caches = Caches {
        namespaces,
        pods,
        kuryrports,
        policies,
        services,
    };
    let sync_loop = sync_loop(ctx.clone(), caches, wake);
    tokio::select! {
        _ = watches.instrument(info_span!("networkpolicy_watches")) => {}
        _ = sync_loop.instrument(info_span!("networkpolicy_controller")) => {}
        _ = shutdown => {}
    }
    info!("networkpolicy controller stopped");
}

async fn sync_loop(ctx: Arc<Context>, caches: Caches, wake: Arc<Notify>) {
    let ready = tokio::join!(
        caches.namespaces.wait_until_ready(),
        caches.pods.wait_until_ready(),
        caches.kuryrports.wait_until_ready(),
        caches.policies.wait_until_ready(),
        caches.services.wait_until_ready(),
    );
    if !matches!(ready, (Ok(()), Ok(()), Ok(()), Ok(()), Ok(()))) {
        warn!("networkpolicy caches never synced");
        return;
    }
    info!("networkpolicy caches synced");
    let mut state = LoopState::default();
    let mut failures = 0u32;
    loop {
        tokio::time::sleep(COALESCE).await;
        ctx.metrics.reconciled(CONTROLLER);
        match sync(&ctx, &caches, &mut state).await {
            Ok(_) => failures = 0,
            Err(e) => {
                failures = failures.saturating_add(1);
                let delay = retry_delay(failures, false);
                ctx.metrics.failed(CONTROLLER, e.metric_label());
                warn!(error = &e as &dyn std::error::Error, retry_in = ?delay, "networkpolicy sync failed");
                tokio::time::sleep(delay).await;
                continue;
            }
        }
        tokio::select! {
            _ = wake.notified() => {}
            _ = tokio::time::sleep(RESYNC) => {}
        }
    }
}

/// One pass: compile, converge Neutron, publish. A compile error (quota, options) leaves Neutron as it is
/// and is reported on every policy; a Neutron error is returned (the loop retries from scratch).
pub async fn sync(ctx: &Context, caches: &Caches, state: &mut LoopState) -> Result<SyncReport> {
    let (namespaces, pods, kps, nps, svcs) = (
        caches.namespaces.state(),
        caches.pods.state(),
        caches.kuryrports.state(),
        caches.policies.state(),
        caches.services.state(),
    );
    let objects = Objects {
        namespaces: &namespaces,
        pods: &pods,
        kuryrports: &kps,
        policies: &nps,
        services: &svcs,
    };
    let inputs = build(&objects, !ctx.config.policy.service_cidrs.is_empty());
    let nps: Vec<_> = nps
        .iter()
        .filter(|np| {
            np.namespace()
                .is_some_and(|n| scope::in_scope(&caches.namespaces, &n))
        })
        .cloned()
        .collect();
    let namespace_projects: BTreeMap<String, String> = namespaces
        .iter()
        .filter_map(|ns| {
            let project = crate::projects::choice(ctx, ns.metadata.annotations.as_ref()).project_id;
            (project != ctx.project_id).then(|| (ns.name_any(), project))
        })
        .collect();
    let target = Target {
        cloud: &ctx.cloud,
        cluster_id: &ctx.config.cluster_id,
        project_id: &ctx.project_id,
        namespace_projects: &namespace_projects,
    };
    let mut opts = ctx.config.policy.compile_options();
    // Rules without a prefix are written for each family pods have addresses of (both: dual-stack).
    opts.families = crate::networks::selector::pod_families(ctx).await?;
    let converged = match converge(&target, &inputs, &opts).await? {
        Ok(c) => c,
        Err(e) => {
            let err = Error::Policy(e);
            warn!(error = %err, "policies not applied; Neutron left as it is");
            let verdict = Verdict::NotApplied {
                reason: err.reason(),
                message: err.to_string(),
            };
            for np in &nps {
                let uid = np.metadata.uid.clone().unwrap_or_default();
                let last = state.written.get(&uid);
                let st = last
                    .and_then(|(w, _)| serde_json::from_value(w[1]["status"].clone()).ok())
                    .unwrap_or_default();
                match publish(ctx, np, st, &verdict, last).await {
                    Ok(w) => {
                        state.written.insert(uid, w);
                    }
                    Err(e) => warn!(error = &e as &dyn std::error::Error, "cannot publish"),
                }
            }
            return Ok(SyncReport::default());
        }
    };
    let (compiled, applied) = (&converged.compiled, &converged.applied);
    for np in &nps {
        let key = kuryr_core::policy::PodKey::new(np.namespace().unwrap_or_default(), np.name_any());
        let verdict = verdict(&key, &inputs.invalid, compiled);
        let uid = np.metadata.uid.clone().unwrap_or_default();
        let st = policy_status(np, compiled, &applied.sg_ids);
        match publish(ctx, np, st, &verdict, state.written.get(&uid)).await {
            Ok(w) => {
                state.written.insert(uid, w);
            }
            Err(e) => {
                warn!(error = &e as &dyn std::error::Error, policy = %key, "cannot publish KuryrNetworkPolicy")
            }
        }
    }
    let live: std::collections::HashSet<String> = nps.iter().filter_map(|n| n.metadata.uid.clone()).collect();
    state.written.retain(|uid, _| live.contains(uid));
    Ok(converged)
}

/// The Neutron half of a sync: compile, observe, diff, execute. `Ok(Err(_))`: the policies don't compile as
/// a whole (quota, options) and Neutron was left as it is.
pub async fn converge(
    target: &Target<'_>,
    inputs: &Inputs,
    opts: &CompileOptions,
) -> Result<std::result::Result<SyncReport, PolicyError>> {
    let compiled = match compile(&inputs.cluster, &inputs.policies, opts) {
        Ok(c) => c,
        Err(e) => return Ok(Err(e)),
    };
    let current = observe(target, &inputs.ports).await?;
    let plan = diff(&compiled, &current, &DiffOptions::default());
    let applied = execute(target, &compiled, &plan).await?;
    Ok(Ok(SyncReport {
        plan_calls: plan.api_calls(),
        compiled,
        applied,
    }))
}

fn verdict(
    key: &kuryr_core::policy::PolicyKey,
    invalid: &std::collections::BTreeMap<kuryr_core::policy::PolicyKey, PolicyError>,
    compiled: &CompiledPolicy,
) -> Verdict {
    if let Some(e) = invalid.get(key) {
        return Verdict::FailedClosed {
            reason: "InvalidPolicy",
            message: format!("{e}; its pods are isolated with nothing allowed"),
        };
    }
    if let Some(r) = compiled.rejected.iter().find(|r| &r.policy == key) {
        return Verdict::FailedClosed {
            reason: "NotExpressible",
            message: format!("{}; its pods are isolated with nothing allowed", r.error),
        };
    }
    let narrowed: Vec<String> = compiled
        .narrowings
        .iter()
        .filter(|n| n.subject().0 == key)
        .map(|n| match n {
            Narrowing::ServicePartiallyAllowed { service, port, .. } => {
                format!("Service {service} port {port}: only some backends allowed, VIP left closed")
            }
            Narrowing::HairpinBlocked { service, port, .. } => {
                format!("Service {service} port {port}: selected backends can't reach themselves via the VIP")
            }
        })
        .collect();
    if narrowed.is_empty() {
        Verdict::Enforced
    } else {
        Verdict::Narrowed(narrowed.join("; "))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use kuryr_core::policy::{PodKey, RejectedPolicy};

    use super::*;

    #[test]
    fn each_policy_gets_the_verdict_of_what_neutron_does_with_it() {
        let (bad, unexpressible, narrowed, fine) = (
            PodKey::new("x", "bad"),
            PodKey::new("x", "ipblock-named"),
            PodKey::new("x", "to-web"),
            PodKey::new("x", "fine"),
        );
        let invalid: BTreeMap<_, _> = [(bad.clone(), PolicyError::InvalidCidr("10.0.0.1/8".into()))].into();
        let compiled = CompiledPolicy {
            rejected: vec![RejectedPolicy {
                policy: unexpressible.clone(),
                error: PolicyError::UnsupportedPeer("named port to an ipBlock".into()),
            }],
            narrowings: vec![Narrowing::ServicePartiallyAllowed {
                policy: narrowed.clone(),
                service: PodKey::new("x", "web"),
                port: 80,
            }],
            ..CompiledPolicy::default()
        };
        assert!(matches!(
            verdict(&bad, &invalid, &compiled),
            Verdict::FailedClosed { reason: "InvalidPolicy", ref message } if message.contains("nothing allowed")
        ));
        assert!(matches!(
            verdict(&unexpressible, &invalid, &compiled),
            Verdict::FailedClosed {
                reason: "NotExpressible",
                ..
            }
        ));
        assert!(
            matches!(verdict(&narrowed, &invalid, &compiled), Verdict::Narrowed(ref m) if m.contains("x/web port 80"))
        );
        assert_eq!(verdict(&fine, &invalid, &compiled), Verdict::Enforced);
    }
}
