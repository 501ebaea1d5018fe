//! All emulated state, behind one mutex. Ports carry secondary indexes (network, device, owner, tag,
//! IP, subnet, name) so the hot list queries don't scan every port.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde_json::Value;

use crate::neutron::model::{
    FloatingIp, Network, Port, Router, SecurityGroup, SgRule, Subnet, SubnetPool, Trunk,
};
use crate::octavia::model::{HealthMonitor, Listener, LoadBalancer, Member, Pool};
use crate::query::ListParams;

/// A port plus its computed `trunk_details`; serializes straight to the response body.
#[derive(serde::Serialize)]
pub struct PortOut<'a> {
    #[serde(flatten)]
    pub port: &'a Port,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trunk_details: Option<Value>,
}

/// Neutron quota resources and their defaults (neutron/conf/quota.py).
pub const QUOTA_DEFAULTS: &[(&str, i64)] = &[
    ("floatingip", 50),
    ("network", 100),
    ("port", 500),
    ("rbac_policy", 10),
    ("router", 10),
    ("security_group", 10),
    ("security_group_rule", 100),
    ("subnet", 100),
    ("subnetpool", -1),
];

#[derive(Debug, Default)]
pub struct World {
    pub networks: BTreeMap<String, Network>,
    pub subnets: BTreeMap<String, Subnet>,
    pub subnetpools: BTreeMap<String, SubnetPool>,
    pub ports: BTreeMap<String, Port>,
    pub routers: BTreeMap<String, Router>,
    pub security_groups: BTreeMap<String, SecurityGroup>,
    pub sg_rules: BTreeMap<String, SgRule>,
    pub fips: BTreeMap<String, FloatingIp>,
    pub trunks: BTreeMap<String, Trunk>,
    pub port_idx: PortIndex,
    /// Parent port id -> trunk id.
    pub trunk_by_parent: HashMap<String, String>,
    /// Subport port id -> trunk id.
    pub trunk_by_subport: HashMap<String, String>,
    /// Project -> its `default` security group.
    pub default_sg: HashMap<String, String>,
    /// Per-project quota overrides (`PUT /v2.0/quotas/{project}`).
    pub quota_overrides: HashMap<String, BTreeMap<String, i64>>,
    /// Default quotas (from the profile, else Neutron's).
    pub quota_defaults: BTreeMap<String, i64>,
    /// (project, resource) -> used count.
    pub usage: HashMap<(String, &'static str), i64>,
    pub mac_counter: u64,
    pub segmentation_counter: u32,

    pub lbs: BTreeMap<String, LoadBalancer>,
    pub listeners: BTreeMap<String, Listener>,
    pub pools: BTreeMap<String, Pool>,
    pub members: BTreeMap<String, Member>,
    pub healthmonitors: BTreeMap<String, HealthMonitor>,
    /// Octavia per-project quota overrides (`PUT /v2/lbaas/quotas/{project}`); default -1 (unlimited).
    pub octavia_quotas: HashMap<String, BTreeMap<String, i64>>,
}

impl World {
    pub fn new(quota_overrides: &BTreeMap<String, i64>) -> Self {
        let mut quota_defaults: BTreeMap<String, i64> = QUOTA_DEFAULTS
            .iter()
            .map(|(k, v)| ((*k).to_owned(), *v))
            .collect();
        quota_defaults.extend(quota_overrides.iter().map(|(k, v)| (k.clone(), *v)));
        Self {
            quota_defaults,
            ..Self::default()
        }
    }

    // === quotas ===

    pub fn quota_limit(&self, project: &str, resource: &str) -> i64 {
        self.quota_overrides
            .get(project)
            .and_then(|q| q.get(resource))
            .or_else(|| self.quota_defaults.get(resource))
            .copied()
            .unwrap_or(-1)
    }

    pub fn used(&self, project: &str, resource: &'static str) -> i64 {
        self.usage
            .get(&(project.to_owned(), resource))
            .copied()
            .unwrap_or(0)
    }

    /// OverQuota when `n` more would exceed the limit.
    pub fn check_quota(&self, project: &str, resource: &'static str, n: i64) -> crate::errors::ApiResult<()> {
        let limit = self.quota_limit(project, resource);
        if limit >= 0 && self.used(project, resource) + n > limit {
            return Err(crate::errors::ApiError::over_quota(resource));
        }
        Ok(())
    }

