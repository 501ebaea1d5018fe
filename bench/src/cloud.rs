//! The cloud a run uses: an in-process cloudsim bootstrapped like a Nova deployment (pod subnet, N VMs
//! each a bound parent port with a trunk), or the lab's real Keystone + Neutron on ML2/OVN (its VMs).

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use futures::future::try_join_all;
use kuryr_cloudsim::{Profile, Sim, SimHandle};
use kuryr_openstack::neutron::ports::{self, CreatePort, FixedIpRequest};
use kuryr_openstack::neutron::subnets::{self, CreateSubnet};
use kuryr_openstack::neutron::trunks::{self, CreateTrunk};
use kuryr_openstack::neutron::{networks, security_groups, Filter};
use kuryr_openstack::{ClientConfig, Cloud};
use lab_tests::Lab;

/// Pod network of the emulated cloud: data only (no packet ever uses it), apart from the lab's 198.18.0.0/18.
pub const SIM_POD_CIDR: &str = "198.18.64.0/18";
pub const SIM_SERVICE_CIDR: &str = "198.19.0.0/16";

/// A worker VM: Node name, its InternalIP (= parent port IP) and its trunk.
#[derive(Debug, Clone)]
pub struct Vm {
    pub node: String,
    pub ip: String,
    pub trunk_id: String,
    /// The lab's own Node (real-Neutron runs): never created or deleted by the bench.
    pub preexisting: bool,
}

/// Password credentials for a Keystone v3 endpoint (what upstream's kuryr.conf and clouds.yaml need).
#[derive(Debug, Clone)]
pub struct Creds {
    pub auth_url: String,
    pub username: String,
    pub password: String,
    pub project_name: String,
    pub region: String,
}

pub struct BenchCloud {
    pub kind: &'static str,
    pub cloud: Cloud,
    pub creds: Creds,
    pub clouds_yaml: PathBuf,
    pub cloud_name: String,
    pub project_id: String,
    pub network_id: String,
    pub subnet_id: String,
    pub service_subnet_id: String,
    pub security_group_id: String,
    pub vms: Vec<Vm>,
    pub sim: Option<SimHandle>,
}

fn write_clouds_yaml(dir: &Path, name: &str, c: &Creds) -> anyhow::Result<PathBuf> {
    let path = dir.join("clouds.yaml");
    std::fs::write(
        &path,
        format!(
            "clouds:\n  {name}:\n    auth_type: password\n    auth: {{auth_url: \"{}\", username: {}, password: {}, project_name: {}, user_domain_name: Default, project_domain_name: Default}}\n    region_name: {}\n",
            c.auth_url, c.username, c.password, c.project_name, c.region
        ),
    )?;
    // It holds a password: kuryr-controller refuses it when every user can read it.
    std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o600))?;
    Ok(path)
}

