//! No secret is ever printed: a cloudsim whose password, application credential secret and a Keystone token
//! are canaries, a kubeconfig whose bearer token is one; the real `kuryr-controller` and `kuryrctl` binaries
//! run on them at `RUST_LOG=trace` (password, application credential and token logins, and a login with a
//! wrong password); their stdout and stderr, the controller's `/metrics`, and the client's errors and Debug
//! output in-process are all grepped for every canary. The API server is unreachable here, so its errors
//! are output too; Events are covered by the lab test `crates/lab-tests/tests/security_secrets.rs`.

mod canary;

use std::time::Duration;

use canary::{
    clouds_yaml, command, finish, free_port, http_get, kubeconfig, run, temp_dir, Canaries, Outputs,
};
use kuryr_openstack::{ClientConfig, Cloud};
use secrecy::ExposeSecret;

const RUN_FOR: Duration = Duration::from_secs(6);
/// Everything debug prints and more (2 MB of output in all).
const LEVEL: &str = "trace";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_secret_reaches_logs_metrics_or_errors() {
    let mut c = Canaries::new();
    let sim = canary::sim(&c).await;
    let dir = temp_dir("secrets");
    let first = clouds_yaml(&dir.0, &sim.url(), &c);
    let cfg = |file: &std::path::Path, cloud: &str| ClientConfig::clouds_yaml(Some(file.to_owned()), cloud);
    let cloud = Cloud::connect(cfg(&first, "pw")).await.unwrap();
    c.os_token = cloud
        .credentials()
        .token
        .as_ref()
        .map(|t| t.expose_secret().to_owned());
    assert!(c.os_token.is_some(), "a Keystone token to use as a canary");
    let clouds = clouds_yaml(&dir.0, &sim.url(), &c);
    let clouds_arg = clouds.display().to_string();
    // An API server that is not there: the controller's watches fail (and say so) the whole run.
    let kube = kubeconfig(&dir.0, &format!("https://127.0.0.1:{}", free_port()), &c, false);
    let kube_arg = kube.display().to_string();
    let mut out = Outputs::default();

    // In-process: what a caller could print of the client, its credentials and its errors.
    out.add("Debug of ClientConfig", format!("{:?}", cfg(&clouds, "pw")));
    out.add(
        "Debug of Cloud and Credentials",
        format!("{cloud:?} {:?}", cloud.credentials()),
    );
    for name in ["ac", "tok"] {
        let other = Cloud::connect(cfg(&clouds, name)).await.unwrap();
        out.add(
            format!("Debug of Cloud {name}"),
            format!("{other:?} {:?}", other.credentials()),
        );
    }
    let e = Cloud::connect(cfg(&clouds, "bad")).await.unwrap_err();
    out.add("error of a failed login", format!("{e} | {e:?} | {e:#}"));
    assert!(e.to_string().contains("authentication"), "{e}");

    let logins_before = sim.calls_matching("keystone.tokens.issue").len();
    let controller = std::path::PathBuf::from(env!("CARGO_BIN_EXE_kuryr-controller"));
    for name in ["pw", "ac", "tok"] {
        let port = free_port();
        let mut cmd = command(&controller, LEVEL);
        cmd.args([
            "--kubeconfig",
            &kube_arg,
            "--clouds-yaml",
            &clouds_arg,
            "--os-cloud",
            name,
            "--cluster-id",
            "canary",
            "--pod-subnet",
            "pod-subnet",
            "--service-subnet",
            "service-subnet",
            "--gc-interval-seconds",
            "0",
            "--metrics-addr",
            &format!("127.0.0.1:{port}"),
        ]);
        let child = canary::spawn(cmd);
        let metrics = http_get(port, "/metrics");
        assert!(metrics.contains("kuryr_openstack_calls_total"), "{metrics}");
        std::thread::sleep(RUN_FOR);
        let metrics = metrics + &http_get(port, "/metrics");
        let (text, _) = finish(child, Duration::ZERO);
        assert!(text.contains("DEBUG"), "not a debug-level run:\n{text}");
        out.add(format!("kuryr-controller --os-cloud {name}: stdout+stderr"), text);
        out.add(format!("kuryr-controller --os-cloud {name}: /metrics"), metrics);
    }
    let mut cmd = command(&controller, LEVEL);
    cmd.args([
        "--kubeconfig",
        &kube_arg,
        "--clouds-yaml",
        &clouds_arg,
        "--os-cloud",
        "bad",
        "--cluster-id",
        "canary",
        "--pod-subnet",
        "pod-subnet",
    ]);
    let (text, code) = run(cmd, Duration::from_secs(60));
    assert!(
        code.is_some_and(|c| c != 0),
        "a wrong password must stop the controller:\n{text}"
    );
    assert!(text.contains("connecting to OpenStack"), "{text}");
    out.add("kuryr-controller with a wrong password: stdout+stderr", text);

    let kuryrctl = canary::workspace_binary("kuryrctl", "kuryrctl");
    let subcommands: [&[&str]; 4] = [
        &["preflight", "--no-kubernetes", "--nodes", "1"],
        &["pools"],
        &["status"],
        &["gc"],
    ];
    for name in ["pw", "ac", "tok", "bad"] {
        for sub in subcommands {
            let mut cmd = command(&kuryrctl, LEVEL);
            cmd.args([
                "--kubeconfig",
                &kube_arg,
                "--clouds-yaml",
                &clouds_arg,
                "--os-cloud",
                name,
            ]);
            cmd.args(sub);
            let (text, _) = run(cmd, Duration::from_secs(60));
            out.add(
                format!("kuryrctl --os-cloud {name} {}: stdout+stderr", sub.join(" ")),
                text,
            );
        }
    }
    let logins = sim.calls_matching("keystone.tokens.issue").len() - logins_before;
    // 3 controller runs + 1 refused, and at least preflight and pools of kuryrctl on each of the 4 clouds.
    assert!(
        logins >= 12,
        "only {logins} logins: the binaries did not really run"
    );
    eprintln!(
        "grepped {} outputs, {} bytes, for {} canaries",
        out.0.len(),
        out.total_bytes(),
        c.all().len()
    );
    out.assert_no_leak(&c);
}
