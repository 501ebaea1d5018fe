//! Self-repair on cloudsim's fault injection: a load balancer stuck in PENDING_UPDATE and one gone to
//! ERROR are each replaced once the configured limit passes (Event + metric), the Service served again by a
//! new load balancer; listeners, pools and members deleted behind the controller's back come back at the
//! next drift check, and so does a load balancer deleted outright. A create a killed controller sent, which
//! lands after its Service was deleted, is deleted too.

mod simnets;
mod svc_common;

use std::time::Duration;

use anyhow::{ensure, Context as _};
use kuryr_api::PostParams;
use kuryr_cloudsim::{FaultRule, LbFaultRule, LbOutcome, LbPhase};
use kuryr_openstack::octavia::{listeners, loadbalancers, members, pools};
use lab_tests::Lab;
use svc_common::{lb_id, mk_service, pod_ips, shape, Backend, Harness};

async fn start(lab: &Lab) -> anyhow::Result<Harness> {
    let backend = Backend::sim("amphora", |_| {}).await?;
    Harness::start(lab, backend, |c| c.drift_interval = Duration::from_secs(2)).await
}

fn repairs(h: &Harness, reason: &str) -> u64 {
    h.metrics
        .lb_repairs
        .get_or_create(&[("reason", reason.to_owned())])
        .get()
}

/// One ready pod behind Service `name`, more pods added by `grow`.
async fn service_with_pod(h: &Harness, name: &str) -> anyhow::Result<(String, Vec<String>)> {
    let app = [("app", name)];
    let ips = pod_ips(3);
    h.ready_pods(&[(format!("{name}-0"), ips[0].clone())], &app, true)
        .await?;
    h.services()
        .create(
            &PostParams::default(),
            &mk_service(name, &[("web", 80, "TCP", 8080)], Some(&app)),
        )
        .await?;
    let k = h.wait_klb(name, "1 member", |k| shape(k) == (1, 1, 1)).await?;
    Ok((lb_id(&k), ips))
}

