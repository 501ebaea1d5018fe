use super::*;

const S: Duration = Duration::from_secs(1);

fn index() -> LbIndex<&'static str> {
    LbIndex::new(IndexConfig {
        poll_min: S,
        poll_max: 4 * S,
        drift_interval: 15 * S,
    })
}

fn part(status: &str, attrs: &str) -> Part {
    Part {
        status: ProvisioningStatus::parse(status),
        attrs: AttrsDigest::of(attrs.as_bytes()),
    }
}

fn lb(id: &str, status: &str, parts: &[(&str, &str, &str)]) -> Sighting {
    Sighting {
        id: id.to_owned(),
        owner: Some(format!("owner-of-{id}")),
        lb: part(status, ""),
        parts: parts
            .iter()
            .map(|(k, s, a)| ((*k).to_owned(), part(s, a)))
            .collect(),
    }
}

fn reasons(wakes: &[Wake<&'static str>]) -> Vec<(&'static str, WakeReason)> {
    wakes.iter().map(|w| (w.key, w.reason)).collect()
}

#[test]
fn a_waiting_load_balancer_is_woken_once_a_later_listing_shows_it_settled() {
    let mut ix = index();
    let t0 = Instant::now();
    ix.apply(Vec::new(), t0);
    ix.await_settle("lb1", "web", true, t0 + S);
    // A listing begun before the write says nothing of it.
    let pending = vec![lb("lb1", "PENDING_CREATE", &[])];
    assert!(ix.apply(pending.clone(), t0).is_empty());
    assert!(ix.apply(pending, t0 + 2 * S).is_empty(), "still pending");
    // ovn: the LB is ACTIVE before its listener.
    let children = vec![lb("lb1", "ACTIVE", &[("listener/l1", "PENDING_CREATE", "a")])];
    assert!(ix.apply(children, t0 + 3 * S).is_empty());
    let done = vec![lb("lb1", "ACTIVE", &[("listener/l1", "ACTIVE", "a")])];
    assert_eq!(
        reasons(&ix.apply(done.clone(), t0 + 4 * S)),
        vec![("web", WakeReason::Settled)]
    );
    assert!(ix.apply(done, t0 + 5 * S).is_empty(), "told once");
}

#[test]
fn an_error_is_settled_too() {
    let mut ix = index();
    let t0 = Instant::now();
    ix.apply(Vec::new(), t0);
    ix.await_settle("lb1", "web", true, t0);
    let wakes = ix.apply(vec![lb("lb1", "ERROR", &[])], t0 + S);
    assert_eq!(reasons(&wakes), vec![("web", WakeReason::Settled)]);
}

#[test]
fn many_waiting_load_balancers_are_told_by_one_listing() {
    let mut ix: LbIndex<String> = LbIndex::new(IndexConfig {
        poll_min: S,
        poll_max: 4 * S,
        drift_interval: 15 * S,
    });
    let t0 = Instant::now();
    ix.apply(Vec::new(), t0);
    for i in 0..200 {
        ix.await_settle(&format!("lb{i}"), format!("svc{i}"), true, t0);
    }
    // Half settled.
    let listing = (0..200)
        .map(|i| {
            lb(
                &format!("lb{i}"),
                if i % 2 == 0 { "ACTIVE" } else { "PENDING_UPDATE" },
                &[],
            )
        })
        .collect();
    let wakes = ix.apply(listing, t0 + S);
    assert_eq!(wakes.len(), 100);
    assert!(wakes.iter().all(|w| w.reason == WakeReason::Settled));
}

#[test]
fn drift_behind_our_back_wakes_the_owner_of_a_settled_load_balancer() {
    let mut ix = index();
    let t0 = Instant::now();
    let before = lb(
        "lb1",
        "ACTIVE",
        &[
            ("listener/l1", "ACTIVE", "port 80"),
            ("pool/p1", "ACTIVE", "members m1,m2"),
        ],
    );
    ix.watch("lb1", "web", t0);
    assert!(
        ix.apply(vec![before.clone()], t0 + S).is_empty(),
        "the first listing is a baseline"
    );
    assert!(ix.apply(vec![before.clone()], t0 + 2 * S).is_empty());
    // A member deleted: the pool lists other member ids.
    let member_gone = lb(
        "lb1",
        "ACTIVE",
        &[
            ("listener/l1", "ACTIVE", "port 80"),
            ("pool/p1", "ACTIVE", "members m2"),
        ],
    );
    assert_eq!(
        reasons(&ix.apply(vec![member_gone.clone()], t0 + 3 * S)),
        vec![("web", WakeReason::Changed)]
    );
    // A listener deleted.
    let listener_gone = lb("lb1", "ACTIVE", &[("pool/p1", "ACTIVE", "members m2")]);
    assert_eq!(
        reasons(&ix.apply(vec![listener_gone], t0 + 4 * S)),
        vec![("web", WakeReason::Changed)]
    );
    // Someone else's write in progress: told when it settles, not before.
    let pending = lb(
        "lb1",
        "PENDING_UPDATE",
        &[("pool/p1", "PENDING_UPDATE", "members m2")],
    );
    assert!(ix.apply(vec![pending], t0 + 5 * S).is_empty());
    assert_eq!(
        reasons(&ix.apply(vec![before], t0 + 6 * S)),
        vec![("web", WakeReason::Changed)]
    );
}

#[test]
fn a_load_balancer_that_disappears_is_told_once_but_one_just_made_is_not() {
    let mut ix = index();
    let t0 = Instant::now();
    ix.watch("lb1", "web", t0);
    ix.apply(vec![lb("lb1", "ACTIVE", &[])], t0 + S);
    assert_eq!(
        reasons(&ix.apply(Vec::new(), t0 + 2 * S)),
        vec![("web", WakeReason::Gone)]
    );
    assert!(ix.apply(Vec::new(), t0 + 3 * S).is_empty());
    // Made after the listing began.
    ix.await_settle("lb2", "api", true, t0 + 5 * S);
    assert!(ix.apply(Vec::new(), t0 + 4 * S).is_empty());
}

#[test]
fn what_a_listing_shows_is_current_only_when_it_began_after_the_last_write() {
    let mut ix = index();
    let t0 = Instant::now();
    assert!(ix.current("lb1").is_none() && !ix.observing());
    ix.watch("lb1", "web", t0);
    ix.apply(vec![lb("lb1", "ACTIVE", &[])], t0 + S);
    assert!(ix.observing());
    assert!(ix.current("lb1").is_some());
    ix.await_settle("lb1", "web", true, t0 + 2 * S);
    assert!(ix.current("lb1").is_none(), "the write changed it since");
    ix.apply(vec![lb("lb1", "ACTIVE", &[])], t0 + 3 * S);
    assert!(ix.current("lb1").is_some());
}

#[test]
fn other_settled_load_balancers_of_the_owner_are_told_as_strays() {
    let mut ix = index();
    let t0 = Instant::now();
    ix.watch("lb1", "web", t0);
    let mine = lb("lb1", "ACTIVE", &[]);
    let stray = |status: &str| Sighting {
        owner: mine.owner.clone(),
        ..lb("old", status, &[])
    };
    // Given up on while stuck: not a stray to delete until Octavia lets go of it.
    assert!(ix
        .apply(vec![mine.clone(), stray("PENDING_UPDATE")], t0 + S)
        .is_empty());
    assert_eq!(
        reasons(&ix.apply(vec![mine.clone(), stray("ACTIVE")], t0 + 2 * S)),
        vec![("web", WakeReason::Strays)]
    );
    assert!(ix
        .apply(vec![mine.clone(), stray("ACTIVE")], t0 + 3 * S)
        .is_empty());
    assert!(ix.apply(vec![mine], t0 + 4 * S).is_empty());
}

#[test]
fn ticks_are_fast_while_a_reconcile_waits_and_back_off() {
    let mut ix = index();
    let t0 = Instant::now();
    assert_eq!(ix.next_tick(), 15 * S);
    ix.await_settle("lb1", "web", true, t0);
    assert_eq!(ix.next_tick(), S);
    assert_eq!(ix.next_tick(), S.mul_f64(1.5));
    ix.apply(vec![lb("lb1", "ACTIVE", &[])], t0 + S);
    assert_eq!(ix.next_tick(), 15 * S);
    ix.unwatch("lb1");
    assert_eq!(ix.next_tick(), 15 * S);
}

#[test]
fn a_complete_listing_tells_which_owners_have_no_load_balancer() {
    let mut ix = index();
    // Before the first listing nothing is known: the caller lists by tags.
    assert!(!ix.lists_none_of("owner-of-lb1"));
    ix.apply(vec![lb("lb1", "PENDING_DELETE", &[])], Instant::now());
    // One being deleted is still one: the tag list decides what to make of it.
    assert!(!ix.lists_none_of("owner-of-lb1"));
    assert!(ix.lists_none_of("owner-of-lb2"));
    ix.apply(vec![lb("lb2", "ACTIVE", &[])], Instant::now());
    assert!(ix.lists_none_of("owner-of-lb1"));
    assert!(!ix.lists_none_of("owner-of-lb2"));
}
