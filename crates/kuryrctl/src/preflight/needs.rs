//! What a cluster will take from the project's quotas, from its object counts, beside the minimum the
//! OpenShift-on-Kuryr documentation lists (/work/shared/seeds: "at a bare minimum you need the following
//! quota to run a default cluster").

use serde::Serialize;

/// Object counts the needs are computed from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    pub nodes: u64,
    pub namespaces: u64,
    pub services: u64,
    /// Ports over all Services (one listener and one pool each).
    pub service_ports: u64,
    /// Services of type LoadBalancer (one floating IP each).
    pub lb_services: u64,
    pub policies: u64,
    pub pods: u64,
    /// Ports each node's pool keeps ready.
    pub pool_batch: u64,
}

/// Which API's quota a resource is counted in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Api {
    Neutron,
    Octavia,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Need {
    pub api: Api,
    /// The quota key (`port`, `security_group`, `load_balancer`, ...).
    pub resource: &'static str,
    pub needed: u64,
    /// The documented bare minimum for a default cluster, where one is listed.
    pub seed_minimum: Option<u64>,
    /// How `needed` is computed.
    pub why: &'static str,
}

/// Rules per security group assumed for the estimate (a Service's SG opens its ports; a policy's SG holds
/// a handful of peers).
pub const RULES_PER_SG: u64 = 4;

pub fn needs(c: &Counts) -> Vec<Need> {
    let n = |api, resource, needed, seed_minimum, why| Need {
        api,
        resource,
        needed,
        seed_minimum,
        why,
    };
    vec![
        n(
            Api::Neutron,
            "port",
            c.pods + c.nodes * c.pool_batch + c.services + c.namespaces,
            Some(1500),
            "1 per pod + pool batch per node + 1 VIP per Service + 1 router interface per namespace",
        ),
        n(
            Api::Neutron,
            "network",
            c.namespaces,
            Some(250),
            "1 per namespace",
        ),
        n(Api::Neutron, "subnet", c.namespaces, Some(250), "1 per namespace"),
        n(
            Api::Neutron,
            "security_group",
            c.services + c.policies,
            Some(250),
            "1 per Service and per NetworkPolicy",
        ),
        n(
            Api::Neutron,
            "security_group_rule",
            (c.services + c.policies) * RULES_PER_SG,
            Some(1000),
            "~4 per Service and NetworkPolicy SG",
        ),
        n(
            Api::Neutron,
            "floatingip",
            c.lb_services,
            Some(3),
            "1 per Service of type LoadBalancer",
        ),
        n(Api::Neutron, "router", 1, Some(1), "the cluster router"),
        n(Api::Neutron, "trunk", c.nodes, None, "1 per node VM"),
        n(
            Api::Octavia,
            "load_balancer",
            c.services,
            Some(100),
            "1 per Service",
        ),
        n(
            Api::Octavia,
            "listener",
            c.service_ports,
            Some(500),
            "1 per Service port",
        ),
        n(
            Api::Octavia,
            "pool",
            c.service_ports,
            Some(500),
            "1 per Service port",
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn needs_grow_with_the_cluster() {
        let c = Counts {
            nodes: 3,
            namespaces: 10,
            services: 20,
            service_ports: 25,
            lb_services: 2,
            policies: 5,
            pods: 100,
            pool_batch: 10,
        };
        let by: std::collections::BTreeMap<_, _> = needs(&c).into_iter().map(|n| (n.resource, n)).collect();
        assert_eq!(by["port"].needed, 100 + 30 + 20 + 10);
        assert_eq!(by["security_group"].needed, 25);
        assert_eq!(by["security_group_rule"].needed, 100);
        assert_eq!(by["floatingip"].needed, 2);
        assert_eq!(by["listener"].needed, 25);
        assert_eq!(by["port"].seed_minimum, Some(1500));
        assert_eq!(by["trunk"].seed_minimum, None);
    }
}
