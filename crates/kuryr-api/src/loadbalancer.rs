//! KuryrLoadBalancer (`klb`): one per Service (ClusterIP / LoadBalancer), same name and namespace. The
//! service and endpoints handlers write the spec; the load balancer handler makes Octavia match it and
//! records what exists in status.
//!
//! Field names follow upstream, which mixed snake_case (Octavia-ish: `project_id`, `timeout_client_data`)
//! and camelCase (Kubernetes-ish: `targetPort`, `endpointSlices`); objects written by upstream parse as is.
//! Fields added here are camelCase.

use std::collections::BTreeMap;

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::conditions::Condition;

/// Desired load balancer of a Service.
// Every `printcolumn(...)` repeats keys like `type_`, which clippy takes for duplicated attributes.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "openstack.org",
    version = "v1",
    kind = "KuryrLoadBalancer",
    plural = "kuryrloadbalancers",
    shortname = "klb",
    namespaced,
    category = "kuryr",
    status = "KuryrLoadBalancerStatus",
    derive = "PartialEq",
    doc = "Octavia load balancer of one Service: desired listeners/members in spec, what exists in status.",
    printcolumn(name = "Type", type_ = "string", json_path = ".spec.type"),
    printcolumn(
        name = "IP",
        type_ = "string",
        json_path = ".spec.ip",
        description = "Service IP (the load balancer VIP)"
    ),
    printcolumn(
        name = "External-IP",
        type_ = "string",
        json_path = ".status.service_pub_ip_info.ip_addr",
        description = "Floating IP of a LoadBalancer Service"
    ),
    printcolumn(
        name = "LB-Status",
        type_ = "string",
        json_path = ".status.loadbalancer.provisioning_status",
        description = "Octavia provisioning status"
    ),
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].status"
    ),
    printcolumn(
        name = "Provider",
        type_ = "string",
        json_path = ".spec.provider",
        priority = 1
    ),
    printcolumn(
        name = "LB-ID",
        type_ = "string",
        json_path = ".status.loadbalancer.id",
        priority = 1
    ),
    printcolumn(
        name = "Project-ID",
        type_ = "string",
        json_path = ".spec.project_id",
        description = "The ID of the PROJECT associated to the loadbalancer",
        priority = 1
    ),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp")
)]
pub struct KuryrLoadBalancerSpec {
    /// Service cluster IP, used as the VIP.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ip: Option<String>,
    /// Service `loadBalancerIP`: the floating IP the user asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lb_ip: Option<String>,
    /// Service ports, one listener + pool each.
    #[serde(default)]
    pub ports: Vec<LbPort>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project_id: Option<String>,
    /// Security groups of the VIP port (upstream spelling).
    #[serde(default)]
    pub security_groups_ids: Vec<String>,
    /// Subnet of the VIP.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subnet_id: Option<String>,
    /// Dual-stack Services: the clusterIP of the other family, an Octavia additional VIP on its subnet.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub additional_vips: Vec<LbAdditionalVip>,
    /// Service type.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub service_type: Option<ServiceType>,
    /// Octavia provider, e.g. `amphora` or `ovn`; absent means Octavia's default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    /// Listener client inactivity timeout in ms (0 or absent: Octavia default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub timeout_client_data: Option<i32>,
    /// Listener member inactivity timeout in ms (0 or absent: Octavia default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub timeout_member_data: Option<i32>,
    /// Backends (upstream filled this from Endpoints in EndpointSlice shape).
    #[serde(rename = "endpointSlices", default, skip_serializing_if = "Vec::is_empty")]
    pub endpoint_slices: Vec<LbEndpointSlice>,
    /// Service `sessionAffinity` (ClientIP maps to SOURCE_IP session persistence).
    #[serde(rename = "sessionAffinity", default, skip_serializing_if = "Option::is_none")]
    pub session_affinity: Option<SessionAffinity>,
    /// Service `sessionAffinityConfig.clientIP.timeoutSeconds`.
    #[serde(
        rename = "sessionAffinityTimeoutSeconds",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(range(min = 1, max = 86400))]
    pub session_affinity_timeout_seconds: Option<i32>,
    /// Service `externalTrafficPolicy` (Local: only members on nodes with ready endpoints, health-checked).
    #[serde(
        rename = "externalTrafficPolicy",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub external_traffic_policy: Option<ExternalTrafficPolicy>,
    /// Service `loadBalancerSourceRanges`, applied as the listeners' Octavia `allowed_cidrs`.
    #[serde(
        rename = "loadBalancerSourceRanges",
        default,
        skip_serializing_if = "Vec::is_empty"
    )]
    pub load_balancer_source_ranges: Vec<String>,
    /// Health monitor to create on every pool; absent means none.
    #[serde(rename = "healthMonitor", default, skip_serializing_if = "Option::is_none")]
    pub health_monitor: Option<LbHealthMonitor>,
}

