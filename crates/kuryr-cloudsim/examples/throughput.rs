//! Hammers an emulator on loopback with a bounded number of requests per scenario and prints
//! requests/s and latency percentiles. The client runs in the same process (and on the same cores)
//! as the in-process emulator, so the numbers are a lower bound on what the emulator can serve.
//!
//!     cargo run --release -p kuryr-cloudsim --example throughput -- [REQUESTS] [CONCURRENCY] [URL]
//!
//! With a URL (e.g. `http://127.0.0.1:8999`, a `kuryr-cloudsim` in noauth or keystone mode with the
//! default users) it drives that server instead of an in-process one.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kuryr_cloudsim::{Profile, Sim};
use serde_json::{json, Value};

struct Ctx {
    c: reqwest::Client,
    base: String,
    token: String,
    net: String,
    subnet: String,
    port_ids: Vec<String>,
    trunk: String,
    pool: String,
}

async fn login(c: &reqwest::Client, base: &str) -> String {
    let body = json!({"auth": {"identity": {"methods": ["password"], "password": {"user": {
        "name": "kuryr", "domain": {"name": "Default"}, "password": "kuryr-secret"}}},
        "scope": {"project": {"name": "service", "domain": {"name": "Default"}}}}});
    let r = c
        .post(format!("{base}/v3/auth/tokens"))
        .json(&body)
        .send()
        .await
        .expect("keystone reachable");
    r.headers()
        .get("x-subject-token")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned()
}

async fn call(cx: &Ctx, method: reqwest::Method, path: &str, body: Option<Value>) -> (u16, Value) {
    let mut rb =
        cx.c.request(method, format!("{}{path}", cx.base))
            .header("X-Auth-Token", &cx.token);
    if let Some(b) = body {
        rb = rb.json(&b);
    }
    match rb.send().await {
        Ok(r) => {
            let s = r.status().as_u16();
            (s, r.json().await.unwrap_or(Value::Null))
        }
        Err(_) => (0, Value::Null),
    }
}

