//! slow_consumers: a player that reads its connection slowly while a friend floods it
//! (`slow_readers`) must be closed with 1013 once it fell behind by more than the cloud can
//! hold for it (cloud-api: "a connection whose queue is full is a slow consumer: it is closed
//! with 1013"); the events it missed are then owed by its resync ([`super::conns::Conn::owed_by`]).
//!
//! A spell is judged on the reader's own-device connection up when it began. How far behind
//! the reader fell is counted from the history alone: the flood's acknowledged changes minus
//! the events the connection received, at each moment until it closed. Once the reader was
//! [`QUEUE`] + [`SOCKETS`] events behind, its queue was full and its 1013 sent: at most the
//! [`SOCKETS`] events on their way can come before it. So the close is owed by the reader's
//! reads, not by a time: a reader slowed by a loaded machine reads its close later, behind as
//! many events. A reader starved of time (a pause of [`STARVED`] between two reads while
//! behind) may instead be dropped as stalled, without a close frame, as the cloud drops a
//! reader that stopped reading; and a reader whose reads trailed their events by two ping
//! intervals answered its pings that late, behind what the sockets held for it, so it may be
//! closed for unanswered pings, with a frame without a code. A spell with a fault on its
//! connection's path before its close was owed is not judged: the fault's own rules judge that
//! connection.

use std::collections::HashMap;

use anyplay_load::scenarios::slow_readers::READ_RATE;

use super::conns::{Conn, Conns};
use super::fault_table::{faults, fmt_num, Fault};
use super::model::{Model, Relation};
use super::paths;
use super::{not_judged, some, CheckResult, Quantity};
use crate::events::{CloseCause, History, PlayerFact};

pub const NAME: &str = "slow_consumers";

/// The cloud contract's outbound queue per connection (events).
pub const QUEUE: u64 = 256;
/// Events that may be on their way to a reader beside its queue: the node's bounded event
/// send buffer (16 KiB in the kernel), the players link's proxy (two sockets of 16 KiB and
/// 8 KiB in hand) and the reader's receive buffer, narrowed when its spell begins (8 KiB),
/// hold about 65 KiB, some 600 of the flood's events of about 107 bytes; a busy bus between
/// the nodes holds some more. Runs of `plans/storm.yaml` read 270 to 440 of them past the
/// point their queue was surely full before their 1013.
pub const SOCKETS: u64 = 750;
/// A pause this long between two reads of a reader that was behind: it was starved of time,
/// not slow by design (it reads at [`READ_RATE`] a second, then at full speed).
pub const STARVED: f64 = 2.0;
/// How long after its spell ended a spell's close may be recorded.
const CLOSE_AFTER: f64 = 1.0;
/// How long a node takes to give its players up once its store is out of reach (its lease
/// renewals fail first).
const STORE_NOTICED: f64 = 10.0;
/// How long after its node sent it a slow reader may read a close: behind all that its queue
/// and the sockets held, at its slow pace.
const READ_LATE: f64 = (QUEUE + SOCKETS) as f64 / READ_RATE as f64;
/// The slow consumer's close code.
pub const SLOW_CONSUMER: u16 = 1013;

/// One slow spell as the history shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct Spell {
    pub account: u64,
    pub senders: Vec<u64>,
    pub from: f64,
    pub until: f64,
}

/// What a spell's connection lived through.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Seen {
    /// The most events it was behind while up.
    pub behind: u64,
    /// When it was first more than [`QUEUE`] + [`SOCKETS`] behind.
    pub overrun: Option<f64>,
    /// Events it received after the overrun, until it closed or [`CLOSE_AFTER`] after its
    /// spell, when it was no longer slow.
    pub read_past: u64,
    /// When it received more than [`SOCKETS`] events after the overrun: more than could have
    /// been on their way ahead of a 1013.
    pub past_due: Option<f64>,
    /// It was ever more than [`QUEUE`] behind: its queue may have been full.
    pub filled: bool,
    /// A pause of [`STARVED`] between two reads while behind.
    pub starved: bool,
    /// An event it read in the last three ping intervals to its end came two intervals after
    /// its change was sent: a ping written beside it waited about as long, and a node closes a
    /// connection whose ping went unanswered for two intervals. (The events written before
    /// that ping are read between the close and its reading, or, when what the sockets held
    /// at the close took longer than three intervals to read, the last ones read are that
    /// late themselves.)
    pub pings_late: bool,
}