    pub fn add_usage(&mut self, project: &str, resource: &'static str, delta: i64) {
        // Resources owned by no project (router gateway and floating IP ports) count for nobody.
        if project.is_empty() {
            return;
        }
        *self.usage.entry((project.to_owned(), resource)).or_insert(0) += delta;
    }

    pub fn next_mac(&mut self) -> String {
        self.mac_counter += 1;
        crate::util::mac_from_counter(self.mac_counter)
    }

    // === ports ===

    pub fn insert_port(&mut self, port: Port) {
        self.port_idx.add(&port);
        self.add_usage(&port.std.project_id.clone(), "port", 1);
        self.ports.insert(port.std.id.clone(), port);
    }

    /// Removes the port and frees its addresses.
    pub fn remove_port(&mut self, id: &str) -> Option<Port> {
        let port = self.ports.remove(id)?;
        self.port_idx.remove(&port);
        for ip in &port.fixed_ips {
            if let (Some(subnet), Some((v, _))) = (
                self.subnets.get_mut(&ip.subnet_id),
                crate::ipam::parse_ip(&ip.ip_address),
            ) {
                subnet.ipam.release(v);
            }
        }
        self.add_usage(&port.std.project_id, "port", -1);
        Some(port)
    }

    /// Mutates a port and keeps the indexes right.
    pub fn update_port<R>(&mut self, id: &str, f: impl FnOnce(&mut Port) -> R) -> Option<R> {
        let port = self.ports.get_mut(id)?;
        self.port_idx.remove(port);
        let r = f(port);
        self.port_idx.add(port);
        Some(r)
    }

    /// `trunk_details` of a trunk parent (None for other ports).
    pub fn trunk_details(&self, port_id: &str) -> Option<Value> {
        let trunk = self
            .trunk_by_parent
            .get(port_id)
            .and_then(|t| self.trunks.get(t))?;
        let sub_ports: Vec<Value> = trunk
            .sub_ports
            .iter()
            .map(|s| {
                let mac = self
                    .ports
                    .get(&s.port_id)
                    .map(|p| p.mac_address.as_str())
                    .unwrap_or_default();
                serde_json::json!({
                    "port_id": s.port_id,
                    "segmentation_type": s.segmentation_type,
                    "segmentation_id": s.segmentation_id,
                    "mac_address": mac,
                })
            })
            .collect();
        Some(serde_json::json!({"trunk_id": trunk.std.id, "sub_ports": sub_ports}))
    }

    /// A port as the API shows it.
    pub fn port_out<'a>(&self, port: &'a Port) -> PortOut<'a> {
        PortOut {
            port,
            trunk_details: self.trunk_details(&port.std.id),
        }
    }

    pub fn render_port(&self, port: &Port) -> Value {
        crate::neutron::model::to_json(&self.port_out(port))
    }
}

type Index = HashMap<String, BTreeSet<String>>;

/// Secondary indexes over ports.
#[derive(Debug, Default)]
pub struct PortIndex {
    by_network: HashMap<String, BTreeSet<String>>,
    by_device_id: HashMap<String, BTreeSet<String>>,
    by_device_owner: HashMap<String, BTreeSet<String>>,
    by_tag: HashMap<String, BTreeSet<String>>,
    by_ip: HashMap<String, BTreeSet<String>>,
    by_subnet: HashMap<String, BTreeSet<String>>,
    by_name: HashMap<String, BTreeSet<String>>,
}

fn put(map: &mut HashMap<String, BTreeSet<String>>, key: &str, id: &str) {
    map.entry(key.to_owned()).or_default().insert(id.to_owned());
}

fn del(map: &mut HashMap<String, BTreeSet<String>>, key: &str, id: &str) {
    if let Some(set) = map.get_mut(key) {
        set.remove(id);
        if set.is_empty() {
            map.remove(key);
        }
    }
}

/// The fixed_ips filter of a port list: `fixed_ips=ip_address=X`, `fixed_ips=subnet_id=Y`.
#[derive(Debug, Default, Clone)]
pub struct FixedIpFilter {
    pub ip_addresses: Vec<String>,
    pub subnet_ids: Vec<String>,
    pub ip_substr: Vec<String>,
}

