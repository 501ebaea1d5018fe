//! A client of an in-process cloudsim, for the policy controller's Neutron path.

use kuryr_cloudsim::{Profile, Sim, SimHandle};
use kuryr_openstack::{ClientConfig, Cloud, RateLimit};

/// A fresh cloudsim with `profile` (serving while the handle lives) and a client of it without a rate
/// limit, its bodies held under `max_body` when given.
pub async fn connect(profile: Profile, max_body: Option<usize>) -> (Cloud, SimHandle) {
    let (_, sim) = Sim::new(profile).spawn_on("127.0.0.1:0").await.unwrap();
    let dir = std::env::temp_dir().join(format!(
        "kuryr-policies-{}-{}",
        std::process::id(),
        fastrand::u64(..)
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let yaml = dir.join("clouds.yaml");
    std::fs::write(&yaml, sim.clouds_yaml("sim")).unwrap();
    let mut config = ClientConfig::clouds_yaml(Some(yaml), "sim").with_rate_limit(RateLimit::unlimited());
    if let Some(limit) = max_body {
        config = config.with_max_request_body(limit);
    }
    let cloud = Cloud::connect(config).await.unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    (cloud, sim)
}
