//! The garbage collector: a periodic sweep of everything tagged with our cluster id (ports incl. trunk
//! subports, security groups, networks, subnets, load balancers, floating IPs), deleting what no live
//! Kubernetes object owns. The cloud listing is `kuryr_openstack::owned`'s, the live owners
//! `kuryr_api::owners`', the decisions (two sightings, grace period, deletion order) `kuryr_core::gc`'s;
//! this module deletes and counts. `kuryrctl gc` puts the same pieces together for one look.

pub mod delete;

use std::collections::BTreeMap;
use std::future::Future;
use std::time::{Duration, Instant};

use kuryr_api::owners::live_uids;
use kuryr_core::gc::{GcBook, ReportLine, Tagged, Verdict};
use kuryr_openstack::owned::{self, TaggedObject, TaggedResource};
use kuryr_openstack::Cloud;
use tracing::{info, info_span, warn, Instrument};

use crate::errors::{Error, Result};
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
    book: GcBook<TaggedResource>,
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
        let listed = owned::list(&self.cloud, &self.cluster_id, self.project_id.as_deref()).await?;
        let live = live_uids(&self.client)
            .await
            .map_err(Error::kube("list owners"))?;
        self.metrics.gc_swept(&lb_states(&listed));
        let objects: Vec<_> = listed.iter().map(decidable).collect();
        let verdicts = self.book.sweep(Instant::now(), &objects, &live);
        let mut report = SweepReport::default();
        for (obj, verdict) in &verdicts {
            report.lines.push(ReportLine::new(obj, *verdict));
            if *verdict != Verdict::Collect {
                continue;
            }
            let Some(found) = listed
                .iter()
                .find(|l| l.resource == obj.resource && l.id == obj.id)
            else {
                continue;
            };
            match delete::delete(&self.cloud, found).await {
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

/// What the collector decides on: the object and the owner its tags name.
fn decidable(o: &TaggedObject) -> Tagged<TaggedResource> {
    Tagged::new(o.resource, &o.id, &o.name, &o.owner.kind, &o.owner.uid, o.age)
}

/// Load balancers by provisioning status.
fn lb_states(listed: &[TaggedObject]) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for l in listed
        .iter()
        .filter(|l| l.resource == TaggedResource::LoadBalancer)
    {
        *out.entry(l.provisioning_status.clone()).or_insert(0) += 1;
    }
    out
}
