//! The KuryrPort reconcile: a port of its own, a pool miss and a pool hit, and what a crash left behind.

use kube::runtime::controller::Action;
use kuryr_api::conditions::{is_condition_true, READY};
use kuryr_api::{labels, VifType};
use kuryr_core::owner::OwnerKind;
use kuryr_openstack::neutron::ports::{self, CreatePort};
use kuryr_openstack::neutron::trunks::{self, SubPort};
use kuryr_openstack::Owner;

use crate::harness::{cached, harness, harness_on_node, kuryrport, vif, TestCloud, NODE};

#[tokio::test]
async fn without_pools_a_pod_gets_its_own_port_as_a_vlan_subport_and_a_ready_status() {
    let cloud = TestCloud::start().await;
    let mut h = harness(&cloud, |c| c.pools_enabled = false);
    let kp = h.add_kuryrport(&kuryrport("web-0"));

    // Wired, it waits for a change: no timer is left in the controller's scheduler (nor by the next
    // reconcile, which the watch brings with the status just written).
    let settled = Action::await_change();
    assert_eq!(h.reconcile(&kp).await.unwrap(), settled);
    let kp = h.kuryrport_now(&kp);
    assert_eq!(h.reconcile(&kp).await.unwrap(), settled);

    let st = kp.status.as_ref().expect("status written");
    let vif = vif(&kp);
    assert!(vif.active, "cloudsim's subport goes ACTIVE at once");
    assert!(is_condition_true(&st.conditions, READY));
    assert_eq!(vif.trunk_id.as_deref(), Some(cloud.trunk_id.as_str()));
    assert_eq!(cloud.subports().await, vec![(vif.port_id.clone(), 1)]);
    assert_eq!(vif.vlan_id, Some(1));
    let port = ports::get(&cloud.cloud, &vif.port_id).await.unwrap();
    let owner = Owner::from_tags(&port.tags).expect("ownership tags");
    assert_eq!(
        (owner.kind.as_str(), owner.uid.as_str()),
        (OwnerKind::KuryrPort.as_str(), "pod-web-0")
    );
    assert_eq!(cloud.calls("neutron.ports.bulk_create"), 1);
}

/// Every reconcile in flight holds its whole future (up to 256 at once, all of them after a restart): the
/// rarely taken paths are boxed, so that they take room only when taken. The cleanup held inline made it
/// 35 KB (9 MB at a restart's 256).
#[tokio::test]
async fn a_kuryrport_reconcile_in_flight_holds_a_few_kilobytes() {
    let cloud = TestCloud::start().await;
    let mut h = harness(&cloud, |_| {});
    let kp = h.add_kuryrport(&kuryrport("web-0"));
    let fut = kuryr_controller::ports::reconcile::reconcile(std::sync::Arc::new(cached(&kp)), h.ctx.clone());
    let size = std::mem::size_of_val(&fut);
    assert!(size <= 8 * 1024, "a reconcile future of {size} B");
    drop(fut);
}