/// Every spell of the run.
pub fn spells(history: &History) -> Vec<Spell> {
    history
        .facts()
        .filter_map(|(_, account, fact)| match fact {
            PlayerFact::SlowReading {
                senders,
                from,
                until,
                ..
            } => Some(Spell {
                account,
                senders: senders.iter().map(|a| a.0).collect(),
                from: *from,
                until: *until,
            }),
            _ => None,
        })
        .collect()
}

/// How far behind `conn` fell in `spell`, and whether its reader was starved: counting the
/// senders' changes made while the model shows them surely its friends (a friendship that
/// ended in the spell owes it nothing more).
pub fn seen(history: &History, model: &Model, spell: &Spell, conn: &Conn) -> Seen {
    let owed = |sender: u64, t: f64| {
        spell.senders.contains(&sender)
            && model.surely_held(&Relation::friends(sender, spell.account), t, t)
    };
    let closed = conn.closed.as_ref().map(|c| c.t);
    let end = closed.map_or(spell.until, |t| t.min(spell.until));
    let read_until = closed.map_or(spell.until + CLOSE_AFTER, |t| {
        t.min(spell.until + CLOSE_AFTER)
    });
    let (mut behind, mut most, mut starved) = (0i64, 0i64, false);
    let (mut overrun, mut read_past, mut past_due) = (None, 0u64, None);
    let mut last_read = spell.from;
    let (mut lag, lag_from) = (0.0f64, end - 3.0 * conn.ping_interval);
    for (t, account, fact) in history.facts() {
        if t < spell.from || t > read_until {
            continue;
        }
        match fact {
            PlayerFact::PresenceSet { .. } if t <= end && owed(account, t) => behind += 1,
            PlayerFact::Received { conn: c, event } if *c == conn.id => {
                if overrun.is_some() {
                    read_past += 1;
                    if read_past > SOCKETS && past_due.is_none() {
                        past_due = Some(t);
                    }
                }
                if t <= end {
                    starved |= behind > 0 && t - last_read >= STARVED;
                    last_read = t;
                    behind -= 1;
                    if let Some(delivery) = event.delivery.filter(|_| t >= lag_from) {
                        lag = lag.max(delivery.as_secs_f64());
                    }
                }
            }
            _ => {}
        }
        most = most.max(behind);
        if overrun.is_none() && behind > (QUEUE + SOCKETS) as i64 {
            overrun = Some(t);
        }
    }
    starved |= behind > 0 && end - last_read >= STARVED;
    Seen {
        behind: most.max(0) as u64,
        overrun,
        read_past,
        past_due,
        filled: most > QUEUE as i64,
        starved,
        pings_late: lag >= 2.0 * conn.ping_interval,
    }
}

/// Each connection's spells of `spells` (by connection id), with what it lived through.
pub fn by_conn(
    history: &History,
    model: &Model,
    conns: &Conns,
    spells: &[Spell],
) -> HashMap<u64, Vec<(Spell, Seen)>> {
    let mut by_conn: HashMap<u64, Vec<(Spell, Seen)>> = HashMap::new();
    for spell in spells.iter().cloned() {
        let Some(conn) = conns
            .own_device_at(spell.account, spell.from)
            .and_then(|id| conns.get(id))
        else {
            continue;
        };
        let seen = seen(history, model, &spell, conn);
        by_conn.entry(conn.id).or_default().push((spell, seen));
    }
    by_conn
}

