//! Repeats: each variant is measured `--repeats` times, the implementations' order rotated every repeat
//! (one run each, always in the same order, could not tell a gain from noise or from going first on a
//! fresher machine). Every repeat's record is kept; the record reported holds their medians.

use std::collections::BTreeMap;

use crate::record::{Implementation, Record, RepeatPlace};
use crate::stats::{round_ms, Spread};

/// Where each finished record goes (saved at once).
pub type Sink<'a> = dyn FnMut(Record) -> anyhow::Result<()> + 'a;

/// The implementations' order in repeat `r`: rotated by `r`, so two alternate and each of three goes first
/// once in three repeats.
pub fn order(impls: &[Implementation], r: usize) -> Vec<Implementation> {
    let mut v = impls.to_vec();
    if !v.is_empty() {
        let n = r % v.len();
        v.rotate_left(n);
    }
    v
}

/// Runs `one` for every implementation, `repeats` times in rotated order, and hands `out` each
/// implementation's combined record after every repeat: the result file is saved as it goes, so a run that
/// dies keeps what it measured (`out` replaces the earlier record of the same key).
pub async fn measure(
    impls: &[Implementation],
    repeats: usize,
    out: &mut Sink<'_>,
    mut one: impl AsyncFnMut(Implementation) -> Record,
) -> anyhow::Result<()> {
    let mut done: BTreeMap<&'static str, Vec<Record>> = BTreeMap::new();
    for r in 0..repeats.max(1) {
        for (position, i) in order(impls, r).into_iter().enumerate() {
            let mut record = one(i).await;
            record.repeat = Some(RepeatPlace {
                index: r as u32,
                position: position as u32,
            });
            let list = done.entry(i.name()).or_default();
            list.push(record);
            if let Some(c) = combine(list.clone()) {
                out(c)?;
            }
        }
    }
    Ok(())
}

/// One record for the repeats of one (scenario, implementation, variant), in repeat order: each figure is
/// the median of the repeats that have it, phases likewise; the repeats are kept whole in `repeats`
/// (their samples and `extra` stay there). A single repeat is returned as it is; none gives `None`.
pub fn combine(mut repeats: Vec<Record>) -> Option<Record> {
    if repeats.len() <= 1 {
        let mut r = repeats.pop()?;
        r.repeat = None;
        return Some(r);
    }
    let first = &repeats[0];
    let mut r = Record::new(first.scenario, first.implementation, first.variant.clone());
    r.pods = repeats.iter().find_map(|x| x.pods);
    let median = |get: fn(&Record) -> Option<f64>| {
        let v: Vec<f64> = repeats.iter().filter_map(get).collect();
        Spread::of(&v).map(|s| round_ms(s.median))
    };
    r.p50_s = median(|x| x.p50_s);
    r.p99_s = median(|x| x.p99_s);
    r.max_s = median(|x| x.max_s);
    r.neutron_writes_per_pod = median(|x| x.neutron_writes_per_pod);
    r.octavia_writes_per_service_create = median(|x| x.octavia_writes_per_service_create);
    r.octavia_writes_per_endpoints_change = median(|x| x.octavia_writes_per_endpoints_change);
    r.rss_mib = median(|x| x.rss_mib);
    r.cpu_s = median(|x| x.cpu_s);
    r.resync_s = median(|x| x.resync_s);
    let mut phases: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for x in &repeats {
        for (k, v) in &x.phases_s {
            phases.entry(k.clone()).or_default().push(*v);
        }
    }
    r.phases_s = phases
        .into_iter()
        .filter_map(|(k, v)| Some((k, round_ms(Spread::of(&v)?.median))))
        .collect();
    r.extra.insert("repeats".into(), repeats.len().into());
    let notes: Vec<String> = repeats
        .iter()
        .enumerate()
        .filter_map(|(i, x)| Some(format!("repeat {i}: {}", x.note.as_deref()?)))
        .collect();
    r.note = (!notes.is_empty()).then(|| notes.join("; "));
    r.repeats = repeats;
    Some(r)
}

