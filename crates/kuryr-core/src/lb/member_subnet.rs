//! Which subnet a load balancer's members are declared on.
//!
//! Octavia takes the subnet with each member (an amphora plugs into it, the ovn provider attaches the load
//! balancer to that subnet's switch). Pod backends are on the pod subnet, the default. Backends that are no
//! pods live elsewhere: the API servers behind `default/kubernetes` on the nodes' subnet, the addresses of a
//! selector-less Service's EndpointSlices anywhere. Those members are declared on the one subnet that holds
//! every one of them; when none or several do, the default stays (as for pods).

use std::net::IpAddr;

use crate::policy::Cidr;

/// A Neutron subnet as far as member placement needs it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KnownSubnet {
    pub id: String,
    pub cidr: Cidr,
}

impl KnownSubnet {
    /// `None` for a CIDR Neutron would not have written (so one odd subnet cannot stop the lookup).
    pub fn parse(id: &str, cidr: &str) -> Option<Self> {
        Some(Self {
            id: id.to_owned(),
            cidr: cidr.parse().ok()?,
        })
    }
}

/// What the lookup found for a set of member addresses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MemberSubnet {
    /// Every address is in `default`'s subnet, or there is no address: the default applies.
    Default,
    /// Every address is in this one subnet (the most specific of the subnets holding each).
    Found(String),
    /// Some address is in no known subnet: the list may be stale (worth one refresh).
    Unknown(IpAddr),
    /// The addresses are in different subnets, or one is in two subnets of equal prefix (overlapping
    /// networks): no single answer, the default applies.
    Ambiguous,
}

impl MemberSubnet {
    /// The subnet to declare the members on.
    pub fn or_default(&self, default: Option<&str>) -> Option<String> {
        match self {
            MemberSubnet::Found(id) => Some(id.clone()),
            _ => default.map(str::to_owned),
        }
    }
}

/// The subnet for members at `addresses`. `default` is the pod subnet's id; an address it holds counts as
/// on the default. Unparsable addresses are skipped (the spec was validated when it was written).
pub fn member_subnet<'a>(
    addresses: impl IntoIterator<Item = &'a str>,
    default: Option<&str>,
    known: &[KnownSubnet],
) -> MemberSubnet {
    let default_cidr = default
        .and_then(|d| known.iter().find(|s| s.id == d))
        .map(|s| s.cidr);
    let mut on_default = false;
    let mut found: Option<&str> = None;
    for a in addresses {
        let Ok(ip) = a.parse::<IpAddr>() else { continue };
        if default_cidr.is_some_and(|c| c.contains(&ip)) {
            on_default = true;
            continue;
        }
        let Some(len) = known
            .iter()
            .filter(|s| s.cidr.contains(&ip))
            .map(|s| s.cidr.prefix_len())
            .max()
        else {
            return MemberSubnet::Unknown(ip);
        };
        let mut holders = known
            .iter()
            .filter(|s| s.cidr.contains(&ip) && s.cidr.prefix_len() == len);
        let (Some(one), None) = (holders.next(), holders.next()) else {
            return MemberSubnet::Ambiguous;
        };
        match found {
            None => found = Some(&one.id),
            Some(f) if f == one.id => {}
            Some(_) => return MemberSubnet::Ambiguous,
        }
    }
    match found {
        Some(_) if on_default => MemberSubnet::Ambiguous,
        Some(id) => MemberSubnet::Found(id.to_owned()),
        None => MemberSubnet::Default,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn known() -> Vec<KnownSubnet> {
        [
            ("pods", "10.0.0.0/16"),
            ("nodes", "192.168.10.0/24"),
            ("wide", "192.168.0.0/16"),
            ("twin-a", "172.16.5.0/24"),
            ("twin-b", "172.16.5.0/24"),
        ]
        .iter()
        .filter_map(|(id, c)| KnownSubnet::parse(id, c))
        .collect()
    }

    #[test]
    fn pods_stay_on_the_default_subnet() {
        let k = known();
        assert_eq!(
            member_subnet(["10.0.1.5", "10.0.7.9"], Some("pods"), &k),
            MemberSubnet::Default
        );
        assert_eq!(member_subnet([], Some("pods"), &k), MemberSubnet::Default);
    }

    #[test]
    fn api_servers_go_on_the_most_specific_subnet_holding_them() {
        let k = known();
        let s = member_subnet(["192.168.10.4", "192.168.10.5"], Some("pods"), &k);
        assert_eq!(s, MemberSubnet::Found("nodes".into()));
        assert_eq!(s.or_default(Some("pods")).as_deref(), Some("nodes"));
        assert_eq!(
            member_subnet(["192.168.99.1"], Some("pods"), &k),
            MemberSubnet::Found("wide".into())
        );
    }

    #[test]
    fn no_single_answer_keeps_the_default() {
        let k = known();
        for addrs in [
            vec!["192.168.10.4", "10.0.0.9"],
            vec!["10.0.0.9", "192.168.10.4"],
            vec!["192.168.10.4", "192.168.99.1"],
            vec!["172.16.5.1"],
        ] {
            let s = member_subnet(addrs.iter().copied(), Some("pods"), &k);
            assert_eq!(s, MemberSubnet::Ambiguous, "{addrs:?}");
            assert_eq!(s.or_default(Some("pods")).as_deref(), Some("pods"));
        }
    }

    #[test]
    fn an_address_in_no_known_subnet_asks_for_a_fresh_list() {
        let k = known();
        let s = member_subnet(["10.0.0.1", "203.0.113.7"], Some("pods"), &k);
        assert_eq!(s, MemberSubnet::Unknown("203.0.113.7".parse().unwrap()));
        assert_eq!(s.or_default(Some("pods")).as_deref(), Some("pods"));
        // Before the first list nothing is known: every address asks.
        assert!(matches!(
            member_subnet(["10.0.0.1"], Some("pods"), &[]),
            MemberSubnet::Unknown(_)
        ));
    }

    #[test]
    fn odd_cidrs_and_addresses_are_skipped() {
        assert_eq!(KnownSubnet::parse("x", "not-a-cidr"), None);
        assert_eq!(
            member_subnet(["nonsense"], Some("pods"), &known()),
            MemberSubnet::Default
        );
    }
}
