//! The Kuryr CRDs against the lab's real kube-apiserver (its current release): the committed YAML applies and becomes
//! Established; each kind round-trips through create, the status subresource and a spec update without one
//! touching the other; a finalizer holds deletion; the schema rejects obvious mistakes with a message that
//! names the field; upstream-shaped objects are accepted and kept; printer columns show the wiring.
//!
//! Each test works in its own namespace and deletes it at the end (after stripping finalizers).

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::future::Future;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{bail, ensure, Context as _};
use kuryr_api::conditions::{find_condition, set_condition, READY};
use kuryr_api::k8s_openapi::jiff::Timestamp;
use kuryr_api::kube::api::{ApiResource, DynamicObject, GetParams};
use kuryr_api::kube::config::{KubeConfigOptions, Kubeconfig};
use kuryr_api::kube::core::object::{HasSpec, HasStatus};
use kuryr_api::kube::core::NamespaceResourceScope;
use kuryr_api::kube::runtime::wait::{await_condition, conditions};
use kuryr_api::kube::Config;
use kuryr_api::network::KuryrNetworkStatus;
use kuryr_api::{
    finalizers, Api, Client, Condition, ConditionStatus, CustomResourceDefinition, CustomResourceExt,
    DeleteParams, KuryrLoadBalancer, KuryrNetwork, KuryrNetworkPolicy, KuryrPort, ListParams, Namespace,
    ObjectMeta, Patch, PatchParams, PostParams, Resource, ResourceExt,
};
use lab_tests::Lab;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{json, Value};

const CRD_MANAGER: &str = "kuryr-crd-test";
const SPEC_MANAGER: &str = "kuryr-crd-test-spec";
/// Kubernetes < 1.22 records no subresource in managedFields, so status writes get their own manager.
const STATUS_MANAGER: &str = "kuryr-crd-test-status";

// === Tests ===

#[tokio::test]
async fn kuryrport_round_trips_through_spec_status_and_finalizer() -> anyhow::Result<()> {
    let client = setup().await?;
    with_namespace(&client, "kp", |client, ns| async move {
        exercise::<KuryrPort>(
            client,
            &ns,
            "kuryrport_typed.json",
            finalizers::KURYRPORT,
            |spec| {
                spec.security_group_ids = Some(vec!["0c0ffee0-0000-4000-8000-000000000001".into()]);
            },
        )
        .await
    })
    .await
}

#[tokio::test]
async fn kuryrnetwork_round_trips_through_spec_status_and_finalizer() -> anyhow::Result<()> {
    let client = setup().await?;
    with_namespace(&client, "kns", |client, ns| async move {
        exercise::<KuryrNetwork>(
            client,
            &ns,
            "upstream_kuryrnetwork.json",
            finalizers::KURYRNETWORK,
            |spec| {
                spec.ns_labels.insert("tier".into(), "gold".into());
            },
        )
        .await
    })
    .await
}

#[tokio::test]
async fn kuryrloadbalancer_round_trips_through_spec_status_and_finalizer() -> anyhow::Result<()> {
    let client = setup().await?;
    with_namespace(&client, "klb", |client, ns| async move {
        exercise::<KuryrLoadBalancer>(
            client,
            &ns,
            "upstream_kuryrloadbalancer.json",
            finalizers::KURYRLOADBALANCER,
            |spec| {
                spec.session_affinity = Some(kuryr_api::loadbalancer::SessionAffinity::ClientIp);
                spec.load_balancer_source_ranges = vec!["198.51.100.0/24".into()];
            },
        )
        .await
    })
    .await
}

#[tokio::test]
async fn kuryrnetworkpolicy_round_trips_through_spec_status_and_finalizer() -> anyhow::Result<()> {
    let client = setup().await?;
    with_namespace(&client, "knp", |client, ns| async move {
        exercise::<KuryrNetworkPolicy>(
            client,
            &ns,
            "upstream_kuryrnetworkpolicy.json",
            finalizers::NETWORKPOLICY,
            |spec| spec.egress_sg_rules.clear(),
        )
        .await
    })
    .await
}

