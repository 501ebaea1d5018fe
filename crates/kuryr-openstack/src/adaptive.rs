//! How many calls one OpenStack service gets at once, found from its answers (AIMD, as TCP does): the limit
//! grows while the service answers as fast as when it was idle, and is cut multiplicatively when it shows
//! distress — 5xx, 429, timeouts, IPAM 409s in a large share of the recent answers, or a window of answers
//! given under load (more than `calm_in_flight` calls in flight) whose median latency is beyond `tolerance` ×
//! its kind's usual median.
//! Pure state: the caller feeds one [`Sample`] per finished call and reads [`Aimd::limit`]; no clock of its
//! own, so every rule is unit-tested with made-up instants. Why AIMD and not a gradient limit:
//! docs/openstack-client.md, "Adaptive concurrency".

use std::collections::{HashMap, VecDeque};
use std::time::Duration;

use tokio::time::Instant;

use crate::retry::{ErrorKind, Outcome, TransportKind};

/// The knobs; the defaults suit a small control plane and are what the controller uses.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AimdConfig {
    /// The limit a new client starts from (it grows by one per call answered quickly until the first cut).
    pub initial: usize,
    /// Never fewer calls in flight than this, however badly the service does.
    pub min: usize,
    /// The operator's ceiling (`--openstack-max-concurrency`): the limit never grows past it.
    pub max: usize,
    /// A window of answers given under load whose median is over `tolerance` × the usual median of their
    /// kind is distress.
    pub tolerance: f64,
    /// Answers of a kind judged together (their median): one answer says nothing, latencies have long tails.
    pub window: usize,
    /// Calls in flight up to which the service counts as calm: windows answered so teach the usual latency
    /// and are never distress (their slowness is not this client's doing).
    pub calm_in_flight: usize,
    /// The cut on an error (5xx, 429, timeout).
    pub error_backoff: f64,
    /// IPAM conflicts are distress only when at least this share of the last `4 × window` answers were
    /// conflicts: a few are the contention of concurrent creates on one subnet, which the client's quick retry
    /// absorbs (cut at each, a 500-pod pools burst with 13 of them in 164 calls ran at 7 Neutron calls/s
    /// where the same emulated Neutron served the floor 130/s); many mean Neutron's own retries are losing.
    pub ipam_conflict_share: f64,
    /// The gentler cut on latency alone, or IPAM conflicts beyond their share.
    pub latency_backoff: f64,
}

impl Default for AimdConfig {
    fn default() -> Self {
        Self {
            initial: 8,
            min: 1,
            max: 64,
            tolerance: 2.0,
            error_backoff: 0.5,
            latency_backoff: 0.8,
            ipam_conflict_share: 0.25,
            window: 8,
            calm_in_flight: 8,
        }
    }
}

impl AimdConfig {
    /// A fixed limit of `n` (no adaptation): what the tests of other parts use to make the gate predictable.
    pub fn fixed(n: usize) -> Self {
        let n = n.max(1);
        Self {
            initial: n,
            min: n,
            max: n,
            ..Self::default()
        }
    }
}

/// What kind of distress made the limit go down.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Distress {
    ServerError,
    TooManyRequests,
    Timeout,
    IpamConflict,
    Latency,
}

/// How one finished call bears on the limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Answered (any status the service gave on purpose: 2xx, 404, 409 conflict, 400, ...): its latency counts.
    Answered,
    Distress(Distress),
    /// Says nothing about load (connection refused: the service is down, not busy).
    Neutral,
}

impl Verdict {
    /// From what came back.
    pub fn of(outcome: &Outcome<'_>) -> Self {
        match *outcome {
            Outcome::Transport(TransportKind::Timeout) => Verdict::Distress(Distress::Timeout),
            Outcome::Transport(_) => Verdict::Neutral,
            Outcome::Response { status, body } => match status {
                429 => Verdict::Distress(Distress::TooManyRequests),
                501 => Verdict::Answered,
                500..=599 => Verdict::Distress(Distress::ServerError),
                409 if crate::retry::error_kind(status, body) == ErrorKind::IpamConflict => {
                    Verdict::Distress(Distress::IpamConflict)
                }
                _ => Verdict::Answered,
            },
        }
    }
}

