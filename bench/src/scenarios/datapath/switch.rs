//! The lab's `ovs-vswitchd` carries both datapaths: a figure measured while it died (OVS 3.1.0's userspace
//! conntrack aborted under the overlay's streams until the lab moved to OVS 3.5, docs/lab.md) says nothing
//! about either path, so it is dropped and the run stops with the switch's last emergency line.

use std::path::PathBuf;

use lab_tests::Lab;

/// Watches the lab's switch between figures.
pub struct SwitchWatch {
    pidfile: PathBuf,
    log: PathBuf,
}

impl SwitchWatch {
    pub fn new(lab: &Lab) -> Self {
        Self {
            pidfile: lab.state_dir.join("pids/ovs-vswitchd.pid"),
            log: lab.state_dir.join("ovs/vswitchd.log"),
        }
    }

    /// Whether the process the pidfile names is alive.
    pub fn alive(&self) -> bool {
        std::fs::read_to_string(&self.pidfile)
            .ok()
            .and_then(|p| p.trim().parse::<u32>().ok())
            .is_some_and(|pid| std::path::Path::new(&format!("/proc/{pid}")).exists())
    }

    /// The switch's last emergency line (why it aborted), or a placeholder.
    pub fn last_abort(&self) -> String {
        std::fs::read_to_string(&self.log)
            .ok()
            .and_then(|l| {
                l.lines()
                    .rev()
                    .find(|l| l.contains("|EMER|"))
                    .map(|l| l.rsplit('|').next().unwrap_or(l).trim().to_owned())
            })
            .unwrap_or_else(|| "no EMER line in vswitchd.log".into())
    }
}
