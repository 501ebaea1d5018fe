//! The result schema: one JSON file per run under `bench/results/`, holding the machine, the commit and
//! one record per (scenario, implementation, variant). Figures that do not apply are `null`, with `note`
//! saying why.
//!
//! Schema 2 (repeats, the floor, API request counts, phase times) only adds fields, each with a serde
//! default: a schema-1 file loads as a run of one repeat without them.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::apimetrics::ApiRequests;

pub const SCHEMA_VERSION: u32 = 2;

/// Schema versions this build reads.
const READABLE: std::ops::RangeInclusive<u32> = 1..=SCHEMA_VERSION;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum Scenario {
    Burst,
    Churn,
    Services,
    Scale,
    CniAdd,
    Datapath,
}

impl Scenario {
    pub fn name(self) -> &'static str {
        match self {
            Scenario::Burst => "burst",
            Scenario::Churn => "churn",
            Scenario::Services => "services",
            Scenario::Scale => "scale",
            Scenario::CniAdd => "cni_add",
            Scenario::Datapath => "datapath",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Implementation {
    #[serde(rename = "kuryr-rs")]
    KuryrRs,
    #[serde(rename = "upstream")]
    Upstream,
    /// The bench's own minimal controller (`floor.rs`): the least the scenario costs on this machine.
    #[serde(rename = "floor")]
    Floor,
}

impl Implementation {
    pub fn name(self) -> &'static str {
        match self {
            Implementation::KuryrRs => "kuryr-rs",
            Implementation::Upstream => "upstream",
            Implementation::Floor => "floor",
        }
    }
}

/// Where a repeat's session came: which repeat (0-based) and its place in that repeat's order (0 = first).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RepeatPlace {
    pub index: u32,
    pub position: u32,
}

/// One measured (or explicitly not measured) figure set.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    pub scenario: Scenario,
    pub implementation: Implementation,
    /// What differs between records of the same pair: cloud (`cloudsim`, `neutron`), pools, message size.
    pub variant: String,
    pub pods: Option<u64>,
    pub p50_s: Option<f64>,
    pub p99_s: Option<f64>,
    pub max_s: Option<f64>,
    pub neutron_writes_per_pod: Option<f64>,
    pub octavia_writes_per_service_create: Option<f64>,
    pub octavia_writes_per_endpoints_change: Option<f64>,
    pub rss_mib: Option<f64>,
    pub cpu_s: Option<f64>,
    pub resync_s: Option<f64>,
    /// Scenario-specific figures (datapath throughput, services count, errors seen, ...).
    #[serde(default)]
    pub extra: serde_json::Map<String, serde_json::Value>,
    /// The raw time-to-wire sample in seconds (for the plot); empty where none applies.
    #[serde(default)]
    pub samples_s: Vec<f64>,
    /// Why figures are null, or anything a reader must know about this record.
    pub note: Option<String>,
    /// The API server's requests during the measured window (`apimetrics.rs`), whoever sent them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_requests: Option<ApiRequests>,
    /// Seconds each phase of the session took (setup, warm_up, create, wait_wired, drain, teardown).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub phases_s: BTreeMap<String, f64>,
    /// On a repeated record: each repeat's own record, whose medians the figures above are
    /// (`repeats.rs`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub repeats: Vec<Record>,
    /// On an entry of `repeats`: which repeat it was and where it came in that repeat's order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repeat: Option<RepeatPlace>,
}

impl Record {
    pub fn new(scenario: Scenario, implementation: Implementation, variant: impl Into<String>) -> Record {
        Record {
            scenario,
            implementation,
            variant: variant.into(),
            pods: None,
            p50_s: None,
            p99_s: None,
            max_s: None,
            neutron_writes_per_pod: None,
            octavia_writes_per_service_create: None,
            octavia_writes_per_endpoints_change: None,
            rss_mib: None,
            cpu_s: None,
            resync_s: None,
            extra: serde_json::Map::new(),
            samples_s: Vec::new(),
            note: None,
            api_requests: None,
            phases_s: BTreeMap::new(),
            repeats: Vec::new(),
            repeat: None,
        }
    }

    /// A record that could not be measured, saying why.
    pub fn not_run(
        scenario: Scenario,
        implementation: Implementation,
        variant: &str,
        why: impl Into<String>,
    ) -> Record {
        Record {
            note: Some(why.into()),
            ..Record::new(scenario, implementation, variant)
        }
    }

    /// Fills p50/p99/max from a time-to-wire sample and keeps the sample.
    pub fn set_latencies(&mut self, samples: Vec<f64>) {
        if let Some(s) = crate::stats::Summary::of(&samples) {
            self.p50_s = Some(s.p50);
            self.p99_s = Some(s.p99);
            self.max_s = Some(s.max);
        }
        self.samples_s = samples.into_iter().map(crate::stats::round_ms).collect();
    }