async fn setup(c: reqwest::Client, base: String) -> Ctx {
    let token = login(&c, &base).await;
    let mut cx = Ctx {
        c,
        base,
        token,
        net: String::new(),
        subnet: String::new(),
        port_ids: Vec::new(),
        trunk: String::new(),
        pool: String::new(),
    };
    let (_, v) = call(
        &cx,
        reqwest::Method::POST,
        "/v2.0/networks",
        Some(json!({"network": {"name": "bench"}})),
    )
    .await;
    cx.net = v["network"]["id"].as_str().unwrap_or_default().to_owned();
    let (_, v) = call(
        &cx,
        reqwest::Method::POST,
        "/v2.0/subnets",
        Some(json!({"subnet": {"network_id": cx.net, "cidr": "10.64.0.0/12", "ip_version": 4}})),
    )
    .await;
    cx.subnet = v["subnet"]["id"].as_str().unwrap_or_default().to_owned();
    let project = kuryr_cloudsim::profile::SERVICE_PROJECT_ID;
    call(
        &cx,
        reqwest::Method::PUT,
        &format!("/v2.0/quotas/{project}"),
        Some(json!({"quota": {"port": -1}})),
    )
    .await;
    // 10,000 tagged ports so list filters have something to skip.
    for i in 0..100 {
        let ports: Vec<Value> = (0..100)
            .map(|j| json!({"network_id": cx.net, "device_owner": "compute:kuryr", "tags": [format!("g{}", (i * 100 + j) % 50)]}))
            .collect();
        let (_, v) = call(
            &cx,
            reqwest::Method::POST,
            "/v2.0/ports",
            Some(json!({ "ports": ports })),
        )
        .await;
        if let Some(a) = v["ports"].as_array() {
            cx.port_ids
                .extend(a.iter().filter_map(|p| p["id"].as_str().map(str::to_owned)));
        }
    }
    let (_, v) = call(
        &cx,
        reqwest::Method::POST,
        "/v2.0/ports",
        Some(json!({"port": {"network_id": cx.net, "binding:host_id": "node1"}})),
    )
    .await;
    let parent = v["port"]["id"].as_str().unwrap_or_default().to_owned();
    let (_, v) = call(
        &cx,
        reqwest::Method::POST,
        "/v2.0/trunks",
        Some(json!({"trunk": {"port_id": parent}})),
    )
    .await;
    cx.trunk = v["trunk"]["id"].as_str().unwrap_or_default().to_owned();
    let (_, v) = call(
        &cx,
        reqwest::Method::POST,
        "/v2/lbaas/loadbalancers",
        Some(json!({"loadbalancer": {"vip_subnet_id": cx.subnet, "provider": "ovn", "listeners": [{"protocol": "TCP", "protocol_port": 80,
            "default_pool": {"name": "p", "protocol": "TCP", "lb_algorithm": "SOURCE_IP_PORT"}}]}})),
    )
    .await;
    cx.pool = v["loadbalancer"]["pools"][0]["id"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    cx
}

/// One request of a scenario; `i` is its global index.
async fn step(cx: &Ctx, scenario: &str, i: usize) -> u16 {
    use reqwest::Method as M;
    match scenario {
        "port_show" => {
            call(
                cx,
                M::GET,
                &format!("/v2.0/ports/{}", cx.port_ids[i % cx.port_ids.len()]),
                None,
            )
            .await
            .0
        }
        "port_list_by_tag" => {
            call(
                cx,
                M::GET,
                &format!("/v2.0/ports?tags=g{}&fields=id", i % 50),
                None,
            )
            .await
            .0
        }
        "port_list_status_limit_50" => call(cx, M::GET, "/v2.0/ports?status=DOWN&limit=50", None).await.0,
        "port_list_by_device_id" => {
            call(cx, M::GET, &format!("/v2.0/ports?device_id=vm-{i}"), None)
                .await
                .0
        }
        "port_create" => {
            call(
                cx,
                M::POST,
                "/v2.0/ports",
                Some(json!({"port": {"network_id": cx.net}})),
            )
            .await
            .0
        }
        "port_bulk_create_10" => {
            let ports: Vec<Value> = (0..10)
                .map(|_| json!({"network_id": cx.net, "device_owner": "compute:kuryr"}))
                .collect();
            call(cx, M::POST, "/v2.0/ports", Some(json!({ "ports": ports })))
                .await
                .0
        }
        "port_update" => {
            let id = &cx.port_ids[i % cx.port_ids.len()];
            call(
                cx,
                M::PUT,
                &format!("/v2.0/ports/{id}"),
                Some(json!({"port": {"device_id": format!("vm-{i}")}})),
            )
            .await
            .0
        }
        "lb_list" => call(cx, M::GET, "/v2/lbaas/loadbalancers", None).await.0,
        "keystone_token" => {
            let t = login(&cx.c, &cx.base).await;
            if t.is_empty() {
                500
            } else {
                201
            }
        }
        _ => 0,
    }
}

async fn run(cx: Arc<Ctx>, scenario: &'static str, n: usize, conc: usize) {
    let next = Arc::new(AtomicUsize::new(0));
    let start = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..conc {
        let (cx, next) = (cx.clone(), next.clone());
        tasks.push(tokio::spawn(async move {
            let mut lat = Vec::new();
            let mut errors = 0usize;
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= n {
                    break;
                }
                let t0 = Instant::now();
                let s = step(&cx, scenario, i).await;
                lat.push(t0.elapsed());
                if !(200..300).contains(&s) {
                    errors += 1;
                }
            }
            (lat, errors)
        }));
    }
    let mut all: Vec<Duration> = Vec::with_capacity(n);
    let mut errors = 0;
    for t in tasks {
        if let Ok((l, e)) = t.await {
            all.extend(l);
            errors += e;
        }
    }
    let secs = start.elapsed().as_secs_f64();
    all.sort();
    let pct = |q: f64| {
        all.get(((all.len().max(1) - 1) as f64 * q) as usize)
            .map_or(0.0, |d| d.as_secs_f64() * 1000.0)
    };
    println!(
        "{scenario:<24} {n:>7} req  {:>9.0} req/s  p50 {:>6.2} ms  p99 {:>6.2} ms  errors {errors}",
        n as f64 / secs,
        pct(0.5),
        pct(0.99)
    );
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let n: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(20_000);
    let conc: usize = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(32);
    let (base, _handle) = match args.get(3) {
        Some(url) => (url.clone(), None),
        None => {
            let mut p = Profile::zero();
            p.call_log_capacity = 1_000_000;
            let (addr, h) = Sim::new(p).spawn_on("127.0.0.1:0").await.expect("bind loopback");
            (format!("http://{addr}"), Some(h))
        }
    };
    let c = reqwest::Client::builder()
        .pool_max_idle_per_host(conc)
        .build()
        .expect("client");
    let cx = Arc::new(setup(c, base).await);
    println!("kuryr-cloudsim throughput: {n} requests per scenario, concurrency {conc}, 10k ports preloaded");
    for s in [
        "port_show",
        "port_list_by_tag",
        "port_list_by_device_id",
        "port_list_status_limit_50",
        "port_update",
        "port_create",
        "port_bulk_create_10",
        "lb_list",
        "keystone_token",
    ] {
        let count = if s == "port_list_by_tag" { n / 10 } else { n };
        run(cx.clone(), s, count, conc).await;
    }
    let _ = &cx.trunk;
}