/// Why the limit moved (a metric label).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum MoveReason {
    /// Growing by one per quick answer, before the first cut.
    SlowStart,
    /// Growing by one per limit's worth of quick answers.
    Increase,
    Cut(Distress),
}

impl MoveReason {
    pub fn as_str(self) -> &'static str {
        match self {
            MoveReason::SlowStart => "slow_start",
            MoveReason::Increase => "increase",
            MoveReason::Cut(Distress::ServerError) => "server_error",
            MoveReason::Cut(Distress::TooManyRequests) => "too_many_requests",
            MoveReason::Cut(Distress::Timeout) => "timeout",
            MoveReason::Cut(Distress::IpamConflict) => "ipam_conflict",
            MoveReason::Cut(Distress::Latency) => "latency",
        }
    }
}

/// A change of the whole-number limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Move {
    pub from: usize,
    pub to: usize,
    pub reason: MoveReason,
}

/// Calls of one kind, for the usual latency: the op and the request body's size class (a 50-port bulk
/// create is not slow because a 1-port one was fast).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CallKind {
    pub op: &'static str,
    pub size_class: u8,
}

impl CallKind {
    pub fn new(op: &'static str, body_len: usize) -> Self {
        // 0: no body or under 4 KiB, then one class per doubling.
        let size_class = (body_len / 4096 + 1).ilog2() as u8;
        Self { op, size_class }
    }
}

/// One finished call.
#[derive(Debug, Clone, Copy)]
pub struct Sample {
    pub kind: CallKind,
    /// When the call was let through (after any wait for a slot).
    pub started: Instant,
    pub latency: Duration,
    /// Calls in flight when this one was let through, itself included.
    pub in_flight: usize,
    pub verdict: Verdict,
}

/// The usual latency of a kind: an average of the medians of windows answered while the service was calm
/// (most of their calls let through with at most `calm_in_flight` in flight), in log space since latencies
/// are lognormal and a ratio is what matters. Why not the fastest recent answer, as before: with lognormal answers most are over twice the
/// fastest of the last hundred, so an idle cloud looked in distress and the limit sat near 1. Why only calm
/// windows: a usual that also learned from busy ones would follow a limit that creeps up window by window
/// (each only a little slower than the last) until the service is deep in its queue.
#[derive(Debug, Clone, Default)]
struct KindLatency {
    /// Answers of the window being filled, in seconds.
    window: Vec<f64>,
    /// Answers of the window whose call was let through with at most `calm_in_flight` calls in flight.
    window_calm: usize,
    /// ln(seconds) of the usual median; `None` until a calm window has closed.
    usual: Option<f64>,
    /// Calm windows the usual rests on.
    calm_windows: u32,
}

/// How far a calm window moves the usual median toward its own: an average over ~10 windows, whose noise is
/// a third of one window's, so an idle cloud is judged in distress in a small fraction of a percent of them.
const CALM_WEIGHT: f64 = 0.2;
/// Medians under this are never distress, whatever the ratio (a 2 ms GET taking 5 ms is not overload).
const LATENCY_FLOOR: Duration = Duration::from_millis(20);
/// Calm windows a kind's usual must rest on before its loaded windows are judged (and before slow start):
/// one window's median of lognormal answers is off by a third now and then, and a burst's first window is
/// answered just before the burst loads the machine, so a usual from it alone cut the limit at 10 calls in
/// flight against a cloud that answered 64 as fast (bench, services on ovn, 2026-11-29).
const MIN_CALM_WINDOWS: u32 = 2;

