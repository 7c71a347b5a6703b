//! event_order: on each connection the events' `seq` runs 1, 2, 3 … in arrival order, with
//! no gap, no repeat and none missing; and no connection receives an event older than itself.
//!
//! Older than the connection: a presence event (of X at version v) whose change was
//! acknowledged before the connection was opened, while X neither connected nor lost a
//! connection between that acknowledgement and the receipt (so no online or offline
//! announcement could carry v again). The acknowledgement must precede the opening by more
//! than the delivery window: a fan-out still in flight when the connection subscribes may
//! reach it in a correct cloud.

use std::collections::{BTreeMap, HashMap};

use super::conns::Conns;
use super::presence::DELIVERY_WINDOW;
use super::{some, CheckResult, Quantity};
use crate::events::{History, PlayerFact, Write, WriteOp, WriteOutcome};

pub const NAME: &str = "event_order";

/// How long after a connection dies without a close the cloud may still announce the
/// account offline, at its version of that moment: the record's lease (10 s) and a renewal.
const EXPIRY_BOUND: f64 = 15.0;

pub fn check(history: &History, limit: u64) -> CheckResult {
    let conns = Conns::of(history);
    let mut acks: HashMap<(u64, u64), f64> = HashMap::new();
    // When each account connected (its upgrade went out: the cloud announces it online before
    // the welcome reaches it) or lost a connection, to see whether it announced itself again.
    let mut comings: HashMap<u64, Vec<f64>> = HashMap::new();
    let mut closes: HashMap<u64, Vec<f64>> = HashMap::new();
    // When each pair (lower id first) may have become friends: any time from the write's
    // sending until its answer (the cloud tells each the other's presence, at its current
    // version however old, before it answers; a store that hangs holds the write long).
    // First, as the answer may be recorded after the event it caused.
    let mut befriended: HashMap<(u64, u64), Vec<(f64, f64)>> = HashMap::new();
    for (t, account, fact) in history.facts() {
        match fact {
            PlayerFact::Write(fact) => {
                let w = Write { account, fact };
                let may_befriend = w.op == WriteOp::FriendAccept
                    || w.befriended
                    || (w.op == WriteOp::FriendRequest && w.outcome == WriteOutcome::Unknown);
                if let Some(other) = w
                    .other()
                    .filter(|_| w.outcome != WriteOutcome::Refused && may_befriend)
                {
                    let pair = (w.account.min(other), w.account.max(other));
                    befriended.entry(pair).or_default().push((w.sent, t));
                }
            }
            PlayerFact::Welcome { opened, .. } => comings.entry(account).or_default().push(*opened),
            PlayerFact::Closed { .. } => {
                comings.entry(account).or_default().push(t);
                closes.entry(account).or_default().push(t);
            }
            _ => {}
        }
    }
    // Per connection: the seq expected next, and whether it went wrong.
    let mut next: BTreeMap<u64, (u64, bool)> = BTreeMap::new();
    let mut received = 0u64;
    let mut broken = Vec::new();
    let mut old = Vec::new();
    for (t, account, fact) in history.facts() {
        match fact {
            PlayerFact::PresenceSet { version, .. } => {
                acks.entry((account, *version)).or_insert(t);
            }
            PlayerFact::Received { conn, event } => {
                let seq = &event.seq;
                received += 1;
                let (expected, wrong) = next.entry(*conn).or_insert((1, false));
                if *seq != Some(*expected) && !*wrong {
                    *wrong = true;
                    let got = seq.map_or_else(|| "none".to_owned(), |s| s.to_string());
                    broken.push(format!("conn {conn}: seq {got} where {expected} was due"));
                }
                *expected = seq.unwrap_or(*expected) + 1;
                let (Some((from, version, online)), Some(c)) = (event.presence, conns.get(*conn))
                else {
                    continue;
                };
                let (from, account) = (&from.0, &account);
                let Some(&ack) = acks.get(&(*from, version)) else {
                    continue;
                };
                let since_ack = |ts: &Vec<f64>| ts.iter().any(|&u| u > ack && u <= t);
                let pair = ((*from).min(*account), (*from).max(*account));
                let expired_since =
                    |ts: &Vec<f64>| ts.iter().any(|&u| u <= t && u + EXPIRY_BOUND >= ack);
                // The cloud may end a connection (its pings unanswered behind a cut link)
                // before its client notices: an offline announcement can come first.
                let ended_later = |ts: &Vec<f64>| ts.iter().any(|&u| u > ack);
                let announced = comings.get(from).is_some_and(since_ack)
                    || closes.get(from).is_some_and(expired_since)
                    || (!online && closes.get(from).is_some_and(ended_later))
                    || befriended.get(&pair).is_some_and(|spans| {
                        spans
                            .iter()
                            .any(|&(sent, answered)| answered > ack && sent <= t)
                    });
                if ack + DELIVERY_WINDOW < c.opened && !announced {
                    old.push(format!("conn {conn}: {from} v{version}"));
                }
            }
            _ => {}
        }
    }
    let limit_q = Quantity::Count(limit);
    if received == 0 {
        return CheckResult::unknown(NAME, limit_q, "no event received");
    }
    let count = (broken.len() + old.len()) as u64;
    let mut detail = format!("{received} events on {} connections judged", next.len());
    if !broken.is_empty() {
        detail.push_str(&format!(
            "; {} connections with a gap, repeat or missing seq ({})",
            broken.len(),
            some(&broken, 3)
        ));
    }
    if !old.is_empty() {
        detail.push_str(&format!(
            "; {} events older than their connection ({})",
            old.len(),
            some(&old, 3)
        ));
    }
    CheckResult::count(NAME, limit, count, detail)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::testing::*;
    use crate::checks::Verdict;

    fn judge(events: Vec<At>) -> CheckResult {
        check(&events.into_iter().collect(), 0)
    }

    #[test]
    fn seq_running_1_2_3_on_each_connection_passes() {
        let result = judge(vec![
            received(1.0, 1, 1, Some(1)),
            received(1.1, 2, 2, Some(1)),
            received(1.2, 1, 1, Some(2)),
            received(1.3, 1, 1, Some(3)),
            received(1.4, 2, 2, Some(2)),
        ]);
        assert_eq!(result.result, Verdict::Pass, "{result:?}");
        assert_eq!(result.detail, "5 events on 2 connections judged");
    }

    #[test]
    fn a_gap_a_repeat_or_a_missing_seq_fails_once_per_connection() {
        let result = judge(vec![
            received(1.0, 1, 1, Some(1)),
            received(1.1, 1, 1, Some(3)),
            received(1.2, 1, 1, Some(5)),
            received(1.0, 2, 2, Some(1)),
            received(1.1, 2, 2, Some(1)),
            received(1.0, 3, 3, None),
            received(1.0, 4, 4, Some(2)),
        ]);
        assert_eq!(result.result, Verdict::Fail);
        assert_eq!(result.value, Some(Quantity::Count(4)));
        assert!(
            result.detail.contains("conn 1: seq 3 where 2 was due"),
            "{}",
            result.detail
        );
    }

    #[test]
    fn an_event_older_than_its_connection_fails() {
        let result = judge(vec![
            welcome(0.0, 5, 50, "node-1"),
            change(2.0, 5, 7, 1.9, "node-1"),
            welcome(10.0, 1, 1, "node-1"),
            presence(10.1, 1, 1, 1, 5, 7),
        ]);
        assert_eq!(result.result, Verdict::Fail);
        assert!(result.detail.contains("conn 1: 5 v7"), "{}", result.detail);
    }

    /// Regression: behind a cut link the cloud ends a connection whose pings go unanswered
    /// and announces the account offline, at its old version, before the client itself notices.
    #[test]
    fn an_offline_announcement_before_the_client_notices_is_no_old_event() {
        let mut history = vec![
            welcome(0.0, 5, 50, "node-1"),
            change(2.0, 5, 7, 1.9, "node-1"),
            welcome(30.0, 1, 1, "node-1"),
        ];
        let mut event = presence(60.0, 1, 1, 1, 5, 7);
        received_mut(&mut event).presence = Some((AccountId(5), 7, false));
        history.push(event);
        history.push(closed(64.0, 5, 50, None, crate::events::CloseCause::Silent));
        let result = judge(history);
        assert_eq!(result.result, Verdict::Pass, "{}", result.detail);
    }

    /// Regression: the cloud tells friends before the welcome goes out, so a friend may read the
    /// announcement (with an old version) before the newcomer reads its welcome.
    #[test]
    fn an_announcement_read_before_the_newcomers_welcome_is_no_old_event() {
        let result = judge(vec![
            welcome(0.0, 5, 50, "node-1"),
            change(2.0, 5, 7, 1.9, "node-1"),
            closed(8.0, 5, 50, None, crate::events::CloseCause::NoCloseFrame),
            welcome(30.0, 1, 1, "node-1"),
            presence(40.0, 1, 1, 1, 5, 7),
            welcome(40.01, 5, 51, "node-1"),
        ]);
        assert_eq!(result.result, Verdict::Pass, "{}", result.detail);
    }

    #[test]
    fn an_old_version_announced_again_or_still_in_flight_is_no_old_event() {
        let result = judge(vec![
            welcome(0.0, 5, 50, "node-1"),
            change(2.0, 5, 7, 1.9, "node-1"),
            // 5 reconnects: its online announcement carries v7 again.
            closed(8.0, 5, 50, None, crate::events::CloseCause::NoCloseFrame),
            welcome(9.0, 5, 51, "node-2"),
            welcome(10.0, 1, 1, "node-1"),
            presence(10.1, 1, 1, 1, 5, 7),
            // A change acknowledged just before 2's connection opened may still reach it.
            change(19.0, 6, 3, 18.9, "node-1"),
            welcome(20.0, 2, 2, "node-1"),
            presence(20.1, 2, 2, 1, 6, 3),
        ]);
        assert_eq!(result.result, Verdict::Pass, "{result:?}");
    }

    /// The cloud tells new friends each other's presence, at its current (old) version:
    /// seen in the self-test's clean run.
    #[test]
    fn a_new_friend_s_presence_at_its_old_version_is_no_old_event() {
        let result = judge(vec![
            welcome(0.0, 5, 50, "node-1"),
            change(2.0, 5, 7, 1.9, "node-1"),
            welcome(10.0, 1, 1, "node-1"),
            // The event goes out before the accept's answer: from the moment it was sent.
            presence(10.1, 1, 1, 1, 5, 7),
            befriend(10.15, 1, 5),
        ]);
        assert_eq!(result.result, Verdict::Pass, "{result:?}");
    }

    /// An accept sent before the friend's change and held by a store out of reach until
    /// long after it (dependency-faults in CI): the friendship, and the presence it brings
    /// at its old version, came with the answer.
    #[test]
    fn a_friendship_made_while_the_store_hung_brings_an_old_version() {
        let mut accept = befriend(18.7, 1, 5);
        write_mut(&mut accept).sent = 0.5;
        let events = vec![
            welcome(0.0, 5, 50, "node-2"),
            change(2.0, 5, 7, 1.9, "node-2"),
            accept,
            welcome(18.8, 1, 1, "node-1"),
            presence(18.8, 1, 1, 1, 5, 7),
        ];
        assert_eq!(judge(events.clone()).result, Verdict::Pass);
        // Answered before the change: that friendship brought nothing this old later on.
        let events: Vec<At> = events
            .into_iter()
            .map(|(t, e)| match e {
                Event::Player {
                    fact: PlayerFact::Write(_),
                    ..
                } => (1.0, e),
                e => (t, e),
            })
            .collect();
        assert_eq!(judge(events).result, Verdict::Fail);
    }

    /// A player whose node crashed, seen in the self-test's clean run: its change after its
    /// connection died is announced again by the expiry of its record (offline, same version).
    #[test]
    fn an_expiry_announcement_after_a_crash_is_no_old_event() {
        let result = judge(vec![
            welcome(0.0, 5, 50, "node-1"),
            closed(8.0, 5, 50, None, crate::events::CloseCause::NoCloseFrame),
            change(10.0, 5, 7, 9.9, "node-2"),
            welcome(14.0, 1, 1, "node-2"),
            presence(19.0, 1, 1, 1, 5, 7),
        ]);
        assert_eq!(result.result, Verdict::Pass, "{result:?}");
    }

    #[test]
    fn no_event_received_is_unknown() {
        assert_eq!(
            judge(vec![welcome(0.0, 1, 1, "node-1")]).result,
            Verdict::Unknown
        );
    }
}
