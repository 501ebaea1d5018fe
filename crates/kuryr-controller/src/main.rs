//! `kuryr-controller`: see docs/controller.md.

use kuryr_controller::Args;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    Args::parse_and_run().await
}