impl BenchCloud {
    /// An in-process cloudsim serving `profile`, with `vms` VMs named `<prefix>-n<i>`.
    /// The VMs' parent ports carry `parent_tag` (upstream looks parents up with its `resource_tags`).
    pub async fn sim(
        profile: Profile,
        vms: usize,
        prefix: &str,
        parent_tag: &str,
        dir: &Path,
    ) -> anyhow::Result<BenchCloud> {
        let (_, handle) = Sim::new(profile).spawn_on("127.0.0.1:0").await?;
        let creds = Creds {
            auth_url: format!("{}/v3", handle.url()),
            username: "kuryr".into(),
            password: "kuryr-secret".into(),
            project_name: "service".into(),
            region: "RegionOne".into(),
        };
        let clouds_yaml = write_clouds_yaml(dir, "sim", &creds)?;
        let cloud = Cloud::connect(ClientConfig::clouds_yaml(Some(clouds_yaml.clone()), "sim")).await?;
        let project_id = cloud.project_id().context("token without project")?;
        let net = networks::create(&cloud, &networks::CreateNetwork::named("bench-pods"), &[]).await?;
        let subnet = subnets::create(&cloud, &CreateSubnet::v4(&net.id, SIM_POD_CIDR), &[]).await?;
        let snet = networks::create(&cloud, &networks::CreateNetwork::named("bench-services"), &[]).await?;
        let ssubnet = subnets::create(&cloud, &CreateSubnet::v4(&snet.id, SIM_SERVICE_CIDR), &[]).await?;
        let sg = security_groups::create(
            &cloud,
            &security_groups::CreateSecurityGroup {
                name: "bench-pods".into(),
                ..Default::default()
            },
            &[],
        )
        .await?;
        let vms = try_join_all((0..vms).map(|i| {
            let cloud = cloud.clone();
            let (net, subnet) = (net.id.clone(), subnet.id.clone());
            let node = format!("{prefix}-n{i}");
            let tags = vec![parent_tag.to_string()];
            // 198.18.64.11 upwards, inside SIM_POD_CIDR.
            let ip = format!("198.18.{}.{}", 64 + (11 + i) / 250, (11 + i) % 250);
            async move {
                let req = CreatePort {
                    name: Some(node.clone()),
                    fixed_ips: vec![FixedIpRequest {
                        subnet_id: Some(subnet),
                        ip_address: Some(ip.clone()),
                    }],
                    device_owner: Some("compute:nova".into()),
                    device_id: Some(format!("{:032x}", i + 1)),
                    binding_host_id: Some("bench-hv".into()),
                    tags,
                    ..CreatePort::on_network(net)
                };
                // The profile's IPAM conflicts (409 under concurrent creates) hit the VMs' ports too.
                let mut attempt = 0;
                let port = loop {
                    attempt += 1;
                    match ports::create(&cloud, &req).await {
                        Ok(p) => break p,
                        Err(e) if attempt < 8 => {
                            tracing::debug!("VM port {node}: {e}; retrying");
                            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                        }
                        Err(e) => return Err(e.into()),
                    }
                };
                let trunk = trunks::create(
                    &cloud,
                    &CreateTrunk {
                        port_id: port.id.clone(),
                        name: Some(format!("{node}-trunk")),
                        ..CreateTrunk::default()
                    },
                    &[],
                )
                .await?;
                anyhow::Ok(Vm {
                    node,
                    ip,
                    trunk_id: trunk.id,
                    preexisting: false,
                })
            }
        }))
        .await?;
        Ok(BenchCloud {
            kind: "cloudsim",
            cloud,
            creds,
            clouds_yaml,
            cloud_name: "sim".into(),
            project_id,
            network_id: net.id,
            subnet_id: subnet.id,
            service_subnet_id: ssubnet.id,
            security_group_id: sg.id,
            vms,
            sim: Some(handle),
        })
    }

    /// The lab's real Keystone + Neutron, its pod subnet and its VMs (Nodes vm1..).
    pub async fn lab(lab: &Lab, dir: &Path) -> anyhow::Result<BenchCloud> {
        let creds = Creds {
            auth_url: lab
                .keystone_url
                .clone()
                .context("lab without Keystone (noauth)")?,
            username: "kuryr".into(),
            password: "lab-admin-secret".into(),
            project_name: "kuryr".into(),
            region: lab.region.clone(),
        };
        let clouds_yaml = write_clouds_yaml(dir, "lab", &creds)?;
        let cloud = Cloud::connect(ClientConfig::clouds_yaml(Some(clouds_yaml.clone()), "lab")).await?;
        let sgs =
            security_groups::list(&cloud, Filter::new().name("default").project(&lab.project_id)).await?;
        let sg = sgs.first().context("project has no default security group")?;
        Ok(BenchCloud {
            kind: "neutron",
            security_group_id: sg.id.clone(),
            cloud,
            creds,
            clouds_yaml,
            cloud_name: "lab".into(),
            project_id: lab.project_id.clone(),
            network_id: lab.pod_network_id.clone(),
            subnet_id: lab.pod_subnet_id.clone(),
            service_subnet_id: lab.service_subnet_id.clone(),
            vms: lab
                .vms
                .iter()
                .map(|v| Vm {
                    node: v.name.clone(),
                    ip: v.ip.clone(),
                    trunk_id: v.trunk_id.clone(),
                    preexisting: true,
                })
                .collect(),
            sim: None,
        })
    }
}
