//! Slow readers (`--slow-readers`): now and then a player reads its own connection slowly
//! while a few of its friends change activity, together far faster than the player reads.
//! The cloud's outbound queue for that connection fills, and the cloud must close it with 1013;
//! the player then reconnects by the rule and resyncs. Each spell is one fact of the reader
//! ([`Fact::SlowReading`]), which the chaos checks judge: the 1013 is owed, and the events
//! that queued meanwhile are owed late, or by the resync.
//!
//! The share of the players is how many spells may run, spread over the run, one at a time.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use futures_util::future::join_all;

use crate::api::client::http_client;
use crate::api::net::{flood_address, FLOODS_PER_FLEET, FLOOD_ADDRESSES};
use crate::measure::facts::Fact;
use crate::players::choices::{self, pick, Purpose};
use crate::players::player::Player;
use crate::scenarios::Ctx;

/// A slow reader's pace, events a second: far fewer than its friends' flood brings, yet enough
/// that the cloud's every write to it finishes within its write timeout and what the sockets
/// hold for it is read within a ping interval, so its 1013 reaches it. Once surely past its
/// queue it reads at full speed. A flood must outrun it by the queue and the sockets (about
/// 1,000 events) within [`FLOOD`]: at 50 a second it must come at 76 a second or more, at 40
/// at 60; beside the tests a 2-core machine's nodes answered one spell's senders at 60 to 127
/// a second (`results/ci`).
pub const READ_RATE: u64 = 40;
/// Activity changes of a flood at most: many times what the cloud's queue (256 events) and
/// the sockets between it and the reader hold, so that a reader this slow surely overflows it.
pub const FLOOD: u32 = 3_000;
/// Friends that flood a reader at once, each with its share of [`FLOOD`]: each waits for its
/// change's answer before the next, so on a busy node (tens of ms a write) four brought 120
/// to 200 a second, too close to what a slow reader takes; eight bring twice that.
const SENDERS: usize = 8;
/// Each sender's pace: together far above what a slow reader takes, yet a small share of what
/// one SQLite node writes, so the players beside it play on.
const FLOOD_EVERY: Duration = Duration::from_millis(20);
/// How long the reader waits, after the flood, for the cloud to close it.
const CLOSE_WAIT: Duration = Duration::from_secs(15);
/// Time a spell may take (flood, close, reconnect): none starts later than this before the end.
const SPELL: Duration = Duration::from_secs(25);
/// How far behind the flood a reader is surely past what the cloud holds for it: its queue
/// (the contract's 256 events) and what the sockets on the way hold (some 750, chaos's
/// `slow_consumers`), with room. From there it reads at full speed: a correct cloud sent its
/// 1013 already, and a cloud that drops its events instead shows it in what the reader reads
/// next, not in time it waits.
const SURELY_PAST: u64 = 1_200;
/// How often the spell compares the flood with the reader's reads.
const COMPARE_EVERY: Duration = Duration::from_millis(20);
/// Readers tried for one spell before it is given up.
const TRIES: usize = 32;

/// Runs up to `share` × players spells (at least one when `share` is above 0), one at a time:
/// each at its slot of `duration`'s evenly spread starts or when the one before ended,
/// whichever is later, and none later than [`SPELL`] before the end; how many ran. Spells that
/// overlapped shared the nodes' answers between their floods: on a loaded machine three came
/// at 37 to 70 a second each, where one alone came at 83 to 127 beside the same load.
pub async fn spells(ctx: &Ctx, share: f64, duration: Duration) -> usize {
    if share <= 0.0 {
        return 0;
    }
    let players = ctx.fleet.players();
    let count = ((share * players.len() as f64).ceil() as usize).min(FLOODS_PER_FLEET as usize);
    let room = duration.saturating_sub(SPELL);
    let start = tokio::time::Instant::now();
    let mut ran = 0;
    for k in 0..count {
        tokio::time::sleep_until(start + room.mul_f64((k as f64 + 0.5) / count as f64)).await;
        if start.elapsed() > room {
            break;
        }
        ran += usize::from(spell(ctx, k as u64).await);
    }
    ran
}

