//! Annotation keys, with upstream Kuryr's exact spelling where upstream had them, so Services and
//! Namespaces annotated for upstream keep their meaning.

/// Prefix shared by upstream's annotations (`openstack.org/kuryr-*`).
pub const PREFIX: &str = "openstack.org/kuryr";

/// On a Service: Octavia listener `timeout_client_data` in milliseconds (decimal string).
pub const TIMEOUT_CLIENT_DATA: &str = "openstack.org/kuryr-timeout-client-data";

/// On a Service: Octavia listener `timeout_member_data` in milliseconds (decimal string).
pub const TIMEOUT_MEMBER_DATA: &str = "openstack.org/kuryr-timeout-member-data";

/// On a Service: Octavia provider of its load balancer (`ovn`, `amphora`), overriding the controller's default.
pub const LB_PROVIDER: &str = "openstack.org/kuryr-lb-provider";

/// On a Service: health monitor on every pool: `true`/`TCP`/`HTTP`, or a KuryrLoadBalancer `healthMonitor`
/// object as JSON.
pub const HEALTH_MONITOR: &str = "openstack.org/kuryr-health-monitor";

/// On a Namespace (or Pod/Service): the OpenStack project to create resources in (annotation project driver).
pub const PROJECT: &str = "openstack.org/kuryr-project";

/// Legacy (pre-CRD upstream): LBaaS spec of a Service as an OVO blob. Read only when migrating.
pub const LBAAS_SPEC: &str = "openstack.org/kuryr-lbaas-spec";

/// Legacy (pre-CRD upstream): LBaaS state of a Service's Endpoints as an OVO blob. Read only when migrating.
pub const LBAAS_STATE: &str = "openstack.org/kuryr-lbaas-state";

/// Legacy (pre-CRD upstream): a pod's VIFs as an OVO `PodState` blob. Read only when migrating.
pub const VIF: &str = "openstack.org/kuryr-vif";

/// Legacy upstream: labels last applied to a pod's security groups.
pub const POD_LABEL: &str = "openstack.org/kuryr-pod-label";

/// Legacy upstream: a pod's IP as recorded by the controller.
pub const POD_IP: &str = "openstack.org/kuryr-pod-ip";

/// Legacy upstream: labels last applied to a namespace's network.
pub const NAMESPACE_LABEL: &str = "openstack.org/kuryr-namespace-label";

/// Legacy upstream: name of a namespace's network CRD.
pub const NET_CRD: &str = "openstack.org/kuryr-net-crd";

/// Legacy upstream: name of a network policy's CRD.
pub const NETPOLICY_CRD: &str = "openstack.org/kuryr-netpolicy-crd";

/// Legacy upstream: counter bumped to force network policy re-evaluation.
pub const POLICY_COUNTER: &str = "openstack.org/kuryr-counter";

/// On a KuryrNetworkPolicy (upstream): API path of the NetworkPolicy it was created from.
pub const NETWORK_POLICY_LINK: &str = "networkPolicyLink";

/// On a Pod: extra networks (NPWG multi-network), a comma list or JSON list of network attachments.
pub const NPWG_NETWORKS: &str = "k8s.v1.cni.cncf.io/networks";

/// On a Service: set by Kubernetes on headless Services, which get no load balancer.
pub const HEADLESS_SERVICE: &str = "service.kubernetes.io/headless";

/// On a Pod: `file`/`http` for static (kubelet-manifest) pods, which upstream treats specially.
pub const CONFIG_SOURCE: &str = "kubernetes.io/config.source";

/// Set by `kubectl apply`: its copy of the whole object it applied. Read by nobody here, so the controller's
/// caches drop it.
pub const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";
