//! unexpected_events: no event may reach a recipient that the model of the contract does not
//! allow it at that moment (chaos-plan v1.2): an account's presence goes to its friends only
//! (nobody else, itself included; a block either way ends the friendship), a session's news
//! to its members only; and no presence (an event, or a friend in a resync) may show a
//! version its account never set.
//!
//! An event is judged against the relation over the moments it may have been made in: from
//! [`DELIVERY_WINDOW`] before its arrival, stretched back over any fault that held
//! traffic up then (a fan-out made while they were still friends may arrive a little after
//! the unfriend). Only an event whose relation surely did not hold in all that span fails.

use std::collections::HashMap;

use super::fault_table::{faults, fmt_num, Fault};
use super::model::{Model, Relation};
use super::presence::DELIVERY_WINDOW;
use super::{some, CheckResult, Quantity};
use crate::events::{History, PlayerFact};

pub const NAME: &str = "unexpected_events";

/// How much earlier than its send an agent's clock may place a version's sighting (its offset
/// to the supervisor is measured when it is recruited; this is far more than that is off).
const CLOCKS_APART: f64 = 1.0;

/// The versions each account set (every `PUT /v1/presence` it sent, answered or not), and
/// when it sent them: a version shown must be one of them, sent by then, or 0 (never set).
struct SetVersions(HashMap<u64, HashMap<u64, f64>>);

impl SetVersions {
    fn of(history: &History) -> SetVersions {
        let mut set: HashMap<u64, HashMap<u64, f64>> = HashMap::new();
        for (_, account, fact) in history.facts() {
            if let PlayerFact::PresenceSet { version, sent, .. }
            | PlayerFact::PresenceUnanswered { version, sent } = fact
            {
                let first = set.entry(account).or_default().entry(*version);
                first.and_modify(|s| *s = s.min(*sent)).or_insert(*sent);
            }
        }
        SetVersions(set)
    }

    /// Whether `account`'s presence at `version` may be shown at `t`.
    fn allows(&self, account: u64, version: u64, t: f64) -> bool {
        version == 0
            || self
                .0
                .get(&account)
                .and_then(|versions| versions.get(&version))
                .is_some_and(|sent| *sent <= t + CLOCKS_APART)
    }
}

/// The earliest moment an event that arrived at `t` may have been made.
fn made_from(faults: &[Fault], t: f64) -> f64 {
    let mut from = t - DELIVERY_WINDOW;
    // Each fault overlapping the span (a firewall partition's aftermath too: TCP resends
    // what it held only after a backoff) may have held the event from its start on.
    loop {
        let earlier = faults
            .iter()
            .filter(|f| f.start <= t && f.end + f.aftermath() >= from)
            .map(|f| f.start - DELIVERY_WINDOW)
            .fold(from, f64::min);
        if earlier >= from {
            return from;
        }
        from = earlier;
    }
}