/// L4 protocol of a Service port / Octavia listener and pool.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "UPPERCASE")]
pub enum LbProtocol {
    #[default]
    Tcp,
    Udp,
    Sctp,
}

/// Service types that get a load balancer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum ServiceType {
    #[serde(rename = "ClusterIP")]
    ClusterIp,
    NodePort,
    LoadBalancer,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum SessionAffinity {
    None,
    #[serde(rename = "ClientIP")]
    ClientIp,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum ExternalTrafficPolicy {
    Cluster,
    Local,
}

/// A VIP of a load balancer besides its first one (Octavia `additional_vips`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct LbAdditionalVip {
    pub ip: String,
    pub subnet_id: String,
}

/// A Service port (upstream kept the Service's own field names).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct LbPort {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[schemars(range(min = 1, max = 65535))]
    pub port: i32,
    pub protocol: LbProtocol,
    /// Target port as a string: a number (`"8080"`) or a container port name (`"http"`), as upstream stored it.
    #[serde(rename = "targetPort")]
    #[schemars(length(min = 1))]
    pub target_port: String,
    /// Service node port (NodePort / LoadBalancer Services).
    #[serde(rename = "nodePort", default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 65535))]
    pub node_port: Option<i32>,
}

/// Backends in EndpointSlice shape.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct LbEndpointSlice {
    #[serde(default)]
    pub endpoints: Vec<LbEndpoint>,
    #[serde(default)]
    pub ports: Vec<LbEndpointPort>,
    /// `IPv4`, `IPv6` or `FQDN`; absent in upstream objects (always IP).
    #[serde(rename = "addressType", default, skip_serializing_if = "Option::is_none")]
    pub address_type: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct LbEndpoint {
    #[serde(default)]
    pub addresses: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<LbEndpointConditions>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hostname: Option<String>,
    #[serde(rename = "targetRef", default, skip_serializing_if = "Option::is_none")]
    pub target_ref: Option<LbTargetRef>,
    /// v1beta1 topology labels (upstream's field; node name under `kubernetes.io/hostname`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topology: Option<BTreeMap<String, String>>,
    /// Node hosting the endpoint (externalTrafficPolicy Local).
    #[serde(rename = "nodeName", default, skip_serializing_if = "Option::is_none")]
    pub node_name: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct LbEndpointConditions {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serving: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub terminating: Option<bool>,
}

/// The object behind an endpoint (a Pod).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct LbTargetRef {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    #[serde(rename = "resourceVersion", default, skip_serializing_if = "Option::is_none")]
    pub resource_version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct LbEndpointPort {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 65535))]
    pub port: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<LbProtocol>,
}

/// Requested Octavia health monitor (one per pool).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LbHealthMonitor {
    #[serde(rename = "type")]
    pub monitor_type: HealthMonitorType,
    /// Seconds between probes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub delay_seconds: Option<i32>,
    /// Seconds a probe may take; must not exceed the delay.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub timeout_seconds: Option<i32>,
    /// Successful probes before a member is ONLINE.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 10))]
    pub max_retries: Option<i32>,
    /// Failed probes before a member is ERROR.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 10))]
    pub max_retries_down: Option<i32>,
    /// HTTP(S) monitors: path to GET.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url_path: Option<String>,
    /// HTTP(S) monitors: accepted status codes, e.g. `200` or `200-299`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_codes: Option<String>,
    /// Probe this port on members instead of the member port (e.g. the Service's `healthCheckNodePort`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 65535))]
    pub monitor_port: Option<i32>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum HealthMonitorType {
    #[serde(rename = "TCP")]
    Tcp,
    #[serde(rename = "HTTP")]
    Http,
    #[serde(rename = "HTTPS")]
    Https,
    #[serde(rename = "PING")]
    Ping,
    #[serde(rename = "UDP-CONNECT")]
    UdpConnect,
    #[serde(rename = "SCTP")]
    Sctp,
    #[serde(rename = "TLS-HELLO")]
    TlsHello,
}

