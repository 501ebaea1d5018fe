//! `kuryr-cloudsim --listen 127.0.0.1:PORT --profile FILE`: the emulator for the lab and benchmarks.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::Parser;
use kuryr_cloudsim::{AuthMode, Profile, Sim};

#[derive(Debug, Parser)]
#[command(
    name = "kuryr-cloudsim",
    about = "Keystone/Neutron/Octavia emulator for kuryr-rs"
)]
struct Args {
    /// Address to listen on (loopback only in the lab).
    #[arg(long, default_value = "127.0.0.1:8999", env = "KURYR_CLOUDSIM_LISTEN")]
    listen: SocketAddr,
    /// Profile (YAML or JSON); the zero-latency default when absent.
    #[arg(long, env = "KURYR_CLOUDSIM_PROFILE")]
    profile: Option<PathBuf>,
    /// Overrides the profile's time_scale.
    #[arg(long)]
    time_scale: Option<f64>,
    /// Overrides the profile's auth mode.
    #[arg(long, value_parser = ["keystone", "noauth"])]
    auth: Option<String>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .init();
    let args = Args::parse();
    let mut profile = match &args.profile {
        Some(p) => Profile::load(p)?,
        None => Profile::zero(),
    };
    if let Some(t) = args.time_scale {
        profile.time_scale = t;
    }
    match args.auth.as_deref() {
        Some("noauth") => profile.auth = AuthMode::Noauth,
        Some("keystone") => profile.auth = AuthMode::Keystone,
        _ => {}
    }
    let listener = tokio::net::TcpListener::bind(args.listen).await?;
    let addr = listener.local_addr()?;
    // One line on stdout that scripts wait for.
    println!("kuryr-cloudsim listening on http://{addr} (auth_url http://{addr}/v3)");
    tracing::info!(%addr, "serving");
    Sim::new(profile).serve(listener, shutdown_signal()).await?;
    Ok(())
}

/// SIGINT or SIGTERM (the lab stops it with TERM).
async fn shutdown_signal() {
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term => {}
    }
}
