//! `presence`: `--presence-rate` activity changes per second over random online players for
//! `--presence-seconds`. Each change's version is its send time, so each friend's event gives
//! the delivery time; every friend online when the change was acknowledged is expected to
//! receive it (a later version counts as received).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rand_chacha::ChaCha8Rng;

use crate::api::wire::AccountId;
use crate::measure::stats::Recorder;
use crate::players::choices::{self, pick, Purpose};
use crate::players::player::Player;
use crate::report::{DeliveryReport, ScenarioReport};
use crate::scenarios::{Ctx, Driven};
use crate::schedule::{self, Plan};
use crate::sync::lock;

/// How long after the last change deliveries are waited for (the chaos check's window).
pub const DELIVERY_WINDOW: Duration = Duration::from_secs(3);

/// A friend that should see a change.
struct Expected {
    receiver: Arc<Player>,
    from: AccountId,
    version: u64,
}

impl Expected {
    fn received(&self) -> bool {
        self.receiver
            .received_version(self.from)
            .is_some_and(|v| v >= self.version)
    }
}

/// Activities a change picks from.
const ACTIVITIES: usize = 100_000;

/// One activity change as drawn: which of the online players, and its new activity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// Index into the players online as the scenario started, in fleet order.
    pub player: usize,
    pub activity: String,
}

/// Change `i` of a run with `seed`, among `online` players.
pub fn choose(seed: u64, i: u64, online: usize) -> Option<Change> {
    let mut rng = choices::stream(seed, Purpose::Presence, i);
    let player = pick(&mut rng, online)?;
    Some(Change {
        player,
        activity: activity(&mut rng),
    })
}

/// An activity drawn from `rng`.
pub(crate) fn activity(rng: &mut ChaCha8Rng) -> String {
    format!("match {}", pick(rng, ACTIVITIES).unwrap_or(0))
}

pub async fn run(ctx: &Ctx) -> ScenarioReport {
    let recorder = ctx.begin();
    let driven = drive(ctx, &recorder).await;
    driven.finish(ScenarioReport::new(
        "presence",
        &recorder.snapshot(),
        recorder.start().elapsed(),
    ))
}

/// The changes, on the fleet's current recorder, and their deliveries.
pub(crate) async fn drive(ctx: &Ctx, recorder: &Recorder) -> Driven {
    let online = Arc::new(ctx.online());
    let expected = Arc::new(Mutex::new(Vec::new()));
    let changes = Arc::new(AtomicU64::new(0));
    let presence = &ctx.settings.presence;
    let plan = Plan::for_duration(presence.rate, presence.duration, ctx.settings.max_in_flight);
    let bar = ctx.progress.bar("presence", plan.count);
    let seed = ctx.settings.seed;
    let outcome = schedule::run(&plan, &ctx.lag, |i, at| {
        let change = choose(seed, i, online.len()).map(|c| (online[c.player].clone(), c.activity));
        let (fleet, expected, changes, bar) = (
            ctx.fleet.clone(),
            expected.clone(),
            changes.clone(),
            bar.clone(),
        );
        async move {
            if let Some((player, activity)) = change {
                if let (Ok(version), Some(from)) =
                    (player.set_presence(&activity, at).await, player.account())
                {
                    changes.fetch_add(1, Ordering::Relaxed);
                    let receivers = player
                        .friends()
                        .into_iter()
                        .filter_map(|friend| fleet.by_account(friend))
                        .filter(|friend| friend.is_online())
                        .map(|friend| Expected {
                            receiver: friend.clone(),
                            from,
                            version,
                        });
                    lock(&expected).extend(receivers);
                }
            }
            bar.inc(1);
        }
    })
    .await;
    bar.finish();
    let deadline = Instant::now() + DELIVERY_WINDOW;
    let received = loop {
        let received = lock(&expected).iter().filter(|e| e.received()).count();
        if received == lock(&expected).len() || Instant::now() >= deadline {
            break received as u64;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let expected = lock(&expected).len() as u64;
    Driven {
        plan,
        outcome,
        delivery: Some(DeliveryReport::new(
            changes.load(Ordering::Relaxed),
            expected,
            received,
            &recorder.snapshot(),
        )),
    }
}
