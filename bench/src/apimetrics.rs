//! The API server's own request counts (`apiserver_request_total` on its `/metrics`): scraped before and
//! after a window, the delta by verb and resource says how many requests the window cost the API server,
//! whoever sent them (the harness's pod creates, the controller's writes, kube-controller-manager's).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

const METRIC: &str = "apiserver_request_total";

/// What a window cost the API server.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ApiRequests {
    pub total: u64,
    /// Answered 4xx/5xx (conflicts, not-founds), counted in `total` too.
    pub errors: u64,
    /// `VERB resource[/subresource]` (non-resource paths: `VERB /path`) → requests.
    pub by_verb_resource: BTreeMap<String, u64>,
}

impl ApiRequests {
    /// Requests per pod (or other item), rounded to 3 decimals; `None` for n = 0.
    pub fn per(&self, n: u64) -> Option<f64> {
        crate::calls::CallCounts::per(self.total, n)
    }
}

/// One scrape: (`VERB resource[/subresource]`, HTTP code) → the counter's value.
pub type Counters = BTreeMap<(String, String), f64>;

/// The `apiserver_request_total` samples of a Prometheus text exposition.
pub fn parse(text: &str) -> Counters {
    let mut out = Counters::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix(METRIC) else {
            continue;
        };
        let Some(rest) = rest.strip_prefix('{') else {
            continue;
        };
        let Some((labels, value)) = split_labels(rest) else {
            continue;
        };
        let Some(value) = value
            .split_whitespace()
            .next()
            .and_then(|v| v.parse::<f64>().ok())
        else {
            continue;
        };
        let get = |k: &str| labels.get(k).map(String::as_str).unwrap_or("");
        let (verb, resource, sub) = (get("verb"), get("resource"), get("subresource"));
        let key = match (resource.is_empty(), sub.is_empty()) {
            // Non-resource requests (/livez, /metrics) carry their path in `subresource`.
            (true, _) => format!("{verb} {sub}"),
            (false, true) => format!("{verb} {resource}"),
            (false, false) => format!("{verb} {resource}/{sub}"),
        };
        *out.entry((key, get("code").to_string())).or_default() += value;
    }
    out
}

/// `name="value",...}` → the labels and what follows the closing brace (escaped quotes kept literal).
fn split_labels(s: &str) -> Option<(BTreeMap<String, String>, &str)> {
    let mut labels = BTreeMap::new();
    let mut rest = s;
    loop {
        rest = rest.trim_start_matches(',');
        if let Some(after) = rest.strip_prefix('}') {
            return Some((labels, after));
        }
        let (name, after) = rest.split_once("=\"")?;
        let mut value = String::new();
        let mut chars = after.char_indices();
        let end = loop {
            match chars.next()? {
                (_, '\\') => value.push(chars.next()?.1),
                (i, '"') => break i,
                (_, c) => value.push(c),
            }
        };
        labels.insert(name.to_string(), value);
        rest = &after[end + 1..];
    }
}

/// What happened between two scrapes. The harness's own scrape (`GET /metrics`, where the server counts it)
/// is left out; a counter that went down (the API server restarted) counts from zero.
pub fn delta(before: &Counters, after: &Counters) -> ApiRequests {
    let mut out = ApiRequests::default();
    for ((key, code), v) in after {
        if key == "GET /metrics" {
            continue;
        }
        let v0 = before.get(&(key.clone(), code.clone())).copied().unwrap_or(0.0);
        let n = if *v >= v0 { v - v0 } else { *v };
        let n = n.round() as u64;
        if n == 0 {
            continue;
        }
        out.total += n;
        if code.starts_with('4') || code.starts_with('5') {
            out.errors += n;
        }
        *out.by_verb_resource.entry(key.clone()).or_default() += n;
    }
    out
}

/// Scrapes the API server's counters through the bench's client (the lab's admin credentials).
pub async fn scrape(client: &kuryr_api::Client) -> anyhow::Result<Counters> {
    let req = axum::http::Request::get("/metrics").body(Vec::new())?;
    Ok(parse(&client.request_text(req).await?))
}

/// Scrapes, or says why not on stderr: a window without counts still has its times.
pub async fn try_scrape(client: &kuryr_api::Client) -> Option<Counters> {
    match scrape(client).await {
        Ok(c) => Some(c),
        Err(e) => {
            eprintln!("kuryr-bench: API server /metrics not read: {e:#}");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two scrapes of the lab's kube-apiserver 1.37.2, 20 s apart, while another session's tests ran (the
    /// counter's family whole, with its neighbours' first lines).
    const BEFORE: &str = include_str!("testdata/apiserver-metrics-before.txt");
    const AFTER: &str = include_str!("testdata/apiserver-metrics-after.txt");

    fn get(c: &Counters, key: &str, code: &str) -> f64 {
        c.get(&(key.to_string(), code.to_string()))
            .copied()
            .unwrap_or(0.0)
    }

    #[test]
    fn parses_by_verb_resource_and_code() {
        let c = parse(BEFORE);
        assert_eq!(get(&c, "POST pods", "201"), 506.0);
        assert_eq!(get(&c, "PATCH pods/status", "200"), 508.0);
        // Scopes (cluster, namespace, resource) are summed under one key.
        assert_eq!(get(&c, "WATCH pods", "200"), 30.0);
        // Non-resource requests by path.
        assert_eq!(get(&c, "GET /readyz", "500"), 76.0);
        assert_eq!(get(&c, "GET api", "200"), 92.0);
        // Other families sharing the prefix are not this counter.
        let samples = BEFORE
            .lines()
            .filter(|l| l.starts_with("apiserver_request_total{"))
            .count();
        assert_eq!(samples, 249);
        // Every sample read, scopes merged: fewer keys than samples.
        assert!(c.len() < samples && c.len() > 150, "{}", c.len());
    }

    #[test]
    fn delta_counts_the_window_by_verb_and_resource() {
        let d = delta(&parse(BEFORE), &parse(AFTER));
        assert_eq!(d.total, 22);
        assert_eq!(d.errors, 0);
        assert_eq!(d.by_verb_resource.len(), 9, "{d:?}");
        assert_eq!(d.by_verb_resource["PUT leases"], 6);
        assert_eq!(d.by_verb_resource["GET endpointslices"], 2);
        assert_eq!(d.by_verb_resource["GET openapi/v3"], 4);
        // Unchanged series are left out.
        assert!(!d.by_verb_resource.contains_key("POST pods"));
        assert_eq!(d.total, d.by_verb_resource.values().sum::<u64>());
        assert_eq!(d.per(4), Some(5.5));
    }

    #[test]
    fn a_restarted_server_counts_from_zero_and_escapes_are_read() {
        let before = parse(
            "apiserver_request_total{code=\"200\",resource=\"pods\",subresource=\"\",verb=\"LIST\"} 90\n",
        );
        let after = parse(
            "apiserver_request_total{code=\"200\",resource=\"pods\",subresource=\"\",verb=\"LIST\"} 5\n\
             apiserver_request_total{code=\"409\",resource=\"a\\\"b\",subresource=\"\",verb=\"GET\"} 1\n\
             apiserver_request_total{code=\"200\",resource=\"\",subresource=\"/metrics\",verb=\"GET\"} 3\n",
        );
        let d = delta(&before, &after);
        assert_eq!(d.by_verb_resource["LIST pods"], 5);
        assert_eq!(d.by_verb_resource["GET a\"b"], 1);
        assert_eq!((d.total, d.errors), (6, 1));
        assert!(parse("garbage\napiserver_request_total{code=\"200\" 1\n").is_empty());
    }
}
