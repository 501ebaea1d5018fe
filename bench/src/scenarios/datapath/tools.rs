//! iperf3 (TCP stream) and sockperf (TCP ping-pong) in the pods' network namespaces (here or in a VM node),
//! and their output parsed.

use std::process::Stdio;
use std::time::Duration;

use anyhow::{bail, Context as _};
use serde_json::Value;
use tokio::process::{Child, Command};

use super::net::{lab_script, Pod};

pub const IPERF_PORT: u16 = 5201;
pub const SOCKPERF_PORT: u16 = 11111;

/// One TCP stream measurement (iperf3 `-J`): the receiver's rate and the sender's retransmits.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Stream {
    pub mbps: f64,
    pub retransmits: Option<u64>,
}

/// One ping-pong measurement (sockperf, full round trip), microseconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PingPong {
    pub p50_us: f64,
    pub p99_us: f64,
    pub max_us: f64,
    pub avg_us: f64,
    pub observations: u64,
}

/// The figures of an `iperf3 -c ... -J` report.
pub fn parse_iperf3(json: &str) -> anyhow::Result<Stream> {
    let v: Value = serde_json::from_str(json).context("iperf3 output is not JSON")?;
    if let Some(e) = v.get("error").and_then(Value::as_str) {
        bail!("iperf3: {e}");
    }
    let end = &v["end"];
    let bps = end["sum_received"]["bits_per_second"]
        .as_f64()
        .context("iperf3 report without end.sum_received.bits_per_second")?;
    Ok(Stream {
        mbps: bps / 1e6,
        retransmits: end["sum_sent"]["retransmits"].as_u64(),
    })
}

