//! The promised invariants, as pure checks over a [`Snapshot`] of the cluster and the cloud (see
//! docs/RELIABILITY.md). Each count is zero on a healthy system; the unit tests at the end break each
//! invariant in a snapshot and show its count turning non-zero.

use std::collections::{BTreeMap, BTreeSet, HashSet};

use serde::Serialize;

/// A live pod (not being deleted).
#[derive(Debug, Clone, Default)]
pub struct PodView {
    pub name: String,
    pub uid: String,
    pub node: String,
}

#[derive(Debug, Clone, Default)]
pub struct VifView {
    pub port_id: String,
    pub vlan: Option<u16>,
    pub trunk: Option<String>,
    pub active: bool,
}

#[derive(Debug, Clone, Default)]
pub struct KpView {
    pub name: String,
    pub pod_uid: String,
    pub ready: bool,
    pub deleting: bool,
    pub vifs: Vec<VifView>,
}

/// A port carrying this cluster's ownership tags.
#[derive(Debug, Clone, Default)]
pub struct PortView {
    pub id: String,
    pub owner_kind: String,
    pub owner_uid: String,
    /// Neutron's `status`.
    pub status: String,
    /// Whether OVN has the port up (Southbound `Port_Binding.up`), where the snapshot could ask OVN (the
    /// lab's real Neutron): the dataplane's own answer, which Neutron's `status` only copies, late on a busy
    /// Neutron (docs/pod-networking.md). `None`: not asked (cloudsim, or the port is ACTIVE).
    pub ovn_up: Option<bool>,
}

/// Any other tagged cloud object (security group, network, subnet, floating IP).
#[derive(Debug, Clone, Default)]
pub struct TaggedView {
    pub resource: String,
    pub id: String,
    pub owner_uid: String,
}

#[derive(Debug, Clone, Default)]
pub struct ServiceView {
    pub name: String,
    pub uid: String,
    /// (IP, target port) of every ready endpoint address.
    pub ready_backends: BTreeSet<(String, u32)>,
}

#[derive(Debug, Clone, Default)]
pub struct KlbView {
    pub name: String,
    pub lb_id: Option<String>,
}

/// A load balancer carrying this cluster's ownership tags.
#[derive(Debug, Clone, Default)]
pub struct LbView {
    pub id: String,
    pub owner_uid: String,
    pub provisioning_status: String,
    /// pool id -> (address, port) of its members.
    pub pools: BTreeMap<String, BTreeSet<(String, u32)>>,
}

/// What the checks look at. `node_trunks`: node -> trunk id; `trunks`: trunk id -> (port id -> VLAN).
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    pub pods: Vec<PodView>,
    /// Pods still there with a deletionTimestamp, Services likewise.
    pub terminating_pods: Vec<String>,
    pub terminating_services: Vec<String>,
    pub kps: Vec<KpView>,
    pub ports: Vec<PortView>,
    pub node_trunks: BTreeMap<String, String>,
    pub trunks: BTreeMap<String, BTreeMap<String, u32>>,
    pub services: Vec<ServiceView>,
    pub klbs: Vec<KlbView>,
    pub lbs: Vec<LbView>,
    pub other_tagged: Vec<TaggedView>,
    /// Uids of every live Kubernetes object a tag may name (as the garbage collector sees them).
    pub live_uids: HashSet<String>,
}

/// The invariant counts; `problems` says what each non-zero count is made of.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct Counts {
    pub pods_checked: usize,
    pub services_checked: usize,
    pub unwired_pods: usize,
    pub duplicate_vlans: usize,
    pub member_mismatches: usize,
    pub leaked_objects: usize,
    pub stuck_finalizers: usize,
    /// Pods counted wired although Neutron still says their port is DOWN, because OVN has it up: Neutron's
    /// copy of OVN's state lagging (not a broken invariant; reported so that the lag is seen).
    pub neutron_status_lagging: usize,
    #[serde(skip)]
    pub problems: Vec<String>,
}

