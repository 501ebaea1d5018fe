//! The controllers' Kubernetes client: kube's own stack (base URI, retries of the API server's 429/503/504,
//! auth, extra headers; TLS and the kubeconfig's timeouts on the connector) over a hyper client whose
//! connections read into smaller buffers and close after [`IDLE_TIMEOUT`] idle, with at most `in_flight`
//! requests at once. kube's `ClientBuilder` sets neither option.
//!
//! Why: an HTTP/1 connection keeps the read buffer it grew to (up to ~400 KB: hyper's default) for its
//! life in the pool, and a burst opens up to `--kube-api-concurrency` (64) of them: a heap profile at
//! 10,000 pods / 2,000 Services held 22 MB of such buffers (docs/BENCHMARKS.md, issue 37). A list page or
//! a watch event larger than the buffer is read in more turns, not refused. The pool still keeps as many
//! idle connections as may be in flight: keeping 8 made a pools burst open (and TLS-handshake) new ones
//! throughout, its p50 5.36 s against 3.95 s keeping 64 (bench/results 20261130T143109Z, …T143905Z).

use std::time::Duration;

use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use kube::client::retry::RetryPolicy;
use kube::client::ConfigExt;
use tower::retry::RetryLayer;
use tower::ServiceBuilder;

/// How long an idle connection is kept.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(30);
/// The most a connection's read buffer grows to (hyper: at least 8 KB).
pub const READ_BUFFER: usize = 64 * 1024;

/// At most `n` Kubernetes API requests in flight; the others wait in the client (kube's `Buffer`) in turn.
/// A watch holds its place only until its answer begins.
pub fn in_flight_limit(n: u16) -> tower::limit::ConcurrencyLimitLayer {
    tower::limit::ConcurrencyLimitLayer::new(n.into())
}

/// The client for `config`, at most `in_flight` requests at once (the others wait in the client's queue).
pub fn build(config: kube::Config, in_flight: u16) -> kube::Result<kube::Client> {
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    let https = config.rustls_https_connector_with_connector(http)?;
    let mut connector = hyper_timeout::TimeoutConnector::new(https);
    connector.set_connect_timeout(config.connect_timeout);
    connector.set_read_timeout(config.read_timeout);
    connector.set_write_timeout(config.write_timeout);
    connector.set_reset_reader_on_write(config.reset_reader_on_write);
    let http_client: hyper_util::client::legacy::Client<_, kube::client::Body> =
        hyper_util::client::legacy::Client::builder(TokioExecutor::new())
            .pool_max_idle_per_host(in_flight.into())
            .pool_idle_timeout(IDLE_TIMEOUT)
            .http1_max_buf_size(READ_BUFFER)
            .build(connector);
    let service = ServiceBuilder::new()
        .layer(in_flight_limit(in_flight))
        .layer(config.base_uri_layer())
        .option_layer(
            config
                .default_retry
                .then(|| RetryLayer::new(RetryPolicy::server_retry())),
        )
        .option_layer(config.auth_layer()?)
        .layer(config.extra_headers_layer()?)
        .map_err(tower::BoxError::from)
        .service(http_client);
    Ok(kube::Client::new(service, config.default_namespace))
}