#[tokio::test]
async fn a_nodes_pod_vif_label_overrides_the_controllers_driver_and_a_bad_one_says_which_label() {
    // The controller defaults to nested-macvlan; this node is a VM on a trunk, labelled nested-vlan.
    let cloud = TestCloud::start().await;
    let mut h = harness_on_node(&cloud, &[(labels::POD_VIF, "nested-vlan")], |c| {
        c.pools_enabled = false;
        c.vif_type = VifType::NestedMacvlan;
    });
    let kp = h.add_kuryrport(&kuryrport("web-0"));
    h.reconcile(&kp).await.unwrap();
    let kp = h.kuryrport_now(&kp);
    assert_eq!(vif(&kp).vif_type, VifType::NestedVlan);
    assert_eq!(cloud.subports().await, vec![(vif(&kp).port_id.clone(), 1)]);

    // Upstream's label works too; ours wins when both are set.
    let cloud = TestCloud::start().await;
    let mut h = harness_on_node(
        &cloud,
        &[
            (labels::UPSTREAM_POD_VIF, "nested-vlan"),
            (labels::POD_VIF, "nested-macvlan"),
        ],
        |c| c.pools_enabled = false,
    );
    let kp = h.add_kuryrport(&kuryrport("web-1"));
    h.reconcile(&kp).await.unwrap();
    assert_eq!(vif(&h.kuryrport_now(&kp)).vif_type, VifType::NestedMacvlan);
    assert!(
        cloud.subports().await.is_empty(),
        "nested-macvlan attaches no subport"
    );

    // A label naming no driver: no port, and the error names the label and its value.
    let cloud = TestCloud::start().await;
    let mut h = harness_on_node(&cloud, &[(labels::POD_VIF, "vlan")], |c| c.pools_enabled = false);
    let kp = h.add_kuryrport(&kuryrport("web-2"));
    let err = h.reconcile(&kp).await.unwrap_err();
    assert!(err.is_permanent(), "{err}");
    assert!(
        err.to_string().contains(r#"kuryr.openstack.org/pod-vif="vlan""#),
        "{err}"
    );
    assert!(
        cloud.pod_ports().await.is_empty(),
        "no port for a pod whose driver is unknown"
    );
}

#[tokio::test]
async fn a_pool_miss_refills_in_one_bulk_create_and_the_next_pod_is_a_pool_hit() {
    let cloud = TestCloud::start().await;
    let mut h = harness(&cloud, |_| {});
    let first = h.add_kuryrport(&kuryrport("web-0"));

    h.reconcile(&first).await.unwrap();

    assert_eq!(cloud.calls("neutron.ports.bulk_create"), 1, "one refill");
    assert_eq!(
        cloud.calls("neutron.trunks.add_subports"),
        1,
        "attached in one call"
    );
    let made = cloud.pod_ports().await;
    assert!(made.len() > 1, "the refill made spares: {made:?}");
    let first = h.sync_cache(&first);
    let first_port = vif(&first).port_id.clone();

    let second = h.add_kuryrport(&kuryrport("web-1"));
    h.reconcile(&second).await.unwrap();

    let second = h.kuryrport_now(&second);
    let second_port = &vif(&second).port_id;
    assert!(made.contains(second_port), "a port the first refill made");
    assert_ne!(second_port, &first_port);
    assert_eq!(
        cloud.calls("neutron.ports.bulk_create"),
        1,
        "no create for a pool hit"
    );
}

#[tokio::test]
async fn ports_a_crash_left_tagged_for_the_pod_are_deleted_before_the_status_names_a_port() {
    let cloud = TestCloud::start().await;
    let mut h = harness(&cloud, |c| c.pools_enabled = false);
    // A process killed between its create + attach and its status write left this port.
    let tags = Owner::new("reconcile-test", OwnerKind::KuryrPort.as_str(), "pod-web-0")
        .tags()
        .unwrap();
    let leftover = ports::create(
        &cloud.cloud,
        &CreatePort::on_subnet(&cloud.network_id, &cloud.subnet_id).tagged(tags),
    )
    .await
    .unwrap();
    trunks::add_subports(&cloud.cloud, &cloud.trunk_id, &[SubPort::vlan(&leftover.id, 1)])
        .await
        .unwrap();
    let kp = h.add_kuryrport(&kuryrport("web-0"));

    h.reconcile(&kp).await.unwrap();

    let kp = h.kuryrport_now(&kp);
    let vif = vif(&kp);
    assert_ne!(vif.port_id, leftover.id);
    let gone = ports::get(&cloud.cloud, &leftover.id).await.unwrap_err();
    assert!(gone.is_not_found(), "{gone}");
    assert_eq!(
        cloud.subports().await,
        vec![(vif.port_id.clone(), 2)],
        "the leftover's VLAN was taken when the new port was attached; only the new subport is left"
    );
}

/// A burst of pods on one VM: the per-pod attaches that arrive while an `add_subports` to the trunk is in
/// flight go together in the next call, each port at a VLAN of its own.
#[tokio::test]
async fn attaches_to_one_trunk_at_once_share_add_subports_calls_each_at_its_own_vlan() {
    use kuryr_cloudsim::profile::{Dist, LatencySpec};
    use kuryr_controller::ports::trunk::Parent;

    const N: usize = 12;
    let cloud = TestCloud::start().await;
    let h = harness(&cloud, |c| c.pools_enabled = false);
    let ids = new_ports(&cloud, N).await;
    // Every call instant but add_subports (100 ms), so the attaches overlap it.
    let mut profile = kuryr_cloudsim::Profile::zero();
    profile.time_scale = 1.0;
    profile.latency.default = LatencySpec::Plain(Dist::Ms(0.0));
    profile.latency.ops = [(
        "neutron.trunks.add_subports".to_owned(),
        LatencySpec::Plain(Dist::Ms(100.0)),
    )]
    .into();
    cloud.sim.set_profile(profile);
    cloud.sim.clear_calls();
    let vm = ports::get(&cloud.cloud, &cloud.vm_port_id).await.unwrap();
    let parent = Parent {
        port_id: vm.id.clone(),
        trunk_id: cloud.trunk_id.clone(),
        mac: vm.mac_address.clone(),
    };

    let got = futures::future::join_all(
        ids.iter()
            .map(|id| h.ctx.trunks.attach(&h.ctx.cloud, "worker-1", &parent, id)),
    )
    .await;
    let batched = cloud.calls("neutron.trunks.add_subports");

    let vlans: Vec<u16> = got.into_iter().map(|r| r.unwrap()).collect();
    let distinct: std::collections::BTreeSet<u16> = vlans.iter().copied().collect();
    assert_eq!(distinct.len(), N, "a VLAN each: {vlans:?}");
    let mut on_trunk = cloud.subports().await;
    on_trunk.sort();
    let mut want: Vec<(String, u32)> = ids
        .iter()
        .cloned()
        .zip(vlans.iter().map(|v| u32::from(*v)))
        .collect();
    want.sort();
    assert_eq!(on_trunk, want, "each port on the trunk at the VLAN it was told");
    // The first goes alone; the 11 that arrived during it go together.
    assert!(batched <= 2, "{batched} add_subports calls for {N} ports");

    // A batch holding a port Neutron refuses (deleted meanwhile): each port is tried alone, so only that
    // pod's attach fails.
    let more = new_ports(&cloud, 4).await;
    ports::delete(&cloud.cloud, &more[2]).await.unwrap();
    let got = futures::future::join_all(
        more.iter()
            .map(|id| h.ctx.trunks.attach(&h.ctx.cloud, "worker-1", &parent, id)),
    )
    .await;
    let failed: Vec<usize> = (0..more.len()).filter(|i| got[*i].is_err()).collect();
    assert_eq!(failed, [2], "{got:?}");
    let on_trunk: Vec<String> = cloud.subports().await.into_iter().map(|(p, _)| p).collect();
    for (i, id) in more.iter().enumerate() {
        assert_eq!(on_trunk.contains(id), i != 2, "port {i}");
    }
}

/// `n` unattached ports on the pod subnet.
async fn new_ports(cloud: &TestCloud, n: usize) -> Vec<String> {
    let mut ids = Vec::new();
    for _ in 0..n {
        let on_subnet = CreatePort::on_subnet(&cloud.network_id, &cloud.subnet_id);
        ids.push(ports::create(&cloud.cloud, &on_subnet).await.unwrap().id);
    }
    ids
}

/// An IPv6 subnet on the pod network, for the dual-stack and IPv6-only tests.
async fn v6_subnet(cloud: &TestCloud) -> String {
    let req = kuryr_openstack::neutron::subnets::CreateSubnet {
        ip_version: 6,
        ..kuryr_openstack::neutron::subnets::CreateSubnet::v4(&cloud.network_id, "fd42:18::/64")
    };
    kuryr_openstack::neutron::subnets::create(&cloud.cloud, &req, &[])
        .await
        .unwrap()
        .id
}

#[tokio::test]
async fn a_dual_stack_pod_gets_an_address_of_each_family_on_its_one_pooled_port() {
    let cloud = TestCloud::start().await;
    let v6 = v6_subnet(&cloud).await;
    let mut h = harness(&cloud, |c| c.secondary_pod_subnet_id = Some(v6.clone()));
    let kp = h.wired("web-0").await;
    let vif = vif(&kp);
    let got: Vec<(Option<&str>, bool)> = vif
        .ips
        .iter()
        .map(|ip| (ip.subnet_id.as_deref(), ip.address.contains(':')))
        .collect();
    assert_eq!(
        got,
        vec![(Some(cloud.subnet_id.as_str()), false), (Some(v6.as_str()), true)],
        "{:?}",
        vif.ips
    );
    assert!(vif.ips[1].gateway.as_deref().is_some_and(|g| g.contains(':')));
}

#[tokio::test]
async fn an_ipv6_only_cluster_wires_pods_on_its_ipv6_pod_subnet() {
    let cloud = TestCloud::start().await;
    let v6 = v6_subnet(&cloud).await;
    let mut h = harness(&cloud, |c| {
        c.pod_subnet_id = v6.clone();
        c.pools_enabled = false;
    });
    let kp = h.wired("web-0").await;
    let vif = vif(&kp);
    assert_eq!(vif.ips.len(), 1, "{:?}", vif.ips);
    assert!(vif.ips[0].address.starts_with("fd42:18:"), "{:?}", vif.ips);
    assert_eq!(vif.ips[0].cidr, "fd42:18::/64");
    let port = ports::get(&cloud.cloud, &vif.port_id).await.unwrap();
    assert!(
        port.fixed_ips.iter().all(|f| f.subnet_id == v6),
        "{:?}",
        port.fixed_ips
    );
}

#[tokio::test]
async fn secondary_pod_subnet_of_the_same_family_is_refused_with_a_config_error() {
    let cloud = TestCloud::start().await;
    let same = kuryr_openstack::neutron::subnets::create(
        &cloud.cloud,
        &kuryr_openstack::neutron::subnets::CreateSubnet::v4(&cloud.network_id, "10.99.0.0/24"),
        &[],
    )
    .await
    .unwrap()
    .id;
    let mut h = harness(&cloud, |c| c.secondary_pod_subnet_id = Some(same));
    let kp = h.add_kuryrport(&kuryrport("web-0"));
    let err = h.reconcile(&kp).await.unwrap_err().to_string();
    assert!(err.contains("one of each family"), "{err}");
    assert!(
        cloud.pod_ports().await.is_empty(),
        "no port made on a misconfiguration"
    );
}

/// neutron-vif without pools: the pod's own port is bound on the host its node's label names (a hypervisor
/// Neutron knows by another name), else on the node's name.
#[tokio::test]
async fn a_neutron_vif_pods_own_port_is_bound_on_the_host_its_nodes_label_names() {
    let bound_on = |host: Option<&'static str>| async move {
        let cloud = TestCloud::start().await;
        let mut node_labels = vec![(labels::POD_VIF, "neutron-vif")];
        node_labels.extend(host.map(|h| (labels::NEUTRON_HOST, h)));
        let mut h = harness_on_node(&cloud, &node_labels, |c| c.pools_enabled = false);
        let kp = h.add_kuryrport(&kuryrport("web-0"));
        h.reconcile(&kp).await.unwrap();
        let vif = vif(&h.kuryrport_now(&kp)).clone();
        assert_eq!(vif.vif_type, VifType::NeutronVif);
        ports::get(&cloud.cloud, &vif.port_id)
            .await
            .unwrap()
            .binding_host_id
    };
    assert_eq!(bound_on(Some("hv-3")).await, "hv-3");
    assert_eq!(bound_on(None).await, NODE);
}