#[tokio::test]
async fn invalid_objects_are_rejected_naming_the_field() -> anyhow::Result<()> {
    let client = setup().await?;
    with_namespace(&client, "invalid", |client, ns| async move {
        let kp = KuryrPort::api_resource();
        let kns = KuryrNetwork::api_resource();
        let klb = KuryrLoadBalancer::api_resource();
        let knp = KuryrNetworkPolicy::api_resource();
        let port_spec = json!({"podUid": "u1", "podNodeName": "worker-1"});
        let klb_spec = |port: Value| json!({"ports": [port]});
        let rule = |rule: Value| json!({"ingressSgRules": [{"sgRule": rule}], "podSelector": {}});
        let creates: Vec<(&ApiResource, Value, &[&str])> = vec![
            (&kp, json!({"podUid": "u1"}), &["spec.podNodeName", "Required value"]),
            (&kp, json!({"podUid": "", "podNodeName": "w"}), &["spec.podUid", "at least 1 chars long"]),
            (&kp, json!({"podUid": "u1", "podNodeName": "w", "vifType": "sriov"}), &["spec.vifType", "Unsupported value"]),
            (&kns, json!({"nsName": "a"}), &["spec.projectId", "Required value"]),
            (
                &klb,
                klb_spec(json!({"port": 80, "protocol": "HTTP", "targetPort": "8080"})),
                &["spec.ports", ".protocol", "Unsupported value"],
            ),
            (
                &klb,
                klb_spec(json!({"port": 70000, "protocol": "TCP", "targetPort": "8080"})),
                &["spec.ports", ".port", "less than or equal to 65535"],
            ),
            (&klb, klb_spec(json!({"port": 80, "protocol": "TCP"})), &["spec.ports", ".targetPort", "Required value"]),
            (&klb, json!({"type": "ExternalName"}), &["spec.type", "Unsupported value"]),
            (
                &knp,
                rule(json!({"direction": "sideways"})),
                &["spec.ingressSgRules", ".sgRule.direction", "Unsupported value"],
            ),
            (&knp, rule(json!({"direction": "ingress", "port_range_min": -1})), &["spec.ingressSgRules", ".sgRule.port_range_min", "greater than or equal to 0"]),
            (&knp, json!({"policyTypes": ["Both"]}), &["spec.policyTypes", "Unsupported value: \"Both\""]),
        ];
        // Keep going after a miss so one run shows every message.
        let mut failures = vec![];
        for (i, (ar, spec, expected)) in creates.into_iter().enumerate() {
            let obj: DynamicObject = serde_json::from_value(json!({
                "apiVersion": kuryr_api::API_VERSION, "kind": ar.kind,
                "metadata": {"name": format!("bad-{i}"), "namespace": ns},
                "spec": spec,
            }))?;
            let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, ar);
            let result = api.create(&PostParams::default(), &obj).await;
            if let Err(e) = expect_invalid(result.map(|_| ()), expected) {
                failures.push(format!("{} bad-{i}: {e:#}", ar.kind));
            }
        }

        // Status goes through the same schema: write bad status to a valid KuryrPort via the subresource.
        let api: Api<KuryrPort> = Api::namespaced(client.clone(), &ns);
        let kp = KuryrPort::new("valid", serde_json::from_value(port_spec)?);
        api.create(&PostParams::default(), &kp).await?;
        let vif = |extra: Value| {
            let mut vif = json!({"type": "nested-vlan", "portId": "p", "networkId": "n", "mac": "fa:16:3e:00:00:01"});
            merge(&mut vif, extra);
            json!({"status": {"vifs": {"eth0": {"default": true, "vif": vif}}}})
        };
        let condition = |status: &str| {
            json!({"status": {"conditions": [
                {"type": "Ready", "status": status, "reason": "R", "lastTransitionTime": "2026-11-22T10:00:00Z"}
            ]}})
        };
        let statuses: Vec<(Value, &[&str])> = vec![
            (vif(json!({"vlanId": 5000})), &["status.vifs", "vlanId", "less than or equal to 4094"]),
            (vif(json!({"vlanId": 0})), &["status.vifs", "vlanId", "greater than or equal to 1"]),
            (vif(json!({"type": "sriov"})), &["status.vifs", ".type", "Unsupported value: \"sriov\""]),
            (vif(json!({"ips": [{"address": "10.0.0.5"}]})), &["status.vifs", ".cidr", "Required value"]),
            (condition("Maybe"), &["status.conditions", ".status", "Unsupported value: \"Maybe\""]),
        ];
        for (body, expected) in statuses {
            let result = api.patch_status("valid", &PatchParams::default(), &Patch::Merge(&body)).await;
            if let Err(e) = expect_invalid(result.map(|_| ()), expected) {
                failures.push(format!("status {body}: {e:#}"));
            }
        }
        ensure!(failures.is_empty(), "{failures:#?}");
        Ok(())
    })
    .await
}

