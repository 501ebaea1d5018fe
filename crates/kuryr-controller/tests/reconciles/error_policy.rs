//! Failures: the one error policy's retry timing, and what a failed reconcile tells (Event, condition).

use std::sync::Arc;
use std::time::Duration;

use http::Method;
use kube::runtime::controller::Action;
use kube::runtime::finalizer::Error as FinalizerError;
use kuryr_api::conditions::{find_condition, READY};
use kuryr_api::k8s_openapi::api::core::v1::PodSpec;
use kuryr_api::{KuryrPort, ObjectMeta, Pod, SlimPod};
use kuryr_controller::toolkit::error_policy;
use kuryr_controller::Error;
use kuryr_core::CoreError;

use crate::apiserver;
use crate::harness::{cached, harness, kuryrport, TestCloud, NS};

fn no_trunk() -> Error {
    Error::Core(CoreError::NoTrunkOnNode {
        node: "worker-1".into(),
        port_id: "p".into(),
    })
}

#[tokio::test]
async fn failures_back_off_per_object_and_a_success_starts_over() {
    let cloud = TestCloud::start().await;
    let h = harness(&cloud, |_| {});
    let kp = Arc::new(cached(&kuryrport("web-0")));
    let other = Arc::new(cached(&kuryrport("web-1")));
    let transient = Error::NodeNotFound("worker-1".into());

    let delays: Vec<Action> = (0..3)
        .map(|_| error_policy(kp.clone(), &transient, h.ctx.clone()))
        .collect();
    assert_eq!(
        delays,
        [500, 1000, 2000].map(|ms| Action::requeue(Duration::from_millis(ms)))
    );
    assert_eq!(
        error_policy(other, &transient, h.ctx.clone()),
        Action::requeue(Duration::from_millis(500)),
        "another object has its own count"
    );
    h.ctx
        .ledger
        .succeeded(&kuryr_controller::toolkit::Uid::of(kp.as_ref()));
    assert_eq!(
        error_policy(kp, &transient, h.ctx.clone()),
        Action::requeue(Duration::from_millis(500))
    );
}

#[tokio::test]
async fn errors_no_retry_soon_fixes_wait_a_minute_even_from_inside_a_finalizer() {
    let cloud = TestCloud::start().await;
    let h = harness(&cloud, |_| {});
    let kp = Arc::new(cached(&kuryrport("web-0")));
    let wrapped = Error::Finalizer(Box::new(FinalizerError::ApplyFailed(no_trunk())));
    assert_eq!(
        error_policy(kp, &wrapped, h.ctx.clone()),
        Action::requeue(Duration::from_secs(60))
    );
}

