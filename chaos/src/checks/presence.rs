//! presence_missing: every activity change the cloud acknowledged is owed to every friend
//! that was online when it was sent. A friend whose connection stayed up through the change's
//! window (from its send until 3 s after its acknowledgement) must receive, on that
//! connection and within the window, an event of the account with a version at least the
//! change's (a later version counts). A friend whose connection broke in the window is owed
//! the change by the resync of its next welcome (`GET /v1/friends` showing such a version),
//! when that resync was sent after the acknowledgement.
//!
//! Friends: as the model of the writes says, surely friends from the change's send to the
//! window's end; a pair whose friendship an unfriend or a block may have ended meanwhile is
//! not judged. Deliveries in the window of a fault that holds delivery up by design (a pause;
//! a partition or latency of nats, of postgres — routing looks recipients up in the store —
//! or of the players' links; nats or postgres down, from a restart, stop or kill until the
//! nodes are back on it) are judged only by resync: core NATS keeps nothing for a node that
//! is reconnecting. A change answered from half a second before its node's SIGKILL until
//! the node's exit is owed nothing on other nodes: its fan-out to them follows the answer
//! and dies with the node.

use std::collections::{BTreeSet, HashMap};

use super::conns::Conns;
use super::fault_table;
use super::model::{self, Model, Relation};
use super::paths::{self, Owed};
use super::{some, CheckResult, Quantity};
use crate::events::{History, PlayerFact, Write, WriteOutcome};

pub const NAME: &str = "presence_missing";

/// The cloud's bounded delivery time after a change is acknowledged.
pub const DELIVERY_WINDOW: f64 = 3.0;

/// How long after its answer a change's fan-out to other nodes may still be on its way
/// (the router batches and looks recipients up in the store).
const FAN_OUT: f64 = 0.5;

/// One acknowledged change.
#[derive(Debug, Clone)]
struct Change {
    ack: f64,
    account: u64,
    version: u64,
    sent: f64,
    node: String,
    /// When its delivery window opens: its answer, or a newer change's of its account sent
    /// before that answer ([`settle`]).
    settled: f64,
}

impl Change {
    fn window_end(&self) -> f64 {
        self.settled + DELIVERY_WINDOW
    }
}

/// A change answered while a newer one of its account was on its way (sent before that
/// answer) may have been answered as stale and ignored: the newer one was stored first, and
/// friends learn of both from its fan-out, which follows its own answer. Such a change is
/// owed from the newer one's answer (seen: a node slowed by its store answered the older
/// change 3.1 s before the newer one and its fan-out).
fn settle(changes: &mut [Change]) {
    let mut by_account: HashMap<u64, Vec<(u64, f64, f64)>> = HashMap::new();
    for c in changes.iter() {
        by_account
            .entry(c.account)
            .or_default()
            .push((c.version, c.sent, c.ack));
    }
    for c in changes.iter_mut() {
        c.settled = by_account[&c.account]
            .iter()
            .filter(|(version, sent, _)| *version > c.version && *sent < c.ack)
            .map(|(_, _, ack)| *ack)
            .fold(c.ack, f64::max);
    }
}

/// Whether a pair was friends through a delivery's window, as the model says.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Bond {
    Friends,
    NotFriends,
    /// An unfriend or a block may have landed in the window.
    Unsure,
}

fn bond(model: &Model, a: u64, b: u64, sent: f64, window_end: f64) -> Bond {
    let pair = Relation::friends(a, b);
    if model.surely_held(&pair, sent, window_end) {
        Bond::Friends
    } else if model.may_hold(&pair, sent, sent) {
        Bond::Unsure
    } else {
        Bond::NotFriends
    }
}

#[derive(Debug, Default)]
struct Tally {
    by_event: u64,
    by_resync: u64,
    crossed: u64,
    missing: Vec<String>,
    late: u64,
    unsure: u64,
    /// Deliveries a fault that loses data by nature lay on the path of.
    lost_on_path: u64,
    /// Deliveries owed later than the window, by a fault that slows their path.
    slowed: u64,
    died_with_origin: u64,
    no_resync: u64,
}

