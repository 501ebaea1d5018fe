//! `kuryrctl`: see docs/kuryrctl.md.

#[tokio::main]
async fn main() {
    // Logs go to stderr (stdout is the report); `RUST_LOG` as usual, warnings by default.
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
    let code = match kuryrctl::Cli::parse_args().run().await {
        Ok(code) => code,
        Err(e) => {
            eprintln!("kuryrctl: {e:#}");
            2
        }
    };
    std::process::exit(code);
}
