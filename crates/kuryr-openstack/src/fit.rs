//! Requests shaped to the cloud's body-size limit. Neutron and Octavia run oslo.middleware's `sizelimit`
//! (`[oslo_middleware] max_request_body_size`, 114,688 bytes by default): a larger body is refused with 413
//! before it reaches the API, and the same request never passes. Bulk bodies are split greedily in order,
//! which for a list cut into consecutive runs is the fewest requests that fit.

use serde::Serialize;

use crate::errors::{ApiFailure, Error, Result, Service};
use crate::retry::ErrorKind;

/// oslo.middleware's default `max_request_body_size`.
pub const DEFAULT_MAX_REQUEST_BODY: usize = 114_688;

/// Bytes `v` takes in a request body.
pub fn json_len<T: Serialize + ?Sized>(v: &T) -> usize {
    serde_json::to_vec(v).map_or(usize::MAX, |b| b.len())
}

/// The error a body over the limit gets, whether the cloud said it (413) or the client caught it first.
pub fn too_large(service: Service, op: &'static str, method: &str, bytes: usize, limit: usize) -> Error {
    Error::Api(Box::new(ApiFailure {
        service,
        op,
        method: method.to_owned(),
        status: 413,
        kind: ErrorKind::RequestTooLarge,
        code: String::new(),
        message: format!(
            "a request body of {bytes} bytes is over the cloud's limit of {limit} bytes \
             (max_request_body_size); not sent"
        ),
        request_id: None,
        attempts: 0,
    }))
}

/// `items` cut into consecutive runs whose body — `envelope` bytes around a JSON array of the run — fits
/// `limit`. An item too large to go alone is an error: no split makes it fit.
pub fn split<'a, T: Serialize>(
    items: &'a [T],
    envelope: usize,
    limit: usize,
    service: Service,
    op: &'static str,
) -> Result<Vec<&'a [T]>> {
    let sizes: Vec<usize> = items.iter().map(json_len).collect();
    let mut out = Vec::new();
    let mut start = 0;
    while start < items.len() {
        let n = prefix_fitting(sizes[start..].iter().copied(), envelope, limit);
        if n == 0 {
            return Err(too_large(
                service,
                op,
                "POST",
                envelope.saturating_add(sizes[start]),
                limit,
            ));
        }
        out.push(&items[start..start + n]);
        start += n;
    }
    Ok(out)
}

/// How many of `sizes`, from the front, fit `limit` inside `envelope` (`[a,b,c]`: brackets are part of the
/// envelope, each item after the first adds a comma). Reads no size past the first that does not fit, so a
/// lazy iterator sizes only what one body can hold.
pub fn prefix_fitting(sizes: impl IntoIterator<Item = usize>, envelope: usize, limit: usize) -> usize {
    let mut used = envelope;
    let mut fitting = 0;
    for (i, s) in sizes.into_iter().enumerate() {
        let add = s.saturating_add(usize::from(i > 0));
        if used.saturating_add(add) > limit {
            break;
        }
        used += add;
        fitting = i + 1;
    }
    fitting
}

/// Bytes of `{"<key>": []}` around a list — what [`split`] calls the envelope.
pub fn envelope(key: &str) -> usize {
    json_len(&serde_json::json!({ key: [] }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_split_is_the_fewest_runs_and_each_body_fits_exactly() {
        let items: Vec<String> = (0..1000).map(|i| format!("item-{i:04}")).collect();
        let env = envelope("items");
        // Each item is 11 bytes quoted, plus a comma after the first.
        let limit = env + 11 + 12 * 99; // room for exactly 100
        let runs = split(&items, env, limit, Service::Network, "t").unwrap();
        assert_eq!(runs.len(), 10);
        for r in &runs {
            let body = serde_json::to_vec(&json!({ "items": r })).unwrap();
            assert!(body.len() <= limit, "{} > {limit}", body.len());
            assert_eq!(r.len(), 100);
        }
        let back: Vec<&String> = runs.iter().flat_map(|r| r.iter()).collect();
        assert_eq!(back.len(), items.len());
        // One byte less and the last item of each run moves on: 11 runs.
        assert_eq!(
            split(&items, env, limit - 1, Service::Network, "t")
                .unwrap()
                .len(),
            11
        );
    }

    #[test]
    fn an_item_that_cannot_fit_alone_is_request_too_large() {
        let items = vec!["x".repeat(200)];
        let e = split(&items, 10, 100, Service::LoadBalancer, "t").unwrap_err();
        assert!(e.is_request_too_large(), "{e}");
        assert_eq!(e.status(), Some(413));
    }

    #[test]
    fn nothing_to_split_is_no_request() {
        let items: Vec<u8> = Vec::new();
        assert!(split(&items, 10, 100, Service::Network, "t").unwrap().is_empty());
    }
}
