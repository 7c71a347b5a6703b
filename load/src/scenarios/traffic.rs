//! Traffic that provokes what the chaos checks judge, beside the other scenarios:
//! - friend writes (`--friend-rate`): requests, accepts, declines, cancels and unfriends between
//!   players, each one a write fact with its outcome, faults included;
//! - churn (`--churn-rate`): players sign off (1000) and come back after 1–10 s through the node
//!   a round-robin balancer would give them, so every node holds players all run long;
//! - second devices (`--second-devices`): a share of the players opens a second connection
//!   through another node for a few seconds, which must replace the first (4001); then the
//!   player's own device comes back and replaces the second;
//! - blocks (`--block-rate`): a player blocks another (half the time one of its friends)
//!   for 1–4 s; meanwhile the blocked side
//!   asks to be friends (404) and reads the blocker's card (missing), and the blocker asks
//!   too (403); after the unblock a friendship the block ended is made again;
//! - privacy changes (`--privacy-rate`): a player makes its card public, friends-only or
//!   private, which the gamer-card reads then show;
//! - logouts (`--logout-rate`): a player signs out, offers the refresh token the logout
//!   revoked, and (told by its connection's 4003) signs in again and reconnects;
//! - bursts past the cloud's per-address limits (`--rate-limits`, [`super::limits`]);
//! - slow readers flooded by a friend until the cloud closes them 1013 (`--slow-readers`,
//!   [`super::slow_readers`]).
//!
//! Every choice is drawn from the run's seed ([`crate::players::choices`]).

use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::future::join_all;
use rand::Rng;

use crate::api::wire::{FriendStatus, Privacy};
use crate::measure::facts::Device;
use crate::players::choices::{self, pick, Purpose};
use crate::players::fleet::Fleet;
use crate::players::player::Player;
use crate::scenarios::{limits, slow_readers, Ctx};
use crate::schedule::{self, Outcome, Plan};
use crate::sync::lock;

/// How long a churned player stays away: 1 to 10 s.
const AWAY: (f64, f64) = (1.0, 10.0);
/// How long a second device holds the account before the player's own device comes back.
const SECOND_HOLD: (f64, f64) = (2.0, 6.0);
/// How long a block holds before it is undone.
const BLOCK_HOLD: (f64, f64) = (1.0, 4.0);
/// How long a signed-out player has to be welcomed again before the other traffic may take it.
const SIGNED_BACK_WAIT: Duration = Duration::from_secs(10);
/// How long the second device waits for its 4001 before it closes itself.
const REPLACED_WAIT: Duration = Duration::from_secs(3);
/// The share of the players that sign off for good at the end of a run with churn.
pub const LEAVING_SHARE: f64 = 0.1;

/// What the traffic did.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub struct Driven {
    pub friend_ops: Outcome,
    pub churn: Outcome,
    pub second_devices: usize,
    pub blocks: Outcome,
    pub privacy_changes: Outcome,
    pub logouts: Outcome,
    pub limit_bursts: usize,
    pub slow_readers: usize,
}

/// Pairs with a write in flight: one at a time per pair, so that each pair's history has an
/// order (friend writes and blocks alike).
type Busy = Arc<Mutex<HashSet<(usize, usize)>>>;

/// Takes the pair of `a` and `b` for one write, unless another has it.
fn take_pair(busy: &Busy, a: usize, b: usize) -> Option<(usize, usize)> {
    let pair = (a.min(b), a.max(b));
    lock(busy).insert(pair).then_some(pair)
}

