//! The client against an in-process cloudsim: auth flavours, re-authentication, retries and what is never
//! retried, the rate limiter, tags with and without the bulk-tagging extension, the LB waiter. (Scenario
//! conformance against the real servers lives in crates/lab-tests/tests/conformance.rs.)

// Helpers outside #[test] fns panic on failure too; that is what a test helper is for.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::{Duration, Instant};

use chrono::Utc;
use common::{start, uniq, wait_until};
use kuryr_cloudsim::{AuthMode, FaultRule, LbFaultRule, LbOutcome, Profile};
use kuryr_openstack::neutron::ports::{self, CreatePort};
use kuryr_openstack::neutron::{networks, subnets, Filter};
use kuryr_openstack::octavia::listeners::CreateListener;
use kuryr_openstack::octavia::loadbalancers::{self, CreateLoadBalancer};
use kuryr_openstack::octavia::members::{self, CreateMember};
use kuryr_openstack::octavia::pools::CreatePool;
use kuryr_openstack::{waiter, Cloud, Error, ErrorKind, Owner, RateLimit, RetryPolicy, WaitOptions};

async fn net_and_subnet(cloud: &Cloud, cidr: &str) -> (String, String) {
    let net = networks::create(cloud, &networks::CreateNetwork::named(uniq("net")), &[])
        .await
        .unwrap();
    let sub = subnets::create(cloud, &subnets::CreateSubnet::v4(&net.id, cidr), &[])
        .await
        .unwrap();
    (net.id, sub.id)
}

fn fast_retry() -> RetryPolicy {
    RetryPolicy {
        base_delay: Duration::from_millis(5),
        max_delay: Duration::from_millis(20),
        ..RetryPolicy::default()
    }
}

#[tokio::test]
async fn password_appcred_and_noauth_clouds_from_clouds_yaml() {
    let env = start(Profile::zero()).await;
    for name in ["sim", "sim-appcred"] {
        let cloud = env.cloud(name).await;
        assert!(
            cloud.endpoints().network.as_str().ends_with("/networking/v2.0/"),
            "{:?}",
            cloud.endpoints()
        );
        assert!(cloud
            .endpoints()
            .load_balancer
            .as_str()
            .ends_with("/load-balancer/v2/"));
        assert_eq!(
            cloud.project_id().as_deref(),
            Some("00000000000000000000000000000001")
        );
        networks::list(&cloud, Filter::new()).await.unwrap();
        assert!(cloud.credentials().expires_at.is_some());
    }
    let noauth = start(Profile::zero().with_auth(AuthMode::Noauth)).await;
    let cloud = noauth.cloud("sim-noauth").await;
    let net = networks::create(&cloud, &networks::CreateNetwork::named("n"), &[])
        .await
        .unwrap();
    assert_eq!(net.project_id, "00000000000000000000000000000001");
    // A wrong password fails at connect, with Keystone's reason.
    let bad = std::fs::read_to_string(&env.clouds_yaml)
        .unwrap()
        .replace("kuryr-secret", "wrong");
    std::fs::write(&env.clouds_yaml, bad).unwrap();
    let err = Cloud::connect(env.config("sim")).await.unwrap_err();
    assert!(matches!(err, Error::Auth(_)), "{err}");
}

#[tokio::test]
async fn expired_token_is_renewed_transparently_and_endpoints_kept() {
    let env = start(Profile::zero()).await;
    let cloud = env.cloud("sim").await;
    let gen0 = cloud.credentials().generation;
    networks::list(&cloud, Filter::new()).await.unwrap();
    assert!(env.sim.expire_tokens() > 0);
    // The next call sees 401, logs in again (one login for concurrent callers) and succeeds.
    let calls: Vec<_> = (0..5).map(|_| networks::list(&cloud, Filter::new())).collect();
    for r in futures::future::join_all(calls).await {
        r.unwrap();
    }
    assert_eq!(cloud.credentials().generation, gen0 + 1);
    let m = cloud.metrics().snapshot();
    assert!(m.reauths >= 1);
    assert_eq!(env.sim.calls_matching("keystone.tokens.issue").len(), 2);
    // Endpoints still versioned (the SDK's own re-auth would have lost them).
    assert!(cloud.endpoints().network.as_str().ends_with("/v2.0/"));
}