#[tokio::test]
async fn upstream_shaped_objects_are_accepted_kept_and_deletable() -> anyhow::Result<()> {
    let client = setup().await?;
    with_namespace(&client, "upstream", |client, ns| async move {
        let cases = [
            (KuryrPort::api_resource(), "upstream_kuryrport_nested_vlan.json"),
            (KuryrPort::api_resource(), "upstream_kuryrport_neutron_vif.json"),
            (KuryrPort::api_resource(), "upstream_kuryrport_new.json"),
            (KuryrNetwork::api_resource(), "upstream_kuryrnetwork.json"),
            (
                KuryrLoadBalancer::api_resource(),
                "upstream_kuryrloadbalancer.json",
            ),
            (
                KuryrNetworkPolicy::api_resource(),
                "upstream_kuryrnetworkpolicy.json",
            ),
        ];
        for (ar, file) in cases {
            let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, &ar);
            let mut value = fixture(file)?;
            let status = value.get("status").cloned().context("fixture status")?;
            let spec = value["spec"].clone();
            let name = value["metadata"]["name"].as_str().context("name")?.to_owned();
            localize_metadata(&mut value, &ns);
            api.create(&PostParams::default(), &serde_json::from_value(value)?)
                .await
                .context(file)?;
            // Upstream wrote status with a plain merge patch; with the subresource that goes to /status.
            api.patch_status(
                &name,
                &PatchParams::default(),
                &Patch::Merge(json!({"status": status})),
            )
            .await
            .with_context(|| format!("{file}: status"))?;

            // Nothing upstream wrote was pruned (the OVO blob included) and our types read it.
            let stored = serde_json::to_value(api.get(&name).await?)?;
            contains(&spec, &stored["spec"], "spec").with_context(|| format!("{file}: stored spec"))?;
            contains(&status, &stored["status"], "status")
                .with_context(|| format!("{file}: stored status"))?;
            match ar.kind.as_str() {
                "KuryrPort" => {
                    let kp: KuryrPort = serde_json::from_value(stored)?;
                    let vifs = &kp.status.context("status")?.vifs;
                    if let Some(eth0) = vifs.get("eth0") {
                        ensure!(
                            !eth0.vif.port_id.is_empty() && !eth0.vif.ips.is_empty(),
                            "{file}: {eth0:?}"
                        );
                    }
                }
                "KuryrNetwork" => drop(serde_json::from_value::<KuryrNetwork>(stored)?),
                "KuryrLoadBalancer" => drop(serde_json::from_value::<KuryrLoadBalancer>(stored)?),
                _ => drop(serde_json::from_value::<KuryrNetworkPolicy>(stored)?),
            }

            // Whole-object validation on update must pass for the upstream shape, or the finalizer could
            // never be removed: delete, then release.
            api.delete(&name, &DeleteParams::default()).await?;
            ensure!(
                api.get(&name).await?.metadata.deletion_timestamp.is_some(),
                "{file}: finalizer did not hold"
            );
            release_finalizers(&api, &name)
                .await
                .with_context(|| format!("{file}: removing finalizers"))?;
            wait_gone(&api, &name).await.context(file)?;
        }
        Ok(())
    })
    .await
}