/// One spell, numbered `k`: false when no online reader with an online friend was free.
async fn spell(ctx: &Ctx, k: u64) -> bool {
    let players = ctx.fleet.players();
    let Some((reader, senders)) = flooders(ctx, k) else {
        return false;
    };
    let reader = &players[reader];
    let senders: Vec<&Player> = senders.iter().map(|&i| players[i].as_ref()).collect();
    // With the limits on, from addresses of the flood's own, each kept under the call limit.
    let own: Vec<reqwest::Client> = match ctx.settings.traffic.rate_limits {
        Some(_) => (0..FLOOD_ADDRESSES)
            .filter_map(|j| {
                http_client(Some(IpAddr::V4(flood_address(ctx.fleet.first(), k, j)))).ok()
            })
            .collect(),
        None => Vec::new(),
    };
    let (_, conn_events) = reader.connection_state();
    let still_connected = || reader.connection_state() == (true, conn_events);
    reader.read_slowly(true);
    let from = Instant::now();
    let acked = AtomicU64::new(0);
    let catch_up = || {
        if acked.load(Ordering::Acquire) > reader.slow_reads() + SURELY_PAST {
            reader.read_slowly(false);
        }
    };
    let flood = flood(&senders, &own, &still_connected, &acked);
    tokio::pin!(flood);
    loop {
        tokio::select! {
            _ = &mut flood => break,
            _ = tokio::time::sleep(COMPARE_EVERY) => catch_up(),
        }
    }
    let waited = Instant::now();
    while still_connected() && waited.elapsed() < CLOSE_WAIT {
        catch_up();
        tokio::time::sleep(COMPARE_EVERY).await;
    }
    reader.read_slowly(false);
    reader.emit(Fact::SlowReading {
        senders: senders.iter().filter_map(|s| s.account()).collect(),
        from,
        until: Instant::now(),
        flood: u32::try_from(acked.load(Ordering::Acquire)).unwrap_or(u32::MAX),
    });
    reader.release();
    for sender in &senders {
        sender.release();
    }
    true
}

/// The senders' flood: each its share of [`FLOOD`], one change at a time, while the reader is
/// still connected; `acked` counts the changes the cloud took.
async fn flood(
    senders: &[&Player],
    own: &[reqwest::Client],
    still_connected: &impl Fn() -> bool,
    acked: &AtomicU64,
) {
    let per_sender = FLOOD / senders.len() as u32;
    join_all(senders.iter().enumerate().map(|(s, sender)| async move {
        let mut pace = tokio::time::interval(FLOOD_EVERY);
        pace.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        for i in 0..per_sender {
            pace.tick().await;
            if !still_connected() {
                break;
            }
            let call = s * per_sender as usize + i as usize;
            let via = match own.is_empty() {
                true => sender.shared().net.http(sender.index),
                false => &own[call % own.len()],
            };
            let activity = format!("flood {i}");
            let answer = sender
                .set_presence_via(via, sender.node(), &activity, Instant::now())
                .await;
            acked.fetch_add(u64::from(answer.is_ok()), Ordering::AcqRel);
        }
    }))
    .await;
}

/// Spell `k`'s reader and up to [`SENDERS`] of its friends that flood it (indices into the
/// fleet), all reserved: of the readers tried, the one with the most free friends online
/// (the first with [`SENDERS`]), since a flood of a few senders, each waiting for its answers,
/// may come no faster than the reader reads.
fn flooders(ctx: &Ctx, k: u64) -> Option<(usize, Vec<usize>)> {
    let players = ctx.fleet.players();
    let by_account: HashMap<_, usize> = players
        .iter()
        .enumerate()
        .filter_map(|(i, p)| Some((p.account()?, i)))
        .collect();
    let release = |(reader, senders): (usize, Vec<usize>)| {
        for i in std::iter::once(reader).chain(senders) {
            players[i].release();
        }
    };
    let mut rng = choices::stream(ctx.settings.seed, Purpose::SlowReaders, k);
    let mut best: Option<(usize, Vec<usize>)> = None;
    for _ in 0..TRIES {
        let reader = pick(&mut rng, players.len())?;
        let candidate = &players[reader];
        if !candidate.is_online() || !candidate.try_reserve() {
            continue;
        }
        let senders: Vec<usize> = candidate
            .friends()
            .iter()
            .filter_map(|a| by_account.get(a).copied())
            .filter(|&i| i != reader && players[i].is_online() && players[i].try_reserve())
            .take(SENDERS)
            .collect();
        let most = best.as_ref().map_or(0, |(_, s)| s.len());
        if senders.len() > most {
            if let Some(worse) = best.replace((reader, senders)) {
                release(worse);
            }
        } else {
            release((reader, senders));
        }
        if best.as_ref().is_some_and(|(_, s)| s.len() == SENDERS) {
            break;
        }
    }
    best
}
