//! Waiting for Octavia: polls the status tree with backoff and tells apart ACTIVE (every node), ERROR
//! (any node), "stuck in PENDING_* for longer than `stuck_after`" and an overall timeout. The decision is a
//! pure state machine ([`Waiter::observe`]), unit-tested with a synthetic clock.

use std::time::Duration;

use tokio::time::Instant;
use tracing::debug;

use crate::errors::{Error, Result};
use crate::octavia::provisioning::{is_pending, ACTIVE, ERROR};
use crate::octavia::status::{self, StatusTree};
use crate::Cloud;

#[derive(Debug, Clone)]
pub struct WaitOptions {
    /// Give up after this long in total.
    pub timeout: Duration,
    /// Report "stuck" once some node has stayed PENDING_* this long without progress.
    pub stuck_after: Duration,
    /// First poll interval; grows by half each poll up to `max_interval`.
    pub initial_interval: Duration,
    pub max_interval: Duration,
}

impl Default for WaitOptions {
    fn default() -> Self {
        // Upstream waited up to 300 s (lbaas_activation_timeout); amphora LBs can take minutes.
        Self {
            timeout: Duration::from_secs(300),
            stuck_after: Duration::from_secs(120),
            initial_interval: Duration::from_millis(200),
            max_interval: Duration::from_secs(5),
        }
    }
}

/// What a poll saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Observation {
    /// Provisioning states of every node (LB first).
    States(Vec<String>),
    /// The LB is gone (404).
    Gone,
}

/// What the waiter wants to happen next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    Done,
    Failed(String),
    Stuck {
        status: String,
        for_: Duration,
    },
    TimedOut(Duration),
    /// Poll again after this delay.
    Poll(Duration),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// Every node ACTIVE.
    Active,
    /// The LB is gone.
    Deleted,
}

#[derive(Debug, Clone)]
pub struct Waiter {
    opts: WaitOptions,
    target: Target,
    started: Instant,
    /// The pending picture we last saw and since when it has not changed.
    pending: Option<(Vec<String>, Instant)>,
    interval: Duration,
}

impl Waiter {
    pub fn new(target: Target, opts: WaitOptions, now: Instant) -> Self {
        let interval = opts.initial_interval;
        Self {
            opts,
            target,
            started: now,
            pending: None,
            interval,
        }
    }

    pub fn observe(&mut self, obs: &Observation, now: Instant) -> Step {
        let states = match (obs, self.target) {
            (Observation::Gone, Target::Deleted) => return Step::Done,
            (Observation::Gone, Target::Active) => {
                return Step::Failed("load balancer disappeared while waiting for ACTIVE".to_owned())
            }
            (Observation::States(s), _) => s,
        };
        if states.iter().any(|s| s == ERROR) {
            return Step::Failed(states.join(","));
        }
        if self.target == Target::Active && !states.is_empty() && states.iter().all(|s| s == ACTIVE) {
            return Step::Done;
        }
        if let Some(p) = states.iter().find(|s| is_pending(s)) {
            // Progress (any node changing) restarts the stuck clock.
            match &self.pending {
                Some((seen, since)) if seen == states => {
                    let for_ = now.saturating_duration_since(*since);
                    if for_ >= self.opts.stuck_after {
                        return Step::Stuck {
                            status: p.clone(),
                            for_,
                        };
                    }
                }
                _ => self.pending = Some((states.clone(), now)),
            }
        } else {
            self.pending = None;
        }
        let elapsed = now.saturating_duration_since(self.started);
        if elapsed >= self.opts.timeout {
            return Step::TimedOut(elapsed);
        }
        let wait = self.interval;
        self.interval = self.interval.mul_f64(1.5).min(self.opts.max_interval);
        Step::Poll(wait)
    }
}

async fn drive(cloud: &Cloud, lb_id: &str, target: Target, opts: &WaitOptions) -> Result<Option<StatusTree>> {
    let mut w = Waiter::new(target, opts.clone(), Instant::now());
    loop {
        let (obs, tree) = match status::get(cloud, lb_id).await {
            Ok(t) => (
                Observation::States(t.provisioning_states().into_iter().map(str::to_owned).collect()),
                Some(t),
            ),
            Err(e) if e.is_not_found() => (Observation::Gone, None),
            Err(e) => return Err(e),
        };
        match w.observe(&obs, Instant::now()) {
            Step::Done => return Ok(tree),
            Step::Poll(d) => {
                debug!(lb_id, ?obs, delay_ms = d.as_millis() as u64, "waiting");
                tokio::time::sleep(d).await;
            }
            Step::Failed(detail) => {
                return Err(Error::LbError {
                    id: lb_id.to_owned(),
                    detail,
                })
            }
            Step::Stuck { status, for_ } => {
                return Err(Error::LbStuck {
                    id: lb_id.to_owned(),
                    status,
                    for_,
                })
            }
            Step::TimedOut(after) => {
                return Err(Error::WaitTimeout {
                    what: format!("load balancer {lb_id} to become {target:?}"),
                    after,
                })
            }
        }
    }
}

/// Waits until the LB and every listener, pool, member and health monitor are ACTIVE.
pub async fn wait_lb_active(cloud: &Cloud, lb_id: &str, opts: &WaitOptions) -> Result<StatusTree> {
    drive(cloud, lb_id, Target::Active, opts)
        .await?
        .ok_or_else(|| Error::LbError {
            id: lb_id.to_owned(),
            detail: "no status tree".to_owned(),
        })
}

/// Waits until the LB is gone (after a delete).
pub async fn wait_lb_deleted(cloud: &Cloud, lb_id: &str, opts: &WaitOptions) -> Result<()> {
    drive(cloud, lb_id, Target::Deleted, opts).await.map(|_| ())
}