impl Counts {
    pub fn clean(&self) -> bool {
        self.unwired_pods == 0
            && self.duplicate_vlans == 0
            && self.member_mismatches == 0
            && self.leaked_objects == 0
            && self.stuck_finalizers == 0
    }

    pub fn summary(&self) -> String {
        format!(
            "pods_checked={} services_checked={} unwired_pods={} duplicate_vlans={} member_mismatches={} \
             leaked_objects={} stuck_finalizers={} neutron_status_lagging={}",
            self.pods_checked,
            self.services_checked,
            self.unwired_pods,
            self.duplicate_vlans,
            self.member_mismatches,
            self.leaked_objects,
            self.stuck_finalizers,
            self.neutron_status_lagging
        )
    }
}

pub fn check(s: &Snapshot) -> Counts {
    let mut c = Counts {
        pods_checked: s.pods.len(),
        services_checked: s.services.len(),
        ..Counts::default()
    };
    wired_once(s, &mut c);
    vlans(s, &mut c);
    members(s, &mut c);
    leaks(s, &mut c);
    finalizers(s, &mut c);
    c
}

/// Every live pod: a Ready KuryrPort with one active VIF whose port is ACTIVE (or up in OVN while Neutron's
/// copy still says DOWN), a subport of the pod's
/// node's trunk on the VLAN the status names, named by no other KuryrPort, and no second port tagged for
/// the pod.
fn wired_once(s: &Snapshot, c: &mut Counts) {
    let ports: BTreeMap<&str, &PortView> = s.ports.iter().map(|p| (p.id.as_str(), p)).collect();
    let mut users: BTreeMap<&str, usize> = BTreeMap::new();
    for kp in s.kps.iter().filter(|k| !k.deleting) {
        for v in &kp.vifs {
            *users.entry(v.port_id.as_str()).or_default() += 1;
        }
    }
    for pod in &s.pods {
        // Ok(true): wired, with Neutron's status lagging OVN's.
        let problem = (|| {
            let kp = s
                .kps
                .iter()
                .find(|k| k.name == pod.name && k.pod_uid == pod.uid)
                .ok_or("no KuryrPort")?;
            let [vif] = kp.vifs.as_slice() else {
                return Err("not exactly one VIF");
            };
            if !kp.ready || !vif.active {
                return Err("not Ready");
            }
            let port = ports
                .get(vif.port_id.as_str())
                .ok_or("its port is not in the cloud")?;
            let lagging = port.status != "ACTIVE";
            match (lagging, port.ovn_up) {
                (true, None) => return Err("its port is not ACTIVE"),
                (true, Some(false)) => return Err("its port is not ACTIVE, nor up in OVN"),
                _ => {}
            }
            let trunk = s.node_trunks.get(&pod.node).ok_or("no trunk for its node")?;
            if vif.trunk.as_ref() != Some(trunk) {
                return Err("status names another trunk");
            }
            let on_trunk = s.trunks.get(trunk).and_then(|t| t.get(&vif.port_id)).copied();
            if on_trunk.is_none() || on_trunk != vif.vlan.map(u32::from) {
                return Err("port not on its trunk at the VLAN the status names");
            }
            if users.get(vif.port_id.as_str()).copied().unwrap_or(0) > 1 {
                return Err("port named by another KuryrPort too");
            }
            let extra = s
                .ports
                .iter()
                .filter(|p| p.owner_uid == pod.uid && p.id != vif.port_id)
                .count();
            if extra > 0 {
                return Err("a second port is tagged for it");
            }
            Ok(lagging)
        })();
        match problem {
            Ok(lagging) => c.neutron_status_lagging += usize::from(lagging),
            Err(why) => {
                c.unwired_pods += 1;
                c.problems.push(format!("pod {}: {why}", pod.name));
            }
        }
    }
}

