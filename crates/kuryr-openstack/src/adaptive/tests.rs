use super::*;

const GET: CallKind = CallKind {
    op: "neutron.ports.get",
    size_class: 0,
};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// Starting at its ceiling, so only cuts can move it; calm up to half of it in flight.
fn at_ceiling(n: usize) -> AimdConfig {
    AimdConfig {
        initial: n,
        max: n,
        calm_in_flight: n / 2,
        ..AimdConfig::default()
    }
}

struct Run {
    aimd: Aimd,
    t0: Instant,
    /// Calls in flight when a call is let through; `None`: the limit (full).
    load: Option<usize>,
}

impl Run {
    fn new(config: AimdConfig) -> Self {
        Self {
            aimd: Aimd::new(config),
            t0: Instant::now(),
            load: None,
        }
    }

    fn at(&self, ms_after: u64) -> Instant {
        self.t0 + ms(ms_after)
    }

    /// A call let through at `started_ms` with the limit full (or `load` in flight), answered after
    /// `latency_ms`.
    fn call(&mut self, started_ms: u64, latency_ms: u64, verdict: Verdict) -> Option<Move> {
        let s = Sample {
            kind: GET,
            started: self.at(started_ms),
            latency: ms(latency_ms),
            in_flight: self.load.unwrap_or(self.aimd.limit()),
            verdict,
        };
        self.aimd.on_sample(&s, self.at(started_ms + latency_ms))
    }
}

#[test]
fn slow_start_learns_a_calm_window_then_grows_by_one_per_quick_answer_up_to_the_ceiling() {
    let mut r = Run::new(AimdConfig {
        initial: 2,
        max: 6,
        ..AimdConfig::default()
    });
    let moves: Vec<(u64, usize)> = (0..22)
        .filter_map(|i| r.call(i * 100, 50, Verdict::Answered).map(|m| (i, m.to)))
        .collect();
    // The first two windows (8 answers each) teach the usual latency; only from the last of the second
    // does the load grow.
    assert_eq!(moves, vec![(15, 3), (16, 4), (17, 5), (18, 6)]);
    assert_eq!(r.aimd.limit(), 6);
}

#[test]
fn a_server_error_halves_the_limit_once_per_round_trip() {
    let mut r = Run::new(AimdConfig {
        initial: 16,
        ..AimdConfig::default()
    });
    let cut = r.call(0, 100, Verdict::Distress(Distress::ServerError));
    assert_eq!(
        cut,
        Some(Move {
            from: 16,
            to: 8,
            reason: MoveReason::Cut(Distress::ServerError)
        })
    );
    // Started before the cut (in flight when it was made): already answered by it.
    assert_eq!(r.call(50, 100, Verdict::Distress(Distress::ServerError)), None);
    assert_eq!(r.aimd.limit(), 8);
    // Started after it: a new round, a new cut.
    assert_eq!(
        r.call(200, 100, Verdict::Distress(Distress::Timeout))
            .map(|m| m.to),
        Some(4)
    );
}

#[test]
fn after_a_cut_the_limit_grows_by_one_per_limit_of_answers() {
    let mut r = Run::new(AimdConfig {
        initial: 8,
        ..AimdConfig::default()
    });
    r.call(0, 10, Verdict::Distress(Distress::TooManyRequests));
    assert_eq!(r.aimd.limit(), 4);
    // Congestion avoidance: +1/limit per answer, so 4 answers to reach 5, then 5 more to reach 6.
    let mut answers = 0;
    while r.aimd.limit() < 6 {
        r.call(1_000 + answers * 10, 10, Verdict::Answered);
        answers += 1;
    }
    assert!((9..=10).contains(&answers), "{answers}");
}

/// `n` answers started 10 ms apart from `from_ms`, every `every`-th an IPAM conflict (the first included);
/// the limit after each.
fn answers_with_conflicts(r: &mut Run, from_ms: u64, n: u64, every: u64) -> Vec<usize> {
    (0..n)
        .map(|i| {
            let verdict = if i % every == 0 {
                Verdict::Distress(Distress::IpamConflict)
            } else {
                Verdict::Answered
            };
            r.call(from_ms + i * 10, 10, verdict);
            r.aimd.limit()
        })
        .collect()
}

#[test]
fn an_ipam_conflict_now_and_then_is_contention_not_distress() {
    let mut r = Run::new(at_ceiling(32));
    // One in ten answers a conflict (a pools burst met 13 in 164 calls): never a cut.
    let limits = answers_with_conflicts(&mut r, 0, 200, 10);
    assert!(limits.iter().all(|l| *l == 32), "{limits:?}");
}

