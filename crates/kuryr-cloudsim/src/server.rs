//! Assembles the router and runs it: in-process for tests (`Sim::spawn_on`), or from the binary.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::http::Method;
use axum::Router;
use tokio::net::{TcpListener, ToSocketAddrs};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::calllog::Call;
use crate::faults::{FaultRule, Faults, LbFaultRule};
use crate::pipeline::{self, Pipeline};
use crate::profile::Profile;
use crate::routes::{Routes, KEYSTONE};
use crate::state::{lock, Shared};

/// The emulator: Keystone, Neutron and Octavia on one port.
#[derive(Clone)]
pub struct Sim {
    shared: Arc<Shared>,
}

/// Old name kept for callers that think of it as a server.
pub type Server = Sim;

impl Sim {
    pub fn new(profile: Profile) -> Self {
        Self {
            shared: Shared::new(profile),
        }
    }

    /// The whole HTTP application.
    pub fn router(&self) -> Router {
        let mut r = Routes::default();
        r.get(&[""], "/", "keystone.versions", crate::keystone::versions);
        r.get(
            &["/identity"],
            "/",
            "keystone.versions",
            crate::keystone::versions,
        );
        r.get(KEYSTONE, "/v3", "keystone.version", crate::keystone::v3);
        r.get(KEYSTONE, "/v3/", "keystone.version", crate::keystone::v3);
        r.post(
            KEYSTONE,
            "/v3/auth/tokens",
            "keystone.tokens.issue",
            crate::keystone::issue,
        );
        r.get(
            KEYSTONE,
            "/v3/auth/tokens",
            "keystone.tokens.validate",
            crate::keystone::validate,
        );
        r.add(
            KEYSTONE,
            Method::HEAD,
            "/v3/auth/tokens",
            "keystone.tokens.check",
            crate::keystone::check,
        );
        r.delete(
            KEYSTONE,
            "/v3/auth/tokens",
            "keystone.tokens.revoke",
            crate::keystone::revoke,
        );
        r.get(
            &[""],
            "/networking/",
            "neutron.versions",
            crate::neutron::extensions::versions,
        );
        crate::neutron::register(&mut r);
        crate::octavia::register(&mut r);
        let (api, ops) = r.into_parts();
        let pipeline = Arc::new(Pipeline {
            shared: self.shared.clone(),
            ops,
        });
        api.merge(crate::admin::router())
            .fallback(pipeline::fallback)
            .layer(axum::middleware::from_fn_with_state(pipeline, pipeline::run))
            .with_state(self.shared.clone())
    }

    /// Serves until `shutdown` resolves.
    pub async fn serve(
        self,
        listener: TcpListener,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        axum::serve(listener, self.router())
            .with_graceful_shutdown(shutdown)
            .await
    }

    /// Binds (e.g. `127.0.0.1:0`) and serves on a background task.
    pub async fn spawn_on(self, addr: impl ToSocketAddrs) -> std::io::Result<(SocketAddr, SimHandle)> {
        let listener = TcpListener::bind(addr).await?;
        let local = listener.local_addr()?;
        let (tx, rx) = oneshot::channel::<()>();
        let shared = self.shared.clone();
        let task = tokio::spawn(self.serve(listener, async move {
            let _ = rx.await;
        }));
        Ok((
            local,
            SimHandle {
                addr: local,
                shared,
                shutdown: Some(tx),
                task: Some(task),
            },
        ))
    }
}

/// A running emulator. Dropping it stops the server.
pub struct SimHandle {
    addr: SocketAddr,
    shared: Arc<Shared>,
    shutdown: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<std::io::Result<()>>>,
}

impl SimHandle {
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT`; Keystone's auth URL is this plus `/v3`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// A `clouds.yaml` whose cloud `name` logs in to this cloudsim as the default profile's user `kuryr`
    /// (project `service`): what the test clients of a cloudsim write.
    pub fn clouds_yaml(&self, name: &str) -> String {
        format!(
            "clouds:\n  {name}:\n    auth_type: password\n    auth: {{auth_url: \"{}/v3\", username: kuryr, password: kuryr-secret, project_name: service, user_domain_name: Default, project_domain_name: Default}}\n    region_name: RegionOne\n",
            self.url()
        )
    }

    /// Every logged call so far (oldest first, within the log's capacity).
    pub fn calls(&self) -> Vec<Call> {
        lock(&self.shared.calls).query(0, None, usize::MAX)
    }

    /// Calls whose op matches `pattern` (exact, or a prefix ending in `*`).
    pub fn calls_matching(&self, pattern: &str) -> Vec<Call> {
        lock(&self.shared.calls).query(0, Some(pattern), usize::MAX)
    }

    pub fn clear_calls(&self) {
        lock(&self.shared.calls).clear();
    }

    /// Reads the emulated cloud's state in place: no API call, so nothing is logged, delayed or faulted
    /// (a harness watching load balancers turn ACTIVE without adding to the call log it counts).
    pub fn inspect<R>(&self, f: impl FnOnce(&crate::world::World) -> R) -> R {
        f(&self.shared.world())
    }

    pub fn add_fault(&self, rule: FaultRule) {
        lock(&self.shared.faults).faults.push(rule);
    }

    pub fn add_lb_fault(&self, rule: LbFaultRule) {
        lock(&self.shared.faults).lb_faults.push(rule);
    }

    /// Calls every request fault and LB fault rule has hit so far (their `fired`, as `GET /_sim/faults`
    /// shows them).
    pub fn faults_fired(&self) -> u64 {
        let f = lock(&self.shared.faults);
        f.faults.iter().map(|r| r.fired).sum::<u64>() + f.lb_faults.iter().map(|r| r.fired).sum::<u64>()
    }

    pub fn set_faults(&self, faults: Faults) {
        *lock(&self.shared.faults) = faults;
    }

    pub fn profile(&self) -> Profile {
        (*self.shared.profile()).clone()
    }

    /// Swaps the profile (its faults are not applied; use `set_faults`).
    pub fn set_profile(&self, profile: Profile) {
        self.shared.set_profile(profile);
    }

    pub fn expire_tokens(&self) -> usize {
        lock(&self.shared.tokens).expire_all()
    }

    pub fn reset(&self) {
        self.shared.reset();
    }

    pub async fn shutdown(mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for SimHandle {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
    }
}
