//! Finalizer names, byte-for-byte the ones upstream Kuryr put on objects, so a cluster migrated from
//! upstream keeps blocking deletion of the same objects until our controllers release the cloud resources.

/// On a Pod: its Neutron port (via the KuryrPort) must be released before the Pod goes away.
pub const POD: &str = "kuryr.openstack.org/pod-finalizer";

/// On a KuryrPort: the Neutron port / trunk subport is still allocated.
pub const KURYRPORT: &str = "kuryr.openstack.org/kuryrport-finalizer";

/// On a KuryrNetwork: the namespace's Neutron network, subnet and router interface still exist.
pub const KURYRNETWORK: &str = "kuryrnetwork.finalizers.kuryr.openstack.org";

/// On a KuryrLoadBalancer: the Octavia load balancer (and floating IP) still exist.
/// Upstream spelled it with a trailing `s`; kept as is.
pub const KURYRLOADBALANCER: &str = "kuryr.openstack.org/kuryrloadbalancer-finalizers";

/// On a Service: its KuryrLoadBalancer must be gone before the Service is.
pub const SERVICE: &str = "kuryr.openstack.org/service-finalizer";

/// On a NetworkPolicy and its KuryrNetworkPolicy: the security group and its rules still exist.
pub const NETWORKPOLICY: &str = "kuryr.openstack.org/networkpolicy-finalizer";

/// Every finalizer Kuryr sets, e.g. for a "strip all Kuryr finalizers" uninstall path.
pub const ALL: [&str; 6] = [
    POD,
    KURYRPORT,
    KURYRNETWORK,
    KURYRLOADBALANCER,
    SERVICE,
    NETWORKPOLICY,
];
