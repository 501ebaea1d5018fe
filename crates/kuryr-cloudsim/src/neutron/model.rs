//! Neutron resources as stored; `Serialize` gives the API shape (computed attributes such as
//! `trunk_details` and `security_group_rules` are added when rendering).

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::ipam::SubnetIpam;
use crate::util::{neutron_now, new_id};

/// Standard attributes every Neutron resource has.
#[derive(Debug, Clone, Serialize)]
pub struct Std {
    pub id: String,
    pub name: String,
    pub description: String,
    pub project_id: String,
    pub tenant_id: String,
    pub tags: BTreeSet<String>,
    pub created_at: String,
    pub updated_at: String,
    pub revision_number: u64,
}

impl Std {
    pub fn new(project: &str, name: Option<String>, description: Option<String>) -> Self {
        let now = neutron_now();
        Self {
            id: new_id(),
            name: name.unwrap_or_default(),
            description: description.unwrap_or_default(),
            project_id: project.to_owned(),
            tenant_id: project.to_owned(),
            tags: BTreeSet::new(),
            created_at: now.clone(),
            updated_at: now,
            revision_number: 0,
        }
    }

    /// Every change bumps the revision, as Neutron's revision plugin does.
    pub fn touch(&mut self) {
        self.revision_number += 1;
        self.updated_at = neutron_now();
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Network {
    #[serde(flatten)]
    pub std: Std,
    pub admin_state_up: bool,
    pub status: String,
    pub shared: bool,
    pub mtu: u32,
    #[serde(rename = "router:external")]
    pub external: bool,
    pub port_security_enabled: bool,
    #[serde(rename = "provider:network_type")]
    pub network_type: String,
    #[serde(rename = "provider:physical_network")]
    pub physical_network: Option<String>,
    #[serde(rename = "provider:segmentation_id")]
    pub segmentation_id: Option<u32>,
    pub subnets: Vec<String>,
    pub availability_zone_hints: Vec<String>,
    pub availability_zones: Vec<String>,
    pub ipv4_address_scope: Option<String>,
    pub ipv6_address_scope: Option<String>,
    pub is_default: bool,
    pub l2_adjacency: bool,
    pub qos_policy_id: Option<String>,
    pub dns_domain: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct AllocationPool {
    pub start: String,
    pub end: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct Subnet {
    #[serde(flatten)]
    pub std: Std,
    pub network_id: String,
    pub ip_version: u8,
    pub cidr: String,
    pub gateway_ip: Option<String>,
    pub allocation_pools: Vec<AllocationPool>,
    pub enable_dhcp: bool,
    pub dns_nameservers: Vec<String>,
    pub host_routes: Vec<Value>,
    pub ipv6_ra_mode: Option<String>,
    pub ipv6_address_mode: Option<String>,
    pub subnetpool_id: Option<String>,
    pub service_types: Vec<String>,
    pub segment_id: Option<String>,
    pub dns_publish_fixed_ip: bool,
    #[serde(skip)]
    pub ipam: SubnetIpam,
}

#[derive(Debug, Clone, Serialize)]
pub struct SubnetPool {
    #[serde(flatten)]
    pub std: Std,
    pub prefixes: Vec<String>,
    /// Neutron renders the prefix lengths as strings (`"24"`).
    #[serde(serialize_with = "as_text")]
    pub default_prefixlen: u8,
    #[serde(serialize_with = "as_text")]
    pub min_prefixlen: u8,
    #[serde(serialize_with = "as_text")]
    pub max_prefixlen: u8,
    pub ip_version: u8,
    pub shared: bool,
    pub is_default: bool,
    pub address_scope_id: Option<String>,
    pub default_quota: Option<i64>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct FixedIp {
    pub subnet_id: String,
    pub ip_address: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct AddressPair {
    pub ip_address: String,
    pub mac_address: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct Port {
    #[serde(flatten)]
    pub std: Std,
    pub network_id: String,
    pub admin_state_up: bool,
    pub status: String,
    pub mac_address: String,
    pub fixed_ips: Vec<FixedIp>,
    pub device_id: String,
    pub device_owner: String,
    pub security_groups: Vec<String>,
    pub allowed_address_pairs: Vec<AddressPair>,
    pub port_security_enabled: bool,
    #[serde(rename = "binding:host_id")]
    pub host_id: String,
    #[serde(rename = "binding:vif_type")]
    pub vif_type: String,
    #[serde(rename = "binding:vnic_type")]
    pub vnic_type: String,
    #[serde(rename = "binding:profile")]
    pub binding_profile: Map<String, Value>,
    #[serde(rename = "binding:vif_details")]
    pub vif_details: Map<String, Value>,
    pub extra_dhcp_opts: Vec<Value>,
    pub dns_name: String,
    pub propagate_uplink_status: bool,
    pub ip_allocation: String,
    pub qos_policy_id: Option<String>,
    pub qos_network_policy_id: Option<String>,
    pub resource_request: Option<Value>,
    /// Bumped whenever the binding or trunk membership changes, so stale activation timers do nothing.
    #[serde(skip)]
    pub bind_epoch: u64,
}

impl Port {
    pub fn is_router_port(&self) -> bool {
        self.device_owner.starts_with("network:router_interface")
            || self.device_owner == "network:router_gateway"
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct ExternalFixedIp {
    pub subnet_id: String,
    pub ip_address: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct GatewayInfo {
    pub network_id: String,
    pub enable_snat: bool,
    pub external_fixed_ips: Vec<ExternalFixedIp>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Router {
    #[serde(flatten)]
    pub std: Std,
    pub admin_state_up: bool,
    pub status: String,
    pub external_gateway_info: Option<GatewayInfo>,
    pub routes: Vec<Value>,
    pub distributed: bool,
    pub ha: bool,
    pub flavor_id: Option<String>,
    pub availability_zone_hints: Vec<String>,
    pub availability_zones: Vec<String>,
    #[serde(skip)]
    pub gw_port_id: Option<String>,
    /// Interface port id -> the subnets it serves.
    #[serde(skip)]
    pub interfaces: BTreeMap<String, Vec<String>>,
}

#[derive(Debug, Clone, Serialize)]
pub struct SecurityGroup {
    #[serde(flatten)]
    pub std: Std,
    pub stateful: bool,
    pub shared: bool,
    #[serde(skip)]
    pub rules: BTreeSet<String>,
    #[serde(skip)]
    pub is_default: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct SgRule {
    pub id: String,
    pub project_id: String,
    pub tenant_id: String,
    pub security_group_id: String,
    pub direction: String,
    pub ethertype: String,
    pub protocol: Option<String>,
    pub port_range_min: Option<u32>,
    pub port_range_max: Option<u32>,
    pub remote_ip_prefix: Option<String>,
    pub remote_group_id: Option<String>,
    pub remote_address_group_id: Option<String>,
    pub normalized_cidr: Option<String>,
    pub description: String,
    pub tags: BTreeSet<String>,
    pub created_at: String,
    pub updated_at: String,
    pub revision_number: u64,
    pub belongs_to_default_sg: bool,
}

impl SgRule {
    /// What makes two rules duplicates (Neutron compares these, ignoring description and id).
    pub fn identity(
        &self,
    ) -> (
        String,
        String,
        String,
        String,
        Option<u32>,
        Option<u32>,
        String,
        String,
    ) {
        (
            self.security_group_id.clone(),
            self.direction.clone(),
            self.ethertype.clone(),
            self.protocol.clone().unwrap_or_default(),
            self.port_range_min,
            self.port_range_max,
            self.normalized_cidr.clone().unwrap_or_default(),
            self.remote_group_id.clone().unwrap_or_default(),
        )
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct FloatingIp {
    #[serde(flatten)]
    pub std: Std,
    pub floating_ip_address: String,
    pub floating_network_id: String,
    pub router_id: Option<String>,
    pub port_id: Option<String>,
    pub fixed_ip_address: Option<String>,
    pub status: String,
    pub qos_policy_id: Option<String>,
    pub dns_domain: String,
    pub dns_name: String,
    pub port_forwardings: Vec<Value>,
    #[serde(skip)]
    pub fip_port_id: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct SubPort {
    pub port_id: String,
    pub segmentation_type: String,
    pub segmentation_id: u32,
}

#[derive(Debug, Clone, Serialize)]
pub struct Trunk {
    #[serde(flatten)]
    pub std: Std,
    pub port_id: String,
    pub admin_state_up: bool,
    pub status: String,
    pub sub_ports: Vec<SubPort>,
}

/// Serialize a stored resource (infallible for these types; `Null` guards the impossible case).
fn as_text<S: serde::Serializer>(n: &u8, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(n)
}

pub fn to_json<T: Serialize>(v: &T) -> Value {
    serde_json::to_value(v).unwrap_or(Value::Null)
}
