//! The controllers under test, each its own process so its RSS and CPU are its own: kuryr-rs's
//! `kuryr-controller` binary and upstream's `kuryr-k8s-controller` from its pinned venv.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use anyhow::Context as _;
use tokio::process::{Child, Command};

use crate::cloud::BenchCloud;
use crate::proc::{self, Footprint};

pub struct Controller {
    pub child: Child,
    pub pid: u32,
    pub log: PathBuf,
    /// `/metrics` and `/readyz` of kuryr-rs (None for upstream).
    pub metrics_url: Option<String>,
    /// The proxy upstream talks to (kept alive with the controller).
    pub _proxy: Option<tokio::task::JoinHandle<()>>,
}

impl Controller {
    pub fn footprint(&self) -> Option<Footprint> {
        proc::read(self.pid)
    }

    /// Fails with the log's tail if the process has exited.
    pub fn ensure_running(&mut self) -> anyhow::Result<()> {
        if let Ok(Some(status)) = self.child.try_wait() {
            anyhow::bail!(
                "controller exited ({status}); log {}:\n{}",
                self.log.display(),
                tail(&self.log, 30)
            );
        }
        Ok(())
    }

    pub async fn stop(mut self) -> Option<Footprint> {
        let fp = self.footprint();
        // TERM, then KILL after 10 s.
        if let Some(pid) = self.child.id() {
            let _ = std::process::Command::new("kill")
                .arg("-TERM")
                .arg(pid.to_string())
                .status();
        }
        if tokio::time::timeout(std::time::Duration::from_secs(10), self.child.wait())
            .await
            .is_err()
        {
            let _ = self.child.kill().await;
        }
        if let Some(p) = self._proxy.take() {
            p.abort();
        }
        fp
    }
}

/// The sum of a counter's samples whose labels contain `label` in an OpenMetrics text.
pub fn counter_sum(text: &str, name: &str, label: &str) -> f64 {
    text.lines()
        .filter(|l| l.starts_with(name) && l.contains(label))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

pub fn tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

pub fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

fn log_file(dir: &Path, name: &str) -> anyhow::Result<(PathBuf, std::fs::File, std::fs::File)> {
    let path = dir.join(format!("{name}.log"));
    let f = std::fs::File::create(&path)?;
    let g = f.try_clone()?;
    Ok((path, f, g))
}

pub struct KuryrRsOpts<'a> {
    pub bin: &'a Path,
    pub kubeconfig: &'a Path,
    pub cluster_id: &'a str,
    pub namespace: &'a str,
    pub extra_args: &'a [String],
}

pub fn start_kuryr_rs(
    o: &KuryrRsOpts<'_>,
    cloud: &BenchCloud,
    dir: &Path,
    name: &str,
) -> anyhow::Result<Controller> {
    let (log, out, err) = log_file(dir, name)?;
    let metrics = format!("127.0.0.1:{}", free_port()?);
    let child = Command::new(o.bin)
        .arg("--kubeconfig")
        .arg(o.kubeconfig)
        .arg("--clouds-yaml")
        .arg(&cloud.clouds_yaml)
        .args(["--os-cloud", &cloud.cloud_name])
        .args(["--cluster-id", o.cluster_id])
        .args(["--pod-subnet", &cloud.subnet_id])
        .args(["--pod-security-groups", &cloud.security_group_id])
        .args(["--namespace", o.namespace])
        .args(["--metrics-addr", &metrics])
        .args(o.extra_args)
        .env(
            "RUST_LOG",
            std::env::var("KURYR_BENCH_CONTROLLER_LOG").unwrap_or_else(|_| "warn".into()),
        )
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("starting {}", o.bin.display()))?;
    let pid = child.id().context("no pid")?;
    Ok(Controller {
        child,
        pid,
        log,
        metrics_url: Some(format!("http://{metrics}")),
        _proxy: None,
    })
}

pub struct UpstreamOpts<'a> {
    pub venv: &'a Path,
    pub api_root: String,
    pub cluster_id: &'a str,
    /// `noop` (pools off) or `nested` (upstream's nested pool driver).
    pub pool_driver: &'a str,
    pub handlers: &'a str,
    /// Octavia provider of its load balancers (`endpoints_driver_octavia_provider`).
    pub lb_provider: String,
    pub proxy: tokio::task::JoinHandle<()>,
}

