//! The `anyplay-load` command: flags to settings, a target, a run, the tables and the JSON report.

use std::process::ExitCode;

use anyhow::Context;
use clap::Parser;
use tracing_subscriber::EnvFilter;

use anyplay_load::inprocess::InProcess;
use anyplay_load::progress::Progress;
use anyplay_load::report::{json, table};
use anyplay_load::settings::{Args, Mode, Settings};
use anyplay_load::{budget, runner, Target};

fn main() -> ExitCode {
    let args = Args::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    let settings = match Settings::from_args(args) {
        Ok(settings) => settings,
        Err(e) => {
            eprintln!("anyplay-load: refused: {e}");
            return ExitCode::from(2);
        }
    };
    // Thousands of players need thousands of sockets: take the whole hard limit, and refuse
    // a run that needs more before it starts.
    match budget::open_file_limit() {
        Ok(limit) => {
            if let Err(e) = budget::check(&budget::of_load_run(&settings), limit) {
                eprintln!("anyplay-load: refused: {e}");
                return ExitCode::from(2);
            }
        }
        Err(e) => tracing::warn!("could not raise the open-files limit: {e}"),
    }
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
    let (cloud, target) = match &settings.mode {
        Mode::External(external) => (None, Target::external(external)?),
        Mode::InProcess { .. } | Mode::Cluster { .. } => {
            let (cloud, target) = InProcess::start(&settings.mode).await?;
            (Some(cloud), target)
        }
    };
    let report = runner::run(&settings, target, Progress::stderr()).await;
    if let Some(cloud) = cloud {
        cloud.shutdown().await;
    }
    let report = report?;
    print!("{}", table::render(&report));
    if let Some(path) = &settings.json {
        json::write(&report, path)
            .with_context(|| format!("writing the report to {}", path.display()))?;
    }
    Ok(())
}
