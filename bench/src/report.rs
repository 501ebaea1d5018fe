//! The side-by-side table of docs/BENCHMARKS.md, made from one run's JSON.

use std::fmt::Write as _;

use crate::record::{Implementation, Record, Run, Scenario};
use crate::stats::ratio;

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
    ("controller RSS (MiB; burst/churn: peak)", |r| r.rss_mib),
    ("controller CPU (s)", |r| r.cpu_s),
    ("resync after restart (s)", |r| r.resync_s),
];

/// Markdown: for every (scenario, variant), each figure of kuryr-rs and upstream and their ratio
/// (upstream ÷ kuryr-rs: above 1 means kuryr-rs needs less), then the notes.
pub fn side_by_side(run: &Run) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "| scenario | variant | figure | kuryr-rs | upstream | upstream ÷ kuryr-rs |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|---|");
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
        let (ours, theirs) = (find(Implementation::KuryrRs), find(Implementation::Upstream));
        for (label, get) in METRICS {
            let a = ours.and_then(get);
            let b = theirs.and_then(get);
            if a.is_none() && b.is_none() {
                continue;
            }
            let q = ratio(b, a)
                .map(|q| format!("{q:.1}×"))
                .unwrap_or_else(|| "—".into());
            let _ = writeln!(
                out,
                "| {scenario} | {variant} | {label} | {} | {} | {q} |",
                fmt(a),
                fmt(b)
            );
        }
        if ours.is_some_and(|r| r.pods.is_none() && r.p50_s.is_none() && r.extra.is_empty())
            && theirs.is_none_or(|r| r.p50_s.is_none())
        {
            let _ = writeln!(
                out,
                "| {scenario} | {variant} | (not measured, see notes) | — | — | — |"
            );
        }
    }
    let notes: Vec<String> = run
        .records
        .iter()
        .filter(|r| !datapath(r))
        .filter_map(|r| {
            r.note.as_ref().map(|n| {
                let who = match r.implementation {
                    Implementation::KuryrRs => "kuryr-rs",
                    Implementation::Upstream => "upstream",
                };
                format!("- {} / {} / {}: {}", r.scenario.name(), r.variant, who, n)
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
    use crate::record::{Commit, Machine, Scenario, SCHEMA_VERSION};

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
        let run = Run {
            schema_version: SCHEMA_VERSION,
            run_id: "r".into(),
            started_at: "t".into(),
            finished_at: None,
            command: "bench/run".into(),
            machine: Machine {
                hostname: "h".into(),
                cpus: 2,
                mem_gib: 1.0,
                cpu_model: "c".into(),
                kernel: "k".into(),
            },
            commit: Commit {
                sha: "s".into(),
                dirty: false,
            },
            profile: "p".into(),
            time_scale: 1.0,
            records: vec![ours, theirs, not],
        };
        let t = side_by_side(&run);
        assert!(
            t.contains("| burst | cloudsim/no-pools | p50 time-to-wire (s) | 1 | 10 | 10.0× |"),
            "{t}"
        );
        assert!(
            t.contains("| burst | cloudsim/no-pools | p99 time-to-wire (s) | 2 | 30 | 15.0× |"),
            "{t}"
        );
        assert!(t.contains("Neutron writes / pod | 2 | 2 | 1.0× |"), "{t}");
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
    fn numbers_are_short() {
        assert_eq!(fmt(Some(0.25)), "0.25");
        assert_eq!(fmt(Some(2.0)), "2");
        assert_eq!(fmt(Some(1234.6)), "1235");
        assert_eq!(fmt(None), "—");
    }
}
