//! What `lab/lab up` bootstraps, made on cloudsim: a pod network, a service network, an external network
//! with a floating IP pool and a router joining them. One copy for every test that shapes cloudsim like the
//! lab (conformance, services, chaos, security); a module of each, via `#[path]`, as tests share code here.

#![allow(dead_code)]

use kuryr_cloudsim::profile::Dist;
use kuryr_cloudsim::Profile;
use kuryr_openstack::neutron::networks;
use kuryr_openstack::neutron::routers::{self, CreateRouter, GatewayInfo, Interface};
use kuryr_openstack::neutron::subnets::{self, AllocationPool, CreateSubnet};
use kuryr_openstack::Cloud;

/// The lab's address plan (lab/lib/bootstrap.sh).
pub const POD_CIDR: &str = "198.18.0.0/18";
pub const SERVICE_CIDR: &str = "198.19.0.0/16";
pub const EXTERNAL_CIDR: &str = "203.0.113.0/24";

pub struct LabNets {
    pub pod_network_id: String,
    pub pod_subnet_id: String,
    pub service_subnet_id: String,
    pub external_network_id: String,
    pub router_id: String,
}

/// The service network, the external network and the router, on top of an existing pod subnet.
pub struct ServiceNets {
    pub service_subnet_id: String,
    pub external_network_id: String,
    pub router_id: String,
}

/// Every network of the lab.
pub async fn like_the_lab(cloud: &Cloud) -> anyhow::Result<LabNets> {
    let pods = networks::create(cloud, &networks::CreateNetwork::named("kuryr-pods"), &[]).await?;
    let mut subnet = CreateSubnet::v4(&pods.id, POD_CIDR);
    subnet.gateway_ip = Some(Some("198.18.0.1".into()));
    let subnet = subnets::create(cloud, &subnet, &[]).await?;
    let rest = services_and_router(cloud, &subnet.id).await?;
    Ok(LabNets {
        pod_network_id: pods.id,
        pod_subnet_id: subnet.id,
        service_subnet_id: rest.service_subnet_id,
        external_network_id: rest.external_network_id,
        router_id: rest.router_id,
    })
}

/// The service subnet, the external network (floating IPs from .10 to .250) and a router with the external
/// gateway and an interface on the pod and service subnets.
pub async fn services_and_router(cloud: &Cloud, pod_subnet_id: &str) -> anyhow::Result<ServiceNets> {
    let svc = networks::create(cloud, &networks::CreateNetwork::named("kuryr-services"), &[]).await?;
    let svc_subnet = subnets::create(cloud, &CreateSubnet::v4(&svc.id, SERVICE_CIDR), &[]).await?;
    let ext = networks::create(
        cloud,
        &networks::CreateNetwork {
            router_external: Some(true),
            ..networks::CreateNetwork::named("kuryr-public")
        },
        &[],
    )
    .await?;
    let mut ext_subnet = CreateSubnet::v4(&ext.id, EXTERNAL_CIDR);
    ext_subnet.allocation_pools = vec![AllocationPool {
        start: "203.0.113.10".into(),
        end: "203.0.113.250".into(),
    }];
    subnets::create(cloud, &ext_subnet, &[]).await?;
    let router = routers::create(
        cloud,
        &CreateRouter {
            name: "kuryr-router".into(),
            external_gateway_info: Some(GatewayInfo {
                network_id: ext.id.clone(),
                enable_snat: None,
            }),
            project_id: None,
        },
        &[],
    )
    .await?;
    for s in [pod_subnet_id, svc_subnet.id.as_str()] {
        routers::add_interface(cloud, &router.id, &Interface::Subnet(s.to_owned())).await?;
    }
    Ok(ServiceNets {
        service_subnet_id: svc_subnet.id,
        external_network_id: ext.id,
        router_id: router.id,
    })
}

/// Short, non-zero Octavia provisioning, so PENDING_* is really seen and waited out.
pub fn short_provisioning(profile: &mut Profile) {
    for (name, p) in profile.octavia.providers.iter_mut() {
        p.lb_create = Dist::Ms(150.0);
        p.update = Dist::Ms(80.0);
        p.delete = Dist::Ms(80.0);
        if name == "ovn" {
            p.tree_extra = Dist::Ms(150.0);
        }
    }
}
