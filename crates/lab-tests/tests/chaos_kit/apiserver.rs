//! A private Kubernetes control plane for the chaos suite, so it can restart an API server without touching
//! the lab's shared one: the lab's own `kube-apiserver` binary, certificates and token file (see
//! lab/lib/k8s.sh), the lab's etcd under a prefix of its own (`/chaos-<id>`), its own loopback port and
//! kubeconfig. Beside it a `kube-controller-manager` runs only the EndpointSlice and garbage-collector
//! controllers (Services need EndpointSlices; ownerReferences need the collector). Its etcd keys are removed by
//! [`PrivateApi::close`].

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use kube::config::{KubeConfigOptions, Kubeconfig};
use lab_tests::Lab;

/// The lab's etcd (lab/lib/common.sh `P_ETCD`).
const ETCD: &str = "127.0.0.1:22379";
const READY_TIMEOUT: Duration = Duration::from_secs(120);

pub struct PrivateApi {
    pub id: String,
    pub port: u16,
    pub kubeconfig: PathBuf,
    dir: PathBuf,
    bin_dir: PathBuf,
    apiserver: Option<Child>,
    kcm: Option<Child>,
    /// How often the API server was restarted.
    pub restarts: u32,
}

fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

fn log_file(path: &Path) -> anyhow::Result<(Stdio, Stdio)> {
    let f = std::fs::OpenOptions::new().create(true).append(true).open(path)?;
    Ok((Stdio::from(f.try_clone()?), Stdio::from(f)))
}

impl PrivateApi {
    /// Starts the API server and the controller manager and waits until the API server is ready.
    pub async fn start(lab: &Lab, dir: &Path) -> anyhow::Result<PrivateApi> {
        let bin_dir = std::env::var_os("KUBE_BIN")
            .map(PathBuf::from)
            // lab/lib/k8s.sh links the running lab's binaries there, whatever release it runs.
            .unwrap_or_else(|| lab.state_dir.join("k8s").join("bin"));
        if !bin_dir.join("kube-apiserver").exists() {
            bail!(
                "no kube-apiserver in {} (the lab builds it: lab/lab up)",
                bin_dir.display()
            );
        }
        let k8s = lab.state_dir.join("k8s");
        let token = std::fs::read_to_string(k8s.join("admin.token"))
            .context("the lab's admin token")?
            .trim()
            .to_owned();
        let id = format!("{:08x}", fastrand::u32(..));
        let port = free_port()?;
        let kubeconfig = dir.join("kubeconfig");
        std::fs::write(
            &kubeconfig,
            format!(
                "apiVersion: v1\nkind: Config\nclusters: [{{name: chaos, cluster: {{server: \"https://127.0.0.1:{port}\", certificate-authority: \"{}\"}}}}]\nusers: [{{name: admin, user: {{token: \"{token}\"}}}}]\ncontexts: [{{name: chaos, context: {{cluster: chaos, user: admin}}}}]\ncurrent-context: chaos\n",
                k8s.join("ca.crt").display()
            ),
        )?;
        let mut api = PrivateApi {
            id,
            port,
            kubeconfig,
            dir: dir.to_owned(),
            bin_dir,
            apiserver: None,
            kcm: None,
            restarts: 0,
        };
        api.spawn_apiserver(&k8s)?;
        api.wait_ready().await?;
        api.spawn_kcm()?;
        Ok(api)
    }

    fn spawn_apiserver(&mut self, k8s: &Path) -> anyhow::Result<()> {
        let f = |name: &str| k8s.join(name).display().to_string();
        let (out, err) = log_file(&self.dir.join("kube-apiserver.log"))?;
        let child = Command::new(self.bin_dir.join("kube-apiserver"))
            .arg(format!("--etcd-servers=http://{ETCD}"))
            .arg(format!("--etcd-prefix=/chaos-{}", self.id))
            .arg("--bind-address=127.0.0.1")
            .arg(format!("--secure-port={}", self.port))
            .arg("--advertise-address=127.0.0.1")
            .arg(format!("--tls-cert-file={}", f("apiserver.crt")))
            .arg(format!("--tls-private-key-file={}", f("apiserver.key")))
            .arg(format!("--client-ca-file={}", f("ca.crt")))
            .arg(format!("--token-auth-file={}", f("tokens.csv")))
            .arg("--authorization-mode=Node,RBAC")
            .arg(format!("--service-account-key-file={}", f("sa.pub")))
            .arg(format!("--service-account-signing-key-file={}", f("sa.key")))
            .arg("--service-account-issuer=https://kubernetes.default.svc")
            .arg("--service-cluster-ip-range=198.19.0.0/16")
            .arg("--allow-privileged=true")
            // A private control plane for the chaos suite, which creates pods in namespaces of its own
            // at once (no ServiceAccount controller to wait for) and serves no pod that reads the API
            // (so no pod-network address to advertise, unlike lab/lib/k8s.sh): loopback, reconciler off.
            .arg("--disable-admission-plugins=ServiceAccount,TaintNodesByCondition")
            .arg("--event-ttl=1h")
            .arg("--endpoint-reconciler-type=none")
            .stdout(out)
            .stderr(err)
            .spawn()
            .context("starting the private kube-apiserver")?;
        self.apiserver = Some(child);
        Ok(())
    }

