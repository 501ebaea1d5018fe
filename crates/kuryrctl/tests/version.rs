//! `kuryrctl --version` prints `kuryrctl <version> (<commit>)` without connecting anywhere.

use std::process::Command;

#[test]
fn version_is_the_build_line() {
    let out = Command::new(env!("CARGO_BIN_EXE_kuryrctl"))
        .arg("--version")
        .env_clear()
        .output()
        .expect("test setup");
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("kuryrctl {}\n", kuryr_version::VERSION)
    );
}
