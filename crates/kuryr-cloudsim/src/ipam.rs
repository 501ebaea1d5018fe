//! CIDR arithmetic (IPv4 and IPv6 as u128) and per-subnet address allocation.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Cidr {
    pub addr: u128,
    pub prefix: u8,
    pub v6: bool,
}

pub fn ip_to_u128(ip: IpAddr) -> (u128, bool) {
    match ip {
        IpAddr::V4(v4) => (u128::from(u32::from(v4)), false),
        IpAddr::V6(v6) => (u128::from(v6), true),
    }
}

pub fn u128_to_ip(v: u128, v6: bool) -> IpAddr {
    if v6 {
        IpAddr::V6(Ipv6Addr::from(v))
    } else {
        IpAddr::V4(Ipv4Addr::from(v as u32))
    }
}

pub fn parse_ip(s: &str) -> Option<(u128, bool)> {
    s.parse::<IpAddr>().ok().map(ip_to_u128)
}

impl Cidr {
    /// Parses `a.b.c.d/n` (host bits are cleared, as Neutron normalizes) or a bare address (/32, /128).
    pub fn parse(s: &str) -> Option<Cidr> {
        let (ip, prefix) = match s.split_once('/') {
            Some((ip, p)) => (ip, Some(p.parse::<u8>().ok()?)),
            None => (s, None),
        };
        let (addr, v6) = parse_ip(ip)?;
        let bits = if v6 { 128 } else { 32 };
        let prefix = prefix.unwrap_or(bits);
        if prefix > bits {
            return None;
        }
        let c = Cidr { addr, prefix, v6 };
        Some(Cidr {
            addr: addr & c.mask(),
            ..c
        })
    }

    pub fn bits(&self) -> u8 {
        if self.v6 {
            128
        } else {
            32
        }
    }

    fn host_bits(&self) -> u32 {
        u32::from(self.bits() - self.prefix)
    }

    pub fn mask(&self) -> u128 {
        let all: u128 = if self.v6 { u128::MAX } else { u128::from(u32::MAX) };
        let hb = self.host_bits();
        if hb >= 128 {
            0
        } else {
            all & !((1u128 << hb) - 1)
        }
    }

    pub fn first(&self) -> u128 {
        self.addr
    }

    pub fn last(&self) -> u128 {
        let hb = self.host_bits();
        if hb >= 128 {
            u128::MAX
        } else {
            self.addr | ((1u128 << hb) - 1)
        }
    }

    pub fn contains(&self, v: u128) -> bool {
        v >= self.first() && v <= self.last()
    }

    pub fn overlaps(&self, other: &Cidr) -> bool {
        self.v6 == other.v6 && self.first() <= other.last() && other.first() <= self.last()
    }

    pub fn ip(&self, v: u128) -> IpAddr {
        u128_to_ip(v, self.v6)
    }

    pub fn version(&self) -> u8 {
        if self.v6 {
            6
        } else {
            4
        }
    }

    /// Neutron's defaults: gateway = first host; pool = every host address after it (IPv4 also
    /// excludes the broadcast address).
    pub fn default_gateway(&self) -> Option<u128> {
        (self.last() > self.first()).then(|| self.first() + 1)
    }

    pub fn default_pool(&self, gateway: Option<u128>) -> Vec<(u128, u128)> {
        let lo = self.first() + 1;
        let hi = if self.v6 {
            self.last()
        } else {
            self.last().saturating_sub(1)
        };
        if self.prefix >= self.bits() - 1 || lo > hi {
            return Vec::new();
        }
        match gateway {
            Some(g) if g == lo && lo < hi => vec![(lo + 1, hi)],
            Some(g) if g == lo => Vec::new(),
            Some(g) if g == hi => vec![(lo, hi - 1)],
            Some(g) if g > lo && g < hi => vec![(lo, g - 1), (g + 1, hi)],
            _ => vec![(lo, hi)],
        }
    }

    /// Addresses that can never be a port's IP (network address, IPv4 broadcast).
    pub fn is_reserved(&self, v: u128) -> bool {
        if self.prefix >= self.bits() - 1 {
            return false;
        }
        v == self.first() || (!self.v6 && v == self.last())
    }
}

impl std::fmt::Display for Cidr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.ip(self.addr), self.prefix)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AllocError {
    /// The address is taken (by the port id given).
    Taken(String),
    /// Not inside the subnet, or a reserved address.
    NotInSubnet,
}

/// Allocation state of one subnet. Next-fit from a cursor, so freed addresses are not handed out
/// again right away (Neutron also avoids immediate reuse by picking randomly).
#[derive(Debug, Clone)]
pub struct SubnetIpam {
    pub cidr: Cidr,
    pools: Vec<(u128, u128)>,
    allocated: HashMap<u128, String>,
    cursor: u128,
    pool_size: u128,
    pool_used: u128,
}

impl SubnetIpam {
    pub fn new(cidr: Cidr, pools: Vec<(u128, u128)>) -> Self {
        let pool_size = pools.iter().map(|(a, b)| b - a + 1).sum();
        let cursor = pools.first().map_or(0, |p| p.0);
        Self {
            cidr,
            pools,
            allocated: HashMap::new(),
            cursor,
            pool_size,
            pool_used: 0,
        }
    }

