//! `cards`: `--cards-rate` gamer-card calls per second for `--cards-seconds`, each for
//! `--cards-size` accounts, friends first; a call without exactly one card per id, in order,
//! counts as `wrong_count`.

use std::sync::Arc;

use rand_chacha::ChaCha8Rng;

use crate::api::wire::AccountId;
use crate::players::choices::{self, pick, Purpose};
use crate::players::fleet::Fleet;
use crate::players::player::Player;
use crate::report::ScenarioReport;
use crate::scenarios::{Ctx, Driven};
use crate::schedule::{self, Plan};

/// A call as drawn: its caller, and the accounts that fill it up past the caller's friends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    /// Index into the players online as the scenario started, in fleet order.
    pub caller: usize,
    /// Indices into the run's accounts (in fleet order).
    pub fill: Vec<usize>,
}

/// Draws a call from `rng`: the caller among `online` players, then as many of `accounts`
/// accounts as `places(caller)` says its friends leave free.
pub fn choose(
    rng: &mut ChaCha8Rng,
    online: usize,
    accounts: usize,
    places: impl FnOnce(usize) -> usize,
) -> Option<Call> {
    let caller = pick(rng, online)?;
    let fill = (0..places(caller))
        .map_while(|_| pick(rng, accounts))
        .collect();
    Some(Call { caller, fill })
}

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
    let accounts = accounts(&ctx.fleet);
    let settings = &ctx.settings.cards;
    let plan = Plan::for_duration(settings.rate, settings.duration, ctx.settings.max_in_flight);
    let bar = ctx.progress.bar("cards", plan.count);
    let (size, seed) = (settings.size, ctx.settings.seed);
    let outcome = schedule::run(&plan, &ctx.lag, |i, at| {
        let mut rng = choices::stream(seed, Purpose::Cards, i);
        let call = draw_call(&ctx.fleet, &online, &accounts, size, &mut rng);
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

/// The accounts of the run's signed-in players, in fleet order.
pub(crate) fn accounts(fleet: &Fleet) -> Vec<AccountId> {
    fleet.players().iter().filter_map(|p| p.account()).collect()
}

/// A call drawn from `rng` among `online` players: its caller and `size` ids, the caller's
/// friends first (in fleet order), then drawn `accounts`.
pub(crate) fn draw_call(
    fleet: &Fleet,
    online: &[Arc<Player>],
    accounts: &[AccountId],
    size: usize,
    rng: &mut ChaCha8Rng,
) -> Option<(Arc<Player>, Vec<AccountId>)> {
    let mut ids = Vec::new();
    let call = choose(rng, online.len(), accounts.len(), |caller| {
        ids = fleet
            .friends_of(&online[caller])
            .iter()
            .filter_map(|friend| friend.account())
            .take(size)
            .collect();
        size - ids.len()
    })?;
    ids.extend(call.fill.iter().map(|&k| accounts[k]));
    Some((online[call.caller].clone(), ids))
}
