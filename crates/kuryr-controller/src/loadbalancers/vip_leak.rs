//! Octavia makes a load balancer's VIP port before its provider validates the tree, and a refused create
//! (400, or a provider's "does not support a requested option") leaves that port behind, holding the
//! clusterIP: the next create then fails with 409 "IP address ... already allocated". The port is freed
//! when it is provably a leftover: a VIP port by its name (`octavia-lb-<id>` as Octavia names it,
//! `ovn-lb-vip-<id>` as the ovn provider does) whose load balancer does not exist.

use kuryr_core::lb::DesiredLb;
use kuryr_openstack::neutron::{ports, Filter};
use kuryr_openstack::octavia::loadbalancers;
use tracing::{info, warn};

use crate::services::context::LbContext;

/// Whether `e` is the create's 409 on a VIP address held by another port.
pub fn is_vip_taken(e: &kuryr_openstack::Error) -> bool {
    e.status() == Some(409) && e.api().is_some_and(|a| a.message.contains("already allocated"))
}

/// Deletes the ports holding `desired`'s VIP that are VIP ports of load balancers that do not exist;
/// returns how many. Failures are logged: the next round tries again.
pub async fn free(ctx: &LbContext, desired: &DesiredLb) -> usize {
    let (Some(ip), Some(subnet)) = (&desired.vip_address, &desired.vip_subnet_id) else {
        return 0;
    };
    let holders = match ports::list(&ctx.cloud, Filter::new().fixed_ip(ip).fixed_ip_subnet(subnet)).await {
        Ok(p) => p,
        Err(e) => {
            warn!(ip, error = %e, "cannot list the ports holding the VIP");
            return 0;
        }
    };
    let mut freed = 0;
    for port in holders {
        let Some(lb_id) = lb_of_vip_port(&port.name) else {
            continue;
        };
        match loadbalancers::get(&ctx.cloud, lb_id).await {
            Err(e) if e.is_not_found() => match ports::delete(&ctx.cloud, &port.id).await {
                Ok(()) => {
                    info!(
                        port_id = port.id,
                        ip, lb_id, "VIP port a refused create left behind deleted"
                    );
                    freed += 1;
                }
                Err(e) => warn!(port_id = port.id, error = %e, "cannot delete a leftover VIP port"),
            },
            Ok(_) => {}
            Err(e) => warn!(lb_id, error = %e, "cannot tell whether a VIP port's load balancer exists"),
        }
    }
    freed
}

/// The load balancer id in a VIP port's name (not an amphora's VRRP port).
fn lb_of_vip_port(name: &str) -> Option<&str> {
    if name.starts_with("octavia-lb-vrrp-") {
        return None;
    }
    name.strip_prefix("octavia-lb-")
        .or_else(|| name.strip_prefix("ovn-lb-vip-"))
        .filter(|id| !id.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_vip_ports_name_a_load_balancer() {
        assert_eq!(lb_of_vip_port("octavia-lb-abc"), Some("abc"));
        assert_eq!(lb_of_vip_port("ovn-lb-vip-abc"), Some("abc"));
        assert_eq!(lb_of_vip_port("octavia-lb-vrrp-abc"), None);
        assert_eq!(lb_of_vip_port("octavia-lb-"), None);
        assert_eq!(lb_of_vip_port("kuryr-pod"), None);
    }
}