#[tokio::test]
async fn a_network_draining_its_ports_is_looked_at_every_two_seconds_without_backing_off() {
    let cloud = TestCloud::start().await;
    let h = harness(&cloud, |_| {});
    let kp = Arc::new(cached(&kuryrport("web-0")));
    let draining = Error::Finalizer(Box::new(FinalizerError::CleanupFailed(Error::Draining(2))));
    for _ in 0..3 {
        assert_eq!(
            error_policy(kp.clone(), &draining, h.ctx.clone()),
            Action::requeue(Duration::from_secs(2))
        );
    }
    let metrics = h.metrics();
    assert!(
        metrics.contains(r#"kuryr_reconcile_errors_total{controller="kuryrport",kind="draining"} 3"#),
        "each counted: {metrics}"
    );
}

#[tokio::test]
async fn a_failed_reconcile_is_a_warning_event_and_ready_false_with_its_reason() {
    let cloud = TestCloud::start().await;
    let mut h = harness(&cloud, |_| {});
    let mut kp = kuryrport("web-0");
    kp.spec.pod_node_name = "not-in-the-cache".into();
    let kp = h.add_kuryrport(&kp);

    let err = h.reconcile(&kp).await.unwrap_err();

    assert_eq!(err.reason(), "NodeNotFound");
    assert_eq!(h.api.event_reasons(), ["NodeNotFound"]);
    let now: KuryrPort = h.kuryrport_now(&kp);
    let ready = find_condition(&now.status.unwrap().conditions, READY)
        .cloned()
        .unwrap();
    assert_eq!(ready.status, kuryr_api::conditions::ConditionStatus::False);
    assert_eq!(ready.reason, "NodeNotFound");
    assert!(cloud.pod_ports().await.is_empty(), "nothing made");
}

#[tokio::test]
async fn a_finalizer_patch_refused_because_the_cache_is_behind_is_retried_shortly_and_the_kuryrport_made_beside_it(
) {
    let cloud = TestCloud::start().await;
    let h = harness(&cloud, |_| {});
    let pod = bare_pod("web-0");
    let stored = h.api.put(&apiserver::path("v1", NS, "pods", "web-0"), &pod);
    let pod: SlimPod = serde_json::from_value(stored).unwrap();
    let uid = pod.metadata.uid.clone().unwrap();
    // The server's finalizer list is not the one the cached pod shows: the patch's `test` op fails.
    h.api.fail(Method::PATCH, "/pods/web-0", 422, 1);

    let action = kuryr_controller::pods::frontend::reconcile(Arc::new(pod), h.ctx.clone())
        .await
        .unwrap();

    assert_eq!(action, Action::requeue(Duration::from_millis(200)));
    assert!(h.api.event_reasons().is_empty());
    // The KuryrPort does not wait for the finalizer: it is written beside it, owned by the pod, so that
    // Kubernetes' garbage collector deletes it should the pod go before its finalizer lands.
    let posts = h.api.requests(Method::POST, "/kuryrports");
    assert_eq!(posts.len(), 1, "the KuryrPort is written beside the finalizer");
    let owners = &posts[0].body["metadata"]["ownerReferences"];
    assert_eq!(owners[0]["kind"], "Pod");
    assert_eq!(owners[0]["uid"], uid.as_str());
    assert_eq!(owners[0]["controller"], true);
}

#[tokio::test]
async fn a_pod_reconciled_again_before_its_kuryrport_reaches_the_cache_does_not_create_it_twice() {
    let cloud = TestCloud::start().await;
    let h = harness(&cloud, |_| {});
    let pod = bare_pod("web-1");
    h.api.put(&apiserver::path("v1", NS, "pods", "web-1"), &pod);
    let reconcile = || async {
        // As the watch delivers it: the stored pod (its finalizer added by the first round).
        let now: SlimPod =
            serde_json::from_value(h.api.get(&apiserver::path("v1", NS, "pods", "web-1")).unwrap()).unwrap();
        kuryr_controller::pods::frontend::reconcile(Arc::new(now), h.ctx.clone())
            .await
            .unwrap()
    };

    reconcile().await;
    // The finalizer's update triggers the next round; the KuryrPort cache has not seen the create yet.
    let action = reconcile().await;

    assert_eq!(
        h.api.requests(Method::POST, "/kuryrports").len(),
        1,
        "one KuryrPort create"
    );
    assert_eq!(action, Action::requeue(Duration::from_secs(1)));
}

#[tokio::test]
async fn a_pod_reconciled_from_a_cache_behind_its_finalizer_is_not_patched_again() {
    let cloud = TestCloud::start().await;
    let h = harness(&cloud, |_| {});
    let pod = bare_pod("web-2");
    let stored = h.api.put(&apiserver::path("v1", NS, "pods", "web-2"), &pod);
    let stale: Arc<SlimPod> = Arc::new(serde_json::from_value(stored).unwrap());

    // The first round adds the finalizer; a KuryrPort event then wakes the pod's reconcile while the cache
    // still holds the pod as it was before that patch.
    for _ in 0..2 {
        kuryr_controller::pods::frontend::reconcile(stale.clone(), h.ctx.clone())
            .await
            .unwrap();
    }

    assert_eq!(
        h.api.requests(Method::PATCH, "/pods/web-2").len(),
        1,
        "one finalizer patch"
    );
    assert_eq!(h.api.requests(Method::POST, "/kuryrports").len(), 1);
}

/// A pod as first stored: scheduled on worker-1, no finalizer, no annotation.
fn bare_pod(name: &str) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some(NS.into()),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            node_name: Some("worker-1".into()),
            ..PodSpec::default()
        }),
        ..Pod::default()
    }
}
