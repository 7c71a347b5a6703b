//! The `anyplay-cloud` binary: configuration in, a node out, SIGTERM to drain.

use anyhow::Context;
use clap::Parser;
use tokio::signal::unix::{signal, SignalKind};

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
    if let Err(e) = anyplay_cloud::raise_fd_limit() {
        tracing::warn!(error = %e, "could not raise the open-file limit");
    }
    let node = anyplay_cloud::Node::start(config)
        .await
        .context("the node could not start")?;
    let mut term = signal(SignalKind::terminate()).context("cannot watch SIGTERM")?;
    let mut int = signal(SignalKind::interrupt()).context("cannot watch SIGINT")?;
    let drain = node.drainer();
    tokio::spawn(async move {
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
        drain.start();
    });
    node.wait().await.context("the node failed")?;
    Ok(())
}
