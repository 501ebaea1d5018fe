//! `GET /lbaas/loadbalancers/{id}/status`: the provisioning and operating status of the whole tree. With
//! the ovn provider the LB turns ACTIVE before its listeners, pools and members do, so "done" means every
//! node of this tree is ACTIVE.

use serde::Deserialize;

use crate::errors::{Result, Service};
use crate::Cloud;

#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
#[serde(default)]
pub struct NodeStatus {
    pub id: String,
    pub name: String,
    pub provisioning_status: String,
    pub operating_status: String,
}

/// A member's node also says which backend it is (Octavia's `MemberStatusResponse`), so the tree alone
/// tells a pool's members apart; empty where a server leaves them out.
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
#[serde(default)]
pub struct MemberStatus {
    #[serde(flatten)]
    pub node: NodeStatus,
    pub address: String,
    pub protocol_port: u32,
}

#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
#[serde(default)]
pub struct PoolStatus {
    #[serde(flatten)]
    pub node: NodeStatus,
    pub members: Vec<MemberStatus>,
    pub health_monitor: Option<NodeStatus>,
}

#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
#[serde(default)]
pub struct ListenerStatus {
    #[serde(flatten)]
    pub node: NodeStatus,
    pub pools: Vec<PoolStatus>,
}

#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
#[serde(default)]
pub struct LoadBalancerStatus {
    #[serde(flatten)]
    pub node: NodeStatus,
    pub listeners: Vec<ListenerStatus>,
}

#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
#[serde(default)]
pub struct StatusTree {
    pub loadbalancer: LoadBalancerStatus,
}

impl StatusTree {
    /// Every node, LB first.
    pub fn nodes(&self) -> Vec<&NodeStatus> {
        let lb = &self.loadbalancer;
        let mut out = vec![&lb.node];
        for l in &lb.listeners {
            out.push(&l.node);
            for p in &l.pools {
                out.push(&p.node);
                out.extend(p.members.iter().map(|m| &m.node));
                out.extend(p.health_monitor.iter());
            }
        }
        out
    }

    /// Every provisioning status in the tree.
    pub fn provisioning_states(&self) -> Vec<&str> {
        self.nodes()
            .into_iter()
            .map(|n| n.provisioning_status.as_str())
            .collect()
    }

    pub fn member_count(&self) -> usize {
        self.loadbalancer
            .listeners
            .iter()
            .flat_map(|l| l.pools.iter())
            .map(|p| p.members.len())
            .sum()
    }
}

pub async fn get(cloud: &Cloud, lb_id: &str) -> Result<StatusTree> {
    cloud
        .get_one(
            Service::LoadBalancer,
            "octavia.loadbalancers.status",
            format!("lbaas/loadbalancers/{lb_id}/status"),
            "statuses",
        )
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tree_parses_and_flattens() {
        let t: StatusTree = serde_json::from_value(serde_json::json!({"loadbalancer": {
            "id": "lb", "name": "n", "provisioning_status": "ACTIVE", "operating_status": "ONLINE",
            "listeners": [{"id": "l", "name": "", "provisioning_status": "PENDING_CREATE", "operating_status": "OFFLINE",
                "pools": [{"id": "p", "provisioning_status": "ACTIVE", "operating_status": "ONLINE",
                    "members": [{"id": "m1", "provisioning_status": "ACTIVE", "operating_status": "NO_MONITOR", "address": "1.2.3.4"}],
                    "health_monitor": {"id": "h", "type": "TCP", "provisioning_status": "ACTIVE", "operating_status": "ONLINE"}}]}]}}))
        .unwrap();
        assert_eq!(
            t.provisioning_states(),
            vec!["ACTIVE", "PENDING_CREATE", "ACTIVE", "ACTIVE", "ACTIVE"]
        );
        assert_eq!(t.member_count(), 1);
        let m = &t.loadbalancer.listeners[0].pools[0].members[0];
        assert_eq!(
            (m.node.id.as_str(), m.address.as_str(), m.protocol_port),
            ("m1", "1.2.3.4", 0)
        );
    }
}
