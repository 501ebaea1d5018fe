//! `kuryrctl`: see docs/kuryrctl.md.

#[tokio::main]
async fn main() {
    let code = match kuryrctl::Cli::parse_args().run().await {
        Ok(code) => code,
        Err(e) => {
            eprintln!("kuryrctl: {e:#}");
            2
        }
    };
    std::process::exit(code);
}
