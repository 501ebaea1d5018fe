use proptest::prelude::*;

use super::*;

fn load(free: u32, in_flight: u32, pending: u32) -> PoolLoad {
    PoolLoad {
        free,
        in_flight,
        pending,
    }
}

fn limits(min: u32, max: u32, batch: u32) -> PoolLimits {
    PoolLimits::new(min, max, batch).unwrap()
}

#[test]
fn an_empty_pool_with_default_limits_creates_one_batch() {
    assert_eq!(
        plan(load(0, 0, 0), PoolLimits::default()),
        PoolPlan {
            create: 10,
            release: 0
        }
    );
}

#[test]
fn a_pool_at_its_low_watermark_does_nothing() {
    assert_eq!(plan(load(5, 0, 0), PoolLimits::default()), PoolPlan::default());
    assert_eq!(plan(load(2, 3, 0), PoolLimits::default()), PoolPlan::default());
}

#[test]
fn pending_pods_are_covered_at_once_on_top_of_the_low_watermark() {
    // 25 pods waiting, nothing free: 30 ports in three bulk creates, not one batch per round.
    let p = plan(load(0, 0, 25), PoolLimits::default());
    assert_eq!(p.create, 30);
    assert_eq!(
        batches(p.create, PoolLimits::default()).collect::<Vec<_>>(),
        vec![10, 10, 10]
    );
}

#[test]
fn the_last_batch_is_trimmed_at_the_high_watermark() {
    assert_eq!(plan(load(0, 0, 0), limits(5, 8, 10)).create, 8);
}

#[test]
fn ports_above_the_high_watermark_are_released_from_free_ones_only() {
    assert_eq!(
        plan(load(12, 0, 0), limits(2, 8, 4)),
        PoolPlan {
            create: 0,
            release: 4
        }
    );
    assert_eq!(
        plan(load(3, 10, 0), limits(2, 8, 4)),
        PoolPlan {
            create: 0,
            release: 3
        }
    );
    assert_eq!(plan(load(12, 0, 4), limits(2, 8, 4)), PoolPlan::default());
}

#[test]
fn released_ports_are_recycled_until_the_pool_is_full() {
    assert!(keep_released_port(load(100, 0, 0), PoolLimits::default()));
    assert!(keep_released_port(load(7, 0, 0), limits(2, 8, 4)));
    assert!(!keep_released_port(load(8, 0, 0), limits(2, 8, 4)));
}

#[test]
fn contradicting_limits_are_refused() {
    assert!(PoolLimits::new(5, 0, 0).is_err());
    assert!(PoolLimits::new(5, 4, 1).is_err());
    assert_eq!(PoolLimits::new(5, 0, 10).unwrap().max_free(), None);
}

#[test]
fn batches_split_a_create_into_bulk_calls() {
    let l = limits(0, 0, 4);
    assert_eq!(batches(10, l).collect::<Vec<_>>(), vec![4, 4, 2]);
    assert_eq!(batches(0, l).count(), 0);
}

// === properties ===

fn any_limits() -> impl Strategy<Value = PoolLimits> {
    (0u32..50, 0u32..80, 1u32..20).prop_map(|(min, extra, batch)| {
        // max 0 (unbounded) a fifth of the time, else somewhere at or above min.
        let max = if extra % 5 == 0 { 0 } else { min + extra };
        limits(min, max, batch)
    })
}

fn any_load() -> impl Strategy<Value = PoolLoad> {
    (0u32..200, 0u32..60, 0u32..100).prop_map(|(f, i, p)| load(f, i, p))
}

proptest! {
    #[test]
    fn a_plan_never_creates_and_releases_at_once(l in any_load(), lim in any_limits()) {
        let p = plan(l, lim);
        prop_assert!(p.create == 0 || p.release == 0);
        prop_assert!(p.release <= l.free);
    }

    #[test]
    fn creates_are_whole_batches_unless_trimmed_at_max(l in any_load(), lim in any_limits()) {
        let p = plan(l, lim);
        let spare_after = (l.free + l.in_flight + p.create).saturating_sub(l.pending);
        let trimmed = lim.max_free().is_some_and(|max| spare_after == max);
        prop_assert!(p.create.is_multiple_of(lim.batch()) || trimmed);
    }

    #[test]
    fn spare_never_passes_max_or_min_plus_a_batch(l in any_load(), lim in any_limits()) {
        let p = plan(l, lim);
        if p.create > 0 {
            let spare_after = l.free + l.in_flight + p.create - l.pending;
            prop_assert!(spare_after >= lim.min_free(), "refill reaches the low watermark");
            prop_assert!(spare_after < lim.min_free() + lim.batch());
            if let Some(max) = lim.max_free() {
                prop_assert!(spare_after <= max);
            }
        }
    }

    #[test]
    fn every_waiting_pod_is_covered_by_one_plan(l in any_load(), lim in any_limits()) {
        let p = plan(l, lim);
        prop_assert!(l.free + l.in_flight + p.create >= l.pending);
    }

    #[test]
    fn nothing_is_created_when_spare_meets_the_low_watermark(l in any_load(), lim in any_limits()) {
        if l.free + l.in_flight >= l.pending + lim.min_free() {
            prop_assert_eq!(plan(l, lim).create, 0);
        }
    }

    #[test]
    fn a_pool_converges_within_two_rounds_and_stays_put(l in any_load(), lim in any_limits()) {
        // Each round: the plan's creates and the in-flight ones land, its releases are done, and waiting
        // pods take their ports. Two rounds because a release cannot touch ports still in flight.
        let mut now = l;
        for _ in 0..2 {
            let p = plan(now, lim);
            let free = now.free + now.in_flight + p.create - p.release;
            now = load(free - now.pending.min(free), 0, 0);
        }
        prop_assert_eq!(plan(now, lim), PoolPlan::default());
        prop_assert!(now.free >= lim.min_free());
        if let Some(max) = lim.max_free() {
            prop_assert!(now.free <= max);
        }
    }

    #[test]
    fn a_recycled_port_never_pushes_the_pool_into_a_release(l in any_load(), lim in any_limits()) {
        if plan(l, lim).release == 0 && keep_released_port(l, lim) {
            let after = load(l.free + 1, l.in_flight, l.pending);
            prop_assert_eq!(plan(after, lim).release, 0);
        }
    }
}

proptest! {
    #[test]
    fn batches_add_up_and_none_exceeds_the_batch_size(n in 0u32..500, batch in 1u32..30) {
        let lim = limits(0, 0, batch);
        let parts: Vec<u32> = batches(n, lim).collect();
        prop_assert_eq!(parts.iter().sum::<u32>(), n);
        prop_assert!(parts.iter().all(|b| *b >= 1 && *b <= batch));
        prop_assert_eq!(parts.len() as u32, n.div_ceil(batch));
    }
}
