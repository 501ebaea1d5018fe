//! ADD's wait for the pod's VIFs: a pure verdict on one cache snapshot, and the bounded loop that re-judges
//! on every cache change. Aborts early when the pod is gone, replaced (other UID) or being deleted —
//! upstream hung there until its timeout (0176b4a9).

use kuryr_api::{Vif, VifType};
use tokio::time::Instant;

use super::cache::{Lookup, NodeCache};
use crate::cni::{codes, CniError, PodArgs};

/// The outcome of judging one snapshot.
#[derive(Clone, Debug, PartialEq)]
pub enum Verdict {
    /// Every VIF active: `(ifname in the pod, vif)`, the default interface first, renamed to CNI_IFNAME.
    Ready(Vec<(String, Vif)>),
    /// Not yet; the reason ends up in the timeout error.
    Wait(String),
    /// Waiting is pointless.
    Abort(CniError),
}

/// What ADD waits for: VIFs to plug, or every VIF active.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Every VIF is there, and active unless it is one Neutron activates only once it is plugged.
    Plug,
    /// Every VIF active.
    Active,
}

/// A hypervisor's port (neutron-vif) goes ACTIVE when its agent (ovn-controller, the OVS agent) sees the
/// interface that names it: it is plugged first and waited for after, as upstream did. Nested VIFs are
/// activated by their trunk or VM port, without the pod.
pub fn plugged_before_active(vif: &Vif) -> bool {
    vif.vif_type == VifType::NeutronVif
}

/// [`judge`] in [`Phase::Active`].
pub fn evaluate(pod: &PodArgs, ifname: &str, view: &Lookup) -> Verdict {
    judge(pod, ifname, view, Phase::Active)
}

pub fn judge(pod: &PodArgs, ifname: &str, view: &Lookup, phase: Phase) -> Verdict {
    let key = pod.key();
    match (&view.pod, view.pods_synced) {
        (None, true) => {
            return Verdict::Abort(CniError::new(
                codes::UNKNOWN_CONTAINER,
                format!("pod {key} no longer exists"),
                "",
            ))
        }
        (Some(p), _) if pod.uid.as_deref().is_some_and(|u| u != p.uid) => {
            return Verdict::Abort(CniError::new(
                codes::UNKNOWN_CONTAINER,
                format!("pod {key} was replaced: this sandbox is for another pod UID"),
                format!(
                    "request UID {}, current pod UID {}",
                    pod.uid.as_deref().unwrap_or(""),
                    p.uid
                ),
            ))
        }
        (Some(p), _) if p.deleting => {
            return Verdict::Abort(CniError::new(
                codes::UNKNOWN_CONTAINER,
                format!("pod {key} is being deleted"),
                "",
            ))
        }
        _ => {}
    }
    let Some(port) = &view.port else {
        return Verdict::Wait(format!("no KuryrPort {key} yet"));
    };
    // A same-name StatefulSet pod's KuryrPort may still be the old one (d5f5db70).
    if let Some(uid) = &pod.uid {
        if &port.spec.pod_uid != uid {
            return Verdict::Wait(format!(
                "KuryrPort {key} belongs to pod UID {}, not {uid}",
                port.spec.pod_uid
            ));
        }
    }
    let Some(status) = &port.status else {
        return Verdict::Wait(format!("KuryrPort {key} has no status yet"));
    };
    if status.vifs.is_empty() {
        return Verdict::Wait(format!("KuryrPort {key} has no VIFs yet"));
    }
    let inactive: Vec<&str> = status
        .vifs
        .iter()
        // In the plug phase a VIF that activates once plugged counts as ready.
        .filter(|(_, v)| !(v.vif.active || phase == Phase::Plug && plugged_before_active(&v.vif)))
        .map(|(n, _)| n.as_str())
        .collect();
    if !inactive.is_empty() {
        return Verdict::Wait(format!("VIF(s) {} of {key} not active yet", inactive.join(", ")));
    }
    let default = status.default_vif().map(|(n, _)| n.to_string());
    let mut out: Vec<(String, Vif)> = Vec::with_capacity(status.vifs.len());
    for (name, v) in &status.vifs {
        if Some(name) == default.as_ref() {
            out.insert(0, (ifname.to_string(), v.vif.clone()));
        } else if name == ifname {
            // CNI_IFNAME is another VIF's name in the KuryrPort (e.g. `net1` under a meta-plugin): that VIF
            // takes the default's name, so no two interfaces of the pod share one.
            let swapped = default.clone().unwrap_or_else(|| name.clone());
            out.push((swapped, v.vif.clone()));
        } else {
            out.push((name.clone(), v.vif.clone()));
        }
    }
    Verdict::Ready(out)
}