/// What exists in Octavia (and Neutron, for the floating IP), upstream field names.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct KuryrLoadBalancerStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loadbalancer: Option<LbLoadBalancer>,
    #[serde(default)]
    pub listeners: Vec<LbListener>,
    #[serde(default)]
    pub pools: Vec<LbPool>,
    #[serde(default)]
    pub members: Vec<LbMember>,
    /// Floating IP of a LoadBalancer Service.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_pub_ip_info: Option<LbPubIp>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
    #[serde(
        rename = "observedGeneration",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub observed_generation: Option<i64>,
}

/// Octavia load balancer.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct LbLoadBalancer {
    pub id: String,
    pub name: String,
    /// VIP address.
    pub ip: String,
    /// Neutron VIP port.
    pub port_id: String,
    pub project_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    /// Security groups on the VIP port.
    #[serde(default)]
    pub security_groups: Vec<String>,
    pub subnet_id: String,
    /// Dual-stack: its VIPs besides `ip` (Octavia `additional_vips`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub additional_vips: Vec<LbAdditionalVip>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provisioning_status: Option<ProvisioningStatus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operating_status: Option<OperatingStatus>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct LbListener {
    pub id: String,
    pub loadbalancer_id: String,
    pub name: String,
    #[schemars(range(min = 1, max = 65535))]
    pub port: i32,
    pub project_id: String,
    pub protocol: LbProtocol,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_client_data: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_member_data: Option<i32>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allowed_cidrs: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provisioning_status: Option<ProvisioningStatus>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct LbPool {
    pub id: String,
    /// Absent for a pool attached directly to the load balancer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub listener_id: Option<String>,
    pub loadbalancer_id: String,
    pub name: String,
    pub project_id: String,
    pub protocol: LbProtocol,
    /// Octavia `lb_algorithm`, e.g. `ROUND_ROBIN` (amphora) or `SOURCE_IP_PORT` (ovn).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lb_algorithm: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub healthmonitor_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provisioning_status: Option<ProvisioningStatus>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct LbMember {
    pub id: String,
    pub ip: String,
    pub name: String,
    pub pool_id: String,
    #[schemars(range(min = 1, max = 65535))]
    pub port: i32,
    pub project_id: String,
    pub subnet_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub monitor_port: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provisioning_status: Option<ProvisioningStatus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operating_status: Option<OperatingStatus>,
}

/// Floating IP of a LoadBalancer Service.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct LbPubIp {
    /// Neutron floating IP ID.
    pub ip_id: String,
    pub ip_addr: String,
    pub alloc_method: PubIpAllocMethod,
}

/// Who allocated the floating IP, which decides whether deleting the Service releases it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum PubIpAllocMethod {
    /// The user's pre-existing floating IP (`loadBalancerIP`): only disassociated on delete.
    User,
    /// Allocated by Kuryr from the external network: released on delete.
    Pool,
}

/// Octavia `provisioning_status`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ProvisioningStatus {
    Active,
    Deleted,
    Error,
    PendingCreate,
    PendingUpdate,
    PendingDelete,
}

impl ProvisioningStatus {
    /// Octavia refuses changes to the object (and its parents) while pending.
    pub fn is_pending(self) -> bool {
        matches!(
            self,
            Self::PendingCreate | Self::PendingUpdate | Self::PendingDelete
        )
    }
}

/// Octavia `operating_status`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum OperatingStatus {
    Online,
    Draining,
    Offline,
    Degraded,
    Error,
    NoMonitor,
}
