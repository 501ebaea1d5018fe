//! What the collector looks at: every cloud object tagged with our cluster id, and the uids of every live
//! Kubernetes object that could own one. Any failed list aborts the sweep (a partial view would make live
//! objects look orphaned); only a Kuryr CRD that is not installed counts as empty.

use std::collections::{BTreeMap, HashSet};
use std::time::Duration;

use k8s_openapi::api::networking::v1::NetworkPolicy;
use kube::api::{Api, ListParams};
use kuryr_api::{KuryrLoadBalancer, KuryrNetwork, KuryrNetworkPolicy, KuryrPort, Namespace, Pod, Service};
use kuryr_core::gc::{CloudResource, Tagged};
use kuryr_openstack::neutron::{floating_ips, networks, ports, security_groups, subnets, Filter};
use kuryr_openstack::octavia::loadbalancers;
use kuryr_openstack::{Cloud, Owner};
use serde::Serialize;

use crate::errors::{Error, Result};

/// A tagged object plus what deleting it needs to know.
#[derive(Debug, Clone)]
pub struct Listed {
    pub obj: Tagged,
    /// Ports: `device_owner` (a `trunk:subport` must be detached first).
    pub device_owner: String,
    /// Load balancers: provisioning status (for the LBs-by-state gauge).
    pub state: String,
}

/// Everything tagged `kuryr.cluster=<cluster>`, per resource type.
#[derive(Debug, Clone, Default)]
pub struct Inventory {
    pub objects: Vec<Listed>,
}

impl Inventory {
    pub fn tagged(&self) -> Vec<Tagged> {
        self.objects.iter().map(|l| l.obj.clone()).collect()
    }

    /// Load balancers by provisioning status.
    pub fn lb_states(&self) -> BTreeMap<String, u64> {
        let mut out = BTreeMap::new();
        for l in self
            .objects
            .iter()
            .filter(|l| l.obj.resource == CloudResource::LoadBalancer)
        {
            *out.entry(l.state.clone()).or_insert(0) += 1;
        }
        out
    }

    pub fn get(&self, resource: CloudResource, id: &str) -> Option<&Listed> {
        self.objects
            .iter()
            .find(|l| l.obj.resource == resource && l.obj.id == id)
    }
}

/// Seconds since an ISO 8601 timestamp (Neutron's carry `Z`, Octavia's none: both read as UTC).
pub fn age(created_at: &str, now: chrono::DateTime<chrono::Utc>) -> Option<Duration> {
    let t = chrono::DateTime::parse_from_rfc3339(created_at)
        .map(|t| t.with_timezone(&chrono::Utc))
        .or_else(|_| {
            chrono::NaiveDateTime::parse_from_str(created_at, "%Y-%m-%dT%H:%M:%S%.f").map(|n| n.and_utc())
        })
        .ok()?;
    (now - t).to_std().ok()
}

fn entry(
    resource: CloudResource,
    id: String,
    name: String,
    tags: &[String],
    created_at: &str,
    now: chrono::DateTime<chrono::Utc>,
) -> Option<Listed> {
    let owner = Owner::from_tags(tags)?;
    Some(Listed {
        obj: Tagged {
            resource,
            id,
            name,
            owner_kind: owner.kind,
            owner_uid: owner.uid,
            age: age(created_at, now),
        },
        device_owner: String::new(),
        state: String::new(),
    })
}

