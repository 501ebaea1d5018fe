use std::collections::BTreeMap;

use kuryr_api::k8s_openapi::jiff::Timestamp;
use kuryr_api::slim_pod::{
    SlimContainerState, SlimContainerStatus, SlimPodSpec as PodSpec, SlimPodStatus as PodStatus,
};
use kuryr_api::Time;

use super::*;

struct PodBuilder(SlimPod);

fn mk_pod(name: &str) -> PodBuilder {
    PodBuilder(SlimPod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("ns".into()),
            uid: Some(format!("uid-{name}")),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            node_name: Some("w1".into()),
            ..PodSpec::default()
        }),
        ..SlimPod::default()
    })
}

impl PodBuilder {
    fn host_network(mut self) -> Self {
        self.0.spec.as_mut().unwrap().host_network = Some(true);
        self
    }
    fn unscheduled(mut self) -> Self {
        self.0.spec.as_mut().unwrap().node_name = None;
        self
    }
    fn phase(mut self, phase: &str) -> Self {
        self.0.status = Some(PodStatus {
            phase: Some(phase.into()),
            ..PodStatus::default()
        });
        self
    }
    fn deleting(mut self) -> Self {
        self.0.metadata.deletion_timestamp = Some(Time(Timestamp::UNIX_EPOCH));
        self
    }
    fn finalized(mut self) -> Self {
        self.0.metadata.finalizers = Some(vec![finalizers::POD.into()]);
        self
    }
    fn annotated(mut self, key: &str, value: &str) -> Self {
        self.0
            .metadata
            .annotations
            .get_or_insert_with(BTreeMap::new)
            .insert(key.into(), value.into());
        self
    }
    fn build(self) -> SlimPod {
        self.0
    }
}

fn mk_kp(uid: &str) -> KuryrPort {
    let spec = KuryrPortSpec {
        pod_uid: uid.into(),
        pod_node_name: "w1".into(),
        pod_static: false,
        vif_type: None,
        project_id: None,
        subnet_ids: None,
        security_group_ids: None,
        additional_networks: Vec::new(),
    };
    KuryrPort::new("web", spec)
}

fn actions(finalizer: FinalizerChange, kuryrport: KuryrPortChange) -> PodActions {
    PodActions { finalizer, kuryrport }
}

#[test]
fn host_network_pods_are_ignored() {
    let pod = mk_pod("web").host_network().build();
    assert_eq!(disposition(&pod), PodDisposition::HostNetwork);
    assert_eq!(pod_actions(&pod, None), PodActions::NOTHING);
    assert_eq!(desired_kuryrport(&pod), None);
}

#[test]
fn pods_without_a_node_wait() {
    let pod = mk_pod("web").unscheduled().build();
    assert_eq!(disposition(&pod), PodDisposition::Unscheduled);
    assert_eq!(pod_actions(&pod, None), PodActions::NOTHING);
    assert_eq!(pod_facts(&pod, "p", []).unwrap_err().reason(), "PodNotScheduled");
}

#[test]
fn a_new_pod_gets_a_kuryrport_and_no_finalizer() {
    let pod = mk_pod("web").build();
    assert_eq!(
        pod_actions(&pod, None),
        actions(FinalizerChange::None, KuryrPortChange::Create)
    );
    assert_eq!(pod_actions(&pod, Some(&mk_kp("uid-web"))), PodActions::NOTHING);
}

#[test]
fn a_running_pod_keeps_the_finalizer_an_earlier_controller_left_until_it_is_released() {
    let pod = mk_pod("web").finalized().build();
    assert_eq!(pod_actions(&pod, Some(&mk_kp("uid-web"))), PodActions::NOTHING);
    let deleted = mk_pod("web").finalized().deleting().build();
    assert_eq!(
        pod_actions(&deleted, Some(&mk_kp("uid-web"))),
        actions(FinalizerChange::None, KuryrPortChange::Delete)
    );
    assert_eq!(
        pod_actions(&deleted, None),
        actions(FinalizerChange::Remove, KuryrPortChange::None)
    );
    // Without one, a released pod whose KuryrPort is gone needs nothing.
    assert_eq!(
        pod_actions(&mk_pod("web").deleting().build(), None),
        PodActions::NOTHING
    );
}

#[test]
fn static_pods_are_wired_and_marked_static() {
    let pod = mk_pod("etcd")
        .annotated(annotations::CONFIG_SOURCE, "file")
        .build();
    assert_eq!(
        disposition(&pod),
        PodDisposition::Wire {
            node_name: "w1".into(),
            static_pod: true
        }
    );
    assert_eq!(
        pod_actions(&pod, None),
        actions(FinalizerChange::None, KuryrPortChange::Create)
    );
    assert!(desired_kuryrport(&pod).unwrap().spec.pod_static);
    let mirror = mk_pod("etcd")
        .annotated("kubernetes.io/config.mirror", "abc")
        .build();
    assert!(is_static(&mirror));
    let api = mk_pod("web").annotated(annotations::CONFIG_SOURCE, "api").build();
    assert!(!is_static(&api));
}