pub fn check(history: &History, model: &Model, limit: u64) -> CheckResult {
    let limit_q = Quantity::Count(limit);
    let faults = faults(history);
    let set = SetVersions::of(history);
    let (mut presence, mut session_news, mut versions) = (0u64, 0u64, 0u64);
    let mut unexpected = Vec::new();
    for (t, account, fact) in history.facts() {
        let mut shown = |to: u64, of: u64, version: u64| {
            versions += 1;
            if !set.allows(of, version, t) {
                unexpected.push(format!(
                    "version {version} of {of}, which it never set, to {to} at {}s",
                    fmt_num(t)
                ));
            }
        };
        let event = match fact {
            PlayerFact::Received { event, .. } => {
                if let Some((from, version, _)) = event.presence {
                    shown(account, from.0, version);
                }
                event
            }
            PlayerFact::Resync { friends, .. } => {
                for &(friend, _, version) in friends {
                    shown(account, friend.0, version);
                }
                continue;
            }
            _ => continue,
        };
        let (kind, from) = (event.kind.as_str(), event.from().map(|a| a.0));
        let relation = match (kind, from, &event.session) {
            ("presence", Some(from), _) => {
                presence += 1;
                Relation::friends(account, from)
            }
            (kind, _, Some(session)) if kind.starts_with("session_") => {
                session_news += 1;
                Relation::Member(account, session.0.clone())
            }
            _ => continue,
        };
        let allowed = match relation {
            Relation::Friends(a, b) if a == b => false,
            _ => model.may_hold(&relation, made_from(&faults, t), t),
        };
        if !allowed {
            unexpected.push(match relation {
                Relation::Member(_, session) => {
                    format!(
                        "{kind} of session {session} to {account} at {}s",
                        fmt_num(t)
                    )
                }
                _ => format!(
                    "presence of {} to {account} at {}s",
                    from.unwrap_or_default(),
                    fmt_num(t)
                ),
            });
        }
    }
    if presence + session_news + versions == 0 {
        return CheckResult::unknown(
            NAME,
            limit_q,
            "no presence or session event was received, nor a resync: nothing to judge",
        );
    }
    let mut detail = format!(
        "{presence} presence events (to friends only), {session_news} session events (to \
         members only), {versions} presence versions shown (each one its account set)"
    );
    if !unexpected.is_empty() {
        detail.push_str(&format!(
            "; {} not allowed: {}",
            unexpected.len(),
            some(&unexpected, 5)
        ));
    }
    CheckResult::count(NAME, limit, unexpected.len() as u64, detail)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::testing::*;
    use crate::checks::Verdict;
    use crate::events::{Event, WriteOp, WriteOutcome};
    use crate::plan::ActionKind;
    use anyplay_load::api::wire::SessionId;

    /// Judges `events` where account 1 set its presence to version 10 at the start (the
    /// version of the presence events the tests send).
    fn judge(mut events: Vec<At>) -> CheckResult {
        events.insert(0, change(0.2, 1, 10, 0.1, "node-1"));
        let (history, model) = with_model(events);
        check(&history, &model, 0)
    }

    #[test]
    fn a_version_shown_must_be_one_its_account_set_by_then() {
        let friends = || vec![befriend(1.0, 2, 1)];
        let shown = |extra: Vec<At>| {
            let mut events = friends();
            events.extend(extra);
            judge(events)
        };
        // Set and acknowledged, set without an answer, or never set (0): all may be shown.
        let ok = shown(vec![presence(5.0, 2, 1, 1, 1, 10)]);
        assert_eq!(ok.result, Verdict::Pass, "{}", ok.detail);
        let unanswered = shown(vec![
            player(
                3.0,
                1,
                PlayerFact::PresenceUnanswered {
                    version: 12,
                    sent: 2.0,
                },
            ),
            presence(5.0, 2, 1, 1, 1, 12),
            resync(6.0, 2, 2, &[(1, true, 12)]),
        ]);
        assert_eq!(unanswered.result, Verdict::Pass, "{}", unanswered.detail);
        assert!(unanswered.detail.contains("2 presence versions shown"));
        let never = shown(vec![presence(5.0, 2, 1, 1, 1, 0)]);
        assert_eq!(never.result, Verdict::Pass, "{}", never.detail);
        // One more than was set, in an event or in a resync, fails.
        let bumped = shown(vec![presence(5.0, 2, 1, 1, 1, 11)]);
        assert_eq!(bumped.result, Verdict::Fail, "{}", bumped.detail);
        assert!(
            bumped
                .detail
                .contains("version 11 of 1, which it never set, to 2 at 5s"),
            "{}",
            bumped.detail
        );
        let resynced = shown(vec![resync(6.0, 2, 2, &[(1, true, 11)])]);
        assert_eq!(resynced.result, Verdict::Fail, "{}", resynced.detail);
        // A version shown long before its account sent it was made up then.
        let early = shown(vec![
            presence(5.0, 2, 1, 1, 1, 13),
            change(9.1, 1, 13, 9.0, "node-1"),
        ]);
        assert_eq!(early.result, Verdict::Fail, "{}", early.detail);
    }

    #[test]
    fn presence_goes_to_friends_only() {
        let friends = judge(vec![befriend(1.0, 2, 1), presence(5.0, 2, 1, 1, 1, 10)]);
        assert_eq!(friends.result, Verdict::Pass, "{}", friends.detail);
        let strangers = judge(vec![befriend(1.0, 2, 1), presence(5.0, 3, 2, 1, 1, 10)]);
        assert_eq!(strangers.result, Verdict::Fail, "{}", strangers.detail);
        assert!(
            strangers.detail.contains("presence of 1 to 3 at 5s"),
            "{}",
            strangers.detail
        );
        let itself = judge(vec![befriend(1.0, 2, 1), presence(5.0, 1, 2, 1, 1, 10)]);
        assert_eq!(itself.result, Verdict::Fail, "{}", itself.detail);
    }

    #[test]
    fn presence_in_flight_at_the_unfriend_is_allowed_but_not_long_after() {
        let base = || {
            vec![
                befriend(1.0, 2, 1),
                friend(10.0, WriteOp::Unfriend, 1, 2, WriteOutcome::Ok),
            ]
        };
        let mut in_flight = base();
        in_flight.push(presence(11.0, 2, 1, 1, 1, 10));
        assert_eq!(judge(in_flight).result, Verdict::Pass);
        let mut late = base();
        late.push(presence(20.0, 2, 1, 1, 1, 10));
        assert_eq!(judge(late).result, Verdict::Fail);
        // A fault that held traffic since before the unfriend makes it in flight still.
        let mut held = base();
        held.extend(action(8.0, 19.0, ActionKind::Pause, "nats"));
        held.push(presence(20.0, 2, 1, 1, 1, 10));
        assert_eq!(judge(held).result, Verdict::Pass);
        // A firewall partition holds traffic as long again after its heal.
        let firewall = |arrives: f64| {
            let mut events = base();
            events.extend(via_firewall(action(
                8.0,
                12.0,
                ActionKind::Partition,
                "node-1<->nats",
            )));
            events.push(presence(arrives, 2, 1, 1, 1, 10));
            judge(events).result
        };
        assert_eq!(firewall(15.5), Verdict::Pass);
        assert_eq!(firewall(19.5), Verdict::Fail);
    }

    #[test]
    fn a_block_ends_presence_both_ways() {
        let blocked = |by: u64, other: u64| {
            vec![
                befriend(1.0, 2, 1),
                friend(10.0, WriteOp::Block, by, other, WriteOutcome::Ok),
            ]
        };
        for (by, other) in [(1, 2), (2, 1)] {
            let mut before = blocked(by, other);
            before.push(presence(5.0, 2, 1, 1, 1, 10));
            assert_eq!(judge(before).result, Verdict::Pass);
            // 1's presence to 2, long after either blocked the other.
            let mut after = blocked(by, other);
            after.push(presence(20.0, 2, 1, 1, 1, 10));
            assert_eq!(judge(after).result, Verdict::Fail, "{by} blocked {other}");
        }
    }

    #[test]
    fn session_news_goes_to_members_only() {
        let news = |t: f64, account: u64| {
            let (t, mut event) = received(t, account, 1, Some(1));
            if let Event::Player {
                fact: PlayerFact::Received { event, .. },
                ..
            } = &mut event
            {
                event.session = Some(SessionId("9".into()));
            }
            (t, event)
        };
        let member = judge(vec![
            session_write(1.0, WriteOp::SessionJoin, 5, "9", WriteOutcome::Ok),
            news(3.0, 5),
        ]);
        assert_eq!(member.result, Verdict::Pass, "{}", member.detail);
        let stranger = judge(vec![
            session_write(1.0, WriteOp::SessionJoin, 5, "9", WriteOutcome::Ok),
            news(3.0, 6),
        ]);
        assert_eq!(stranger.result, Verdict::Fail, "{}", stranger.detail);
        assert!(
            stranger.detail.contains("session 9 to 6"),
            "{}",
            stranger.detail
        );
        let left = judge(vec![
            session_write(1.0, WriteOp::SessionJoin, 5, "9", WriteOutcome::Ok),
            session_write(4.0, WriteOp::SessionLeave, 5, "9", WriteOutcome::Ok),
            news(12.0, 5),
        ]);
        assert_eq!(left.result, Verdict::Fail, "{}", left.detail);
    }

    #[test]
    fn no_event_is_nothing_to_judge() {
        assert_eq!(judge(vec![befriend(1.0, 2, 1)]).result, Verdict::Unknown);
    }
}
