//! The machine and commit a run is recorded against.

use std::path::Path;
use std::process::Command;

use crate::record::{Commit, Machine};

fn first_value(text: &str, key: &str) -> Option<String> {
    text.lines()
        .find(|l| l.starts_with(key))
        .and_then(|l| l.split_once(':'))
        .map(|(_, v)| v.trim().to_string())
}

pub fn machine() -> Machine {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let mem_kib: f64 = first_value(&meminfo, "MemTotal")
        .and_then(|v| v.split_whitespace().next().and_then(|n| n.parse().ok()))
        .unwrap_or(0.0);
    Machine {
        hostname: std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|s| s.trim().to_string())
            .unwrap_or_default(),
        cpus: std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
        mem_gib: (mem_kib / 1024.0 / 1024.0 * 10.0).round() / 10.0,
        cpu_model: first_value(&cpuinfo, "model name").unwrap_or_default(),
        kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .map(|s| s.trim().to_string())
            .unwrap_or_default(),
    }
}

pub fn commit(repo: &Path) -> Commit {
    let git = |args: &[&str]| {
        Command::new("git")
            .arg("-C")
            .arg(repo)
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    Commit {
        sha: git(&["rev-parse", "HEAD"]).unwrap_or_else(|| "unknown".into()),
        dirty: git(&["status", "--porcelain", "--untracked-files=no"]).is_some_and(|s| !s.is_empty()),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn machine_is_described() {
        let m = super::machine();
        assert!(m.cpus >= 1 && m.mem_gib > 0.0, "{m:?}");
        assert_eq!(
            super::first_value("a: 1\nmodel name\t: X Y\n", "model name").as_deref(),
            Some("X Y")
        );
    }
}
