//! The result schema: one JSON file per run under `bench/results/`, holding the machine, the commit and
//! one record per (scenario, implementation, variant). Figures that do not apply are `null`, with `note`
//! saying why.

use serde::{Deserialize, Serialize};

pub const SCHEMA_VERSION: u32 = 1;

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
    pub records: Vec<Record>,
}

impl Run {
    /// Problems of every record, prefixed by the record's key.
    pub fn problems(&self) -> Vec<String> {
        let mut out = Vec::new();
        if self.schema_version != SCHEMA_VERSION {
            out.push(format!(
                "schema_version {} (expected {SCHEMA_VERSION})",
                self.schema_version
            ));
        }
        for r in &self.records {
            for p in r.problems() {
                out.push(format!(
                    "{}/{:?}/{}: {p}",
                    r.scenario.name(),
                    r.implementation,
                    r.variant
                ));
            }
        }
        out
    }

    /// The record of (scenario, implementation, variant).
    pub fn find(&self, scenario: Scenario, implementation: Implementation, variant: &str) -> Option<&Record> {
        self.records
            .iter()
            .find(|r| r.scenario == scenario && r.implementation == implementation && r.variant == variant)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run_with(records: Vec<Record>) -> Run {
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
            records,
        }
    }

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
        let run = run_with(vec![r]);
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
        let p = run_with(vec![r]).problems();
        assert_eq!(p.len(), 2, "{p:?}");
        assert!(p[0].contains("cpu_s is -1"), "{p:?}");
        assert!(p[1].contains("out of order"), "{p:?}");
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
