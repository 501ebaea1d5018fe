//! `kuryr_cni_request_duration_seconds{command,result}` with sub-second buckets (a warm ADD takes tens of
//! milliseconds; a cold one waits for Neutron for seconds).

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    pub command: String,
    pub result: String,
}

pub const BUCKETS: [f64; 14] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0,
];

#[derive(Clone)]
pub struct Metrics {
    pub requests: Family<RequestLabels, Histogram>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self {
            requests: Family::new_with_constructor(|| Histogram::new(BUCKETS)),
        }
    }
}

impl Metrics {
    pub fn register(&self, reg: &mut Registry) {
        reg.register(
            "kuryr_cni_request_duration_seconds",
            "CNI requests served by kuryr-daemon, by command and result",
            self.requests.clone(),
        );
    }

    pub fn observe(&self, command: &str, result: &str, seconds: f64) {
        self.requests
            .get_or_create(&RequestLabels {
                command: command.to_string(),
                result: result.to_string(),
            })
            .observe(seconds);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_is_exposed_with_command_and_result() {
        let m = Metrics::default();
        let mut reg = Registry::default();
        m.register(&mut reg);
        m.observe("ADD", "ok", 0.02);
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &reg).unwrap();
        assert!(
            out.contains("kuryr_cni_request_duration_seconds_bucket{"),
            "{out}"
        );
        assert!(out.contains("command=\"ADD\""));
        assert!(out.contains("le=\"0.025\""));
    }
}
