//! Stopping controllers whose cache never synced.
//!
//! kube-runtime 5 holds a controller's runner until its cache has finished the first list, and keeps
//! holding it through a graceful shutdown: a controller told to stop before that list completes (a slow
//! API server, a loaded machine, a stop right after start) never returns from `run`. Nothing of it is in
//! flight then (no reconcile ever started), so it is dropped instead.

use std::fmt::Debug;
use std::future::Future;
use std::hash::Hash;
use std::sync::Arc;

use futures::future::TryFuture;
use futures::{FutureExt, StreamExt};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::Store;
use kube::Resource;
use serde::de::DeserializeOwned;

/// Runs `controller` until `shutdown`: in-flight reconciles finish (graceful shutdown), and a controller
/// whose cache never synced stops at once ([`unless_never_synced`]). How every controller here is run.
pub async fn run_controller<K, ReconcilerFut, Ctx>(
    controller: Controller<K>,
    reconciler: impl FnMut(Arc<K>, Arc<Ctx>) -> ReconcilerFut,
    error_policy: impl Fn(Arc<K>, &ReconcilerFut::Error, Arc<Ctx>) -> Action,
    ctx: Arc<Ctx>,
    shutdown: impl Future<Output = ()> + Clone + Send + Sync + 'static,
) where
    K: Clone + Resource + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Eq + Hash + Clone + Debug + Unpin,
    ReconcilerFut: TryFuture<Ok = Action> + Send + 'static,
    ReconcilerFut::Error: std::error::Error + Send + 'static,
{
    let store = controller.store();
    let run = controller
        .graceful_shutdown_on(shutdown.clone())
        .run(reconciler, error_policy, ctx)
        .for_each(|_| futures::future::ready(()));
    unless_never_synced(run, store, shutdown).await
}

/// Drives `run` (a controller's `run(..).for_each(..)`) to its end, or until `shutdown` has fired while
/// `store`, the controller's cache, had not synced yet.
async fn unless_never_synced<K>(
    run: impl Future<Output = ()>,
    store: Store<K>,
    shutdown: impl Future<Output = ()>,
) where
    K: Resource + Clone + 'static,
    K::DynamicType: Eq + Hash + Clone,
{
    let never_synced = async {
        shutdown.await;
        // Ready (or its writer gone, which ends `run` by itself): the graceful shutdown finishes.
        if store.wait_until_ready().now_or_never().is_some() {
            std::future::pending::<()>().await;
        }
    };
    tokio::select! {
        _ = run => {}
        _ = never_synced => {}
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use kube::runtime::watcher;
    use kuryr_api::k8s_openapi::api::core::v1::ConfigMap;
    use kuryr_api::Api;

    use super::*;

    /// An API server that accepts connections and never answers: the cache's first list never completes.
    async fn silent_api_server() -> kube::Client {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((conn, _)) = listener.accept().await {
                held.push(conn);
            }
        });
        let config = kube::Config::new(format!("http://{addr}").parse().unwrap());
        kube::Client::try_from(config).unwrap()
    }

    #[tokio::test]
    async fn a_controller_stopped_before_its_cache_synced_stops() {
        let api: Api<ConfigMap> = Api::all(silent_api_server().await);
        let controller = Controller::new(api, watcher::Config::default());
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let shutdown = stopped.map(|_| ()).shared();
        let task = tokio::spawn(run_controller(
            controller,
            |_, _| async { Ok::<_, kube::Error>(Action::await_change()) },
            |_, _, _| Action::await_change(),
            Arc::new(()),
            shutdown,
        ));
        // Let the watcher start its list (and hang on it).
        tokio::time::sleep(Duration::from_millis(200)).await;
        stop.send(()).unwrap();
        tokio::time::timeout(Duration::from_secs(30), task)
            .await
            .expect("the controller did not stop")
            .unwrap();
    }
}
