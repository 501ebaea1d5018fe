//! Footprint of a process from /proc: its resident set now (`VmRSS`) and at its highest since it started
//! (`VmHWM`, the high-water mark), CPU-seconds (user + system).

use std::path::Path;

/// Kernel clock ticks per second for /proc/<pid>/stat (USER_HZ is 100 on every Linux ABI we run on).
const USER_HZ: f64 = 100.0;

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Footprint {
    /// `VmRSS`: resident now.
    pub vm_rss_mib: f64,
    /// `VmHWM`: the most it was resident at any time since it started.
    pub vm_hwm_mib: f64,
    /// The anonymous part of the RSS (heap, stacks): the RSS less the binary's file pages, which are
    /// shared and reclaimable (the controller's text is ~30 MB).
    pub anon_mib: Option<f64>,
    pub cpu_s: f64,
}

/// `VmRSS` and `VmHWM` in MiB from a `/proc/<pid>/status` text.
pub fn parse_status(text: &str) -> Option<(f64, f64)> {
    Some((kib(text, "VmRSS:")? / 1024.0, kib(text, "VmHWM:")? / 1024.0))
}

/// `RssAnon` in MiB from a `/proc/<pid>/status` text.
pub fn parse_anon(text: &str) -> Option<f64> {
    Some(kib(text, "RssAnon:")? / 1024.0)
}

fn kib(text: &str, key: &str) -> Option<f64> {
    text.lines()
        .find(|l| l.starts_with(key))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse::<f64>().ok())
}

/// utime + stime in seconds from a `/proc/<pid>/stat` line (fields 14 and 15; the command name in
/// parentheses may hold spaces, so fields are counted after its closing parenthesis).
pub fn parse_stat(text: &str) -> Option<f64> {
    let rest = &text[text.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // After ")" the first field is #3 (state); utime is #14, stime #15.
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    Some((utime + stime) / USER_HZ)
}

pub fn read(pid: u32) -> Option<Footprint> {
    let dir = Path::new("/proc").join(pid.to_string());
    let status = std::fs::read_to_string(dir.join("status")).ok()?;
    let (vm_rss_mib, vm_hwm_mib) = parse_status(&status)?;
    let cpu_s = parse_stat(&std::fs::read_to_string(dir.join("stat")).ok()?)?;
    Some(Footprint {
        vm_rss_mib,
        vm_hwm_mib,
        anon_mib: parse_anon(&status),
        cpu_s,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_gives_rss_and_peak() {
        let t = "Name:\tkuryr-controller\nVmHWM:\t  40960 kB\nVmRSS:\t  20480 kB\n";
        assert_eq!(parse_status(t), Some((20.0, 40.0)));
        assert_eq!(parse_status("Name: x\n"), None);
        assert_eq!(parse_anon("VmRSS:\t 3072 kB\nRssAnon:\t  1024 kB\n"), Some(1.0));
        assert_eq!(parse_anon(t), None);
    }

    #[test]
    fn stat_counts_fields_after_the_command_name() {
        let t = "4242 (kuryr (k8s) ctl) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 8 0 1 0 0";
        assert_eq!(parse_stat(t), Some(3.0));
        assert_eq!(parse_stat("garbage"), None);
    }

    #[test]
    fn this_process_is_readable() {
        let f = read(std::process::id()).expect("own /proc entry");
        assert!(f.vm_rss_mib > 0.0 && f.vm_hwm_mib >= f.vm_rss_mib, "{f:?}");
    }
}
