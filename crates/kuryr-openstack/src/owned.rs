//! Everything one cluster owns on the cloud, found by its ownership tag `kuryr.cluster=<id>`: ports (incl.
//! trunk subports), security groups, networks, subnets, floating IPs and load balancers, each with the owner
//! its tags name. What the garbage collector and `kuryrctl gc` look at. Any failed list is an error:
//! a partial view would make owned objects look missing.

use std::time::Duration;

use chrono::{DateTime, NaiveDateTime, Utc};

use crate::errors::Result;
use crate::neutron::{floating_ips, networks, ports, security_groups, subnets, Filter};
use crate::octavia::loadbalancers;
use crate::{Cloud, Owner};

/// The cloud object types that carry ownership tags, ordered dependents first (the order they can be
/// deleted in): a load balancer holds its VIP port, a floating IP its port, a port its security groups and
/// subnet, a subnet its network.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum TaggedResource {
    LoadBalancer,
    FloatingIp,
    Port,
    SecurityGroup,
    Subnet,
    Network,
}

impl TaggedResource {
    /// Metric label and JSON name.
    pub fn label(self) -> &'static str {
        match self {
            TaggedResource::LoadBalancer => "loadbalancer",
            TaggedResource::FloatingIp => "floatingip",
            TaggedResource::Port => "port",
            TaggedResource::SecurityGroup => "security_group",
            TaggedResource::Subnet => "subnet",
            TaggedResource::Network => "network",
        }
    }
}

/// The label, for code that takes any resource type with a label (kuryr-core's GC reports).
impl From<TaggedResource> for &'static str {
    fn from(r: TaggedResource) -> Self {
        r.label()
    }
}

/// One object carrying the cluster's tag and a complete owner (cluster, kind, uid).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaggedObject {
    pub resource: TaggedResource,
    pub id: String,
    /// Floating IPs: the address.
    pub name: String,
    pub owner: Owner,
    /// Time since the cloud created it, when listed; `None` when the cloud does not say or its clock is ahead.
    pub age: Option<Duration>,
    /// Ports: `device_owner` (a `trunk:subport` must be detached before it is deleted).
    pub device_owner: String,
    /// Load balancers: provisioning status.
    pub provisioning_status: String,
}

/// Time since an ISO 8601 timestamp (Neutron's carry `Z`, Octavia's none: both read as UTC).
pub fn age(created_at: &str, now: DateTime<Utc>) -> Option<Duration> {
    let t = DateTime::parse_from_rfc3339(created_at)
        .map(|t| t.with_timezone(&Utc))
        .or_else(|_| NaiveDateTime::parse_from_str(created_at, "%Y-%m-%dT%H:%M:%S%.f").map(|n| n.and_utc()))
        .ok()?;
    (now - t).to_std().ok()
}

fn entry(
    resource: TaggedResource,
    id: String,
    name: String,
    tags: &[String],
    created_at: &str,
    now: DateTime<Utc>,
) -> Option<TaggedObject> {
    Some(TaggedObject {
        resource,
        id,
        name,
        owner: Owner::from_tags(tags)?,
        age: age(created_at, now),
        device_owner: String::new(),
        provisioning_status: String::new(),
    })
}

/// Ports asked for a page at a time when listing a cluster's objects.
const PORTS_PAGE: usize = 1000;

/// Every object tagged `kuryr.cluster=<cluster>` (and, when given, in `project`), in no particular order.
pub async fn list(cloud: &Cloud, cluster: &str, project: Option<&str>) -> Result<Vec<TaggedObject>> {
    let tags = Owner::cluster_filter(cluster);
    let filter = || {
        let f = Filter::new().tags(&tags);
        match project {
            Some(p) => f.project(p),
            None => f,
        }
    };
    let now = Utc::now();
    let (p, sg, n, s, f) = futures::try_join!(
        // Paged: a cluster's ports are thousands (a 10,000-pod cluster's answer is ~13 MB at once).
        ports::list(cloud, filter().limit(PORTS_PAGE)),
        security_groups::list(cloud, filter()),
        networks::list(cloud, filter()),
        subnets::list(cloud, filter()),
        floating_ips::list(cloud, filter()),
    )?;
    let mut objects = Vec::new();
    for x in p {
        if let Some(mut o) = entry(TaggedResource::Port, x.id, x.name, &x.tags, &x.created_at, now) {
            o.device_owner = x.device_owner;
            objects.push(o);
        }
    }
    objects.extend(sg.into_iter().filter_map(|x| {
        entry(
            TaggedResource::SecurityGroup,
            x.id,
            x.name,
            &x.tags,
            &x.created_at,
            now,
        )
    }));
    objects.extend(
        n.into_iter()
            .filter_map(|x| entry(TaggedResource::Network, x.id, x.name, &x.tags, &x.created_at, now)),
    );
    objects.extend(
        s.into_iter()
            .filter_map(|x| entry(TaggedResource::Subnet, x.id, x.name, &x.tags, &x.created_at, now)),
    );
    objects.extend(f.into_iter().filter_map(|x| {
        let name = x.floating_ip_address.clone();
        entry(
            TaggedResource::FloatingIp,
            x.id,
            name,
            &x.tags,
            &x.created_at,
            now,
        )
    }));
    let mut q = vec![("tags".to_owned(), tags.join(","))];
    if let Some(p) = project {
        q.push(("project_id".to_owned(), p.to_owned()));
    }
    for x in loadbalancers::list(cloud, q).await? {
        let state = x.provisioning_status.clone();
        if let Some(mut o) = entry(
            TaggedResource::LoadBalancer,
            x.id,
            x.name,
            &x.tags,
            &x.created_at,
            now,
        ) {
            o.provisioning_status = state;
            objects.push(o);
        }
    }
    Ok(objects)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn neutron_and_octavia_timestamps_both_give_an_age() {
        let now = DateTime::parse_from_rfc3339("2026-11-22T13:00:00Z")
            .unwrap()
            .with_timezone(&Utc);
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

    #[test]
    fn resources_sort_dependents_first() {
        use TaggedResource::*;
        assert!(LoadBalancer < Port && FloatingIp < Port && Port < SecurityGroup);
        assert!(Port < Subnet && Subnet < Network);
    }
}
