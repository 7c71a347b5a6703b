//! The command line: the flags as clap reads them, the outcome every command ends in, and
//! the commands that need no running topology, `check`, `report` and `compare`.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context as _;
use clap::{Args, Parser, Subcommand, ValueEnum};

use anyplay_chaos::plan::{Backend, ImageOverride, Plan};
use anyplay_chaos::report::{self, compare, junit, markdown, Verdict};
use anyplay_chaos::runner;

#[derive(Debug, Parser)]
#[command(
    name = "anyplay-chaos",
    version,
    about = "Bring up a game-cloud topology, play players against it, break it on a timeline, check, report."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// The whole run: up, load, timeline, heal, check, report.
    Run {
        plan: PathBuf,
        /// Run directory; default results/runs/<plan name>-<UTC time>.
        #[arg(long)]
        out: Option<PathBuf>,
        /// Serve the run's series as Prometheus (OpenMetrics) text at ADDR/metrics while it runs.
        #[arg(long, value_name = "ADDR")]
        metrics: Option<std::net::SocketAddr>,
        #[command(flatten)]
        overrides: Overrides,
        /// Also write the checks as JUnit XML to this file.
        #[arg(long, value_name = "FILE")]
        junit: Option<PathBuf>,
    },
    /// Validate a plan without starting anything and print its resolved timeline.
    Check { plan: PathBuf },
    /// Start the topology and the load only, and hold them until Ctrl-C.
    /// Ctrl-C ends it: the faults are healed, the run settles and is judged and reported as
    /// a `run`.
    Up {
        plan: PathBuf,
        /// Run directory; default results/runs/<plan name>-<UTC time>.
        #[arg(long)]
        out: Option<PathBuf>,
        /// Serve Toxiproxy's HTTP API over the run's fault proxies here (e.g. 127.0.0.1:8474).
        #[arg(long, value_name = "ADDR")]
        api: Option<std::net::SocketAddr>,
        /// Serve the run's series as Prometheus (OpenMetrics) text at ADDR/metrics while it runs.
        #[arg(long, value_name = "ADDR")]
        metrics: Option<std::net::SocketAddr>,
        #[command(flatten)]
        overrides: Overrides,
    },
    /// Render report.json, summary.md and report.html again from a run directory's event log.
    Report { dir: PathBuf },
    /// Run again the plan and seed recorded in a run directory.
    Rerun {
        dir: PathBuf,
        /// Also write the checks as JUnit XML to this file.
        #[arg(long, value_name = "FILE")]
        junit: Option<PathBuf>,
        /// Run the recorded plan's `clients` commands too: a run directory is data from
        /// wherever it came, and those are shell commands (refused without this).
        #[arg(long)]
        trust_plan: bool,
    },
    /// Compare run B with run A (run directories or report.json files): exit 1 when B fails
    /// a check that A passed, 2 when either cannot be read.
    Compare {
        a: PathBuf,
        b: PathBuf,
        /// How much slower than A a latency gate of B may measure before it is a regression,
        /// in percent (`20` or `20%`).
        #[arg(long, value_name = "PERCENT", default_value = "20%", value_parser = percent)]
        latency_tolerance: f64,
    },
    /// Proves the checks: a short plan against the cloud as it is (every check must pass) and
    /// once per defect built into it (the check named for the defect must fail); a release
    /// defect in a mixed-version cluster (must fail) and on every node alike (must pass).
    #[cfg(feature = "seeded-defects")]
    Selftest {
        /// Runs only these cases (repeatable): `clean`, a defect's name, or a release defect's
        /// name and `-alike`; default all.
        #[arg(long = "defect", value_name = "NAME")]
        cases: Vec<anyplay_chaos::selftest::Case>,
        /// Directory of the runs and the summary; default results/runs/selftest-<UTC time>.
        #[arg(long)]
        out: Option<PathBuf>,
        /// Cases run at once (each is a small cluster of its own, using about half a core).
        #[arg(long, default_value_t = std::num::NonZeroUsize::MIN)]
        jobs: std::num::NonZeroUsize,
    },
    /// Runs one cloud node (what a run's node processes are): takes `anyplay-cloud`'s flags.
    #[command(hide = true)]
    Node {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Runs one load agent (what a plan's local agents are): `anyplay-load agent`'s flags.
    #[command(hide = true)]
    Agent(anyplay_load::settings::AgentArgs),
    /// One headless game client for a plan's `clients:` (as `"$ANYPLAY_CHAOS" client …`):
    /// `anyplay-load client`'s flags.
    Client(anyplay_load::settings::ClientArgs),
}

/// What `run` and `up` may change of the plan; the run directory records the result.
#[derive(Debug, Args)]
pub struct Overrides {
    /// Overrides the plan's seed.
    #[arg(long)]
    seed: Option<u64>,
    /// Overrides the plan's backend.
    #[arg(long, value_enum)]
    backend: Option<BackendArg>,
    /// Replaces a service's Docker image where the plan runs it (repeatable): postgres=IMAGE,
    /// nats=IMAGE, nodes=IMAGE.
    #[arg(long = "image", value_name = "SERVICE=IMAGE")]
    images: Vec<ImageOverride>,
}

impl Overrides {
    /// The plan at `path` as it will run, read on the backend it will run on; an invalid
    /// plan is exit 2 with line and key.
    fn options(
        self,
        path: &Path,
        out: Option<PathBuf>,
        metrics: Option<std::net::SocketAddr>,
    ) -> anyhow::Result<runner::RunOptions> {
        let plan = Plan::load_on(path, self.backend.map(Into::into))
            .with_context(|| format!("{}", path.display()))?;
        Ok(runner::RunOptions {
            plan,
            out,
            seed: self.seed,
            images: self.images,
            metrics,
        })
    }
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum BackendArg {
    Process,
    Docker,
}

impl From<BackendArg> for Backend {
    fn from(arg: BackendArg) -> Backend {
        match arg {
            BackendArg::Process => Backend::Process,
            BackendArg::Docker => Backend::Docker,
        }
    }
}

/// How a command ended, and so the exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// 0: valid, or every check passed.
    Pass,
    /// 1: a check failed.
    Fail,
    /// 2: the plan is invalid (or the topology could not start, or an input cannot be read).
    Invalid,
}

impl From<Outcome> for ExitCode {
    fn from(outcome: Outcome) -> ExitCode {
        ExitCode::from(match outcome {
            Outcome::Pass => 0,
            Outcome::Fail => 1,
            Outcome::Invalid => 2,
        })
    }
}

impl From<Verdict> for Outcome {
    fn from(verdict: Verdict) -> Outcome {
        match verdict {
            Verdict::Pass => Outcome::Pass,
            Verdict::Fail => Outcome::Fail,
        }
    }
}

/// `check PLAN`: the resolved timeline on stdout, or the refusal (line and key) on stderr.
pub fn check(path: &Path) -> anyhow::Result<Outcome> {
    let plan = match Plan::load(path) {
        Ok(plan) => plan,
        Err(err) => {
            eprintln!("{}: {err}", path.display());
            return Ok(Outcome::Invalid);
        }
    };
    // `Plan::load` already walked the timeline with this seed, so this cannot refuse.
    let timeline = plan.resolve(plan.seed)?;
    let topology: Vec<String> = plan.topology().iter().map(ToString::to_string).collect();
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "{}: valid. {} backend, {}; {} players",
        path.display(),
        match plan.backend {
            Backend::Process => "process",
            Backend::Docker => "docker",
        },
        topology.join(", "),
        plan.load.players
    )?;
    if plan.backend == Backend::Docker {
        let images: Vec<String> = runner::images::of(&plan)
            .into_iter()
            .map(|(slot, image)| format!("{slot} {image}"))
            .collect();
        writeln!(out, "images: {}", images.join(", "))?;
    }
    writeln!(out, "\n{timeline}")?;
    Ok(Outcome::Pass)
}