/// Whether a close at `t` ended one of `spells` with a reason for `unexplained_disconnects`: a
/// 1013 in a spell; or, of a reader starved of time, behind by more than its queue, or reading
/// two ping intervals late, an end without a close frame or code (a stalled write, or pings
/// answered too late behind what was queued for it). Whether the end was the 1013 the contract
/// asks is `slow_consumers`' to judge.
pub fn explains(spells: &[(Spell, Seen)], t: f64, code: Option<u16>, cause: CloseCause) -> bool {
    spells.iter().any(|(spell, seen)| {
        let within = spell.from <= t && t <= spell.until + CLOSE_AFTER;
        let slow_close = cause == CloseCause::CloseFrame && code == Some(SLOW_CONSUMER);
        let dropped = code.is_none() && (seen.starved || seen.filled || seen.pings_late);
        within && (slow_close || dropped)
    })
}

/// Whether a 1013 of `conn` at `t` came from a flood it shared: every friend of a spell's
/// sender gets the flood, not only the slow reader, and a fault that held it on the way from a
/// sender's node lets it through at once when it heals, a burst past any reader's queue. That
/// burst comes when the fault lets go, which may be after the spell ended (its reader closed).
pub fn a_held_flood_explains(
    spells: &[Spell],
    model: &Model,
    conns: &Conns,
    faults: &[Fault],
    conn: &Conn,
    t: f64,
) -> bool {
    spells.iter().any(|spell| {
        spell.from <= t
            && spell.senders.iter().any(|&sender| {
                sender != conn.account
                    && model.may_hold(&Relation::friends(sender, conn.account), spell.from, t)
            })
            && released(faults, conn, &senders_nodes(conns, spell), spell.from, t)
                .is_some_and(|at| t <= spell.until.max(at) + CLOSE_AFTER)
    })
}

/// Whether a fault on the connection's own path, or on the way from a sender's node to it (the
/// flood then never reached its queue), acted meanwhile, or one on its node's way to the store
/// held when it ended (a node that cannot renew its leases closes its players).
fn on_a_faulted_path(
    faults: &[Fault],
    conn: &Conn,
    senders: &[&str],
    from: f64,
    until: f64,
) -> bool {
    released(faults, conn, senders, from, until).is_some()
}

/// When the last of the faults [`on_a_faulted_path`] finds let through what it held (its
/// heal and aftermath; for the store, the close it caused); `None` when there is none.
fn released(faults: &[Fault], conn: &Conn, senders: &[&str], from: f64, until: f64) -> Option<f64> {
    let (path, store) = (paths::connection(&conn.node), paths::store(&conn.node));
    let ways: Vec<_> = senders
        .iter()
        .map(|sender| paths::delivery(sender, &conn.node))
        .collect();
    let ended = conn.closed.as_ref().map(|c| c.t).filter(|t| *t <= until);
    let during =
        |f: &Fault, from: f64, until: f64| f.start <= until && f.end + f.aftermath() >= from;
    let on_the_way = faults
        .iter()
        .filter(|f| {
            (f.on_path(&path) || ways.iter().any(|way| f.on_path(way))) && during(f, from, until)
        })
        .map(|f| f.end + f.aftermath());
    let store_lost = ended.filter(|&t| {
        faults
            .iter()
            .any(|f| f.on_path(&store) && during(f, t - STORE_NOTICED - READ_LATE, t))
    });
    on_the_way.chain(store_lost).reduce(f64::max)
}

/// The nodes the spell's senders were connected to during it.
fn senders_nodes<'a>(conns: &'a Conns, spell: &Spell) -> Vec<&'a str> {
    let mut nodes: Vec<&str> = spell
        .senders
        .iter()
        .flat_map(|&sender| conns.of_account(sender))
        .filter(|c| {
            c.welcomed <= spell.until && c.closed.as_ref().is_none_or(|e| e.t >= spell.from)
        })
        .map(|c| c.node.as_str())
        .collect();
    nodes.sort_unstable();
    nodes.dedup();
    nodes
}

/// How one spell ended, as the check counts it.
enum Judged {
    Closed,
    Stalled,
    WithinBounds,
    NoConnection,
    Faulted,
    Failed(String),
}

