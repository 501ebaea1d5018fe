//! The load balancer observer: one listing per tick for the whole cluster (load balancers, listeners,
//! pools with the cluster's tag) wakes the reconciles whose load balancer settled or drifted; no
//! reconcile polls its own. Counted from cloudsim's call log.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::channel::mpsc::UnboundedReceiver;
use futures::StreamExt;
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use kuryr_api::conditions::{is_condition_true, READY};
use kuryr_api::{KuryrLoadBalancer, Service};
use kuryr_cloudsim::Profile;
use kuryr_controller::loadbalancers::{self, ticks, CachedKlb};
use kuryr_controller::services::frontend;
use kuryr_core::lb::WakeReason;
use kuryr_openstack::octavia::{listeners, members};

use crate::apiserver;
use crate::harness::{TestCloud, NS};
use crate::loadbalancer::{lb_harness_with, named_service, named_slice, Lb};

/// The list calls one tick makes when no pool has a health monitor: load balancers, listeners, pools.
const LISTS_PER_TICK: usize = 3;

fn klb_path(name: &str) -> String {
    apiserver::path("openstack.org/v1", NS, "kuryrloadbalancers", name)
}

/// Service `name` at clusterIP `ip` with one port and endpoints `ips`, through the front end.
async fn service(lb: &mut Lb, name: &str, ip: &str, ips: &[&str]) {
    let path = apiserver::path("v1", NS, "services", name);
    let stored = lb.api.put(&path, &named_service(name, "ClusterIP", ip));
    lb.slices
        .apply_watcher_event(&watcher::Event::Apply(named_slice(name, ips)));
    let svc: Service = serde_json::from_value(stored).unwrap();
    frontend::reconcile(Arc::new(svc), lb.ctx.clone()).await.unwrap();
}

fn klb(lb: &Lb, name: &str) -> KuryrLoadBalancer {
    serde_json::from_value(lb.api.get(&klb_path(name)).expect("the front end wrote it")).unwrap()
}

/// One reconcile of `name` as the API server holds it.
async fn round(lb: &mut Lb, name: &str) -> KuryrLoadBalancer {
    let k: CachedKlb =
        serde_json::from_value(lb.api.get(&klb_path(name)).expect("the front end wrote it")).unwrap();
    lb.klbs.apply_watcher_event(&watcher::Event::Apply(k.clone()));
    loadbalancers::reconcile(Arc::new(k), lb.ctx.clone())
        .await
        .unwrap();
    klb(lb, name)
}

fn ready(k: &KuryrLoadBalancer) -> bool {
    k.status
        .as_ref()
        .is_some_and(|s| is_condition_true(&s.conditions, READY))
}

/// Octavia reads of the kinds a reconcile polls with (status tree, show): none may come from a tick.
fn per_lb_reads(cloud: &TestCloud) -> usize {
    cloud
        .sim
        .calls()
        .iter()
        .filter(|c| c.method == "GET" && c.op.starts_with("octavia.") && !c.op.ends_with(".list"))
        .filter(|c| c.op != "octavia.versions" && c.op != "octavia.providers.list")
        .count()
}