impl KindLatency {
    /// Adds one answer; when it closes a window, says how that window was judged.
    fn add(&mut self, s: &Sample, config: &AimdConfig) -> Window {
        self.window.push(s.latency.as_secs_f64());
        if s.in_flight <= config.calm_in_flight {
            self.window_calm += 1;
        }
        if self.window.len() < config.window.max(1) {
            return Window::Open;
        }
        self.window.sort_by(f64::total_cmp);
        let median = self.window[self.window.len() / 2];
        // Calm when most of its calls were let through calm: a limit that grows by one within a window (it
        // does at the calm level) must not make every window there a loaded one, or a service slower for good
        // would never be relearned.
        let calm = 2 * self.window_calm > self.window.len();
        self.clear();
        let ln = median.max(1e-6).ln();
        // A window answered slowly while calm was not slowed by this client's load, and fewer calls would
        // not speed it up: the service or this machine is slower for everyone (a bench's warm-up on a busy
        // 2-core machine cut the limit 11 -> 6 so, ending slow start before the burst). It only teaches.
        let judged = !calm && self.judged();
        let distress = judged
            && self.usual.is_some_and(|usual| {
                median > LATENCY_FLOOR.as_secs_f64() && ln > usual + config.tolerance.max(1.0).ln()
            });
        if calm {
            self.calm_windows = self.calm_windows.saturating_add(1);
            // The mean of the windows so far until there are enough for the moving average, which would
            // otherwise lean on the first window alone.
            let weight = (1.0 / f64::from(self.calm_windows)).max(CALM_WEIGHT);
            self.usual = Some(self.usual.map_or(ln, |u| u + weight * (ln - u)));
        }
        match (distress, judged) {
            (true, _) => Window::Distress,
            (false, true) => Window::Fine,
            (false, false) => Window::Unjudged,
        }
    }

    /// Whether the usual rests on enough calm windows to judge a loaded one against.
    fn judged(&self) -> bool {
        self.calm_windows >= MIN_CALM_WINDOWS
    }

    fn clear(&mut self) {
        self.window.clear();
        self.window_calm = 0;
    }
}

/// A window of one kind's answers, as judged when it closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Window {
    /// Not full yet.
    Open,
    /// Calm, or its kind's usual not learned yet: it teaches, if anything.
    Unjudged,
    /// Under load and within the tolerance of the usual.
    Fine,
    Distress,
}

#[derive(Debug)]
pub struct Aimd {
    config: AimdConfig,
    limit: f64,
    slow_start: bool,
    /// Slow start was ended by a latency cut, and resumes once a loaded window is answered within the
    /// tolerance again. Latency is the one distress that comes and goes without this client (a 2-core
    /// machine busy at the start of a burst: one such cut held a 200-Service burst's Octavia limit at 20-30
    /// for the whole burst, where the cloud took 64 as fast); a service at its capacity answers the next
    /// window over it slowly again and is cut again, once per round trip.
    resume_slow_start: bool,
    /// Calls let through before the last cut were already in flight when it was made: their distress was
    /// answered by it (one cut per round trip, as TCP).
    last_cut: Option<Instant>,
    latencies: HashMap<CallKind, KindLatency>,
    /// The last `4 × window` answers and errors: which were IPAM conflicts.
    recent_conflicts: VecDeque<bool>,
}

impl Aimd {
    pub fn new(config: AimdConfig) -> Self {
        let max = config.max.max(1);
        let min = config.min.clamp(1, max);
        let config = AimdConfig { min, max, ..config };
        Self {
            limit: config.initial.clamp(min, max) as f64,
            slow_start: true,
            resume_slow_start: false,
            last_cut: None,
            latencies: HashMap::new(),
            recent_conflicts: VecDeque::new(),
            config,
        }
    }

    pub fn config(&self) -> &AimdConfig {
        &self.config
    }

    /// Calls allowed in flight now.
    pub fn limit(&self) -> usize {
        (self.limit.floor() as usize).clamp(self.config.min, self.config.max)
    }