/// `report DIR`: writes report.json and summary.md again and prints the tables.
pub fn report(dir: &Path) -> anyhow::Result<Outcome> {
    let dir = &anyplay_chaos::run_files::check_dir(dir)
        .with_context(|| format!("cannot report on {}", dir.display()))?;
    let report = report::render_dir(dir)
        .with_context(|| format!("cannot render the report of {}", dir.display()))?;
    let mut out = std::io::stdout().lock();
    write!(out, "{}", markdown::summary(&report))?;
    writeln!(
        out,
        "\nwrote {}, {} and {}",
        dir.join(report::REPORT_FILE).display(),
        dir.join(report::SUMMARY_FILE).display(),
        dir.join(report::HTML_FILE).display()
    )?;
    Ok(report.verdict.into())
}

/// `compare A B`: both sides side by side; exit 1 on a regression, 2 when a side cannot
/// be read.
pub fn compare(a: &Path, b: &Path, latency_tolerance: f64) -> anyhow::Result<Outcome> {
    let a = compare::read(a)?;
    let b = compare::read(b)?;
    let comparison = compare::compare(&a, &b, latency_tolerance);
    print!("{}", compare::render(&a, &b, &comparison));
    Ok(if comparison.regressions().is_empty() {
        Outcome::Pass
    } else {
        Outcome::Fail
    })
}

/// Logs go to stderr; a node's at `info` (its log file is the run's record of it), the
/// supervisor's at `warn` so they do not drown its progress.
pub fn init_logs(command: &Command) {
    let default = match command {
        Command::Node { .. } | Command::Agent(_) => "info",
        _ => "warn",
    };
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("ANYPLAY_LOG")
                .unwrap_or_else(|_| default.into()),
        )
        .with_writer(std::io::stderr)
        .init();
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Runtime::new().context("cannot start the async runtime")
}

