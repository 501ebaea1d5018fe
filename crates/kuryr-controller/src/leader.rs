//! Leader election on a `coordination.k8s.io/v1` Lease: only the holder runs the controllers and the
//! garbage collector (every cloud write); standbys wait with their Kubernetes and OpenStack sessions open.
//! The holder renews every `duration - grace` seconds; when it dies a standby takes the Lease once it has
//! expired, so takeover takes at most `duration` seconds plus one list of the watched objects. A leader that
//! loses the Lease stops its controllers and exits (the Deployment restarts it as a standby), so two
//! replicas never write at once. A graceful shutdown releases the Lease for an immediate takeover.

use futures::future::{BoxFuture, Shared};
use futures::FutureExt;
use kube_lease_manager::{LeaseManagerBuilder, LeaseParams};
use tracing::info;

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
        } else if self.grace_s == 0 || self.grace_s >= self.duration_s {
            Err(format!(
                "leader-renew-grace-seconds: must be > 0 and below leader-lease-seconds ({})",
                self.duration_s
            ))
        } else if self.lease_name.is_empty() || self.namespace.is_empty() || self.identity.is_empty() {
            Err("leader-lease-name, leader-lease-namespace and the replica identity must not be empty".into())
        } else {
            Ok(())
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
    let lost = tokio::spawn(async move {
        loop {
            if watch.changed().await.is_err() || !*watch.borrow_and_update() {
                let _ = lost_tx.send(());
                return;
            }
        }
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
    let ended = if *leading.borrow() {
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
        let mut anonymous = cfg(10, 3);
        anonymous.identity.clear();
        assert!(anonymous.validate().is_err());
    }
}
