//! A run spread over load agents: `anyplay-load agent` processes, anywhere NATS reaches, each
//! playing a share of the players with the same [`crate::run::Run`] and scenarios as a run in
//! one process, and a coordinator (`anyplay-load --agents N --nats URL`) that splits the run,
//! starts every phase at one agreed instant and merges what the agents measured exactly.
//!
//! - [`protocol`]: the subjects (under `anyplay.load.<run id>.`) and messages; histograms travel
//!   serialized, never as percentiles.
//! - [`share`]: each agent's players (a range of the run's numbers) and its part of each rate.
//! - [`clock`]: an agent's clock offset to the coordinator's, from pings.
//! - [`codes`]: sign-in codes relayed by the coordinator, so agents need no file of the cloud's.
//! - [`health`]: an agent's health, once a second.
//! - [`agent`]: the agent process; [`coordinator`]: the coordinator, as a library.
//! - [`merge`]: the agents' reports of a phase as one.
//!
//! Every message is sealed with the secret coordinator and agents share ([`crate::seal`]).
//!
//! Each agent's players make friends among themselves only (the ring of `--friends` runs within
//! a share), and draw each operation's actor from the run's seed among its own players; what a
//! player draws for itself (its reconnect waits) uses its number in the run, as in one process.

pub mod agent;
pub(crate) mod clock;
pub(crate) mod codes;
pub(crate) mod coordinator;
pub(crate) mod health;
pub(crate) mod merge;
pub mod protocol;
pub(crate) mod share;

use std::time::Duration;

use futures_util::future::BoxFuture;
use hdrhistogram::Histogram;
use tokio::sync::mpsc;

pub use coordinator::{Coordinator, PhaseResults};
pub use protocol::Phase;

use crate::api::client::http_client;
use crate::error::LoadError;
use crate::measure::facts::Stamped;
use crate::measure::generator::{Generator, GeneratorReport, LagReport};
use crate::measure::progress::Progress;
use crate::measure::provenance::{self, Machine};
use crate::players::final_reads::FinalReads;
use crate::report::{json, AgentReport, Report, ScenarioReport, SCHEMA};
use crate::settings::{AgentsSettings, Scenario, Settings};
use crate::target::metrics::{self, Metrics};
use crate::target::{NodeEndpoint, Target};

/// How long a coordinator waits for its agents to answer the offer.
pub const RECRUIT_WAIT: Duration = Duration::from_secs(30);

/// Why a run over agents could not go on.
#[derive(Debug, thiserror::Error)]
pub enum AgentsError {
    #[error("NATS at {url}: {detail}")]
    Nats { url: String, detail: String },
    #[error("{} of {wanted} load agents answered on {url} within {waited:?}{}", answered.len(),
        if answered.is_empty() { String::new() } else { format!(" ({})", answered.join(", ")) })]
    TooFew {
        wanted: usize,
        answered: Vec<String>,
        waited: Duration,
        url: String,
    },
    #[error("agent {agent:?}: {reason}")]
    Agent { agent: String, reason: String },
    #[error("every agent stopped answering")]
    AllLost,
    #[error(transparent)]
    Protocol(#[from] protocol::ProtocolError),
    #[error(transparent)]
    Seal(#[from] crate::seal::SealError),
    #[error("{0}")]
    Invalid(String),
    /// What a run in one process can fail with too.
    #[error(transparent)]
    Load(#[from] LoadError),
}

impl AgentsError {
    fn nats(url: &str, detail: &dyn std::fmt::Display) -> Self {
        AgentsError::Nats {
            url: anyplay_cloud::nats_auth::shown(url),
            detail: detail.to_string(),
        }
    }

    fn agent(agent: &str, reason: impl Into<String>) -> Self {
        AgentsError::Agent {
            agent: agent.to_string(),
            reason: reason.into(),
        }
    }
}

/// A NATS connection named `name` (for the server's monitoring).
/// Connects to NATS at `url` (a user and password or a token may be in it; `tls://` for
/// TLS), with the credentials file `creds` when the server asks for one.
async fn connect(
    url: &str,
    creds: Option<&std::path::Path>,
    name: &str,
) -> Result<async_nats::Client, AgentsError> {
    let (options, bare) = anyplay_cloud::nats_auth::options(url, creds)
        .await
        .map_err(|e| AgentsError::nats(url, &e))?;
    options
        .name(name)
        .connect(bare.as_str())
        .await
        .map_err(|e| AgentsError::nats(url, &e))
}

/// The whole run of `settings` over `agents` against `target`: recruit, assign, the warm-up
/// and each scenario as a phase, then the merged report. An agent lost on the way leaves the
/// report `incomplete`, with the agent named. Boxed, as `InProcess::start`.
pub fn run<'a>(
    settings: &'a Settings,
    target: &'a Target,
    agents: &'a AgentsSettings,
    progress: &'a Progress,
) -> BoxFuture<'a, Result<Report, AgentsError>> {
    Box::pin(async move {
        let spinner = progress.spinner("agents");
        let (mut session, _) = Session::start(settings, target, agents, false, &spinner).await?;
        let phases = std::iter::once(Phase::WarmUp).chain(
            settings
                .scenarios
                .iter()
                .filter(|s| !matches!(s, Scenario::Login | Scenario::Friends))
                .map(|&scenario| Phase::Scenario { scenario }),
        );
        let mut scenarios = Vec::new();
        for phase in phases {
            spinner.set_message(phase.name());
            match session.phase(phase).await {
                Ok(played) => scenarios.extend(played.scenarios),
                Err(e) => {
                    session.abort().await;
                    return Err(e);
                }
            }
        }
        spinner.set_message("finishing");
        let report = session.finish(scenarios).await;
        spinner.finish_and_clear();
        report
    })
}

