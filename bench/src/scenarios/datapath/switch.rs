//! The lab's `ovs-vswitchd` (Open vSwitch 3.1.0, userspace datapath) can abort under the overlay's
//! tunnelled streams (`conntrack.c: assertion conn->conn_type == CT_CONN_TYPE_DEFAULT failed in
//! conn_update_state()`, docs/BENCHMARKS.md). A figure measured while it died says nothing about either
//! path: it is dropped, the switch is started again (`lab/lab up` restarts it alone) and the figure is
//! measured again; each abort is kept in the figure's errors.

use std::path::PathBuf;

use anyhow::{ensure, Context as _};
use lab_tests::Lab;

use super::net::lab_script;

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

    /// Starts the switch again through the lab, which restarts it alone when the rest runs.
    pub async fn restart(&self) -> anyhow::Result<()> {
        let st = tokio::process::Command::new(lab_script())
            .arg("up")
            .stdout(std::process::Stdio::null())
            .status()
            .await
            .context("lab/lab up")?;
        ensure!(st.success(), "lab/lab up failed: {st}");
        ensure!(self.alive(), "ovs-vswitchd is still down after lab/lab up");
        Ok(())
    }
}
