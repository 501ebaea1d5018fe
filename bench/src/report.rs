//! The side-by-side table of docs/BENCHMARKS.md, made from one run's JSON: per figure each
//! implementation's median over its repeats with their range, upstream ÷ kuryr-rs, and each of them ×
//! the floor's.

use std::fmt::Write as _;

use crate::record::{Implementation, Record, Run, Scenario};
use crate::repeats::spread;
use crate::stats::{ratio, Spread};

fn fmt(v: Option<f64>) -> String {
    match v {
        Some(v) if v >= 100.0 => format!("{v:.0}"),
        Some(v) => format!("{v:.3}")
            .trim_end_matches('0')
            .trim_end_matches('.')
            .to_string(),
        None => "—".into(),
    }
}

/// A cell: the median, and the range when the repeats differ.
fn cell(s: Option<Spread>) -> String {
    match s {
        Some(s) if s.min < s.max => format!(
            "{} ({}–{})",
            fmt(Some(s.median)),
            fmt(Some(s.min)),
            fmt(Some(s.max))
        ),
        Some(s) => fmt(Some(s.median)),
        None => "—".into(),
    }
}

fn times(q: Option<f64>) -> String {
    q.map(|q| format!("{q:.1}×")).unwrap_or_else(|| "—".into())
}