#[test]
fn ipam_conflicts_in_a_quarter_of_the_answers_cut_the_limit() {
    let mut r = Run::new(at_ceiling(32));
    // One in three: the 8th conflict within the last 32 answers cuts, and the count starts again after it.
    let limits = answers_with_conflicts(&mut r, 0, 200, 3);
    let first_cut = limits.iter().position(|l| *l < 32).expect("a cut");
    // The gentle cut (×0.8): IPAM conflicts are contention, the service still answers.
    assert_eq!((first_cut, limits[first_cut]), (21, 25), "{limits:?}");
    // Conflicts that go on cut again each time 8 more come within 32 answers (slow start regrows between).
    let cuts = limits.windows(2).filter(|w| w[1] < w[0]).count();
    assert!(cuts >= 7, "{cuts} cuts: {limits:?}");
    // Each cut is an ipam_conflict move.
    let mut r = Run::new(at_ceiling(32));
    let mut moves = (0..30).filter_map(|i| {
        let v = if i % 3 == 0 {
            Verdict::Distress(Distress::IpamConflict)
        } else {
            Verdict::Answered
        };
        r.call(i * 10, 10, v)
    });
    assert_eq!(
        moves.next().map(|m| m.reason),
        Some(MoveReason::Cut(Distress::IpamConflict))
    );
}

#[test]
fn a_cut_for_ipam_conflicts_leaves_slow_start_going() {
    let mut r = Run::new(AimdConfig {
        initial: 8,
        ..AimdConfig::default()
    });
    // Two calm windows teach the usual latency, slow start takes the limit up.
    for i in 0..20 {
        r.call(i * 100, 50, Verdict::Answered);
    }
    let before = r.aimd.limit();
    // Eight conflicts in a row: the gentle cut.
    for i in 0..8 {
        r.call(2_000 + i * 10, 50, Verdict::Distress(Distress::IpamConflict));
    }
    let cut = r.aimd.limit();
    assert!(cut < before, "{before} -> {cut}");
    // Still slow start: one more per quick answer, not one per limit's worth.
    r.call(5_000, 50, Verdict::Answered);
    r.call(5_100, 50, Verdict::Answered);
    assert_eq!(r.aimd.limit(), cut + 2);
}

#[test]
fn never_below_the_minimum() {
    let mut r = Run::new(AimdConfig {
        initial: 4,
        min: 2,
        ..AimdConfig::default()
    });
    for i in 0..10 {
        r.call(i * 1_000, 10, Verdict::Distress(Distress::ServerError));
    }
    assert_eq!(r.aimd.limit(), 2);
}

/// A window's worth (8) of answers of `latency_ms`, started 100 ms apart from `from_ms`; the last one's move.
fn window(r: &mut Run, from_ms: u64, latency_ms: u64) -> Option<Move> {
    let mut last = None;
    for i in 0..8 {
        last = r.call(from_ms + i * 100, latency_ms, Verdict::Answered);
        if i < 7 {
            assert!(
                !matches!(
                    last,
                    Some(Move {
                        reason: MoveReason::Cut(_),
                        ..
                    })
                ),
                "judged before the window closed: {last:?}"
            );
        }
    }
    last
}

/// A window answered with the service calm (`calm_in_flight` calls in flight); the last one's move.
fn calm_window(r: &mut Run, from_ms: u64, latency_ms: u64) -> Option<Move> {
    r.load = Some(r.aimd.config().calm_in_flight);
    let last = window(r, from_ms, latency_ms);
    r.load = None;
    last
}

/// At a ceiling of 10 (calm up to 5 in flight), its usual latency taught by three calm windows of
/// `usual_ms`.
fn learned(usual_ms: u64) -> Run {
    let mut r = Run::new(at_ceiling(10));
    for w in 0..3 {
        calm_window(&mut r, w * 1_000, usual_ms);
    }
    r
}

#[test]
fn a_window_whose_median_is_beyond_twice_the_usual_cuts_gently() {
    let mut r = Run::new(at_ceiling(10));
    for w in 0..3 {
        assert_eq!(calm_window(&mut r, w * 1_000, 100), None);
    }
    // 190 ms against a usual 100 ms: fine. 250 ms: distress, a 0.8 cut when the window closes.
    assert_eq!(window(&mut r, 10_000, 190), None);
    assert_eq!(
        window(&mut r, 20_000, 250),
        Some(Move {
            from: 10,
            to: 8,
            reason: MoveReason::Cut(Distress::Latency)
        })
    );
}

