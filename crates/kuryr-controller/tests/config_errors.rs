//! The real `kuryr-controller` binary refuses a bad configuration at start, before connecting anywhere,
//! naming the option and why; a credentials file others can read is refused with how to fix it. `--version`
//! needs no configuration at all.

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::process::Command;

struct Dir(PathBuf);

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn dir() -> Dir {
    let d = std::env::temp_dir().join(format!("kuryr-cfgerr-{}-{}", std::process::id(), fastrand()));
    std::fs::create_dir_all(&d).expect("test setup");
    Dir(d)
}

fn fastrand() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("test setup")
        .as_nanos() as u64
}

/// Runs the controller with `args`; its exit code and stderr.
fn run(args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_kuryr-controller"))
        .args(args)
        // Nothing from the environment of the test run may fill in the options under test.
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .output()
        .expect("test setup");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn config(d: &Dir, name: &str, text: &str, mode: u32) -> String {
    let p = d.0.join(name);
    std::fs::write(&p, text).expect("test setup");
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).expect("test setup");
    p.display().to_string()
}

const BASE: &str = "cluster_id: c1\npod_subnet: s1\n";

#[test]
fn version_needs_no_settings() {
    let out = Command::new(env!("CARGO_BIN_EXE_kuryr-controller"))
        .arg("--version")
        .env_clear()
        .output()
        .expect("test setup");
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("kuryr-controller {}\n", kuryr_version::VERSION)
    );
}

#[test]
fn each_invalid_setting_is_named_with_the_reason() {
    let d = dir();
    let cases = [
        ("pod_subnett: s1\n", "option `pod_subnett`: unknown option"),
        ("vlan_first: 300\nvlan_last: 200\n", "vlan-first / vlan-last"),
        ("vlan_first: lots\n", "--vlan-first"),
        (
            "ports_pool_min: 10\nports_pool_max: 5\n",
            "ports-pool-min / ports-pool-max",
        ),
        (
            "leader_lease_seconds: 5\nleader_renew_grace_seconds: 5\n",
            "leader-renew-grace-seconds",
        ),
        (
            "gc_interval_seconds: 600\ngc_grace_seconds: 60\n",
            "gc-grace-seconds",
        ),
        ("cluster_id: \"a,b\"\n", "cluster-id: invalid tag"),
        ("pod_subnet: {id: x}\n", "option `pod_subnet`"),
    ];
    for (i, (extra, want)) in cases.iter().enumerate() {
        // A key may appear once: a case setting a BASE key replaces it.
        let base: String = BASE
            .lines()
            .filter(|l| !extra.starts_with(l.split(':').next().unwrap_or_default()))
            .map(|l| format!("{l}\n"))
            .collect();
        let path = config(&d, &format!("c{i}.yaml"), &format!("{base}{extra}"), 0o600);
        let (code, err) = run(&["--config", &path]);
        assert_ne!(code, 0, "{extra:?} was accepted");
        assert!(
            err.contains(want),
            "{extra:?}: stderr does not name `{want}`:\n{err}"
        );
    }
}

#[test]
fn a_world_readable_file_with_credentials_is_refused() {
    let d = dir();
    let conf = "[neutron]\nusername = kuryr\npassword = s3cret\n[neutron_defaults]\npod_subnet = s1\n";
    let path = config(&d, "kuryr.conf", conf, 0o644);
    let (code, err) = run(&["--kuryr-conf", &path, "--cluster-id", "c1"]);
    assert_ne!(code, 0);
    assert!(
        err.contains("readable by every user") && err.contains("chmod o-rwx"),
        "{err}"
    );
    let clouds = config(
        &d,
        "clouds.yaml",
        "clouds:\n  kuryr:\n    auth:\n      password: x\n",
        0o644,
    );
    let (code, err) = run(&[
        "--cluster-id",
        "c1",
        "--pod-subnet",
        "s1",
        "--clouds-yaml",
        &clouds,
    ]);
    assert_ne!(code, 0);
    assert!(err.contains("readable by every user"), "{err}");
}

/// Every clouds.yaml / secure.yaml the SDK would read is checked, not only `--clouds-yaml`.
#[test]
fn world_readable_cloud_files_found_by_the_sdk_are_refused() {
    let d = dir();
    let home = d.0.join("home");
    let user = home.join(".config/openstack");
    std::fs::create_dir_all(&user).expect("test setup");
    let clouds = user.join("clouds.yaml");
    std::fs::write(
        &clouds,
        "clouds:\n  kuryr:\n    auth: {auth_url: 'http://127.0.0.1:9/v3', password: x}\n",
    )
    .expect("test setup");
    let run_home = |mode: u32| {
        std::fs::set_permissions(&clouds, std::fs::Permissions::from_mode(mode)).expect("chmod");
        let out = Command::new(env!("CARGO_BIN_EXE_kuryr-controller"))
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", &home)
            .current_dir(&d.0)
            .args(["--cluster-id", "c1", "--pod-subnet", "s1", "--os-cloud", "kuryr"])
            .output()
            .expect("test setup");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let err = run_home(0o644);
    assert!(
        err.contains(&format!("{} holds credentials (password)", clouds.display())),
        "{err}"
    );
    let err = run_home(0o600);
    assert!(!err.contains("readable by every user"), "{err}");
    // secure.yaml next to it
    let secure = user.join("secure.yaml");
    std::fs::write(&secure, "clouds:\n  kuryr:\n    auth:\n      password: x\n").expect("test setup");
    std::fs::set_permissions(&secure, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    let err = run_home(0o600);
    assert!(err.contains("secure.yaml holds credentials"), "{err}");
}
