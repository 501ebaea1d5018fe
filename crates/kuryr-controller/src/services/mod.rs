//! Services on Octavia: the Service front end ([`frontend`]) writes one KuryrLoadBalancer per Service from
//! the Service and its endpoints; the KuryrLoadBalancer controller ([`crate::loadbalancers`]) makes Octavia
//! match it. Both run from [`run`] when `--service-subnet` is set. See docs/services.md.

pub mod context;
pub mod frontend;
pub mod member_subnets;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use kube::runtime::controller::{self, Controller};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::{reflector, watcher, WatchStreamExt};
use kuryr_api::k8s_openapi::api::discovery::v1::EndpointSlice;
use kuryr_api::{Api, KuryrLoadBalancer, Service};
use kuryr_core::lb::AllowList;
use kuryr_openstack::Cloud;
use tracing::{info, info_span, Instrument};

pub use context::LbContext;

use crate::config::Config;
use crate::loadbalancers;
use crate::metrics::Metrics;
use crate::shutdown::run_controller;
use crate::slim;

/// Label EndpointSlices carry naming their Service.
pub const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";

/// Service front-end reconciles in flight at most.
const SERVICE_CONCURRENCY: u16 = 128;

/// Settings of the Services side.
#[derive(Clone, Debug)]
pub struct ServicesConfig {
    /// VIP subnet: the subnet holding the cluster's service IP range (clusterIPs are the VIPs).
    pub service_subnet_id: String,
    /// Subnet of the members (the pod subnet); `None` lets Octavia use the VIP subnet.
    pub member_subnet_id: Option<String>,
    /// External network floating IPs of type=LoadBalancer Services come from; `None`: no floating IPs.
    pub external_network_id: Option<String>,
    /// Octavia provider when a Service names none (`openstack.org/kuryr-lb-provider`); `None`: Octavia's
    /// default.
    pub provider: Option<String>,
    /// What Octavia's default provider is, for the feature gates when no provider is named.
    pub default_provider: String,
    /// Whether `default/kubernetes` gets a load balancer (pods reach the API servers through it).
    pub default_kubernetes: DefaultKubernetes,
    /// Providers a Service may name besides `provider` (`openstack.org/kuryr-lb-provider`); empty: only
    /// `provider`. Anything else is refused (docs/security.md).
    pub allowed_providers: Vec<String>,
    /// External networks a Service's `loadBalancerIP` may be on, besides `external_network_id`.
    pub floating_ip_networks: Vec<String>,
    /// Ranges a `loadBalancerIP` must fall in; empty: any address of the allowed networks.
    pub floating_ip_cidrs: Vec<kuryr_core::policy::Cidr>,
    /// An LB (or part of its tree) PENDING_* this long is replaced.
    pub pending_limit: Duration,
    /// Periodic check that Octavia still has every listener, pool and member.
    pub drift_interval: Duration,
    /// Endpoint changes closer together than this go out as one member replace.
    pub coalesce: Duration,
    /// Polls of a pending load balancer start here and grow by half up to `poll_max`.
    pub poll_min: Duration,
    pub poll_max: Duration,
}

impl ServicesConfig {
    pub fn new(service_subnet_id: impl Into<String>) -> Self {
        Self {
            service_subnet_id: service_subnet_id.into(),
            member_subnet_id: None,
            external_network_id: None,
            provider: None,
            default_provider: "amphora".into(),
            default_kubernetes: DefaultKubernetes::Auto,
            allowed_providers: Vec::new(),
            floating_ip_networks: Vec::new(),
            floating_ip_cidrs: Vec::new(),
            // Upstream's lbaas_activation_timeout; amphora LBs take minutes on real clouds.
            pending_limit: Duration::from_secs(300),
            drift_interval: Duration::from_secs(300),
            coalesce: Duration::from_millis(300),
            poll_min: Duration::from_millis(200),
            poll_max: Duration::from_secs(5),
        }
    }
}

