//! `anyplay-chaos`: parses the command line, runs the command, and maps its outcome to the
//! exit code (0 pass, 1 a check failed, 2 invalid plan or topology that could not start).

mod cli;

use std::process::ExitCode;

use clap::Parser;

use cli::{Cli, Command, Outcome};

fn main() -> ExitCode {
    let cli = Cli::parse();
    cli::init_logs(&cli.command);
    match run(cli) {
        Ok(outcome) => outcome.into(),
        // The reader went away (`check PLAN | head`): nothing more to say, as in ripgrep.
        Err(err) if is_broken_pipe(&err) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("anyplay-chaos: {err:#}");
            Outcome::Invalid.into()
        }
    }
}

fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

fn run(cli: Cli) -> anyhow::Result<Outcome> {
    match cli.command {
        Command::Check { plan } => cli::check(&plan),
        Command::Report { dir } => cli::report(&dir),
        Command::Run {
            plan,
            out,
            metrics,
            overrides,
            junit,
        } => cli::run(&plan, out, metrics, overrides, junit.as_deref()),
        Command::Up {
            plan,
            out,
            api,
            metrics,
            overrides,
        } => cli::up(&plan, out, api, metrics, overrides),
        Command::Rerun {
            dir,
            junit,
            trust_plan,
        } => cli::rerun(&dir, junit.as_deref(), trust_plan),
        Command::Compare {
            a,
            b,
            latency_tolerance,
        } => cli::compare(&a, &b, latency_tolerance),
        #[cfg(feature = "seeded-defects")]
        Command::Selftest { cases, out, jobs } => cli::selftest(cases, out, jobs),
        Command::Node { args } => cli::node(args),
        Command::Agent(args) => cli::agent(args),
        Command::Client(args) => cli::client(args),
    }
}