/// Runs the eight kinds of traffic at their settings' rates for `duration`.
pub async fn drive(ctx: &Ctx, duration: Duration) -> Driven {
    let traffic = &ctx.settings.traffic;
    let busy = Busy::default();
    let (
        (friend_ops, churn, second_devices, blocks, privacy_changes, logouts, limit_bursts),
        slow_readers,
    ) = tokio::join!(
        async {
            tokio::join!(
                friend_writes(ctx, traffic.friend_rate, duration, busy.clone()),
                churn(ctx, traffic.churn_rate, duration),
                second_devices(ctx, traffic.second_devices, duration),
                blocks(ctx, traffic.block_rate, duration, busy),
                privacy_changes(ctx, traffic.privacy_rate, duration),
                logouts(ctx, traffic.logout_rate, duration),
                limits::bursts(ctx, traffic.rate_limits, duration),
            )
        },
        slow_readers::spells(ctx, traffic.slow_readers, duration),
    );
    Driven {
        friend_ops,
        churn,
        second_devices,
        blocks,
        privacy_changes,
        logouts,
        limit_bursts,
        slow_readers,
    }
}

/// One friend operation as drawn: who acts towards whom, and (for a new request) how it ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FriendOp {
    pub actor: usize,
    pub other: usize,
    /// For a request: 0..7 accepted, 7..9 declined, 9 cancelled.
    pub ending: u8,
}

/// One friend operation in [`EAGER_SHARE`] is acted by one of the eager players (the first
/// of every [`EAGER_EVERY`], at least one): they ask so often that they go past the daily
/// request limit of young accounts (every account of a run is young), which would otherwise
/// never be reached, so that its refusals, and a cloud that forgets them, are seen.
const EAGER_SHARE: u32 = 4;
const EAGER_EVERY: usize = 100;

/// Friend operation `i` of a run with `seed`, among `players`.
pub fn friend_op(seed: u64, i: u64, players: usize) -> Option<FriendOp> {
    let mut rng = choices::stream(seed, Purpose::Friendships, i);
    let eager = (players / EAGER_EVERY).max(1);
    let actor = match rng.random_range(0..EAGER_SHARE) {
        0 => pick(&mut rng, eager.min(players))?,
        _ => pick(&mut rng, players)?,
    };
    let other = (actor + 1 + pick(&mut rng, players.checked_sub(1).filter(|n| *n > 0)?)?) % players;
    Some(FriendOp {
        actor,
        other,
        ending: rng.random_range(0..10),
    })
}

async fn friend_writes(ctx: &Ctx, rate: f64, duration: Duration, busy: Busy) -> Outcome {
    let seed = ctx.settings.seed;
    at_rate(ctx, rate, duration, |i, players| {
        let (players, busy) = (players.clone(), busy.clone());
        async move {
            let Some(op) = friend_op(seed, i, players.len()) else {
                return;
            };
            let (actor, other) = (&players[op.actor], &players[op.other]);
            let Some(pair) = take_pair(&busy, actor.index, other.index) else {
                return;
            };
            let friends = other
                .account()
                .is_some_and(|a| actor.friends().contains(&a));
            if friends {
                // Now and then a request between friends first, which the cloud refuses
                // (409 `already_friends`).
                if op.ending == ASK_TWICE {
                    let _ = actor.request_friend(other, Instant::now()).await;
                }
                // Undo, then make it again, so the graph keeps its size.
                if actor.unfriend(other).await.is_ok() {
                    befriend(actor, other, 0).await;
                }
            } else {
                befriend(actor, other, op.ending).await;
            }
            lock(&busy).remove(&pair);
        }
    })
    .await
}

/// The ending of a request that is asked twice before it is declined (the second is refused
/// 409 `already_requested`); between friends, the op first asks once (409 `already_friends`).
const ASK_TWICE: u8 = 8;
/// The ending of a request cancelled twice (the second is refused 404).
const CANCEL: u8 = 9;

/// `actor` asks `other`; the request then ends as `ending` says.
async fn befriend(actor: &Player, other: &Player, ending: u8) {
    let Ok(FriendStatus::Requested) = actor.request_friend(other, Instant::now()).await else {
        return;
    };
    if ending == ASK_TWICE {
        let _ = actor.request_friend(other, Instant::now()).await;
    }
    let _ = match ending {
        0..7 => other.accept_friend(actor, Instant::now()).await,
        7..CANCEL => other.decline_friend(actor).await,
        _ => {
            let _ = actor.cancel_request(other).await;
            actor.cancel_request(other).await
        }
    };
}

