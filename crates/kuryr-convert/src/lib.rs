//! kuryr-openstack's wire types to kuryr-core's plain values, and a core port request to a create body.
//! A crate of its own because the controller and kuryrctl both convert ports, and neither kuryr-core (no
//! OpenStack client) nor kuryr-openstack (no Kubernetes, no CRDs) may hold the conversion.

use kuryr_core::neutron::{self as core, FixedIp, PortStatus};
use kuryr_core::PortRequest;
use kuryr_openstack::neutron::ports::{CreatePort, FixedIpRequest, Port};
use kuryr_openstack::neutron::{networks, subnets, trunks};

pub fn port(p: &Port) -> core::NeutronPort {
    core::NeutronPort {
        id: p.id.clone(),
        name: p.name.clone(),
        network_id: p.network_id.clone(),
        project_id: p.project_id.clone(),
        mac_address: p.mac_address.clone(),
        fixed_ips: p
            .fixed_ips
            .iter()
            .map(|f| FixedIp {
                subnet_id: f.subnet_id.clone(),
                ip_address: f.ip_address.clone(),
            })
            .collect(),
        security_groups: p.security_groups.iter().cloned().collect(),
        tags: p.tags.iter().cloned().collect(),
        device_owner: p.device_owner.clone(),
        device_id: p.device_id.clone(),
        binding_host_id: p.binding_host_id.clone(),
        status: PortStatus::parse(&p.status),
        allowed_address_pairs: p
            .allowed_address_pairs
            .iter()
            .map(|a| core::AddressPair {
                ip_address: a.ip_address.clone(),
                mac_address: a.mac_address.clone(),
            })
            .collect(),
        trunk_id: p.trunk_details.as_ref().map(|t| t.trunk_id.clone()),
        revision_number: p.revision_number,
    }
}

/// Subports with an id outside 802.1Q's range cannot be ours and are left out.
pub fn trunk(t: &trunks::Trunk) -> core::Trunk {
    core::Trunk {
        id: t.id.clone(),
        port_id: t.port_id.clone(),
        subports: t
            .sub_ports
            .iter()
            .filter_map(|s| {
                Some(core::Subport {
                    port_id: s.port_id.clone(),
                    segmentation_id: u16::try_from(s.segmentation_id).ok()?,
                })
            })
            .collect(),
    }
}

pub fn subnet(s: &subnets::Subnet, network: &networks::Network) -> core::Subnet {
    core::Subnet {
        id: s.id.clone(),
        network_id: s.network_id.clone(),
        project_id: s.project_id.clone(),
        cidr: s.cidr.clone(),
        gateway_ip: s.gateway_ip.clone(),
        host_routes: Vec::new(),
        mtu: network.mtu,
    }
}

/// An empty SG set means "the project's default group" (omitted), never "no group at all".
pub fn create_port(req: &PortRequest) -> CreatePort {
    CreatePort {
        network_id: req.network_id.clone(),
        name: Some(req.name.clone()),
        project_id: Some(req.project_id.clone()).filter(|p| !p.is_empty()),
        fixed_ips: req
            .subnet_ids
            .iter()
            .map(|id| FixedIpRequest {
                subnet_id: Some(id.clone()),
                ip_address: None,
            })
            .collect(),
        device_owner: Some(req.device_owner.clone()),
        device_id: Some(req.device_id.clone()).filter(|d| !d.is_empty()),
        security_groups: (!req.security_groups.is_empty())
            .then(|| req.security_groups.iter().cloned().collect()),
        admin_state_up: Some(req.admin_state_up),
        binding_host_id: req.binding_host_id.clone(),
        tags: req.tags.iter().cloned().collect(),
        ..CreatePort::default()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use kuryr_openstack::neutron::trunks::SubPort;

    use super::*;

    #[test]
    fn an_empty_sg_set_leaves_neutrons_default_group() {
        let mut req = PortRequest {
            name: "ns/web".into(),
            network_id: "net".into(),
            project_id: "p".into(),
            subnet_ids: vec!["sub".into(), "sub6".into()],
            security_groups: BTreeSet::new(),
            device_owner: "compute:kuryr".into(),
            device_id: "uid".into(),
            binding_host_id: None,
            tags: BTreeSet::from(["kuryr.cluster=c".to_owned()]),
            admin_state_up: true,
        };
        let body = create_port(&req);
        assert_eq!(body.security_groups, None);
        let subnets: Vec<_> = body.fixed_ips.iter().map(|f| f.subnet_id.as_deref()).collect();
        assert_eq!(
            subnets,
            vec![Some("sub"), Some("sub6")],
            "an address from each subnet"
        );
        assert_eq!(body.tags, vec!["kuryr.cluster=c".to_owned()]);
        req.security_groups.insert("sg1".into());
        assert_eq!(create_port(&req).security_groups, Some(vec!["sg1".to_owned()]));
    }

    #[test]
    fn subports_outside_the_vlan_range_are_dropped() {
        let t = trunks::Trunk {
            id: "t".into(),
            port_id: "parent".into(),
            sub_ports: vec![SubPort::vlan("a", 7), SubPort::vlan("b", 70_000)],
            ..trunks::Trunk::default()
        };
        let core = trunk(&t);
        assert_eq!(core.subports.len(), 1);
        assert_eq!(core.subports[0].segmentation_id, 7);
    }
}
