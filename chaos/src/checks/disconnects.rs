//! unexplained_disconnects: every close the cloud initiates must have its reason in the
//! history (chaos-plan v1.2), and no connection may end outside a fault on its path.
//!
//! - 4001 (replaced): another connection of the account was opened before the close and
//!   welcomed after this one's handshake began (so it is as new as this one or newer), by
//!   the close or within [`WELCOME_AFTER_CLOSE`] of it (the new welcome may be sent right
//!   after the close, on another socket); or a fault that loses data cut some node's
//!   players by then or within that while (a node taken out, until it is back), so that the
//!   newer connection's welcome may have been lost on its way.
//! - 1001 (draining), 1012 (restarting): a `stop`, `restart` or `rolling` of that node was
//!   under way.
//! - 1011 (store out of reach): a fault on the node's way to its store.
//! - 1013 (slow consumer): its player read it slowly on purpose then (`slow_readers`), or a
//!   fault on the connection's path slows it (the cloud's outbound queue fills while the link
//!   crawls), or it shared a slow reader's flood as a friend of a sender and a fault held that
//!   flood on its way, to let it through at once ([`slow_consumers::a_held_flood_explains`]).
//!   A slow reader starved of time may also be dropped without a close frame
//!   ([`slow_consumers::explains`]).
//! - No close frame, a frame without a code (unanswered pings), or silence: a fault on the
//!   connection's path (players, its node, the link between them). Silence is noticed up
//!   to the client's liveness limit later.
//! - 4003 (signed out): a logout of the account was sent by the close, and answered (or
//!   given up) after the connection's handshake began.
//! - Every other code: never.
//!
//! The client's own closes (a sign-off, the harness's storm `drop`, the run's end) are the
//! client's reasons, not the cloud's. A close after a fault is laid to it up to `grace` (the
//! players_back limit) after the fault ended.

use std::collections::{BTreeMap, HashMap};

use super::conns::{Conn, Conns, REPLACED};
use super::fault_table::{faults, service_down, Fault};
use super::model::Model;
use super::paths::{self, Hop};
use super::slow_consumers::{self, Seen, Spell, SLOW_CONSUMER};
use super::{some, CheckResult, Quantity};
use crate::events::{CloseCause, History, PlayerFact, WriteOutcome};

pub const NAME: &str = "unexplained_disconnects";

/// How long after a 4001 the newer connection's welcome may come.
pub const WELCOME_AFTER_CLOSE: f64 = 5.0;

/// The longest a client may take to find a silent connection dead: `2 × ping_interval + 5 s`
/// at the cloud's default ping interval (20 s).
pub const LIVENESS: f64 = 45.0;

/// The close code of a logout.
const SIGNED_OUT: u16 = 4003;

/// Each account's logouts that were not refused: when sent, and when answered.
pub fn logouts(history: &History) -> HashMap<u64, Vec<(f64, f64)>> {
    let mut by_account: HashMap<u64, Vec<(f64, f64)>> = HashMap::new();
    for (t, account, fact) in history.facts() {
        if let PlayerFact::LoggedOut { sent, outcome, .. } = fact {
            if *outcome != WriteOutcome::Refused {
                by_account.entry(account).or_default().push((*sent, t));
            }
        }
    }
    by_account
}

/// What a close is judged against.
struct Reasons<'a> {
    conns: &'a Conns,
    faults: &'a [Fault],
    logouts: &'a HashMap<u64, Vec<(f64, f64)>>,
    /// Each connection's slow spells.
    slow: &'a HashMap<u64, Vec<(Spell, Seen)>>,
    /// Every slow spell, whose flood its senders' other friends get too.
    spells: &'a [Spell],
    model: &'a Model,
    grace: f64,
}