/// One block as drawn.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BlockOp {
    /// Who blocks, and whom when it blocks no friend (indices among the players).
    pub actor: usize,
    pub other: usize,
    /// Half the blocks end a friendship: which of the blocker's friends (taken modulo).
    pub friend: Option<usize>,
    pub hold: Duration,
}

/// Block `i` of a run with `seed`, among `players`.
pub fn block_op(seed: u64, i: u64, players: usize) -> Option<BlockOp> {
    let mut rng = choices::stream(seed, Purpose::Blocks, i);
    let actor = pick(&mut rng, players)?;
    let other = (actor + 1 + pick(&mut rng, players.checked_sub(1).filter(|n| *n > 0)?)?) % players;
    let friend = rng
        .random_bool(0.5)
        .then(|| rng.random_range(0..usize::MAX));
    let hold = Duration::from_secs_f64(rng.random_range(BLOCK_HOLD.0..BLOCK_HOLD.1));
    Some(BlockOp {
        actor,
        other,
        friend,
        hold,
    })
}

async fn blocks(ctx: &Ctx, rate: f64, duration: Duration, busy: Busy) -> Outcome {
    let seed = ctx.settings.seed;
    at_rate(ctx, rate, duration, |i, players| {
        let busy = busy.clone();
        let chosen = block_op(seed, i, players.len()).map(|op| {
            let actor = players[op.actor].clone();
            let friends = ctx.fleet.friends_of(&actor);
            let other = match op.friend {
                Some(k) if !friends.is_empty() => friends[k % friends.len()].clone(),
                _ => players[op.other].clone(),
            };
            (actor, other, op.hold)
        });
        async move {
            let Some((actor, other, hold)) = chosen else {
                return;
            };
            let Some(pair) = take_pair(&busy, actor.index, other.index) else {
                return;
            };
            let (actor, other) = (&actor, &other);
            let were_friends = other
                .account()
                .is_some_and(|id| actor.friends().contains(&id));
            if actor.block(other).await.is_ok() {
                // Each answer is a write fact the checks judge against the block.
                let _ = other.request_friend(actor, Instant::now()).await;
                if let Some(id) = actor.account() {
                    let _ = other.cards(&[id], Instant::now()).await;
                }
                let _ = actor.request_friend(other, Instant::now()).await;
                tokio::time::sleep(hold).await;
                if actor.unblock(other).await.is_ok() && were_friends {
                    befriend(actor, other, 0).await;
                }
            }
            lock(&busy).remove(&pair);
        }
    })
    .await
}

/// Privacy change `i` of a run with `seed`, among `players`: whose, and to what.
pub fn privacy_op(seed: u64, i: u64, players: usize) -> Option<(usize, Privacy)> {
    let mut rng = choices::stream(seed, Purpose::Privacy, i);
    let player = pick(&mut rng, players)?;
    let privacy = [Privacy::Public, Privacy::Friends, Privacy::Private][rng.random_range(0..3)];
    Some((player, privacy))
}

async fn privacy_changes(ctx: &Ctx, rate: f64, duration: Duration) -> Outcome {
    let seed = ctx.settings.seed;
    at_rate(ctx, rate, duration, |i, players| {
        let players = players.clone();
        async move {
            if let Some((k, privacy)) = privacy_op(seed, i, players.len()) {
                // Recorded, failures included.
                let _ = players[k].set_privacy(privacy).await;
            }
        }
    })
    .await
}

/// Logout `i` of a run with `seed`: which of `players`.
pub fn logout_op(seed: u64, i: u64, players: usize) -> Option<usize> {
    pick(&mut choices::stream(seed, Purpose::Logouts, i), players)
}