/// No VLAN named twice on one trunk, by KuryrPort statuses or by the trunk itself.
fn vlans(s: &Snapshot, c: &mut Counts) {
    let mut named: BTreeMap<(&str, u16), Vec<&str>> = BTreeMap::new();
    for kp in s.kps.iter().filter(|k| !k.deleting) {
        for v in &kp.vifs {
            if let (Some(t), Some(vlan)) = (&v.trunk, v.vlan) {
                named.entry((t.as_str(), vlan)).or_default().push(&kp.name);
            }
        }
    }
    for ((trunk, vlan), who) in named.iter().filter(|(_, w)| w.len() > 1) {
        c.duplicate_vlans += 1;
        c.problems
            .push(format!("VLAN {vlan} on trunk {trunk} named by {who:?}"));
    }
    for (trunk, subports) in &s.trunks {
        let mut seen = BTreeSet::new();
        for vlan in subports.values() {
            if !seen.insert(vlan) {
                c.duplicate_vlans += 1;
                c.problems
                    .push(format!("trunk {trunk} carries VLAN {vlan} twice"));
            }
        }
    }
}

/// Every live Service: its KuryrLoadBalancer names an ACTIVE load balancer whose every pool holds exactly
/// the Service's ready endpoints.
fn members(s: &Snapshot, c: &mut Counts) {
    for svc in &s.services {
        let problem = (|| {
            let klb = s
                .klbs
                .iter()
                .find(|k| k.name == svc.name)
                .ok_or_else(|| "no KuryrLoadBalancer".to_owned())?;
            let id = klb
                .lb_id
                .as_ref()
                .ok_or_else(|| "no load balancer in the status".to_owned())?;
            let lb = s
                .lbs
                .iter()
                .find(|l| &l.id == id)
                .ok_or_else(|| format!("load balancer {id} not in the cloud"))?;
            if lb.provisioning_status != "ACTIVE" {
                return Err(format!("load balancer {id} is {}", lb.provisioning_status));
            }
            if lb.pools.is_empty() {
                return Err(format!("load balancer {id} has no pool"));
            }
            for (pool, got) in &lb.pools {
                if got != &svc.ready_backends {
                    return Err(format!(
                        "pool {pool} members {got:?} != ready endpoints {:?}",
                        svc.ready_backends
                    ));
                }
            }
            Ok(())
        })();
        if let Err(why) = problem {
            c.member_mismatches += 1;
            c.problems.push(format!("service {}: {why}", svc.name));
        }
    }
}

/// Tagged objects without a live owner: pod ports of pods that are gone, pool ports attached to no trunk
/// and named by no KuryrPort, load balancers no KuryrLoadBalancer names, anything else whose owner uid is
/// not live.
fn leaks(s: &Snapshot, c: &mut Counts) {
    let attached: HashSet<&str> = s
        .trunks
        .values()
        .flat_map(|t| t.keys().map(String::as_str))
        .collect();
    let named: HashSet<&str> = s
        .kps
        .iter()
        .flat_map(|k| k.vifs.iter().map(|v| v.port_id.as_str()))
        .collect();
    for p in &s.ports {
        let leaked = if p.owner_kind == "pool" {
            !attached.contains(p.id.as_str()) && !named.contains(p.id.as_str())
        } else {
            !s.live_uids.contains(&p.owner_uid)
        };
        if leaked {
            c.leaked_objects += 1;
            c.problems.push(format!(
                "port {} ({}={}) has no live owner",
                p.id, p.owner_kind, p.owner_uid
            ));
        }
    }
    let lb_named: HashSet<&str> = s.klbs.iter().filter_map(|k| k.lb_id.as_deref()).collect();
    for lb in &s.lbs {
        if !s.live_uids.contains(&lb.owner_uid) || !lb_named.contains(lb.id.as_str()) {
            c.leaked_objects += 1;
            c.problems.push(format!(
                "load balancer {} ({}) is named by no KuryrLoadBalancer",
                lb.id, lb.provisioning_status
            ));
        }
    }
    for o in s
        .other_tagged
        .iter()
        .filter(|o| !s.live_uids.contains(&o.owner_uid))
    {
        c.leaked_objects += 1;
        c.problems
            .push(format!("{} {} has no live owner", o.resource, o.id));
    }
}