/// Who gives `default/kubernetes` its load balancer. The Service is the cluster's, not a namespace's: a
/// controller scoped to one namespace (`--namespace`) does not see it unless told to serve it too.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum DefaultKubernetes {
    /// Served when the controller sees it: it watches every namespace, or `default`.
    Auto,
    /// Served also by a controller scoped to another namespace (one such controller per cluster).
    #[value(alias = "true")]
    Always,
    /// Never: something else (the installer, a cloud LB) makes pods reach the API servers. A load balancer
    /// made earlier is released, also by a controller scoped to another namespace (how an uninstall
    /// releases it, docs/operations.md).
    #[value(alias = "false")]
    Never,
}

impl ServicesConfig {
    /// A load balancer for `default/kubernetes` when the front end meets that Service.
    pub fn serves_default_kubernetes(&self) -> bool {
        self.default_kubernetes != DefaultKubernetes::Never
    }

    /// The allow-lists every KuryrLoadBalancer is held to; `project`: the controller's project.
    pub fn allow_list(&self, project: Option<String>) -> AllowList {
        let mut fip_networks: Vec<String> = self.external_network_id.iter().cloned().collect();
        for n in &self.floating_ip_networks {
            if !fip_networks.contains(n) {
                fip_networks.push(n.clone());
            }
        }
        AllowList {
            default_provider: self.provider.clone(),
            providers: self.allowed_providers.clone(),
            vip_subnet: self.service_subnet_id.clone(),
            project,
            fip_networks,
            fip_create_network: self.external_network_id.clone(),
            fip_cidrs: self.floating_ip_cidrs.clone(),
        }
    }
}

/// The Service an EndpointSlice belongs to, by its `kubernetes.io/service-name` label.
pub fn service_of(slice: &EndpointSlice) -> Option<ObjectRef<Service>> {
    let ns = slice.metadata.namespace.as_deref()?;
    let svc = slice.metadata.labels.as_ref()?.get(SERVICE_NAME_LABEL)?;
    Some(ObjectRef::new(svc).within(ns))
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

    /// Watch of the EndpointSlices (labelled with their Service's name).
    fn slices(&self) -> watcher::Config {
        match self.name {
            Some(n) => watcher::Config::default().labels(&format!("{SERVICE_NAME_LABEL}={n}")),
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
    // Caches fed slimmed objects (no managedFields, see crate::slim), built as Controller::new builds them.
    let (klb_store, klb_writer) = reflector::store();
    let klb_stream = watcher(klb_api.clone(), scope.objects())
        .modify(slim::meta)
        .reflect(klb_writer)
        .applied_objects();
    let klb_controller = Controller::for_stream(klb_stream, klb_store);
    let (svc_store, svc_writer) = reflector::store();
    let svc_stream = watcher(svc_api, scope.objects())
        .modify(slim::meta)
        .reflect(svc_writer)
        .applied_objects();
    // Bounded: after a restart every Service is due at once, and each reconcile in flight holds a kube
    // request's worth of memory; it only writes to the apiserver.
    let mut svc_controller = Controller::for_stream(svc_stream, svc_store)
        .owns(klb_api, scope.objects())
        .with_config(controller::Config::default().concurrency(SERVICE_CONCURRENCY));

    // Backends come from EndpointSlices v1 (every supported Kubernetes serves them; Endpoints v1 is
    // deprecated since 1.33), however many slices a Service is split into.
    let (slice_store, slice_writer) = reflector::store::<EndpointSlice>();
    let stream = watcher(scope.api::<EndpointSlice>(&client), scope.slices())
        .default_backoff()
        .modify(slim::meta)
        .reflect(slice_writer)
        .touched_objects();
    svc_controller = svc_controller.watches_stream(stream, |s: EndpointSlice| service_of(&s));
    let ctx = Arc::new(LbContext::new(
        client,
        cloud,
        config.cluster_id.clone(),
        config.project_id.clone(),
        svc_config,
        metrics,
        slice_store,
        klb_controller.store(),
    ));
    let span =
        |kind: &'static str| info_span!("controller", kind, namespace = ?scope.namespace, name = ?scope.name);
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
    tokio::join!(klb_run, svc_run);
}
