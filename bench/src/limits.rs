//! What kuryr-rs's OpenStack client allowed while a scenario ran: its adaptive concurrency limit, the calls
//! in flight and the calls queued for one cloud service (Neutron in the burst, Octavia in the Services
//! creates), sampled from the controller's `/metrics` every
//! [`EVERY`], and the limit's moves by reason over the run. Tells whether the limit was what the pods
//! waited for (queued > 0 with in_flight at the limit) or something else was (no queue).

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{json, Value};
use tokio::task::JoinHandle;

use crate::controllers::counter_sum;

/// How often the gauges are read.
pub const EVERY: Duration = Duration::from_millis(250);

/// One reading of the gauges.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Reading {
    pub limit: f64,
    pub in_flight: f64,
    pub queued: f64,
}

impl Reading {
    /// From a `/metrics` text: the gauges of `service`.
    pub fn parse(text: &str, service: &str) -> Self {
        let label = format!("service=\"{service}\"");
        let gauge = |name: &str| counter_sum(text, &format!("{name}{{"), &label);
        Reading {
            limit: gauge("kuryr_openstack_concurrency_limit"),
            in_flight: gauge("kuryr_openstack_in_flight"),
            queued: gauge("kuryr_openstack_queued"),
        }
    }
}

/// The limit's moves of `service` by reason, as counted so far.
pub fn moves(text: &str, service: &str) -> BTreeMap<String, f64> {
    let prefix = "kuryr_openstack_concurrency_limit_moves_total{";
    let label = format!("service=\"{service}\"");
    let mut out = BTreeMap::new();
    for line in text
        .lines()
        .filter(|l| l.starts_with(prefix) && l.contains(&label))
    {
        let reason = line
            .split("reason=\"")
            .nth(1)
            .and_then(|r| r.split('"').next())
            .unwrap_or("?");
        if let Some(v) = line.rsplit(' ').next().and_then(|v| v.parse::<f64>().ok()) {
            *out.entry(reason.to_owned()).or_default() += v;
        }
    }
    out
}

/// A sampler running until [`Sampler::finish`].
pub struct Sampler {
    task: JoinHandle<Vec<Reading>>,
    stop: tokio::sync::watch::Sender<bool>,
    moves0: BTreeMap<String, f64>,
    url: String,
    service: &'static str,
}

async fn metrics(http: &reqwest::Client, url: &str) -> Option<String> {
    http.get(format!("{url}/metrics"))
        .send()
        .await
        .ok()?
        .text()
        .await
        .ok()
}

impl Sampler {
    /// Starts reading `url`'s gauges of `service` (its label in the controller's metrics: `neutron`,
    /// `octavia`).
    pub async fn start(url: String, service: &'static str) -> Self {
        let http = reqwest::Client::new();
        let moves0 = metrics(&http, &url)
            .await
            .map(|t| moves(&t, service))
            .unwrap_or_default();
        let (stop, mut stopped) = tokio::sync::watch::channel(false);
        let task_url = url.clone();
        let task = tokio::spawn(async move {
            let mut out = Vec::new();
            loop {
                if let Some(t) = metrics(&http, &task_url).await {
                    out.push(Reading::parse(&t, service));
                }
                tokio::select! {
                    _ = tokio::time::sleep(EVERY) => {}
                    _ = stopped.changed() => break,
                }
            }
            out
        });
        Self {
            task,
            stop,
            moves0,
            url,
            service,
        }
    }

    /// Stops and summarises: per gauge its median and max (the limit also its min), the share of readings
    /// with calls queued, the limit's moves by reason over the run and before it, and the limit it began at.
    pub async fn finish(self) -> Value {
        let _ = self.stop.send(true);
        let readings = self.task.await.unwrap_or_default();
        let moves1 = metrics(&reqwest::Client::new(), &self.url)
            .await
            .map(|t| moves(&t, self.service))
            .unwrap_or_default();
        let moved: BTreeMap<&String, f64> = moves1
            .iter()
            .map(|(k, v)| (k, v - self.moves0.get(k).copied().unwrap_or(0.0)))
            .filter(|(_, v)| *v > 0.0)
            .collect();
        let mut s = summary(&readings);
        s["moves"] = json!(moved);
        // What the limit went through before (the controller's start and warm-up): a cut there ends slow start.
        s["moves_before"] = json!(self.moves0);
        s["limit_at_start"] = json!(readings.first().map(|r| r.limit));
        s
    }
}

fn median_max(mut v: Vec<f64>) -> (f64, f64, f64) {
    if v.is_empty() {
        return (0.0, 0.0, 0.0);
    }
    v.sort_by(f64::total_cmp);
    (v[0], v[v.len() / 2], v[v.len() - 1])
}

/// The readings summarised (see [`Sampler::finish`]).
pub fn summary(readings: &[Reading]) -> Value {
    let (lmin, lmed, lmax) = median_max(readings.iter().map(|r| r.limit).collect());
    let (_, fmed, fmax) = median_max(readings.iter().map(|r| r.in_flight).collect());
    let (_, qmed, qmax) = median_max(readings.iter().map(|r| r.queued).collect());
    let queued = readings.iter().filter(|r| r.queued > 0.0).count();
    json!({
        "readings": readings.len(),
        "limit": {"min": lmin, "median": lmed, "max": lmax},
        "in_flight": {"median": fmed, "max": fmax},
        "queued": {"median": qmed, "max": qmax},
        "queued_share": if readings.is_empty() { 0.0 } else { queued as f64 / readings.len() as f64 },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "\
# TYPE kuryr_openstack_concurrency_limit gauge
kuryr_openstack_concurrency_limit{service=\"neutron\"} 12
kuryr_openstack_concurrency_limit{service=\"octavia\"} 8
kuryr_openstack_in_flight{service=\"neutron\"} 12
kuryr_openstack_queued{service=\"neutron\"} 30
kuryr_openstack_concurrency_limit_moves_total{service=\"neutron\",reason=\"ipam_conflict\"} 3
kuryr_openstack_concurrency_limit_moves_total{service=\"neutron\",reason=\"slow_start\"} 4
kuryr_openstack_concurrency_limit_moves_total{service=\"octavia\",reason=\"latency\"} 9
";

    #[test]
    fn the_neutron_gauges_and_moves_are_read() {
        let r = Reading::parse(TEXT, "neutron");
        assert_eq!(
            r,
            Reading {
                limit: 12.0,
                in_flight: 12.0,
                queued: 30.0
            }
        );
        let m = moves(TEXT, "neutron");
        assert_eq!(m.get("ipam_conflict"), Some(&3.0));
        assert_eq!(m.get("slow_start"), Some(&4.0));
        assert_eq!(m.len(), 2);
    }

    #[test]
    fn the_summary_says_how_often_calls_queued() {
        let rs = [
            Reading {
                limit: 8.0,
                in_flight: 8.0,
                queued: 5.0,
            },
            Reading {
                limit: 4.0,
                in_flight: 2.0,
                queued: 0.0,
            },
        ];
        let s = summary(&rs);
        assert_eq!(s["limit"]["min"], 4.0);
        assert_eq!(s["limit"]["max"], 8.0);
        assert_eq!(s["queued_share"], 0.5);
    }
}
