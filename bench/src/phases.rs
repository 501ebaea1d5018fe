//! How long each phase of a session took (setup, warm_up, create, wait_wired, drain, teardown): where a
//! run's wall time goes, so a slower run can say which part got slower.

use std::collections::BTreeMap;
use std::time::Instant;

pub struct Phases {
    last: Instant,
    times: BTreeMap<String, f64>,
}

impl Phases {
    pub fn start() -> Phases {
        Phases {
            last: Instant::now(),
            times: BTreeMap::new(),
        }
    }

    /// Ends the phase under way as `name` (its seconds added to any earlier phase of that name) and starts
    /// the next.
    pub fn mark(&mut self, name: &str) {
        let now = Instant::now();
        let s = now.duration_since(self.last).as_secs_f64();
        *self.times.entry(name.to_string()).or_default() += s;
        self.last = now;
    }

    /// The phases, in seconds rounded to the millisecond.
    pub fn seconds(&self) -> BTreeMap<String, f64> {
        self.times
            .iter()
            .map(|(k, v)| (k.clone(), crate::stats::round_ms(*v)))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn phases_add_up_in_order() {
        let mut p = super::Phases::start();
        std::thread::sleep(std::time::Duration::from_millis(5));
        p.mark("setup");
        p.mark("create");
        p.mark("setup");
        let s = p.seconds();
        assert_eq!(s.len(), 2);
        assert!(s["setup"] >= 0.005, "{s:?}");
        assert!(s["create"] < 0.005, "{s:?}");
    }
}