/// kuryr.conf for upstream 10.0.0 (option names from its config.py and the baseline in
/// shared/reference/upstream-baseline/kuryr.conf).
///
/// `port_debug` names each port `<namespace>/<pod>` (10.0.0 leaves them unnamed without it), so a leftover
/// port on the real cloud is findable by name as well as through its KuryrPort. On cloudsim it stays off:
/// there the ports go with the session's cloud, and with pools it costs upstream an extra port update per
/// pod (`_set_port_debug`), which would be measured as upstream's.
pub fn upstream_conf(
    o: &UpstreamOpts<'_>,
    cloud: &BenchCloud,
    token: &Path,
    health: u16,
    metrics: u16,
) -> String {
    let c = &cloud.creds;
    format!(
        "[DEFAULT]\ndebug = {debug}\nuse_stderr = true\n\n\
[kubernetes]\napi_root = {api}\ntoken_file = {token}\nssl_verify_server_crt = false\npod_vif_driver = nested-vlan\n\
vif_pool_driver = {pool}\nenabled_handlers = {handlers}\nwatch_reconcile_period = 120\n\
endpoints_driver_octavia_provider = {provider}\nport_debug = {port_debug}\n\n\
[neutron]\nauth_type = password\nauth_url = {auth}\nusername = {user}\npassword = {pw}\n\
user_domain_name = Default\nproject_name = {project}\nproject_domain_name = Default\nregion_name = {region}\n\n\
[neutron_defaults]\nproject = {project_id}\npod_subnet = {subnet}\npod_security_groups = {sg}\n\
service_subnet = {ssubnet}\n{tags}\n\
[pod_vif_nested]\nworker_nodes_subnets = {subnet}\n\n\
[binding]\ndefault_driver = kuryr.lib.binding.drivers.vlan\nlink_iface = eth0\n\n\
[vif_pool]\nports_pool_batch = 10\nports_pool_min = 5\nports_pool_update_frequency = 20\n\n\
[octavia_defaults]\n{octavia}\n\
[health_server]\nport = {health}\n\n[prometheus_exporter]\ncontroller_exporter_port = {metrics}\n",
        api = o.api_root,
        provider = o.lb_provider,
        octavia = octavia_defaults(&o.lb_provider),
        token = token.display(),
        debug = std::env::var_os("KURYR_BENCH_UPSTREAM_DEBUG").is_some(),
        port_debug = cloud.sim.is_none(),
        pool = o.pool_driver,
        handlers = o.handlers,
        auth = c.auth_url,
        user = c.username,
        pw = c.password,
        project = c.project_name,
        region = c.region,
        project_id = cloud.project_id,
        subnet = cloud.subnet_id,
        sg = cloud.security_group_id,
        ssubnet = cloud.service_subnet_id,
        // On cloudsim the VM ports carry the session's tag; the lab's shared VMs do not (and are not ours
        // to tag), and upstream demands its resource_tags on parent ports too.
        tags = if cloud.sim.is_some() {
            format!("resource_tags = kuryr.cluster={}\n", o.cluster_id)
        } else {
            String::new()
        },
    )
}

/// `[octavia_defaults]` for a provider: upstream's own defaults for amphora (L3 members, SG rules on the
/// VIP port, ROUND_ROBIN); for ovn SOURCE_IP_PORT (ovn has no ROUND_ROBIN), no VIP SG rules (upstream's
/// docs: not needed where the load balancer keeps the client IP) and L2 members (on their own subnet,
/// as kuryr-rs makes them).
pub fn octavia_defaults(provider: &str) -> &'static str {
    if provider == "ovn" {
        "member_mode = L2\nenforce_sg_rules = false\nlb_algorithm = SOURCE_IP_PORT\n"
    } else {
        "member_mode = L3\nenforce_sg_rules = true\nlb_algorithm = ROUND_ROBIN\n"
    }
}

pub fn start_upstream(
    o: UpstreamOpts<'_>,
    cloud: &BenchCloud,
    dir: &Path,
    name: &str,
) -> anyhow::Result<Controller> {
    let conf = dir.join(format!("{name}.conf"));
    // Upstream insists on a token file; the proxy authenticates with the lab kubeconfig and drops it.
    let token = dir.join("proxy-token");
    std::fs::write(&token, "unused-behind-the-bench-proxy\n")?;
    std::fs::write(
        &conf,
        upstream_conf(&o, cloud, &token, free_port()?, free_port()?),
    )?;
    let (log, out, err) = log_file(dir, name)?;
    let bin = o.venv.join("bin/kuryr-k8s-controller");
    let child = Command::new(&bin)
        .arg("--config-file")
        .arg(&conf)
        // python-requests lets these override the CA file (upstream-baseline/README.md).
        .env_remove("REQUESTS_CA_BUNDLE")
        .env_remove("CURL_CA_BUNDLE")
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .kill_on_drop(true)
        .spawn()
        .with_context(|| {
            format!(
                "starting {} (run bench/run once to install the venv)",
                bin.display()
            )
        })?;
    let pid = child.id().context("no pid")?;
    Ok(Controller {
        child,
        pid,
        log,
        metrics_url: None,
        _proxy: Some(o.proxy),
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn counters_are_summed_over_matching_labels() {
        let t = "# TYPE kuryr_reconciles counter\nkuryr_reconciles_total{controller=\"kuryrport\"} 12\n\
kuryr_reconciles_total{controller=\"pod\"} 7\nkuryr_reconcile_errors_total{controller=\"kuryrport\",kind=\"x\"} 1\n";
        assert_eq!(
            super::counter_sum(t, "kuryr_reconciles_total", "controller=\"kuryrport\""),
            12.0
        );
        assert_eq!(super::counter_sum(t, "kuryr_reconciles_total", ""), 19.0);
        assert_eq!(super::counter_sum(t, "absent_total", ""), 0.0);
    }

    #[test]
    fn tail_keeps_the_last_lines() {
        let dir = std::env::temp_dir().join(format!("kuryr-bench-tail-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("tmp");
        let f = dir.join("x.log");
        std::fs::write(&f, "a\nb\nc\n").expect("write");
        assert_eq!(super::tail(&f, 2), "b\nc");
        assert_eq!(super::tail(&dir.join("none"), 2), "");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
