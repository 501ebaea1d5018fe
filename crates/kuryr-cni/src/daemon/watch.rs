//! Feeds [`NodeCache`] from the API server: KuryrPorts labelled `kuryr.openstack.org/nodeName=<node>` and
//! Pods with `spec.nodeName=<node>`. A reflector of our own over kube's watcher (relist = reset), because
//! waiting ADDs need a wake-up on every change, which kube's `Store` does not give per key.

use std::sync::Arc;

use futures::StreamExt;
use kube::runtime::watcher::{self, Event};
use kube::runtime::WatchStreamExt;
use kuryr_api::{Api, Client, KuryrPort, Pod};
use tracing::warn;

use super::NodeCache;

pub async fn run(client: Client, node: String, cache: Arc<NodeCache>) {
    let ports: Api<KuryrPort> = Api::all(client.clone());
    let pods: Api<Pod> = Api::all(client);
    let pcfg = watcher::Config::default().labels(&kuryr_api::labels::node_name_selector(&node));
    let podcfg = watcher::Config::default().fields(&format!("spec.nodeName={node}"));
    let c1 = cache.clone();
    let feed_ports = async move {
        let mut buf = Vec::new();
        let mut s = watcher::watcher(ports, pcfg).default_backoff().boxed();
        while let Some(ev) = s.next().await {
            match ev {
                Ok(Event::Apply(p)) => c1.apply_port(p),
                Ok(Event::Delete(p)) => c1.delete_port(&p),
                Ok(Event::Init) => buf.clear(),
                Ok(Event::InitApply(p)) => buf.push(p),
                Ok(Event::InitDone) => c1.reset_ports(std::mem::take(&mut buf)),
                Err(e) => warn!(error = %e, "KuryrPort watch"),
            }
        }
    };
    let feed_pods = async move {
        let mut buf = Vec::new();
        let mut s = watcher::watcher(pods, podcfg).default_backoff().boxed();
        while let Some(ev) = s.next().await {
            match ev {
                Ok(Event::Apply(p)) => cache.apply_pod(&p),
                Ok(Event::Delete(p)) => cache.delete_pod(&p),
                Ok(Event::Init) => buf.clear(),
                Ok(Event::InitApply(p)) => buf.push(p),
                Ok(Event::InitDone) => cache.reset_pods(std::mem::take(&mut buf).iter()),
                Err(e) => warn!(error = %e, "Pod watch"),
            }
        }
    };
    futures::join!(feed_ports, feed_pods);
}
