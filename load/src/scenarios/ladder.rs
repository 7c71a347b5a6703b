//! `ladder`: rungs of concurrent players (`--ladder`). On each rung the players above the last
//! rung sign in at `--rate`, a warm-up runs (measured, reported as the ramp, and left out of the
//! steady figures), then a steady window; every online player makes one call per
//! `--ladder-think` (presence, friends list, gamer cards in turn). The knee is the last rung
//! whose steady p99 is within `--budget-ms` with no failed or skipped call; the ladder stops at
//! the first rung past it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::api::wire::AccountId;
use crate::measure::stats::{ms, Recorder, Snapshot};
use crate::players::choices::{self, pick, Purpose};
use crate::report::{LadderReport, RungReport, ScenarioReport};
use crate::scenarios::{cards, login, presence, Ctx};
use crate::schedule::{self, Outcome, Plan};

pub async fn run(ctx: &Ctx) -> ScenarioReport {
    let ladder = &ctx.settings.ladder;
    let started = Instant::now();
    let mut total = Snapshot::default();
    let mut rungs: Vec<RungReport> = Vec::new();
    let mut signed_in = ctx.settings.players;
    for &players in &ladder.rungs {
        let ramp = ctx.begin();
        let (_, login) = login::wave(ctx, signed_in..players, &format!("rung {players}")).await;
        signed_in = players;
        let warm = workload(ctx, players, ladder.warmup, false).await;
        let steady = ctx.begin();
        let main = workload(ctx, players, ladder.steady, true).await;
        let (ramp_snapshot, steady_snapshot) = (ramp.snapshot(), steady.snapshot());
        for (recorder, snapshot) in [(&ramp, &ramp_snapshot), (&steady, &steady_snapshot)] {
            total.merge_shifted(snapshot, offset(started, recorder));
        }
        let steady_p99_ms = ms(steady_snapshot.http_latency().value_at_quantile(0.99));
        let (steady_calls, steady_errors) = steady_snapshot.http_calls();
        let skipped_saturated =
            login.skipped_saturated + warm.skipped_saturated + main.skipped_saturated;
        let within_budget = steady_calls > 0
            && steady_errors == 0
            && skipped_saturated == 0
            && steady_p99_ms <= ladder.budget_ms;
        rungs.push(RungReport {
            players,
            online: ctx.fleet.online_count(),
            ramp_p99_ms: ms(ramp_snapshot.http_latency().value_at_quantile(0.99)),
            steady_p99_ms,
            steady_calls,
            steady_errors,
            skipped_saturated,
            within_budget,
        });
        if !within_budget {
            break;
        }
    }
    let knee = rungs
        .iter()
        .take_while(|r| r.within_budget)
        .last()
        .map(|r| r.players);
    let mut report = ScenarioReport::new("ladder", &total, started.elapsed());
    report.skipped_saturated = rungs.iter().map(|r| r.skipped_saturated).sum();
    report.ladder = Some(LadderReport {
        budget_ms: ladder.budget_ms,
        rungs,
        knee,
    });
    report
}

/// Whole seconds from the ladder's start to the recorder's, where its series goes.
fn offset(started: Instant, recorder: &Recorder) -> usize {
    usize::try_from(
        recorder
            .start()
            .saturating_duration_since(started)
            .as_secs(),
    )
    .unwrap_or(usize::MAX)
}

/// `players / think` calls per second over the online players for `duration` (the rung's
/// warm-up or its `steady` window), open loop.
async fn workload(ctx: &Ctx, players: usize, duration: Duration, steady: bool) -> Outcome {
    let online = Arc::new(ctx.online());
    let accounts = cards::accounts(&ctx.fleet);
    let rate = players as f64 / ctx.settings.ladder.think.as_secs_f64();
    let plan = Plan::for_duration(rate, duration, ctx.settings.max_in_flight);
    let name = if steady { "steady" } else { "warm-up" };
    let bar = ctx.progress.bar(&format!("{players} {name}"), plan.count);
    let (size, seed) = (ctx.settings.cards.size, ctx.settings.seed);
    let purpose = Purpose::Ladder {
        rung: players,
        steady,
    };
    let outcome = schedule::run(&plan, &ctx.lag, |i, at| {
        let mut rng = choices::stream(seed, purpose, i);
        // Presence, friends list and gamer cards in turn.
        let call = match i % 3 {
            0 => pick(&mut rng, online.len()).map(|k| {
                (
                    online[k].clone(),
                    Call::Presence(presence::activity(&mut rng)),
                )
            }),
            1 => pick(&mut rng, online.len()).map(|k| (online[k].clone(), Call::Friends)),
            _ => cards::draw_call(&ctx.fleet, &online, &accounts, size, &mut rng)
                .map(|(player, ids)| (player, Call::Cards(ids))),
        };
        let bar = bar.clone();
        async move {
            if let Some((player, call)) = call {
                // Failures are recorded; the rung's verdict reads them from the recorder.
                let _ = match call {
                    Call::Presence(activity) => player.set_presence(&activity, at).await.map(drop),
                    Call::Friends => player.list_friends(at).await.map(drop),
                    Call::Cards(ids) => player.cards(&ids, at).await,
                };
            }
            bar.inc(1);
        }
    })
    .await;
    bar.finish();
    outcome
}

/// What a player does on a rung.
enum Call {
    Presence(String),
    Friends,
    Cards(Vec<AccountId>),
}
