//! The call log: one entry per API request (admin calls excluded), read by tests and benchmarks
//! through `/_sim/calls` or `SimHandle::calls`.

use std::collections::{BTreeMap, VecDeque};

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Call {
    /// Increasing sequence number; `GET /_sim/calls?since=N` returns calls with `seq > N`.
    pub seq: u64,
    /// Wall-clock time the request arrived, RFC 3339 with milliseconds.
    pub ts: String,
    /// Stable operation name, e.g. `neutron.ports.bulk_create`.
    pub op: String,
    pub method: String,
    /// Path and query as sent.
    pub path: String,
    pub status: u16,
    /// Time from arrival to response, injected latency and holds included.
    pub latency_ms: f64,
    /// Items in a bulk call (ports, rules, members).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub items: Option<usize>,
    /// The injected fault, if any (`status 500`, `hold 70000ms`, `ipam_conflict`).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub fault: Option<String>,
}

#[derive(Debug)]
pub struct CallLog {
    buf: VecDeque<Call>,
    cap: usize,
    next_seq: u64,
}

impl CallLog {
    pub fn new(cap: usize) -> Self {
        Self {
            buf: VecDeque::with_capacity(cap.min(65_536)),
            cap: cap.max(1),
            next_seq: 1,
        }
    }

    pub fn push(&mut self, mut call: Call) -> u64 {
        call.seq = self.next_seq;
        self.next_seq += 1;
        if self.buf.len() >= self.cap {
            self.buf.pop_front();
        }
        self.buf.push_back(call);
        self.next_seq - 1
    }

    pub fn set_capacity(&mut self, cap: usize) {
        self.cap = cap.max(1);
        while self.buf.len() > self.cap {
            self.buf.pop_front();
        }
    }

    pub fn clear(&mut self) {
        self.buf.clear();
    }

    /// Sequence number of the newest call (0 when none was ever logged).
    pub fn last_seq(&self) -> u64 {
        self.next_seq - 1
    }

    pub fn query(&self, since: u64, op_prefix: Option<&str>, limit: usize) -> Vec<Call> {
        // Calls are in seq order: skip straight to the first one after `since`.
        let start = self.buf.partition_point(|c| c.seq <= since);
        self.buf
            .range(start..)
            .filter(|c| op_prefix.is_none_or(|p| crate::faults::op_matches(p, &c.op)))
            .take(limit)
            .cloned()
            .collect()
    }

    pub fn summary(&self, since: u64) -> BTreeMap<String, OpSummary> {
        let start = self.buf.partition_point(|c| c.seq <= since);
        let mut lat: BTreeMap<&str, (Vec<f64>, u64)> = BTreeMap::new();
        for c in self.buf.range(start..) {
            let e = lat.entry(c.op.as_str()).or_default();
            e.0.push(c.latency_ms);
            if c.status >= 400 {
                e.1 += 1;
            }
        }
        lat.into_iter()
            .map(|(op, (mut v, errors))| {
                v.sort_by(f64::total_cmp);
                let pct = |q: f64| v[((v.len() - 1) as f64 * q).round() as usize];
                let s = OpSummary {
                    count: v.len() as u64,
                    errors,
                    p50_ms: pct(0.5),
                    p99_ms: pct(0.99),
                    max_ms: pct(1.0),
                };
                (op.to_owned(), s)
            })
            .collect()
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct OpSummary {
    pub count: u64,
    pub errors: u64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(op: &str, status: u16) -> Call {
        Call {
            seq: 0,
            ts: String::new(),
            op: op.into(),
            method: "GET".into(),
            path: "/".into(),
            status,
            latency_ms: 1.0,
            items: None,
            fault: None,
        }
    }

    #[test]
    fn ring_drops_oldest_and_since_skips_seen_calls() {
        let mut log = CallLog::new(3);
        for i in 0..5 {
            log.push(call(if i % 2 == 0 { "a.x" } else { "b.y" }, 200));
        }
        let all = log.query(0, None, 100);
        assert_eq!(all.iter().map(|c| c.seq).collect::<Vec<_>>(), vec![3, 4, 5]);
        assert_eq!(log.query(4, None, 100).len(), 1);
        assert_eq!(log.query(0, Some("a.*"), 100).len(), 2);
        let s = log.summary(0);
        assert_eq!(s["a.x"].count, 2);
    }
}
