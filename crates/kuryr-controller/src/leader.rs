//! Leader election on a `coordination.k8s.io/v1` Lease: only the holder runs the controllers and the
//! garbage collector (every cloud write); standbys wait with their Kubernetes and OpenStack sessions open.
//! The holder renews every `duration - grace` seconds; when it dies a standby takes the Lease once it has
//! expired, so takeover takes at most `duration` seconds plus one list of the watched objects. A leader that
//! loses the Lease stops its controllers and exits (the Deployment restarts it as a standby). Since the
//! lease crate keeps retrying (and so keeps saying "leader") while the API server is unreachable, the
//! leader also fences itself: it reads the Lease every 500 ms and steps down when another replica holds it
//! or when it has not seen its own renewal for `duration - 1 s`, i.e. before a standby may take over. A
//! graceful shutdown releases the Lease for an immediate takeover.

use std::time::{Duration, Instant};

use futures::future::{BoxFuture, Shared};
use futures::FutureExt;
use kube::api::Api;
use kube_lease_manager::{LeaseManagerBuilder, LeaseParams};
use kuryr_api::Lease;
use tracing::{info, warn};

use crate::metrics::Metrics;

/// Where the Lease is and how long it lasts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaderConfig {
    pub lease_name: String,
    pub namespace: String,
    /// Unique per replica (the pod name in a Deployment).
    pub identity: String,
    /// Seconds a Lease stays valid without renewal: the worst-case takeover time.
    pub duration_s: u64,
    /// The holder renews this many seconds before expiry.
    pub grace_s: u64,
}

impl LeaderConfig {
    /// `0 < grace < duration`, checked here so a bad value fails at start with the option's name.
    pub fn validate(&self) -> Result<(), String> {
        if self.duration_s == 0 {
            Err("leader-lease-seconds: must be > 0".into())
        } else if self.grace_s < 2 || self.grace_s >= self.duration_s {
            Err(format!(
                "leader-renew-grace-seconds: must be at least 2 and below leader-lease-seconds ({})",
                self.duration_s
            ))
        } else if self.lease_name.is_empty() || self.namespace.is_empty() || self.identity.is_empty() {
            Err("leader-lease-name, leader-lease-namespace and the replica identity must not be empty".into())
        } else {
            Ok(())
        }
    }
}

/// How often the leader reads its Lease to fence itself.
pub const FENCE_POLL: Duration = Duration::from_millis(500);

/// Whether the leader must stop writing: the Lease names someone else, or its renewal has not been seen
/// for so long (`duration - 1 s`) that a standby may take the Lease before the next check.
pub fn must_step_down(holder_is_me: bool, renewal_unseen_for: Duration, cfg: &LeaderConfig) -> bool {
    !holder_is_me || renewal_unseen_for + Duration::from_secs(1) >= Duration::from_secs(cfg.duration_s)
}

/// Returns when the leader must stop (see [`must_step_down`]).
async fn fence(api: Api<Lease>, cfg: LeaderConfig) {
    let mut last_renew: Option<String> = None;
    let mut seen_at = Instant::now();
    loop {
        tokio::time::sleep(FENCE_POLL).await;
        let mut holder_is_me = true;
        match api.get_opt(&cfg.lease_name).await {
            Ok(Some(lease)) => {
                let spec = lease.spec.unwrap_or_default();
                holder_is_me = spec.holder_identity.as_deref() == Some(cfg.identity.as_str());
                let renew = spec.renew_time.map(|t| format!("{t:?}"));
                if renew != last_renew {
                    last_renew = renew;
                    seen_at = Instant::now();
                }
            }
            Ok(None) => holder_is_me = false,
            Err(e) => warn!(
                error = &e as &dyn std::error::Error,
                "cannot read the leader Lease"
            ),
        }
        if must_step_down(holder_is_me, seen_at.elapsed(), &cfg) {
            warn!(
                holder_is_me,
                unseen_s = seen_at.elapsed().as_secs_f64(),
                "leadership not confirmed; stepping down"
            );
            return;
        }
    }
}

