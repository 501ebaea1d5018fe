//! The default route via the subnet gateway, plus the subnet's host routes.

use std::net::IpAddr;

use kuryr_api::Vif;
use rtnetlink::packet_route::route::RouteMessage;
use rtnetlink::{Handle, RouteMessageBuilder};

use super::BindError;

/// Routes to add for `vif`: `(destination, prefix, gateway)`; the default route only on the default VIF.
pub fn vif_routes(vif: &Vif, default: bool) -> Result<Vec<(IpAddr, u8, IpAddr)>, BindError> {
    let bad = |s: &str| BindError::InvalidVif(format!("bad route address {s:?}"));
    let mut out = Vec::new();
    if default {
        for ip in &vif.ips {
            if let Some(gw) = &ip.gateway {
                let gw: IpAddr = gw.parse().map_err(|_| bad(gw))?;
                let any: IpAddr = if gw.is_ipv4() {
                    IpAddr::from([0u8; 4])
                } else {
                    IpAddr::from([0u16; 8])
                };
                // One default per family.
                if !out
                    .iter()
                    .any(|(d, p, _): &(IpAddr, u8, IpAddr)| *p == 0 && d.is_ipv4() == gw.is_ipv4())
                {
                    out.push((any, 0, gw));
                }
            }
        }
    }
    for r in vif.ips.iter().flat_map(|ip| ip.routes.iter()) {
        let (dst, prefix) = r.cidr.split_once('/').ok_or_else(|| bad(&r.cidr))?;
        let dst: IpAddr = dst.parse().map_err(|_| bad(&r.cidr))?;
        let width = if dst.is_ipv4() { 32 } else { 128 };
        let prefix: u8 = prefix
            .parse()
            .ok()
            .filter(|p| *p <= width)
            .ok_or_else(|| bad(&r.cidr))?;
        let gw: IpAddr = r.gateway.parse().map_err(|_| bad(&r.gateway))?;
        out.push((dst, prefix, gw));
    }
    Ok(out)
}

pub fn message(index: u32, dst: IpAddr, prefix: u8, gw: IpAddr) -> Result<RouteMessage, BindError> {
    let err = |e| BindError::InvalidVif(format!("route {dst}/{prefix} via {gw}: {e:?}"));
    Ok(RouteMessageBuilder::<IpAddr>::new()
        .destination_prefix(dst, prefix)
        .map_err(err)?
        .gateway(gw)
        .map_err(err)?
        .output_interface(index)
        .build())
}

pub async fn add_all(h: &Handle, index: u32, routes: &[(IpAddr, u8, IpAddr)]) -> Result<(), BindError> {
    for (dst, prefix, gw) in routes {
        h.route()
            .add(message(index, *dst, *prefix, *gw)?)
            .replace()
            .execute()
            .await
            .map_err(BindError::netlink(format!("add route {dst}/{prefix} via {gw}")))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::mk_vif;

    #[test]
    fn default_route_via_gateway_only_on_the_default_vif() {
        let vif = mk_vif(true);
        let r = vif_routes(&vif, true).unwrap();
        assert_eq!(
            r,
            vec![("0.0.0.0".parse().unwrap(), 0, "198.18.200.1".parse().unwrap())]
        );
        assert!(vif_routes(&vif, false).unwrap().is_empty());
    }

    #[test]
    fn host_routes_are_added_and_bad_ones_refused() {
        let mut vif = mk_vif(true);
        vif.ips[0].routes.push(kuryr_api::vif::VifRoute {
            cidr: "198.18.201.0/24".into(),
            gateway: "198.18.200.254".into(),
        });
        assert_eq!(vif_routes(&vif, false).unwrap().len(), 1);
        for bad in ["x", "198.18.201.0/33", "169.254.169.254/94", "2001:db8::/129"] {
            vif.ips[0].routes[0].cidr = bad.into();
            assert!(vif_routes(&vif, false).is_err(), "{bad}");
        }
    }
}