/// A figure over a record's repeats (the record itself when it has none): median and range.
pub fn spread(r: &Record, get: impl Fn(&Record) -> Option<f64>) -> Option<Spread> {
    let v: Vec<f64> = if r.repeats.is_empty() {
        get(r).into_iter().collect()
    } else {
        r.repeats.iter().filter_map(get).collect()
    };
    Spread::of(&v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::Scenario;

    fn rec(p99: f64, note: Option<&str>) -> Record {
        let mut r = Record::new(Scenario::Burst, Implementation::KuryrRs, "cloudsim/pools");
        r.set_latencies(vec![p99 / 2.0, p99]);
        r.pods = Some(2);
        r.phases_s.insert("wait_wired".into(), p99);
        r.note = note.map(str::to_string);
        r
    }

    #[test]
    fn orders_rotate_so_no_implementation_always_goes_first() {
        use Implementation::*;
        let two = [KuryrRs, Upstream];
        assert_eq!(order(&two, 0), vec![KuryrRs, Upstream]);
        assert_eq!(order(&two, 1), vec![Upstream, KuryrRs]);
        assert_eq!(order(&two, 2), vec![KuryrRs, Upstream]);
        let three = [KuryrRs, Upstream, Floor];
        let firsts: Vec<_> = (0..3).map(|r| order(&three, r)[0]).collect();
        assert_eq!(firsts, vec![KuryrRs, Upstream, Floor]);
        assert!(order(&[], 3).is_empty());
    }

    #[test]
    fn combined_figures_are_medians_and_repeats_are_kept() {
        let c = combine(vec![rec(23.9, None), rec(114.8, Some("slow")), rec(46.1, None)]).expect("repeats");
        assert_eq!(c.p99_s, Some(46.1));
        assert_eq!(c.p50_s, Some(23.05));
        assert_eq!(c.phases_s["wait_wired"], 46.1);
        assert_eq!(c.repeats.len(), 3);
        assert_eq!(c.extra["repeats"], 3);
        assert_eq!(c.note.as_deref(), Some("repeat 1: slow"));
        assert!(c.samples_s.is_empty());
        let s = spread(&c, |r| r.p99_s).expect("three repeats");
        assert_eq!((s.median, s.min, s.max), (46.1, 23.9, 114.8));
        assert!(c.problems().is_empty(), "{:?}", c.problems());
        // One repeat stays a plain record.
        let one = combine(vec![rec(2.0, None)]).expect("one");
        assert!(one.repeats.is_empty() && one.repeat.is_none());
        assert_eq!(spread(&one, |r| r.p99_s).map(|s| s.min), Some(2.0));
        assert!(combine(Vec::new()).is_none());
    }

    #[test]
    fn a_failed_repeat_leaves_the_median_to_the_others() {
        let failed = Record::not_run(
            Scenario::Burst,
            Implementation::KuryrRs,
            "cloudsim/pools",
            "failed: warm-up",
        );
        let c = combine(vec![rec(4.0, None), failed]).expect("repeats");
        assert_eq!(c.p99_s, Some(4.0));
        assert_eq!(c.note.as_deref(), Some("repeat 1: failed: warm-up"));
    }

    #[tokio::test]
    async fn measure_saves_after_every_session_in_rotated_order() {
        use Implementation::*;
        let mut seen = Vec::new();
        let mut saved: Vec<Record> = Vec::new();
        let mut sink = |r: Record| -> anyhow::Result<()> {
            saved.push(r);
            Ok(())
        };
        measure(&[KuryrRs, Floor], 2, &mut sink, async |i| {
            seen.push(i);
            let mut r = rec(1.0, None);
            r.implementation = i;
            r
        })
        .await
        .expect("sink accepts");
        assert_eq!(seen, vec![KuryrRs, Floor, Floor, KuryrRs]);
        assert_eq!(saved.len(), 4);
        let last = saved.last().expect("saved");
        assert_eq!(last.implementation, KuryrRs);
        assert_eq!(last.repeats.len(), 2);
        assert_eq!(
            last.repeats[1].repeat,
            Some(RepeatPlace {
                index: 1,
                position: 1
            })
        );
    }
}