/// A run over agents between its assignment and its report, for callers that put their own
/// work between the phases (`anyplay-chaos` runs its timeline there); [`run`] is the plainest.
pub struct Session {
    coordinator: Coordinator,
    /// The coordinator's own process and the nodes' ones; the players' health is the agents'.
    generator: Generator,
    http: reqwest::Client,
    before: Vec<Option<Metrics>>,
    settings: Settings,
    nodes: Vec<NodeEndpoint>,
}

/// What every agent did in one phase, merged.
pub struct Played {
    pub scenarios: Vec<ScenarioReport>,
    /// The agents found lost during the phase.
    pub lost: Vec<String>,
    pub left: usize,
    pub reads: FinalReads,
}

impl Session {
    /// Recruits `agents` and gives each its share; with `facts`, the receiver of every fact
    /// their players live (timed on this process's clock).
    pub async fn start(
        settings: &Settings,
        target: &Target,
        agents: &AgentsSettings,
        facts: bool,
        spinner: &indicatif::ProgressBar,
    ) -> Result<(Session, Option<mpsc::UnboundedReceiver<Stamped>>), AgentsError> {
        let generator = Generator::start(target.nodes.iter().filter_map(|n| n.pid).collect(), None);
        let http = http_client(None)
            .map_err(|e| LoadError::Refused(format!("building an HTTP client: {e}")))?;
        let before = metrics::scrape_all(&http, &target.nodes).await;
        spinner.set_message(format!(
            "waiting for {} on {}",
            agents.count, agents.nats_url
        ));
        let mut coordinator = Coordinator::recruit(
            &agents.nats_url,
            agents.nats_creds.as_deref(),
            None,
            agents.count,
            RECRUIT_WAIT,
            &agents.secret,
        )
        .await?;
        let facts = facts.then(|| coordinator.facts()).flatten();
        spinner.set_message(format!(
            "assigning run {} to {}",
            coordinator.run_id(),
            coordinator.names().join(", ")
        ));
        if let Err(e) = coordinator.assign(settings, target).await {
            coordinator.abort().await;
            return Err(e);
        }
        let session = Session {
            coordinator,
            generator,
            http,
            before,
            settings: settings.clone(),
            nodes: target.nodes.clone(),
        };
        Ok((session, facts))
    }

    /// Plays `phase` on every agent still answering, merged.
    pub async fn phase(&mut self, phase: Phase) -> Result<Played, AgentsError> {
        let played = self.coordinator.run_phase(phase).await?;
        let results: Vec<_> = played.results.into_iter().map(|(_, r)| r).collect();
        Ok(Played {
            scenarios: merge::phase(&results)?,
            lost: played.lost,
            left: played.left,
            reads: played.reads,
        })
    }

    /// The agents: their shares, clocks, health, and whether they were lost.
    pub fn agents(&self) -> Vec<AgentReport> {
        self.coordinator.reports()
    }

    /// Players online over the agents, by their latest health.
    pub fn online(&self) -> impl Fn() -> usize + Send + Sync + 'static {
        self.coordinator.online()
    }

    /// Stops every agent's players; the run's report with `scenarios`.
    pub async fn finish(mut self, scenarios: Vec<ScenarioReport>) -> Result<Report, AgentsError> {
        let finished = self.coordinator.finish().await;
        let after = metrics::scrape_all(&self.http, &self.nodes).await;
        let (_, process) = self.generator.finish(false).await;
        let agents = self.coordinator.reports();
        Ok(Report {
            schema: SCHEMA,
            machine: Machine::detect(),
            settings: self.settings,
            commit: provenance::commit(),
            date: json::now(),
            generator: merged_generator(finished.iter().map(|(_, f)| f))?,
            scenarios,
            server: metrics::report(&self.before, &after),
            process,
            incomplete: agents.iter().any(|a| a.lost),
            agents: Some(agents),
        })
    }

    /// Ends the run without a report (after an error): the agents stop their players.
    pub async fn abort(mut self) {
        self.coordinator.abort().await;
        let _ = self.generator.finish(false).await;
    }
}

/// The agents' own health as one: scheduler lateness from their histograms added, CPU summed
/// over the agents, memory the largest agent's peak (each agent's is in its health).
fn merged_generator<'a>(
    finished: impl Iterator<Item = &'a protocol::Finished>,
) -> Result<GeneratorReport, AgentsError> {
    let mut lag: Option<Histogram<u64>> = None;
    let (mut cpu, mut rss) = (0.0, 0.0_f64);
    for agent in finished {
        let theirs = agent.sched_lag.decode()?;
        match &mut lag {
            Some(lag) => lag
                .add(&theirs)
                .map_err(|e| protocol::ProtocolError::Histogram(format!("{e:?}")))?,
            None => lag = Some(theirs),
        }
        cpu += agent.generator.cpu_cores_avg;
        rss = rss.max(agent.generator.rss_mb_peak);
    }
    Ok(GeneratorReport {
        sched_lag_ms: lag.as_ref().map_or(
            LagReport {
                p50: 0.0,
                p99: 0.0,
                max: 0.0,
            },
            LagReport::of,
        ),
        cpu_cores_avg: cpu,
        rss_mb_peak: rss,
        pool_busy: None,
    })
}
