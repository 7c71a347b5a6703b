//! The `anyplay-cloud` binary: configuration in, a node out, SIGTERM to drain.

use anyhow::Context;
use clap::Parser;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("ANYPLAY_LOG")
                .unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let config = anyplay_cloud::Args::parse()
        .into_config()
        .context("invalid configuration")?;
    anyplay_cloud::serve_until_signalled(config)
        .await
        .context("the node failed")
}
