//! Running commands inside the lab's VM network namespaces.

use std::process::{Child, Command, Output, Stdio};

/// Runs `cmd args...` inside network namespace `ns` and waits for it.
pub fn exec(ns: &str, cmd: &str, args: &[&str]) -> std::io::Result<Output> {
    Command::new("ip")
        .args(["netns", "exec", ns, cmd])
        .args(args)
        .output()
}

/// A background process in a namespace (e.g. a test server), killed when dropped.
pub struct Background(Child);

impl Background {
    pub fn spawn(ns: &str, cmd: &str, args: &[&str], cwd: &std::path::Path) -> std::io::Result<Self> {
        let child = Command::new("ip")
            .args(["netns", "exec", ns, cmd])
            .args(args)
            .current_dir(cwd)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?;
        Ok(Background(child))
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