fn judge(
    history: &History,
    model: &Model,
    conns: &Conns,
    faults: &[Fault],
    spell: &Spell,
) -> (Judged, Option<Seen>) {
    let Some(conn) = conns
        .own_device_at(spell.account, spell.from)
        .and_then(|id| conns.get(id))
    else {
        return (Judged::NoConnection, None);
    };
    let seen = seen(history, model, spell, conn);
    let close = conn.closed.as_ref();
    let slow_close = |by: f64| {
        close.is_some_and(|c| {
            c.cause == CloseCause::CloseFrame && c.code == Some(SLOW_CONSUMER) && c.t <= by
        })
    };
    let Some(overrun) = seen.overrun else {
        let judged = match slow_close(spell.until + CLOSE_AFTER) {
            true => Judged::Closed,
            false => Judged::WithinBounds,
        };
        return (judged, Some(seen));
    };
    // The 1013 is owed before more than the sockets held was read past the overrun, and by
    // the spell's end at the latest (the reader then reads at full speed).
    let due = seen.past_due.unwrap_or(spell.until + CLOSE_AFTER);
    if slow_close(due) {
        return (Judged::Closed, Some(seen));
    }
    if on_a_faulted_path(faults, conn, &senders_nodes(conns, spell), spell.from, due) {
        return (Judged::Faulted, Some(seen));
    }
    let judged = match close.filter(|c| c.t <= due) {
        Some(c) if seen.starved && c.cause != CloseCause::CloseFrame => Judged::Stalled,
        close => Judged::Failed(format!(
            "account {} {} after it was {} events behind at {}s (at most {}{}; {} received since)",
            spell.account,
            match (close, seen.past_due) {
                (Some(_), _) => "ended otherwise than 1013".to_string(),
                (None, Some(_)) => format!("not closed within {SOCKETS} events"),
                (None, None) => "not closed by its spell's end".to_string(),
            },
            QUEUE + SOCKETS,
            fmt_num(overrun),
            seen.behind,
            if seen.starved { ", starved" } else { "" },
            seen.read_past,
        )),
    };
    (judged, Some(seen))
}

