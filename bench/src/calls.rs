//! API economy from cloudsim's call log: writes (POST/PUT/PATCH/DELETE) per service, reads aside.

use std::collections::BTreeMap;

use kuryr_cloudsim::Call;

/// Counts of one slice of the call log.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CallCounts {
    pub neutron_writes: u64,
    pub neutron_reads: u64,
    pub octavia_writes: u64,
    /// Octavia writes answered 4xx/5xx (e.g. 409 while the load balancer is PENDING_UPDATE): counted in
    /// `octavia_writes` too, since each one reached the API.
    pub octavia_writes_refused: u64,
    pub octavia_reads: u64,
    pub keystone: u64,
    /// Calls answered with a 4xx/5xx (IPAM conflicts, faults, 404 probes).
    pub errors: u64,
    /// Every op seen, with its count: the breakdown in the JSON's `extra`.
    pub by_op: BTreeMap<String, u64>,
    /// Each Neutron call's latency as cloudsim served it (µs; load-model queueing and 503s included).
    pub neutron_latency_us: Vec<u64>,
    /// Neutron calls refused with 503 by the load model (`profile.load.neutron`).
    pub neutron_overloaded: u64,
}

fn is_write(method: &str) -> bool {
    matches!(method, "POST" | "PUT" | "PATCH" | "DELETE")
}

impl CallCounts {
    pub fn of<'a>(calls: impl IntoIterator<Item = &'a Call>) -> CallCounts {
        let mut c = CallCounts::default();
        for call in calls {
            *c.by_op.entry(call.op.clone()).or_default() += 1;
            if call.status >= 400 {
                c.errors += 1;
            }
            let write = is_write(&call.method);
            let service = call.op.split('.').next();
            if service == Some("neutron") {
                c.neutron_latency_us
                    .push((call.latency_ms * 1000.0).round() as u64);
                let overload = call.fault.as_deref().is_some_and(|f| f.starts_with("overload"));
                c.neutron_overloaded += u64::from(overload);
            }
            match service {
                Some("neutron") if write => c.neutron_writes += 1,
                Some("neutron") => c.neutron_reads += 1,
                Some("octavia") if write => {
                    c.octavia_writes += 1;
                    c.octavia_writes_refused += u64::from(call.status >= 400);
                }
                Some("octavia") => c.octavia_reads += 1,
                Some("keystone") => c.keystone += 1,
                _ => {}
            }
        }
        c
    }

    /// `count / n`, rounded to 3 decimals; `None` for n = 0.
    pub fn per(count: u64, n: u64) -> Option<f64> {
        (n > 0).then(|| (count as f64 / n as f64 * 1000.0).round() / 1000.0)
    }

    /// p50, p99 and max of the Neutron calls' latency, in ms.
    pub fn neutron_latency_ms(&self) -> Option<crate::stats::Summary> {
        let ms: Vec<f64> = self
            .neutron_latency_us
            .iter()
            .map(|us| *us as f64 / 1000.0)
            .collect();
        crate::stats::Summary::of(&ms)
    }

    pub fn to_json(&self) -> serde_json::Value {
        let latency = self
            .neutron_latency_ms()
            .map(|s| serde_json::json!({"p50": s.p50, "p99": s.p99, "max": s.max}));
        serde_json::json!({
            "neutron_writes": self.neutron_writes,
            "neutron_reads": self.neutron_reads,
            "octavia_writes": self.octavia_writes,
            "octavia_writes_refused": self.octavia_writes_refused,
            "octavia_reads": self.octavia_reads,
            "keystone": self.keystone,
            "errors": self.errors,
            "by_op": self.by_op,
            "neutron_latency_ms": latency,
            "neutron_overloaded": self.neutron_overloaded,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(op: &str, method: &str, status: u16) -> Call {
        Call {
            seq: 0,
            ts: String::new(),
            op: op.into(),
            method: method.into(),
            path: "/".into(),
            status,
            latency_ms: 1.0,
            items: None,
            fault: None,
        }
    }

    #[test]
    fn writes_and_reads_are_told_apart_per_service() {
        let log = [
            call("neutron.ports.bulk_create", "POST", 201),
            call("neutron.trunks.add_subports", "PUT", 200),
            call("neutron.ports.show", "GET", 200),
            call("neutron.ports.create", "POST", 409),
            call("octavia.loadbalancers.create", "POST", 201),
            call("octavia.loadbalancers.show", "GET", 200),
            call("octavia.members.batch_update", "PUT", 202),
            call("octavia.members.delete", "DELETE", 409),
            call("keystone.tokens.issue", "POST", 201),
        ];
        let c = CallCounts::of(&log);
        assert_eq!((c.neutron_writes, c.neutron_reads), (3, 1));
        assert_eq!((c.octavia_writes, c.octavia_reads), (3, 1));
        assert_eq!(c.octavia_writes_refused, 1);
        assert_eq!((c.keystone, c.errors), (1, 2));
        assert_eq!(c.by_op["neutron.ports.bulk_create"], 1);
        assert_eq!(c.to_json()["by_op"]["octavia.members.batch_update"], 1);
    }

    #[test]
    fn neutron_latency_and_overload_refusals_are_summed_over_neutron_calls_only() {
        let mut slow = call("neutron.ports.show", "GET", 503);
        slow.latency_ms = 900.0;
        slow.fault = Some("overload (40 in flight)".into());
        let mut injected = call("neutron.ports.create", "POST", 500);
        injected.fault = Some("status 500".into());
        let mut octavia = call("octavia.loadbalancers.show", "GET", 200);
        octavia.latency_ms = 5000.0;
        let log = [call("neutron.ports.list", "GET", 200), slow, injected, octavia];
        let c = CallCounts::of(&log);
        assert_eq!(c.neutron_overloaded, 1);
        let l = c.neutron_latency_ms().unwrap();
        assert_eq!((l.p50, l.max), (1.0, 900.0));
        assert_eq!(c.to_json()["neutron_latency_ms"]["p99"], 900.0);
    }

    #[test]
    fn per_item_rounds_and_refuses_zero() {
        assert_eq!(CallCounts::per(2, 3), Some(0.667));
        assert_eq!(CallCounts::per(0, 5), Some(0.0));
        assert_eq!(CallCounts::per(1, 0), None);
    }
}