#[test]
fn terminal_pods_release_their_port_then_a_left_finalizer() {
    for phase in ["Succeeded", "Failed"] {
        let pod = mk_pod("job").phase(phase).finalized().build();
        assert_eq!(disposition(&pod), PodDisposition::Release);
        assert_eq!(
            pod_actions(&pod, Some(&mk_kp("uid-job"))),
            actions(FinalizerChange::None, KuryrPortChange::Delete)
        );
        assert_eq!(
            pod_actions(&pod, None),
            actions(FinalizerChange::Remove, KuryrPortChange::None)
        );
    }
    let running = mk_pod("job").phase("Running").build();
    assert!(matches!(disposition(&running), PodDisposition::Wire { .. }));
}

#[test]
fn a_deleted_pod_keeps_a_left_finalizer_while_its_kuryrport_is_being_finalized() {
    let pod = mk_pod("web").deleting().finalized().build();
    let mut kp = mk_kp("uid-web");
    kp.metadata.deletion_timestamp = Some(Time(Timestamp::UNIX_EPOCH));
    assert_eq!(pod_actions(&pod, Some(&kp)), PodActions::NOTHING);
    assert_eq!(
        pod_actions(&pod, None),
        actions(FinalizerChange::Remove, KuryrPortChange::None)
    );
}

#[test]
fn a_kuryrport_left_by_an_older_pod_of_the_same_name_is_replaced() {
    let pod = mk_pod("db-0").build();
    assert_eq!(
        pod_actions(&pod, Some(&mk_kp("uid-of-the-previous-db-0"))),
        actions(FinalizerChange::None, KuryrPortChange::Delete)
    );
}

#[test]
fn the_desired_kuryrport_is_owned_by_the_pod_and_labelled_with_its_node() {
    let pod = mk_pod("web").build();
    let kp = desired_kuryrport(&pod).unwrap();
    assert_eq!(kp.metadata.namespace.as_deref(), Some("ns"));
    assert_eq!(kp.metadata.name.as_deref(), Some("web"));
    assert_eq!(kp.metadata.labels.unwrap()[labels::NODE_NAME], "w1");
    assert_eq!(
        kp.metadata.finalizers,
        Some(vec![finalizers::KURYRPORT.to_string()])
    );
    let owner = &kp.metadata.owner_references.unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.uid.as_str(), owner.controller),
        ("Pod", "uid-web", Some(true))
    );
    assert_eq!(kp.spec.pod_uid, "uid-web");
    assert_eq!(kp.spec.pod_node_name, "w1");
}

#[test]
fn pod_facts_carry_what_the_drivers_need() {
    let pod = mk_pod("web").build();
    let facts = pod_facts(&pod, "proj", ["sg-b".to_string(), "sg-a".into()]).unwrap();
    assert_eq!(facts.namespace, "ns");
    assert_eq!(facts.uid, "uid-web");
    assert_eq!(facts.node_name, "w1");
    assert_eq!(
        facts.security_groups.iter().next().map(String::as_str),
        Some("sg-a")
    );
}

fn running(mut pod: SlimPod, running: bool) -> SlimPod {
    use kuryr_api::k8s_openapi::api::core::v1::ContainerStateRunning;
    let state = SlimContainerState {
        running: running.then(ContainerStateRunning::default),
    };
    pod.status
        .get_or_insert_with(PodStatus::default)
        .container_statuses = Some(vec![SlimContainerStatus {
        name: "c".into(),
        state: Some(state),
    }]);
    pod
}

#[test]
fn a_terminating_pod_keeps_its_network_while_a_container_runs_and_its_grace_period_lasts() {
    let now = Timestamp::UNIX_EPOCH;
    let mut pod = running(mk_pod("web").build(), true);
    pod.metadata.deletion_timestamp = Some(Time(now + std::time::Duration::from_secs(30)));
    assert_eq!(draining_for(&pod, now), Some(std::time::Duration::from_secs(30)));
    // The kubelet stopped its containers: released at once.
    assert_eq!(draining_for(&running(pod.clone(), false), now), None);
    // The grace period is over (a node that never reports back): released.
    assert_eq!(draining_for(&pod, now + std::time::Duration::from_secs(31)), None);
    // Not being deleted, or never started: nothing to wait for.
    assert_eq!(draining_for(&running(mk_pod("web").build(), true), now), None);
    assert_eq!(draining_for(&mk_pod("web").deleting().build(), now), None);
}
