//! Services on Octavia: the Service front end ([`frontend`]) writes one KuryrLoadBalancer per Service from
//! the Service and its endpoints; the KuryrLoadBalancer controller ([`crate::loadbalancers`]) makes Octavia
//! match it. Both run from [`run`] when `--service-subnet` is set. See docs/services.md.
//!
//! The third import of the crate that runs back up the layers starts here: `services/` uses
//! `loadbalancers/` ([`run`] wires the KuryrLoadBalancer controller and its observer beside the Service
//! front end, and [`LbContext`] holds the `Observer` whose ticks wake it), while the KuryrLoadBalancer
//! controller takes its context from here. The settings live in [`crate::config::services`].

pub use crate::config::services as config;
pub mod context;
pub mod frontend;
pub mod member_subnets;

use std::future::Future;
use std::sync::Arc;

use futures::{FutureExt, StreamExt};
use kube::core::PartialObjectMeta;
use kube::runtime::controller::{self, Controller};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::{reflector, watcher, WatchStreamExt};
use kuryr_api::{Api, KuryrLoadBalancer, Namespace, Service, SlimEndpointSlice};
use kuryr_openstack::Cloud;
use tracing::{info, info_span, Instrument};

pub use config::{DefaultKubernetes, ServicesConfig};
pub use context::LbContext;

use crate::config::Config;
use crate::loadbalancers::{self, CachedKlb};
use crate::metrics::Metrics;
use crate::scope::Selection;
use crate::shutdown::run_controller;
use crate::slim;

/// Service front-end reconciles in flight at most.
const SERVICE_CONCURRENCY: u16 = 128;
/// KuryrLoadBalancer reconciles in flight at most: a round holds its Octavia tree and the client's
/// requests, and the client's own concurrency limit runs no more at once anyway.
const KLB_CONCURRENCY: u16 = 128;

/// The Service an EndpointSlice belongs to, by its `kubernetes.io/service-name` label.
pub fn service_of(slice: &SlimEndpointSlice) -> Option<ObjectRef<Service>> {
    let ns = slice.metadata.namespace.as_deref()?;
    let svc = slice.service_name.as_deref()?;
    Some(ObjectRef::new(svc).within(ns))
}

/// The observer names a load balancer's KuryrLoadBalancer; its controller's cache holds it packed.
fn cached_ref(r: ObjectRef<KuryrLoadBalancer>) -> ObjectRef<CachedKlb> {
    let cached = ObjectRef::new(&r.name);
    match r.namespace.as_deref() {
        Some(ns) => cached.within(ns),
        None => cached,
    }
}

/// What one pair of Service / KuryrLoadBalancer controllers watches.
#[derive(Clone, Debug, Default)]
struct Scope {
    /// `None`: every namespace.
    namespace: Option<String>,
    /// Only the Service (and KuryrLoadBalancer, EndpointSlices) of this name.
    name: Option<&'static str>,
}

impl Scope {
    fn api<K>(&self, client: &kube::Client) -> Api<K>
    where
        K: kube::Resource<Scope = kube::core::NamespaceResourceScope, DynamicType = ()>,
    {
        kuryr_api::scoped(client, self.namespace.as_deref())
    }

    /// Watch of the Services and KuryrLoadBalancers (one name each).
    fn objects(&self) -> watcher::Config {
        match self.name {
            Some(n) => watcher::Config::default().fields(&format!("metadata.name={n}")),
            None => watcher::Config::default(),
        }
    }

    /// Watch of the Namespaces: the one the objects are in, or all.
    fn namespaces(&self) -> watcher::Config {
        match &self.namespace {
            Some(ns) => watcher::Config::default().fields(&format!("metadata.name={ns}")),
            None => watcher::Config::default(),
        }
    }

    /// Watch of the EndpointSlices (labelled with their Service's name).
    fn slices(&self) -> watcher::Config {
        match self.name {
            Some(n) => watcher::Config::default().labels(&format!("{}={n}", kuryr_api::labels::SERVICE_NAME)),
            None => watcher::Config::default(),
        }
    }
}

