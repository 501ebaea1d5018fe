//! An in-process cloudsim and a `Cloud` logged in to it through a clouds.yaml, as production does.
#![allow(dead_code)]

use std::path::PathBuf;

use kuryr_cloudsim::{Profile, Sim, SimHandle};
use kuryr_openstack::{ClientConfig, Cloud, RateLimit};

pub struct Env {
    pub sim: SimHandle,
    pub clouds_yaml: PathBuf,
    _dir: TempDir,
}

/// A directory removed on drop.
pub struct TempDir(pub PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub fn temp_dir(tag: &str) -> TempDir {
    let dir = std::env::temp_dir().join(format!(
        "kuryr-openstack-{tag}-{}-{}",
        std::process::id(),
        fastrand::u64(..)
    ));
    std::fs::create_dir_all(&dir).unwrap();
    TempDir(dir)
}

/// clouds.yaml with `sim` (password), `sim-appcred` (application credential) and `sim-noauth`.
pub fn clouds_yaml(url: &str) -> String {
    format!(
        r#"clouds:
  sim:
    auth_type: password
    auth:
      auth_url: {url}/v3
      username: kuryr
      password: kuryr-secret
      project_name: service
      user_domain_name: Default
      project_domain_name: Default
    region_name: RegionOne
    interface: public
  sim-appcred:
    auth_type: v3applicationcredential
    auth:
      auth_url: {url}/v3
      application_credential_id: 0000000000000000000000000000a001
      application_credential_secret: appcred-secret
    region_name: RegionOne
  sim-noauth:
    auth_type: none
    auth:
      endpoint: {url}
      project_id: "00000000000000000000000000000001"
    network_endpoint_override: {url}
    load_balancer_endpoint_override: {url}
"#
    )
}

pub async fn start(profile: Profile) -> Env {
    let (_, sim) = Sim::new(profile).spawn_on("127.0.0.1:0").await.unwrap();
    let dir = temp_dir("sim");
    let clouds_yaml = dir.0.join("clouds.yaml");
    std::fs::write(&clouds_yaml, clouds_yaml_text(&sim.url())).unwrap();
    Env {
        sim,
        clouds_yaml,
        _dir: dir,
    }
}

fn clouds_yaml_text(url: &str) -> String {
    clouds_yaml(url)
}

impl Env {
    pub fn config(&self, cloud: &str) -> ClientConfig {
        ClientConfig::clouds_yaml(Some(self.clouds_yaml.clone()), cloud)
            .with_rate_limit(RateLimit::unlimited())
    }

    pub async fn cloud(&self, cloud: &str) -> Cloud {
        Cloud::connect(self.config(cloud)).await.unwrap()
    }
}

pub fn uniq(prefix: &str) -> String {
    format!("{prefix}-{:08x}", fastrand::u32(..))
}

/// Polls `cond` every 10 ms until it holds; panics naming `what` after 30 s. For conditions on the wall
/// clock (token expiry), which a paused tokio clock does not move.
pub async fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !cond() {
        assert!(
            std::time::Instant::now() < deadline,
            "timed out (30 s) waiting for {what}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}
