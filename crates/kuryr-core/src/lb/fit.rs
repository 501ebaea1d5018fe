//! Octavia writes shaped to the cloud's request-size limit (`max_request_body_size`, 112 KiB by default).
//! A Service of a thousand endpoints is a member list of over 300 KiB with its tags: the fully-populated
//! create and the one-call member replace no longer fit, and a refused request is refused every time.
//!
//! The controller answers [`Fit`] by sizing the very bodies it would send; the plan only chooses. With `B`
//! the members one batch body holds, a pool of `n` wanted members of which `a` are missing and `d` stale:
//!
//! - `n` fit one body: one replace (`PUT /members`), whatever changed;
//! - else the cheaper of **adding** the missing in additive batches and deleting each stale member
//!   (`⌈a/B⌉ + d` writes, no member removed that is still wanted), and **resetting**: one replace with the
//!   first body of wanted members (those already there first), then additive batches for the rest
//!   (`⌈n/B⌉` writes; the wanted members beyond the first body are briefly absent). Ties add.
//!
//! A new load balancer is created with as many members as fit its body (the rest follow as additive
//! batches); when not even its listeners and pools fit, with none, and they are created one by one.

use std::collections::BTreeMap;

use super::model::{DesiredLb, MemberKey, MemberSubnets};

/// What one request can carry, as the controller measures it.
pub trait Fit {
    /// Whether the fully-populated create of `lb` fits one request.
    fn create_fits(&self, lb: &DesiredLb) -> bool;
    /// How many of `members`, from the front, fit one member batch body.
    fn members_fitting(&self, members: &[(&MemberKey, &String)], subnets: &MemberSubnets) -> usize;
}

/// No limit: every body fits.
pub struct Unlimited;

impl Fit for Unlimited {
    fn create_fits(&self, _: &DesiredLb) -> bool {
        true
    }

    fn members_fitting(&self, members: &[(&MemberKey, &String)], _: &MemberSubnets) -> usize {
        members.len()
    }
}

/// `members` cut into consecutive bodies that fit (the fewest, cutting greedily in order). A member too
/// large to go alone ends the cut: the rest is left out (the client refuses it as too large).
pub fn batches<'a>(
    members: &[(&'a MemberKey, &'a String)],
    subnets: &MemberSubnets,
    fit: &dyn Fit,
) -> Vec<BTreeMap<MemberKey, String>> {
    let mut out = Vec::new();
    let mut rest = members;
    while !rest.is_empty() {
        let n = fit.members_fitting(rest, subnets).clamp(1, rest.len());
        out.push(
            rest[..n]
                .iter()
                .map(|(k, v)| ((*k).clone(), (*v).clone()))
                .collect(),
        );
        rest = &rest[n..];
    }
    out
}

/// `lb` as its create can carry it: whole when it fits; else with as many members (listeners in order,
/// members in order) as fit; else without listeners.
pub fn creatable(lb: &DesiredLb, fit: &dyn Fit) -> DesiredLb {
    if fit.create_fits(lb) {
        return lb.clone();
    }
    let total: usize = lb.listeners.values().map(|l| l.pool.members.len()).sum();
    let bare = with_members(lb, 0);
    if !fit.create_fits(&bare) {
        return DesiredLb {
            listeners: BTreeMap::new(),
            ..lb.clone()
        };
    }
    // The largest count that fits: fits(0) holds, fits(total) does not.
    let (mut lo, mut hi) = (0, total);
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if fit.create_fits(&with_members(lb, mid)) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    with_members(lb, lo)
}

/// `lb` keeping only its first `n` members, counted across listeners in order.
fn with_members(lb: &DesiredLb, mut n: usize) -> DesiredLb {
    let mut out = lb.clone();
    for l in out.listeners.values_mut() {
        let keep = n.min(l.pool.members.len());
        l.pool.members = l
            .pool
            .members
            .iter()
            .take(keep)
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        n -= keep;
    }
    out
}

#[cfg(test)]
pub(crate) mod testing {
    use super::*;

    /// A limit counted in members: `create` across the whole create body, `batch` per member body.
    pub struct ByCount {
        pub create: usize,
        pub batch: usize,
        /// Whether a create with no member fits at all.
        pub bare_create_fits: bool,
    }

    impl Fit for ByCount {
        fn create_fits(&self, lb: &DesiredLb) -> bool {
            let n: usize = lb.listeners.values().map(|l| l.pool.members.len()).sum();
            (n > 0 || self.bare_create_fits) && n <= self.create
        }

        fn members_fitting(&self, members: &[(&MemberKey, &String)], _: &MemberSubnets) -> usize {
            members.len().min(self.batch)
        }
    }
}