#[tokio::test]
async fn a_load_balancer_stuck_pending_update_is_replaced_on_cloudsim() -> anyhow::Result<()> {
    let lab = Lab::require();
    let h = start(&lab).await?;
    let result = async {
        let (first, ips) = service_with_pod(&h, "stuck").await?;
        let sim = h.backend.sim.as_ref().expect("cloudsim");
        sim.add_lb_fault(LbFaultRule {
            name: Some(format!("{}/stuck", h.ns)),
            on: LbPhase::Update,
            outcome: LbOutcome::Stuck,
            count: Some(1),
            ..LbFaultRule::default()
        });
        // The member replace for a second pod leaves the LB in PENDING_UPDATE for good.
        h.ready_pods(&[("stuck-1".into(), ips[1].clone())], &[("app", "stuck")], true)
            .await?;
        let k = h
            .wait_klb("stuck", "a new load balancer with 2 members", |k| {
                shape(k) == (1, 1, 2) && lb_id(k) != first
            })
            .await?;
        let ev = h.events("LoadBalancerReplaced").await?;
        ensure!(
            ev.iter().any(|e| {
                let m = e.message.clone().unwrap_or_default();
                // The limit: 6 s, plus 3 s (--lb-pending-per-object-ms) for each of the 2 members the write
                // it is stuck on carried.
                m.contains(&first) && m.contains("PENDING_UPDATE") && m.contains("limit 12s")
            }),
            "Event naming the stuck LB, its state and the limit: {:?}",
            ev.iter().map(|e| e.message.clone()).collect::<Vec<_>>()
        );
        ensure!(
            repairs(&h, "stuck") == 1,
            "lb_repairs{{reason=stuck}} = {}",
            repairs(&h, "stuck")
        );
        // The abandoned LB is deleted once Octavia lets go of it (an operator resetting its state).
        let old = loadbalancers::get(&h.backend.check, &first).await?;
        ensure!(
            old.provisioning_status == "PENDING_UPDATE",
            "old LB {}",
            old.provisioning_status
        );
        let url = format!("{}/_sim/loadbalancers/{first}/status", sim.url());
        reqwest::Client::new()
            .post(url)
            .json(&serde_json::json!({"provisioning_status": "ACTIVE"}))
            .send()
            .await?
            .error_for_status()?;
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        loop {
            let ids: Vec<String> = h.tagged_lbs().await?.into_iter().map(|l| l.id).collect();
            if ids == vec![lb_id(&k)] {
                break;
            }
            ensure!(
                std::time::Instant::now() < deadline,
                "stray LBs not swept: {ids:?}"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        h.services().delete("stuck", &Default::default()).await?;
        h.wait_gone("stuck").await
    }
    .await;
    h.finish(result).await
}

#[tokio::test]
async fn a_load_balancer_in_error_is_replaced_on_cloudsim() -> anyhow::Result<()> {
    let lab = Lab::require();
    let h = start(&lab).await?;
    let result = async {
        let (first, ips) = service_with_pod(&h, "broken").await?;
        h.backend
            .sim
            .as_ref()
            .expect("cloudsim")
            .add_lb_fault(LbFaultRule {
                name: Some(format!("{}/broken", h.ns)),
                on: LbPhase::Update,
                outcome: LbOutcome::Error,
                count: Some(1),
                ..LbFaultRule::default()
            });
        h.ready_pods(&[("broken-1".into(), ips[1].clone())], &[("app", "broken")], true)
            .await?;
        h.wait_klb("broken", "a new load balancer with 2 members", |k| {
            shape(k) == (1, 1, 2) && lb_id(k) != first
        })
        .await?;
        let ev = h.events("LoadBalancerReplaced").await?;
        ensure!(
            ev.iter()
                .any(|e| e.message.clone().unwrap_or_default().contains("ERROR")),
            "Event naming ERROR"
        );
        ensure!(
            repairs(&h, "error") == 1,
            "lb_repairs{{reason=error}} = {}",
            repairs(&h, "error")
        );
        match loadbalancers::get(&h.backend.check, &first).await {
            Err(e) if e.is_not_found() => {}
            other => anyhow::bail!("the ERROR LB was not deleted: {other:?}"),
        }
        ensure!(h.tagged_lbs().await?.len() == 1, "one LB for the Service");
        h.services().delete("broken", &Default::default()).await?;
        h.wait_gone("broken").await
    }
    .await;
    h.finish(result).await
}

#[tokio::test]
async fn drift_is_repaired_on_cloudsim() -> anyhow::Result<()> {
    let lab = Lab::require();
    let h = start(&lab).await?;
    let result = async {
        let app = [("app", "drift")];
        let ips = pod_ips(2);
        h.ready_pods(
            &[("d0".into(), ips[0].clone()), ("d1".into(), ips[1].clone())],
            &app,
            true,
        )
        .await?;
        h.services()
            .create(
                &PostParams::default(),
                &mk_service(
                    "drift",
                    &[("a", 80, "TCP", 8080), ("b", 81, "TCP", 8081)],
                    Some(&app),
                ),
            )
            .await?;
        let k = h
            .wait_klb("drift", "2 listeners, 4 members", |k| shape(k) == (2, 2, 4))
            .await?;
        let st = k.status.clone().unwrap_or_default();
        let cloud = &h.backend.check;
        // Behind our back: one member of pool 1, and listener 2 with its pool.
        let p1 = &st.pools[0];
        let m = st.members.iter().find(|m| m.pool_id == p1.id).expect("member");
        members::delete(cloud, &p1.id, &m.id).await?;
        wait_lb_active(&h, &lb_id(&k)).await?;
        let l2 = st
            .listeners
            .iter()
            .find(|l| Some(&l.id) != p1.listener_id.as_ref())
            .expect("listener");
        let p2 = st
            .pools
            .iter()
            .find(|p| p.listener_id.as_ref() == Some(&l2.id))
            .expect("pool");
        pools::delete(cloud, &p2.id).await?;
        wait_lb_active(&h, &lb_id(&k)).await?;
        listeners::delete(cloud, &l2.id).await?;
        let k2 = h
            .wait_klb("drift", "listener, pool and member restored", |k2| {
                shape(k2) == (2, 2, 4)
                    && k2
                        .status
                        .as_ref()
                        .is_some_and(|s| s.listeners.iter().all(|l| l.id != l2.id))
            })
            .await?;
        ensure!(lb_id(&k2) == lb_id(&k), "same load balancer, repaired in place");
        // The whole LB deleted: built again.
        loadbalancers::delete(cloud, &lb_id(&k), true).await?;
        h.wait_klb("drift", "a new load balancer", |k3| {
            shape(k3) == (2, 2, 4) && lb_id(k3) != lb_id(&k)
        })
        .await?;
        ensure!(repairs(&h, "lost") >= 1, "lb_repairs{{reason=lost}}");
        h.services().delete("drift", &Default::default()).await?;
        h.wait_gone("drift").await
    }
    .await;
    h.finish(result).await
}

/// The chaos suite's leak (CI of 2026-11-27): a load balancer create held by Octavia, the controller killed
/// while it waits, the Service deleted. The next controller's cleanup lists nothing yet; the create lands
/// after it. The cleanup must hold the finalizers until the create cannot land any more (one request
/// timeout after the new process started), then delete what landed.
#[tokio::test]
async fn a_create_a_killed_controller_sent_is_deleted_with_its_service_on_cloudsim() -> anyhow::Result<()> {
    held_create(Duration::from_secs(4), Duration::from_secs(10), false).await
}

/// As above, when the new controller makes a load balancer of its own before the Service's deletion reaches
/// it (CI of stop 49, on a slow machine): the one it recorded is ACTIVE, yet its predecessor's create may
/// still land beside it, so the cleanup holds all the same.
#[tokio::test]
async fn a_create_a_killed_controller_sent_lands_beside_the_next_ones_and_both_go_on_cloudsim(
) -> anyhow::Result<()> {
    held_create(Duration::from_secs(15), Duration::from_secs(25), true).await
}

/// `hold`: how long cloudsim holds the killed controller's create; `timeout`: the clients' request timeout
/// (the cleanup's window); `second_create`: the Service is deleted once the restarted controller's own
/// load balancer is ACTIVE, rather than at once.
async fn held_create(hold: Duration, timeout: Duration, second_create: bool) -> anyhow::Result<()> {
    let lab = Lab::require();
    let backend = Backend::sim("amphora", |_| {})
        .await?
        .with_request_timeout(timeout)
        .await?;
    let mut h = Harness::start(&lab, backend, |_| {}).await?;
    let result = async {
        let before = sim(&h)?.faults_fired();
        sim(&h)?.add_fault(FaultRule {
            op: "octavia.loadbalancers.create".into(),
            hold_ms: Some(hold.as_millis() as u64),
            count: Some(1),
            ..FaultRule::default()
        });
        let app = [("app", "landing")];
        h.ready_pods(&[("landing-0".into(), pod_ips(1)[0].clone())], &app, true)
            .await?;
        h.services()
            .create(
                &PostParams::default(),
                &mk_service("landing", &[("web", 80, "TCP", 8080)], Some(&app)),
            )
            .await?;
        // The create has reached Octavia and is held there.
        let deadline = std::time::Instant::now() + h.wait;
        while sim(&h)?.faults_fired() == before {
            ensure!(
                std::time::Instant::now() < deadline,
                "no load balancer create reached cloudsim"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        h.kill_and_restart();
        if second_create {
            // Ready: its own load balancer recorded and ACTIVE.
            h.wait_klb("landing", "the restarted controller's load balancer", |_| true)
                .await?;
            ensure!(
                creates(&h, false)? == 1 && creates(&h, true)? == 0,
                "the held create landed before the restarted controller's own was ACTIVE (hold {hold:?})"
            );
        }
        h.services().delete("landing", &Default::default()).await?;
        h.wait_gone("landing").await?;
        // Once the held create has landed (the call the fault marks), nothing of the Service may be left.
        let deadline = std::time::Instant::now() + h.wait;
        while creates(&h, true)? == 0 {
            ensure!(
                std::time::Instant::now() < deadline,
                "the held create never completed"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let left: Vec<String> = h
            .tagged_lbs()
            .await?
            .into_iter()
            .map(|l| format!("{} ({})", l.id, l.provisioning_status))
            .collect();
        ensure!(
            left.is_empty(),
            "load balancers left after the Service was deleted: {left:?}"
        );
        let waits = h.events("CreateMayLand").await?;
        ensure!(!waits.is_empty(), "no CreateMayLand Event for the held cleanup");
        Ok(())
    }
    .await;
    h.finish(result).await
}

fn sim(h: &Harness) -> anyhow::Result<&kuryr_cloudsim::SimHandle> {
    h.backend.sim.as_ref().context("a cloudsim backend")
}

/// Load balancer creates cloudsim answered: the held one (`held`, the call its fault marks) or the others.
fn creates(h: &Harness, held: bool) -> anyhow::Result<usize> {
    Ok(sim(h)?
        .calls_matching("octavia.loadbalancers.create")
        .iter()
        .filter(|c| c.fault.is_some() == held)
        .count())
}

async fn wait_lb_active(h: &Harness, id: &str) -> anyhow::Result<()> {
    kuryr_openstack::waiter::wait_lb_active(&h.backend.check, id, &Default::default()).await?;
    Ok(())
}