/// Lists every object carrying `kuryr.cluster=<cluster>` (and, when given, in `project`).
pub async fn cloud_inventory(cloud: &Cloud, cluster: &str, project: Option<&str>) -> Result<Inventory> {
    let tags = Owner::cluster_filter(cluster);
    let filter = || {
        let f = Filter::new().tags(&tags);
        match project {
            Some(p) => f.project(p),
            None => f,
        }
    };
    let now = chrono::Utc::now();
    let (p, sg, n, s, f) = futures::try_join!(
        ports::list(cloud, filter()),
        security_groups::list(cloud, filter()),
        networks::list(cloud, filter()),
        subnets::list(cloud, filter()),
        floating_ips::list(cloud, filter()),
    )?;
    let mut objects = Vec::new();
    for x in p {
        if let Some(mut l) = entry(CloudResource::Port, x.id, x.name, &x.tags, &x.created_at, now) {
            l.device_owner = x.device_owner;
            objects.push(l);
        }
    }
    objects.extend(sg.into_iter().filter_map(|x| {
        entry(
            CloudResource::SecurityGroup,
            x.id,
            x.name,
            &x.tags,
            &x.created_at,
            now,
        )
    }));
    objects.extend(
        n.into_iter()
            .filter_map(|x| entry(CloudResource::Network, x.id, x.name, &x.tags, &x.created_at, now)),
    );
    objects.extend(
        s.into_iter()
            .filter_map(|x| entry(CloudResource::Subnet, x.id, x.name, &x.tags, &x.created_at, now)),
    );
    objects.extend(f.into_iter().filter_map(|x| {
        let name = x.floating_ip_address.clone();
        entry(CloudResource::FloatingIp, x.id, name, &x.tags, &x.created_at, now)
    }));
    let mut q = vec![("tags".to_owned(), tags.join(","))];
    if let Some(p) = project {
        q.push(("project_id".to_owned(), p.to_owned()));
    }
    for x in loadbalancers::list(cloud, q).await? {
        let state = x.provisioning_status.clone();
        if let Some(mut l) = entry(
            CloudResource::LoadBalancer,
            x.id,
            x.name,
            &x.tags,
            &x.created_at,
            now,
        ) {
            l.state = state;
            objects.push(l);
        }
    }
    Ok(Inventory { objects })
}

/// Uids of every object a kuryr ownership tag may name, cluster-wide.
pub async fn live_uids(client: &kube::Client) -> Result<HashSet<String>> {
    let mut uids = HashSet::new();
    uids.extend(uids_of::<Pod>(client, false).await?);
    uids.extend(uids_of::<Service>(client, false).await?);
    uids.extend(uids_of::<Namespace>(client, false).await?);
    uids.extend(uids_of::<NetworkPolicy>(client, false).await?);
    uids.extend(uids_of::<KuryrPort>(client, true).await?);
    uids.extend(uids_of::<KuryrLoadBalancer>(client, true).await?);
    uids.extend(uids_of::<KuryrNetwork>(client, true).await?);
    uids.extend(uids_of::<KuryrNetworkPolicy>(client, true).await?);
    Ok(uids)
}

async fn uids_of<K>(client: &kube::Client, crd: bool) -> Result<Vec<String>>
where
    K: kube::Resource<DynamicType = ()> + Clone + std::fmt::Debug + serde::de::DeserializeOwned,
{
    let api: Api<K> = Api::all(client.clone());
    match api.list_metadata(&ListParams::default()).await {
        Ok(list) => Ok(list.items.into_iter().filter_map(|m| m.metadata.uid).collect()),
        Err(kube::Error::Api(e)) if crd && e.code == 404 => Ok(Vec::new()),
        Err(e) => Err(Error::kube("list owners")(e)),
    }
}

/// One line of a sweep report (`kuryrctl gc -o json`, the controller's log).
#[derive(Debug, Clone, Serialize)]
pub struct ReportLine {
    pub resource: &'static str,
    pub id: String,
    pub name: String,
    pub owner_kind: String,
    pub owner_uid: String,
    pub age_seconds: Option<u64>,
    pub verdict: &'static str,
}

impl ReportLine {
    pub fn new(obj: &Tagged, verdict: kuryr_core::gc::Verdict) -> Self {
        Self {
            resource: obj.resource.label(),
            id: obj.id.clone(),
            name: obj.name.clone(),
            owner_kind: obj.owner_kind.clone(),
            owner_uid: obj.owner_uid.clone(),
            age_seconds: obj.age.map(|a| a.as_secs()),
            verdict: verdict.label(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn neutron_and_octavia_timestamps_both_give_an_age() {
        let now = chrono::DateTime::parse_from_rfc3339("2026-11-22T13:00:00Z")
            .unwrap()
            .with_timezone(&chrono::Utc);
        assert_eq!(age("2026-11-22T12:59:00Z", now), Some(Duration::from_secs(60)));
        assert_eq!(age("2026-11-22T12:58:00", now), Some(Duration::from_secs(120)));
        assert_eq!(
            age("2026-11-22T12:58:00.5", now),
            Some(Duration::from_millis(119_500))
        );
        assert_eq!(age("", now), None);
        // A clock behind the cloud's: no age rather than a wrong one.
        assert_eq!(age("2026-11-22T13:00:10Z", now), None);
    }
}