/// Whether the history holds the reason of the connection's close.
fn explained(conn: &Conn, reasons: &Reasons<'_>) -> bool {
    let Reasons {
        conns,
        faults,
        logouts,
        slow,
        spells,
        model,
        grace,
    } = *reasons;
    let Some(close) = conn.closed.as_ref() else {
        return true;
    };
    let t = close.t;
    if slow
        .get(&conn.id)
        .is_some_and(|spells| slow_consumers::explains(spells, t, close.code, close.cause))
    {
        return true;
    }
    let on = |path: &[Hop<'_>], after: f64| paths::excuse(faults, path, t, after).is_some();
    let connection = paths::connection(&conn.node);
    match (close.cause, close.code) {
        (CloseCause::ClientClose | CloseCause::Dropped | CloseCause::Shutdown, _) => true,
        (CloseCause::CloseFrame, Some(REPLACED)) => {
            conns.of_account(conn.account).any(|other| {
                other.id != conn.id
                    && other.opened <= t
                    && other.welcomed >= conn.opened
                    && other.welcomed <= t + WELCOME_AFTER_CLOSE
            }) || faults.iter().any(|f| {
                // The newer connection's welcome may have been lost on its way, through
                // whichever node it went, as late as it may come; a node taken out loses
                // it until it is back.
                f.loses()
                    && f.cuts_players()
                    && (f.meets(t, t + WELCOME_AFTER_CLOSE)
                        || service_down(faults, &f.target)
                            .iter()
                            .any(|&(from, until)| from <= t + WELCOME_AFTER_CLOSE && t <= until))
            })
        }
        (CloseCause::CloseFrame, Some(1001 | 1012)) => faults.iter().any(|f| {
            f.action.drains() && f.on_path(&[Hop::Node(&conn.node)]) && f.covers(t, grace)
        }),
        (CloseCause::CloseFrame, Some(1011)) => on(&paths::store(&conn.node), grace),
        (CloseCause::CloseFrame, Some(SIGNED_OUT)) => logouts
            .get(&conn.account)
            .into_iter()
            .flatten()
            .any(|&(sent, answered)| sent <= t && conn.opened <= answered),
        (CloseCause::CloseFrame, Some(SLOW_CONSUMER)) => {
            on(&connection, grace)
                || slow_consumers::a_held_flood_explains(spells, model, conns, faults, conn, t)
        }
        // A frame without a code is how a node ends a connection that stopped answering
        // its pings: a fault on the path may have starved it.
        (CloseCause::CloseFrame, None) | (CloseCause::NoCloseFrame, _) => on(&connection, grace),
        (CloseCause::Silent, _) => on(&connection, grace.max(LIVENESS)),
        (CloseCause::CloseFrame, _) => false,
    }
}

/// `4001`, `1001`, `no_close_frame` …: how the detail names a close.
fn label(conn: &Conn) -> String {
    match conn.closed.as_ref() {
        Some(c) if c.cause == CloseCause::CloseFrame => c
            .code
            .map_or("frame without code".to_owned(), |c| c.to_string()),
        Some(c) => serde_json::to_value(c.cause)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default(),
        None => String::new(),
    }
}

pub fn check(history: &History, model: &Model, limit: u64, grace: f64) -> CheckResult {
    let limit_q = Quantity::Count(limit);
    let conns = Conns::of(history);
    if conns.count() == 0 {
        return CheckResult::unknown(NAME, limit_q, "no event connection was recorded");
    }
    let faults = faults(history);
    let logouts = logouts(history);
    let spells = slow_consumers::spells(history);
    let slow = slow_consumers::by_conn(history, model, &conns, &spells);
    let reasons = Reasons {
        conns: &conns,
        faults: &faults,
        logouts: &logouts,
        slow: &slow,
        spells: &spells,
        model,
        grace,
    };
    // Per label: (closes, unexplained).
    let mut by_label: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    let mut unexplained = Vec::new();
    let mut closes = 0u64;
    for (_, conns_of) in conns.accounts() {
        for conn in conns_of {
            let Some(close) = conn.closed.as_ref() else {
                continue;
            };
            closes += 1;
            let counts = by_label.entry(label(conn)).or_default();
            counts.0 += 1;
            if !explained(conn, &reasons) {
                counts.1 += 1;
                unexplained.push((close.t, conn.account, conn.node.clone(), label(conn)));
            }
        }
    }
    unexplained.sort_by(|a, b| a.0.total_cmp(&b.0));
    let kinds = by_label
        .iter()
        .map(|(label, (n, bad))| {
            if *bad > 0 {
                format!("{label} ×{n} ({bad} unexplained)")
            } else {
                format!("{label} ×{n}")
            }
        })
        .collect::<Vec<_>>()
        .join(", ");
    let mut detail = format!(
        "{} connections, {closes} closed{}{kinds}",
        conns.count(),
        if kinds.is_empty() { "" } else { ": " }
    );
    if !unexplained.is_empty() {
        detail.push_str(&format!(
            "; unexplained: {}",
            some(
                unexplained.iter().map(|(t, account, node, label)| format!(
                    "account {account} on {node} {label} at {}s",
                    super::fault_table::fmt_num(*t)
                )),
                5
            )
        ));
    }
    CheckResult::count(NAME, limit, unexplained.len() as u64, detail)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::testing::*;
    use crate::checks::Verdict;
    use crate::events::CloseCause::*;
    use crate::plan::ActionKind;

    const GRACE: f64 = 20.0;

    fn judge(events: Vec<At>) -> CheckResult {
        let history: History = events.into_iter().collect();
        check(&history, &Model::of(&history), 0, GRACE)
    }

    #[test]
    fn the_clients_own_closes_need_no_reason() {
        let result = judge(vec![
            welcome(1.0, 1, 1, "node-1"),
            closed(5.0, 1, 1, Some(1000), ClientClose),
            welcome(6.0, 2, 2, "node-1"),
            closed(7.0, 2, 2, None, Dropped),
        ]);
        assert_eq!(result.result, Verdict::Pass, "{}", result.detail);
        assert!(result.detail.contains("2 closed"), "{}", result.detail);
    }

    #[test]
    fn a_4001_needs_a_newer_welcome_of_the_account() {
        let replaced = judge(vec![
            welcome(1.0, 1, 1, "node-1"),
            closed(5.0, 1, 1, Some(4001), CloseFrame),
            welcome_device(5.02, 1, 2, "node-2", 2),
        ]);
        assert_eq!(replaced.result, Verdict::Pass, "{}", replaced.detail);
        // Nobody replaced it: the player is stranded (clients never reconnect after 4001).
        let stranded = judge(vec![
            welcome(1.0, 1, 1, "node-1"),
            closed(5.0, 1, 1, Some(4001), CloseFrame),
        ]);
        assert_eq!(stranded.result, Verdict::Fail, "{}", stranded.detail);
        assert!(stranded.detail.contains("4001 ×1 (1 unexplained)"));
        assert!(stranded.detail.contains("account 1 on node-1 4001 at 5s"));
        // An older connection of the account is no replacement.
        let older = judge(vec![
            welcome_device(0.5, 1, 1, "node-2", 2),
            welcome(1.0, 1, 2, "node-1"),
            closed(5.0, 1, 2, Some(4001), CloseFrame),
        ]);
        assert_eq!(older.result, Verdict::Fail, "{}", older.detail);
        // The newer one's welcome cut on its way to the client by a fault on a players' link.
        let mut cut = vec![
            welcome(1.0, 1, 1, "node-1"),
            closed(5.0, 1, 1, Some(4001), CloseFrame),
        ];
        cut.extend(action(3.0, 9.0, ActionKind::LimitData, "players<->node-2"));
        assert_eq!(judge(cut).result, Verdict::Pass);
        // A fault that begins after the close may still cut the welcome that follows it
        // (network-faults at fd4a5f2: a 4001 at 42.6 s, a `timeout` on the players' link of
        // the newer connection's node from 44.0 s); one that begins later may not.
        let welcome_cut = |start: f64| {
            let mut events = vec![
                welcome(1.0, 1, 1, "node-1"),
                closed(42.6, 1, 1, Some(4001), CloseFrame),
            ];
            events.extend(action(
                start,
                start + 8.0,
                ActionKind::Timeout,
                "players<->node-2",
            ));
            judge(events).result
        };
        assert_eq!(welcome_cut(44.0), Verdict::Pass);
        assert_eq!(welcome_cut(48.0), Verdict::Fail);
        let mut slowed = vec![
            welcome(1.0, 1, 1, "node-1"),
            closed(5.0, 1, 1, Some(4001), CloseFrame),
        ];
        slowed.extend(action(3.0, 9.0, ActionKind::Latency, "players<->node-2"));
        slowed.extend(action(3.0, 9.0, ActionKind::Partition, "node-2<->nats"));
        assert_eq!(judge(slowed).result, Verdict::Fail);
        // The newer connection set up on node-2 as it was killed: node-1 learns of it at its
        // next renewal and closes the old one while node-2 is still down (the self-test at
        // 114789b: killed at 7.57 s, the 4001 at 10.34 s, started again at 10.57 s). Back
        // up well before the close, its welcome would have come.
        let killed = |back: f64| {
            let mut events = vec![
                welcome(1.0, 1, 1, "node-1"),
                closed(10.34, 1, 1, Some(4001), CloseFrame),
            ];
            events.extend(action(7.57, 7.58, ActionKind::Kill, "node-2"));
            events.extend(action(back, back + 0.1, ActionKind::Start, "node-2"));
            judge(events).result
        };
        assert_eq!(killed(10.57), Verdict::Pass);
        assert_eq!(killed(8.0), Verdict::Fail);
        // A welcome long after the close replaced nothing then.
        let late = judge(vec![
            welcome(1.0, 1, 1, "node-1"),
            closed(5.0, 1, 1, Some(4001), CloseFrame),
            welcome(30.0, 1, 2, "node-1"),
        ]);
        assert_eq!(late.result, Verdict::Fail, "{}", late.detail);
    }

    #[test]
    fn a_1001_needs_a_drain_of_that_node() {
        let mut drained = vec![
            welcome(1.0, 1, 1, "node-1"),
            closed(10.2, 1, 1, Some(1001), CloseFrame),
        ];
        drained.extend(action(10.0, 12.0, ActionKind::Stop, "node-1"));
        assert_eq!(judge(drained).result, Verdict::Pass);
        let mut rolling = vec![
            welcome(1.0, 1, 1, "node-3"),
            closed(30.0, 1, 1, Some(1001), CloseFrame),
        ];
        rolling.extend(action(10.0, 40.0, ActionKind::Rolling, "nodes"));
        assert_eq!(judge(rolling).result, Verdict::Pass);
        // The other node drained, or a kill: no reason for a 1001 here.
        let mut elsewhere = vec![
            welcome(1.0, 1, 1, "node-1"),
            closed(10.2, 1, 1, Some(1001), CloseFrame),
        ];
        elsewhere.extend(action(10.0, 12.0, ActionKind::Stop, "node-2"));
        elsewhere.extend(action(10.0, 10.1, ActionKind::Kill, "node-1"));
        assert_eq!(judge(elsewhere).result, Verdict::Fail);
        let unasked = judge(vec![
            welcome(1.0, 1, 1, "node-1"),
            closed(10.2, 1, 1, Some(1001), CloseFrame),
        ]);
        assert_eq!(unasked.result, Verdict::Fail);
    }

    #[test]
    fn a_1011_needs_a_fault_on_the_nodes_way_to_its_store() {
        let mut cut = vec![
            welcome(1.0, 1, 1, "node-1"),
            closed(14.0, 1, 1, Some(1011), CloseFrame),
        ];
        cut.extend(action(
            10.0,
            16.0,
            ActionKind::Partition,
            "node-1<->postgres",
        ));
        assert_eq!(judge(cut).result, Verdict::Pass);
        let mut other_link = vec![
            welcome(1.0, 1, 1, "node-1"),
            closed(14.0, 1, 1, Some(1011), CloseFrame),
        ];
        other_link.extend(action(
            10.0,
            16.0,
            ActionKind::Partition,
            "node-2<->postgres",
        ));
        other_link.extend(action(10.0, 16.0, ActionKind::Partition, "node-1<->nats"));
        assert_eq!(judge(other_link).result, Verdict::Fail);
    }

    #[test]
    fn a_drop_needs_a_fault_on_the_connections_path() {
        let mut killed = vec![
            welcome(1.0, 1, 1, "node-1"),
            closed(10.1, 1, 1, None, NoCloseFrame),
        ];
        killed.extend(action(10.0, 10.05, ActionKind::Kill, "node-1"));
        assert_eq!(judge(killed).result, Verdict::Pass);
        let mut held = vec![
            welcome(1.0, 1, 1, "node-1"),
            closed(50.0, 1, 1, None, Silent),
        ];
        held.extend(action(
            10.0,
            20.0,
            ActionKind::Partition,
            "players<->node-1",
        ));
        assert_eq!(judge(held).result, Verdict::Pass);
        // A healthy connection dropped while another node was killed, or its node's bus cut.
        let mut healthy = vec![
            welcome(1.0, 1, 1, "node-2"),
            closed(10.1, 1, 1, None, NoCloseFrame),
        ];
        healthy.extend(action(10.0, 10.05, ActionKind::Kill, "node-1"));
        healthy.extend(action(9.0, 12.0, ActionKind::Partition, "node-2<->nats"));
        let result = judge(healthy);
        assert_eq!(result.result, Verdict::Fail, "{}", result.detail);
        assert!(result.detail.contains("no_close_frame ×1 (1 unexplained)"));
        // Long after the fault: not its doing.
        let mut after = vec![
            welcome(1.0, 1, 1, "node-1"),
            closed(40.0, 1, 1, None, NoCloseFrame),
        ];
        after.extend(action(10.0, 10.05, ActionKind::Kill, "node-1"));
        assert_eq!(judge(after).result, Verdict::Fail);
    }

    #[test]
    fn codes_the_load_never_asks_for_are_unexplained() {
        for code in [4003, 1000, 1009, 1013] {
            let result = judge(vec![
                welcome(1.0, 1, 1, "node-1"),
                closed(3.0, 1, 1, Some(code), CloseFrame),
            ]);
            assert_eq!(result.result, Verdict::Fail, "{code}: {}", result.detail);
        }
        let mut slow = vec![
            welcome(1.0, 1, 1, "node-1"),
            closed(12.0, 1, 1, Some(1013), CloseFrame),
        ];
        slow.extend(action(
            10.0,
            18.0,
            ActionKind::Bandwidth,
            "players<->node-1",
        ));
        assert_eq!(judge(slow).result, Verdict::Pass);
        // Pings unanswered while the node was starved of CPU.
        let mut starved = vec![
            welcome(1.0, 1, 1, "node-1"),
            closed(12.0, 1, 1, None, CloseFrame),
        ];
        starved.extend(action(10.0, 18.0, ActionKind::Cpu, "node-1"));
        assert_eq!(judge(starved.clone()).result, Verdict::Pass);
        // As the load records that frame: the protocol's 1005 "no status", the same close.
        // Regression (CI): it was judged an unknown code, so a slow reader's pings answered
        // too late behind its queue failed a correct cloud.
        starved[1] = closed(12.0, 1, 1, Some(1005), CloseFrame);
        assert_eq!(judge(starved.clone()).result, Verdict::Pass);
        starved.truncate(2);
        assert_eq!(judge(starved).result, Verdict::Fail);
        let mut signed_out = vec![
            welcome(1.0, 1, 1, "node-1"),
            closed(12.0, 1, 1, Some(4003), CloseFrame),
        ];
        signed_out.extend(action(10.0, 18.0, ActionKind::Cpu, "node-1"));
        assert_eq!(judge(signed_out).result, Verdict::Fail);
    }

    #[test]
    fn a_1013_needs_its_reader_reading_slowly_then() {
        let spell = crate::checks::testing::slow_reading;
        let slow = vec![
            welcome(1.0, 1, 1, "node-1"),
            closed(6.0, 1, 1, Some(1013), CloseFrame),
            spell(2.0, 6.0),
        ];
        assert_eq!(judge(slow).result, Verdict::Pass);
        // The spell was over long before: a healthy reader closed as a slow consumer.
        let after = vec![
            welcome(1.0, 1, 1, "node-1"),
            spell(2.0, 3.0),
            closed(9.0, 1, 1, Some(1013), CloseFrame),
        ];
        assert_eq!(judge(after).result, Verdict::Fail);
        // Another account's spell explains nothing of this one.
        let other = vec![
            welcome(1.0, 1, 1, "node-1"),
            welcome(1.0, 3, 3, "node-1"),
            closed(6.0, 3, 3, Some(1013), CloseFrame),
            spell(2.0, 6.0),
        ];
        assert_eq!(judge(other).result, Verdict::Fail);
        // A reader never behind, dropped without a close frame in its spell: no reason.
        let dropped = vec![
            welcome(1.0, 1, 1, "node-1"),
            closed(6.0, 1, 1, None, NoCloseFrame),
            spell(2.0, 6.0),
        ];
        assert_eq!(judge(dropped).result, Verdict::Fail);
    }

    /// Regression (CI, self-test clean): a slow reader reading 5.5 s behind, with pings every
    /// 2 s, answered them that late and its node closed it for two unanswered pings, with a
    /// frame without a code, before its queue was full.
    #[test]
    fn a_reader_two_ping_intervals_late_may_be_closed_for_its_pings() {
        let spell = crate::checks::testing::slow_reading;
        // Pings every `ping_interval_s`; changes read at the given moments, that late.
        let read_late = |ping_interval_s: u64, reads: &[(f64, f64)]| {
            let mut events = vec![
                welcome_pinging(1.0, 1, 1, "node-1", ping_interval_s),
                spell(2.0, 20.0),
            ];
            events.extend(reads.iter().map(|&(t, late)| change_read(t, 1, 1, 2, late)));
            events.push(closed(16.5, 1, 1, None, CloseFrame));
            judge(events)
        };
        let late = read_late(2, &[(15.0, 5.5), (16.0, 5.5)]);
        assert_eq!(late.result, Verdict::Pass, "{}", late.detail);
        // Regression (CI, self-test `drop-cross-node-events`): the flood ended, the reader
        // caught up on what came after it (a second late), and read the close behind that.
        let caught_up = read_late(2, &[(12.0, 7.0), (15.0, 1.0), (16.0, 1.0)]);
        assert_eq!(caught_up.result, Verdict::Pass, "{}", caught_up.detail);
        // A second late against pings every 2 s; 5.5 s against every 20 s; 7 s late, but
        // longer ago than three intervals before the close: every ping of the last two
        // intervals could be answered in time, and the close has no reason.
        for (interval, reads) in [
            (2, vec![(15.0, 1.0), (16.0, 1.0)]),
            (20, vec![(15.0, 5.5), (16.0, 5.5)]),
            (2, vec![(9.0, 7.0), (15.0, 1.0), (16.0, 1.0)]),
        ] {
            let result = read_late(interval, &reads);
            assert_eq!(result.result, Verdict::Fail, "{interval} s: {reads:?}");
            assert!(result
                .detail
                .contains("frame without code ×1 (1 unexplained)"));
        }
    }

    /// Slow reader 1 on node-1, a friend of sender 2 on node-3; account 3 on node-1, a friend
    /// of the sender too when `friends`.
    fn flood_cast(friends: bool) -> Vec<At> {
        let mut events = vec![
            befriend(0.5, 1, 2),
            welcome(1.0, 1, 1, "node-1"),
            welcome(1.0, 2, 2, "node-3"),
            welcome(1.0, 3, 3, "node-1"),
        ];
        if friends {
            events.push(befriend(0.6, 3, 2));
        }
        events
    }

    /// Regression (CI, hosts.yaml): a slow reader's flood from node-3 was held by a firewall
    /// cut of node-3 from the bus and let through at its heal; four friends of the sender on
    /// node-1, reading normally, got it at once and were closed 1013.
    #[test]
    fn a_1013_of_a_flood_a_fault_held_and_let_through_is_explained() {
        let flooded = |cut: bool, friends: bool| {
            let mut events = flood_cast(friends);
            events.extend([
                // Reader 1 floods by sender 2 from 40 s to 60 s.
                slow_reading(40.0, 60.0),
                closed(57.5, 3, 3, Some(1013), CloseFrame),
            ]);
            if cut {
                events.extend(action(40.0, 50.0, ActionKind::Partition, "node-3<->nats"));
            }
            judge(events).result
        };
        assert_eq!(flooded(true, true), Verdict::Pass);
        // No fault held the flood: a friend reading normally keeps up.
        assert_eq!(flooded(false, true), Verdict::Fail);
        // Not a friend of the sender: the flood never came its way.
        assert_eq!(flooded(true, false), Verdict::Fail);
    }

    /// Regression (CI, hosts.yaml): the slow reader was closed (its spell over) while a
    /// firewall cut still held the flood; TCP resent it seconds after the heal, and friends
    /// of the senders got it then.
    #[test]
    fn a_flood_let_through_after_its_reader_was_closed_is_explained_until_the_fault_lets_go() {
        let flooded = |firewall: bool, at: f64| {
            let cut = action(44.3, 54.3, ActionKind::Partition, "node-3<->nats");
            let mut events = flood_cast(true);
            events.extend([
                slow_reading(44.3, 53.5),
                closed(53.5, 1, 1, Some(1013), CloseFrame),
                closed(at, 3, 3, Some(1013), CloseFrame),
            ]);
            events.extend(if firewall { via_firewall(cut) } else { cut });
            judge(events).result
        };
        assert_eq!(flooded(true, 58.0), Verdict::Pass);
        // The proxy lets what it held through at the heal: 3.7 s later is no part of it.
        assert_eq!(flooded(false, 58.0), Verdict::Fail);
        assert_eq!(flooded(false, 54.8), Verdict::Pass);
        // Past the cut's aftermath (as long as the cut), nothing of the flood is left.
        assert_eq!(flooded(true, 66.0), Verdict::Fail);
    }

    #[test]
    fn a_4003_needs_a_logout_of_the_account_during_the_connection() {
        let signed_out = |logout_at: f64, account: u64| {
            judge(vec![
                welcome(1.0, 1, 1, "node-1"),
                logout(logout_at, account, crate::events::WriteOutcome::Ok, false),
                closed(5.02, 1, 1, Some(4003), CloseFrame),
            ])
        };
        let result = signed_out(5.0, 1);
        assert_eq!(result.result, Verdict::Pass, "{}", result.detail);
        assert!(result.detail.contains("4003 ×1"), "{}", result.detail);
        // Another account's logout, or one answered before this connection began: no reason.
        assert_eq!(signed_out(5.0, 2).result, Verdict::Fail);
        assert_eq!(signed_out(0.5, 1).result, Verdict::Fail);
    }

    #[test]
    fn no_connection_is_nothing_to_judge() {
        assert_eq!(judge(vec![]).result, Verdict::Unknown);
    }
}
