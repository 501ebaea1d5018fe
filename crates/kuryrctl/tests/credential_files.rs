//! `kuryrctl` refuses a clouds.yaml or secure.yaml holding credentials that every user can read, wherever
//! the OpenStack SDK would find it (`--clouds-yaml`, `OS_CLIENT_CONFIG_FILE`, `./`, `~/.config/openstack/`),
//! before connecting, with the command that fixes it.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

struct Dir(PathBuf);

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn dir(tag: &str) -> Dir {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_nanos();
    let d = std::env::temp_dir().join(format!("kuryrctl-{tag}-{}-{nanos}", std::process::id()));
    std::fs::create_dir_all(&d).expect("test setup");
    Dir(d)
}

fn write(path: &Path, text: &str, mode: u32) {
    std::fs::create_dir_all(path.parent().expect("parent")).expect("test setup");
    std::fs::write(path, text).expect("test setup");
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("test setup");
}

/// A cloud nobody answers for (the point is what happens before connecting).
const CLOUDS: &str = "clouds:\n  c:\n    auth_type: password\n    auth: {auth_url: 'http://127.0.0.1:9/v3', \
                      username: u, password: hunter2, project_name: p}\n";

/// `kuryrctl --os-cloud c <args> preflight --no-kubernetes` in `cwd` with `HOME=home`: stderr.
fn kuryrctl(cwd: &Path, home: &Path, env: &[(&str, &str)], args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_kuryrctl"))
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", home)
        .envs(env.iter().copied())
        .current_dir(cwd)
        .args(["--os-cloud", "c"])
        .args(args)
        .args(["preflight", "--no-kubernetes"])
        .output()
        .expect("run kuryrctl");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn refused(err: &str, file: &Path) -> bool {
    err.contains(&format!("{} holds credentials", file.display()))
        && err.contains("readable by every user")
        && err.contains(&format!("chmod o-rwx {}", file.display()))
}

#[test]
fn world_readable_cloud_credentials_are_refused_wherever_they_are_found() {
    let d = dir("creds");
    let (cwd, home) = (d.0.join("cwd"), d.0.join("home"));
    std::fs::create_dir_all(&cwd).expect("test setup");
    std::fs::create_dir_all(&home).expect("test setup");

    // --clouds-yaml
    let given = d.0.join("given/clouds.yaml");
    write(&given, CLOUDS, 0o644);
    let err = kuryrctl(&cwd, &home, &[], &["--clouds-yaml", &given.display().to_string()]);
    assert!(refused(&err, &given), "{err}");
    // OS_CLIENT_CONFIG_FILE
    let err = kuryrctl(
        &cwd,
        &home,
        &[("OS_CLIENT_CONFIG_FILE", &given.display().to_string())],
        &[],
    );
    assert!(refused(&err, &given), "{err}");
    // 0600: not refused (it fails later, connecting to nobody).
    std::fs::set_permissions(&given, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    let err = kuryrctl(&cwd, &home, &[], &["--clouds-yaml", &given.display().to_string()]);
    assert!(!err.contains("readable by every user"), "{err}");

    // ~/.config/openstack/clouds.yaml, found by the SDK's search
    let user = home.join(".config/openstack/clouds.yaml");
    write(&user, CLOUDS, 0o604);
    let err = kuryrctl(&cwd, &home, &[], &[]);
    assert!(refused(&err, &user), "{err}");
    std::fs::set_permissions(&user, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    // ... with a secure.yaml next to it holding the password
    let secure = home.join(".config/openstack/secure.yaml");
    write(
        &secure,
        "clouds:\n  c:\n    auth:\n      password: hunter2\n",
        0o644,
    );
    let err = kuryrctl(&cwd, &home, &[], &[]);
    assert!(refused(&err, &secure), "{err}");
    std::fs::remove_file(&secure).expect("rm");

    // ./clouds.yaml (the SDK looks in the working directory first)
    let here = cwd.join("clouds.yaml");
    write(&here, CLOUDS, 0o644);
    let err = kuryrctl(&cwd, &home, &[], &[]);
    assert!(
        err.contains("holds credentials") && err.contains("clouds.yaml"),
        "{err}"
    );
}
