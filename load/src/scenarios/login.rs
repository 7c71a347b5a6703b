//! `login`: the players sign up (or, for `--returning` of them, sign in) at `--rate` per second:
//! auth/email, auth/code, auth/signup, the event WebSocket, then `GET /v1/friends`.

use std::ops::Range;

use futures_util::StreamExt;

use crate::measure::stats::Recorder;
use crate::report::{PlayersReport, ScenarioReport};
use crate::scenarios::Ctx;
use crate::schedule::{self, Outcome, Plan};

pub async fn run(ctx: &Ctx) -> ScenarioReport {
    let players = 0..ctx.settings.players;
    prepare_returning(ctx, 0..ctx.settings.returning).await;
    let recorder = ctx.begin();
    let (plan, outcome) = wave(ctx, players.clone(), "login").await;
    let online = ctx.fleet.players()[players.clone()]
        .iter()
        .filter(|p| p.is_online())
        .count();
    let mut report = ScenarioReport::new("login", &recorder.snapshot(), recorder.start().elapsed())
        .scheduled(&plan, &outcome);
    report.players = Some(PlayersReport {
        asked: players.len(),
        online,
    });
    report
}

/// Logs in the players of `range` at `--rate` per second, open loop.
pub(crate) async fn wave(ctx: &Ctx, range: Range<usize>, name: &str) -> (Plan, Outcome) {
    let plan = Plan {
        rate: ctx.settings.rate,
        count: range.len() as u64,
        max_in_flight: ctx.settings.max_in_flight,
    };
    let bar = ctx.progress.bar(name, plan.count);
    let players = &ctx.fleet.players()[range];
    let outcome = schedule::run(&plan, &ctx.lag, |i, at| {
        let (player, bar) = (players[i as usize].clone(), bar.clone());
        async move {
            player.log_in(at).await;
            bar.inc(1);
        }
    })
    .await;
    bar.finish_with_message(format!("{} online", ctx.fleet.online_count()));
    (plan, outcome)
}

/// Makes the accounts of the returning players before the measured wave, so that the wave
/// signs them in; nothing of it is reported.
async fn prepare_returning(ctx: &Ctx, range: Range<usize>) {
    if range.is_empty() {
        return;
    }
    ctx.fleet.set_recorder(Recorder::new());
    let bar = ctx.progress.bar("returning", range.len() as u64);
    futures_util::stream::iter(&ctx.fleet.players()[range])
        .for_each_concurrent(ctx.settings.max_in_flight, |player| {
            let bar = bar.clone();
            async move {
                if let Err(e) = player.sign_in().await {
                    tracing::warn!(
                        player = player.index,
                        "making a returning account failed: {e}"
                    );
                }
                player.forget_tokens().await;
                bar.inc(1);
            }
        })
        .await;
    bar.finish();
}
