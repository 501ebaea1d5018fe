//! Failures: the one error policy's retry timing, and what a failed reconcile tells (Event, condition).

use std::sync::Arc;
use std::time::Duration;

use http::Method;
use kube::runtime::controller::Action;
use kube::runtime::finalizer::Error as FinalizerError;
use kuryr_api::conditions::{find_condition, READY};
use kuryr_api::k8s_openapi::api::core::v1::{PodSpec, PodStatus};
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
async fn a_new_pod_gets_its_kuryrport_owned_by_it_and_is_not_written_itself() {
    let cloud = TestCloud::start().await;
    let h = harness(&cloud, |_| {});
    let pod = bare_pod("web-0");
    let stored = h.api.put(&apiserver::path("v1", NS, "pods", "web-0"), &pod);
    let pod: SlimPod = serde_json::from_value(stored).unwrap();
    let uid = pod.metadata.uid.clone().unwrap();

    kuryr_controller::pods::frontend::reconcile(Arc::new(pod), h.ctx.clone())
        .await
        .unwrap();

    // No pod finalizer: the KuryrPort, owned by the pod, goes with it through Kubernetes' garbage
    // collector, and its own finalizer holds the ports until they are released.
    assert!(h.api.requests(Method::PATCH, "/pods/web-0").is_empty());
    let posts = h.api.requests(Method::POST, "/kuryrports");
    assert_eq!(posts.len(), 1);
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
        // As the watch delivers it: the stored pod.
        let now: SlimPod =
            serde_json::from_value(h.api.get(&apiserver::path("v1", NS, "pods", "web-1")).unwrap()).unwrap();
        kuryr_controller::pods::frontend::reconcile(Arc::new(now), h.ctx.clone())
            .await
            .unwrap()
    };

    reconcile().await;
    // The pod's next update triggers the next round; the KuryrPort cache has not seen the create yet.
    let action = reconcile().await;

    assert_eq!(
        h.api.requests(Method::POST, "/kuryrports").len(),
        1,
        "one KuryrPort create"
    );
    assert_eq!(action, Action::requeue(Duration::from_secs(1)));
}

/// A released pod (Succeeded) still carrying the pod finalizer upstream Kuryr put on every pod.
fn released_upstream_pod(name: &str) -> Pod {
    let mut pod = bare_pod(name);
    pod.metadata.finalizers = Some(vec![kuryr_api::finalizers::POD.into()]);
    pod.status = Some(PodStatus {
        phase: Some("Succeeded".into()),
        ..Default::default()
    });
    pod
}

fn finalizers_of(h: &crate::harness::Harness, name: &str) -> Vec<serde_json::Value> {
    let stored = h.api.get(&apiserver::path("v1", NS, "pods", name)).unwrap();
    stored["metadata"]["finalizers"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

#[tokio::test]
async fn a_released_pod_loses_the_finalizer_an_earlier_controller_left_once_its_kuryrport_is_gone() {
    let cloud = TestCloud::start().await;
    let h = harness(&cloud, |_| {});
    let stored = h.api.put(
        &apiserver::path("v1", NS, "pods", "web-2"),
        &released_upstream_pod("web-2"),
    );
    let pod: SlimPod = serde_json::from_value(stored).unwrap();

    kuryr_controller::pods::frontend::reconcile(Arc::new(pod), h.ctx.clone())
        .await
        .unwrap();

    assert_eq!(h.api.requests(Method::PATCH, "/pods/web-2").len(), 1);
    assert!(
        finalizers_of(&h, "web-2").is_empty(),
        "the left finalizer taken off"
    );
    assert!(h.api.requests(Method::POST, "/kuryrports").is_empty());
}

#[tokio::test]
async fn a_refused_removal_of_a_left_finalizer_fails_the_round_and_the_next_one_removes_it() {
    let cloud = TestCloud::start().await;
    let h = harness(&cloud, |_| {});
    let stored = h.api.put(
        &apiserver::path("v1", NS, "pods", "web-3"),
        &released_upstream_pod("web-3"),
    );
    let pod: Arc<SlimPod> = Arc::new(serde_json::from_value(stored).unwrap());
    // Another writer changed the finalizer list: the patch's `test` op fails.
    h.api.fail(Method::PATCH, "/pods/web-3", 422, 1);

    let first = kuryr_controller::pods::frontend::reconcile(pod.clone(), h.ctx.clone()).await;
    assert!(first.is_err(), "a refused patch is not taken as done");
    assert_eq!(finalizers_of(&h, "web-3").len(), 1);

    kuryr_controller::pods::frontend::reconcile(pod, h.ctx.clone())
        .await
        .unwrap();
    assert!(finalizers_of(&h, "web-3").is_empty());
}

/// A pod as first stored: scheduled on worker-1, no annotation.
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