impl FixedIpFilter {
    pub fn is_empty(&self) -> bool {
        self.ip_addresses.is_empty() && self.subnet_ids.is_empty() && self.ip_substr.is_empty()
    }

    /// One allocation must satisfy every given kind (Neutron joins them on the same IP allocation).
    pub fn matches(&self, port: &Port) -> bool {
        self.is_empty()
            || port.fixed_ips.iter().any(|f| {
                (self.ip_addresses.is_empty() || self.ip_addresses.contains(&f.ip_address))
                    && (self.subnet_ids.is_empty() || self.subnet_ids.contains(&f.subnet_id))
                    && (self.ip_substr.is_empty()
                        || self.ip_substr.iter().any(|s| f.ip_address.contains(s.as_str())))
            })
    }
}

impl PortIndex {
    pub fn add(&mut self, p: &Port) {
        let id = &p.std.id;
        put(&mut self.by_network, &p.network_id, id);
        put(&mut self.by_device_id, &p.device_id, id);
        put(&mut self.by_device_owner, &p.device_owner, id);
        put(&mut self.by_name, &p.std.name, id);
        for t in &p.std.tags {
            put(&mut self.by_tag, t, id);
        }
        for f in &p.fixed_ips {
            put(&mut self.by_ip, &f.ip_address, id);
            put(&mut self.by_subnet, &f.subnet_id, id);
        }
    }

    pub fn remove(&mut self, p: &Port) {
        let id = &p.std.id;
        del(&mut self.by_network, &p.network_id, id);
        del(&mut self.by_device_id, &p.device_id, id);
        del(&mut self.by_device_owner, &p.device_owner, id);
        del(&mut self.by_name, &p.std.name, id);
        for t in &p.std.tags {
            del(&mut self.by_tag, t, id);
        }
        for f in &p.fixed_ips {
            del(&mut self.by_ip, &f.ip_address, id);
            del(&mut self.by_subnet, &f.subnet_id, id);
        }
    }

    pub fn on_network(&self, net: &str) -> impl Iterator<Item = &String> {
        self.by_network.get(net).into_iter().flatten()
    }

    pub fn on_subnet(&self, subnet: &str) -> impl Iterator<Item = &String> {
        self.by_subnet.get(subnet).into_iter().flatten()
    }

    pub fn with_device(&self, device_id: &str) -> impl Iterator<Item = &String> {
        self.by_device_id.get(device_id).into_iter().flatten()
    }

    /// The smallest candidate set an indexed filter allows; None means "scan everything".
    pub fn candidates(&self, params: &ListParams, fip: &FixedIpFilter) -> Option<BTreeSet<String>> {
        let mut options: Vec<(&Index, &[String])> = Vec::new();
        let keyed = [
            ("network_id", &self.by_network),
            ("device_id", &self.by_device_id),
            ("device_owner", &self.by_device_owner),
            ("name", &self.by_name),
        ];
        for (key, map) in keyed {
            if let Some(vals) = params.filter_values(key) {
                options.push((map, vals));
            }
        }
        // Every tag of `tags` must be present: any one of them narrows the set.
        for t in &params.tags {
            options.push((&self.by_tag, std::slice::from_ref(t)));
        }
        if !params.tags_any.is_empty() {
            options.push((&self.by_tag, &params.tags_any));
        }
        if !fip.ip_addresses.is_empty() {
            options.push((&self.by_ip, &fip.ip_addresses));
        }
        if !fip.subnet_ids.is_empty() {
            options.push((&self.by_subnet, &fip.subnet_ids));
        }
        let mut best: Option<BTreeSet<String>> = params
            .filter_values("id")
            .map(|ids| ids.iter().cloned().collect());
        let size = |m: &HashMap<String, BTreeSet<String>>, vals: &[String]| -> usize {
            vals.iter().map(|v| m.get(v).map_or(0, BTreeSet::len)).sum()
        };
        if let Some((map, vals)) = options.iter().min_by_key(|(m, v)| size(m, v)) {
            if best.as_ref().is_none_or(|b| b.len() > size(map, vals)) {
                best = Some(
                    vals.iter()
                        .filter_map(|v| map.get(v))
                        .flatten()
                        .cloned()
                        .collect(),
                );
            }
        }
        best
    }
}
