//! kuryr-daemon: one per node. Watches its node's KuryrPorts and Pods, serves kuryr-cni on a root-only unix
//! socket, and exposes /livez, /readyz and /metrics.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use clap::Parser;
use kuryr_cni::binding::{NetlinkBinder, NetlinkBinderConfig};
use kuryr_cni::daemon::{conflist, health, server, watch, Daemon, DaemonConfig, NodeCache};
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
    /// Pins this node's NIC for nested VIFs (the VLAN/macvlan parent) when it exists here. Unset (the
    /// default): the VIF's `parentIfname` if the node has it, else the link with the VM port's MAC.
    #[arg(long, env = "KURYR_LINK_IFACE")]
    link_iface: Option<String>,
    /// Bridge for neutron-vif veths that name none.
    #[arg(long, env = "KURYR_BRIDGE", default_value = "br-int")]
    bridge: String,
    /// Namespace holding the parent NICs and bridges, when it is not the daemon's own. For nested lab
    /// nodes (a "VM" that is a network namespace): the daemon stays in the root namespace to reach the API
    /// server and makes its links from this one. In production the daemon runs in the VM with hostNetwork
    /// and this is unset.
    #[arg(long, env = "KURYR_HOST_NETNS")]
    host_netns: Option<PathBuf>,
    /// Namespace holding the neutron-vif bridge and the veths' host ends, when it is not --host-netns
    /// (the lab's nested nodes: the VM's NIC in the VM's namespace, br-int in the machine's own, given
    /// as /proc/self/ns/net).
    #[arg(long, env = "KURYR_BRIDGE_NETNS")]
    bridge_netns: Option<PathBuf>,
    /// The ovsdb-server socket neutron-vif plugs host ends through when the bridge is Open vSwitch's
    /// (`external_ids:iface-id` names the Neutron port, as ovn-controller and the OVS agent bind by).
    #[arg(long, env = "KURYR_OVSDB", default_value = kuryr_cni::binding::ovsdb::DEFAULT_SOCKET)]
    ovsdb: PathBuf,
    /// Where the runtime keeps sandbox namespaces (searched for stale interfaces).
    #[arg(long, env = "KURYR_NETNS_DIR", default_value = "/var/run/netns")]
    netns_dir: PathBuf,
    /// The runtime's CNI configuration directory (e.g. /etc/cni/net.d, as mounted). When set, the daemon
    /// writes its conflist there once it serves and removes it when it stops.
    #[arg(long, env = "KURYR_CNI_CONF_DIR")]
    cni_conf_dir: Option<PathBuf>,
    /// The conflist's file name in --cni-conf-dir.
    #[arg(long, env = "KURYR_CNI_CONF_NAME", default_value = conflist::DEFAULT_NAME)]
    cni_conf_name: String,
    /// The socket's path as the plugin on the host sees it, when it differs from --socket (the daemon's
    /// view inside its container).
    #[arg(long, env = "KURYR_CNI_HOST_SOCKET")]
    cni_host_socket: Option<PathBuf>,
    /// Leave the conflist in place when the daemon stops (the node keeps reporting its network ready
    /// while the daemon restarts; ADDs meanwhile wait in the plugin up to its timeout).
    #[arg(long, env = "KURYR_KEEP_CNI_CONF")]
    keep_cni_conf: bool,
    /// Do not give the node a way to its own nested-macvlan pods (a macvlan `kmv-<parent>` and a /32 route
    /// per local pod). Without it the node, its kubelet's HTTP/TCP probes included, reaches every pod but
    /// those on itself.
    #[arg(long, env = "KURYR_NO_MACVLAN_HOST_LINK")]
    no_macvlan_host_link: bool,
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
        link_iface: args.link_iface.filter(|s| !s.is_empty()),
        bridge: args.bridge,
        bridge_netns: args.bridge_netns,
        ovsdb: args.ovsdb,
        netns_dir: args.netns_dir,
        macvlan_host_link: !args.no_macvlan_host_link,
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
    let health_cache = cache.clone();
    tokio::spawn(async move { axum::serve(admin, health::router(health_cache, registry)).await });

    let listener =
        server::bind_socket(&args.socket).with_context(|| format!("binding {}", args.socket.display()))?;
    info!(socket = %args.socket.display(), node = %args.node_name, "serving CNI requests");
    let conf = args.cni_conf_dir.clone().map(|dir| {
        let socket = args
            .cni_host_socket
            .clone()
            .unwrap_or_else(|| args.socket.clone());
        // The plugin waits a little longer than an ADD may take, so the daemon's own error reaches it.
        let content = conflist::render(&socket, args.add_timeout + 15);
        tokio::spawn(install_conflist(
            cache.clone(),
            dir,
            args.cni_conf_name.clone(),
            content,
        ))
    });
    server::serve(listener, daemon, shutdown_signal()).await;
    if let Some(task) = conf {
        task.abort();
        if let Ok(Some(installed)) = task.await {
            if args.keep_cni_conf {
                info!(path = %installed.path().display(), "leaving the CNI conflist in place");
            } else {
                let path = installed.path().to_owned();
                match installed.remove() {
                    Ok(()) => info!(path = %path.display(), "CNI conflist removed"),
                    Err(e) => {
                        tracing::warn!(path = %path.display(), error = %e, "could not remove the CNI conflist")
                    }
                }
            }
        }
    }
    let _ = std::fs::remove_file(&args.socket);
    Ok(())
}

/// Writes the conflist once the caches are synced (the socket is already bound); returns what it wrote,
/// for shutdown to remove.
async fn install_conflist(
    cache: Arc<NodeCache>,
    dir: PathBuf,
    name: String,
    content: String,
) -> Option<conflist::Installed> {
    let mut changed = cache.subscribe();
    while !cache.is_synced() {
        if changed.changed().await.is_err() {
            return None;
        }
    }
    match conflist::install(&dir, &name, &content) {
        Ok(installed) => {
            info!(path = %installed.path().display(), "CNI conflist written: this node takes pods now");
            Some(installed)
        }
        Err(e) => {
            tracing::error!(dir = %dir.display(), error = %e, "could not write the CNI conflist");
            None
        }
    }
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
