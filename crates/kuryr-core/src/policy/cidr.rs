//! IPv4/IPv6 prefixes and the prefix arithmetic `ipBlock.except` needs: Neutron rules take one
//! `remote_ip_prefix` each and cannot say "except", so `cidr - except...` becomes the minimal set of
//! prefixes covering exactly the remaining addresses.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::str::FromStr;

use super::PolicyError;

/// An address family, in Neutron's words an ethertype.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Family {
    V4,
    V6,
}

impl Family {
    pub fn of(ip: &IpAddr) -> Self {
        if ip.is_ipv4() {
            Family::V4
        } else {
            Family::V6
        }
    }

    fn width(self) -> u8 {
        match self {
            Family::V4 => 32,
            Family::V6 => 128,
        }
    }

    /// Neutron's ethertype string.
    pub fn ethertype(self) -> &'static str {
        match self {
            Family::V4 => "IPv4",
            Family::V6 => "IPv6",
        }
    }
}

/// A prefix with its host bits cleared. Ordered by family, then address, then length.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Cidr {
    family: Family,
    bits: u128,
    len: u8,
}

fn ones(n: u8) -> u128 {
    if n >= 128 {
        u128::MAX
    } else {
        (1u128 << n) - 1
    }
}

impl Cidr {
    pub fn new(addr: IpAddr, len: u8) -> Result<Self, PolicyError> {
        let family = Family::of(&addr);
        if len > family.width() {
            return Err(PolicyError::InvalidCidr(format!("{addr}/{len}")));
        }
        let bits = match addr {
            IpAddr::V4(a) => u128::from(u32::from(a)),
            IpAddr::V6(a) => u128::from(a),
        };
        let host = ones(family.width() - len);
        Ok(Self {
            family,
            bits: bits & !host,
            len,
        })
    }

    /// The /32 or /128 of one address.
    pub fn host(addr: IpAddr) -> Self {
        let family = Family::of(&addr);
        let bits = match addr {
            IpAddr::V4(a) => u128::from(u32::from(a)),
            IpAddr::V6(a) => u128::from(a),
        };
        Self {
            family,
            bits,
            len: family.width(),
        }
    }

    /// `0.0.0.0/0` or `::/0`.
    pub fn any(family: Family) -> Self {
        Self {
            family,
            bits: 0,
            len: 0,
        }
    }

    pub fn family(&self) -> Family {
        self.family
    }

    pub fn prefix_len(&self) -> u8 {
        self.len
    }

    pub fn addr(&self) -> IpAddr {
        match self.family {
            // Truncation is intended: V4 prefixes only ever hold 32 bits.
            Family::V4 => IpAddr::V4(Ipv4Addr::from(self.bits as u32)),
            Family::V6 => IpAddr::V6(Ipv6Addr::from(self.bits)),
        }
    }

    fn host_mask(&self) -> u128 {
        ones(self.family.width() - self.len)
    }

    pub fn contains(&self, ip: &IpAddr) -> bool {
        let other = Self::host(*ip);
        other.family == self.family && (other.bits & !self.host_mask()) == self.bits
    }

    /// Whether every address of `other` is in `self`.
    pub fn covers(&self, other: &Cidr) -> bool {
        other.family == self.family && other.len >= self.len && (other.bits & !self.host_mask()) == self.bits
    }

    fn overlaps(&self, other: &Cidr) -> bool {
        self.covers(other) || other.covers(self)
    }

    /// The two halves of a prefix (none for a single address).
    fn halves(&self) -> Option<(Cidr, Cidr)> {
        if self.len == self.family.width() {
            return None;
        }
        let len = self.len + 1;
        let bit = 1u128 << (self.family.width() - len);
        Some((
            Cidr {
                family: self.family,
                bits: self.bits,
                len,
            },
            Cidr {
                family: self.family,
                bits: self.bits | bit,
                len,
            },
        ))
    }

    /// `self` minus every prefix in `except`, as the minimal set of prefixes (sorted). Each except
    /// costs at most `except.len - self.len` extra prefixes, so the result is bounded by the policy
    /// text, never by the cluster.
    pub fn subtract(&self, except: &[Cidr]) -> Vec<Cidr> {
        let mut out = vec![*self];
        for e in except {
            out = out.into_iter().flat_map(|c| subtract_one(c, e)).collect();
        }
        aggregate(out)
    }
}