/// N load balancers waiting for ACTIVE cost the same few list calls per tick whatever N is, and each
/// reconcile is woken once, when its load balancer has settled: one status read each, no poll.
#[tokio::test]
async fn waiting_load_balancers_cost_a_few_list_calls_per_tick_not_a_read_each() {
    const N: usize = 20;
    let cloud = TestCloud::start().await;
    let mut lb = lb_harness_with(&cloud, |_| {}).await;
    // The observer's first listing: reconciles leave waiting to it from now on.
    ticks::tick(&lb.ctx).await.unwrap();
    // Load balancers take time to provision (cloudsim's provider timings, scaled down).
    cloud.sim.set_profile(Profile {
        time_scale: 0.05,
        ..Profile::default()
    });
    for i in 0..N {
        let name = format!("svc{i}");
        service(&mut lb, &name, &format!("10.96.1.{}", i + 1), &["10.10.0.50"]).await;
        // Finalizer, then the create; the round leaves it to the observer.
        round(&mut lb, &name).await;
        let k = round(&mut lb, &name).await;
        assert!(k.status.unwrap().loadbalancer.is_some(), "{name} created");
    }
    assert_eq!(cloud.calls("octavia.loadbalancers.create"), N);

    let mut woken: BTreeMap<String, usize> = BTreeMap::new();
    let mut ticks = 0;
    while woken.len() < N {
        assert!(ticks < 2000, "not every load balancer settled: {woken:?}");
        cloud.sim.clear_calls();
        let wakes = ticks::tick(&lb.ctx).await.unwrap();
        ticks += 1;
        let lists = cloud.sim.calls_matching("octavia.*").len();
        assert_eq!(lists, LISTS_PER_TICK, "tick {ticks}: {:?}", cloud.sim.calls());
        assert_eq!(per_lb_reads(&cloud), 0);
        for w in wakes {
            assert_eq!(w.reason, WakeReason::Settled);
            *woken.entry(w.key.obj.name.clone()).or_default() += 1;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(woken.values().all(|n| *n == 1), "each woken once: {woken:?}");
    eprintln!("{N} waiting load balancers: {ticks} ticks of {LISTS_PER_TICK} list calls each");

    // Each woken reconcile reads its tree once and goes Ready.
    cloud.sim.clear_calls();
    for i in 0..N {
        let k = round(&mut lb, &format!("svc{i}")).await;
        assert!(ready(&k), "svc{i}: {:?}", k.status);
    }
    assert_eq!(cloud.calls("octavia.loadbalancers.status"), N);
    // Settled, nothing changed: a tick wakes nobody and reads nothing per load balancer.
    cloud.sim.clear_calls();
    assert!(ticks::tick(&lb.ctx).await.unwrap().is_empty());
    assert_eq!(cloud.sim.calls_matching("octavia.*").len(), LISTS_PER_TICK);
}

/// The harness with the observer running as the controller runs it, idle ticks `drift_interval` apart;
/// the stream of reconciles it wakes.
async fn with_observer_running(
    cloud: &TestCloud,
    drift_interval: Duration,
) -> (Lb, UnboundedReceiver<ObjectRef<KuryrLoadBalancer>>) {
    let lb = lb_harness_with(cloud, |c| {
        c.drift_interval = drift_interval;
        // Ticks while a reconcile waits: not a busy loop.
        c.poll_min = Duration::from_millis(20);
    })
    .await;
    let wakes = lb.ctx.observer.wakes();
    tokio::spawn(ticks::run(lb.ctx.clone(), std::future::pending()));
    (lb, wakes)
}

/// A member and a listener deleted behind the controller's back: the observer's next listing (its
/// period is the drift interval) wakes the reconcile, which builds the missing part again.
#[tokio::test]
async fn a_member_and_a_listener_deleted_behind_our_back_are_restored_by_the_observer() {
    let cloud = TestCloud::start().await;
    let (mut lb, mut wakes) = with_observer_running(&cloud, Duration::from_millis(50)).await;
    service(&mut lb, "web", "10.96.0.10", &["10.10.0.50", "10.10.0.51"]).await;
    let mut k = round(&mut lb, "web").await;
    while !ready(&k) {
        // A round that is not due does no I/O: without a pause this loop never lets the observer run
        // (one thread), and the build waited for the stuck check, minutes away.
        tokio::time::sleep(Duration::from_millis(20)).await;
        k = round(&mut lb, "web").await;
    }
    let st = k.status.clone().unwrap();
    let (listener, pool) = (st.listeners[0].id.clone(), st.pools[0].id.clone());
    let member = st.members[0].id.clone();

    // Behind our back: one member, then the listener.
    members::delete(&cloud.cloud, &pool, &member).await.unwrap();
    listeners::delete(&cloud.cloud, &listener).await.unwrap();
    cloud.sim.clear_calls();

    // Driven as the controller does: a reconcile whenever the observer wakes it.
    let mut restored = false;
    for _ in 0..50 {
        let woken = tokio::time::timeout(Duration::from_secs(30), wakes.next())
            .await
            .expect("the observer wakes the reconcile")
            .expect("wake stream open");
        assert_eq!(woken.name, "web");
        let k = round(&mut lb, "web").await;
        let st = k.status.clone().unwrap();
        let listed = listeners::list(&cloud.cloud, Vec::new()).await.unwrap();
        if ready(&k) && listed.len() == 1 && st.members.len() == 2 {
            let pool = &st.pools[0].id;
            let in_octavia = members::list(&cloud.cloud, pool).await.unwrap();
            assert_eq!(in_octavia.len(), 2);
            assert_ne!(listed[0].id, listener, "a new listener");
            restored = true;
            break;
        }
    }
    assert!(restored, "not restored");
    assert_eq!(
        cloud.calls("octavia.loadbalancers.create"),
        0,
        "repaired in place"
    );
    assert!(cloud.calls("octavia.listeners.create") + cloud.calls("octavia.pools.create") >= 1);
}

/// A wait begun while the observer sleeps its idle tick (here an hour): the observer looks within the
/// first poll instead, and wakes the reconcile when the load balancer has settled. Before, every write
/// made during an idle sleep waited out the drift interval.
#[tokio::test]
async fn a_wait_begun_during_an_idle_sleep_is_looked_at_at_once() {
    let cloud = TestCloud::start().await;
    let (mut lb, mut wakes) = with_observer_running(&cloud, Duration::from_secs(3600)).await;
    // The first (empty) listing is done and the observer sleeps its hour: nothing waits yet.
    while !lb.ctx.observer.observing() {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    service(&mut lb, "web", "10.96.0.10", &["10.10.0.50"]).await;
    let mut k = round(&mut lb, "web").await;
    let mut rounds = 0;
    while !ready(&k) {
        rounds += 1;
        assert!(rounds < 20, "not Ready after {rounds} wakes: {:?}", k.status);
        if k.status.as_ref().is_some_and(|s| s.loadbalancer.is_some()) {
            let woken = tokio::time::timeout(Duration::from_secs(60), wakes.next())
                .await
                .expect("a wait begun during the idle hour is looked at before it ends")
                .expect("wake stream open");
            assert_eq!(woken.name, "web");
        }
        k = round(&mut lb, "web").await;
    }
}

/// Octavia reads in one idle minute (every load balancer Ready, nothing changing) with `n` Services: the
/// observer's ticks at the default drift interval; no reconcile reads its own load balancer.
async fn idle_reads_per_minute(n: usize) -> usize {
    let cloud = TestCloud::start().await;
    let mut lb = lb_harness_with(&cloud, |_| {}).await;
    ticks::tick(&lb.ctx).await.unwrap();
    for i in 0..n {
        let name = format!("svc{i}");
        let ip = format!("10.96.{}.{}", 1 + i / 250, 1 + i % 250);
        service(&mut lb, &name, &ip, &["10.10.0.50"]).await;
        // As the controller runs it: a round, then whenever a listing wakes it.
        let mut k = round(&mut lb, &name).await;
        while !ready(&k) {
            ticks::tick(&lb.ctx).await.unwrap();
            k = round(&mut lb, &name).await;
        }
    }
    // The listing that sees them all settled.
    ticks::tick(&lb.ctx).await.unwrap();
    cloud.sim.clear_calls();
    let interval = lb.ctx.config.drift_interval;
    let ticks = (Duration::from_secs(60).as_millis() / interval.as_millis().max(1)) as usize;
    for _ in 0..ticks {
        assert!(ticks::tick(&lb.ctx).await.unwrap().is_empty());
        // Every KuryrLoadBalancer reconciled again (a resync): none is due, none reads.
        for i in 0..n {
            round(&mut lb, &format!("svc{i}")).await;
        }
    }
    let reads = cloud.sim.calls_matching("octavia.*").len();
    eprintln!("{n} Services idle: {reads} Octavia reads per minute ({ticks} ticks of {interval:?})");
    // Each tree is held once, in the observer's listing: the copy the create left went with the first
    // round that read the listing.
    for i in 0..n {
        let k = round(&mut lb, &format!("svc{i}")).await;
        let id = k
            .status
            .and_then(|s| s.loadbalancer)
            .map(|l| l.id)
            .expect("created");
        assert!(lb.ctx.observer.current(&id).is_some());
        assert!(
            lb.ctx
                .schedule()
                .observed(&id, Duration::MAX, Instant::now())
                .is_none(),
            "a second copy of {id}'s tree"
        );
    }
    reads
}

#[tokio::test]
async fn idle_octavia_reads_per_minute_do_not_grow_with_the_number_of_services() {
    let ten = idle_reads_per_minute(10).await;
    let two_hundred = idle_reads_per_minute(200).await;
    assert_eq!(ten, two_hundred);
    assert_eq!(ten, 4 * LISTS_PER_TICK, "4 ticks a minute at the default 15 s");
}
