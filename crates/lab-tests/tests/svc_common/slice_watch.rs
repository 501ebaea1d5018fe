//! How often the ready endpoints of one Service changed, as a watch of its EndpointSlices sees them.
//!
//! The endpoint slice controller may publish one scale step of the test in several updates (its queue
//! syncs while the pod patches still arrive, and a busy controller-manager lags). The controller can
//! only be asked to write once per pool per change it is shown, so tests bound its writes by this count
//! rather than by the number of steps the test took.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use anyhow::bail;
use futures::StreamExt;
use kuryr_api::k8s_openapi::api::discovery::v1::EndpointSlice;
use kuryr_api::kube::runtime::watcher::{self, watcher};
use kuryr_api::{Api, Client, ResourceExt};
use tokio::sync::watch;

/// The ready addresses of a Service and how many times they changed since the watch started.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Seen {
    pub ready: BTreeSet<String>,
    pub changes: usize,
}

pub struct SliceWatch {
    seen: watch::Receiver<Seen>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for SliceWatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl SliceWatch {
    /// Starts watching the slices of `service` and returns once the initial list is in.
    pub async fn start(client: &Client, ns: &str, service: &str) -> anyhow::Result<SliceWatch> {
        let api: Api<EndpointSlice> = Api::namespaced(client.clone(), ns);
        let cfg =
            watcher::Config::default().labels(&format!("{}={service}", kuryr_api::labels::SERVICE_NAME));
        let (tx, mut seen) = watch::channel(Seen::default());
        let (synced_tx, synced) = tokio::sync::oneshot::channel();
        let task = tokio::spawn(async move {
            let mut synced_tx = Some(synced_tx);
            let mut slices: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
            let mut initial: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
            let mut stream = watcher(api, cfg).boxed();
            let mut first = true;
            while let Some(ev) = stream.next().await {
                match ev {
                    Ok(watcher::Event::Init) => initial.clear(),
                    Ok(watcher::Event::InitApply(s)) => {
                        initial.insert(s.name_any(), ready_addresses(&s));
                        continue;
                    }
                    Ok(watcher::Event::InitDone) => slices = std::mem::take(&mut initial),
                    Ok(watcher::Event::Apply(s)) => {
                        slices.insert(s.name_any(), ready_addresses(&s));
                    }
                    Ok(watcher::Event::Delete(s)) => {
                        slices.remove(&s.name_any());
                    }
                    // The watcher retries by itself; a relist shows the current state again.
                    Err(_) => continue,
                }
                let now: BTreeSet<String> = slices.values().flatten().cloned().collect();
                tx.send_if_modified(|s| {
                    if s.ready == now && !first {
                        return false;
                    }
                    if !first {
                        s.changes += 1;
                    }
                    first = false;
                    s.ready = now;
                    true
                });
                if let Some(t) = synced_tx.take() {
                    let _ = t.send(());
                }
            }
        });
        tokio::time::timeout(Duration::from_secs(30), synced)
            .await
            .map_err(|_| {
                anyhow::anyhow!("EndpointSlice watch of {ns}/{service}: no initial list in 30 s")
            })??;
        let _ = seen.borrow_and_update();
        Ok(SliceWatch { seen, task })
    }

    pub fn changes(&self) -> usize {
        self.seen.borrow().changes
    }

    /// Waits until the watch has seen exactly `want` as the ready addresses, so that a count read after
    /// it includes every change up to that state.
    pub async fn wait_ready(&mut self, want: &[String]) -> anyhow::Result<Seen> {
        let want: BTreeSet<String> = want.iter().cloned().collect();
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let now = self.seen.borrow_and_update().clone();
            if now.ready == want {
                return Ok(now);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                bail!(
                    "EndpointSlices: {:?} never became ready; last seen {:?}",
                    want,
                    now.ready
                );
            }
            if let Ok(Err(_)) = tokio::time::timeout(left, self.seen.changed()).await {
                bail!("EndpointSlice watch ended");
            }
        }
    }
}

/// Addresses of endpoints that are ready (an unset condition means ready, as the API says).
fn ready_addresses(s: &EndpointSlice) -> BTreeSet<String> {
    s.endpoints
        .iter()
        .filter(|e| e.conditions.as_ref().and_then(|c| c.ready).unwrap_or(true))
        .flat_map(|e| e.addresses.iter().cloned())
        .collect()
}