fn subtract_one(c: Cidr, e: &Cidr) -> Vec<Cidr> {
    if !c.overlaps(e) {
        return vec![c];
    }
    if e.covers(&c) {
        return Vec::new();
    }
    // `e` lies strictly inside `c`: keep the half without it whole and recurse into the other.
    match c.halves() {
        Some((lo, hi)) => {
            let mut v = subtract_one(lo, e);
            v.extend(subtract_one(hi, e));
            v
        }
        None => Vec::new(),
    }
}

/// The minimal prefix set covering the union of `cidrs`: drops covered prefixes, merges siblings.
pub fn aggregate(mut cidrs: Vec<Cidr>) -> Vec<Cidr> {
    loop {
        cidrs.sort();
        cidrs.dedup();
        let mut kept: Vec<Cidr> = Vec::with_capacity(cidrs.len());
        for c in cidrs.iter() {
            if !kept.iter().any(|k| k.covers(c)) {
                kept.retain(|k| !c.covers(k));
                kept.push(*c);
            }
        }
        let mut merged = false;
        let mut out: Vec<Cidr> = Vec::with_capacity(kept.len());
        let mut i = 0;
        while i < kept.len() {
            let a = kept[i];
            if let Some(b) = kept.get(i + 1) {
                if a.len > 0 && a.len == b.len && a.family == b.family {
                    let parent_len = a.len - 1;
                    let parent = Cidr {
                        family: a.family,
                        bits: a.bits & !ones(a.family.width() - parent_len),
                        len: parent_len,
                    };
                    if parent.halves() == Some((a, *b)) {
                        out.push(parent);
                        merged = true;
                        i += 2;
                        continue;
                    }
                }
            }
            out.push(a);
            i += 1;
        }
        if !merged {
            return out;
        }
        cidrs = out;
    }
}

impl FromStr for Cidr {
    type Err = PolicyError;

    /// `a.b.c.d/len`, `x::y/len`, or a bare address (a host prefix). Host bits must be zero, as the
    /// Kubernetes API requires for ipBlock (a stray host bit usually means a typo, not intent).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || PolicyError::InvalidCidr(s.to_owned());
        let (addr, len) = match s.split_once('/') {
            Some((a, l)) => {
                let addr: IpAddr = a.parse().map_err(|_| bad())?;
                (addr, l.parse::<u8>().map_err(|_| bad())?)
            }
            None => {
                let addr: IpAddr = s.parse().map_err(|_| bad())?;
                (addr, Family::of(&addr).width())
            }
        };
        let c = Cidr::new(addr, len)?;
        if c.addr() != addr {
            return Err(bad());
        }
        Ok(c)
    }
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr(), self.len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(s: &str) -> Cidr {
        s.parse().unwrap()
    }

    #[test]
    fn subtracting_one_address_from_a_slash_24_leaves_eight_prefixes() {
        let out = c("10.0.0.0/24").subtract(&[c("10.0.0.7/32")]);
        assert_eq!(out.len(), 8);
        assert!(!out.iter().any(|p| p.contains(&"10.0.0.7".parse().unwrap())));
        assert!(out.iter().any(|p| p.contains(&"10.0.0.6".parse().unwrap())));
    }

    #[test]
    fn subtracting_both_halves_leaves_nothing_and_a_disjoint_except_changes_nothing() {
        assert!(c("10.0.0.0/24")
            .subtract(&[c("10.0.0.0/25"), c("10.0.0.128/25")])
            .is_empty());
        assert_eq!(
            c("10.0.0.0/24").subtract(&[c("10.1.0.0/16")]),
            vec![c("10.0.0.0/24")]
        );
        assert_eq!(c("10.0.0.0/24").subtract(&[c("::/0")]), vec![c("10.0.0.0/24")]);
    }

    #[test]
    fn siblings_are_merged_into_their_parent() {
        assert_eq!(
            aggregate(vec![c("10.0.0.0/25"), c("10.0.0.128/25")]),
            vec![c("10.0.0.0/24")]
        );
        assert_eq!(
            aggregate(vec![c("10.0.0.0/8"), c("10.1.0.0/16")]),
            vec![c("10.0.0.0/8")]
        );
    }

    #[test]
    fn host_bits_and_bad_lengths_are_rejected() {
        assert!("10.0.0.1/24".parse::<Cidr>().is_err());
        assert!("10.0.0.0/33".parse::<Cidr>().is_err());
        assert!("fd00::/129".parse::<Cidr>().is_err());
        assert_eq!(c("fd00::/64").to_string(), "fd00::/64");
    }

    #[test]
    fn ipv6_subtraction_of_a_slash_128_from_slash_0_gives_128_prefixes() {
        let out = Cidr::any(Family::V6).subtract(&[c("fd00::1/128")]);
        assert_eq!(out.len(), 128);
    }
}