/// A figure of a record, by label.
type Figure = (&'static str, fn(&Record) -> Option<f64>);

const METRICS: &[Figure] = &[
    ("p50 time-to-wire (s)", |r| r.p50_s),
    ("p99 time-to-wire (s)", |r| r.p99_s),
    ("max time-to-wire (s)", |r| r.max_s),
    ("Neutron writes / pod", |r| r.neutron_writes_per_pod),
    ("Octavia writes / Service create", |r| {
        r.octavia_writes_per_service_create
    }),
    ("Octavia writes / endpoints change", |r| {
        r.octavia_writes_per_endpoints_change
    }),
    ("Neutron p99 latency during it (ms)", |r| {
        r.extra
            .get("calls")?
            .get("neutron_latency_ms")?
            .get("p99")?
            .as_f64()
    }),
    ("Neutron 503s of its load model", |r| {
        r.extra
            .get("calls")?
            .get("neutron_overloaded")?
            .as_f64()
            .filter(|n| *n > 0.0)
    }),
    ("API server requests in the window", |r| {
        r.api_requests.as_ref().map(|a| a.total as f64)
    }),
    ("API server requests / pod", |r| {
        r.api_requests.as_ref()?.per(r.pods?)
    }),
    ("controller RSS (MiB; VmHWM, scale: VmRSS)", |r| r.rss_mib),
    ("controller CPU (s)", |r| r.cpu_s),
    ("resync after restart (s)", |r| r.resync_s),
];

const WHO: [Implementation; 3] = [
    Implementation::KuryrRs,
    Implementation::Upstream,
    Implementation::Floor,
];

/// Markdown: for every (scenario, variant), each figure of kuryr-rs, upstream and the floor (median and
/// range over the repeats), upstream ÷ kuryr-rs (above 1: kuryr-rs needs less) and each of the two ÷ the
/// floor (how many times the least this machine allows), on the medians; then the notes.
pub fn side_by_side(run: &Run) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "| scenario | variant | figure | kuryr-rs | upstream | floor | upstream ÷ kuryr-rs | kuryr-rs ÷ floor | upstream ÷ floor |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|---|---|---|---|");
    let mut keys: Vec<(&str, &str)> = Vec::new();
    // Datapath figures are not controller figures: they get their own table below.
    let datapath = |r: &Record| r.scenario == Scenario::Datapath && r.variant.starts_with("lab/");
    for r in run.records.iter().filter(|r| !datapath(r)) {
        let k = (r.scenario.name(), r.variant.as_str());
        if !keys.contains(&k) {
            keys.push(k);
        }
    }
    for (scenario, variant) in keys {
        let find = |i: Implementation| {
            run.records
                .iter()
                .find(|r| r.scenario.name() == scenario && r.variant == variant && r.implementation == i)
        };
        let [ours, theirs, floor] = WHO.map(find);
        let mut rows = 0;
        for (label, get) in METRICS {
            let [a, b, f] = [ours, theirs, floor].map(|r| r.and_then(|r| spread(r, get)));
            if a.is_none() && b.is_none() && f.is_none() {
                continue;
            }
            let [ma, mb, mf] = [a, b, f].map(|s| s.map(|s| s.median));
            let _ = writeln!(
                out,
                "| {scenario} | {variant} | {label} | {} | {} | {} | {} | {} | {} |",
                cell(a),
                cell(b),
                cell(f),
                times(ratio(mb, ma)),
                times(ratio(ma, mf)),
                times(ratio(mb, mf)),
            );
            rows += 1;
        }
        if rows == 0 {
            let _ = writeln!(
                out,
                "| {scenario} | {variant} | (not measured, see notes) | — | — | — | — | — | — |"
            );
        }
    }
    let notes: Vec<String> = run
        .records
        .iter()
        .filter(|r| !datapath(r))
        .filter_map(|r| {
            r.note.as_ref().map(|n| {
                format!(
                    "- {} / {} / {}: {}",
                    r.scenario.name(),
                    r.variant,
                    r.implementation.name(),
                    n
                )
            })
        })
        .collect();
    if !notes.is_empty() {
        let _ = writeln!(out, "\nNotes:\n\n{}", notes.join("\n"));
    }
    use crate::scenarios::datapath::{table, RATIO, VM_RATIO};
    let dp = table(run, RATIO);
    if !dp.is_empty() {
        let _ = writeln!(
            out,
            "\nDatapath (pods on OVN vs VXLAN overlay over OVN, two lab VMs):\n\n{dp}"
        );
    }
    let vm = table(run, VM_RATIO);
    if !vm.is_empty() {
        let _ = writeln!(
            out,
            "\nDatapath between two VM nodes (nested-vlan subports vs VXLAN inside the guests over OVN; TCG):\n\n{vm}"
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::Scenario;

    #[test]
    fn ratios_are_upstream_over_ours_and_missing_sides_show_dashes() {
        let mut ours = Record::new(Scenario::Burst, Implementation::KuryrRs, "cloudsim/no-pools");
        ours.set_latencies(vec![1.0, 2.0]);
        ours.neutron_writes_per_pod = Some(2.0);
        let mut theirs = Record::new(Scenario::Burst, Implementation::Upstream, "cloudsim/no-pools");
        theirs.set_latencies(vec![10.0, 30.0]);
        theirs.neutron_writes_per_pod = Some(2.0);
        let not = Record::not_run(
            Scenario::Services,
            Implementation::KuryrRs,
            "cloudsim",
            "no Services controller",
        );
        let run = Run::sample(vec![ours, theirs, not]);
        let t = side_by_side(&run);
        assert!(
            t.contains("| burst | cloudsim/no-pools | p50 time-to-wire (s) | 1 | 10 | — | 10.0× | — | — |"),
            "{t}"
        );
        assert!(
            t.contains("| burst | cloudsim/no-pools | p99 time-to-wire (s) | 2 | 30 | — | 15.0× | — | — |"),
            "{t}"
        );
        assert!(t.contains("Neutron writes / pod | 2 | 2 | — | 1.0× |"), "{t}");
        assert!(
            t.contains("| services | cloudsim | (not measured, see notes)"),
            "{t}"
        );
        assert!(
            t.contains("- services / cloudsim / kuryr-rs: no Services controller"),
            "{t}"
        );
        assert!(!t.contains("resync"), "{t}");
    }

    #[test]
    fn repeats_show_median_and_range_and_every_figure_is_also_times_the_floor() {
        use crate::apimetrics::ApiRequests;
        let rec = |i: Implementation, p99: f64, requests: u64| {
            let mut r = Record::new(Scenario::Burst, i, "cloudsim/pools");
            r.set_latencies(vec![p99 / 2.0, p99]);
            r.pods = Some(10);
            r.api_requests = Some(ApiRequests {
                total: requests,
                ..ApiRequests::default()
            });
            r
        };
        let combine = |v| crate::repeats::combine(v).expect("repeats");
        let ours = combine(vec![
            rec(Implementation::KuryrRs, 3.0, 40),
            rec(Implementation::KuryrRs, 5.0, 40),
            rec(Implementation::KuryrRs, 4.0, 40),
        ]);
        let theirs = combine(vec![
            rec(Implementation::Upstream, 30.0, 60),
            rec(Implementation::Upstream, 10.0, 50),
            rec(Implementation::Upstream, 20.0, 70),
        ]);
        let floor = combine(vec![
            rec(Implementation::Floor, 2.0, 20),
            rec(Implementation::Floor, 2.0, 20),
            rec(Implementation::Floor, 2.0, 20),
        ]);
        let t = side_by_side(&Run::sample(vec![ours, theirs, floor]));
        for row in [
            "| burst | cloudsim/pools | p99 time-to-wire (s) | 4 (3–5) | 20 (10–30) | 2 | 5.0× | 2.0× | 10.0× |",
            "| API server requests in the window | 40 | 60 (50–70) | 20 | 1.5× | 2.0× | 3.0× |",
            "| API server requests / pod | 4 | 6 (5–7) | 2 | 1.5× | 2.0× | 3.0× |",
        ] {
            assert!(t.contains(row), "{row} not in\n{t}");
        }
        assert!(!t.contains("Notes"), "{t}");
    }

    #[test]
    fn numbers_are_short() {
        assert_eq!(fmt(Some(0.25)), "0.25");
        assert_eq!(fmt(Some(2.0)), "2");
        assert_eq!(fmt(Some(1234.6)), "1235");
        assert_eq!(fmt(None), "—");
    }
}
