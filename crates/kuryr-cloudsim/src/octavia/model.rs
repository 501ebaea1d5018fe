//! Octavia objects as stored; `Serialize` gives the API shape of the v2 responses.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct IdRef {
    pub id: String,
}

impl IdRef {
    pub fn new(id: &str) -> Self {
        Self { id: id.to_owned() }
    }
}

pub const ACTIVE: &str = "ACTIVE";
pub const PENDING_CREATE: &str = "PENDING_CREATE";
pub const PENDING_UPDATE: &str = "PENDING_UPDATE";
pub const PENDING_DELETE: &str = "PENDING_DELETE";
pub const ERROR: &str = "ERROR";
pub const ONLINE: &str = "ONLINE";
pub const OFFLINE: &str = "OFFLINE";
pub const NO_MONITOR: &str = "NO_MONITOR";

pub fn is_pending(status: &str) -> bool {
    status.starts_with("PENDING_")
}

#[derive(Debug, Clone, Serialize)]
pub struct LoadBalancer {
    pub id: String,
    pub name: String,
    pub description: String,
    pub provisioning_status: String,
    pub operating_status: String,
    pub admin_state_up: bool,
    pub project_id: String,
    pub created_at: String,
    pub updated_at: Option<String>,
    pub vip_address: String,
    pub vip_port_id: String,
    pub vip_subnet_id: String,
    pub vip_network_id: String,
    pub vip_qos_policy_id: Option<String>,
    pub vip_sg_ids: Option<Vec<String>>,
    pub additional_vips: Vec<Value>,
    pub listeners: Vec<IdRef>,
    pub pools: Vec<IdRef>,
    pub provider: String,
    pub flavor_id: Option<String>,
    pub availability_zone: Option<String>,
    pub tags: Vec<String>,
    pub vip_vnic_type: String,
    /// Bumped on every provisioning transition so stale timers do nothing.
    #[serde(skip)]
    pub epoch: u64,
    /// Octavia made the VIP port (and deletes it with the LB).
    #[serde(skip)]
    pub vip_owned: bool,
    /// The ovn provider's ports of the additional VIPs (one each; amphora puts them on the VIP port).
    #[serde(skip)]
    pub additional_vip_ports: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Listener {
    pub id: String,
    pub name: String,
    pub description: String,
    pub provisioning_status: String,
    pub operating_status: String,
    pub admin_state_up: bool,
    pub protocol: String,
    pub protocol_port: u16,
    pub connection_limit: i64,
    pub default_tls_container_ref: Option<String>,
    pub sni_container_refs: Vec<String>,
    pub project_id: String,
    pub default_pool_id: Option<String>,
    pub l7policies: Vec<Value>,
    pub insert_headers: Map<String, Value>,
    pub created_at: String,
    pub updated_at: Option<String>,
    pub loadbalancers: Vec<IdRef>,
    pub timeout_client_data: i64,
    pub timeout_member_connect: i64,
    pub timeout_member_data: i64,
    pub timeout_tcp_inspect: i64,
    pub tags: Vec<String>,
    pub client_ca_tls_container_ref: Option<String>,
    pub client_authentication: String,
    pub client_crl_container_ref: Option<String>,
    pub allowed_cidrs: Option<Vec<String>>,
    pub tls_ciphers: Option<String>,
    pub tls_versions: Option<Vec<String>>,
    pub alpn_protocols: Option<Vec<String>>,
    pub hsts_max_age: Option<i64>,
    pub hsts_include_subdomains: bool,
    pub hsts_preload: bool,
    #[serde(skip)]
    pub lb_id: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct Pool {
    pub id: String,
    pub name: String,
    pub description: String,
    pub provisioning_status: String,
    pub operating_status: String,
    pub admin_state_up: bool,
    pub protocol: String,
    pub lb_algorithm: String,
    pub session_persistence: Option<Value>,
    pub project_id: String,
    pub loadbalancers: Vec<IdRef>,
    pub listeners: Vec<IdRef>,
    pub created_at: String,
    pub updated_at: Option<String>,
    pub healthmonitor_id: Option<String>,
    pub members: Vec<IdRef>,
    pub tags: Vec<String>,
    pub tls_container_ref: Option<String>,
    pub ca_tls_container_ref: Option<String>,
    pub crl_container_ref: Option<String>,
    pub tls_enabled: bool,
    pub tls_ciphers: Option<String>,
    pub tls_versions: Option<Vec<String>>,
    pub alpn_protocols: Option<Vec<String>>,
    #[serde(skip)]
    pub lb_id: String,
    /// The provider fails this pool's pending change: it ends in ERROR instead of ACTIVE.
    #[serde(skip)]
    pub fail_on_settle: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct Member {
    pub id: String,
    pub name: String,
    pub operating_status: String,
    pub provisioning_status: String,
    pub admin_state_up: bool,
    pub address: String,
    pub protocol_port: u16,
    pub weight: u32,
    pub backup: bool,
    pub subnet_id: Option<String>,
    pub project_id: String,
    pub created_at: String,
    pub updated_at: Option<String>,
    pub monitor_address: Option<String>,
    pub monitor_port: Option<u16>,
    pub tags: Vec<String>,
    pub vnic_type: String,
    #[serde(skip)]
    pub pool_id: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct HealthMonitor {
    pub id: String,
    pub name: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub delay: u32,
    pub timeout: u32,
    pub max_retries: u32,
    pub max_retries_down: u32,
    pub http_method: Option<String>,
    pub url_path: Option<String>,
    pub expected_codes: Option<String>,
    pub admin_state_up: bool,
    pub project_id: String,
    pub pools: Vec<IdRef>,
    pub provisioning_status: String,
    pub operating_status: String,
    pub created_at: String,
    pub updated_at: Option<String>,
    pub tags: Vec<String>,
    pub http_version: Option<f64>,
    pub domain_name: Option<String>,
    #[serde(skip)]
    pub pool_id: String,
}
