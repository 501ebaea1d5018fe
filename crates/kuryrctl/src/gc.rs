//! `kuryrctl gc --dry-run`: the garbage collector's own listing and decisions (`kuryr_controller::gc::plan`),
//! printed. `collect` lines are what a running collector deletes on its next confirming sweep; `suspect`
//! lines are orphans inside the grace period; `unknown_kind` objects are never collected.

use std::time::Duration;

use kuryr_controller::gc::{plan, ReportLine};
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