    /// Learns from one finished call; says if the whole-number limit moved.
    pub fn on_sample(&mut self, s: &Sample, now: Instant) -> Option<Move> {
        let from = self.limit();
        // Calls let through before the last cut were already in flight when it was made: what they say, good
        // or bad, is about the load that cut answered (one cut per round trip, as TCP).
        if self.last_cut.is_some_and(|cut| s.started < cut) {
            return None;
        }
        if s.verdict != Verdict::Neutral {
            self.remember_conflict(s.verdict == Verdict::Distress(Distress::IpamConflict));
        }
        let distress = match s.verdict {
            Verdict::Neutral => return None,
            Verdict::Distress(Distress::IpamConflict) if !self.conflicts_are_distress() => return None,
            Verdict::Distress(d) => Some(d),
            Verdict::Answered => self.judge_latency(s),
        };
        let reason = match distress {
            Some(d) => {
                // Latency and IPAM contention say the service is working, only slower or racing: the gentle cut.
                let factor = match d {
                    Distress::Latency | Distress::IpamConflict => self.config.latency_backoff,
                    _ => self.config.error_backoff,
                };
                self.limit = (self.limit * factor).max(self.config.min as f64);
                self.last_cut = Some(now);
                // Contention found a crowd on one subnet, not the service's capacity: slow start goes on (ended
                // by it, a pools burst's limit sat at 9-12 with calls queued in two thirds of the readings).
                if d != Distress::IpamConflict {
                    // Only a cut that ended slow start (or one made while it could resume) may resume it;
                    // after an error it stays ended.
                    let resumable = self.slow_start || self.resume_slow_start;
                    self.resume_slow_start = d == Distress::Latency && resumable;
                    self.slow_start = false;
                }
                // What the windows hold so far measured the load this cut answered.
                for kind in self.latencies.values_mut() {
                    kind.clear();
                }
                self.recent_conflicts.clear();
                MoveReason::Cut(d)
            }
            None => {
                // Only a limit in use is worth raising: growing it while half of it is unused would leave a
                // huge limit to be cut the day the load comes. In use means at least half of today's limit
                // was in flight when this call was let through (RFC 7661's rule for TCP): in slow start the
                // limit doubles while a call is out, so a call let through at the full limit of its day
                // returns to a limit twice that; requiring the whole of today's limit stopped slow start at
                // 20-30 with calls still queued (200-Service burst, 2026-11-30).
                if s.in_flight * 2 < from {
                    return None;
                }
                let max = self.config.max as f64;
                // Latency is judged against what the service answered while calm: learn that before loading it.
                if self.slow_start && !self.latencies.values().any(KindLatency::judged) {
                    return None;
                }
                if self.slow_start {
                    self.limit = (self.limit + 1.0).min(max);
                    MoveReason::SlowStart
                } else {
                    self.limit = (self.limit + 1.0 / self.limit).min(max);
                    MoveReason::Increase
                }
            }
        };
        let to = self.limit();
        (to != from).then_some(Move { from, to, reason })
    }

    fn remember_conflict(&mut self, conflict: bool) {
        self.recent_conflicts.push_back(conflict);
        while self.recent_conflicts.len() > 4 * self.config.window.max(1) {
            self.recent_conflicts.pop_front();
        }
    }

    /// Whether the recent answers hold IPAM conflicts in at least `ipam_conflict_share` of a full memory
    /// (fewer answers than that judge as if the rest were fine: the first conflicts of a burst are not a rate).
    fn conflicts_are_distress(&self) -> bool {
        let conflicts = self.recent_conflicts.iter().filter(|c| **c).count();
        conflicts as f64 >= self.config.ipam_conflict_share * (4 * self.config.window.max(1)) as f64
    }

    /// Adds the answer's latency to its kind's window; distress when that closes a window whose median is
    /// `tolerance` times the kind's usual one.
    fn judge_latency(&mut self, s: &Sample) -> Option<Distress> {
        let kind = self.latencies.entry(s.kind).or_default();
        match kind.add(s, &self.config) {
            Window::Distress => Some(Distress::Latency),
            Window::Fine if self.resume_slow_start => {
                self.resume_slow_start = false;
                self.slow_start = true;
                None
            }
            Window::Open | Window::Unjudged | Window::Fine => None,
        }
    }
}

#[cfg(test)]
mod tests;
