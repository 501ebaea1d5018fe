//! The version every kuryr-rs binary prints: `<binary> <version> (<commit>)`, e.g.
//! `kuryr-controller 0.1.0 (939500a)`. One crate so the four binaries cannot disagree, and a tiny one so a
//! new commit (which reruns build.rs) rebuilds only the crates that print it, not kuryr-api and everything
//! below. The version is the workspace's (`version.workspace = true` in every crate).
//!
//! The commit comes from build.rs: `git rev-parse --short=7 HEAD` of this repository, else the build
//! environment's `KURYR_GIT_COMMIT` (a source tarball, the image's builder stage), else `unknown`.

#![forbid(unsafe_code)]

#[cfg(test)]
mod commit;

/// The short commit this build was made from, or `unknown`.
pub const COMMIT: &str = env!("KURYR_BUILD_COMMIT");

/// `<version> (<commit>)`: what clap prints after the binary's name for `--version`.
pub const VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), " (", env!("KURYR_BUILD_COMMIT"), ")");

/// `<binary> <version> (<commit>)`.
pub fn line(binary: &str) -> String {
    format!("{binary} {VERSION}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_names_the_binary_the_version_and_the_commit() {
        let l = line("kuryrctl");
        assert_eq!(l, format!("kuryrctl {} ({COMMIT})", env!("CARGO_PKG_VERSION")));
        assert!(!COMMIT.is_empty());
    }

    /// Built from a git checkout of this workspace, the commit is HEAD's (build.rs reruns when HEAD moves).
    #[test]
    fn a_git_checkout_prints_its_head() {
        let dir = env!("CARGO_MANIFEST_DIR");
        let git = |args: &[&str]| {
            std::process::Command::new("git")
                .arg("-C")
                .arg(dir)
                .args(args)
                .output()
                .ok()
                .filter(|o| o.status.success())
                .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        };
        let workspace = std::path::Path::new(dir).join("../..").canonicalize().ok();
        let top = git(&["rev-parse", "--show-toplevel"]).and_then(|t| std::fs::canonicalize(t).ok());
        if top.is_none() || top != workspace {
            eprintln!("not a git checkout of this workspace: nothing to compare");
            return;
        }
        assert_eq!(Some(COMMIT.to_owned()), git(&["rev-parse", "--short=7", "HEAD"]));
    }
}