async fn logouts(ctx: &Ctx, rate: f64, duration: Duration) -> Outcome {
    let seed = ctx.settings.seed;
    at_rate(ctx, rate, duration, |i, players| {
        let players = players.clone();
        async move {
            let Some(k) = logout_op(seed, i, players.len()) else {
                return;
            };
            let player = &players[k];
            if !player.is_online() || !player.try_reserve() {
                return;
            }
            let welcomes = player.welcomes();
            if player.log_out().await.is_ok() {
                // The 4003, a sign-in again and a new welcome: the reconnect rule's own way.
                let waited = Instant::now();
                while player.welcomes() == welcomes && waited.elapsed() < SIGNED_BACK_WAIT {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
            player.release();
        }
    })
    .await
}

/// Runs `op` for each operation of `rate` per second over `duration` (none at 0), with the
/// players that signed in, in fleet order.
async fn at_rate<F, Fut>(ctx: &Ctx, rate: f64, duration: Duration, mut op: F) -> Outcome
where
    F: FnMut(u64, &Arc<Vec<Arc<Player>>>) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    if rate <= 0.0 {
        return Outcome::default();
    }
    let plan = Plan::for_duration(rate, duration, ctx.settings.max_in_flight);
    let players: Arc<Vec<Arc<Player>>> = Arc::new(signed_in(&ctx.fleet));
    schedule::run(&plan, &ctx.lag, |i, _| op(i, &players)).await
}

/// The players that signed in, in fleet order.
fn signed_in(fleet: &Fleet) -> Vec<Arc<Player>> {
    fleet
        .players()
        .iter()
        .filter(|p| p.account().is_some())
        .cloned()
        .collect()
}

/// Churn operation `i`: which player (among `players`) and how long it stays away.
pub fn churn_op(seed: u64, i: u64, players: usize) -> Option<(usize, Duration)> {
    let mut rng = choices::stream(seed, Purpose::Churn, i);
    let player = pick(&mut rng, players)?;
    Some((
        player,
        Duration::from_secs_f64(rng.random_range(AWAY.0..AWAY.1)),
    ))
}

async fn churn(ctx: &Ctx, rate: f64, duration: Duration) -> Outcome {
    // The round-robin balancer in front of the nodes.
    let balancer = Arc::new(AtomicUsize::new(0));
    let seed = ctx.settings.seed;
    at_rate(ctx, rate, duration, |i, players| {
        let (players, balancer) = (players.clone(), balancer.clone());
        async move {
            let Some((k, away)) = churn_op(seed, i, players.len()) else {
                return;
            };
            let player = &players[k];
            if !player.is_online() || !player.try_reserve() {
                return;
            }
            player
                .sign_off(false, tokio::time::Instant::now() + Duration::from_secs(2))
                .await;
            tokio::time::sleep(away).await;
            player
                .come_back(balancer.fetch_add(1, Ordering::Relaxed))
                .await;
            player.release();
        }
    })
    .await
}

/// Player `player`'s second device, if it has one: when it opens (a share of `duration`) and
/// how long it holds.
pub fn second_device(seed: u64, player: usize, share: f64) -> Option<(f64, Duration)> {
    let mut rng = choices::stream(seed, Purpose::SecondDevices, player as u64);
    (rng.random::<f64>() < share).then(|| {
        (
            rng.random::<f64>(),
            Duration::from_secs_f64(rng.random_range(SECOND_HOLD.0..SECOND_HOLD.1)),
        )
    })
}

async fn second_devices(ctx: &Ctx, share: f64, duration: Duration) -> usize {
    if share <= 0.0 {
        return 0;
    }
    let start = Instant::now();
    let seed = ctx.settings.seed;
    let nodes = ctx.fleet.node_count();
    // Every episode ends within the duration: it opens before its last hold and wait.
    let room =
        duration.saturating_sub(SECOND_HOLD.1 as u32 * Duration::from_secs(1) + REPLACED_WAIT);
    let episodes = signed_in(&ctx.fleet)
        .into_iter()
        .enumerate()
        .filter_map(|(k, player)| {
            second_device(seed, k, share).map(|(at, hold)| (player, room.mul_f64(at), hold))
        })
        .map(|(player, at, hold)| async move {
            tokio::time::sleep_until((start + at).into()).await;
            if !player.is_online() || !player.try_reserve() {
                return false;
            }
            let own = player.node();
            let opened = player.open_second_device((own + 1) % nodes).await;
            if opened {
                tokio::time::sleep(hold).await;
                // The player's own device comes back where it was, and replaces the second.
                player.come_back(own).await;
                let waited = Instant::now();
                while player.device_running(Device::Second) && waited.elapsed() < REPLACED_WAIT {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
            player
                .disconnect(
                    Device::Second,
                    tokio::time::Instant::now() + Duration::from_secs(2),
                )
                .await;
            player.release();
            opened
        });
    join_all(episodes).await.into_iter().filter(|o| *o).count()
}

/// A `share` of the players (drawn with `seed`) sign off for good, at once: those online close
/// their connection (1000), those reconnecting stop trying. Returns how many.
pub async fn leave_for_good(fleet: &Fleet, seed: u64, share: f64) -> usize {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    let leaving: Vec<Arc<Player>> = signed_in(fleet)
        .into_iter()
        .enumerate()
        .filter(|(k, _)| choices::stream(seed, Purpose::Leaving, *k as u64).random::<f64>() < share)
        .map(|(_, p)| p)
        .collect();
    join_all(leaving.iter().map(|p| p.sign_off(true, deadline))).await;
    leaving.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn friend_ops_never_pair_a_player_with_itself_and_repeat_with_the_seed() {
        for i in 0..1000 {
            let op = friend_op(3, i, 7).expect("players");
            assert_ne!(op.actor, op.other);
            assert!(op.actor < 7 && op.other < 7 && op.ending < 10);
            assert_eq!(Some(op), friend_op(3, i, 7));
        }
        assert_eq!(friend_op(3, 0, 1), None);
        assert_eq!(friend_op(3, 0, 0), None);
    }

    #[test]
    fn a_quarter_of_the_friend_ops_come_from_the_eager_players() {
        let ops: Vec<FriendOp> = (0..4000)
            .map(|i| friend_op(5, i, 300).expect("players"))
            .collect();
        // Players 0..3 are the eager ones: a quarter of the ops, and about 3 in 300 of the rest.
        let eager = ops.iter().filter(|op| op.actor < 3).count();
        assert!((1000..1150).contains(&eager), "{eager}");
        // Each of them far past the daily limit of young accounts (10 in the contract).
        for actor in 0..3 {
            assert!(ops.iter().filter(|op| op.actor == actor).count() > 250);
        }
        assert_eq!(friend_op(5, 0, 1).map(|op| op.actor), None);
    }

    #[test]
    fn blocks_pair_two_players_for_one_to_four_seconds_and_privacy_takes_every_value() {
        let ops: Vec<BlockOp> = (0..1000)
            .map(|i| block_op(4, i, 9).expect("players"))
            .collect();
        for op in &ops {
            assert!(op.actor != op.other && op.actor < 9 && op.other < 9);
            assert!((1.0..4.0).contains(&op.hold.as_secs_f64()), "{op:?}");
        }
        let of_friends = ops.iter().filter(|op| op.friend.is_some()).count();
        assert!((400..600).contains(&of_friends), "{of_friends} of 1000");
        assert_eq!(block_op(4, 0, 1), None);
        let seen: HashSet<Privacy> = (0..100)
            .filter_map(|i| privacy_op(4, i, 9).map(|(_, p)| p))
            .collect();
        assert_eq!(seen.len(), 3);
    }

    #[test]
    fn churned_players_stay_away_one_to_ten_seconds() {
        for i in 0..1000 {
            let (k, away) = churn_op(5, i, 50).expect("players");
            assert!(k < 50);
            assert!((1.0..10.0).contains(&away.as_secs_f64()), "{away:?}");
        }
    }

    #[test]
    fn second_devices_go_to_about_their_share() {
        let n = (0..10_000)
            .filter(|k| second_device(9, *k, 0.05).is_some())
            .count();
        assert!((400..600).contains(&n), "{n} of 10,000");
        assert!((0..100).all(|k| second_device(9, k, 0.0).is_none()));
    }
}
