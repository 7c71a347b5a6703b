//! `cards`: `--cards-rate` gamer-card calls per second for `--cards-seconds`, each for
//! `--cards-size` accounts, friends first; a call without exactly one card per id, in order,
//! counts as `wrong_count`.

use std::sync::Arc;

use rand::Rng;

use crate::player::Player;
use crate::report::ScenarioReport;
use crate::scenarios::{pick, Ctx, Driven};
use crate::schedule::{self, Plan};
use crate::wire::AccountId;

pub async fn run(ctx: &Ctx) -> ScenarioReport {
    let recorder = ctx.begin();
    let driven = drive(ctx).await;
    driven.finish(ScenarioReport::new(
        "cards",
        &recorder.snapshot(),
        recorder.start().elapsed(),
    ))
}

/// The calls, on the fleet's current recorder.
pub(crate) async fn drive(ctx: &Ctx) -> Driven {
    let online = Arc::new(ctx.online());
    let accounts: Arc<Vec<AccountId>> = Arc::new(
        ctx.fleet
            .players()
            .iter()
            .filter_map(|p| p.account())
            .collect(),
    );
    let settings = &ctx.settings.cards;
    let plan = Plan::for_duration(settings.rate, settings.duration, ctx.settings.max_in_flight);
    let bar = ctx.progress.bar("cards", plan.count);
    let size = settings.size;
    let outcome = schedule::run(&plan, &ctx.lag, |_, at| {
        let call = pick(&online).map(|player| {
            let ids = card_ids(&player, &accounts, size);
            (player, ids)
        });
        let bar = bar.clone();
        async move {
            if let Some((player, ids)) = call {
                // Recorded, wrong counts included.
                let _ = player.cards(&ids, at).await;
            }
            bar.inc(1);
        }
    })
    .await;
    bar.finish();
    Driven {
        plan,
        outcome,
        delivery: None,
    }
}

/// `size` ids: the player's friends first, then random accounts of the run.
pub(crate) fn card_ids(player: &Player, accounts: &[AccountId], size: usize) -> Vec<AccountId> {
    let mut ids: Vec<AccountId> = player.friends().into_iter().take(size).collect();
    let mut rng = rand::rng();
    while ids.len() < size && !accounts.is_empty() {
        ids.push(accounts[rng.random_range(0..accounts.len())]);
    }
    ids
}