#[test]
fn one_slow_answer_in_a_window_is_not_distress() {
    let mut r = learned(100);
    // Three of eight answers ten times slower: the median is still 100 ms.
    for i in 0..8u64 {
        let latency = if i % 3 == 0 { 1_000 } else { 100 };
        assert_eq!(r.call(10_000 + i * 100, latency, Verdict::Answered), None);
    }
    assert_eq!(r.aimd.limit(), 10);
}

#[test]
fn latency_is_judged_per_kind_of_call() {
    let mut r = learned(30);
    // Big bulk creates are slow because they are big, not because Neutron suffers.
    let kind = CallKind::new("neutron.ports.create_bulk", 60_000);
    assert_ne!(kind, GET);
    for i in 0..24u64 {
        let bulk = Sample {
            kind,
            started: r.at(10_000 + i * 100),
            latency: ms(900),
            in_flight: 10,
            verdict: Verdict::Answered,
        };
        assert_eq!(r.aimd.on_sample(&bulk, r.at(10_900 + i * 100)), None);
    }
}

#[test]
fn a_kind_is_judged_once_two_calm_windows_taught_its_usual_latency() {
    let mut r = Run::new(at_ceiling(10));
    // Under load, nothing to compare a window with, however slow.
    assert_eq!(window(&mut r, 0, 900), None);
    // A calm one teaches (it is never judged), but one window's median is too rough a usual: a burst's
    // first window is answered before the burst loads the machine, and the next ones twice as slowly.
    assert_eq!(calm_window(&mut r, 1_000, 300), None);
    assert_eq!(window(&mut r, 2_000, 700), None);
    // A second calm one; then loaded ones are judged.
    assert_eq!(calm_window(&mut r, 3_000, 300), None);
    assert_eq!(window(&mut r, 4_000, 300), None);
    assert!(window(&mut r, 5_000, 700).is_some());
}

#[test]
fn the_first_calm_windows_count_alike_in_the_usual_latency() {
    let mut r = Run::new(at_ceiling(10));
    // 100 ms, then 400 ms: the usual is their geometric mean, 200 ms (a moving average from the first
    // alone would say 132 ms, and judge 350 ms as distress).
    calm_window(&mut r, 0, 100);
    calm_window(&mut r, 1_000, 400);
    assert_eq!(window(&mut r, 10_000, 350), None);
    assert!(window(&mut r, 20_000, 450).is_some());
}

#[test]
fn a_slow_window_answered_while_calm_teaches_and_does_not_cut() {
    let mut r = learned(100);
    // Four times the usual with few calls in flight: the service (or this machine) is slower for
    // everyone; fewer calls would not make it faster.
    for w in 0..5 {
        assert_eq!(calm_window(&mut r, 10_000 + w * 1_000, 400), None);
    }
    assert_eq!(r.aimd.limit(), 10);
    // And it taught: 400 ms under load is no longer twice the usual.
    assert_eq!(window(&mut r, 20_000, 400), None);
    // The same slowness under load, against the old usual, is distress.
    let mut r = learned(100);
    assert!(window(&mut r, 10_000, 400).is_some());
}

#[test]
fn windows_answered_under_load_do_not_teach_the_usual_latency() {
    let mut r = Run::new(AimdConfig {
        calm_in_flight: 4,
        ..at_ceiling(10)
    });
    // 10 calls in flight: never calm, so however slow, no window has anything to be compared with.
    for w in 0..5 {
        assert_eq!(window(&mut r, w * 1_000, 100 * (w + 1)), None);
    }
}

#[test]
fn answers_to_calls_let_through_before_a_cut_are_not_judged() {
    let mut r = learned(100);
    assert!(r
        .call(10_000, 10, Verdict::Distress(Distress::ServerError))
        .is_some());
    // Slow answers to calls started before that cut: the load it answered, not news.
    for i in 0..16u64 {
        assert_eq!(r.call(9_000 + i, 1_000, Verdict::Answered), None);
    }
    assert_eq!(r.aimd.limit(), 5);
}

#[test]
fn a_service_slower_for_good_is_relearned() {
    let mut r = learned(50);
    // The service got slower for good (300 ms, 6x): cut at first, then re-learned.
    assert!(window(&mut r, 10_000, 300).is_some());
    for w in 0..300 {
        window(&mut r, 20_000 + w * 1_000, 300);
    }
    // 300 ms is the new normal: windows of 300 ms are no longer distress, and the limit grew back.
    assert_eq!(window(&mut r, 400_000, 300), None);
    assert!(r.aimd.limit() > 5, "{}", r.aimd.limit());
}

