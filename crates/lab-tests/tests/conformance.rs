//! Conformance: the same scenarios against the lab's real Keystone + Neutron + Octavia and against
//! kuryr-cloudsim, through kuryr-openstack. Where they differ, cloudsim is wrong (docs/openstack-client.md
//! lists what was found and fixed). Each scenario has `<name>::on_cloudsim` and `<name>::on_lab`.

// Scenario helpers outside #[test] fns may panic on setup failure; checks use `ensure!`.
#![allow(clippy::unwrap_used)]

mod conformance {
    pub mod backend;
    pub mod scenarios;
}
mod simnets;

use std::future::Future;
use std::sync::Arc;

use conformance::backend::{Backend, Cleanup, Ctx, Kind};

async fn run<F, Fut>(kind: Kind, scenario: F)
where
    F: FnOnce(Ctx) -> Fut,
    Fut: Future<Output = anyhow::Result<()>>,
{
    let b = Arc::new(Backend::connect(kind).await.unwrap());
    let ctx = Ctx {
        b: b.clone(),
        c: Arc::new(Cleanup::default()),
    };
    let result = scenario(ctx.clone()).await;
    let leftovers = ctx.c.run(&b).await;
    if let Err(e) = result {
        panic!("{kind:?}: {e:#}");
    }
    assert!(leftovers.is_empty(), "{kind:?}: cleanup failed: {leftovers:#?}");
}

macro_rules! conformance {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn on_cloudsim() {
                super::run(super::Kind::Sim, super::conformance::scenarios::$name).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn on_lab() {
                super::run(super::Kind::Lab, super::conformance::scenarios::$name).await;
            }
        }
    )*};
}

conformance!(
    network_subnet_router,
    bulk_ports_with_tags,
    trunk_subports_and_vlan_conflict,
    security_groups_and_rules,
    floating_ip_associate,
    lb_lifecycle_ovn,
    lb_lifecycle_amphora,
    lb_same_port_tcp_and_udp,
    dual_stack_port_and_lb,
    errors_not_found_and_bad_request,
    errors_over_quota,
    errors_octavia_quota,
    errors_request_too_large,
    auth_password,
    auth_application_credential,
    auth_token_expires_mid_run,
);
