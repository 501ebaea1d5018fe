//! One cluster-wide listing (`kuryr_openstack::octavia::cluster::Listing`) cut per load balancer: the
//! core's [`Sighting`] (statuses and attributes, compared tick to tick) and the tree the controller plans
//! from ([`ObservedLb`], members left to the status tree).

use std::collections::{BTreeMap, HashMap};

use kuryr_core::lb::{AttrsDigest, ObservedLb, Part, ProvisioningStatus, Sighting};
use kuryr_openstack::octavia::cluster::Listing;
use kuryr_openstack::octavia::healthmonitors::HealthMonitor;
use kuryr_openstack::octavia::listeners::Listener;
use kuryr_openstack::octavia::pools::Pool;
use kuryr_openstack::octavia::IdRef;
use kuryr_openstack::Owner;
use serde::Serialize;

use super::octavia::observed_from_lists;

/// A listed object as a [`Part`]: its provisioning status, and its attributes rendered without the
/// statuses (the operating status moves with traffic and health checks, not with what we plan from).
fn part<T: Serialize>(status: &str, mut blank: T, clear: impl FnOnce(&mut T)) -> Part {
    clear(&mut blank);
    Part {
        status: ProvisioningStatus::parse(status),
        attrs: AttrsDigest::of(&serde_json::to_vec(&blank).unwrap_or_default()),
    }
}

/// Id lists in a stable order: Octavia's order is the database's.
fn sorted(ids: &mut [IdRef]) {
    ids.sort_by(|a, b| a.id.cmp(&b.id));
}

/// What one listing shows, per load balancer id.
#[derive(Debug, Default)]
pub struct Cut {
    pub sightings: Vec<Sighting>,
    pub observed: HashMap<String, ObservedLb>,
}

pub fn cut(listing: Listing) -> Cut {
    let mut listeners: HashMap<String, Vec<Listener>> = HashMap::new();
    for l in listing.listeners {
        if let Some(lb) = l.loadbalancers.first() {
            listeners.entry(lb.id.clone()).or_default().push(l);
        }
    }
    let mut pool_lb: HashMap<String, String> = HashMap::new();
    let mut pools: HashMap<String, Vec<Pool>> = HashMap::new();
    for p in listing.pools {
        if let Some(lb) = p.loadbalancers.first() {
            pool_lb.insert(p.id.clone(), lb.id.clone());
            pools.entry(lb.id.clone()).or_default().push(p);
        }
    }
    let mut monitors: HashMap<String, BTreeMap<String, HealthMonitor>> = HashMap::new();
    for h in listing.healthmonitors {
        if let Some(lb) = h.pools.first().and_then(|p| pool_lb.get(&p.id)) {
            monitors.entry(lb.clone()).or_default().insert(h.id.clone(), h);
        }
    }
    let mut out = Cut::default();
    for lb in listing.loadbalancers {
        let ls = listeners.remove(&lb.id).unwrap_or_default();
        let ps = pools.remove(&lb.id).unwrap_or_default();
        let hs = monitors.remove(&lb.id).unwrap_or_default();
        let mut parts = BTreeMap::new();
        for l in &ls {
            let p = part(&l.provisioning_status, l.clone(), |l| {
                l.provisioning_status.clear();
                l.operating_status.clear();
            });
            parts.insert(format!("listener/{}", l.id), p);
        }
        for p in &ps {
            let pt = part(&p.provisioning_status, p.clone(), |p| {
                p.provisioning_status.clear();
                p.operating_status.clear();
                sorted(&mut p.members);
            });
            parts.insert(format!("pool/{}", p.id), pt);
        }
        for h in hs.values() {
            let p = part(&h.provisioning_status, h.clone(), |h| {
                h.provisioning_status.clear();
                h.operating_status.clear();
            });
            parts.insert(format!("healthmonitor/{}", h.id), p);
        }
        let me = part(&lb.provisioning_status, lb.clone(), |lb| {
            lb.provisioning_status.clear();
            lb.operating_status.clear();
            sorted(&mut lb.listeners);
            sorted(&mut lb.pools);
        });
        if let Some(o) = observed_from_lists(&lb, ls, ps, &hs) {
            out.observed.insert(lb.id.clone(), o);
        }
        out.sightings.push(Sighting {
            owner: Owner::from_tags(&lb.tags).map(|o| o.uid),
            id: lb.id,
            lb: me,
            parts,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn listing(member_ids: &[&str], op_status: &str) -> Listing {
        serde_json::from_value::<ListingJson>(json!({
            "loadbalancers": [{"id": "lb1", "provisioning_status": "ACTIVE", "operating_status": op_status,
                "provider": "ovn", "vip_address": "10.96.0.10", "vip_port_id": "vip",
                "listeners": [{"id": "l1"}], "pools": [{"id": "p1"}],
                "tags": ["kuryr.cluster=c", "kuryr.kind=service", "kuryr.uid=svc-uid"]}],
            "listeners": [{"id": "l1", "protocol": "TCP", "protocol_port": 80, "provisioning_status": "ACTIVE",
                "operating_status": op_status, "loadbalancers": [{"id": "lb1"}], "default_pool_id": "p1"}],
            "pools": [{"id": "p1", "protocol": "TCP", "lb_algorithm": "SOURCE_IP_PORT", "provisioning_status": "ACTIVE",
                "operating_status": op_status, "loadbalancers": [{"id": "lb1"}], "listeners": [{"id": "l1"}],
                "members": member_ids.iter().map(|m| json!({"id": m})).collect::<Vec<_>>()}]
        }))
        .expect("listing")
        .into()
    }

    #[derive(serde::Deserialize)]
    struct ListingJson {
        loadbalancers: Vec<kuryr_openstack::octavia::loadbalancers::LoadBalancer>,
        listeners: Vec<Listener>,
        pools: Vec<Pool>,
    }

    impl From<ListingJson> for Listing {
        fn from(j: ListingJson) -> Self {
            Listing {
                loadbalancers: j.loadbalancers,
                listeners: j.listeners,
                pools: j.pools,
                healthmonitors: Vec::new(),
            }
        }
    }

    #[test]
    fn a_listing_is_cut_per_load_balancer_with_its_owner_and_tree() {
        let c = cut(listing(&["m1", "m2"], "ONLINE"));
        let s = &c.sightings[0];
        assert_eq!((s.id.as_str(), s.owner.as_deref()), ("lb1", Some("svc-uid")));
        assert_eq!(
            s.parts.keys().map(String::as_str).collect::<Vec<_>>(),
            vec!["listener/l1", "pool/p1"]
        );
        assert!(s.settled());
        let o = &c.observed["lb1"];
        let l = o.listeners.values().next().expect("listener");
        assert_eq!(l.pool.as_ref().map(|p| p.id.as_str()), Some("p1"));
    }

    #[test]
    fn member_ids_count_but_their_order_and_operating_statuses_do_not() {
        let a = cut(listing(&["m1", "m2"], "ONLINE")).sightings;
        let b = cut(listing(&["m2", "m1"], "OFFLINE")).sightings;
        assert_eq!(a, b);
        let gone = cut(listing(&["m2"], "ONLINE")).sightings;
        assert_ne!(a, gone);
    }
}