    /// What is wrong with this record, if anything.
    pub fn problems(&self) -> Vec<String> {
        let mut out = Vec::new();
        let figures = [
            ("p50_s", self.p50_s),
            ("p99_s", self.p99_s),
            ("max_s", self.max_s),
            ("neutron_writes_per_pod", self.neutron_writes_per_pod),
            (
                "octavia_writes_per_service_create",
                self.octavia_writes_per_service_create,
            ),
            (
                "octavia_writes_per_endpoints_change",
                self.octavia_writes_per_endpoints_change,
            ),
            ("rss_mib", self.rss_mib),
            ("cpu_s", self.cpu_s),
            ("resync_s", self.resync_s),
        ];
        for (name, v) in figures {
            if let Some(v) = v {
                if !v.is_finite() || v < 0.0 {
                    out.push(format!("{name} is {v}"));
                }
            }
        }
        if let (Some(a), Some(b), Some(c)) = (self.p50_s, self.p99_s, self.max_s) {
            if !(a <= b && b <= c) {
                out.push(format!("percentiles out of order: p50 {a} p99 {b} max {c}"));
            }
        }
        if figures.iter().all(|(_, v)| v.is_none()) && self.extra.is_empty() && self.note.is_none() {
            out.push("no figure and no note saying why".into());
        }
        for (name, v) in &self.phases_s {
            if !v.is_finite() || *v < 0.0 {
                out.push(format!("phase {name} is {v}"));
            }
        }
        for (i, r) in self.repeats.iter().enumerate() {
            out.extend(r.problems().into_iter().map(|p| format!("repeat {i}: {p}")));
        }
        out
    }
}

/// Where and on what a run happened.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Machine {
    pub hostname: String,
    pub cpus: usize,
    pub mem_gib: f64,
    pub cpu_model: String,
    pub kernel: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Commit {
    pub sha: String,
    /// Uncommitted changes in the tree that was measured.
    pub dirty: bool,
}

/// One benchmark run: the file written to `bench/results/<run_id>.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Run {
    pub schema_version: u32,
    pub run_id: String,
    pub started_at: String,
    pub finished_at: Option<String>,
    /// The command line that reproduces the run.
    pub command: String,
    pub machine: Machine,
    pub commit: Commit,
    /// The cloudsim latency profile used (path in the repo) and the time-scale factor applied to it.
    pub profile: String,
    pub time_scale: f64,
    /// Sessions per (scenario, implementation, variant) (`--repeats`); files before schema 2: one.
    #[serde(default = "one")]
    pub repeats: u32,
    pub records: Vec<Record>,
}

fn one() -> u32 {
    1
}

impl Run {
    /// Problems of every record, prefixed by the record's key.
    pub fn problems(&self) -> Vec<String> {
        let mut out = Vec::new();
        if !READABLE.contains(&self.schema_version) {
            out.push(format!(
                "schema_version {} (expected {READABLE:?})",
                self.schema_version
            ));
        }
        for r in &self.records {
            for p in r.problems() {
                out.push(format!(
                    "{}/{}/{}: {p}",
                    r.scenario.name(),
                    r.implementation.name(),
                    r.variant
                ));
            }
        }
        out
    }

    /// Adds `r`, or replaces the record of its (scenario, implementation, variant): a repeated variant is
    /// saved again after each of its repeats.
    pub fn upsert(&mut self, r: Record) {
        match self.records.iter_mut().find(|x| {
            x.scenario == r.scenario && x.implementation == r.implementation && x.variant == r.variant
        }) {
            Some(x) => *x = r,
            None => self.records.push(r),
        }
    }

    /// The record of (scenario, implementation, variant).
    pub fn find(&self, scenario: Scenario, implementation: Implementation, variant: &str) -> Option<&Record> {
        self.records
            .iter()
            .find(|r| r.scenario == scenario && r.implementation == implementation && r.variant == variant)
    }
}

