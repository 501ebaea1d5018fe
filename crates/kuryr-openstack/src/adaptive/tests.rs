use super::*;

const GET: CallKind = CallKind {
    op: "neutron.ports.get",
    size_class: 0,
};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// Starting at its ceiling: only cuts can move it.
fn at_ceiling(n: usize) -> AimdConfig {
    AimdConfig {
        initial: n,
        max: n,
        ..AimdConfig::default()
    }
}

struct Run {
    aimd: Aimd,
    t0: Instant,
}

impl Run {
    fn new(config: AimdConfig) -> Self {
        Self {
            aimd: Aimd::new(config),
            t0: Instant::now(),
        }
    }

    fn at(&self, ms_after: u64) -> Instant {
        self.t0 + ms(ms_after)
    }

    /// A call let through at `started_ms` with the limit full, answered after `latency_ms`.
    fn call(&mut self, started_ms: u64, latency_ms: u64, verdict: Verdict) -> Option<Move> {
        let s = Sample {
            kind: GET,
            started: self.at(started_ms),
            latency: ms(latency_ms),
            in_flight: self.aimd.limit(),
            verdict,
        };
        self.aimd.on_sample(&s, self.at(started_ms + latency_ms))
    }
}

#[test]
fn slow_start_grows_by_one_per_quick_answer_up_to_the_ceiling() {
    let mut r = Run::new(AimdConfig {
        initial: 2,
        max: 6,
        ..AimdConfig::default()
    });
    let moves: Vec<usize> = (0..10)
        .filter_map(|i| r.call(i * 100, 50, Verdict::Answered).map(|m| m.to))
        .collect();
    assert_eq!(moves, vec![3, 4, 5, 6]);
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

#[test]
fn latency_beyond_twice_the_baseline_cuts_gently() {
    let mut r = Run::new(at_ceiling(10));
    for i in 0..5 {
        assert_eq!(r.call(i * 100, 100, Verdict::Answered), None);
    }
    // 190 ms against a 100 ms baseline: fine. 250 ms: distress, a 0.8 cut.
    assert_eq!(r.call(1_000, 190, Verdict::Answered), None);
    assert_eq!(
        r.call(2_000, 250, Verdict::Answered),
        Some(Move {
            from: 10,
            to: 8,
            reason: MoveReason::Cut(Distress::Latency)
        })
    );
}

#[test]
fn latency_is_judged_per_kind_of_call() {
    let mut r = Run::new(at_ceiling(10));
    for i in 0..5 {
        r.call(i * 100, 30, Verdict::Answered);
    }
    // A big bulk create is slow because it is big, not because Neutron suffers.
    let bulk = Sample {
        kind: CallKind::new("neutron.ports.create_bulk", 60_000),
        started: r.at(1_000),
        latency: ms(900),
        in_flight: 10,
        verdict: Verdict::Answered,
    };
    assert_eq!(r.aimd.on_sample(&bulk, r.at(1_900)), None);
    assert_ne!(bulk.kind, GET);
}

#[test]
fn the_first_answers_of_a_kind_are_not_judged() {
    let mut r = Run::new(at_ceiling(10));
    // A cold cache's first answer is fast, the next slow: too few samples to say anything.
    assert_eq!(r.call(0, 30, Verdict::Answered), None);
    assert_eq!(r.call(100, 300, Verdict::Answered), None);
}

#[test]
fn a_slow_baseline_is_forgotten_after_two_windows() {
    let mut r = Run::new(AimdConfig {
        baseline_window: Duration::from_secs(10),
        ..at_ceiling(10)
    });
    for i in 0..5 {
        r.call(i * 100, 50, Verdict::Answered);
    }
    // The service got slower for good (300 ms): cut at first, then re-learned.
    assert!(r.call(1_000, 300, Verdict::Answered).is_some());
    for i in 0..40 {
        r.call(2_000 + i * 1_000, 300, Verdict::Answered);
    }
    // 300 ms is the new normal: an answer in 300 ms is no longer distress.
    let m = r.call(60_000, 300, Verdict::Answered);
    assert!(
        !matches!(
            m,
            Some(Move {
                reason: MoveReason::Cut(_),
                ..
            })
        ),
        "{m:?}"
    );
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