fn finished(
    result: Result<runner::Finished, runner::RunError>,
    junit: Option<&Path>,
) -> anyhow::Result<Outcome> {
    let finished = result?;
    if let Some(path) = junit {
        std::fs::write(path, junit::junit(&finished.report))
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    if finished.interrupted {
        eprintln!(
            "anyplay-chaos: interrupted; the report covers what ran: {}",
            finished.dir.display()
        );
        return Ok(Outcome::Fail);
    }
    Ok(finished.report.verdict.into())
}

/// `run PLAN`: exit 0 pass, 1 a check failed, 2 invalid plan or topology that did not start.
pub fn run(
    path: &Path,
    out: Option<PathBuf>,
    metrics: Option<std::net::SocketAddr>,
    overrides: Overrides,
    junit: Option<&Path>,
) -> anyhow::Result<Outcome> {
    let options = overrides.options(path, out, metrics)?;
    raise_fd_limit();
    finished(runtime()?.block_on(runner::run(options)), junit)
}

/// `up PLAN`: holds the topology and the players until Ctrl-C, then judges the run; exits
/// as `run`.
pub fn up(
    path: &Path,
    out: Option<PathBuf>,
    api: Option<std::net::SocketAddr>,
    metrics: Option<std::net::SocketAddr>,
    overrides: Overrides,
) -> anyhow::Result<Outcome> {
    let options = overrides.options(path, out, metrics)?;
    raise_fd_limit();
    finished(runtime()?.block_on(runner::up(options, api)), None)
}

/// `rerun DIR`: the recorded plan and seed, again.
pub fn rerun(dir: &Path, junit: Option<&Path>, trust_plan: bool) -> anyhow::Result<Outcome> {
    raise_fd_limit();
    finished(runtime()?.block_on(runner::rerun(dir, trust_plan)), junit)
}

/// `selftest`: exit 0 only when the clean run passed and every defect was caught.
#[cfg(feature = "seeded-defects")]
pub fn selftest(
    cases: Vec<anyplay_chaos::selftest::Case>,
    out: Option<PathBuf>,
    jobs: std::num::NonZeroUsize,
) -> anyhow::Result<Outcome> {
    use anyplay_chaos::selftest;
    let cases = if cases.is_empty() {
        selftest::Case::all()
    } else {
        cases
    };
    let out = out.unwrap_or_else(|| {
        PathBuf::from("results/runs").join(format!("selftest-{}", runner::utc_stamp()))
    });
    let out = anyplay_chaos::run_files::prepare_dir(&out)
        .with_context(|| format!("cannot use {} for the self-test", out.display()))?;
    let command = std::env::args().collect::<Vec<_>>().join(" ");
    raise_fd_limit();
    let summary = runtime()?.block_on(selftest::run(&cases, &out, jobs, command))?;
    print!("{}", selftest::table(&summary.rows));
    println!(
        "\nself-test {}; wrote {} and {}",
        if summary.passed { "passed" } else { "FAILED" },
        out.join(selftest::JSON_FILE).display(),
        out.join(selftest::MARKDOWN_FILE).display()
    );
    Ok(if summary.passed {
        Outcome::Pass
    } else {
        Outcome::Fail
    })
}

/// `node ARGS`: one cloud node until SIGTERM (drain) — the same as the `anyplay-cloud` binary.
pub fn node(args: Vec<String>) -> anyhow::Result<Outcome> {
    let config =
        anyplay_cloud::Args::parse_from(std::iter::once("anyplay-cloud".to_string()).chain(args))
            .into_config()
            .context("invalid node configuration")?;
    runtime()?
        .block_on(anyplay_cloud::serve_until_signalled(config))
        .context("the node failed")?;
    Ok(Outcome::Pass)
}

/// `agent`: plays shares of runs offered on NATS until killed (the same code as
/// `anyplay-load agent`).
pub fn client(args: anyplay_load::settings::ClientArgs) -> anyhow::Result<Outcome> {
    let out = args.out.clone();
    let seen = runtime()?
        .block_on(anyplay_load::game_client::run(args))
        .context("the client could not play")?;
    anyplay_load::game_client::report(&seen, out.as_deref())?;
    Ok(match seen.breaks.is_empty() {
        true => Outcome::Pass,
        false => Outcome::Fail,
    })
}

pub fn agent(args: anyplay_load::settings::AgentArgs) -> anyhow::Result<Outcome> {
    raise_fd_limit();
    runtime()?
        .block_on(anyplay_load::agents::agent::serve(args))
        .context("the load agent failed")?;
    Ok(Outcome::Pass)
}

/// Thousands of players and proxied links need thousands of sockets.
fn raise_fd_limit() {
    if let Err(e) = anyplay_cloud::raise_fd_limit() {
        tracing::warn!("could not raise the open-file limit: {e}");
    }
}

/// `20` or `20%` as a share (0.2); never negative.
fn percent(text: &str) -> Result<f64, String> {
    let number = text.strip_suffix('%').unwrap_or(text).trim();
    match number.parse::<f64>() {
        Ok(p) if p >= 0.0 && p.is_finite() => Ok(p / 100.0),
        _ => Err(format!("`{text}` is not a percentage (20, or 20%)")),
    }
}