/// After a batch member replace: waits until the whole tree is ACTIVE *and* the pool's members are exactly
/// `want` (address, port). With the ovn provider the tree can read ACTIVE while a removed member is still
/// listed, so the tree alone is not proof (seen on the lab; docs/openstack-client.md).
pub async fn wait_members(
    cloud: &Cloud,
    lb_id: &str,
    pool_id: &str,
    want: &[(String, u32)],
    opts: &WaitOptions,
) -> Result<Vec<crate::octavia::members::Member>> {
    let want: std::collections::BTreeSet<(String, u32)> = want.iter().cloned().collect();
    let start = Instant::now();
    let mut interval = opts.initial_interval;
    loop {
        let left = opts.timeout.saturating_sub(start.elapsed());
        let per = WaitOptions {
            timeout: left,
            ..opts.clone()
        };
        wait_lb_active(cloud, lb_id, &per).await?;
        let members = crate::octavia::members::list(cloud, pool_id).await?;
        let have: std::collections::BTreeSet<(String, u32)> = members
            .iter()
            .map(|m| (m.address.clone(), m.protocol_port))
            .collect();
        if have == want && members.iter().all(|m| m.provisioning_status == ACTIVE) {
            return Ok(members);
        }
        if start.elapsed() >= opts.timeout {
            return Err(Error::WaitTimeout {
                what: format!("pool {pool_id} members to become {want:?} (have {have:?})"),
                after: start.elapsed(),
            });
        }
        debug!(lb_id, pool_id, ?have, "member set not there yet");
        tokio::time::sleep(interval).await;
        interval = interval.mul_f64(1.5).min(opts.max_interval);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn st(s: &[&str]) -> Observation {
        Observation::States(s.iter().map(|x| (*x).to_owned()).collect())
    }

    fn opts() -> WaitOptions {
        WaitOptions {
            timeout: Duration::from_secs(60),
            stuck_after: Duration::from_secs(10),
            initial_interval: Duration::from_millis(100),
            max_interval: Duration::from_millis(400),
        }
    }

    #[test]
    fn active_only_when_the_whole_tree_is() {
        let t0 = Instant::now();
        let mut w = Waiter::new(Target::Active, opts(), t0);
        assert_eq!(
            w.observe(&st(&["ACTIVE", "PENDING_CREATE"]), t0),
            Step::Poll(Duration::from_millis(100))
        );
        assert_eq!(
            w.observe(
                &st(&["ACTIVE", "PENDING_CREATE"]),
                t0 + Duration::from_millis(100)
            ),
            Step::Poll(Duration::from_millis(150))
        );
        assert_eq!(
            w.observe(&st(&["ACTIVE", "ACTIVE"]), t0 + Duration::from_secs(1)),
            Step::Done
        );
    }

    #[test]
    fn interval_backs_off_to_the_cap() {
        let t0 = Instant::now();
        let mut w = Waiter::new(Target::Active, opts(), t0);
        let mut polls = Vec::new();
        for i in 0..6 {
            // A changing picture, so it never counts as stuck.
            let s = if i % 2 == 0 {
                "PENDING_CREATE"
            } else {
                "PENDING_UPDATE"
            };
            if let Step::Poll(d) = w.observe(&st(&[s]), t0) {
                polls.push(d.as_millis());
            }
        }
        assert_eq!(polls, vec![100, 150, 225, 337, 400, 400]);
    }

    #[test]
    fn error_anywhere_fails_fast() {
        let t0 = Instant::now();
        let mut w = Waiter::new(Target::Active, opts(), t0);
        assert!(matches!(
            w.observe(&st(&["ACTIVE", "ERROR"]), t0),
            Step::Failed(_)
        ));
        let mut d = Waiter::new(Target::Deleted, opts(), t0);
        assert!(matches!(d.observe(&st(&["ERROR"]), t0), Step::Failed(_)));
    }

    #[test]
    fn stuck_is_told_apart_from_slow_progress_and_from_timeout() {
        let t0 = Instant::now();
        let mut w = Waiter::new(Target::Active, opts(), t0);
        let s = st(&["PENDING_UPDATE", "ACTIVE"]);
        assert!(matches!(w.observe(&s, t0), Step::Poll(_)));
        assert!(matches!(
            w.observe(&s, t0 + Duration::from_secs(9)),
            Step::Poll(_)
        ));
        assert_eq!(
            w.observe(&s, t0 + Duration::from_secs(10)),
            Step::Stuck {
                status: "PENDING_UPDATE".to_owned(),
                for_: Duration::from_secs(10)
            }
        );
        // Progress every few seconds never looks stuck, but the overall timeout still ends it.
        let mut w = Waiter::new(Target::Active, opts(), t0);
        let mut last = Step::Done;
        for i in 0..=12u64 {
            let s = if i % 2 == 0 {
                st(&["PENDING_UPDATE", "ACTIVE"])
            } else {
                st(&["ACTIVE", "PENDING_UPDATE"])
            };
            last = w.observe(&s, t0 + Duration::from_secs(i * 5));
        }
        assert_eq!(last, Step::TimedOut(Duration::from_secs(60)));
    }

    #[test]
    fn deleted_waits_through_pending_delete() {
        let t0 = Instant::now();
        let mut w = Waiter::new(Target::Deleted, opts(), t0);
        assert!(matches!(w.observe(&st(&["PENDING_DELETE"]), t0), Step::Poll(_)));
        assert_eq!(
            w.observe(&Observation::Gone, t0 + Duration::from_secs(1)),
            Step::Done
        );
        let mut a = Waiter::new(Target::Active, opts(), t0);
        assert!(matches!(a.observe(&Observation::Gone, t0), Step::Failed(_)));
    }
}