/// Runs the Service front end and the KuryrLoadBalancer controller until `shutdown`; a controller scoped to
/// a namespace other than `default` runs a second pair for `default/kubernetes` alone when told what to do
/// with it ([`DefaultKubernetes::Always`] serves it, [`DefaultKubernetes::Never`] releases it).
pub async fn run(
    client: kube::Client,
    cloud: Cloud,
    config: Config,
    metrics: Metrics,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let Some(svc_config) = config.services.clone() else {
        anyhow::bail!("services are not configured (no service subnet)");
    };
    let shutdown = shutdown.boxed().shared();
    let main = Scope {
        namespace: config.namespace.clone(),
        name: None,
    };
    let api_service = match main.namespace.as_deref() {
        // `never` too: a scoped controller told to stop serving it releases what it made.
        Some(ns) if ns != "default" && svc_config.default_kubernetes != DefaultKubernetes::Auto => {
            Some(Scope {
                namespace: Some("default".into()),
                name: Some("kubernetes"),
            })
        }
        _ => None,
    };
    let serve = |scope: Scope| {
        serve(
            client.clone(),
            cloud.clone(),
            &config,
            svc_config.clone(),
            metrics.clone(),
            scope,
            shutdown.clone(),
        )
    };
    match api_service {
        Some(extra) => {
            tokio::join!(serve(main), serve(extra));
        }
        None => serve(main).await,
    }
    info!("services controllers stopped");
    Ok(())
}

/// One Service front end + KuryrLoadBalancer controller over `scope`, until `shutdown`.
async fn serve(
    client: kube::Client,
    cloud: Cloud,
    config: &Config,
    svc_config: ServicesConfig,
    metrics: Metrics,
    scope: Scope,
    shutdown: futures::future::Shared<futures::future::BoxFuture<'static, ()>>,
) {
    let svc_api: Api<Service> = scope.api(&client);
    let klb_api: Api<KuryrLoadBalancer> = scope.api(&client);
    // KuryrLoadBalancers are read straight into their packed form (crate::packed).
    let mut klb_controller = Controller::new(scope.api::<CachedKlb>(&client), scope.objects())
        .with_config(controller::Config::default().concurrency(KLB_CONCURRENCY));
    // Services are fed slimmed (crate::slim). Bounded: after a restart every Service is due at once, and
    // each reconcile in flight holds a kube request's worth of memory; it only writes to the apiserver.
    let mut svc_controller = slim::controller(svc_api, scope.objects(), slim::service)
        .owns(klb_api, scope.objects())
        .with_config(controller::Config::default().concurrency(SERVICE_CONCURRENCY));

    // Backends come from EndpointSlices v1 (every supported Kubernetes serves them; Endpoints v1 is
    // deprecated since 1.33), however many slices a Service is split into.
    let (slice_store, slice_writer) = reflector::store::<SlimEndpointSlice>();
    let stream = watcher(scope.api::<SlimEndpointSlice>(&client), scope.slices())
        .default_backoff()
        .modify(slim::endpoint_slice)
        .reflect(slice_writer)
        .touched_objects();
    svc_controller = svc_controller.watches_stream(stream, |s: SlimEndpointSlice| service_of(&s));
    // Namespaces' metadata only: whether one is being deleted (LbContext::namespace_terminating).
    let (ns_store, ns_writer) = reflector::store();
    let ns_watch = watcher(
        Api::<PartialObjectMeta<Namespace>>::all(client.clone()),
        scope.namespaces(),
    )
    .default_backoff()
    .reflect(ns_writer)
    .for_each(|_| futures::future::ready(()));
    let ctx = Arc::new(
        LbContext::new(
            client,
            cloud,
            config.cluster_id.clone(),
            config.project_id.clone(),
            svc_config,
            metrics,
            slice_store,
            klb_controller.store(),
        )
        .with_selection(Selection::new(config.namespace_selector.clone()))
        .with_namespaces(ns_store),
    );
    // Reconciles are woken by the observer's listings rather than polling their load balancer.
    klb_controller = klb_controller.reconcile_on(ctx.observer.wakes().map(cached_ref));
    let span =
        |kind: &'static str| info_span!("controller", kind, namespace = ?scope.namespace, name = ?scope.name);
    let observe = loadbalancers::ticks::run(ctx.clone(), shutdown.clone()).instrument(span("observer"));
    let klb_run = run_controller(
        klb_controller,
        loadbalancers::reconcile,
        crate::toolkit::error_policy,
        ctx.clone(),
        shutdown.clone(),
    )
    .instrument(span("kuryrloadbalancer"));
    let svc_run = run_controller(
        svc_controller,
        frontend::reconcile,
        crate::toolkit::error_policy,
        ctx,
        shutdown,
    )
    .instrument(span("service"));
    // The namespace watch ends with the controllers (it has no shutdown of its own).
    tokio::select! {
        _ = async { tokio::join!(klb_run, svc_run, observe) } => {}
        _ = ns_watch => {}
    }
}