/// Latencies drawn from a lognormal with the given p50 and p99 (cloudsim's and a real Neutron's shape), from
/// a seeded generator so the run is the same every time.
struct Lognormal {
    rng: fastrand::Rng,
    mu: f64,
    sigma: f64,
}

impl Lognormal {
    fn new(seed: u64, p50_ms: f64, p99_ms: f64) -> Self {
        const Z99: f64 = 2.326;
        let mu = p50_ms.ln();
        Self {
            rng: fastrand::Rng::with_seed(seed),
            mu,
            sigma: (p99_ms.ln() - mu) / Z99,
        }
    }

    fn draw_ms(&mut self) -> f64 {
        // Box-Muller.
        let u1 = self.rng.f64().max(f64::MIN_POSITIVE);
        let u2 = self.rng.f64();
        let z = (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos();
        (self.mu + self.sigma * z).exp()
    }
}

/// A caller that always has more calls than the limit lets through, against a service of `workers` whose
/// answers queue beyond them (cloudsim's load model: latency × in-flight / workers). The limit after each
/// answer.
fn saturate(config: AimdConfig, workers: Option<usize>, answers: usize, seed: u64) -> Vec<usize> {
    let mut aimd = Aimd::new(config);
    let mut latencies = Lognormal::new(seed, 100.0, 400.0);
    let t0 = Instant::now();
    let mut clock = Duration::ZERO;
    let mut limits = Vec::with_capacity(answers);
    for _ in 0..answers {
        let in_flight = aimd.limit();
        let queue = workers.map_or(1.0, |w| (in_flight as f64 / w as f64).max(1.0));
        let latency = Duration::from_secs_f64(latencies.draw_ms() * queue / 1_000.0);
        let s = Sample {
            kind: GET,
            started: t0 + clock,
            latency,
            in_flight,
            verdict: Verdict::Answered,
        };
        // `in_flight` calls share the service: one of them finishes every latency / in_flight.
        clock += latency / in_flight as u32;
        aimd.on_sample(&s, t0 + clock + latency);
        limits.push(aimd.limit());
    }
    limits
}

#[test]
fn an_idle_cloud_with_long_tailed_latencies_lets_the_limit_reach_its_ceiling() {
    // p50 100 ms, p99 400 ms: under the old rule (2x the fastest recent answer) most answers were distress
    // and the limit sat near 1. Judged over 40 clouds: any one of them may draw an unlucky usual (a
    // window's median is a sample) and spend a while lower.
    let mut at_ceiling = 0;
    let mut lowest: Vec<usize> = (0..40)
        .map(|seed| {
            let limits = saturate(AimdConfig::default(), None, 5_000, seed);
            at_ceiling += usize::from(limits.contains(&64));
            limits[4_000..].iter().copied().min().unwrap_or(0)
        })
        .collect();
    lowest.sort_unstable();
    let median = lowest[lowest.len() / 2];
    assert!(at_ceiling >= 30, "{at_ceiling} of 40 reached the ceiling");
    assert!(
        median >= 48,
        "the limit's lowest in the last 1,000 answers: {lowest:?}"
    );
    // A tenth of them a while lower, never near the floor.
    assert!(lowest[lowest.len() / 10] >= 16, "{lowest:?}");
}

#[test]
fn a_cloud_that_queues_beyond_its_workers_keeps_the_limit_near_them() {
    // 8 workers: at a limit of 16 every answer takes twice as long as idle.
    let limits = saturate(AimdConfig::default(), Some(8), 5_000, 7);
    let tail = &limits[2_000..];
    let mean = tail.iter().sum::<usize>() as f64 / tail.len() as f64;
    let highest = tail.iter().copied().max().unwrap_or(0);
    assert!(mean <= 20.0, "mean limit {mean:.1} on 8 workers");
    assert!(highest <= 32, "limit reached {highest} on 8 workers");
    // Not pinned at the floor either: the service is used.
    assert!(mean >= 6.0, "mean limit {mean:.1} on 8 workers");
}

#[test]
fn an_unused_limit_is_not_raised() {
    let mut r = Run::new(AimdConfig {
        initial: 4,
        ..AimdConfig::default()
    });
    let s = Sample {
        kind: GET,
        started: r.at(0),
        latency: ms(10),
        in_flight: 1,
        verdict: Verdict::Answered,
    };
    for _ in 0..20 {
        assert_eq!(r.aimd.on_sample(&s, r.at(10)), None);
    }
    assert_eq!(r.aimd.limit(), 4);
}

#[test]
fn verdicts_from_answers() {
    let ipam = br#"{"NeutronError": {"type": "IpAddressGenerationFailure", "message": "x"}}"#;
    let dup = br#"{"NeutronError": {"type": "MacAddressInUse", "message": "x"}}"#;
    let of = |status, body: &[u8]| Verdict::of(&Outcome::Response { status, body });
    assert_eq!(of(200, b""), Verdict::Answered);
    assert_eq!(of(404, b""), Verdict::Answered);
    assert_eq!(of(503, b""), Verdict::Distress(Distress::ServerError));
    assert_eq!(of(429, b""), Verdict::Distress(Distress::TooManyRequests));
    assert_eq!(of(501, b""), Verdict::Answered);
    assert_eq!(of(409, ipam), Verdict::Distress(Distress::IpamConflict));
    assert_eq!(of(409, dup), Verdict::Answered);
    assert_eq!(
        Verdict::of(&Outcome::Transport(TransportKind::Timeout)),
        Verdict::Distress(Distress::Timeout)
    );
    assert_eq!(
        Verdict::of(&Outcome::Transport(TransportKind::Connect)),
        Verdict::Neutral
    );
}

#[test]
fn size_classes() {
    assert_eq!(CallKind::new("x", 0).size_class, 0);
    assert_eq!(CallKind::new("x", 4_000).size_class, 0);
    assert_eq!(CallKind::new("x", 5_000).size_class, 1);
    assert_eq!(CallKind::new("x", 100_000).size_class, 4);
}

/// At 10 of a ceiling of 64 (calm up to 2 in flight), its usual latency taught by two calm windows of 100 ms.
fn growing() -> Run {
    let mut r = Run::new(AimdConfig {
        initial: 10,
        calm_in_flight: 2,
        ..AimdConfig::default()
    });
    calm_window(&mut r, 0, 100);
    calm_window(&mut r, 1_000, 100);
    r
}

#[test]
fn a_latency_cut_lets_slow_start_resume_once_a_loaded_window_is_answered_fast_again() {
    let mut r = growing();
    let cut = window(&mut r, 10_000, 250).expect("a slow loaded window cuts");
    assert_eq!(cut.reason, MoveReason::Cut(Distress::Latency));
    // The machine was busy for a moment: the next loaded window is answered as fast as ever.
    window(&mut r, 20_000, 100);
    let before = r.aimd.limit();
    // Slow start again: one more per quick answer.
    r.call(30_000, 100, Verdict::Answered);
    r.call(30_100, 100, Verdict::Answered);
    assert_eq!(r.aimd.limit(), before + 2);
    // And a service really at its capacity is cut again at the next slow window.
    let cuts = (0..16u64)
        .filter_map(|i| r.call(40_000 + i * 100, 250, Verdict::Answered))
        .filter(|m| m.reason == MoveReason::Cut(Distress::Latency))
        .count();
    assert!(cuts >= 1, "never cut again");
}

#[test]
fn after_a_cut_for_errors_slow_start_does_not_resume() {
    let mut r = growing();
    let cut = r.call(10_000, 100, Verdict::Distress(Distress::ServerError));
    assert!(cut.is_some());
    window(&mut r, 20_000, 100);
    let before = r.aimd.limit();
    r.call(30_000, 100, Verdict::Answered);
    r.call(30_100, 100, Verdict::Answered);
    // Additive increase: a limit's worth of answers for one more.
    assert_eq!(r.aimd.limit(), before);
}

#[test]
fn a_limit_half_in_use_when_the_call_went_out_is_raised() {
    let mut r = growing();
    let quick = |r: &mut Run, at: u64, in_flight: usize| {
        let s = Sample {
            kind: GET,
            started: r.at(at),
            latency: ms(100),
            in_flight,
            verdict: Verdict::Answered,
        };
        r.aimd.on_sample(&s, r.at(at + 100))
    };
    // Let through at 5 of 10: in slow start the limit doubles while a call is out, so half in use is in use.
    assert_eq!(quick(&mut r, 10_000, 5).map(|m| m.to), Some(11));
    // 5 of 11 is less than half: that limit is not in use.
    assert_eq!(quick(&mut r, 10_100, 5), None);
    assert_eq!(quick(&mut r, 10_200, 6).map(|m| m.to), Some(12));
}
