use std::time::Duration;

use super::*;
use crate::adaptive::Distress;
use crate::priority::work_started;

const KIND: CallKind = CallKind {
    op: "test.call",
    size_class: 0,
};

fn admission(config: AimdConfig) -> Arc<Admission> {
    Arc::new(Admission::new(
        Service::Network,
        config,
        Arc::new(Metrics::default()),
    ))
}

/// A call that holds its place for `ms` and is answered with `verdict`.
async fn call(a: &Admission, ms: u64, verdict: Verdict) {
    let pass = a.enter(KIND).await.expect("admission");
    tokio::time::sleep(Duration::from_millis(ms)).await;
    pass.finish(verdict);
}

#[tokio::test(start_paused = true)]
async fn the_oldest_work_goes_first_not_the_first_to_ask() {
    let a = admission(AimdConfig::fixed(1));
    let t0 = Instant::now();
    let held = a.enter(KIND).await.expect("admission");
    let order = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    // Asked in the order new, newer, old: let through old, new, newer.
    for (name, began) in [("new", 10), ("newer", 20), ("old", 0)] {
        let (a, order) = (a.clone(), order.clone());
        tasks.push(tokio::spawn(work_started(
            t0 + Duration::from_millis(began),
            async move {
                let _pass = a.enter(KIND).await.expect("admission");
                order.lock().expect("order").push(name);
                tokio::time::sleep(Duration::from_millis(5)).await;
            },
        )));
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    drop(held);
    for t in tasks {
        t.await.expect("task");
    }
    assert_eq!(*order.lock().expect("order"), vec!["old", "new", "newer"]);
}

#[tokio::test(start_paused = true)]
async fn a_caller_dropped_while_queued_gives_its_place_back() {
    let a = admission(AimdConfig::fixed(1));
    let held = a.enter(KIND).await.expect("admission");
    let gave_up = {
        let a = a.clone();
        tokio::spawn(async move {
            let _ = tokio::time::timeout(Duration::from_millis(10), a.enter(KIND)).await;
        })
    };
    gave_up.await.expect("task");
    drop(held);
    // The one place is free again: this does not wait.
    let t = Instant::now();
    let _pass = a.enter(KIND).await.expect("admission");
    assert_eq!(t.elapsed(), Duration::ZERO);
    assert_eq!(a.lock().in_flight, 1);
    assert!(a.lock().queue.is_empty());
}

#[tokio::test(start_paused = true)]
async fn errors_cut_the_limit_and_quick_answers_grow_it() {
    let a = admission(AimdConfig {
        initial: 8,
        max: 16,
        ..AimdConfig::default()
    });
    // 8 at once, the service answers 503: one cut (the others were in flight already).
    let tasks: Vec<_> = (0..8)
        .map(|_| {
            let a = a.clone();
            tokio::spawn(async move {
                call(&a, 50, Verdict::Distress(Distress::ServerError)).await;
            })
        })
        .collect();
    for t in tasks {
        t.await.expect("task");
    }
    assert_eq!(a.limit(), 4);
    // Then a long run of quick answers with the limit in use: back up, to the ceiling.
    let tasks: Vec<_> = (0..400)
        .map(|_| {
            let a = a.clone();
            tokio::spawn(async move { call(&a, 10, Verdict::Answered).await })
        })
        .collect();
    for t in tasks {
        t.await.expect("task");
    }
    assert_eq!(a.limit(), 16);
}

/// Time at which each of `pods` pods, all asked at once, finished its three calls (100 ms each, 4 places).
async fn burst(ranked: bool) -> Vec<u128> {
    let a = admission(AimdConfig::fixed(4));
    let t0 = Instant::now();
    let tasks: Vec<_> = (0..40u64)
        .map(|i| {
            let a = a.clone();
            // The controller begins the pods one after another, a millisecond apart.
            let began = t0 + Duration::from_millis(i);
            let pod = async move {
                tokio::time::sleep_until(began).await;
                for _ in 0..3 {
                    call(&a, 100, Verdict::Neutral).await;
                }
                Instant::now().duration_since(t0).as_millis()
            };
            if ranked {
                tokio::spawn(work_started(began, pod))
            } else {
                tokio::spawn(pod)
            }
        })
        .collect();
    let mut done = Vec::new();
    for t in tasks {
        done.push(t.await.expect("task"));
    }
    done.sort_unstable();
    done
}

#[tokio::test(start_paused = true)]
async fn pods_of_a_burst_finish_one_after_another_when_ranked() {
    let fifo = burst(false).await;
    let ranked = burst(true).await;
    let median = |v: &[u128]| v[v.len() / 2];
    // Arrival order: every pod's last call queues behind every other pod's first two: none is done
    // before two thirds of the burst's time.
    assert!(fifo[0] * 3 >= fifo[39] * 2, "{fifo:?}");
    // Oldest first: the first pods are done after their own three calls, half of them by ~60 % of the
    // time (a pod's next call asks a moment after its previous one left, so a new pod's first call
    // sometimes takes that place); the last one is no later than before.
    assert!(median(&ranked) * 10 < ranked[39] * 7, "{ranked:?}");
    assert!(ranked[39] <= fifo[39], "{ranked:?} {fifo:?}");
    assert!(ranked[0] * 5 < fifo[0], "{ranked:?} {fifo:?}");
}
