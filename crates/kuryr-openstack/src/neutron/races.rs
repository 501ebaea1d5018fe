//! What bulk port creates have lately shown of address races, and the body size that follows from it.
//!
//! Neutron rolls a bulk create back whole when one of its ports loses an address to a create beside it
//! (409 `IpAddressAlreadyAllocated`), so a body of n ports lands with probability (1 - q)^n, q being the
//! share of ports that lose theirs. q is no constant of the cloud: it rises with the creates running at
//! once on a subnet (a burst) and falls when they end. The client learns it from the outcomes of the bodies
//! it posts and sends a larger body as parts no larger than one that lands more often than not, side by
//! side, instead of learning it anew from each body's refusal (`OnIpamRace::Halve` still halves a part
//! that is refused).

use std::time::{Duration, Instant};

/// How fast what was seen fades: an outcome this old weighs 1/e of a fresh one. A burst's races say
/// little about the next burst a minute later.
const FADE: Duration = Duration::from_secs(20);
/// Ports counted as seen without a race besides those seen: one refused body alone (an unlucky one at a
/// low rate) does not split the bodies after it.
const PRIOR_PORTS: f64 = 10.0;

/// The ports seen exposed to a race and the races seen, both faded by age.
#[derive(Debug, Clone, Default)]
pub(crate) struct RaceRate {
    exposed: f64,
    raced: f64,
    at: Option<Instant>,
}

impl RaceRate {
    /// A body of `objects` ports landed (`refused` false) or was refused for an address race. A refused
    /// body shows one race among the ports up to the one that lost (half of them, on average); a landed one
    /// shows all of them without.
    pub(crate) fn record(&mut self, objects: usize, refused: bool, now: Instant) {
        self.fade(now);
        let n = objects as f64;
        if refused {
            self.raced += 1.0;
            self.exposed += (n + 1.0) / 2.0;
        } else {
            self.exposed += n;
        }
    }

    /// The share of ports that lose their address, as lately seen (0 with nothing seen).
    pub(crate) fn per_port(&self, now: Instant) -> f64 {
        let mut seen = self.clone();
        seen.fade(now);
        (seen.raced / (seen.exposed + PRIOR_PORTS)).min(1.0)
    }

    /// The largest part of a body of `objects` ports that lands more often than not, (1 - q)^n ≥ 1/2: the
    /// whole body while no race is seen, single ports when every other port races.
    pub(crate) fn part_size(&self, objects: usize, now: Instant) -> usize {
        let q = self.per_port(now);
        if q <= 0.0 {
            return objects;
        }
        if q >= 0.5 {
            return 1;
        }
        let n = (0.5f64.ln() / (1.0 - q).ln()).floor();
        // `n` is finite and ≥ 1 here (0 < q < 0.5).
        (n as usize).clamp(1, objects.max(1))
    }

    fn fade(&mut self, now: Instant) {
        if let Some(at) = self.at {
            let age = now.saturating_duration_since(at).as_secs_f64();
            let keep = (-age / FADE.as_secs_f64()).exp();
            self.exposed *= keep;
            self.raced *= keep;
        }
        self.at = Some(now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn with_nothing_seen_a_body_goes_whole() {
        let r = RaceRate::default();
        assert_eq!(r.part_size(10, Instant::now()), 10);
        assert_eq!(r.per_port(Instant::now()), 0.0);
    }

    #[test]
    fn bodies_that_land_keep_the_whole_body() {
        let now = Instant::now();
        let mut r = RaceRate::default();
        for _ in 0..20 {
            r.record(10, false, now);
        }
        assert_eq!(r.part_size(10, now), 10);
    }

    #[test]
    fn refusals_make_the_parts_smaller_and_landings_make_them_grow_again() {
        let now = Instant::now();
        let mut r = RaceRate::default();
        // One 10-port body in two refused: q = 10 / (10 × (10 + 5.5) + 10) ≈ 0.061 → parts of 10.
        for _ in 0..10 {
            r.record(10, true, now);
            r.record(10, false, now);
        }
        let q = r.per_port(now);
        assert!((q - 10.0 / 165.0).abs() < 1e-9, "{q}");
        assert_eq!(r.part_size(10, now), 10);
        // Every 10-port body refused: q = 10 / (55 + 10) ≈ 0.15 → (1 - q)^4 ≈ 0.51 ≥ 1/2 > (1 - q)^5.
        let mut r = RaceRate::default();
        for _ in 0..10 {
            r.record(10, true, now);
        }
        assert_eq!(r.part_size(10, now), 4);
        // Parts of 4 that land bring it back up.
        for _ in 0..30 {
            r.record(4, false, now);
        }
        assert!(r.part_size(10, now) > 4, "{}", r.part_size(10, now));
    }

    #[test]
    fn one_refused_body_alone_does_not_split_the_next() {
        let now = Instant::now();
        let mut r = RaceRate::default();
        r.record(8, true, now);
        // q = 1 / (4.5 + 10) ≈ 0.069: a body of up to 9 lands more often than not.
        assert_eq!(r.part_size(8, now), 8);
        assert_eq!(r.part_size(10, now), 9);
    }

    #[test]
    fn every_other_port_racing_means_single_ports_and_a_part_never_exceeds_the_body() {
        let now = Instant::now();
        let mut r = RaceRate::default();
        for _ in 0..10 {
            r.record(2, true, now);
            r.record(1, true, now);
        }
        assert_eq!(r.part_size(10, now), 1);
        let mut r = RaceRate::default();
        r.record(100, false, now);
        r.record(100, true, now);
        assert_eq!(r.part_size(4, now), 4);
    }

    #[test]
    fn what_was_seen_fades_with_age() {
        let now = Instant::now();
        let mut r = RaceRate::default();
        for _ in 0..10 {
            r.record(10, true, now);
        }
        let later = now + FADE * 10;
        // Faded, not forgotten: the rate is the same ratio; one landed body then outweighs it.
        r.record(10, false, later);
        assert_eq!(r.part_size(10, later), 10);
    }
}
