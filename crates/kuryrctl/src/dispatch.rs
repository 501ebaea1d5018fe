//! Runs a parsed command line: each subcommand's module takes the [`Cli`] it was given, so the dispatch
//! lives here rather than in [`crate::cli`], which only describes the arguments.

use crate::cli::{Cli, Command};

impl Cli {
    /// Runs the command, printing to stdout; the process exit code.
    pub async fn run(&self) -> anyhow::Result<i32> {
        let mut out = std::io::stdout().lock();
        self.run_to(&mut out).await
    }

    pub async fn run_to(&self, out: &mut dyn std::io::Write) -> anyhow::Result<i32> {
        let fmt = self.format();
        match &self.command {
            Command::Preflight(a) => crate::preflight::run(self, a, fmt, out).await,
            Command::Status(a) => crate::status::run(self, a, fmt, out).await,
            Command::Pools => crate::pools::run(self, fmt, out).await,
            Command::Gc(a) => crate::gc::run(self, a, fmt, out).await,
            Command::Migrate(a) => crate::migrate::run(self, a, fmt, out).await,
        }
    }
}