#[tokio::test]
async fn printer_columns_show_what_is_wired() -> anyhow::Result<()> {
    let client = setup().await?;
    with_namespace(&client, "columns", |client, ns| async move {
        let cases: [(ApiResource, &str, &[ColumnValue]); 4] = [
            (
                KuryrPort::api_resource(),
                "kuryrport_typed.json",
                &[
                    ("Node", json!("worker-1")),
                    ("Type", json!("nested-vlan")),
                    ("IP", json!("10.0.4.23")),
                    ("VLAN", json!(3018)),
                    ("Active", json!(true)),
                    ("Ready", json!("True")),
                ],
            ),
            (
                KuryrNetwork::api_resource(),
                "upstream_kuryrnetwork.json",
                &[("Subnet-CIDR", json!("10.0.4.0/26")), ("Populated", json!(true))],
            ),
            (
                KuryrLoadBalancer::api_resource(),
                "upstream_kuryrloadbalancer.json",
                &[
                    ("Type", json!("LoadBalancer")),
                    ("IP", json!("10.0.0.143")),
                    ("External-IP", json!("203.0.113.40")),
                ],
            ),
            (
                KuryrNetworkPolicy::api_resource(),
                "upstream_kuryrnetworkpolicy.json",
                &[("SG-ID", json!("e1f2a3b4-c5d6-4e7f-8091-a2b3c4d5e6f7"))],
            ),
        ];
        for (ar, file, expected) in cases {
            let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, &ar);
            let mut value = fixture(file)?;
            let status = value["status"].clone();
            let name = value["metadata"]["name"].as_str().context("name")?.to_owned();
            localize_metadata(&mut value, &ns);
            if let Some(meta) = value["metadata"].as_object_mut() {
                meta.remove("finalizers");
            }
            api.create(&PostParams::default(), &serde_json::from_value(value)?)
                .await?;
            api.patch_status(
                &name,
                &PatchParams::default(),
                &Patch::Merge(json!({"status": status})),
            )
            .await?;

            let cells = table_row(&client, &ar, &ns, &name).await?;
            for (column, want) in expected {
                let got = cells
                    .get(*column)
                    .with_context(|| format!("{}: no column {column}: {cells:?}", ar.kind))?;
                ensure!(got == want, "{} column {column}: got {got}, want {want}", ar.kind);
            }
            println!("{} {name}: {cells:?}", ar.kind);
        }
        Ok(())
    })
    .await
}