/// Waits until [`judge`] is not `Wait`, at most until `deadline`; a timeout is code 11 (try again later).
pub async fn wait_for_vifs(
    cache: &NodeCache,
    pod: &PodArgs,
    ifname: &str,
    phase: Phase,
    deadline: Instant,
) -> Result<Vec<(String, Vif)>, CniError> {
    let mut rx = cache.subscribe();
    loop {
        rx.borrow_and_update();
        let reason = match judge(pod, ifname, &cache.lookup(&pod.namespace, &pod.name), phase) {
            Verdict::Ready(vifs) => return Ok(vifs),
            Verdict::Abort(e) => return Err(e),
            Verdict::Wait(reason) => reason,
        };
        match tokio::time::timeout_at(deadline, rx.changed()).await {
            Ok(Ok(())) => continue,
            Ok(Err(_)) => {
                return Err(CniError::new(
                    codes::INTERNAL,
                    "kuryr-daemon cache shut down",
                    reason,
                ));
            }
            Err(_) => {
                return Err(CniError::new(
                    codes::TRY_AGAIN_LATER,
                    match phase {
                        Phase::Plug => "timed out waiting for the pod's VIFs",
                        Phase::Active => "timed out waiting for the pod's plugged VIFs to be active",
                    },
                    reason,
                ))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;
    use crate::daemon::cache::PodState;
    use crate::testing::{mk_port, mk_vif};

    fn pod(uid: Option<&str>) -> PodArgs {
        PodArgs {
            namespace: "shop".into(),
            name: "web-0".into(),
            uid: uid.map(str::to_string),
        }
    }

    fn live(uid: &str) -> Option<PodState> {
        Some(PodState {
            uid: uid.into(),
            deleting: false,
        })
    }

    fn view(port: Option<kuryr_api::KuryrPort>, pod: Option<PodState>) -> Lookup {
        Lookup {
            port: port.map(Arc::new),
            pod,
            pods_synced: true,
        }
    }

    /// `web-0`'s wait for an active eth0, run beside the test that changes the cache under it.
    fn spawn_wait(
        cache: &Arc<NodeCache>,
        limit: Duration,
    ) -> tokio::task::JoinHandle<Result<Vec<(String, Vif)>, CniError>> {
        let cache = cache.clone();
        tokio::spawn(async move {
            wait_for_vifs(
                &cache,
                &pod(Some("u1")),
                "eth0",
                Phase::Active,
                Instant::now() + limit,
            )
            .await
        })
    }

    #[test]
    fn no_port_waits() {
        let v = evaluate(&pod(Some("u1")), "eth0", &view(None, live("u1")));
        assert!(matches!(v, Verdict::Wait(r) if r.contains("no KuryrPort")));
    }

    #[test]
    fn inactive_vif_waits_and_active_is_ready() {
        let p = mk_port("shop", "web-0", "u1", vec![("eth0", mk_vif(false))]);
        assert!(
            matches!(evaluate(&pod(Some("u1")), "eth0", &view(Some(p), live("u1"))), Verdict::Wait(r) if r.contains("not active"))
        );
        let p = mk_port("shop", "web-0", "u1", vec![("eth0", mk_vif(true))]);
        let Verdict::Ready(v) = evaluate(&pod(Some("u1")), "net0", &view(Some(p), live("u1"))) else {
            panic!("not ready")
        };
        assert_eq!(v[0].0, "net0", "default VIF takes CNI_IFNAME");
    }

    // Found by fuzz/fuzz_targets/crd_status.rs: with CNI_IFNAME `net1` and VIFs `eth0` (default) and
    // `net1`, both were to be wired as `net1` (the second bind fails, ADD never succeeds).
    #[test]
    fn cni_ifname_taken_by_another_vif_swaps_names_instead_of_duplicating() {
        let p = mk_port(
            "shop",
            "web-0",
            "u1",
            vec![("eth0", mk_vif(true)), ("net1", mk_vif(true))],
        );
        let Verdict::Ready(v) = evaluate(&pod(Some("u1")), "net1", &view(Some(p), live("u1"))) else {
            panic!("not ready")
        };
        let names: Vec<&str> = v.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["net1", "eth0"]);
    }

    #[test]
    fn empty_status_waits() {
        let p = mk_port("shop", "web-0", "u1", vec![]);
        assert!(matches!(
            evaluate(&pod(Some("u1")), "eth0", &view(Some(p), live("u1"))),
            Verdict::Wait(_)
        ));
    }

    #[test]
    fn kuryrport_of_an_older_same_name_pod_waits() {
        let p = mk_port("shop", "web-0", "old-uid", vec![("eth0", mk_vif(true))]);
        let v = evaluate(&pod(Some("new-uid")), "eth0", &view(Some(p), live("new-uid")));
        assert!(matches!(v, Verdict::Wait(r) if r.contains("old-uid")));
    }

    #[test]
    fn missing_uid_in_request_skips_the_uid_check() {
        let p = mk_port("shop", "web-0", "u1", vec![("eth0", mk_vif(true))]);
        assert!(matches!(
            evaluate(&pod(None), "eth0", &view(Some(p), live("u1"))),
            Verdict::Ready(_)
        ));
    }

    #[test]
    fn deleted_replaced_or_deleting_pods_abort_with_code_3() {
        let p = mk_port("shop", "web-0", "u1", vec![("eth0", mk_vif(false))]);
        for state in [
            None,
            live("u2"),
            Some(PodState {
                uid: "u1".into(),
                deleting: true,
            }),
        ] {
            match evaluate(&pod(Some("u1")), "eth0", &view(Some(p.clone()), state.clone())) {
                Verdict::Abort(e) => assert_eq!(e.code, codes::UNKNOWN_CONTAINER),
                other => panic!("{state:?}: {other:?}"),
            }
        }
    }

    #[test]
    fn unsynced_pod_cache_does_not_abort() {
        let mut v = view(None, None);
        v.pods_synced = false;
        assert!(matches!(evaluate(&pod(Some("u1")), "eth0", &v), Verdict::Wait(_)));
    }

    #[tokio::test]
    async fn wait_wakes_on_cache_change() {
        let cache = NodeCache::new();
        cache.set_pod_state("shop", "web-0", live("u1"));
        cache.apply_port(mk_port("shop", "web-0", "u1", vec![("eth0", mk_vif(false))]));
        let t = spawn_wait(&cache, Duration::from_secs(10));
        tokio::time::sleep(Duration::from_millis(50)).await;
        cache.apply_port(mk_port("shop", "web-0", "u1", vec![("eth0", mk_vif(true))]));
        let vifs = tokio::time::timeout(Duration::from_secs(2), t)
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        assert_eq!(vifs.len(), 1);
    }

    #[tokio::test]
    async fn wait_aborts_when_the_pod_is_deleted_meanwhile() {
        let cache = NodeCache::new();
        cache.set_pod_state("shop", "web-0", live("u1"));
        let t = spawn_wait(&cache, Duration::from_secs(30));
        tokio::time::sleep(Duration::from_millis(50)).await;
        cache.set_pod_state("shop", "web-0", None);
        let e = tokio::time::timeout(Duration::from_secs(2), t)
            .await
            .unwrap()
            .unwrap()
            .unwrap_err();
        assert_eq!(e.code, codes::UNKNOWN_CONTAINER);
    }

    #[test]
    fn an_inactive_neutron_vif_vif_is_plugged_first_and_a_nested_one_waited_for() {
        let mut hv = mk_vif(false);
        hv.vif_type = VifType::NeutronVif;
        let p = mk_port("shop", "web-0", "u1", vec![("eth0", hv.clone())]);
        let view = || view(Some(p.clone()), live("u1"));
        assert!(
            matches!(judge(&pod(Some("u1")), "eth0", &view(), Phase::Plug), Verdict::Ready(v) if !v[0].1.active)
        );
        assert!(matches!(
            judge(&pod(Some("u1")), "eth0", &view(), Phase::Active),
            Verdict::Wait(_)
        ));
        let nested = mk_port("shop", "web-0", "u1", vec![("eth0", mk_vif(false))]);
        assert!(matches!(
            judge(&pod(Some("u1")), "eth0", &super::tests::view(Some(nested), live("u1")), Phase::Plug),
            Verdict::Wait(r) if r.contains("not active")
        ));
    }

    #[tokio::test]
    async fn wait_times_out_with_code_11_and_the_last_reason() {
        let cache = NodeCache::new();
        cache.set_pod_state("shop", "web-0", live("u1"));
        cache.apply_port(mk_port("shop", "web-0", "u1", vec![("eth0", mk_vif(false))]));
        let e = wait_for_vifs(
            &cache,
            &pod(Some("u1")),
            "eth0",
            Phase::Active,
            Instant::now() + Duration::from_millis(100),
        )
        .await
        .unwrap_err();
        assert_eq!(e.code, codes::TRY_AGAIN_LATER);
        assert!(e.details.contains("not active"), "{e}");
    }
}
