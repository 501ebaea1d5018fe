//! The two backends every scenario runs against: the lab's real Keystone + Neutron + Octavia, and an
//! in-process cloudsim bootstrapped to look like the lab (pod, service and external networks, a router).

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context;
use kuryr_cloudsim::{Profile, Sim, SimHandle};
use kuryr_openstack::neutron::routers::{self, Interface};
use kuryr_openstack::neutron::subnets;
use kuryr_openstack::neutron::{floating_ips, networks, ports, security_groups, trunks};
use kuryr_openstack::octavia::loadbalancers;
use kuryr_openstack::{ClientConfig, Cloud, Owner, RateLimit, WaitOptions};
use lab_tests::Lab;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Lab,
    Sim,
}

/// A clouds.yaml cloud name and how long its tokens live.
#[derive(Debug, Clone)]
pub struct AuthCloud {
    pub clouds_yaml: PathBuf,
    pub cloud: String,
}

pub struct Backend {
    pub kind: Kind,
    pub cloud: Cloud,
    pub password: AuthCloud,
    pub appcred: AuthCloud,
    pub short_token: AuthCloud,
    pub short_token_ttl: Duration,
    pub project_id: String,
    pub pod_network_id: String,
    pub pod_subnet_id: String,
    pub service_subnet_id: String,
    pub external_network_id: String,
    pub providers: Vec<String>,
    /// Unique per test run, in every name and ownership tag.
    pub run_id: String,
    _sims: Vec<SimHandle>,
    _dir: Option<TempDir>,
}

pub struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

impl Backend {
    pub fn name(&self, what: &str) -> String {
        format!("conf-{}-{what}", self.run_id)
    }

    pub fn owner(&self, kind: &str) -> Owner {
        Owner::new(
            format!("conformance-{}", self.run_id),
            kind,
            format!("{kind}-{}", fastrand::u32(..)),
        )
    }

    /// A config for one of this backend's clouds, with the conformance defaults (no rate limit needed).
    pub fn config(&self, c: &AuthCloud) -> ClientConfig {
        ClientConfig::clouds_yaml(Some(c.clouds_yaml.clone()), c.cloud.clone())
            .with_rate_limit(RateLimit { qps: 50.0, burst: 50 })
    }

    pub fn wait(&self) -> WaitOptions {
        WaitOptions {
            timeout: Duration::from_secs(120),
            stuck_after: Duration::from_secs(90),
            ..WaitOptions::default()
        }
    }

    pub async fn connect(kind: Kind) -> anyhow::Result<Backend> {
        match kind {
            Kind::Lab => Self::lab().await,
            Kind::Sim => Self::sim().await,
        }
    }

    async fn lab() -> anyhow::Result<Backend> {
        let lab = Lab::require();
        let yaml = lab.clouds_yaml.clone();
        let at = |cloud: &str| AuthCloud {
            clouds_yaml: yaml.clone(),
            cloud: cloud.to_owned(),
        };
        let password = at(&lab.cloud);
        let cfg = ClientConfig::clouds_yaml(Some(yaml.clone()), lab.cloud.clone());
        let cloud = Cloud::connect(cfg)
            .await
            .context("login to the lab (cloud kuryr-lab)")?;
        Ok(Backend {
            kind: Kind::Lab,
            cloud,
            password,
            appcred: at("kuryr-lab-appcred"),
            short_token: at("kuryr-lab-short-token"),
            short_token_ttl: Duration::from_secs(lab.short_token_expiration_s.max(1)),
            project_id: lab.project_id.clone(),
            pod_network_id: lab.pod_network_id.clone(),
            pod_subnet_id: lab.pod_subnet_id.clone(),
            service_subnet_id: lab.service_subnet_id.clone(),
            external_network_id: lab.external_network_id.clone(),
            providers: lab.octavia_providers.clone(),
            run_id: format!("{:08x}", fastrand::u32(..)),
            _sims: Vec::new(),
            _dir: None,
        })
    }