pub fn check(history: &History, model: &Model, limit: u64) -> CheckResult {
    let limit_q = Quantity::Count(limit);
    let spells = spells(history);
    if spells.is_empty() {
        return CheckResult::not_applicable(NAME, limit_q, "no player read slowly in this run");
    }
    let conns = Conns::of(history);
    let faults = faults(history);
    let (mut closed, mut stalled, mut within_bounds) = (0u64, 0u64, 0u64);
    let (mut no_conn, mut faulted) = (0u64, 0u64);
    let (mut most_behind, mut most_read_past) = (0, 0);
    let mut failures = Vec::new();
    for spell in &spells {
        let (judged, seen) = judge(history, model, &conns, &faults, spell);
        most_behind = most_behind.max(seen.map_or(0, |s| s.behind));
        match judged {
            Judged::Closed => {
                closed += 1;
                most_read_past = most_read_past.max(seen.map_or(0, |s| s.read_past));
            }
            Judged::Stalled => stalled += 1,
            Judged::WithinBounds => within_bounds += 1,
            Judged::NoConnection => no_conn += 1,
            Judged::Faulted => faulted += 1,
            Judged::Failed(why) => failures.push(why),
        }
    }
    let mut detail = format!(
        "{} slow spells judged: {closed} closed 1013, {stalled} dropped while starved, \
         {within_bounds} never past {} events behind; the most behind {most_behind}, \
         the most received past that before a 1013 {most_read_past} (at most {SOCKETS})",
        spells.len() as u64 - no_conn - faulted,
        QUEUE + SOCKETS,
    );
    detail.push_str(&not_judged([
        (no_conn, "spells without a connection up at their start"),
        (faulted, "spells with a fault on their connection's path"),
    ]));
    if !failures.is_empty() {
        detail.push_str(&format!("; {}", some(&failures, 5)));
    }
    CheckResult::count(NAME, limit, failures.len() as u64, detail)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::testing::{self as h, Event};
    use crate::checks::Verdict;
    use crate::events::Record;

    fn welcome(account: u64, conn: u64) -> Event {
        h::welcome(0.05, account, conn, "node-1").1
    }

    fn closed(account: u64, conn: u64, code: Option<u16>, cause: CloseCause) -> Event {
        h::closed(0.0, account, conn, code, cause).1
    }

    fn change(account: u64, t: f64) -> Event {
        h::change(t, account, (t * 1000.0) as u64, t, "node-1").1
    }

    fn received(account: u64, conn: u64, from: u64) -> Event {
        let mut at = h::presence(0.0, account, conn, 0, from, 1);
        h::received_mut(&mut at).seq = None;
        at.1
    }

    /// Reader 1 on connection 10, flooded by 2 with `flood` changes from 1 s, a change every
    /// ms, reading one event every `read_every` s; then `end`.
    fn flooded(flood: u64, read_every: f64, end: Option<(f64, Event)>) -> History {
        flooded_from(1.0, flood, read_every, end)
    }

    /// Account 2 floods its friend 1 from `start` on, one change a millisecond, while 1 reads
    /// one event every `read_every` s until `end` (8 s when none).
    fn flooded_from(start: f64, flood: u64, read_every: f64, end: Option<(f64, Event)>) -> History {
        let mut events = vec![
            crate::checks::testing::befriend(0.2, 1, 2),
            (0.5, welcome(1, 10)),
            (0.5, welcome(2, 20)),
        ];
        events.extend((0..flood).map(|i| {
            let t = start + i as f64 * 0.001;
            (t, change(2, t))
        }));
        let until = end.as_ref().map_or(8.0, |(t, _)| *t);
        let mut t = start;
        while t < until {
            events.push((t, received(1, 10, 2)));
            t += read_every;
        }
        events.extend(end);
        events.push(crate::checks::testing::slow_reading(start, until));
        let mut records: Vec<Record> = events
            .into_iter()
            .map(|(t, event)| Record { t, event })
            .collect();
        records.sort_by(|a, b| a.t.total_cmp(&b.t));
        records.into_iter().map(|r| (r.t, r.event)).collect()
    }

    fn judged(history: &History) -> CheckResult {
        check(history, &Model::of(history), 0)
    }

    /// Asserts `result` failed, saying `why`.
    fn failed_with(result: &CheckResult, why: &str) {
        assert_eq!(result.result, Verdict::Fail, "{}", result.detail);
        assert!(result.detail.contains(why), "{}", result.detail);
    }

    /// `history` with `more` among its records, in time order.
    fn with(history: &History, more: Vec<(f64, Event)>) -> History {
        let mut all: Vec<(f64, Event)> = history.iter().map(|(t, e)| (t, e.clone())).collect();
        all.extend(more);
        all.sort_by(|a, b| a.0.total_cmp(&b.0));
        all.into_iter().collect()
    }

    #[test]
    fn a_reader_far_behind_closed_1013_passes() {
        let history = flooded(
            2000,
            0.02,
            Some((5.0, closed(1, 10, Some(1013), CloseCause::CloseFrame))),
        );
        let result = check(&history, &Model::of(&history), 0);
        assert_eq!(result.result, Verdict::Pass, "{}", result.detail);
        assert!(result.detail.contains("1 closed 1013"), "{}", result.detail);
    }

    #[test]
    fn a_reader_far_behind_never_closed_fails() {
        // A cloud whose queue never fills (or drops events silently) keeps it open.
        let result = judged(&flooded(2000, 0.02, None));
        assert_eq!(result.result, Verdict::Fail, "{}", result.detail);
        assert!(result.detail.contains("not closed"), "{}", result.detail);
    }

    #[test]
    fn a_reader_far_behind_dropped_without_1013_fails_unless_it_was_starved() {
        let drop = || Some((5.0, closed(1, 10, None, CloseCause::NoCloseFrame)));
        let result = judged(&flooded(2000, 0.02, drop()));
        assert_eq!(result.result, Verdict::Fail, "{}", result.detail);
        // Reading every 3 s: starved, and the cloud may drop it as stalled.
        let result = judged(&flooded(2000, 3.0, drop()));
        assert_eq!(result.result, Verdict::Pass, "{}", result.detail);
    }

    /// The flood of [`flooded`], read 30 times a second (a reader slowed by a busy machine,
    /// as in `plans/storm.yaml` on 2 cores): first more than 1,006 behind at about 2.04 s.
    fn read_30_a_second(end: Option<(f64, Event)>) -> History {
        flooded(2000, 1.0 / 30.0, end)
    }

    #[test]
    fn a_close_is_owed_by_the_reads_past_the_overrun_not_by_a_time() {
        // 1013 read 14 s after the overrun, behind 420 events that were on their way: a
        // correct cloud, whose reader reads slowly.
        let close = |t: f64| Some((t, closed(1, 10, Some(1013), CloseCause::CloseFrame)));
        let result = judged(&read_30_a_second(close(16.0)));
        assert_eq!(result.result, Verdict::Pass, "{}", result.detail);
        assert!(result.detail.contains("1 closed 1013"), "{}", result.detail);
        assert!(
            result.detail.contains("before a 1013 419 "),
            "{}",
            result.detail
        );
        // Behind 780: more than the sockets hold, so the cloud queued far more than 256.
        let result = judged(&read_30_a_second(close(28.0)));
        failed_with(&result, "not closed within 750 events");
    }

    #[test]
    fn a_fault_before_the_close_was_owed_excuses_its_loss_and_one_after_does_not() {
        // The drop of `plans/storm.yaml` cut a reader 300 events past its overrun, its 1013
        // still behind the rest on their way.
        let dropped = |t: f64| Some((t, closed(1, 10, None, CloseCause::NoCloseFrame)));
        let drop =
            |t: f64| crate::checks::testing::action(t, t, crate::plan::ActionKind::Drop, "players");
        let result = judged(&with(&read_30_a_second(dropped(12.0)), drop(11.9)));
        assert_eq!(result.result, Verdict::Pass, "{}", result.detail);
        assert!(
            result.detail.contains("1 spells with a fault"),
            "{}",
            result.detail
        );
        // Without the drop, the same end fails; and a drop after 750 events past fails too.
        let result = judged(&read_30_a_second(dropped(12.0)));
        assert_eq!(result.result, Verdict::Fail, "{}", result.detail);
        let result = judged(&with(&read_30_a_second(dropped(29.0)), drop(28.9)));
        failed_with(&result, "not closed within 750 events");
    }

    #[test]
    fn a_reader_never_far_behind_owes_no_close() {
        let result = judged(&flooded(300, 0.02, None));
        assert_eq!(result.result, Verdict::Pass, "{}", result.detail);
        assert!(result.detail.contains("1 never past"), "{}", result.detail);
    }

    #[test]
    fn a_1013_is_explained_only_in_a_spell() {
        let history = flooded(
            2000,
            0.02,
            Some((5.0, closed(1, 10, Some(1013), CloseCause::CloseFrame))),
        );
        let conns = Conns::of(&history);
        let spells = by_conn(&history, &Model::of(&history), &conns, &spells(&history));
        let of_10 = &spells[&10];
        assert!(explains(of_10, 5.0, Some(1013), CloseCause::CloseFrame));
        assert!(!explains(of_10, 9.5, Some(1013), CloseCause::CloseFrame));
        // Dropped while more than its queue behind: its pings waited behind the flood.
        assert!(explains(of_10, 5.0, None, CloseCause::NoCloseFrame));
        let calm = flooded(
            100,
            0.02,
            Some((5.0, closed(1, 10, None, CloseCause::NoCloseFrame))),
        );
        let calm = by_conn(
            &calm,
            &Model::of(&calm),
            &Conns::of(&calm),
            &super::spells(&calm),
        );
        assert!(!explains(&calm[&10], 5.0, None, CloseCause::NoCloseFrame));
    }

    #[test]
    fn changes_of_a_sender_no_longer_a_friend_are_not_owed() {
        // Unfriended as the flood began: nothing it sent after is owed, nor a close.
        let unfriend = crate::checks::testing::friend(
            0.9,
            crate::events::WriteOp::Unfriend,
            1,
            2,
            crate::events::WriteOutcome::Ok,
        );
        let result = judged(&with(&flooded(2000, 0.02, None), vec![unfriend]));
        assert_eq!(result.result, Verdict::Pass, "{}", result.detail);
        assert!(result.detail.contains("1 never past"), "{}", result.detail);
    }

    #[test]
    fn a_spell_while_its_node_lost_the_store_is_not_judged() {
        let dropped = Some((5.0, closed(1, 10, None, CloseCause::NoCloseFrame)));
        let cut = crate::checks::testing::action(
            3.0,
            9.0,
            crate::plan::ActionKind::Partition,
            "node-1<->postgres",
        );
        let result = judged(&with(&flooded(2000, 0.02, dropped), cut.clone()));
        assert_eq!(result.result, Verdict::Pass, "{}", result.detail);
        assert!(
            result.detail.contains("1 spells with a fault"),
            "{}",
            result.detail
        );
        // A connection the store's loss did not end owes its 1013 all the same.
        let result = judged(&with(&flooded(2000, 0.02, None), cut.clone()));
        assert_eq!(result.result, Verdict::Fail, "{}", result.detail);
        // A flood from `by` s on, its reader's close read 7.5 s into it: as the self-test saw
        // a node cut from its store close a slow reader, which read the close 10.7 s after
        // the cut healed, behind what it still had to read.
        let after = |by: f64| {
            let closed_late = Some((by + 7.5, closed(1, 10, None, CloseCause::CloseFrame)));
            flooded_from(by, 2000, 0.02, closed_late)
        };
        let result = judged(&with(&after(12.0), cut.clone()));
        assert_eq!(result.result, Verdict::Pass, "{}", result.detail);
        // Read later than a close the store's loss could have caused: judged.
        let result = judged(&with(&after(40.0), cut));
        assert_eq!(result.result, Verdict::Fail, "{}", result.detail);
    }

    #[test]
    fn a_spell_whose_flood_could_not_cross_the_bus_is_not_judged() {
        // The sender on node-2: its changes reach reader 1 on node-1 over NATS.
        let on_node_2 = |history: History| -> History {
            history
                .iter()
                .map(|(t, e)| match e {
                    Event::Player {
                        account: 2,
                        fact: h::PlayerFact::Welcome { .. },
                        ..
                    } => h::welcome(t, 2, 20, "node-2"),
                    other => (t, other.clone()),
                })
                .collect()
        };
        let cut = crate::checks::testing::action(
            2.0,
            9.0,
            crate::plan::ActionKind::Partition,
            "node-1<->nats",
        );
        let history = on_node_2(flooded(2000, 0.02, None));
        let result = judged(&with(&history, cut.clone()));
        assert_eq!(result.result, Verdict::Pass, "{}", result.detail);
        assert!(
            result.detail.contains("1 spells with a fault"),
            "{}",
            result.detail
        );
        // Without the cut, never closed fails; a sender on the reader's own node owes the
        // 1013 through a cut of the bus.
        assert_eq!(judged(&history).result, Verdict::Fail);
        let result = judged(&with(&flooded(2000, 0.02, None), cut));
        assert_eq!(result.result, Verdict::Fail, "{}", result.detail);
    }

    #[test]
    fn no_spell_is_nothing_to_judge() {
        let history: History = [(0.5, welcome(1, 10))].into_iter().collect();
        let result = check(&history, &Model::of(&history), 0);
        assert_eq!(result.result, Verdict::Pass);
        assert!(result.detail.contains("no player read slowly"));
    }
}
