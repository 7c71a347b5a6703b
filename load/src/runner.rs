//! A whole run, in the order the contract fixes: the login wave, the friend graph, then the
//! scenarios of `--scenarios` (the storm last); then the players stop and the report is built.

use std::sync::Arc;

use crate::client::http_client;
use crate::error::LoadError;
use crate::fleet::Fleet;
use crate::generator::Generator;
use crate::progress::Progress;
use crate::report::{json, Report, ScenarioReport, SCHEMA};
use crate::scenarios::{cards, friends, ladder, login, presence, sessions, storm, Ctx};
use crate::server;
use crate::settings::{Mode, Scenario, Settings};
use crate::stats::Op;
use crate::target::Target;

/// Runs `settings` against `target` and returns the report.
pub async fn run(
    settings: &Settings,
    target: Target,
    progress: Progress,
) -> Result<Report, LoadError> {
    settings.validate()?;
    refuse_what_the_target_cannot_do(settings, &target)?;
    let generator = Generator::start(
        target.nodes.iter().filter_map(|n| n.pid).collect(),
        target.pool.clone(),
    );
    let metrics_http = http_client(None)
        .map_err(|e| LoadError::Refused(format!("building an HTTP client: {e}")))?;
    let before = server::scrape_all(&metrics_http, &target.nodes).await;
    let fleet = Fleet::new(
        &target,
        settings.total_players(),
        settings.reconnect,
        settings.source_ips.as_ref(),
    )
    .await?;
    let ctx = Ctx {
        settings: Arc::new(settings.clone()),
        fleet: Arc::new(fleet),
        lag: generator.lag().clone(),
        progress,
        control: target.control.clone(),
    };
    let scenarios = play(&ctx).await;
    // Players stop whatever happened, so no task outlives the run.
    ctx.fleet.shutdown().await;
    let scenarios = scenarios?;
    let after = server::scrape_all(&metrics_http, &target.nodes).await;
    let cloud_in_harness = !matches!(settings.mode, Mode::External(_));
    let (generator, process) = generator.finish(cloud_in_harness).await;
    Ok(Report {
        schema: SCHEMA,
        machine: json::Machine::detect(),
        settings: settings.clone(),
        commit: json::commit(),
        date: json::now(),
        generator,
        scenarios,
        server: server::report(&before, &after),
        process,
    })
}

async fn play(ctx: &Ctx) -> Result<Vec<ScenarioReport>, LoadError> {
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
    let mut reports = vec![login, friends::run(ctx).await];
    for scenario in &ctx.settings.scenarios {
        reports.push(match scenario {
            // Always run first, above.
            Scenario::Login | Scenario::Friends => continue,
            Scenario::Presence => presence::run(ctx).await,
            Scenario::Sessions => sessions::run(ctx).await,
            Scenario::Cards => cards::run(ctx).await,
            Scenario::Ladder => ladder::run(ctx).await,
            Scenario::Storm => storm::run(ctx).await?,
        });
    }
    Ok(reports)
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