/// A printer column name and the cell it must show.
type ColumnValue = (&'static str, Value);

#[tokio::test]
async fn conditions_from_the_helper_are_accepted_and_keep_their_transition_time() -> anyhow::Result<()> {
    let client = setup().await?;
    with_namespace(&client, "cond", |client, ns| async move {
        let api: Api<KuryrNetwork> = Api::namespaced(client, &ns);
        let spec = serde_json::from_value(json!({"nsName": &ns, "projectId": "p1"}))?;
        api.create(&PostParams::default(), &KuryrNetwork::new("net", spec)).await?;
        let apply = |status: &KuryrNetworkStatus| {
            json!({"apiVersion": kuryr_api::API_VERSION, "kind": "KuryrNetwork", "status": status})
        };
        let pp = PatchParams::apply(STATUS_MANAGER).force();

        // An empty message (as `Condition::new` callers often pass) must be accepted.
        let mut status = KuryrNetworkStatus::default();
        let t0 = Timestamp::from_second(1_700_000_000)?;
        set_condition(
            &mut status.conditions,
            Condition::new(READY, ConditionStatus::False, "Creating", "").with_transition_time(t0),
        );
        let stored = api.patch_status("net", &pp, &Patch::Apply(apply(&status))).await?;
        let stored = stored.status.context("status")?;
        check_eq(&stored.conditions, &status.conditions, "conditions after first write")?;

        // Same status, new reason: the stored transition time stays; a flip moves it.
        let mut next = stored.clone();
        let changed = set_condition(
            &mut next.conditions,
            Condition::new(READY, ConditionStatus::False, "WaitingForSubnet", "subnet pending"),
        );
        ensure!(changed, "reason change not reported");
        let stored = api.patch_status("net", &pp, &Patch::Apply(apply(&next))).await?.status.context("status")?;
        let ready = find_condition(&stored.conditions, READY).context("Ready")?;
        check_eq(&ready.last_transition_time.0, &t0, "transition time after a reason change")?;
        check_eq(&ready.reason.as_str(), &"WaitingForSubnet", "reason")?;

        let mut flipped = stored.clone();
        set_condition(&mut flipped.conditions, Condition::new(READY, ConditionStatus::True, "Wired", ""));
        let stored = api.patch_status("net", &pp, &Patch::Apply(apply(&flipped))).await?.status.context("status")?;
        let ready = find_condition(&stored.conditions, READY).context("Ready")?;
        ensure!(ready.is_true() && ready.last_transition_time.0 > t0, "flip not recorded: {ready:?}");
        Ok(())
    })
    .await
}

// === The per-kind round trip ===

async fn exercise<K>(
    client: Client,
    ns: &str,
    fixture_file: &str,
    finalizer: &str,
    edit_spec: impl FnOnce(&mut K::Spec),
) -> anyhow::Result<()>
where
    K: Resource<Scope = NamespaceResourceScope, DynamicType = ()>
        + HasSpec
        + HasStatus
        + Clone
        + Debug
        + Serialize
        + DeserializeOwned
        + Send
        + Sync
        + 'static,
    K::Spec: PartialEq + Debug + Clone + Serialize,
    K::Status: PartialEq + Debug + Clone + Default + Serialize,
{
    let api: Api<K> = Api::namespaced(client, ns);
    let mut value = fixture(fixture_file)?;
    localize_metadata(&mut value, ns);
    if let Some(meta) = value["metadata"].as_object_mut() {
        meta.remove("finalizers");
    }
    let obj: K = serde_json::from_value(value)?;
    let name = obj.name_any();
    let spec = obj.spec().clone();
    let status = obj.status().cloned().context("fixture has a status")?;

    // A status sent with create is dropped: only the subresource writes status.
    let created = api.create(&PostParams::default(), &obj).await?;
    ensure!(
        created.status().is_none(),
        "status set on create was kept: {:?}",
        created.status()
    );
    check_eq(created.spec(), &spec, "spec after create")?;
    let generation = created.meta().generation;

    // Status through the subresource, server-side apply with the status manager.
    let apply = json!({"apiVersion": K::api_version(&()), "kind": K::kind(&()), "status": status});
    let applied = api
        .patch_status(
            &name,
            &PatchParams::apply(STATUS_MANAGER).force(),
            &Patch::Apply(&apply),
        )
        .await?;
    check_eq(
        &applied.status(),
        &Some(&status),
        "status after applying it to /status",
    )?;
    check_eq(applied.spec(), &spec, "spec after a status write")?;
    check_eq(
        &applied.meta().generation,
        &generation,
        "generation after a status write",
    )?;

    // A spec change sent to /status is ignored.
    let mut new_spec = spec.clone();
    edit_spec(&mut new_spec);
    ensure!(new_spec != spec, "edit_spec changed nothing");
    let patched = api
        .patch_status(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": &new_spec})),
        )
        .await?;
    check_eq(
        patched.spec(),
        &spec,
        "spec after sending a spec change to /status",
    )?;

    // A full update of the main resource changes spec, ignores the status in its body, bumps generation.
    let mut update = patched.clone();
    *update.spec_mut() = new_spec.clone();
    *update.status_mut() = Some(K::Status::default());
    let pp = PostParams {
        field_manager: Some(SPEC_MANAGER.into()),
        ..PostParams::default()
    };
    let replaced = api.replace(&name, &pp, &update).await?;
    check_eq(replaced.spec(), &new_spec, "spec after update")?;
    check_eq(
        &replaced.status(),
        &Some(&status),
        "status after a spec update carrying another status",
    )?;
    ensure!(
        replaced.meta().generation > generation,
        "generation not bumped by a spec update"
    );

    // The finalizer holds deletion until it is removed.
    api.patch(
        &name,
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": [finalizer]}})),
    )
    .await?;
    api.delete(&name, &DeleteParams::default()).await?;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let held = api
        .get(&name)
        .await
        .context("object vanished while its finalizer was set")?;
    ensure!(
        held.meta().deletion_timestamp.is_some(),
        "no deletionTimestamp after delete"
    );
    check_eq(
        held.finalizers(),
        &[finalizer.to_string()][..],
        "finalizers while terminating",
    )?;
    api.patch(
        &name,
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await?;
    wait_gone(&api, &name).await
}

// === Helpers ===

/// Lab client with the CRDs applied (server-side, from the committed crdgen output) and Established.
async fn setup() -> anyhow::Result<Client> {
    let lab = Lab::require();
    let kubeconfig = Kubeconfig::read_from(&lab.kubeconfig)?;
    let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await?;
    let client = Client::try_from(config)?;

    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../deploy/crds/kuryr-crds.yaml");
    let yaml = std::fs::read_to_string(path).with_context(|| path.to_string())?;
    let crds: Vec<CustomResourceDefinition> = yaml
        .split("\n---\n")
        .skip(1)
        .map(serde_yaml::from_str)
        .collect::<Result<_, _>>()
        .context("parsing deploy/crds/kuryr-crds.yaml")?;
    ensure!(crds.len() == 4, "expected 4 CRDs in {path}, found {}", crds.len());
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in &crds {
        let name = crd.name_any();
        api.patch(
            &name,
            &PatchParams::apply(CRD_MANAGER).force(),
            &Patch::Apply(crd),
        )
        .await
        .with_context(|| format!("applying CRD {name}"))?;
    }
    for crd in &crds {
        let name = crd.name_any();
        tokio::time::timeout(
            Duration::from_secs(30),
            await_condition(api.clone(), &name, conditions::is_crd_established()),
        )
        .await
        .with_context(|| format!("CRD {name} not Established within 30s"))??;
    }
    Ok(client)
}

/// Runs `body` in a fresh namespace, then strips Kuryr finalizers there and deletes it, whatever happened.
async fn with_namespace<F, Fut>(client: &Client, tag: &str, body: F) -> anyhow::Result<()>
where
    F: FnOnce(Client, String) -> Fut,
    Fut: Future<Output = anyhow::Result<()>>,
{
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH)?.as_nanos();
    let ns = format!("kuryr-crd-{tag}-{:x}", nanos & 0xffff_ffff_ffff);
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let meta = ObjectMeta {
        name: Some(ns.clone()),
        labels: Some(BTreeMap::from([(
            "kuryr.openstack.org/test".into(),
            "crd-roundtrip".into(),
        )])),
        ..ObjectMeta::default()
    };
    namespaces
        .create(
            &PostParams::default(),
            &Namespace {
                metadata: meta,
                ..Namespace::default()
            },
        )
        .await?;
    lab_tests::cluster::wait_default_service_account(client, &ns).await?;

    let result = body(client.clone(), ns.clone()).await;

    let mut cleanup = Ok(());
    for ar in [
        KuryrPort::api_resource(),
        KuryrNetwork::api_resource(),
        KuryrLoadBalancer::api_resource(),
        KuryrNetworkPolicy::api_resource(),
    ] {
        let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, &ar);
        match api.list(&ListParams::default()).await {
            Ok(list) => {
                for obj in list.items.iter().filter(|o| !o.finalizers().is_empty()) {
                    if let Err(e) = release_finalizers(&api, &obj.name_any()).await {
                        cleanup = Err(e);
                    }
                }
            }
            Err(e) => cleanup = Err(e.into()),
        }
    }
    if let Err(e) = namespaces.delete(&ns, &DeleteParams::default()).await {
        cleanup = Err(anyhow::Error::from(e).context(format!("deleting namespace {ns}")));
    }
    result.and(cleanup)
}