#[cfg(test)]
impl Run {
    /// A run of `records` on a made-up machine, for tests.
    pub fn sample(records: Vec<Record>) -> Run {
        Run {
            schema_version: SCHEMA_VERSION,
            run_id: "20261122T130000Z".into(),
            started_at: "2026-11-22T13:00:00Z".into(),
            finished_at: None,
            command: "bench/run burst".into(),
            machine: Machine {
                hostname: "h".into(),
                cpus: 2,
                mem_gib: 23.0,
                cpu_model: "x".into(),
                kernel: "6".into(),
            },
            commit: Commit {
                sha: "abc".into(),
                dirty: false,
            },
            profile: "bench/profiles/published.yaml".into(),
            time_scale: 0.1,
            repeats: 1,
            records,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_serialize_with_every_required_key_and_nulls() {
        let r = Record::not_run(
            Scenario::Services,
            Implementation::Upstream,
            "cloudsim",
            "no Services controller",
        );
        let v = serde_json::to_value(&r).expect("serializes");
        for key in [
            "scenario",
            "implementation",
            "pods",
            "p50_s",
            "p99_s",
            "max_s",
            "neutron_writes_per_pod",
            "octavia_writes_per_service_create",
            "octavia_writes_per_endpoints_change",
            "rss_mib",
            "cpu_s",
            "resync_s",
        ] {
            assert!(v.get(key).is_some(), "{key} missing from {v}");
        }
        assert_eq!(v["scenario"], "services");
        assert_eq!(v["implementation"], "upstream");
        assert!(v["p99_s"].is_null());
        let cni = serde_json::to_value(Record::new(Scenario::CniAdd, Implementation::KuryrRs, "x"))
            .expect("serializes");
        assert_eq!(cni["scenario"], "cni_add");
        assert_eq!(cni["implementation"], "kuryr-rs");
    }

    #[test]
    fn run_roundtrips_and_finds_records() {
        let mut r = Record::new(Scenario::Burst, Implementation::KuryrRs, "cloudsim");
        r.set_latencies(vec![0.3, 0.1, 0.2]);
        r.pods = Some(3);
        let run = Run::sample(vec![r]);
        let text = serde_json::to_string(&run).expect("serializes");
        let back: Run = serde_json::from_str(&text).expect("parses");
        assert_eq!(back, run);
        let found = back
            .find(Scenario::Burst, Implementation::KuryrRs, "cloudsim")
            .expect("present");
        assert_eq!(
            (found.p50_s, found.p99_s, found.max_s),
            (Some(0.2), Some(0.3), Some(0.3))
        );
        assert!(back
            .find(Scenario::Burst, Implementation::Upstream, "cloudsim")
            .is_none());
        assert!(back.problems().is_empty(), "{:?}", back.problems());
    }

    #[test]
    fn problems_catch_bad_figures_and_silent_nulls() {
        let mut r = Record::new(Scenario::Burst, Implementation::KuryrRs, "cloudsim");
        assert_eq!(r.problems(), vec!["no figure and no note saying why".to_string()]);
        r.p50_s = Some(2.0);
        r.p99_s = Some(1.0);
        r.max_s = Some(3.0);
        r.cpu_s = Some(-1.0);
        let p = Run::sample(vec![r]).problems();
        assert_eq!(p.len(), 2, "{p:?}");
        assert!(p[0].contains("cpu_s is -1"), "{p:?}");
        assert!(p[1].contains("out of order"), "{p:?}");
    }

    #[test]
    fn schema_1_files_still_load_and_check() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/results/20261127T185223Z.json");
        let text = std::fs::read_to_string(path).expect("the final issue-20 run is in the repo");
        let run: Run = serde_json::from_str(&text).expect("a schema-1 file loads");
        assert_eq!((run.schema_version, run.repeats), (1, 1));
        assert_eq!(run.records.len(), 33);
        assert!(run.problems().is_empty(), "{:?}", run.problems());
        let r = run
            .find(Scenario::Burst, Implementation::KuryrRs, "cloudsim/pools")
            .expect("pools burst");
        assert_eq!(r.p99_s, Some(17.521));
        assert!(r.repeats.is_empty() && r.api_requests.is_none() && r.phases_s.is_empty());
        // Written back, it carries none of the new keys it did not have.
        let v = serde_json::to_value(r).expect("serializes");
        for key in ["repeats", "repeat", "api_requests", "phases_s"] {
            assert!(v.get(key).is_none(), "{key} in {v}");
        }
        // And the table of a schema-1 file still reads.
        let t = crate::report::side_by_side(&run);
        assert!(
            t.contains("| burst | cloudsim/pools | p99 time-to-wire (s) | 17.521 |"),
            "{t}"
        );
    }

    #[test]
    fn unknown_scenario_is_refused() {
        let v = serde_json::json!({"scenario": "soak", "implementation": "kuryr-rs", "variant": "x",
            "pods": null, "p50_s": null, "p99_s": null, "max_s": null, "neutron_writes_per_pod": null,
            "octavia_writes_per_service_create": null, "octavia_writes_per_endpoints_change": null,
            "rss_mib": null, "cpu_s": null, "resync_s": null, "note": "x"});
        assert!(serde_json::from_value::<Record>(v).is_err());
    }
}
