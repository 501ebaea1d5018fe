//! `kuryrctl gc` (always a dry run): the garbage collector's own listing and decisions, from one look,
//! printed: the cloud objects `kuryr_openstack::owned` lists, held against the live owners `kuryr_api::owners` finds by
//! `kuryr_core::gc::dry_run`. `collect` lines are what a running collector deletes on its next confirming
//! sweep; `suspect` lines are orphans inside the grace period; `unknown_kind` objects are never collected.

use std::time::Duration;

use anyhow::Context as _;
use kuryr_api::owners::live_uids;
use kuryr_core::gc::{dry_run, ReportLine, Tagged};
use kuryr_openstack::{owned, Cloud};
use serde::Serialize;

use crate::cli::{Cli, GcArgs};
use crate::output::{emit, toned, Format, Progress, Table, Tone};

#[derive(Debug, Serialize)]
pub struct GcReport {
    pub cluster_id: String,
    pub grace_seconds: u64,
    pub owned: usize,
    pub would_collect: usize,
    pub suspects: usize,
    pub objects: Vec<ReportLine>,
}

pub fn report(cluster_id: &str, grace: Duration, lines: Vec<ReportLine>) -> GcReport {
    let count = |v: &str| lines.iter().filter(|l| l.verdict == v).count();
    GcReport {
        cluster_id: cluster_id.to_owned(),
        grace_seconds: grace.as_secs(),
        owned: count("owned"),
        would_collect: count("collect"),
        suspects: count("suspect"),
        objects: lines,
    }
}

/// What the collector would do: orphans older than `grace` are `collect` (deleted once a running collector
/// confirms them), younger ones `suspect`.
pub async fn plan(
    cloud: &Cloud,
    client: &kube::Client,
    cluster_id: &str,
    project_id: Option<&str>,
    grace: Duration,
) -> anyhow::Result<Vec<ReportLine>> {
    // The cloud before the owners, as the collector does: an object made meanwhile has its owner listed.
    let listed = owned::list(cloud, cluster_id, project_id).await?;
    let live = live_uids(client).await.context("kubernetes list owners")?;
    let objects: Vec<_> = listed
        .iter()
        .map(|o| Tagged::new(o.resource, &o.id, &o.name, &o.owner.kind, &o.owner.uid, o.age))
        .collect();
    Ok(dry_run(&objects, &live, grace)
        .iter()
        .map(|(o, v)| ReportLine::new(o, *v))
        .collect())
}

pub fn table(r: &GcReport) -> Table {
    let mut t = Table::new(vec!["RESOURCE", "ID", "NAME", "OWNER", "AGE", "VERDICT"]);
    for l in r.objects.iter().filter(|l| l.verdict != "owned") {
        let tone = match l.verdict {
            "collect" => Tone::Bad,
            "suspect" => Tone::Warn,
            _ => Tone::Plain,
        };
        t.row(vec![
            l.resource.into(),
            l.id.clone().into(),
            l.name.clone().into(),
            format!("{}/{}", l.owner_kind, l.owner_uid).into(),
            l.age_seconds.map_or("?".to_owned(), |a| format!("{a}s")).into(),
            toned(l.verdict, tone),
        ]);
    }
    t
}

pub async fn run(cli: &Cli, a: &GcArgs, fmt: Format, out: &mut dyn std::io::Write) -> anyhow::Result<i32> {
    let mut progress = Progress::new(3);
    let cloud = crate::connect::cloud(cli).await?;
    progress.step("connected to OpenStack");
    let client = crate::connect::kube_client(cli).await?;
    progress.step("connected to Kubernetes");
    let project = crate::connect::project(cli, &cloud);
    let grace = Duration::from_secs(a.grace_seconds);
    let lines = plan(&cloud, &client, &cli.cluster_id, project.as_deref(), grace).await?;
    progress.step("listed tagged objects and their owners");
    progress.finish();
    let r = report(&cli.cluster_id, grace, lines);
    emit(out, fmt, &table(&r), &r)?;
    if fmt == Format::Table {
        writeln!(
            out,
            "{} owned, {} would be collected, {} suspect (younger than {}s)",
            r.owned, r.would_collect, r.suspects, r.grace_seconds
        )?;
    }
    Ok(0)
}