    async fn sim() -> anyhow::Result<Backend> {
        // Instant, except the ovn provider's removed-member lag (seen on the lab), which `wait_members`
        // must sit out.
        let mut profile = Profile::zero();
        profile.time_scale = 1.0;
        if let Some(ovn) = profile.octavia.providers.get_mut("ovn") {
            ovn.member_removal_lag = kuryr_cloudsim::profile::Dist::Ms(800.0);
        }
        let (_, sim) = Sim::new(profile).spawn_on("127.0.0.1:0").await?;
        // A second Keystone whose tokens expire quickly, like the lab's kuryr-lab-short-token.
        let mut short = Profile::zero();
        short.keystone.token_ttl_s = 3;
        let (_, short_sim) = Sim::new(short).spawn_on("127.0.0.1:0").await?;
        let dir = std::env::temp_dir().join(format!(
            "kuryr-conformance-{}-{}",
            std::process::id(),
            fastrand::u64(..)
        ));
        std::fs::create_dir_all(&dir)?;
        let yaml = dir.join("clouds.yaml");
        std::fs::write(&yaml, sim_clouds_yaml(&sim.url(), &short_sim.url()))?;
        let at = |cloud: &str| AuthCloud {
            clouds_yaml: yaml.clone(),
            cloud: cloud.to_owned(),
        };
        let cloud = Cloud::connect(ClientConfig::clouds_yaml(Some(yaml.clone()), "sim")).await?;
        let project_id = cloud.project_id().context("token without project")?;
        let boot = crate::simnets::like_the_lab(&cloud).await?;
        Ok(Backend {
            kind: Kind::Sim,
            cloud,
            password: at("sim"),
            appcred: at("sim-appcred"),
            short_token: at("sim-short-token"),
            short_token_ttl: Duration::from_secs(3),
            project_id,
            pod_network_id: boot.pod_network_id,
            pod_subnet_id: boot.pod_subnet_id,
            service_subnet_id: boot.service_subnet_id,
            external_network_id: boot.external_network_id,
            providers: vec!["ovn".to_owned(), "amphora".to_owned()],
            run_id: format!("{:08x}", fastrand::u32(..)),
            _sims: vec![sim, short_sim],
            _dir: Some(TempDir(dir)),
        })
    }
}

fn sim_clouds_yaml(url: &str, short: &str) -> String {
    format!(
        r#"clouds:
  sim:
    auth_type: password
    auth: {{auth_url: "{url}/v3", username: kuryr, password: kuryr-secret, project_name: service,
            user_domain_name: Default, project_domain_name: Default}}
    region_name: RegionOne
  sim-appcred:
    auth_type: v3applicationcredential
    auth: {{auth_url: "{url}/v3", application_credential_id: "0000000000000000000000000000a001",
            application_credential_secret: appcred-secret}}
    region_name: RegionOne
  sim-short-token:
    auth_type: password
    auth: {{auth_url: "{short}/v3", username: kuryr, password: kuryr-secret, project_name: service,
            user_domain_name: Default, project_domain_name: Default}}
    region_name: RegionOne
"#
    )
}

/// Something a scenario made, to delete afterwards whatever happened (newest first; deletes are
/// idempotent, so a scenario that deleted it itself does no harm).
#[derive(Debug, Clone)]
pub enum Item {
    Port(String),
    Network(String),
    Subnet(String),
    Router(String),
    RouterInterface { router: String, subnet: String },
    Trunk(String),
    SecurityGroup(String),
    FloatingIp(String),
    LoadBalancer(String),
}

#[derive(Default)]
pub struct Cleanup(Mutex<Vec<Item>>);

impl Cleanup {
    pub fn push(&self, item: Item) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).push(item);
    }

    /// Deletes everything registered, newest first; returns what could not be deleted.
    pub async fn run(&self, b: &Backend) -> Vec<String> {
        let items: Vec<Item> = std::mem::take(&mut *self.0.lock().unwrap_or_else(|p| p.into_inner()));
        let c = &b.cloud;
        let mut failed = Vec::new();
        for item in items.into_iter().rev() {
            let r = match &item {
                Item::Port(id) => ports::delete(c, id).await,
                Item::Network(id) => networks::delete(c, id).await,
                Item::Subnet(id) => subnets::delete(c, id).await,
                Item::Router(id) => routers::delete(c, id).await,
                Item::RouterInterface { router, subnet } => {
                    routers::remove_interface(c, router, &Interface::Subnet(subnet.clone())).await
                }
                Item::Trunk(id) => trunks::delete(c, id).await,
                Item::SecurityGroup(id) => security_groups::delete(c, id).await,
                Item::FloatingIp(id) => floating_ips::delete(c, id).await,
                Item::LoadBalancer(id) => match loadbalancers::delete(c, id, true).await {
                    Ok(()) => kuryr_openstack::waiter::wait_lb_deleted(c, id, &b.wait()).await,
                    Err(e) => Err(e),
                },
            };
            if let Err(e) = r {
                failed.push(format!("{item:?}: {e}"));
            }
        }
        failed
    }
}

/// What a scenario gets.
#[derive(Clone)]
pub struct Ctx {
    pub b: Arc<Backend>,
    pub c: Arc<Cleanup>,
}
