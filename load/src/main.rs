//! The `anyplay-load` command: flags to settings, a target, a run, the tables and the JSON report;
//! or, as `anyplay-load agent`, a load agent that plays shares of runs coordinated over NATS;
//! or, as `anyplay-load client`, one headless game client.

use std::process::ExitCode;

use anyhow::Context;
use clap::Parser;
use tracing_subscriber::EnvFilter;

use anyplay_load::measure::progress::Progress;
use anyplay_load::report::{json, table, Report};
use anyplay_load::run::{self, budget};
use anyplay_load::settings::{self, AgentArgs, AgentsSettings, Args, Command, Mode, Settings};
use anyplay_load::target::inprocess::InProcess;
use anyplay_load::{agents, Target};

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let args = Args::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    match args.command.clone() {
        Some(Command::Agent(agent)) => return serve(agent),
        Some(Command::Client(client)) => return ride(client),
        None => {}
    }
    let threads = args
        .threads
        .map(usize::from)
        .or((!args.url.is_empty()).then_some(1));
    let spread = args.clone();
    let settings = match Settings::from_args(args) {
        Ok(settings) => settings,
        Err(e) => return refused(e),
    };
    let agents = match settings::agents(&spread, &settings) {
        Ok(agents) => agents,
        Err(e) => return refused(e),
    };
    // A run too big for this process is refused before it starts (agents hold their own
    // players' sockets, and each checks its share).
    if agents.is_none() {
        match budget::open_file_limit() {
            Ok(limit) => {
                if let Err(e) = budget::check(&budget::of_load_run(&settings), limit) {
                    return refused(e);
                }
            }
            Err(e) => tracing::warn!("could not raise the open-files limit: {e}"),
        }
    }
    let Some(runtime) = runtime(threads) else {
        return ExitCode::FAILURE;
    };
    match runtime.block_on(play(settings, agents)) {
        Ok(report) if report.incomplete => {
            for agent in report.agents.iter().flatten().filter(|a| a.lost) {
                eprintln!(
                    "anyplay-load: agent {:?} stopped answering at {:.1}s: the run is incomplete",
                    agent.name,
                    agent.lost_at_s.unwrap_or(0.0)
                );
            }
            ExitCode::FAILURE
        }
        Ok(_) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("anyplay-load: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn refused(e: impl std::fmt::Display) -> ExitCode {
    eprintln!("anyplay-load: refused: {e}");
    ExitCode::from(2)
}

/// The runtime of `threads` workers (every core when not given), after taking the whole
/// open-files limit: thousands of players need thousands of sockets.
fn runtime(threads: Option<usize>) -> Option<tokio::runtime::Runtime> {
    if let Err(e) = budget::open_file_limit() {
        tracing::warn!("could not raise the open-files limit: {e}");
    }
    let mut builder = match threads {
        // One thread is the caller's: a worker beside it would be woken across threads
        // for every task the caller's future spawns.
        Some(1) => tokio::runtime::Builder::new_current_thread(),
        Some(threads) => {
            let mut builder = tokio::runtime::Builder::new_multi_thread();
            builder.worker_threads(threads);
            builder
        }
        None => tokio::runtime::Builder::new_multi_thread(),
    };
    match builder.enable_all().build() {
        Ok(runtime) => Some(runtime),
        Err(e) => {
            eprintln!("anyplay-load: starting the runtime: {e}");
            None
        }
    }
}

/// `anyplay-load client`: plays, then exits 0 when nothing broke, 1 naming what did.
fn ride(args: anyplay_load::settings::ClientArgs) -> ExitCode {
    // One player: one thread.
    let Some(runtime) = runtime(Some(1)) else {
        return ExitCode::FAILURE;
    };
    let out = args.out.clone();
    match runtime.block_on(anyplay_load::game_client::run(args)) {
        Ok(seen) => match anyplay_load::game_client::report(&seen, out.as_deref()) {
            Ok(()) if seen.breaks.is_empty() => ExitCode::SUCCESS,
            Ok(()) => ExitCode::FAILURE,
            Err(e) => {
                eprintln!("anyplay-load client: {e:#}");
                ExitCode::FAILURE
            }
        },
        Err(e) => {
            eprintln!("anyplay-load client: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `anyplay-load agent`: serves runs until killed.
fn serve(args: AgentArgs) -> ExitCode {
    let Some(runtime) = runtime(None) else {
        return ExitCode::FAILURE;
    };
    match runtime.block_on(agents::agent::serve(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("anyplay-load agent: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn play(settings: Settings, agents: Option<AgentsSettings>) -> anyhow::Result<Report> {
    let (cloud, target) = match &settings.mode {
        Mode::External(external) => (None, Target::external(external)?),
        Mode::InProcess { .. } | Mode::Cluster { .. } => {
            let (cloud, target) = InProcess::start(&settings.mode).await?;
            (Some(cloud), target)
        }
    };
    let progress = Progress::stderr();
    let report = match &agents {
        Some(agents) => agents::run(&settings, &target, agents, &progress)
            .await
            .map_err(anyhow::Error::from),
        None => run::run(&settings, target, progress)
            .await
            .map_err(anyhow::Error::from),
    };
    if let Some(cloud) = cloud {
        cloud.shutdown().await;
    }
    let report = report?;
    print!("{}", table::render(&report));
    if let Some(path) = &settings.json {
        json::write(&report, path)
            .with_context(|| format!("writing the report to {}", path.display()))?;
    }
    Ok(report)
}