/// How [`run_elected`] ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// Shutdown was asked for (as leader or standby).
    Shutdown,
    /// The Lease was lost while leading: the process must exit.
    LostLease,
}

pub type Stop = Shared<BoxFuture<'static, ()>>;

/// Waits for the Lease, then runs `work(stop)` until `shutdown` or until the Lease is lost (`stop` completes
/// in both cases and `work` is awaited to its end).
pub async fn run_elected<W, F>(
    client: kube::Client,
    cfg: &LeaderConfig,
    metrics: &Metrics,
    shutdown: Stop,
    work: W,
) -> anyhow::Result<Ended>
where
    W: FnOnce(Stop) -> F,
    F: std::future::Future<Output = anyhow::Result<()>>,
{
    cfg.validate().map_err(anyhow::Error::msg)?;
    let lease_api: Api<Lease> = Api::namespaced(client.clone(), &cfg.namespace);
    let manager = LeaseManagerBuilder::new(client, &cfg.lease_name)
        .with_namespace(&cfg.namespace)
        .with_parameters(LeaseParams::new(&cfg.identity, cfg.duration_s, cfg.grace_s))
        .build()
        .await?;
    let (mut leading, task) = manager.watch().await;
    info!(lease = %cfg.lease_name, namespace = %cfg.namespace, identity = %cfg.identity, "standing by for the Lease");
    let acquired = async {
        while !*leading.borrow_and_update() {
            if leading.changed().await.is_err() {
                return false;
            }
        }
        true
    };
    let got = tokio::select! {
        got = acquired => got,
        _ = shutdown.clone() => false,
    };
    if !got {
        drop(leading);
        let _ = task.await;
        return Ok(Ended::Shutdown);
    }
    info!(identity = %cfg.identity, "acquired the Lease; leading");
    metrics.leader.set(1);
    let (lost_tx, lost_rx) = tokio::sync::oneshot::channel::<()>();
    let mut watch = leading.clone();
    let fenced = fence(lease_api, cfg.clone());
    let lost = tokio::spawn(async move {
        let released = async {
            loop {
                if watch.changed().await.is_err() || !*watch.borrow_and_update() {
                    return;
                }
            }
        };
        tokio::select! {
            _ = released => {}
            _ = fenced => {}
        }
        let _ = lost_tx.send(());
    });
    let stop: Stop = {
        let shutdown = shutdown.clone();
        async move {
            tokio::select! {
                _ = shutdown => {}
                _ = lost_rx => {}
            }
        }
        .boxed()
        .shared()
    };
    let result = work(stop).await;
    lost.abort();
    metrics.leader.set(0);
    let ended = if *leading.borrow() && shutdown.peek().is_some() {
        Ended::Shutdown
    } else {
        Ended::LostLease
    };
    drop(leading);
    let _ = task.await;
    result?;
    Ok(ended)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(duration_s: u64, grace_s: u64) -> LeaderConfig {
        LeaderConfig {
            lease_name: "kuryr-controller".into(),
            namespace: "kube-system".into(),
            identity: "pod-a".into(),
            duration_s,
            grace_s,
        }
    }

    #[test]
    fn lease_timings_are_checked_before_the_lease_crate_sees_them() {
        assert!(cfg(10, 3).validate().is_ok());
        assert!(cfg(0, 3).validate().unwrap_err().contains("leader-lease-seconds"));
        assert!(cfg(10, 10)
            .validate()
            .unwrap_err()
            .contains("leader-renew-grace-seconds"));
        assert!(cfg(10, 0).validate().is_err());
        assert!(cfg(10, 1).validate().is_err());
        let mut anonymous = cfg(10, 3);
        anonymous.identity.clear();
        assert!(anonymous.validate().is_err());
    }

    #[test]
    fn a_leader_steps_down_before_a_standby_may_take_over() {
        let c = cfg(10, 3);
        // Renewed every 7 s, checked every 0.5 s: never more than ~7.5 s unseen while all is well.
        assert!(!must_step_down(true, Duration::from_millis(7_500), &c));
        assert!(must_step_down(true, Duration::from_secs(9), &c));
        assert!(must_step_down(false, Duration::ZERO, &c));
    }
}