    fn spawn_kcm(&mut self) -> anyhow::Result<()> {
        let (out, err) = log_file(&self.dir.join("kube-controller-manager.log"))?;
        let child = Command::new(self.bin_dir.join("kube-controller-manager"))
            .arg(format!("--kubeconfig={}", self.kubeconfig.display()))
            .arg("--leader-elect=false")
            .arg("--secure-port=0")
            .arg("--controllers=endpointslice-controller,garbage-collector-controller")
            .arg("--use-service-account-credentials=false")
            .arg("--concurrent-service-endpoint-syncs=5")
            .stdout(out)
            .stderr(err)
            .spawn()
            .context("starting the private kube-controller-manager")?;
        self.kcm = Some(child);
        Ok(())
    }

    pub async fn client(&self) -> anyhow::Result<kube::Client> {
        let kc = Kubeconfig::read_from(&self.kubeconfig)?;
        let config = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default()).await?;
        Ok(kube::Client::try_from(config)?)
    }

    async fn wait_ready(&mut self) -> anyhow::Result<()> {
        let t0 = Instant::now();
        let client = self.client().await?;
        loop {
            // The bootstrap controller made `default`: storage and the API are up.
            let namespaces: kuryr_api::Api<kuryr_api::Namespace> = kuryr_api::Api::all(client.clone());
            if matches!(namespaces.get_opt("default").await, Ok(Some(_))) {
                return Ok(());
            }
            if let Some(child) = self.apiserver.as_mut() {
                if let Some(status) = child.try_wait()? {
                    bail!(
                        "the private kube-apiserver exited ({status}); see {}",
                        self.dir.join("kube-apiserver.log").display()
                    );
                }
            }
            if t0.elapsed() > READY_TIMEOUT {
                bail!("the private kube-apiserver was not ready within {READY_TIMEOUT:?}");
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Stops the API server (SIGTERM, SIGKILL after 3 s: a server drains its requests for much longer), starts
    /// it again with the same arguments and waits until it is ready. Every watch breaks. Returns how long
    /// the API was away.
    pub async fn restart(&mut self, lab: &Lab) -> anyhow::Result<Duration> {
        let t0 = Instant::now();
        if let Some(mut child) = self.apiserver.take() {
            signal(&child, "TERM");
            let deadline = Instant::now() + Duration::from_secs(3);
            while child.try_wait()?.is_none() {
                if Instant::now() > deadline {
                    let _ = child.kill();
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
        self.spawn_apiserver(&lab.state_dir.join("k8s"))?;
        self.wait_ready().await?;
        self.restarts += 1;
        Ok(t0.elapsed())
    }

    /// Stops both processes and deletes every etcd key under this API server's prefix.
    pub async fn close(mut self) -> anyhow::Result<()> {
        self.kill_all();
        let prefix = format!("/chaos-{}/", self.id);
        let mut end = prefix.clone().into_bytes();
        if let Some(last) = end.last_mut() {
            *last += 1;
        }
        let body = serde_json::json!({"key": base64(prefix.as_bytes()), "range_end": base64(&end)});
        reqwest::Client::new()
            .post(format!("http://{ETCD}/v3/kv/deleterange"))
            .json(&body)
            .send()
            .await?
            .error_for_status()?;
        Ok(())
    }

    fn kill_all(&mut self) {
        for child in [self.kcm.take(), self.apiserver.take()].into_iter().flatten() {
            let mut child = child;
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for PrivateApi {
    fn drop(&mut self) {
        self.kill_all();
    }
}

/// Sends a signal by name (`TERM`, `KILL`) to a child process.
pub fn signal(child: &Child, name: &str) {
    let _ = Command::new("kill")
        .arg(format!("-{name}"))
        .arg(child.id().to_string())
        .status();
}

/// Standard base64 (etcd's JSON gateway takes keys that way).
fn base64(bytes: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let b = [chunk[0], *chunk.get(1).unwrap_or(&0), *chunk.get(2).unwrap_or(&0)];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(A[((n >> (18 - 6 * i)) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn base64_matches_the_rfc_examples() {
        assert_eq!(super::base64(b"f"), "Zg==");
        assert_eq!(super::base64(b"fo"), "Zm8=");
        assert_eq!(super::base64(b"foo"), "Zm9v");
        assert_eq!(super::base64(b"foob"), "Zm9vYg==");
    }
}
