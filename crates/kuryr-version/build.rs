//! Sets KURYR_BUILD_COMMIT for `kuryr_version::COMMIT`: `git rev-parse --short=7 HEAD` of this repository,
//! else the `KURYR_GIT_COMMIT` variable (a source tarball has no .git; neither has the Containerfile's build
//! context, which passes its REVISION build argument), else `unknown`.

#[path = "src/commit.rs"]
mod commit;

use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=src/commit.rs");
    println!("cargo:rerun-if-env-changed=KURYR_GIT_COMMIT");
    let crate_dir = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    let commit = from_git(&crate_dir)
        .or_else(|| {
            std::env::var("KURYR_GIT_COMMIT")
                .ok()
                .and_then(|c| commit::normalize(&c))
        })
        .unwrap_or_else(|| "unknown".to_owned());
    println!("cargo:rustc-env=KURYR_BUILD_COMMIT={commit}");
}

/// One line of `git -C dir ARGS` output; `None` when git is missing or fails.
fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git").arg("-C").arg(dir).args(args).output().ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8(out.stdout).ok()?.trim().to_owned();
    (!text.is_empty()).then_some(text)
}

fn from_git(crate_dir: &Path) -> Option<String> {
    // Only this workspace's own repository: sources unpacked inside another repository (a vendoring
    // monorepo, a packaging tree) must not print that repository's commit.
    let workspace = crate_dir.join("../..").canonicalize().ok()?;
    let top = PathBuf::from(git(crate_dir, &["rev-parse", "--show-toplevel"])?)
        .canonicalize()
        .ok()?;
    if top != workspace {
        return None;
    }
    // git's own answer (it lengthens an ambiguous prefix), as long as it is fit to print.
    let commit =
        git(crate_dir, &["rev-parse", "--short=7", "HEAD"]).filter(|c| commit::normalize(c).is_some())?;
    watch_head(crate_dir);
    Some(commit)
}

/// Rerun when HEAD moves: HEAD itself (detached, or switching branches), the branch's loose ref (or, when
/// it is packed, the directory a new loose ref would appear in) and packed-refs. Paths come from git, so
/// linked work trees (HEAD per work tree, refs shared) are covered.
fn watch_head(dir: &Path) {
    let git_path = |p: &str| git(dir, &["rev-parse", "--git-path", p]).map(|p| dir.join(p));
    let mut watched = Vec::new();
    watched.extend(git_path("HEAD"));
    watched.extend(git_path("packed-refs").filter(|p| p.exists()));
    if let Some(branch) = git(dir, &["symbolic-ref", "-q", "HEAD"]) {
        // Cargo reruns every build when a watched path does not exist: watch the nearest one that does.
        let mut p = git_path(&branch);
        while let Some(path) = p.take() {
            if path.exists() {
                watched.push(path);
            } else {
                p = path.parent().map(Path::to_path_buf);
            }
        }
    }
    for path in watched {
        println!("cargo:rerun-if-changed={}", path.display());
    }
}