pub fn check(history: &History, model: &Model, limit: u64) -> CheckResult {
    let end = history.end();
    let conns = Conns::of(history);
    let mut friends_of: HashMap<u64, BTreeSet<u64>> = HashMap::new();
    let mut changes = Vec::new();
    // Per (connection, from): (t, version) in arrival order.
    let mut received: HashMap<(u64, u64), Vec<(f64, u64)>> = HashMap::new();
    // Per connection: when its resync was sent, and each friend's version in it.
    let mut resyncs: HashMap<u64, (f64, HashMap<u64, u64>)> = HashMap::new();
    let nodes = history.player_nodes();
    for (t, account, fact) in history.facts() {
        match fact {
            // Whoever was ever befriended may be owed; the model says when.
            PlayerFact::Write(fact) => {
                let w = Write { account, fact };
                if w.outcome != WriteOutcome::Ok || model::effect(&w) != Some(true) {
                    continue;
                }
                if let Some(other) = w.other() {
                    friends_of.entry(account).or_default().insert(other);
                    friends_of.entry(other).or_default().insert(account);
                }
            }
            PlayerFact::PresenceSet {
                version,
                sent,
                node_index,
            } => changes.push(Change {
                ack: t,
                account,
                version: *version,
                sent: *sent,
                node: nodes.name(*node_index),
                settled: t,
            }),
            PlayerFact::Received { conn, event } => {
                if let Some((from, version, _)) = event.presence {
                    received
                        .entry((*conn, from.0))
                        .or_default()
                        .push((t, version));
                }
            }
            PlayerFact::Resync {
                conn,
                sent,
                friends,
            } => {
                let versions = friends.iter().map(|f| (f.0 .0, f.2)).collect();
                resyncs.entry(*conn).or_insert((*sent, versions));
            }
            _ => {}
        }
    }
    settle(&mut changes);
    let faults = fault_table::faults(history);
    // SIGKILLs of nodes, from the order to the exit: a change acknowledged in between (or
    // just before) may die with its node on its way to the others (the fan-out follows
    // the answer).
    let states = super::outages::states(history);
    let kills: Vec<(&str, f64, f64)> = faults
        .iter()
        .filter(|f| f.action == crate::plan::ActionKind::Kill)
        .map(|f| {
            let exit = f
                .target
                .parse::<crate::plan::Target>()
                .ok()
                .and_then(|target| match target {
                    crate::plan::Target::Node(n) => states.get(&n),
                    _ => None,
                })
                .and_then(|log| log.iter().find(|(t, up)| !up && *t >= f.start))
                .map_or(f.end, |(t, _)| *t);
            (f.target.as_str(), f.start - FAN_OUT, exit)
        })
        .collect();

    let mut tally = Tally::default();
    let mut tail = 0;
    for change in &changes {
        let (a, v, s) = (change.account, change.version, change.sent);
        if change.window_end() > end {
            tail += 1;
            continue;
        }
        for &b in friends_of.get(&a).into_iter().flatten() {
            // Offline when the change was sent: owed nothing.
            let Some(conn) = conns.up_at(b, s) else {
                continue;
            };
            let path = paths::delivery(&change.node, &conn.node);
            let owed = Owed::on(&faults, &path, change.sent, change.window_end())
                .slowed_on(conn, change.sent);
            let e = owed.by;
            match bond(model, a, b, s, e) {
                Bond::NotFriends => continue,
                Bond::Unsure => {
                    tally.unsure += 1;
                    continue;
                }
                Bond::Friends => {}
            }
            if e > end {
                tail += 1;
                continue;
            }
            let broke =
                conn.closed_by(e) || conns.next_after(b, s).is_some_and(|n| n.welcomed <= e);
            if !broke {
                if owed.lost {
                    tally.lost_on_path += 1;
                    continue;
                }
                tally.slowed += u64::from(e > change.window_end());
                let origin_killed = kills.iter().any(|&(node, from, exit)| {
                    node == change.node && (from..=exit).contains(&change.ack)
                });
                if origin_killed && change.node != conn.node {
                    tally.died_with_origin += 1;
                    continue;
                }
                tally.by_event += 1;
                tally.crossed += u64::from(change.node != conn.node);
                let arrivals = received.get(&(conn.id, a)).map_or(&[][..], Vec::as_slice);
                let seen = |in_time: bool| {
                    arrivals
                        .iter()
                        .any(|&(t, version)| version >= v && (t <= e) == in_time)
                };
                if !seen(true) {
                    let late = seen(false);
                    tally.late += u64::from(late);
                    let how = if late { "late" } else { "never" };
                    tally.missing.push(format!("{a} v{v} → {b} ({how})"));
                }
                continue;
            }
            // Broken in the window: owed by the resync after its next welcome.
            let next = conns.next_after(b, s);
            let resync = next.and_then(|n| resyncs.get(&n.id).map(|r| (n, r)));
            let Some((next, (_, versions))) = resync.filter(|(_, (sent, _))| *sent > change.ack)
            else {
                tally.no_resync += 1;
                continue;
            };
            let Some(&shown) = versions.get(&a) else {
                tally.no_resync += 1;
                continue;
            };
            tally.by_resync += 1;
            tally.crossed += u64::from(change.node != next.node);
            if shown < v {
                tally
                    .missing
                    .push(format!("{a} v{v} → {b} (resync showed v{shown})"));
            }
        }
    }

    let judged = tally.by_event + tally.by_resync;
    let count = tally.missing.len() as u64;
    let mut detail = format!(
        "{} changes; {judged} deliveries judged ({} by event, {} by resync), {} crossed \
         nodes, {} owed later by a fault that slowed their path",
        changes.len(),
        tally.by_event,
        tally.by_resync,
        tally.crossed,
        tally.slowed
    );
    if count > 0 {
        detail.push_str(&format!(
            "; {count} missing, {} of them late ({})",
            tally.late,
            some(&tally.missing, 3)
        ));
    }
    let not_judged = [
        (tail, format!("changes in the last {DELIVERY_WINDOW}s")),
        (
            tally.unsure,
            "deliveries with an unfriend or a block in flight".to_owned(),
        ),
        (
            tally.lost_on_path,
            "deliveries with a fault that loses data on their path (a partition, a timeout or \
             limit_data, a kill, stop or restart, nats or postgres down)"
                .to_owned(),
        ),
        (
            tally.died_with_origin,
            "cross-node deliveries of a change whose node was SIGKILLed as it answered".to_owned(),
        ),
        (
            tally.no_resync,
            "deliveries to a broken connection without a resync after the change".to_owned(),
        ),
    ];
    detail.push_str(&super::not_judged(not_judged));
    let limit_q = Quantity::Count(limit);
    if judged == 0 {
        return CheckResult::unknown(NAME, limit_q, format!("no delivery to judge: {detail}"));
    }
    if fault_table::nodes(history).len() >= 2 && tally.crossed == 0 {
        return CheckResult::unknown(
            NAME,
            limit_q,
            format!("no judged delivery crossed nodes in a cluster: {detail}"),
        );
    }
    CheckResult::count(NAME, limit, count, detail)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::testing::*;
    use crate::checks::Verdict;
    use crate::events::CloseCause;
    use crate::events::WriteOp;

    /// Players 1, 2 and 3 online on node-1 from the start, 1 friends with 2 and with 3.
    fn base() -> Vec<At> {
        vec![
            welcome(0.0, 1, 1, "node-1"),
            welcome(0.0, 2, 2, "node-1"),
            welcome(0.0, 3, 3, "node-1"),
            befriend(0.5, 1, 2),
            befriend(0.5, 3, 1),
            end(30.0),
        ]
    }

    fn judge(extra: Vec<At>) -> CheckResult {
        let mut events = base();
        events.extend(extra);
        let (history, model) = with_model(events);
        check(&history, &model, 0)
    }

    /// 1's change 100, sent at 9 s and answered at 10 s, then its change 101, sent at
    /// `newer_sent` and answered at 14 s; both friends receive 101 at `received`.
    fn overtaken(newer_sent: f64, received: f64) -> CheckResult {
        judge(vec![
            change(10.0, 1, 100, 9.0, "node-1"),
            change(14.0, 1, 101, newer_sent, "node-1"),
            presence(received, 2, 2, 1, 1, 101),
            presence(received, 3, 3, 1, 1, 101),
        ])
    }

    /// The newer change was sent before the older's answer: the older may have been ignored
    /// as stale, and is owed from the newer answer (14 s).
    #[test]
    fn a_change_overtaken_by_a_newer_one_in_flight_is_owed_from_the_newer_answer() {
        let result = overtaken(9.5, 14.05);
        assert_eq!(result.result, Verdict::Pass, "{result:?}");
    }

    /// The same, but the newer change was sent after the older's answer: the older was
    /// applied and owed from its own answer, and came late.
    #[test]
    fn a_change_followed_by_a_newer_one_is_owed_from_its_own_answer() {
        let result = overtaken(10.5, 14.05);
        assert_eq!(result.result, Verdict::Fail, "{result:?}");
        // And overtaken, the newer change's own window still holds both.
        let result = overtaken(9.5, 17.5);
        assert_eq!(result.result, Verdict::Fail, "{result:?}");
    }

    #[test]
    fn every_friend_receiving_the_change_in_time_passes() {
        let result = judge(vec![
            change(10.0, 1, 100, 9.9, "node-1"),
            presence(10.1, 2, 2, 1, 1, 100),
            // A later version counts as the change seen.
            presence(10.2, 3, 3, 1, 1, 101),
        ]);
        assert_eq!(result.result, Verdict::Pass, "{result:?}");
        assert!(
            result.detail.contains("2 deliveries judged (2 by event"),
            "{}",
            result.detail
        );
    }

    #[test]
    fn a_friend_that_never_receives_the_change_fails() {
        let result = judge(vec![
            change(10.0, 1, 100, 9.9, "node-1"),
            presence(10.1, 2, 2, 1, 1, 100),
            presence(10.1, 3, 3, 1, 1, 99),
        ]);
        assert_eq!(result.result, Verdict::Fail);
        assert_eq!(result.value, Some(Quantity::Count(1)));
        assert!(
            result.detail.contains("1 v100 → 3 (never)"),
            "{}",
            result.detail
        );
    }

    #[test]
    fn an_event_arriving_3_5_s_after_the_ack_is_missing_and_late() {
        let result = judge(vec![
            change(10.0, 1, 100, 9.9, "node-1"),
            presence(10.1, 2, 2, 1, 1, 100),
            presence(13.5, 3, 3, 1, 1, 100),
        ]);
        assert_eq!(result.result, Verdict::Fail);
        assert!(
            result.detail.contains("1 of them late"),
            "{}",
            result.detail
        );
        assert!(result.detail.contains("→ 3 (late)"), "{}", result.detail);
    }

    #[test]
    fn a_friend_cut_by_a_partition_is_owed_the_change_by_its_resync() {
        let mut cut = action(
            9.0,
            19.0,
            crate::plan::ActionKind::Partition,
            "node-1<->players",
        );
        cut.extend([
            change(10.0, 1, 100, 9.9, "node-1"),
            presence(10.1, 2, 2, 1, 1, 100),
            // 3's connection goes silent, is given up inside the window, and 3 comes back
            // elsewhere; its resync after the ack shows the change.
            closed(12.0, 3, 3, None, CloseCause::Silent),
            welcome(14.0, 3, 4, "node-2"),
            resync(14.2, 3, 4, &[(1, true, 100)]),
        ]);
        let result = judge(cut);
        assert_eq!(result.result, Verdict::Pass, "{result:?}");
        assert!(result.detail.contains("1 by resync"), "{}", result.detail);
        // The delivery to 2 crossed the cut link: not judged by event.
        assert!(
            result
                .detail
                .contains("1 deliveries with a fault that loses data"),
            "{}",
            result.detail
        );
    }

    /// After a firewall partition of nats heals, TCP may take as long again to resend: a change
    /// from another node sent in that aftermath is excused by event; after a proxy partition,
    /// once the aftermath is over, or on one node (the bus is not on its way), the same
    /// missing delivery fails.
    #[test]
    fn a_firewall_partition_excuses_its_aftermath_and_no_more() {
        let missing = |via, sent: f64, node: &str| {
            let mut events = action(
                9.0,
                19.0,
                crate::plan::ActionKind::Partition,
                "node-1<->nats",
            );
            if let (_, Event::ActionStart { via: v, .. }) = &mut events[0] {
                *v = via;
            }
            events.extend([
                change(sent + 0.1, 1, 100, sent, node),
                presence(sent + 0.2, 2, 2, 1, 1, 100),
                presence(sent + 0.2, 3, 3, 1, 1, 99),
                end(sent + 10.0),
            ]);
            judge(events)
        };
        let firewall = Some(crate::plan::Via::Firewall);
        let excused = missing(firewall, 22.0, "node-2");
        assert_eq!(excused.result, Verdict::Unknown, "{excused:?}");
        assert!(
            excused
                .detail
                .contains("2 deliveries with a fault that loses data"),
            "{}",
            excused.detail
        );
        for (via, sent, node) in [
            (None, 22.0, "node-2"),
            (firewall, 32.0, "node-2"),
            (firewall, 22.0, "node-1"),
        ] {
            let result = missing(via, sent, node);
            assert_eq!(
                result.result,
                Verdict::Fail,
                "{via:?} at {sent} from {node}: {result:?}"
            );
        }
    }

    /// A fault that only slows an event's path (a CPU cap, a slow link, a paused bus) makes
    /// it owed by the fault's end plus the window, never excused; a fault that loses data
    /// excuses only on its own path; a clock, memory or disk fault gives no leave at all.
    #[test]
    fn a_fault_on_the_path_that_slows_makes_a_delivery_late_not_lost() {
        use crate::plan::ActionKind::*;
        let judge_with = |kind, target: &str, node: &str, arrives: Option<f64>| {
            let mut events = action(9.0, 19.0, kind, target);
            events.extend([
                change(10.0, 1, 100, 9.9, node),
                presence(10.1, 2, 2, 1, 1, 100),
            ]);
            events.extend(arrives.map(|t| presence(t, 3, 3, 1, 1, 100)));
            judge(events)
        };
        for (kind, target, node) in [
            (Cpu, "node-1", "node-1"),
            (Bandwidth, "players<->node-1", "node-1"),
            (Slicer, "players<->node-1", "node-1"),
            (Pause, "nats", "node-2"),
            (Latency, "node-2<->postgres", "node-2"),
        ] {
            // Late, within the fault's end plus the window: delivered.
            let late = judge_with(kind, target, node, Some(21.5));
            assert_eq!(late.result, Verdict::Pass, "{kind} {target}: {late:?}");
            assert!(late.detail.contains("2 owed later"), "{}", late.detail);
            // Never: lost where the fault only slows.
            let never = judge_with(kind, target, node, None);
            assert_eq!(never.result, Verdict::Fail, "{kind} {target}: {never:?}");
            assert!(
                never.detail.contains("1 v100 → 3 (never)"),
                "{}",
                never.detail
            );
        }
        // A fault that loses data excuses on its path only.
        let on_path = judge_with(Timeout, "node-1<->nats", "node-2", None);
        assert_eq!(on_path.result, Verdict::Unknown, "{on_path:?}");
        for (kind, target, node) in [
            (Timeout, "node-1<->nats", "node-1"),
            (Partition, "node-3<->postgres", "node-2"),
            (Pause, "nats", "node-1"),
            (Clock, "node-1", "node-1"),
            (Memory, "node-1", "node-1"),
            (DiskFull, "postgres", "node-1"),
        ] {
            let result = judge_with(kind, target, node, None);
            assert_eq!(result.result, Verdict::Fail, "{kind} {target}: {result:?}");
        }
    }

    /// Core NATS keeps nothing for a node that is reconnecting: what a restart of it loses
    /// on the way between nodes is owed by resync only, until the nodes are back on it; a
    /// change after that, or one that never left its node, is owed.
    #[test]
    fn what_a_nats_restart_holds_up_is_not_judged_by_event() {
        let mut events = action(9.8, 10.0, crate::plan::ActionKind::Restart, "nats");
        events.extend([
            change(10.0, 1, 100, 9.9, "node-2"),
            presence(10.1, 3, 3, 1, 1, 100),
            change(20.0, 1, 101, 19.9, "node-2"),
            presence(20.1, 2, 2, 1, 1, 101),
            presence(20.1, 3, 3, 2, 1, 101),
        ]);
        let result = judge(events.clone());
        assert_eq!(result.result, Verdict::Pass, "{result:?}");
        assert!(
            result.detail.contains("nats or postgres down) not judged"),
            "{}",
            result.detail
        );
        events.push(change(25.0, 1, 102, 24.9, "node-2"));
        let result = judge(events);
        assert_eq!(result.result, Verdict::Fail, "{result:?}");
        let mut local = action(9.8, 10.0, crate::plan::ActionKind::Restart, "nats");
        local.extend([
            change(10.0, 1, 100, 9.9, "node-1"),
            presence(10.1, 3, 3, 1, 1, 100),
        ]);
        assert_eq!(judge(local).result, Verdict::Fail);
    }

    /// Its node killed as it answered: friends on other nodes are owed nothing; the one on
    /// the same node got it before the answer and still must.
    #[test]
    fn a_change_whose_node_is_killed_as_it_answers_is_owed_only_on_its_node() {
        let mut events = vec![welcome(0.0, 4, 4, "node-2"), befriend(0.5, 1, 4)];
        events.extend(action(
            10.05,
            10.05,
            crate::plan::ActionKind::Kill,
            "node-1",
        ));
        events.extend([
            change(10.0, 1, 100, 9.9, "node-1"),
            presence(10.01, 2, 2, 1, 1, 100),
            presence(10.01, 3, 3, 1, 1, 100),
        ]);
        let result = judge(events.clone());
        assert_eq!(result.result, Verdict::Pass, "{result:?}");
        assert!(
            result
                .detail
                .contains("1 cross-node deliveries of a change whose node was SIGKILLed"),
            "{}",
            result.detail
        );
        // The friend on its own node still must hear it.
        let events: Vec<At> = events
            .into_iter()
            .filter(|(t, _)| *t != 10.01)
            .chain([presence(10.01, 3, 3, 1, 1, 100)])
            .collect();
        let result = judge(events);
        assert_eq!(result.result, Verdict::Fail, "{result:?}");
    }

    #[test]
    fn a_resync_showing_an_older_version_is_missing() {
        let result = judge(vec![
            change(10.0, 1, 100, 9.9, "node-1"),
            presence(10.1, 2, 2, 1, 1, 100),
            closed(11.0, 3, 3, None, CloseCause::NoCloseFrame),
            welcome(12.0, 3, 4, "node-1"),
            resync(12.1, 3, 4, &[(1, true, 99)]),
        ]);
        assert_eq!(result.result, Verdict::Fail);
        assert!(
            result.detail.contains("resync showed v99"),
            "{}",
            result.detail
        );
    }

    #[test]
    fn a_resync_sent_before_the_ack_or_none_at_all_is_not_judged() {
        let result = judge(vec![
            change(10.0, 1, 100, 9.0, "node-1"),
            presence(10.1, 2, 2, 1, 1, 100),
            closed(9.2, 3, 3, None, CloseCause::NoCloseFrame),
            welcome(9.5, 3, 4, "node-1"),
            resync(9.6, 3, 4, &[(1, true, 99)]),
        ]);
        assert_eq!(result.result, Verdict::Pass, "{result:?}");
        assert!(
            result.detail.contains("1 deliveries to a broken"),
            "{}",
            result.detail
        );
    }

    #[test]
    fn a_block_ends_what_is_owed_and_one_in_flight_leaves_it_unjudged() {
        let (history, model) = with_model(vec![
            welcome(0.0, 1, 1, "node-1"),
            welcome(0.0, 2, 2, "node-1"),
            welcome(0.0, 3, 3, "node-1"),
            befriend(0.5, 1, 2),
            befriend(0.5, 1, 3),
            // 2 blocked 1 long before the change; 3 blocks 1 while it is on its way.
            friend(5.0, WriteOp::Block, 2, 1, WriteOutcome::Ok),
            friend(11.0, WriteOp::Block, 3, 1, WriteOutcome::Ok),
            change(10.0, 1, 100, 9.9, "node-1"),
            end(30.0),
        ]);
        let result = check(&history, &model, 0);
        assert!(
            result.detail.contains("0 deliveries judged"),
            "{}",
            result.detail
        );
        assert!(
            result
                .detail
                .contains("1 deliveries with an unfriend or a block"),
            "{}",
            result.detail
        );
    }

    #[test]
    fn friends_offline_coming_online_or_unfriending_are_owed_nothing() {
        let (history, model) = with_model(vec![
            welcome(0.0, 1, 1, "node-1"),
            welcome(0.0, 2, 2, "node-1"),
            welcome(10.5, 3, 3, "node-1"),
            welcome(0.0, 4, 4, "node-1"),
            welcome(0.0, 5, 5, "node-1"),
            befriend(0.5, 1, 2),
            befriend(0.5, 1, 3),
            befriend(0.5, 1, 4),
            request_befriending(0.5, 1, 5, WriteOutcome::Unknown),
            // 2 unfriends while the change is on its way; 5 was never surely a friend.
            friend(11.0, WriteOp::Unfriend, 2, 1, WriteOutcome::Unknown),
            closed(5.0, 4, 4, Some(1000), CloseCause::ClientClose),
            change(10.0, 1, 100, 9.9, "node-1"),
            end(30.0),
        ]);
        let result = check(&history, &model, 0);
        assert_eq!(result.result, Verdict::Unknown, "{result:?}");
        assert!(
            result.detail.contains("0 deliveries judged"),
            "{}",
            result.detail
        );
        assert!(
            result.detail.contains("1 deliveries with an unfriend"),
            "{}",
            result.detail
        );
    }

    #[test]
    fn a_change_whose_window_outlasts_the_recording_is_not_judged() {
        let result = judge(vec![change(28.0, 1, 100, 27.9, "node-1")]);
        assert_eq!(result.result, Verdict::Unknown);
        assert!(
            result
                .detail
                .contains("1 changes in the last 3s not judged"),
            "{}",
            result.detail
        );
    }

    #[test]
    fn a_cluster_without_a_judged_cross_node_delivery_is_unknown() {
        let mut events = vec![node_up(-1.0, 1), node_up(-1.0, 2)];
        events.extend([
            change(10.0, 1, 100, 9.9, "node-1"),
            presence(10.1, 2, 2, 1, 1, 100),
            presence(10.1, 3, 3, 1, 1, 100),
        ]);
        let result = judge(events.clone());
        assert_eq!(result.result, Verdict::Unknown);
        assert!(
            result.detail.contains("crossed nodes in a cluster"),
            "{}",
            result.detail
        );
        // The same change made on node-2 crosses to both friends.
        events[2] = change(10.0, 1, 100, 9.9, "node-2");
        let result = judge(events);
        assert_eq!(result.result, Verdict::Pass, "{result:?}");
        assert!(
            result.detail.contains("2 crossed nodes"),
            "{}",
            result.detail
        );
    }
}