async fn release_finalizers<K>(api: &Api<K>, name: &str) -> anyhow::Result<()>
where
    K: Clone + DeserializeOwned + Debug,
{
    api.patch(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await?;
    Ok(())
}

async fn wait_gone<K>(api: &Api<K>, name: &str) -> anyhow::Result<()>
where
    K: Clone + DeserializeOwned + Debug,
{
    for _ in 0..100 {
        if api.get_opt(name).await?.is_none() {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    bail!("{name} still exists 10s after its finalizers were removed")
}

/// The apiserver must refuse with 422 Invalid and a message containing every `expected` fragment. Fragments
/// avoid list indices (`spec.ports.protocol` in older servers, `spec.ports[0].protocol` in newer ones).
fn expect_invalid(result: Result<(), kuryr_api::kube::Error>, expected: &[&str]) -> anyhow::Result<()> {
    match result {
        Ok(()) => bail!("accepted, expected a 422 naming {expected:?}"),
        Err(kuryr_api::kube::Error::Api(status)) => {
            ensure!(
                status.code == 422,
                "HTTP {} ({}), expected 422: {}",
                status.code,
                status.reason,
                status.message
            );
            for fragment in expected {
                ensure!(
                    status.message.contains(fragment),
                    "message lacks {fragment:?}: {}",
                    status.message
                );
            }
            println!("rejected: {}", status.message);
            Ok(())
        }
        Err(e) => Err(e.into()),
    }
}

/// One row of the server-side Table view (what `kubectl get` prints), keyed by column name.
async fn table_row(
    client: &Client,
    ar: &ApiResource,
    ns: &str,
    name: &str,
) -> anyhow::Result<BTreeMap<String, Value>> {
    let url = format!("/apis/{}/namespaces/{ns}/{}", ar.api_version, ar.plural);
    let mut request = kuryr_api::kube::core::Request::new(url).get(name, &GetParams::default())?;
    request
        .headers_mut()
        .insert("accept", "application/json;as=Table;v=v1;g=meta.k8s.io".parse()?);
    let table: Value = client.request(request).await?;
    let names = table["columnDefinitions"]
        .as_array()
        .context("columnDefinitions")?;
    let cells = table["rows"][0]["cells"].as_array().context("rows[0].cells")?;
    Ok(names
        .iter()
        .zip(cells)
        .filter_map(|(col, cell)| Some((col["name"].as_str()?.to_owned(), cell.clone())))
        .collect())
}

fn fixture(name: &str) -> anyhow::Result<Value> {
    let path = format!(
        "{}/../kuryr-api/tests/fixtures/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).with_context(|| path.clone())?;
    serde_json::from_str(&text).with_context(|| path.clone())
}

/// Keeps name, labels, annotations and finalizers; moves the object into `ns` and drops what the server
/// assigns (and owner references, whose owners do not exist here and would let the GC delete the object).
fn localize_metadata(value: &mut Value, ns: &str) {
    if let Some(meta) = value["metadata"].as_object_mut() {
        meta.retain(|k, _| matches!(k.as_str(), "name" | "labels" | "annotations" | "finalizers"));
        meta.insert("namespace".into(), ns.into());
    }
}

fn check_eq<T: PartialEq + Debug + ?Sized>(got: &T, want: &T, what: &str) -> anyhow::Result<()> {
    ensure!(got == want, "{what}:\n got: {got:?}\nwant: {want:?}");
    Ok(())
}

/// `want` is contained in `got`: every key of every object in `want` is in `got` with an equal value (the
/// server may add defaults).
fn contains(want: &Value, got: &Value, path: &str) -> anyhow::Result<()> {
    match (want, got) {
        (Value::Object(w), Value::Object(g)) => {
            for (k, wv) in w {
                let gv = g.get(k).with_context(|| format!("{path}.{k} missing"))?;
                contains(wv, gv, &format!("{path}.{k}"))?;
            }
            Ok(())
        }
        (Value::Array(w), Value::Array(g)) => {
            ensure!(w.len() == g.len(), "{path}: {} items, want {}", g.len(), w.len());
            for (i, (wv, gv)) in w.iter().zip(g).enumerate() {
                contains(wv, gv, &format!("{path}[{i}]"))?;
            }
            Ok(())
        }
        _ => {
            ensure!(want == got, "{path}: got {got}, want {want}");
            Ok(())
        }
    }
}

fn merge(base: &mut Value, extra: Value) {
    if let (Some(base), Value::Object(extra)) = (base.as_object_mut(), extra) {
        base.extend(extra);
    }
}
