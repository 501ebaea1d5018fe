//! The garbage collector: a periodic sweep of everything tagged with our cluster id (ports incl. trunk
//! subports, security groups, networks, subnets, load balancers, floating IPs), deleting what no live
//! Kubernetes object owns. Decisions (two sightings, grace period, deletion order) are
//! `kuryr_core::gc`'s; this module lists, deletes and counts. `kuryrctl gc --dry-run` runs [`plan`].

pub mod delete;
pub mod inventory;

use std::future::Future;
use std::time::{Duration, Instant};

use kuryr_core::gc::{dry_run, GcBook, Verdict};
use kuryr_openstack::Cloud;
use tracing::{info, info_span, warn, Instrument};

pub use inventory::{cloud_inventory, live_uids, Inventory, Listed, ReportLine};

use crate::errors::Result;
use crate::metrics::Metrics;

/// Sweep interval and grace period.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GcConfig {
    /// Zero disables the collector.
    pub interval: Duration,
    /// An orphan younger than this is kept, however often seen.
    pub grace: Duration,
}

impl Default for GcConfig {
    fn default() -> Self {
        Self {
            interval: Duration::from_secs(300),
            grace: Duration::from_secs(600),
        }
    }
}

/// What one sweep saw and did.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct SweepReport {
    pub lines: Vec<ReportLine>,
    pub collected: usize,
    pub failed: usize,
    /// Orphans seen but not (yet) confirmed.
    pub suspects: usize,
}

pub struct Collector {
    cloud: Cloud,
    client: kube::Client,
    cluster_id: String,
    project_id: Option<String>,
    book: GcBook,
    metrics: Metrics,
}

impl Collector {
    pub fn new(
        cloud: Cloud,
        client: kube::Client,
        cluster_id: String,
        project_id: Option<String>,
        grace: Duration,
        metrics: Metrics,
    ) -> Self {
        Self {
            cloud,
            client,
            cluster_id,
            project_id,
            book: GcBook::new(grace),
            metrics,
        }
    }

    /// One sweep: the cloud is listed before the owners, so an object created during the sweep has its
    /// owner in the owner list (or is merely suspected, never collected on this sighting).
    pub async fn sweep(&mut self) -> Result<SweepReport> {
        let inv = cloud_inventory(&self.cloud, &self.cluster_id, self.project_id.as_deref()).await?;
        let live = live_uids(&self.client).await?;
        self.metrics.gc_swept(&inv.lb_states());
        let verdicts = self.book.sweep(Instant::now(), &inv.tagged(), &live);
        let mut report = SweepReport::default();
        for (obj, verdict) in &verdicts {
            report.lines.push(ReportLine::new(obj, *verdict));
            if *verdict != Verdict::Collect {
                continue;
            }
            let Some(listed) = inv.get(obj.resource, &obj.id) else {
                continue;
            };
            match delete::delete(&self.cloud, listed).await {
                Ok(()) => {
                    info!(resource = obj.resource.label(), id = %obj.id, owner_kind = %obj.owner_kind,
                        owner_uid = %obj.owner_uid, "collected orphan");
                    self.book.collected(obj.resource, &obj.id);
                    self.metrics.gc_collected(obj.resource.label());
                    report.collected += 1;
                }
                Err(e) => {
                    // Kept in the book: retried on the next sweep.
                    warn!(resource = obj.resource.label(), id = %obj.id,
                        error = &e as &dyn std::error::Error, "cannot collect orphan");
                    self.metrics.gc_failed(obj.resource.label());
                    report.failed += 1;
                }
            }
        }
        report.suspects = self.book.suspects();
        self.metrics.gc_suspects(report.suspects);
        Ok(report)
    }

    /// Sweeps every `interval` until `shutdown`.
    pub async fn run(mut self, interval: Duration, shutdown: impl Future<Output = ()>) {
        let mut tick = tokio::time::interval(interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let sweeps = async {
            loop {
                tick.tick().await;
                match self.sweep().instrument(info_span!("gc_sweep")).await {
                    Ok(r) => info!(
                        collected = r.collected,
                        failed = r.failed,
                        suspects = r.suspects,
                        "gc sweep"
                    ),
                    Err(e) => {
                        self.metrics.failed("gc", e.metric_label());
                        warn!(error = &e as &dyn std::error::Error, "gc sweep aborted");
                    }
                }
            }
        };
        tokio::select! {
            _ = sweeps => {}
            _ = shutdown => {}
        }
    }
}

/// What the collector would do, from one look (`kuryrctl gc --dry-run`): orphans older than `grace` are
/// `collect` (deleted once a running collector confirms them), younger ones `suspect`.
pub async fn plan(
    cloud: &Cloud,
    client: &kube::Client,
    cluster_id: &str,
    project_id: Option<&str>,
    grace: Duration,
) -> Result<Vec<ReportLine>> {
    let inv = cloud_inventory(cloud, cluster_id, project_id).await?;
    let live = live_uids(client).await?;
    Ok(dry_run(&inv.tagged(), &live, grace)
        .iter()
        .map(|(o, v)| ReportLine::new(o, *v))
        .collect())
}
