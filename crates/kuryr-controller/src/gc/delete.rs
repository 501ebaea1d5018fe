//! Deleting one collected object, with what Neutron needs first: a trunk subport is detached before its
//! port is deleted (Neutron refuses otherwise), a subnet's router interface is removed before the subnet.
//! A 404 anywhere counts as done.

use kuryr_openstack::neutron::routers::{self, Interface};
use kuryr_openstack::neutron::{floating_ips, networks, ports, security_groups, subnets, trunks, Filter};
use kuryr_openstack::octavia::loadbalancers;
use kuryr_openstack::owned::{TaggedObject, TaggedResource};
use kuryr_openstack::Cloud;

/// `device_owner` of a trunk subport.
use kuryr_core::neutron::{ROUTER_INTERFACE_DEVICE_OWNER as ROUTER_INTERFACE, SUBPORT_DEVICE_OWNER};

fn gone_ok(r: kuryr_openstack::Result<()>) -> kuryr_openstack::Result<()> {
    match r {
        Err(e) if e.is_not_found() => Ok(()),
        other => other,
    }
}

pub async fn delete(cloud: &Cloud, l: &TaggedObject) -> kuryr_openstack::Result<()> {
    let id = l.id.as_str();
    match l.resource {
        TaggedResource::LoadBalancer => gone_ok(loadbalancers::delete(cloud, id, true).await),
        TaggedResource::FloatingIp => gone_ok(floating_ips::delete(cloud, id).await),
        TaggedResource::Port => {
            if l.device_owner == SUBPORT_DEVICE_OWNER {
                detach(cloud, id).await?;
            }
            gone_ok(ports::delete(cloud, id).await)
        }
        TaggedResource::SecurityGroup => gone_ok(security_groups::delete(cloud, id).await),
        TaggedResource::Subnet => {
            let filter = Filter::new()
                .eq("device_owner", ROUTER_INTERFACE)
                .fixed_ip_subnet(id);
            for p in ports::list(cloud, filter).await? {
                gone_ok(
                    routers::remove_interface(cloud, &p.device_id, &Interface::Subnet(id.to_owned())).await,
                )?;
            }
            gone_ok(subnets::delete(cloud, id).await)
        }
        TaggedResource::Network => gone_ok(networks::delete(cloud, id).await),
    }
}

/// Takes the port off whichever trunk carries it (OVN leaves a subport's `device_id` empty, so the trunks
/// are listed rather than read from the port).
async fn detach(cloud: &Cloud, port_id: &str) -> kuryr_openstack::Result<()> {
    for t in trunks::list(cloud, Filter::new()).await? {
        if t.sub_ports.iter().any(|s| s.port_id == port_id) {
            match trunks::remove_subports(cloud, &t.id, &[port_id.to_owned()]).await {
                Err(e) if e.is_not_found() => {}
                other => {
                    other?;
                }
            }
        }
    }
    Ok(())
}