/// Nothing held by a finalizer once its owner is gone: KuryrPorts of pods that no longer exist,
/// KuryrLoadBalancers of Services that no longer exist, pods and Services stuck in deletion.
fn finalizers(s: &Snapshot, c: &mut Counts) {
    let pod_uids: HashSet<&str> = s.pods.iter().map(|p| p.uid.as_str()).collect();
    for kp in s.kps.iter().filter(|k| !pod_uids.contains(k.pod_uid.as_str())) {
        // A KuryrPort whose pod is still terminating is counted with the pod.
        if s.terminating_pods.contains(&kp.name) {
            continue;
        }
        c.stuck_finalizers += 1;
        c.problems.push(format!("KuryrPort {} outlives its pod", kp.name));
    }
    let svc_names: HashSet<&str> = s.services.iter().map(|x| x.name.as_str()).collect();
    for klb in s.klbs.iter().filter(|k| !svc_names.contains(k.name.as_str())) {
        if s.terminating_services.contains(&klb.name) {
            continue;
        }
        c.stuck_finalizers += 1;
        c.problems
            .push(format!("KuryrLoadBalancer {} outlives its Service", klb.name));
    }
    for p in &s.terminating_pods {
        c.stuck_finalizers += 1;
        c.problems.push(format!("pod {p} stuck in deletion"));
    }
    for x in &s.terminating_services {
        c.stuck_finalizers += 1;
        c.problems.push(format!("service {x} stuck in deletion"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn be(ip: &str) -> (String, u32) {
        (ip.to_owned(), 8080)
    }

    /// Two wired pods on one trunk, one Service with both as members.
    fn healthy() -> Snapshot {
        let pod = |n: &str| PodView {
            name: n.into(),
            uid: format!("uid-{n}"),
            node: "vm1".into(),
        };
        let kp = |n: &str, port: &str, vlan: u16| KpView {
            name: n.into(),
            pod_uid: format!("uid-{n}"),
            ready: true,
            deleting: false,
            vifs: vec![VifView {
                port_id: port.into(),
                vlan: Some(vlan),
                trunk: Some("t1".into()),
                active: true,
            }],
        };
        let port = |id: &str, kind: &str, uid: &str| PortView {
            id: id.into(),
            owner_kind: kind.into(),
            owner_uid: uid.into(),
            status: "ACTIVE".into(),
            ovn_up: None,
        };
        Snapshot {
            pods: vec![pod("a"), pod("b")],
            kps: vec![kp("a", "p1", 1), kp("b", "p2", 2)],
            ports: vec![
                port("p1", "KuryrPort", "uid-a"),
                port("p2", "pool", "cluster"),
                port("p3", "pool", "cluster"),
            ],
            node_trunks: [("vm1".to_owned(), "t1".to_owned())].into(),
            trunks: [(
                "t1".to_owned(),
                [("p1".to_owned(), 1), ("p2".to_owned(), 2), ("p3".to_owned(), 3)].into(),
            )]
            .into(),
            services: vec![ServiceView {
                name: "web".into(),
                uid: "uid-web".into(),
                ready_backends: [be("10.0.0.1"), be("10.0.0.2")].into(),
            }],
            klbs: vec![KlbView {
                name: "web".into(),
                lb_id: Some("lb1".into()),
            }],
            lbs: vec![LbView {
                id: "lb1".into(),
                owner_uid: "uid-web".into(),
                provisioning_status: "ACTIVE".into(),
                pools: [("pool1".to_owned(), [be("10.0.0.1"), be("10.0.0.2")].into())].into(),
            }],
            live_uids: ["uid-a", "uid-b", "uid-web"]
                .iter()
                .map(|s| s.to_string())
                .collect(),
            ..Snapshot::default()
        }
    }

    #[test]
    fn a_healthy_snapshot_breaks_nothing() {
        let c = check(&healthy());
        assert!(c.clean(), "{:?}", c.problems);
        assert_eq!((c.pods_checked, c.services_checked), (2, 1));
    }

    #[test]
    fn a_pod_without_its_port_or_with_two_is_not_wired_exactly_once() {
        let mut s = healthy();
        s.trunks.get_mut("t1").unwrap().remove("p1");
        assert_eq!(check(&s).unwired_pods, 1);
        let mut s = healthy();
        s.ports.push(PortView {
            id: "p9".into(),
            owner_kind: "KuryrPort".into(),
            owner_uid: "uid-a".into(),
            status: "DOWN".into(),
            ovn_up: None,
        });
        assert_eq!(check(&s).unwired_pods, 1);
        let mut s = healthy();
        s.kps[1].vifs[0].port_id = "p1".into();
        let c = check(&s);
        assert!(c.unwired_pods >= 1, "{:?}", c.problems);
        let mut s = healthy();
        s.kps.remove(0);
        assert_eq!(check(&s).unwired_pods, 1);
    }

    #[test]
    fn a_port_neutron_calls_down_counts_as_wired_only_when_ovn_has_it_up() {
        let mut s = healthy();
        s.ports[0].status = "DOWN".into();
        assert_eq!(check(&s).unwired_pods, 1, "not asked OVN");
        s.ports[0].ovn_up = Some(false);
        assert_eq!(check(&s).unwired_pods, 1, "down in OVN too");
        s.ports[0].ovn_up = Some(true);
        let c = check(&s);
        assert!(c.clean(), "{:?}", c.problems);
        assert_eq!(c.neutron_status_lagging, 1);
    }

    #[test]
    fn two_pods_naming_one_vlan_on_a_trunk_are_a_duplicate() {
        let mut s = healthy();
        s.kps[1].vifs[0].vlan = Some(1);
        assert_eq!(check(&s).duplicate_vlans, 1);
    }

    #[test]
    fn members_that_differ_from_ready_endpoints_are_a_mismatch() {
        let mut s = healthy();
        s.services[0].ready_backends.remove(&be("10.0.0.2"));
        assert_eq!(check(&s).member_mismatches, 1);
        let mut s = healthy();
        s.lbs[0].provisioning_status = "PENDING_UPDATE".into();
        assert_eq!(check(&s).member_mismatches, 1);
    }

    #[test]
    fn tagged_objects_without_a_live_owner_are_leaks() {
        let mut s = healthy();
        s.ports.push(PortView {
            id: "p8".into(),
            owner_kind: "KuryrPort".into(),
            owner_uid: "uid-gone".into(),
            status: "DOWN".into(),
            ovn_up: None,
        });
        // A pool port attached nowhere, a second LB for the Service, a SG of a deleted policy.
        s.ports.push(PortView {
            id: "p7".into(),
            owner_kind: "pool".into(),
            owner_uid: "cluster".into(),
            status: "DOWN".into(),
            ovn_up: None,
        });
        s.lbs.push(LbView {
            id: "lb2".into(),
            owner_uid: "uid-web".into(),
            provisioning_status: "ACTIVE".into(),
            ..LbView::default()
        });
        s.other_tagged.push(TaggedView {
            resource: "security_group".into(),
            id: "sg1".into(),
            owner_uid: "uid-np".into(),
        });
        assert_eq!(check(&s).leaked_objects, 4);
    }

    #[test]
    fn custom_resources_outliving_their_owner_are_stuck_finalizers() {
        let mut s = healthy();
        s.pods.remove(1);
        s.live_uids.remove("uid-b");
        let c = check(&s);
        assert_eq!(c.stuck_finalizers, 1, "{:?}", c.problems);
        let mut s = healthy();
        s.services.clear();
        assert_eq!(check(&s).stuck_finalizers, 1);
        let mut s = healthy();
        s.terminating_pods.push("c".into());
        assert_eq!(check(&s).stuck_finalizers, 1);
    }
}
