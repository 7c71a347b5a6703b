//! A whole run, in the order the contract fixes: the login wave, the friend graph, then the
//! scenarios of `--scenarios` (the storm last); then the players stop and the report is built.

pub mod budget;

use std::sync::Arc;

use futures_util::future::BoxFuture;

use crate::api::client::http_client;
use crate::api::net::SourceIps;
use crate::error::LoadError;
use crate::measure::generator::Generator;
use crate::measure::progress::Progress;
use crate::measure::provenance::{self, Machine};
use crate::measure::stats::Op;
use crate::players::fleet::Fleet;
use crate::report::{json, Report, ScenarioReport, SCHEMA};
use crate::scenarios::{cards, friends, ladder, login, presence, sessions, storm, traffic, Ctx};
use crate::settings::{Mode, Scenario, Settings};
use crate::target::metrics;
use crate::target::Target;

/// Runs `settings` against `target` and returns the report. Boxed, as `InProcess::start`.
pub fn run<'a>(
    settings: &'a Settings,
    target: Target,
    progress: Progress,
) -> BoxFuture<'a, Result<Report, LoadError>> {
    Box::pin(async move {
        let run = Run::start(settings, target, progress).await?;
        let scenarios = play(&run).await;
        match scenarios {
            Ok(scenarios) => Ok(run.finish(scenarios).await),
            Err(e) => {
                // Players stop whatever happened, so no task outlives the run.
                run.ctx.fleet.shutdown().await;
                Err(e)
            }
        }
    })
}

/// A run between its start and its report, for callers that put their own work after the
/// warm-up (`anyplay-chaos` runs its timeline there).
pub struct Run {
    pub ctx: Ctx,
    generator: Generator,
    metrics_http: reqwest::Client,
    before: Vec<Option<metrics::Metrics>>,
    target: Target,
}

impl Run {
    /// Checks the settings against the target, starts the generator's health and makes the fleet.
    pub async fn start(
        settings: &Settings,
        target: Target,
        progress: Progress,
    ) -> Result<Run, LoadError> {
        refuse_what_the_target_cannot_do(settings, &target)?;
        let generator = Generator::start(
            target.nodes.iter().filter_map(|n| n.pid).collect(),
            target.pool.clone(),
        );
        let metrics_http = http_client(None)
            .map_err(|e| LoadError::Refused(format!("building an HTTP client: {e}")))?;
        let before = metrics::scrape_all(&metrics_http, &target.nodes).await;
        let players = settings.first_player..settings.first_player + settings.total_players();
        // With the cloud's limits on, every player is counted alone, from an address of its own.
        let own_addresses = settings
            .traffic
            .rate_limits
            .map(|_| SourceIps::one_per_player(players.clone()));
        let fleet = Fleet::new(
            &target,
            players,
            settings.reconnect,
            settings.seed,
            own_addresses.as_ref().or(settings.source_ips.as_ref()),
            settings.tag.as_deref(),
        )
        .await?;
        let ctx = Ctx {
            settings: Arc::new(settings.clone()),
            fleet: Arc::new(fleet),
            lag: generator.lag().clone(),
            progress,
            control: target.control.clone(),
        };
        Ok(Run {
            ctx,
            generator,
            metrics_http,
            before,
            target,
        })
    }

    /// Stops the players and builds the report of `scenarios`.
    pub async fn finish(self, scenarios: Vec<ScenarioReport>) -> Report {
        self.ctx.fleet.shutdown().await;
        let after = metrics::scrape_all(&self.metrics_http, &self.target.nodes).await;
        let settings = self.ctx.settings.as_ref().clone();
        let cloud_in_harness = !matches!(settings.mode, Mode::External(_));
        let (generator, process) = self.generator.finish(cloud_in_harness).await;
        Report {
            schema: SCHEMA,
            machine: Machine::detect(),
            settings,
            commit: provenance::commit(),
            date: json::now(),
            generator,
            scenarios,
            server: metrics::report(&self.before, &after),
            process,
            agents: None,
            incomplete: false,
        }
    }
}

/// The login wave and the friend graph, which every other scenario needs.
pub async fn warm_up(ctx: &Ctx) -> Result<Vec<ScenarioReport>, LoadError> {
    let login = login::run(ctx).await;
    if ctx.fleet.online_count() == 0 {
        let statuses = login.ops.get(&Op::E2eLogin).map(|op| {
            op.status
                .iter()
                .map(|(status, n)| format!("{}:{n}", status.label()))
                .collect::<Vec<_>>()
                .join(" ")
        });
        return Err(LoadError::NobodyOnline {
            asked: ctx.settings.players,
            statuses: statuses.unwrap_or_default(),
        });
    }
    Ok(vec![login, friends::run(ctx).await])
}

async fn play(run: &Run) -> Result<Vec<ScenarioReport>, LoadError> {
    let ctx = &run.ctx;
    let mut reports = warm_up(ctx).await?;
    for next in &ctx.settings.scenarios {
        reports.extend(scenario(ctx, *next).await?);
    }
    Ok(reports)
}

/// One scenario after the warm-up; none for those of the warm-up (login, friends).
pub async fn scenario(ctx: &Ctx, scenario: Scenario) -> Result<Option<ScenarioReport>, LoadError> {
    Ok(Some(match scenario {
        // Always run first, in the warm-up.
        Scenario::Login | Scenario::Friends => return Ok(None),
        // The provoking traffic rides beside the presence changes.
        Scenario::Presence => {
            let (report, _) = tokio::join!(
                presence::run(ctx),
                traffic::drive(ctx, ctx.settings.presence.duration)
            );
            report
        }
        Scenario::Sessions => sessions::run(ctx).await,
        Scenario::Cards => cards::run(ctx).await,
        Scenario::Ladder => ladder::run(ctx).await,
        Scenario::Storm => storm::run(ctx).await?,
    }))
}

/// Settings can be valid and still ask what this target cannot give (a library caller may
/// build its own target).
fn refuse_what_the_target_cannot_do(settings: &Settings, target: &Target) -> Result<(), LoadError> {
    let kind = settings.storm.kind;
    if !settings.runs(Scenario::Storm) || !kind.needs_cluster() {
        return Ok(());
    }
    if target.control.is_none() {
        return Err(LoadError::Refused(format!(
            "storm {} needs control over the nodes, which this target does not give",
            kind.name()
        )));
    }
    if target.nodes.len() < 2 {
        return Err(LoadError::Refused(format!(
            "storm {} needs a second node to fail over to; the target has {}",
            kind.name(),
            target.nodes.len()
        )));
    }
    Ok(())
}
