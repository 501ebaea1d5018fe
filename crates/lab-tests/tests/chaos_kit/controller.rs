//! The real `kuryr-controller` binary as a child process that the chaos suite SIGKILLs and starts again.
//! Every life appends to one log file, each introduced by a line saying how the previous one ended.

use std::ffi::OsString;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::Context as _;

pub struct ControllerProc {
    bin: PathBuf,
    args: Vec<OsString>,
    log: PathBuf,
    child: Option<Child>,
    /// SIGKILLs delivered to a running controller.
    pub kills: u32,
    pub starts: u32,
}

impl ControllerProc {
    pub fn new(bin: &Path, args: Vec<OsString>, log: PathBuf) -> Self {
        Self {
            bin: bin.to_owned(),
            args,
            log,
            child: None,
            kills: 0,
            starts: 0,
        }
    }

    fn note(&self, line: &str) {
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
        {
            let _ = writeln!(f, "=== chaos {}: {line}", chrono::Utc::now().to_rfc3339());
        }
    }

    pub fn start(&mut self) -> anyhow::Result<()> {
        self.note(&format!("start #{}", self.starts + 1));
        let f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)?;
        let child = Command::new(&self.bin)
            .args(&self.args)
            .env(
                "RUST_LOG",
                std::env::var("CHAOS_CONTROLLER_LOG").unwrap_or_else(|_| "kuryr_controller=info".into()),
            )
            .env("NO_COLOR", "1")
            .stdout(Stdio::from(f.try_clone()?))
            .stderr(Stdio::from(f))
            .spawn()
            .with_context(|| format!("starting {}", self.bin.display()))?;
        self.child = Some(child);
        self.starts += 1;
        Ok(())
    }

    /// SIGKILL: no shutdown path runs, whatever was in flight is cut off.
    pub fn sigkill(&mut self) -> anyhow::Result<()> {
        if let Some(mut child) = self.child.take() {
            if child.try_wait()?.is_some() {
                self.note("found exited before the kill");
            } else {
                child.kill()?;
                self.kills += 1;
                self.note(&format!("SIGKILL #{}", self.kills));
            }
            child.wait()?;
        }
        Ok(())
    }

    /// SIGTERM and wait (bounded), the way a rollout stops it.
    pub async fn stop(&mut self) -> anyhow::Result<()> {
        if let Some(mut child) = self.child.take() {
            super::apiserver::signal(&child, "TERM");
            for _ in 0..300 {
                if child.try_wait()?.is_some() {
                    self.note("stopped (SIGTERM)");
                    return Ok(());
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            child.kill()?;
            child.wait()?;
            self.note("did not stop within 30 s of SIGTERM: killed");
        }
        Ok(())
    }

    /// Whether the controller died on its own (a crash is a finding, not chaos).
    pub fn exited(&mut self) -> anyhow::Result<Option<std::process::ExitStatus>> {
        match self.child.as_mut() {
            Some(c) => Ok(c.try_wait()?),
            None => Ok(None),
        }
    }

    /// The last `n` lines of the log (for failure messages).
    pub fn log_tail(&self, n: usize) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(n)..].join("\n")
    }

    pub fn log_path(&self) -> &Path {
        &self.log
    }
}

impl Drop for ControllerProc {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
