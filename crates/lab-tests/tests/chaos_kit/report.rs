//! How long and how hard a chaos run is (from the environment), and the JSON it leaves behind.

use std::path::PathBuf;
use std::time::Duration;

use serde::Serialize;

use super::churn::ChurnStats;
use super::cni::CniReport;
use super::invariants::Counts;

/// The run's shape. Short form (CI) by default; `CHAOS_MINUTES` makes a long one, `CHAOS_SEED` repeats one,
/// `CHAOS_KILLS` raises the minimum number of controller kills.
#[derive(Debug, Clone, Serialize)]
pub struct Plan {
    pub seed: u64,
    pub form: &'static str,
    pub churn_seconds: u64,
    pub min_kills: u32,
    /// Seconds between kills: uniform in this range.
    pub kill_gap_s: (f64, f64),
    pub api_restarts: u32,
    /// Cloud fault bursts (each of the five kinds at least once) and quota exhaustions.
    pub fault_bursts: u32,
    pub quota_exhaustions: u32,
    /// Warm port pools (default) or, with `CHAOS_PORTS_POOL=false`, the per-pod path.
    pub pools: bool,
}

fn env<T: std::str::FromStr>(key: &str) -> Option<T> {
    std::env::var(key).ok().and_then(|v| v.trim().parse().ok())
}

impl Plan {
    pub fn from_env() -> Plan {
        let seed = env("CHAOS_SEED").unwrap_or_else(|| fastrand::u64(..));
        let plan = match env::<f64>("CHAOS_MINUTES") {
            Some(m) if m > 1.5 => {
                let secs = (m * 60.0) as u64;
                Plan {
                    seed,
                    form: "long",
                    churn_seconds: secs,
                    min_kills: (secs / 4).max(20) as u32,
                    kill_gap_s: (0.5, 6.0),
                    api_restarts: (secs / 150).max(1) as u32,
                    fault_bursts: (secs / 15).max(5) as u32,
                    quota_exhaustions: (secs / 90).max(1) as u32,
                    pools: true,
                }
            }
            _ => Plan {
                seed,
                form: "short",
                churn_seconds: 75,
                min_kills: 20,
                kill_gap_s: (0.5, 5.0),
                api_restarts: 1,
                fault_bursts: 5,
                quota_exhaustions: 1,
                pools: true,
            },
        };
        Plan {
            min_kills: env("CHAOS_KILLS").unwrap_or(plan.min_kills),
            pools: env("CHAOS_PORTS_POOL").unwrap_or(true),
            ..plan
        }
    }

    pub fn churn(&self) -> Duration {
        Duration::from_secs(self.churn_seconds)
    }
}

/// `bench/results/chaos-latest.json`'s content.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub test: &'static str,
    pub at: String,
    pub seed: u64,
    pub form: &'static str,
    pub passed: bool,
    pub kills: u32,
    pub controller_starts: u32,
    pub controller_crashes: u32,
    pub api_restarts: u32,
    pub faults_injected: u64,
    pub quota_exhaustions: u32,
    pub pods_checked: usize,
    pub services_checked: usize,
    pub leaked_objects: usize,
    pub duplicate_vlans: usize,
    pub unwired_pods: usize,
    pub member_mismatches: usize,
    pub stuck_finalizers: usize,
    /// The same invariants once every pod and Service was deleted (leaks and finalizers).
    pub after_teardown: Counts,
    pub cni: CniReport,
    pub churn: ChurnStats,
    /// Abandoned stuck load balancers an operator had to reset in Octavia before they could be deleted.
    pub operator_lb_resets: u32,
    pub wall_seconds: f64,
    pub settle_seconds: f64,
    pub problems: Vec<String>,
    pub plan: Plan,
}

/// Where the report goes: `bench/results/chaos-latest.json` with `CHAOS_RECORD=1`, else `$CHAOS_RESULTS`,
/// else `<target dir>/chaos/chaos-latest.json` (CI leaves the work tree clean).
pub fn results_path() -> PathBuf {
    if std::env::var("CHAOS_RECORD").is_ok_and(|v| v == "1") {
        return PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../bench/results/chaos-latest.json");
    }
    if let Some(p) = std::env::var_os("CHAOS_RESULTS") {
        return PathBuf::from(p);
    }
    target_dir().join("chaos/chaos-latest.json")
}

/// The cargo target directory (this test binary is `<target>/<profile>/deps/<name>`).
pub fn target_dir() -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|e| Some(e.parent()?.parent()?.parent()?.to_owned()))
        .unwrap_or_else(std::env::temp_dir)
}

pub fn write(report: &Report) -> anyhow::Result<PathBuf> {
    let path = results_path();
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(&path, serde_json::to_string_pretty(report)? + "\n")?;
    Ok(path)
}