#[tokio::test]
async fn short_lived_tokens_are_renewed_before_they_expire() {
    let mut p = Profile::zero();
    p.keystone.token_ttl_s = 2;
    let env = start(p).await;
    let cloud = env.cloud("sim").await;
    // A client calling steadily until its token has been renewed twice (2 s tokens, so across expiries).
    let gen0 = cloud.credentials().generation;
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut n = 0;
    while cloud.credentials().generation < gen0 + 2 {
        assert!(
            Instant::now() < deadline,
            "not renewed twice within 30 s: {:?}",
            cloud.credentials()
        );
        networks::list(&cloud, Filter::new()).await.unwrap();
        n += 1;
        // Pacing of a steady caller (about 20 calls a second), not a wait for something: the loop ends on
        // the renewals themselves.
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(n > 20);
    // Renewed ahead of expiry: no call ever got a 401.
    let unauthorized = env.sim.calls().iter().filter(|c| c.status == 401).count();
    assert_eq!(unauthorized, 0);
    assert!(cloud.credentials().generation >= 3, "{:?}", cloud.credentials());
}

#[tokio::test]
async fn retryable_errors_are_retried_and_counted() {
    let env = start(Profile::zero()).await;
    let cloud = Cloud::connect(env.config("sim").with_retry(fast_retry()))
        .await
        .unwrap();
    let (net, sub) = net_and_subnet(&cloud, "10.1.0.0/24").await;
    for (status, kind) in [
        (503, None),
        (409, Some("IpAddressGenerationFailure")),
        (500, None),
    ] {
        env.sim.add_fault(FaultRule {
            op: "neutron.ports.create".into(),
            count: Some(2),
            status: Some(status),
            kind: kind.map(str::to_owned),
            ..FaultRule::default()
        });
        let p = ports::create(&cloud, &CreatePort::on_subnet(&net, &sub))
            .await
            .unwrap();
        assert!(!p.id.is_empty());
    }
    let m = cloud.metrics().snapshot();
    assert_eq!(m.retries_total(), 6);
    assert_eq!(m.count_outcome("neutron.ports.create", "5xx"), 4);
    assert_eq!(m.count_outcome("neutron.ports.create", "409"), 2);
    assert_eq!(m.count_outcome("neutron.ports.create", "2xx"), 3);
}

#[tokio::test]
async fn bad_request_and_plain_conflicts_are_not_retried_and_carry_context() {
    let env = start(Profile::zero()).await;
    let cloud = Cloud::connect(env.config("sim").with_retry(fast_retry()))
        .await
        .unwrap();
    let net = networks::create(&cloud, &networks::CreateNetwork::named(uniq("net")), &[])
        .await
        .unwrap();
    let err = subnets::create(&cloud, &subnets::CreateSubnet::v4(&net.id, "10.0.0.0/33"), &[])
        .await
        .unwrap_err();
    let api = err.api().unwrap();
    assert_eq!((api.status, api.attempts), (400, 1));
    assert_eq!(api.kind, ErrorKind::BadRequest);
    assert_eq!(api.op, "neutron.subnets.create");
    assert_eq!(env.sim.calls_matching("neutron.subnets.create").len(), 1);
    // 404 on GET is an error, on DELETE it is success.
    assert!(ports::get(&cloud, "00000000-0000-0000-0000-000000000000")
        .await
        .unwrap_err()
        .is_not_found());
    ports::delete(&cloud, "00000000-0000-0000-0000-000000000000")
        .await
        .unwrap();
}

#[tokio::test]
async fn retries_give_up_after_the_budget() {
    let env = start(Profile::zero()).await;
    let policy = RetryPolicy {
        max_attempts: 3,
        ..fast_retry()
    };
    let cloud = Cloud::connect(env.config("sim").with_retry(policy))
        .await
        .unwrap();
    env.sim.add_fault(FaultRule {
        op: "neutron.networks.list".into(),
        status: Some(503),
        ..FaultRule::default()
    });
    let err = networks::list(&cloud, Filter::new()).await.unwrap_err();
    assert_eq!(err.api().unwrap().attempts, 3);
    assert_eq!(err.kind(), Some(ErrorKind::ServerError));
}

#[tokio::test]
async fn timeouts_are_retried() {
    let env = start(Profile::zero()).await;
    let cfg = env
        .config("sim")
        .with_retry(fast_retry())
        .with_timeouts(Duration::from_secs(1), Duration::from_millis(300));
    let cloud = Cloud::connect(cfg).await.unwrap();
    env.sim.add_fault(FaultRule {
        op: "neutron.networks.list".into(),
        count: Some(1),
        hold_ms: Some(1000),
        ..FaultRule::default()
    });
    networks::list(&cloud, Filter::new()).await.unwrap();
    let m = cloud.metrics().snapshot();
    assert_eq!(m.count_outcome("neutron.networks.list", "transport"), 1);
    assert_eq!(
        m.retries.get(&("neutron.networks.list".into(), "timeout".into())),
        Some(&1)
    );
}

#[tokio::test]
async fn rate_limiter_spaces_calls() {
    let env = start(Profile::zero()).await;
    let cloud = Cloud::connect(
        env.config("sim")
            .with_rate_limit(RateLimit { qps: 20.0, burst: 2 }),
    )
    .await
    .unwrap();
    let t0 = Instant::now();
    let calls: Vec<_> = (0..12).map(|_| networks::list(&cloud, Filter::new())).collect();
    for r in futures::future::join_all(calls).await {
        r.unwrap();
    }
    // 2 free, 10 more at 20/s.
    let took = t0.elapsed();
    assert!(took >= Duration::from_millis(450), "{took:?}");
    assert!(cloud.metrics().snapshot().ratelimit_waits >= 9);
}

/// A Neutron that suffers beyond 4 requests in flight (slower, then 503s): the client's limit comes down
/// to what it takes and every call still succeeds; against the same Neutron, a client pinned at 64 in
/// flight (upstream's flood, without a limit) gets refused.
#[tokio::test]
async fn the_concurrency_limit_backs_off_from_a_suffering_neutron() {
    let mut profile = Profile {
        seed: Some(5),
        ..Profile::default()
    };
    profile.latency.default =
        kuryr_cloudsim::profile::LatencySpec::Plain(kuryr_cloudsim::profile::Dist::Ms(40.0));
    profile.load.neutron = Some(kuryr_cloudsim::load::LoadModel {
        workers: 4,
        error_per_excess: 0.05,
        max_error_rate: 0.9,
    });
    let env = start(profile).await;
    let calls = |cloud: Cloud| async move {
        let calls: Vec<_> = (0..300)
            .map(|_| {
                let cloud = cloud.clone();
                async move { networks::list(&cloud, Filter::new()).await }
            })
            .collect();
        futures::future::join_all(calls).await
    };
    let adaptive = Cloud::connect(env.config("sim").with_concurrency(kuryr_openstack::AimdConfig {
        initial: 32,
        ..Default::default()
    }))
    .await
    .unwrap();
    for r in calls(adaptive.clone()).await {
        r.unwrap();
    }
    let m = adaptive.metrics().snapshot();
    let cuts: u64 = m
        .limit_moves
        .iter()
        .filter(|((service, reason), _)| {
            service == "neutron" && reason != "slow_start" && reason != "increase"
        })
        .map(|(_, n)| n)
        .sum();
    assert!(cuts > 0, "{:?}", m.limit_moves);
    let limit = m.admission["neutron"].limit;
    assert!(limit < 32, "the limit stayed at {limit}");
    let adaptive_refused = m.count_outcome("neutron.networks.list", "5xx");

    let flood = Cloud::connect(
        env.config("sim")
            .with_concurrency(kuryr_openstack::AimdConfig::fixed(64)),
    )
    .await
    .unwrap();
    let _ = calls(flood.clone()).await;
    let flood_refused = flood
        .metrics()
        .snapshot()
        .count_outcome("neutron.networks.list", "5xx");
    eprintln!(
        "300 lists: adaptive limit 32 -> {limit} ({:?}), 503s {adaptive_refused}; fixed 64: 503s {flood_refused}",
        m.limit_moves
    );
    assert!(
        flood_refused > adaptive_refused * 2,
        "refused: adaptive {adaptive_refused}, flood {flood_refused}"
    );
}

async fn bulk_tagged(env: &common::Env) -> (Cloud, Vec<ports::Port>, Vec<String>) {
    let cloud = env.cloud("sim").await;
    let (net, sub) = net_and_subnet(&cloud, "10.2.0.0/24").await;
    let owner = Owner::new("c1", "pool", uniq("uid"));
    let tags = owner.tags().unwrap();
    let reqs: Vec<_> = (0..5)
        .map(|_| CreatePort::on_subnet(&net, &sub).tagged(tags.clone()))
        .collect();
    let created = ports::bulk_create(&cloud, &reqs).await.unwrap();
    (cloud, created, owner.filter())
}

#[tokio::test]
async fn bulk_ports_carry_tags_in_one_call_with_the_extension() {
    let env = start(Profile::zero()).await;
    let (cloud, created, filter) = bulk_tagged(&env).await;
    assert_eq!(created.len(), 5);
    assert!(created.iter().all(|p| p.tags.len() == 3));
    assert_eq!(
        ports::list(&cloud, Filter::new().tags(&filter))
            .await
            .unwrap()
            .len(),
        5
    );
    assert_eq!(env.sim.calls_matching("neutron.ports.tags.*").len(), 0);
}

#[tokio::test]
async fn bulk_ports_are_tagged_after_without_the_extension() {
    let mut p = Profile::zero();
    p.neutron.disabled_extensions = vec!["tag-ports-during-bulk-creation".into()];
    let env = start(p).await;
    let (cloud, created, filter) = bulk_tagged(&env).await;
    assert!(created.iter().all(|p| p.tags.len() == 3));
    assert_eq!(
        ports::list(&cloud, Filter::new().tags(&filter))
            .await
            .unwrap()
            .len(),
        5
    );
    assert_eq!(env.sim.calls_matching("neutron.ports.tags.*").len(), 5);
}

#[tokio::test]
async fn ports_whose_tagging_fails_are_deleted_not_leaked() {
    let mut p = Profile::zero();
    p.neutron.disabled_extensions = vec!["tag-ports-during-bulk-creation".into()];
    let env = start(p).await;
    let cloud = Cloud::connect(env.config("sim").with_retry(RetryPolicy::none()))
        .await
        .unwrap();
    let (net, sub) = net_and_subnet(&cloud, "10.3.0.0/24").await;
    env.sim.add_fault(FaultRule {
        op: "neutron.ports.tags.*".into(),
        count: Some(1),
        status: Some(400),
        ..FaultRule::default()
    });
    let tags = Owner::new("c1", "pod", "u1").tags().unwrap();
    let reqs: Vec<_> = (0..3)
        .map(|_| CreatePort::on_subnet(&net, &sub).tagged(tags.clone()))
        .collect();
    assert!(ports::bulk_create(&cloud, &reqs).await.is_err());
    assert!(ports::list(&cloud, Filter::new().eq("network_id", &net))
        .await
        .unwrap()
        .is_empty());
}

type Made = Result<Vec<ports::Port>, Error>;

/// `n` ports on a fresh network, with `faults` on `neutron.ports.bulk_create` in this order.
async fn bulk_of(n: usize, faults: &[(u16, Option<&str>)]) -> (common::Env, Cloud, String, Made) {
    let env = start(Profile::zero()).await;
    let cloud = Cloud::connect(env.config("sim").with_retry(fast_retry()))
        .await
        .unwrap();
    let (net, sub) = net_and_subnet(&cloud, "10.4.0.0/24").await;
    for (status, kind) in faults {
        env.sim.add_fault(FaultRule {
            op: "neutron.ports.bulk_create".into(),
            count: Some(1),
            status: Some(*status),
            kind: kind.map(str::to_owned),
            ..FaultRule::default()
        });
    }
    let reqs = vec![CreatePort::on_subnet(&net, &sub); n];
    let made = ports::bulk_create(&cloud, &reqs).await;
    (env, cloud, net, made)
}

fn bulk_bodies(env: &common::Env) -> Vec<(usize, u16)> {
    env.sim
        .calls_matching("neutron.ports.bulk_create")
        .iter()
        .map(|c| (c.items.unwrap_or(0), c.status))
        .collect()
}

#[tokio::test]
async fn a_bulk_refused_for_an_ipam_race_is_posted_again_as_two_halves() {
    let race = (409, Some("IpAddressAlreadyAllocated"));
    let (env, cloud, net, made) = bulk_of(8, &[race]).await;
    assert_eq!(made.unwrap().len(), 8);
    let mut bodies = bulk_bodies(&env);
    bodies.sort_unstable();
    // The whole body once, then two halves: not the whole body again.
    assert_eq!(bodies, vec![(4, 201), (4, 201), (8, 409)]);
    let listed = ports::list(&cloud, Filter::new().eq("network_id", &net))
        .await
        .unwrap();
    assert_eq!(listed.len(), 8);
    let retries = cloud.metrics().snapshot().retries;
    assert_eq!(
        retries.get(&(
            "neutron.ports.bulk_create".to_owned(),
            "ipam_conflict_halved".to_owned()
        )),
        Some(&1)
    );
}

#[tokio::test]
async fn after_races_a_large_body_is_posted_as_parts_at_once() {
    let env = start(Profile::zero()).await;
    let cloud = Cloud::connect(env.config("sim").with_retry(fast_retry()))
        .await
        .unwrap();
    let (net, sub) = net_and_subnet(&cloud, "10.6.0.0/24").await;
    // The body and both its halves race: the quarters land.
    for _ in 0..3 {
        env.sim.add_fault(FaultRule {
            op: "neutron.ports.bulk_create".into(),
            count: Some(1),
            status: Some(409),
            kind: Some("IpAddressAlreadyAllocated".to_owned()),
            ..FaultRule::default()
        });
    }
    let reqs = vec![CreatePort::on_subnet(&net, &sub); 8];
    assert_eq!(ports::bulk_create(&cloud, &reqs).await.unwrap().len(), 8);
    let mut first = bulk_bodies(&env);
    first.sort_unstable();
    assert_eq!(
        first,
        vec![
            (2, 201),
            (2, 201),
            (2, 201),
            (2, 201),
            (4, 409),
            (4, 409),
            (8, 409)
        ]
    );
    // Three races in 17.5 ports exposed (a refused body of n: (n + 1) / 2) and the 10 counted without:
    // ~11 % a port, so a body of more than 6 would likely be refused. The next 8 go as 6 + 2 at once, not
    // as one body first.
    assert_eq!(ports::bulk_create(&cloud, &reqs).await.unwrap().len(), 8);
    let mut second = bulk_bodies(&env).split_off(first.len());
    second.sort_unstable();
    assert_eq!(second, vec![(2, 201), (6, 201)]);
    let listed = ports::list(&cloud, Filter::new().eq("network_id", &net))
        .await
        .unwrap();
    assert_eq!(listed.len(), 16);
}

#[tokio::test]
async fn a_single_port_racing_for_its_address_is_retried_as_before() {
    let race = (409, Some("IpAddressAlreadyAllocated"));
    let (env, cloud, _net, made) = bulk_of(1, &[race]).await;
    assert_eq!(made.unwrap().len(), 1);
    assert_eq!(bulk_bodies(&env), vec![(1, 409), (1, 201)]);
    let retries = cloud.metrics().snapshot().retries;
    assert_eq!(
        retries.keys().map(|(_, r)| r.as_str()).collect::<Vec<_>>(),
        ["ipam_conflict"]
    );
}

#[tokio::test]
async fn a_body_refused_for_want_of_addresses_is_retried_whole() {
    let exhausted = (409, Some("IpAddressGenerationFailure"));
    let (env, _cloud, _net, made) = bulk_of(8, &[exhausted]).await;
    assert_eq!(made.unwrap().len(), 8);
    assert_eq!(bulk_bodies(&env), vec![(8, 409), (8, 201)]);
}

#[tokio::test]
async fn a_body_naming_a_taken_address_fails_at_once_unhalved() {
    let env = start(Profile::zero()).await;
    let cloud = Cloud::connect(env.config("sim").with_retry(fast_retry()))
        .await
        .unwrap();
    let (net, sub) = net_and_subnet(&cloud, "10.5.0.0/24").await;
    let at = |ip: &str| CreatePort {
        fixed_ips: vec![ports::FixedIpRequest {
            subnet_id: Some(sub.clone()),
            ip_address: Some(ip.to_owned()),
        }],
        ..CreatePort::on_subnet(&net, &sub)
    };
    ports::create(&cloud, &at("10.5.0.10")).await.unwrap();
    let reqs: Vec<_> = ["10.5.0.20", "10.5.0.21", "10.5.0.10", "10.5.0.22"]
        .iter()
        .map(|ip| at(ip))
        .collect();
    let err = ports::bulk_create(&cloud, &reqs).await.unwrap_err();
    assert_eq!(err.status(), Some(409), "{err}");
    // The same address is taken in any half: one call, and nothing made.
    assert_eq!(env.sim.calls_matching("neutron.ports.bulk_create*").len(), 1);
    let listed = ports::list(&cloud, Filter::new().eq("network_id", &net))
        .await
        .unwrap();
    assert_eq!(listed.len(), 1);
}

#[tokio::test]
async fn a_half_that_fails_for_good_takes_the_other_halfs_ports_with_it() {
    let race = (409, Some("IpAddressAlreadyAllocated"));
    let (env, cloud, net, made) = bulk_of(8, &[race, (400, None)]).await;
    let err = made.unwrap_err();
    assert_eq!(err.status(), Some(400), "{err}");
    let mut bodies = bulk_bodies(&env);
    bodies.sort_unstable();
    assert_eq!(bodies, vec![(4, 201), (4, 400), (8, 409)]);
    // All or none: the half that was made is deleted again.
    let listed = ports::list(&cloud, Filter::new().eq("network_id", &net))
        .await
        .unwrap();
    assert!(listed.is_empty(), "{listed:?}");
}

fn lb_body(subnet: &str, provider: &str, members: &[(&str, u32)]) -> CreateLoadBalancer {
    // ovn supports only SOURCE_IP_PORT, amphora everything but.
    let algorithm = if provider == "ovn" {
        "SOURCE_IP_PORT"
    } else {
        "ROUND_ROBIN"
    };
    let pool = CreatePool {
        members: members
            .iter()
            .map(|(a, p)| CreateMember::new(*a, *p).on_subnet(subnet))
            .collect(),
        ..CreatePool::new("pool-80", "TCP", algorithm)
    };
    CreateLoadBalancer {
        name: uniq("lb"),
        vip_subnet_id: Some(subnet.to_owned()),
        provider: Some(provider.to_owned()),
        tags: Owner::new("c1", "service", uniq("svc")).tags().unwrap(),
        listeners: vec![CreateListener::new("l-80", "TCP", 80).with_pool(pool)],
        ..CreateLoadBalancer::default()
    }
}

#[tokio::test]
async fn lb_waiter_sees_active_and_stuck_and_error() {
    let env = start(Profile::zero()).await;
    let cloud = env.cloud("sim").await;
    let (_, sub) = net_and_subnet(&cloud, "10.4.0.0/24").await;
    let lb = loadbalancers::create(&cloud, &lb_body(&sub, "ovn", &[("10.4.0.10", 8080)]))
        .await
        .unwrap();
    let tree = waiter::wait_lb_active(&cloud, &lb.id, &WaitOptions::default())
        .await
        .unwrap();
    assert_eq!(tree.member_count(), 1);
    let pool = &tree.loadbalancer.listeners[0].pools[0].node.id;
    members::batch_replace(
        &cloud,
        pool,
        &[
            CreateMember::new("10.4.0.11", 8080),
            CreateMember::new("10.4.0.12", 8080),
        ],
    )
    .await
    .unwrap();
    let tree = waiter::wait_lb_active(&cloud, &lb.id, &WaitOptions::default())
        .await
        .unwrap();
    assert_eq!(tree.member_count(), 2);
    loadbalancers::delete(&cloud, &lb.id, true).await.unwrap();
    waiter::wait_lb_deleted(&cloud, &lb.id, &WaitOptions::default())
        .await
        .unwrap();

    let quick = WaitOptions {
        stuck_after: Duration::from_millis(300),
        initial_interval: Duration::from_millis(20),
        ..WaitOptions::default()
    };
    env.sim.add_lb_fault(LbFaultRule {
        name: Some("stuck-*".into()),
        outcome: LbOutcome::Stuck,
        ..LbFaultRule::default()
    });
    let mut body = lb_body(&sub, "amphora", &[]);
    body.name = uniq("stuck");
    let lb = loadbalancers::create(&cloud, &body).await.unwrap();
    let err = waiter::wait_lb_active(&cloud, &lb.id, &quick).await.unwrap_err();
    assert!(
        matches!(err, Error::LbStuck { ref status, .. } if status == "PENDING_CREATE"),
        "{err}"
    );

    env.sim.add_lb_fault(LbFaultRule {
        name: Some("broken-*".into()),
        outcome: LbOutcome::Error,
        ..LbFaultRule::default()
    });
    body.name = uniq("broken");
    let lb = loadbalancers::create(&cloud, &body).await.unwrap();
    let err = waiter::wait_lb_active(&cloud, &lb.id, &quick).await.unwrap_err();
    assert!(matches!(err, Error::LbError { .. }), "{err}");
}

#[tokio::test]
async fn unsupported_features_are_refused_before_any_call() {
    let mut p = Profile::zero();
    p.octavia.max_version = "2.12".into();
    let env = start(p).await;
    let cloud = env.cloud("sim").await;
    let (_, sub) = net_and_subnet(&cloud, "10.5.0.0/24").await;
    let mut body = lb_body(&sub, "amphora", &[]);
    body.listeners.push(CreateListener::new("l-80-udp", "UDP", 80));
    let err = loadbalancers::create(&cloud, &body).await.unwrap_err();
    assert!(matches!(err, Error::Unsupported { .. }), "{err}");
    assert!(env.sim.calls_matching("octavia.loadbalancers.create").is_empty());
}

#[tokio::test]
async fn lists_follow_next_links_across_pages() {
    let env = start(Profile::zero()).await;
    let cloud = env.cloud("sim").await;
    let tags = Owner::new("c1", "namespace", "paged").tags().unwrap();
    for i in 0..5 {
        networks::create(
            &cloud,
            &networks::CreateNetwork::named(format!("paged-{i}")),
            &tags,
        )
        .await
        .unwrap();
    }
    let all = networks::list(&cloud, Filter::new().tags(&tags).eq("limit", "2"))
        .await
        .unwrap();
    let names: std::collections::BTreeSet<_> = all.iter().map(|n| n.name.clone()).collect();
    assert_eq!(names.len(), 5, "{names:?}");
    assert_eq!(env.sim.calls_matching("neutron.networks.list").len(), 3);
}

/// The garbage collector's listing of a cluster's objects asks for its ports a page at a time (a large
/// cluster's would be one answer of megabytes), and still finds every one.
#[tokio::test]
async fn a_clusters_ports_are_listed_a_page_at_a_time() {
    let mut profile = Profile::zero();
    // Over a page: more than Neutron's default port quota (500).
    profile.neutron.quotas.insert("port".into(), -1);
    let env = start(profile).await;
    let cloud = env.cloud("sim").await;
    let (net, sub) = net_and_subnet(&cloud, "10.7.0.0/21").await;
    let tags = Owner::new("paged-gc", "pod", "u1").tags().unwrap();
    let reqs: Vec<CreatePort> = (0..1001)
        .map(|_| CreatePort {
            tags: tags.clone(),
            ..CreatePort::on_subnet(&net, &sub)
        })
        .collect();
    ports::bulk_create(&cloud, &reqs).await.unwrap();
    env.sim.clear_calls();

    let owned = kuryr_openstack::owned::list(&cloud, "paged-gc", None)
        .await
        .unwrap();

    assert_eq!(owned.len(), 1001);
    let lists = env.sim.calls_matching("neutron.ports.list");
    assert_eq!(lists.len(), 2, "two pages of at most 1,000");
}

#[tokio::test]
async fn token_auth_type_and_call_observer() {
    use secrecy::ExposeSecret;
    use std::sync::{Arc, Mutex};

    let env = start(Profile::zero()).await;
    let token = env.cloud("sim").await.credentials().token.clone().unwrap();
    let yaml = format!(
        "clouds:\n  sim-token:\n    auth_type: token\n    auth:\n      auth_url: {}/v3\n      token: {}\n      project_name: service\n      project_domain_name: Default\n",
        env.sim.url(),
        token.expose_secret()
    );
    let path = env.clouds_yaml.with_file_name("token.yaml");
    std::fs::write(&path, yaml).unwrap();

    #[derive(Default)]
    struct Seen(Mutex<Vec<(String, u16, u32)>>);
    impl kuryr_openstack::CallObserver for Seen {
        fn observe(&self, c: &kuryr_openstack::CallRecord<'_>) {
            self.0
                .lock()
                .unwrap()
                .push((c.op.to_owned(), c.status, c.attempt));
        }
    }
    let seen = Arc::new(Seen::default());
    let cfg = kuryr_openstack::ClientConfig::clouds_yaml(Some(path), "sim-token")
        .with_rate_limit(RateLimit::unlimited())
        .with_retry(fast_retry());
    let cloud = Cloud::connect_with_observer(cfg, Some(seen.clone()))
        .await
        .unwrap();
    env.sim.add_fault(FaultRule {
        op: "neutron.networks.list".into(),
        count: Some(1),
        status: Some(502),
        ..FaultRule::default()
    });
    networks::list(&cloud, Filter::new()).await.unwrap();
    assert_eq!(
        *seen.0.lock().unwrap(),
        vec![
            // The token login at connect time passes the same observer.
            ("keystone.tokens.issue".to_owned(), 201, 1),
            ("neutron.networks.list".to_owned(), 502, 1),
            ("neutron.networks.list".to_owned(), 200, 2)
        ]
    );
}

/// Whether the client's token is past the expiry Keystone gave it.
fn expired(cloud: &Cloud) -> bool {
    cloud
        .credentials()
        .expires_at
        .is_some_and(|exp| exp <= Utc::now())
}

#[tokio::test]
async fn failed_early_renewal_keeps_using_the_valid_token() {
    let mut p = Profile::zero();
    p.keystone.token_ttl_s = 4;
    let env = start(p).await;
    let cloud = env.cloud("sim").await;
    let gen0 = cloud.credentials().generation;
    env.sim.add_fault(FaultRule {
        op: "keystone.tokens.issue".into(),
        count: Some(1),
        status: Some(503),
        ..FaultRule::default()
    });
    // Inside the last quarter of the token's life: renewal is due, Keystone fails it once.
    let margin = env.config("sim").token_renew_margin;
    wait_until("the token's renewal to be due", || {
        cloud.credentials().needs_renewal(Utc::now(), margin)
    })
    .await;
    assert!(
        !expired(&cloud),
        "the token already expired: {:?}",
        cloud.credentials()
    );
    networks::list(&cloud, Filter::new()).await.unwrap();
    assert_eq!(cloud.credentials().generation, gen0);
    assert_eq!(
        env.sim
            .calls_matching("keystone.tokens.issue")
            .last()
            .map(|c| c.status),
        Some(503)
    );
    // Past expiry the renewal is forced and now succeeds.
    wait_until("the token to expire", || expired(&cloud)).await;
    networks::list(&cloud, Filter::new()).await.unwrap();
    assert_eq!(cloud.credentials().generation, gen0 + 1);
}

#[tokio::test]
async fn the_version_document_is_retried_like_every_call() {
    let env = start(Profile::zero()).await;
    let cloud = Cloud::connect(env.config("sim").with_retry(fast_retry()))
        .await
        .unwrap();
    // A busy Octavia API refusing the discovery twice must not fail a controller's start.
    env.sim.add_fault(FaultRule {
        op: "octavia.versions".into(),
        count: Some(2),
        status: Some(503),
        ..FaultRule::default()
    });
    let features = cloud.octavia_features().await.unwrap();
    assert!(features.version >= (2, 0), "{features:?}");
    let m = cloud.metrics().snapshot();
    assert_eq!(m.count_outcome("octavia.versions", "5xx"), 2);
    assert_eq!(m.count_outcome("octavia.versions", "2xx"), 1);
    assert_eq!(m.retries_total(), 2);
}

#[tokio::test]
async fn logins_and_the_version_document_are_counted_like_every_call() {
    let env = start(Profile::zero()).await;
    let cloud = env.cloud("sim").await;
    cloud.octavia_features().await.unwrap();
    networks::list(&cloud, Filter::new()).await.unwrap();
    env.sim.expire_tokens();
    // 401, one re-login, the repeat.
    networks::list(&cloud, Filter::new()).await.unwrap();
    let m = cloud.metrics().snapshot();
    let issued = env.sim.calls_matching("keystone.tokens.issue").len() as u64;
    assert_eq!(issued, 2);
    assert_eq!(m.count_outcome(kuryr_openstack::auth::LOGIN_OP, "2xx"), issued);
    assert_eq!(m.count_outcome("octavia.versions", "2xx"), 1);
    assert_eq!(m.reauths, 1);
    // Every call the server saw, bar Keystone's own discovery GETs the SDK makes inside a login, is counted.
    let seen = env
        .sim
        .calls()
        .into_iter()
        .filter(|c| !c.op.starts_with("keystone.version"))
        .count() as u64;
    assert_eq!(m.total_calls(), seen, "{m:#?}");
}

#[tokio::test]
async fn ovn_removed_member_lingers_after_active_and_wait_members_sits_it_out() {
    let mut profile = Profile::zero();
    profile.time_scale = 1.0;
    profile
        .octavia
        .providers
        .get_mut("ovn")
        .unwrap()
        .member_removal_lag = kuryr_cloudsim::profile::Dist::Ms(600.0);
    let env = start(profile).await;
    let cloud = env.cloud("sim").await;
    let (_, sub) = net_and_subnet(&cloud, "10.6.0.0/24").await;
    let body = lb_body(&sub, "ovn", &[("10.6.0.10", 8080), ("10.6.0.11", 8080)]);
    let lb = loadbalancers::create(&cloud, &body).await.unwrap();
    let tree = waiter::wait_lb_active(&cloud, &lb.id, &WaitOptions::default())
        .await
        .unwrap();
    let pool = tree.loadbalancer.listeners[0].pools[0].node.id.clone();
    members::batch_replace(
        &cloud,
        &pool,
        &[CreateMember::new("10.6.0.10", 8080).on_subnet(&sub)],
    )
    .await
    .unwrap();
    // The LB reads ACTIVE at once (zero update time), the removed member is still there, PENDING_DELETE.
    let got = loadbalancers::get(&cloud, &lb.id).await.unwrap();
    assert_eq!(got.provisioning_status, "ACTIVE");
    let listed = members::list(&cloud, &pool).await.unwrap();
    let removed = listed.iter().find(|m| m.address == "10.6.0.11").unwrap();
    assert_eq!(removed.provisioning_status, "PENDING_DELETE");
    let t0 = Instant::now();
    let now = waiter::wait_members(
        &cloud,
        &lb.id,
        &pool,
        &[("10.6.0.10".to_owned(), 8080)],
        &WaitOptions::default(),
    )
    .await
    .unwrap();
    assert_eq!(now.len(), 1);
    assert!(t0.elapsed() >= Duration::from_millis(300), "{:?}", t0.elapsed());
    loadbalancers::delete(&cloud, &lb.id, true).await.unwrap();
}
