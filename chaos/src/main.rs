//! `anyplay-chaos`: parses the command line, runs the command, and maps its outcome to the
//! exit code (0 pass, 1 a check failed, 2 invalid plan or topology that could not start).

mod cli;

use std::process::ExitCode;

use clap::Parser;

use cli::{Cli, Command, Outcome};

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(outcome) => outcome.into(),
        Err(err) => {
            eprintln!("anyplay-chaos: {err:#}");
            Outcome::Invalid.into()
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<Outcome> {
    match &cli.command {
        Command::Check { plan } => cli::check(plan),
        Command::Report { dir } => cli::report(dir),
        Command::Run { .. } | Command::Up { .. } | Command::Rerun { .. } => {
            not_built_yet(&cli.command)
        }
    }
}

/// `run`, `up` and `rerun` wait for `anyplay_chaos::runner`; until it lands they say so.
fn not_built_yet(command: &Command) -> anyhow::Result<Outcome> {
    let what = match command {
        Command::Run {
            plan,
            out,
            seed,
            backend,
        } => format!(
            "run {} (out {out:?}, seed {seed:?}, backend {:?})",
            plan.display(),
            backend.map(anyplay_chaos::plan::Backend::from)
        ),
        Command::Up { plan } => format!("up {}", plan.display()),
        Command::Rerun { dir } => format!("rerun {}", dir.display()),
        Command::Check { .. } | Command::Report { .. } => "this command".to_owned(),
    };
    anyhow::bail!("{what}: not built yet")
}
