//! The `anyplay-load` command: flags to settings, a target, a run, the tables and the JSON report.

use std::process::ExitCode;

use anyhow::Context;
use clap::Parser;
use tracing_subscriber::EnvFilter;

use anyplay_load::progress::Progress;
use anyplay_load::report::{json, table};
use anyplay_load::settings::{Args, Mode, Settings};
use anyplay_load::{runner, Target};

fn main() -> ExitCode {
    let args = Args::parse();
    tracing_subscriber::fmt()
        .with_env_filter(EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("warn")))
        .with_writer(std::io::stderr)
        .init();
    let settings = match Settings::from_args(args) {
        Ok(settings) => settings,
        Err(e) => {
            eprintln!("anyplay-load: refused: {e}");
            return ExitCode::from(2);
        }
    };
    raise_open_files_limit();
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("anyplay-load: starting the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(settings)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("anyplay-load: {e:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run(settings: Settings) -> anyhow::Result<()> {
    let target = match &settings.mode {
        Mode::External(external) => Target::external(external)?,
        Mode::InProcess { .. } | Mode::Cluster { .. } => in_process_target(&settings).await?,
    };
    let report = runner::run(&settings, target, Progress::stderr()).await?;
    print!("{}", table::render(&report));
    if let Some(path) = &settings.json {
        json::write(&report, path).with_context(|| format!("writing the report to {}", path.display()))?;
    }
    Ok(())
}

/// Starts the cloud inside the harness (one node on SQLite with a memory mail sink, or
/// `--nodes` on PostgreSQL and NATS) and returns it as a target.
async fn in_process_target(_settings: &Settings) -> anyhow::Result<Target> {
    anyhow::bail!("in-process mode is not built yet; use --url with --mail-log against running nodes")
}

/// Thousands of players need thousands of sockets: take the whole hard limit.
fn raise_open_files_limit() {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    let raised = getrlimit(Resource::RLIMIT_NOFILE).and_then(|(_, hard)| setrlimit(Resource::RLIMIT_NOFILE, hard, hard));
    if let Err(e) = raised {
        tracing::warn!("could not raise the open-files limit: {e}");
    }
}
