//! `sessions`: `--session-rate` sessions per second for `--session-seconds`: a leader creates one
//! of `--session-size`, online friends join — one more than the seats, so that every session is
//! raced to its size and one join is refused `session_full` — the session is held
//! `--session-hold`, all leave: the members first, or, for `--leader-leaves-first` of the
//! sessions, the leader first (leadership passes on, and a member reads the session back),
//! the members a few seconds later. One session in [`STRANGER_EVERY`] also has a stranger (no
//! friend of its leader) try to join, which the cloud must refuse `not_allowed`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::future::join_all;

use rand::Rng as _;

use crate::players::choices::{self, pick, Purpose};
use crate::players::player::Player;
use crate::report::ScenarioReport;
use crate::scenarios::{Ctx, Driven};
use crate::schedule::{self, Plan};

/// Whether session `i` of a run with `seed` has its leader leave first, for that `share`.
pub fn leader_first(seed: u64, i: u64, share: f64) -> bool {
    share > 0.0 && choices::stream(seed, Purpose::LeaderFirst, i).random::<f64>() < share
}

/// How long the members stay after their leader left: longer than the cloud's bounded
/// delivery time, so that the leader's leaving is owed to each of them.
const STAY_AFTER_LEADER: Duration = Duration::from_secs(4);

/// Every this many sessions, one with a stranger among the joiners.
const STRANGER_EVERY: u64 = 4;

/// Random picks tried for a free leader before the slot is given up.
const LEADER_TRIES: usize = 8;

/// Session `i` of a run with `seed`: its leaders among `online` players (indices in fleet
/// order), in the order they are tried; the first not in another session leads.
pub fn leaders(seed: u64, i: u64, online: usize) -> Vec<usize> {
    let mut rng = choices::stream(seed, Purpose::Sessions, i);
    (0..LEADER_TRIES)
        .filter_map(|_| pick(&mut rng, online))
        .collect()
}

pub async fn run(ctx: &Ctx) -> ScenarioReport {
    let recorder = ctx.begin();
    let driven = drive(ctx).await;
    driven.finish(ScenarioReport::new(
        "sessions",
        &recorder.snapshot(),
        recorder.start().elapsed(),
    ))
}

/// The parties, on the fleet's current recorder.
pub(crate) async fn drive(ctx: &Ctx) -> Driven {
    let online = Arc::new(ctx.online());
    let settings = &ctx.settings.sessions;
    let plan = Plan::for_duration(settings.rate, settings.duration, ctx.settings.max_in_flight);
    let bar = ctx.progress.bar("sessions", plan.count);
    let (size, hold, seed) = (settings.size, settings.hold, ctx.settings.seed);
    let share = settings.leader_leaves_first;
    let outcome = schedule::run(&plan, &ctx.lag, |i, at| {
        // One joiner more than the seats left.
        let party = reserve_party(ctx, &online, i, size as usize + 1);
        let bar = bar.clone();
        async move {
            if let Some(party) = party {
                play(&party, size, hold, at, leader_first(seed, i, share)).await;
                party.iter().for_each(|p| p.release());
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

/// Session `i`'s free leader and up to `size - 1` of its free online friends (in fleet
/// order), all reserved (`size` counts the leader).
fn reserve_party(
    ctx: &Ctx,
    online: &[Arc<Player>],
    i: u64,
    size: usize,
) -> Option<Vec<Arc<Player>>> {
    let leader = leaders(ctx.settings.seed, i, online.len())
        .into_iter()
        .map(|k| &online[k])
        .find(|p| p.try_reserve())?;
    let mut party = vec![leader.clone()];
    for friend in ctx.fleet.friends_of(leader) {
        if party.len() == size {
            break;
        }
        if friend.is_online() && friend.try_reserve() {
            party.push(friend.clone());
        }
    }
    if i % STRANGER_EVERY == 0 {
        let friends: Vec<_> = leader.friends();
        // From halfway round the fleet on, so strangers are not always the same players.
        let stranger = online
            .iter()
            .cycle()
            .skip(online.len() / 2 + i as usize)
            .take(online.len())
            .find(|p| {
                p.index != leader.index
                    && p.account().is_some_and(|a| !friends.contains(&a))
                    && p.try_reserve()
            });
        party.extend(stranger.cloned());
    }
    Some(party)
}

/// Create (timed from the planned start), join, hold, leave.
async fn play(party: &[Arc<Player>], size: u32, hold: Duration, at: Instant, leader_first: bool) {
    let (leader, members) = party.split_first().expect("a party has its leader");
    let Ok(session) = leader.create_session(size, at).await else {
        return;
    };
    let joins = join_all(
        members
            .iter()
            .map(|m| m.join_session(&session.id, Instant::now())),
    )
    .await;
    tokio::time::sleep(hold).await;
    let joined = members
        .iter()
        .zip(&joins)
        .filter(|(_, j)| j.is_ok())
        .map(|(m, _)| m)
        .collect::<Vec<_>>();
    if leader_first {
        // Leadership passes to the longest-standing member, who reads it back.
        let _ = leader.leave_session(&session.id, Instant::now()).await;
        if let Some(first) = joined.first() {
            let _ = first.read_session(&session.id).await;
        }
        tokio::time::sleep(STAY_AFTER_LEADER).await;
        join_all(
            joined
                .iter()
                .map(|m| m.leave_session(&session.id, Instant::now())),
        )
        .await;
    } else {
        join_all(
            joined
                .iter()
                .map(|m| m.leave_session(&session.id, Instant::now())),
        )
        .await;
        // The leader last: its leaving closes the session.
        let _ = leader.leave_session(&session.id, Instant::now()).await;
    }
}