/// Drops terminal colour sequences (`ESC [ ... m`), which sockperf prints even into a pipe.
fn strip_ansi(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' && chars.peek() == Some(&'[') {
            for d in chars.by_ref() {
                if d.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// The figures of a `sockperf ping-pong --full-rtt` report (its percentile lines and `avg-rtt=`).
pub fn parse_sockperf(text: &str) -> anyhow::Result<PingPong> {
    let text = strip_ansi(text);
    let after = |line: &str, key: &str| -> Option<f64> {
        let rest = line.split(key).nth(1)?;
        let rest = rest.trim_start().trim_start_matches('=').trim_start();
        rest.split(|c: char| c.is_whitespace() || c == '(')
            .next()?
            .parse()
            .ok()
    };
    let (mut p50, mut p99, mut max, mut avg, mut n) = (None, None, None, None, None);
    for line in text.lines() {
        if line.contains("percentile 50.000") {
            p50 = after(line, "=");
        } else if line.contains("percentile 99.000") {
            p99 = after(line, "=");
        } else if line.contains("<MAX> observation") {
            max = after(line, "=");
        } else if line.contains("avg-rtt=") {
            avg = after(line, "avg-rtt");
        } else if line.contains("observations") && line.contains("Total") {
            n = line
                .split_whitespace()
                .skip_while(|w| *w != "Total")
                .nth(1)
                .and_then(|w| w.parse().ok());
        }
    }
    match (p50, p99, max, avg) {
        (Some(p50_us), Some(p99_us), Some(max_us), Some(avg_us)) => Ok(PingPong {
            p50_us,
            p99_us,
            max_us,
            avg_us,
            observations: n.unwrap_or(0),
        }),
        _ => bail!(
            "sockperf report without percentiles (full-rtt): {}",
            text.lines().rev().take(5).collect::<Vec<_>>().join(" | ")
        ),
    }
}

/// A server in a pod's namespace. Here: the tool itself, killed when dropped (`ip netns exec` execs it). In a
/// VM: started in the background by the guest's agent, stopped by killing what runs in the namespace.
pub enum Server {
    Here(Child),
    InVm { vm: String, ns: String },
}

impl Server {
    pub fn spawn(pod: &Pod, cmd: &str, args: &[&str]) -> anyhow::Result<Server> {
        let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
        match &pod.vm {
            None => {
                let child = pod
                    .command(cmd, &args)
                    .stdin(Stdio::null())
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .kill_on_drop(true)
                    .spawn()
                    .with_context(|| format!("starting {cmd} in {}", pod.ns))?;
                Ok(Server::Here(child))
            }
            Some(vm) => {
                let line = format!(
                    "nohup ip netns exec {} {cmd} {} >/dev/null 2>&1 &",
                    pod.ns,
                    args.join(" ")
                );
                let out = std::process::Command::new(lab_script())
                    .args(["vms", "exec", vm, &line])
                    .output()
                    .with_context(|| format!("starting {cmd} in {} on {vm}", pod.ns))?;
                if !out.status.success() {
                    bail!(
                        "starting {cmd} in {} on {vm}: {}",
                        pod.ns,
                        String::from_utf8_lossy(&out.stdout)
                    );
                }
                Ok(Server::InVm {
                    vm: vm.clone(),
                    ns: pod.ns.clone(),
                })
            }
        }
    }

    pub async fn stop(self) {
        match self {
            Server::Here(mut child) => {
                let _ = child.kill().await;
            }
            Server::InVm { vm, ns } => {
                let _ = Command::new(lab_script())
                    .args(["vms", "exec", &vm, &format!("ip netns pids {ns} | xargs -r kill")])
                    .output()
                    .await;
            }
        }
    }
}

/// Runs a client in a pod's namespace, at most `limit`; its stdout (stderr too, for sockperf).
async fn client(pod: &Pod, cmd: &str, args: &[String], limit: Duration) -> anyhow::Result<String> {
    let mut c = pod.command(cmd, args);
    c.stdin(Stdio::null()).kill_on_drop(true);
    let ns = &pod.ns;
    let out = tokio::time::timeout(limit, c.output())
        .await
        .with_context(|| format!("{cmd} in {ns} did not finish within {limit:?}"))??;
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    if !out.status.success() && cmd != "iperf3" {
        bail!("{cmd} {args:?} in {ns}: {}", out.status);
    }
    Ok(text)
}

/// `iperf3` TCP stream from `ns` to `server_ip`: `size`-byte writes for `secs` (plus one omitted second).
pub async fn stream(from: &Pod, server_ip: &str, size: usize, secs: u64) -> anyhow::Result<Stream> {
    let args: Vec<String> = [
        "-c",
        server_ip,
        "-p",
        &IPERF_PORT.to_string(),
        "-l",
        &size.to_string(),
        "-t",
        &secs.to_string(),
        "-O",
        "1",
        "-J",
        "--connect-timeout",
        "3000",
    ]
    .map(String::from)
    .to_vec();
    let out = client(from, "iperf3", &args, Duration::from_secs(secs + 30)).await?;
    // With -J the report (or its "error") is the JSON document on stdout.
    let json = out.find('{').map(|i| &out[i..]).unwrap_or(&out);
    let end = json.rfind('}').map(|i| &json[..=i]).unwrap_or(json);
    parse_iperf3(end)
}

/// `sockperf ping-pong` over TCP from `ns` to `server_ip`: `size`-byte messages for `secs`.
pub async fn ping_pong(from: &Pod, server_ip: &str, size: usize, secs: u64) -> anyhow::Result<PingPong> {
    let args: Vec<String> = [
        "ping-pong",
        "--tcp",
        "-i",
        server_ip,
        "-p",
        &SOCKPERF_PORT.to_string(),
        "-m",
        &size.to_string(),
        "-t",
        &secs.to_string(),
        "--full-rtt",
    ]
    .map(String::from)
    .to_vec();
    let out = client(from, "sockperf", &args, Duration::from_secs(secs + 30)).await?;
    parse_sockperf(&out)
}

/// The servers of one path: iperf3 and sockperf listening on `pod`'s address in its namespace.
pub fn servers(pod: &Pod) -> anyhow::Result<Vec<Server>> {
    let ip = pod.ip.as_str();
    Ok(vec![
        Server::spawn(pod, "iperf3", &["-s", "-B", ip, "-p", &IPERF_PORT.to_string()])?,
        Server::spawn(
            pod,
            "sockperf",
            &["server", "--tcp", "-i", ip, "-p", &SOCKPERF_PORT.to_string()],
        )?,
    ])
}

pub use crate::stats::median;

#[cfg(test)]
mod tests {
    use super::*;

    const SOCKPERF: &str = "sockperf: \u{1b}[2;35m== version #3.7-no.git == \u{1b}[0m\n\
sockperf: [Total Run] RunTime=2.000 sec; Warm up time=400 msec; SentMessages=51381; ReceivedMessages=51380\n\
sockperf: ========= Printing statistics for Server No: 0\n\
sockperf: [Valid Duration] RunTime=1.552 sec; SentMessages=39782; ReceivedMessages=39782\n\
sockperf: \u{1b}[2;35m====> avg-rtt=38.978 (std-dev=304.142)\u{1b}[0m\n\
sockperf: Summary: Round trip is 38.978 usec\n\
sockperf: \u{1b}[2;35mTotal 39782 observations\u{1b}[0m; each percentile contains 397.82 observations\n\
sockperf: ---> <MAX> observation = 9217.949\n\
sockperf: ---> percentile 99.999 = 9217.949\n\
sockperf: ---> percentile 99.000 =   52.768\n\
sockperf: ---> percentile 90.000 =   14.591\n\
sockperf: ---> percentile 50.000 =   13.409\n\
sockperf: ---> <MIN> observation =   12.188\n";

    #[test]
    fn sockperf_report_gives_round_trip_percentiles() {
        let p = parse_sockperf(SOCKPERF).expect("parses");
        assert_eq!(
            p,
            PingPong {
                p50_us: 13.409,
                p99_us: 52.768,
                max_us: 9217.949,
                avg_us: 38.978,
                observations: 39782,
            }
        );
        assert!(parse_sockperf("sockperf: ERROR: connect failed").is_err());
    }

    #[test]
    fn iperf3_json_gives_receiver_rate_or_its_error() {
        let ok = r#"{"start": {}, "end": {"sum_sent": {"bits_per_second": 2.1e9, "retransmits": 3},
            "sum_received": {"bits_per_second": 2.0e9}}}"#;
        assert_eq!(
            parse_iperf3(ok).expect("parses"),
            Stream {
                mbps: 2000.0,
                retransmits: Some(3)
            }
        );
        let err = r#"{"start": {}, "intervals": [], "end": {}, "error": "unable to connect to server"}"#;
        let e = parse_iperf3(err).expect_err("an error report");
        assert!(e.to_string().contains("unable to connect"), "{e}");
    }
}
