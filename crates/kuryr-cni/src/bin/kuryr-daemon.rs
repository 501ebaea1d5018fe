//! kuryr-daemon: one per node. Watches its node's KuryrPorts and Pods, serves kuryr-cni on a root-only unix
//! socket, and exposes /livez, /readyz and /metrics.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use clap::Parser;
use kuryr_cni::binding::{NetlinkBinder, NetlinkBinderConfig};
use kuryr_cni::daemon::{health, server, watch, Daemon, DaemonConfig, NodeCache};
use prometheus_client::registry::Registry;
use tracing::info;

#[derive(Parser, Debug)]
#[command(
    name = "kuryr-daemon",
    version = kuryr_version::VERSION,
    about = "Kuryr CNI daemon: wires pod interfaces from KuryrPorts"
)]
struct Args {
    /// This node's name (the KuryrPort nodeName label and the Pods' spec.nodeName).
    #[arg(long, env = "KURYR_NODE_NAME")]
    node_name: String,
    /// Unix socket the kuryr-cni plugin connects to.
    #[arg(long, env = "KURYR_CNI_SOCKET", default_value = kuryr_cni::protocol::DEFAULT_SOCKET)]
    socket: PathBuf,
    /// Address of /livez, /readyz and /metrics.
    #[arg(long, env = "KURYR_HEALTH_ADDR", default_value = "127.0.0.1:8090")]
    health_addr: SocketAddr,
    /// Longest an ADD waits for the pod's VIFs to be active, in seconds.
    #[arg(long, env = "KURYR_ADD_TIMEOUT", default_value_t = 60)]
    add_timeout: u64,
    /// Parent NIC of nested VIFs that name none.
    #[arg(long, env = "KURYR_LINK_IFACE", default_value = "eth0")]
    link_iface: String,
    /// Bridge for neutron-vif veths that name none.
    #[arg(long, env = "KURYR_BRIDGE", default_value = "br-int")]
    bridge: String,
    /// Namespace holding the parent NICs and bridges, when it is not the daemon's own. For nested lab
    /// nodes (a "VM" that is a network namespace): the daemon stays in the root namespace to reach the API
    /// server and makes its links from this one. In production the daemon runs in the VM with hostNetwork
    /// and this is unset.
    #[arg(long, env = "KURYR_HOST_NETNS")]
    host_netns: Option<PathBuf>,
    /// Where the runtime keeps sandbox namespaces (searched for stale interfaces).
    #[arg(long, env = "KURYR_NETNS_DIR", default_value = "/var/run/netns")]
    netns_dir: PathBuf,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        // Plain text into log files (colour only on a terminal).
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stdout()))
        .init();
    let args = Args::parse();
    let kube_config = kuryr_api::kubeconfig::load(None)
        .await
        .context("connecting to Kubernetes")?;
    if let Some(w) = kuryr_api::kubeconfig::tls_warning(&kube_config) {
        tracing::warn!("{w}");
    }
    let client = kuryr_api::Client::try_from(kube_config).context("connecting to Kubernetes")?;
    let cache = NodeCache::new();
    tokio::spawn(watch::run(client, args.node_name.clone(), cache.clone()));

    let binder = NetlinkBinder::new(NetlinkBinderConfig {
        host_netns: args.host_netns,
        link_iface: args.link_iface,
        bridge: args.bridge,
        netns_dir: args.netns_dir,
    });
    let daemon = Arc::new(Daemon::new(
        cache.clone(),
        binder,
        DaemonConfig {
            add_timeout: Duration::from_secs(args.add_timeout),
        },
    ));
    let mut registry = Registry::default();
    daemon.metrics.register(&mut registry);
    let admin = tokio::net::TcpListener::bind(args.health_addr)
        .await
        .with_context(|| format!("binding {}", args.health_addr))?;
    tokio::spawn(async move { axum::serve(admin, health::router(cache, registry)).await });

    let listener =
        server::bind_socket(&args.socket).with_context(|| format!("binding {}", args.socket.display()))?;
    info!(socket = %args.socket.display(), node = %args.node_name, "serving CNI requests");
    server::serve(listener, daemon, shutdown_signal()).await;
    let _ = std::fs::remove_file(&args.socket);
    Ok(())
}

async fn shutdown_signal() {
    let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(s) => s,
        Err(_) => return std::future::pending().await,
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {},
        _ = term.recv() => {},
    }
}