    pub fn pools(&self) -> &[(u128, u128)] {
        &self.pools
    }

    fn in_pool(&self, v: u128) -> bool {
        self.pools.iter().any(|(a, b)| v >= *a && v <= *b)
    }

    pub fn used(&self) -> usize {
        self.allocated.len()
    }

    pub fn owner(&self, v: u128) -> Option<&str> {
        self.allocated.get(&v).map(String::as_str)
    }

    /// The next free pool address (not taken), without allocating it.
    pub fn peek_free(&self) -> Option<u128> {
        self.next_free().map(|(v, _)| v)
    }

    fn next_free(&self) -> Option<(u128, usize)> {
        if self.pool_used >= self.pool_size || self.pools.is_empty() {
            return None;
        }
        let mut idx = self
            .pools
            .iter()
            .position(|(a, b)| self.cursor >= *a && self.cursor <= *b)
            .unwrap_or(0);
        let mut v = if self.in_pool(self.cursor) {
            self.cursor
        } else {
            self.pools[idx].0
        };
        // Bounded: at least one free address exists in the pools.
        loop {
            if !self.allocated.contains_key(&v) {
                return Some((v, idx));
            }
            if v >= self.pools[idx].1 {
                idx = (idx + 1) % self.pools.len();
                v = self.pools[idx].0;
            } else {
                v += 1;
            }
        }
    }

    pub fn allocate_any(&mut self, owner: &str) -> Option<u128> {
        let (v, _) = self.next_free()?;
        self.allocated.insert(v, owner.to_owned());
        self.pool_used += 1;
        self.cursor = v.wrapping_add(1);
        Some(v)
    }

    pub fn allocate(&mut self, v: u128, owner: &str) -> Result<(), AllocError> {
        if !self.cidr.contains(v) || self.cidr.is_reserved(v) {
            return Err(AllocError::NotInSubnet);
        }
        if let Some(o) = self.allocated.get(&v) {
            return Err(AllocError::Taken(o.clone()));
        }
        self.allocated.insert(v, owner.to_owned());
        if self.in_pool(v) {
            self.pool_used += 1;
        }
        Ok(())
    }

    pub fn release(&mut self, v: u128) {
        if self.allocated.remove(&v).is_some() && self.in_pool(v) {
            self.pool_used -= 1;
        }
    }

    /// Free addresses left in the allocation pools.
    pub fn free(&self) -> u128 {
        self.pool_size - self.pool_used
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn v4_defaults_skip_network_gateway_and_broadcast() {
        let c = Cidr::parse("10.0.0.5/29").unwrap();
        assert_eq!(c.to_string(), "10.0.0.0/29");
        let gw = c.default_gateway();
        assert_eq!(gw.map(|g| c.ip(g).to_string()), Some("10.0.0.1".into()));
        let mut ipam = SubnetIpam::new(c, c.default_pool(gw));
        let got: Vec<String> =
            std::iter::from_fn(|| ipam.allocate_any("p").map(|v| c.ip(v).to_string())).collect();
        assert_eq!(
            got,
            vec!["10.0.0.2", "10.0.0.3", "10.0.0.4", "10.0.0.5", "10.0.0.6"]
        );
        assert_eq!(ipam.free(), 0);
        ipam.release(parse_ip("10.0.0.3").unwrap().0);
        assert_eq!(
            ipam.allocate_any("q").map(|v| c.ip(v).to_string()),
            Some("10.0.0.3".into())
        );
    }

    #[test]
    fn specific_allocation_checks_range_and_owner() {
        let c = Cidr::parse("10.0.0.0/24").unwrap();
        let mut ipam = SubnetIpam::new(c, c.default_pool(c.default_gateway()));
        let ip = parse_ip("10.0.0.9").unwrap().0;
        assert_eq!(ipam.allocate(ip, "a"), Ok(()));
        assert_eq!(ipam.allocate(ip, "b"), Err(AllocError::Taken("a".into())));
        assert_eq!(
            ipam.allocate(parse_ip("10.0.0.255").unwrap().0, "b"),
            Err(AllocError::NotInSubnet)
        );
        assert_eq!(
            ipam.allocate(parse_ip("10.0.1.1").unwrap().0, "b"),
            Err(AllocError::NotInSubnet)
        );
        // The gateway is outside the pools but can be taken explicitly (router interfaces do).
        assert_eq!(ipam.allocate(parse_ip("10.0.0.1").unwrap().0, "r"), Ok(()));
    }

    #[test]
    fn v6_slash_64_allocates_without_scanning() {
        let c = Cidr::parse("fd00:1::/64").unwrap();
        let mut ipam = SubnetIpam::new(c, c.default_pool(c.default_gateway()));
        let v = ipam.allocate_any("p").unwrap();
        assert_eq!(c.ip(v).to_string(), "fd00:1::2");
        assert!(ipam.free() > 1 << 60);
    }
}
