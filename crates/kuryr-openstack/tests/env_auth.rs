//! `AuthSource::Env`: credentials from `OS_*` variables (no clouds.yaml), against an in-process cloudsim.
//! Its own test binary with a single test, because it changes the process environment.

#![allow(clippy::unwrap_used)]

use kuryr_cloudsim::{Profile, Sim};
use kuryr_openstack::neutron::{networks, Filter};
use kuryr_openstack::{AuthSource, ClientConfig, Cloud, RateLimit};

#[tokio::test]
async fn os_environment_variables_log_in_and_reach_neutron_and_octavia() {
    let (_, sim) = Sim::new(Profile::zero()).spawn_on("127.0.0.1:0").await.unwrap();
    for k in [
        "OS_CLOUD",
        "OS_CLIENT_CONFIG_FILE",
        "OS_TOKEN",
        "OS_APPLICATION_CREDENTIAL_ID",
    ] {
        std::env::remove_var(k);
    }
    let auth_url = format!("{}/v3", sim.url());
    for (k, v) in [
        ("OS_AUTH_TYPE", "password"),
        ("OS_AUTH_URL", auth_url.as_str()),
        ("OS_USERNAME", "kuryr"),
        ("OS_PASSWORD", "kuryr-secret"),
        ("OS_PROJECT_NAME", "service"),
        ("OS_USER_DOMAIN_NAME", "Default"),
        ("OS_PROJECT_DOMAIN_NAME", "Default"),
        ("OS_REGION_NAME", "RegionOne"),
        ("OS_INTERFACE", "public"),
    ] {
        std::env::set_var(k, v);
    }
    let cloud = Cloud::connect(ClientConfig::new(AuthSource::Env).with_rate_limit(RateLimit::unlimited()))
        .await
        .unwrap();
    assert_eq!(
        cloud.project_id().as_deref(),
        Some("00000000000000000000000000000001")
    );
    networks::list(&cloud, Filter::new()).await.unwrap();
    let features = cloud.octavia_features().await.unwrap();
    assert!(features.has_provider("ovn"), "{features:?}");
    assert!(!sim.calls_matching("keystone.tokens.issue").is_empty());
}
