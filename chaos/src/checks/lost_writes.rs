//! lost_writes: every write of the run, friendships made and removed and session joins and
//! leaves, must show in the final reads. Per friendship pair and per (account, session), the
//! writes are walked in answer order keeping the set of states the end may show: it starts
//! at "no"; an ok write sets it to its result; an unknown one (it may or may not have
//! happened) adds its result; a refused one changes nothing. The final state must be in
//! the set, and a friendship one side lists and the other does not is half a write: lost.
//! Pairs and memberships the final reads did not cover are not judged.
//!
//! A refusal must be the one the model gives: a 404 on an accept, decline, cancel, unfriend,
//! unblock or leave only when the request, friendship, block or membership did not surely
//! hold all through the call; a 409 on a request only when they may have been friends or
//! the request may have been open; on a request, 404 only when the other side may have
//! blocked the asker, 403 `blocked` only when the asker may have blocked them. A request
//! answered ok while a block surely stood either way is wrong too. A join's 404 only when
//! no member surely held the session all through the call; `session_full` only when the
//! members that may have held it then fill its `max_members`; `already_in_session` (a join
//! or a create) only when the account may have been in a session; `not_allowed` only when
//! the joiner may not have been the leader's friend or a block may have stood between it
//! and a member (the leader judged is the creator, while it surely stays). A wrong answer
//! counts as a lost write.
//!
//! A logout is a write too: the refresh token it revoked must no longer be taken, and a
//! connection of the account up when it was sent must be closed within the window after
//! its answer (later when a fault that slows the connection's path held until then; not
//! judged across one that loses data there).

use std::collections::{BTreeMap, HashMap, HashSet};

use super::conns::Conns;
use super::fault_table;
use super::model::{self, Model, Relation};
use super::paths::{self, Owed};
use super::presence::DELIVERY_WINDOW;
use super::quotas::Quotas;
use super::{some, CheckResult, Quantity};
use crate::events::{Event, History, PlayerFact, Write, WriteOp, WriteOutcome};

pub const NAME: &str = "lost_writes";

/// The states the end may show: friends (or member) and not.
#[derive(Debug, Clone, Copy, PartialEq)]
struct May {
    yes: bool,
    no: bool,
    /// The latest ok write: its result and when it was answered.
    last_ok: Option<(bool, f64)>,
}

impl May {
    const START: May = May {
        yes: false,
        no: true,
        last_ok: None,
    };

    /// A write sent at `sent`, answered at `t`.
    fn apply(&mut self, outcome: WriteOutcome, result: bool, sent: f64, t: f64) {
        match outcome {
            WriteOutcome::Ok => {
                // Two ok writes in flight together may have landed in either order.
                let other = self
                    .last_ok
                    .filter(|&(_, answered)| answered > sent)
                    .map(|(r, _)| r);
                self.yes = result || other == Some(true);
                self.no = !result || other == Some(false);
                self.last_ok = Some((result, t));
            }
            WriteOutcome::Unknown if result => self.yes = true,
            WriteOutcome::Unknown => self.no = true,
            WriteOutcome::Refused => {}
        }
    }

    fn allows(self, shown: bool) -> bool {
        if shown {
            self.yes
        } else {
            self.no
        }
    }
}

/// Whether a refusal was the one the model gives: `Some(false)` it was, `Some(true)` the
/// cloud refused what the contract says it must do, `None` not judged (a limit, a rule this
/// model does not follow, or no code).
fn wrong_refusal(model: &Model, quotas: Option<&Quotas>, w: &Write, t: f64) -> Option<bool> {
    let code = w.refusal.as_deref()?;
    let (me, sent) = (w.account, w.sent);
    let held = |relation: Relation| model.surely_held(&relation, sent, t);
    let may = |relation: Relation| model.may_hold(&relation, sent, t);
    Some(match (w.op, code, w.other(), w.session()) {
        // 404 only when there was no such request, friendship or membership to act on.
        (WriteOp::FriendAccept | WriteOp::FriendDecline, "not_found", Some(other), _) => {
            held(Relation::Request(other, me))
        }
        (WriteOp::FriendCancel, "not_found", Some(other), _) => held(Relation::Request(me, other)),
        (WriteOp::Unfriend, "not_found", Some(other), _) => held(Relation::friends(me, other)),
        (WriteOp::Unblock, "not_found", Some(other), _) => held(Relation::Blocked(me, other)),
        (WriteOp::SessionLeave, "not_found", _, Some(session)) => {
            held(Relation::Member(me, session.to_owned()))
        }
        // 409 only when they were friends, or this request was already open.
        (WriteOp::FriendRequest, "already_friends", Some(other), _) => {
            !may(Relation::friends(me, other))
        }
        (WriteOp::FriendRequest, "already_requested", Some(other), _) => {
            !may(Relation::Request(me, other))
        }
        (WriteOp::FriendRequest, "cannot_friend_self", Some(other), _) => other != me,
        // Every handle asked exists: 404 only from a block by the other side, 403 by ours.
        (WriteOp::FriendRequest, "not_found", Some(other), _) => !may(Relation::Blocked(other, me)),
        (WriteOp::FriendRequest, "blocked", Some(other), _) => !may(Relation::Blocked(me, other)),
        // A limit only when one may have stood.
        (WriteOp::FriendRequest | WriteOp::FriendAccept, "limit_reached", Some(_), _) => {
            !quotas?.may_bind(w, t)
        }
        // A party: 404 only for a session nobody surely held; full only with every seat
        // possibly taken; in another session only when the joiner may have been in one.
        (WriteOp::SessionJoin, "not_found", _, Some(s)) => model
            .members(s)
            .any(|m| held(Relation::Member(m, s.to_owned()))),
        (WriteOp::SessionJoin, "session_full", _, Some(s)) => {
            let seats = model.seats(s)?;
            let taken = model
                .members(s)
                .filter(|&m| m != me && may(Relation::Member(m, s.to_owned())))
                .count();
            taken < seats as usize
        }
        (WriteOp::SessionJoin | WriteOp::SessionCreate, "already_in_session", _, _) => {
            !model.may_be_in_a_session(me, sent, t)
        }
        // Not allowed: not a friend of the leader (its creator, while it surely stays), or
        // a block either way with a member.
        (WriteOp::SessionJoin, "not_allowed", _, Some(s)) => {
            let leader = model.creator_leads(s, sent, t)?;
            held(Relation::friends(me, leader))
                && !model.members(s).any(|m| {
                    may(Relation::Member(m, s.to_owned()))
                        && (may(Relation::Blocked(m, me)) || may(Relation::Blocked(me, m)))
                })
        }
        _ => return None,
    })
}

/// What the ok logouts left undone: the count judged, and each one lost.
fn logouts_lost(history: &History) -> (u64, Vec<String>) {
    let conns = Conns::of(history);
    let faults = fault_table::faults(history);
    let (mut judged, mut lost) = (0u64, Vec::new());
    for (t, account, fact) in history.facts() {
        let PlayerFact::LoggedOut {
            sent,
            outcome: WriteOutcome::Ok,
            stale_refresh_taken,
        } = fact
        else {
            continue;
        };
        judged += 1;
        let at = fault_table::fmt_num(t);
        if *stale_refresh_taken {
            lost.push(format!(
                "logout of {account} at {at}s: its refresh token still taken"
            ));
        }
        for conn in conns.of_account(account).filter(|c| c.up_at(*sent)) {
            let owed = Owed::on(
                &faults,
                &paths::connection(&conn.node),
                *sent,
                t + DELIVERY_WINDOW,
            );
            if !owed.lost && owed.by <= history.end() && !conn.closed_by(owed.by) {
                lost.push(format!(
                    "logout of {account} at {at}s: connection {} on {} still open",
                    conn.id, conn.node
                ));
            }
        }
    }
    (judged, lost)
}

/// Why a write answered ok should have been refused, by the rules [`wrong_refusal`] judges
/// refusals by: nothing surely there to act on all the while it was in flight (a 404 was
/// due), a friendship, its own request or a block surely standing (409, 403 or 404), or a
/// party the joiner was surely not allowed into.
fn wrong_ok(model: &Model, w: &Write, t: f64) -> Option<&'static str> {
    if w.outcome != WriteOutcome::Ok {
        return None;
    }
    let (me, sent) = (w.account, w.sent);
    let held = |relation: Relation| model.surely_held(&relation, sent, t);
    let none = |relation: Relation| !model.may_hold(&relation, sent, t);
    match (w.op, w.other(), w.session()) {
        (WriteOp::FriendAccept | WriteOp::FriendDecline, Some(other), _) => {
            none(Relation::Request(other, me)).then_some("with no request of theirs open")
        }
        (WriteOp::FriendCancel, Some(other), _) => {
            none(Relation::Request(me, other)).then_some("with no request of its own open")
        }
        (WriteOp::Unfriend, Some(other), _) => {
            none(Relation::friends(me, other)).then_some("with no friendship")
        }
        (WriteOp::Unblock, Some(other), _) => {
            none(Relation::Blocked(me, other)).then_some("with no block")
        }
        (WriteOp::SessionLeave, _, Some(session)) => {
            none(Relation::Member(me, session.to_owned())).then_some("with no membership")
        }
        (WriteOp::FriendRequest, Some(other), _) => {
            if held(Relation::Blocked(me, other)) || held(Relation::Blocked(other, me)) {
                Some("through a block")
            } else if held(Relation::friends(me, other)) {
                Some("between friends")
            } else if !w.befriended && held(Relation::Request(me, other)) {
                Some("while its request stood")
            } else {
                None
            }
        }
        (WriteOp::SessionJoin, _, Some(s)) => {
            let leader = model.creator_leads(s, sent, t)?;
            let blocked = model.members(s).any(|m| {
                held(Relation::Member(m, s.to_owned()))
                    && (held(Relation::Blocked(m, me)) || held(Relation::Blocked(me, m)))
            });
            if leader != me && none(Relation::friends(me, leader)) {
                Some("by a stranger to its leader")
            } else if blocked {
                Some("across a block with a member")
            } else {
                None
            }
        }
        _ => None,
    }
}

pub fn check(history: &History, model: &Model, limit: u64, grace: f64) -> CheckResult {
    let windows = fault_table::windows(history, grace);
    let mut pairs: BTreeMap<(u64, u64), May> = BTreeMap::new();
    let mut members: BTreeMap<(u64, String), May> = BTreeMap::new();
    // Per op: ok, refused, unknown.
    let mut by_op: BTreeMap<&'static str, [u64; 3]> = BTreeMap::new();
    let (mut writes, mut in_faults) = (0u64, 0u64);
    let mut final_state = None;
    for (t, event) in history.iter() {
        match event {
            Event::Player {
                account,
                fact: PlayerFact::Write(fact),
                ..
            } => {
                let w = Write {
                    account: *account,
                    fact,
                };
                writes += 1;
                in_faults += u64::from(fault_table::overlaps(&windows, w.sent, t));
                let slot = match w.outcome {
                    WriteOutcome::Ok => 0,
                    WriteOutcome::Refused => 1,
                    WriteOutcome::Unknown => 2,
                };
                by_op.entry(op_name(w.op)).or_default()[slot] += 1;
                let Some(result) = model::effect(&w) else {
                    continue;
                };
                let may = match (w.other(), w.session()) {
                    (Some(other), _) => pairs
                        .entry((w.account.min(other), w.account.max(other)))
                        .or_insert(May::START),
                    (None, Some(session)) => members
                        .entry((w.account, session.to_owned()))
                        .or_insert(May::START),
                    (None, None) => continue,
                };
                may.apply(w.outcome, result, w.sent, t);
            }
            Event::FinalState {
                friends,
                memberships,
                ..
            } => final_state = Some((friends, memberships)),
            _ => {}
        }
    }
    let ops = by_op
        .iter()
        .map(|(op, [ok, refused, unknown])| format!("{op} {ok}/{refused}/{unknown}"))
        .collect::<Vec<_>>()
        .join(", ");
    let written = format!(
        "{writes} writes (ok/refused/unknown: {}), {in_faults} in fault windows",
        if ops.is_empty() { "none" } else { &ops }
    );
    let limit_q = Quantity::Count(limit);
    if writes == 0 {
        return CheckResult::unknown(NAME, limit_q, "no friend or session write was recorded");
    }
    let Some((friends, memberships)) = final_state else {
        return CheckResult::unknown(
            NAME,
            limit_q,
            format!("{written}, but no final reads recorded"),
        );
    };
    let lists: HashMap<u64, HashSet<u64>> = friends
        .iter()
        .map(|f| (f.account, f.friends.iter().copied().collect()))
        .collect();
    let shown_member: HashMap<(u64, &str), bool> = memberships
        .iter()
        .map(|m| ((m.account, m.session.as_str()), m.member))
        .collect();

    let mut lost = Vec::new();
    let quotas = Quotas::of(history, model);
    // Refusals, against the model: judged, and not (rules it does not follow, or limits a
    // history that does not record them).
    let (mut refusals_judged, mut refusals_unjudged) = (0u64, 0u64);
    for (t, w) in history.writes() {
        if quotas.as_ref().is_some_and(|q| q.surely_past_daily(&w)) {
            refusals_judged += 1;
            lost.push(format!(
                "friend_request of {} about {} opened past the daily limit at {}s",
                w.account,
                w.other().unwrap_or_default(),
                fault_table::fmt_num(t)
            ));
        }
        if let Some(why) = wrong_ok(model, &w, t) {
            refusals_judged += 1;
            lost.push(format!(
                "{} of {} about {} answered ok {why} at {}s",
                op_name(w.op),
                w.account,
                w.session()
                    .map(str::to_owned)
                    .unwrap_or_else(|| w.other().unwrap_or_default().to_string()),
                fault_table::fmt_num(t)
            ));
        }
        if w.outcome != WriteOutcome::Refused {
            continue;
        }
        match wrong_refusal(model, quotas.as_ref(), &w, t) {
            None => refusals_unjudged += 1,
            Some(wrong) => {
                refusals_judged += 1;
                if wrong {
                    lost.push(format!(
                        "{} of {} about {} refused {} at {}s",
                        op_name(w.op),
                        w.account,
                        w.other().map_or_else(
                            || format!("session {}", w.session().unwrap_or("?")),
                            |o| o.to_string()
                        ),
                        w.refusal.as_deref().unwrap_or_default(),
                        fault_table::fmt_num(t)
                    ));
                }
            }
        }
    }
    let (logouts_judged, logouts_lost) = logouts_lost(history);
    lost.extend(logouts_lost);
    let (mut pairs_judged, mut members_judged) = (0u64, 0u64);
    for (&(a, b), may) in &pairs {
        let side = |x: u64, y: u64| lists.get(&x).map(|l| l.contains(&y));
        let shown = match (side(a, b), side(b, a)) {
            (None, None) => continue,
            (Some(x), Some(y)) if x != y => {
                pairs_judged += 1;
                lost.push(format!("friends {a}-{b} half"));
                continue;
            }
            (Some(x), _) | (None, Some(x)) => x,
        };
        pairs_judged += 1;
        if !may.allows(shown) {
            lost.push(format!(
                "friends {a}-{b} {}",
                if shown { "present" } else { "gone" }
            ));
        }
    }
    for ((account, session), may) in &members {
        let Some(&shown) = shown_member.get(&(*account, session.as_str())) else {
            continue;
        };
        members_judged += 1;
        if !may.allows(shown) {
            let how = if shown { "still in" } else { "not in" };
            lost.push(format!("{account} {how} session {session}"));
        }
    }
    let count = lost.len() as u64;
    let mut detail = format!(
        "{written}; {pairs_judged} of {} pairs and {members_judged} of {} memberships judged; \
         {refusals_judged} refusals judged against the model ({refusals_unjudged} not: rules \
         it does not follow, or unrecorded limits); {logouts_judged} logouts judged",
        pairs.len(),
        members.len()
    );
    if count > 0 {
        detail.push_str(&format!("; {count} lost ({})", some(&lost, 3)));
    }
    if pairs_judged + members_judged == 0 {
        return CheckResult::unknown(
            NAME,
            limit_q,
            format!("the final reads covered nothing written: {detail}"),
        );
    }
    CheckResult::count(NAME, limit, count, detail)
}

fn op_name(op: WriteOp) -> &'static str {
    match op {
        WriteOp::FriendRequest => "friend_request",
        WriteOp::FriendAccept => "friend_accept",
        WriteOp::FriendDecline => "friend_decline",
        WriteOp::FriendCancel => "friend_cancel",
        WriteOp::Unfriend => "unfriend",
        WriteOp::Block => "block",
        WriteOp::Unblock => "unblock",
        WriteOp::SetPrivacy => "set_privacy",
        WriteOp::SessionCreate => "session_create",
        WriteOp::SessionJoin => "session_join",
        WriteOp::SessionLeave => "session_leave",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::testing::*;
    use crate::checks::Verdict;
    use crate::plan::ActionKind;
    use WriteOp::*;
    use WriteOutcome::*;

    fn judge(events: Vec<At>) -> CheckResult {
        let (history, model) = with_model(events);
        check(&history, &model, 0, 5.0)
    }

    /// `write` (refused) with the cloud's error `code`.
    fn with_code(mut event: At, code: &str) -> At {
        write_mut(&mut event).refusal = Some(code.into());
        event
    }

    fn refused(t: f64, op: WriteOp, account: u64, other: u64, code: &str) -> At {
        with_code(friend(t, op, account, other, Refused), code)
    }

    /// 3 and 4 friends, 1 asked 2 at 1 s (still open), and the final reads saying so.
    fn friends_3_4_and_a_request_of_1_to_2() -> Vec<At> {
        vec![
            befriend(0.5, 3, 4),
            friend(1.0, FriendRequest, 1, 2, Ok),
            Final::default()
                .list(1, &[], &[])
                .list(2, &[], &[])
                .list(3, &[4], &[])
                .list(4, &[3], &[])
                .at(100.0),
        ]
    }

    #[test]
    fn a_refusal_must_be_the_one_the_model_gives() {
        let base = friends_3_4_and_a_request_of_1_to_2;
        // The request was surely open: its accept may not be refused as not found.
        let mut wrong = base();
        wrong.push(refused(5.0, FriendAccept, 2, 1, "not_found"));
        let result = judge(wrong);
        assert_eq!(result.result, Verdict::Fail, "{}", result.detail);
        assert!(
            result
                .detail
                .contains("friend_accept of 2 about 1 refused not_found at 5s"),
            "{}",
            result.detail
        );
        // Cancelled while the accept was under way: either answer is right.
        let mut raced = base();
        raced.push(friend(5.0, FriendCancel, 1, 2, Ok));
        raced.push(refused(5.05, FriendAccept, 2, 1, "not_found"));
        let result = judge(raced);
        assert_eq!(result.result, Verdict::Pass, "{}", result.detail);
        assert!(
            result.detail.contains("1 refusals judged"),
            "{}",
            result.detail
        );
        // Asking again is `already_requested`, rightly; `already_friends` is wrong.
        let mut again = base();
        again.push(refused(5.0, FriendRequest, 1, 2, "already_requested"));
        assert_eq!(judge(again).result, Verdict::Pass);
        let mut not_friends = base();
        not_friends.push(refused(5.0, FriendRequest, 1, 2, "already_friends"));
        assert_eq!(judge(not_friends).result, Verdict::Fail);
        // A limit is not judged when the history does not say which.
        let mut limit = base();
        limit.push(refused(5.0, FriendRequest, 1, 3, "limit_reached"));
        let result = judge(limit);
        assert_eq!(result.result, Verdict::Pass, "{}", result.detail);
        assert!(result.detail.contains("(1 not:"), "{}", result.detail);
    }

    #[test]
    fn a_limit_is_reached_only_when_one_may_stand_and_the_daily_one_holds() {
        let limits = (
            0.0,
            Event::FriendLimits(crate::events::FriendLimits {
                max_friends: 2,
                max_outgoing: 5,
                daily_requests_new: 3,
            }),
        );
        // 1 and 2 are friends; the final reads show 1's friends, 2 and `more`.
        let run_with = |more: &[u64], extra: Vec<At>| {
            let friends: Vec<u64> = [2].iter().chain(more).copied().collect();
            let mut events = vec![
                limits.clone(),
                befriend(0.5, 1, 2),
                Final::default().list(1, &friends, &[]).at(100.0),
            ];
            events.extend(extra);
            judge(events)
        };
        let run = |extra| run_with(&[], extra);
        let asked = |n: u64| -> Vec<At> {
            (0..n)
                .map(|i| friend(1.0 + i as f64, FriendRequest, 1, 10 + i, Ok))
                .collect()
        };
        // Three opened: the fourth is refused, rightly; let through, it is wrong.
        let mut fourth = asked(3);
        fourth.push(refused(5.0, FriendRequest, 1, 20, "limit_reached"));
        let result = run(fourth);
        assert_eq!(result.result, Verdict::Pass, "{}", result.detail);
        let mut through = asked(3);
        through.push(friend(5.0, FriendRequest, 1, 20, Ok));
        let result = run(through);
        assert_eq!(result.result, Verdict::Fail, "{}", result.detail);
        assert!(
            result.detail.contains("opened past the daily limit"),
            "{}",
            result.detail
        );
        // Two opened, one friend: no limit stands.
        let mut early = asked(2);
        early.push(refused(5.0, FriendRequest, 1, 20, "limit_reached"));
        assert_eq!(run(early).result, Verdict::Fail);
        // A request that met the other's opens none and counts none.
        let mut met = asked(2);
        met.push(request_befriending(4.0, 1, 30, Ok));
        met.push(friend(5.0, FriendRequest, 1, 20, Ok));
        let result = run_with(&[30], met);
        assert_eq!(result.result, Verdict::Pass, "{}", result.detail);
        // An accept: refused only when a side may hold its most friends.
        let mut full = vec![befriend(1.5, 1, 3)];
        full.push(friend(2.0, FriendRequest, 4, 1, Ok));
        full.push(refused(3.0, FriendAccept, 1, 4, "limit_reached"));
        let result = run_with(&[3], full);
        assert_eq!(result.result, Verdict::Pass, "{}", result.detail);
        let mut room = vec![friend(2.0, FriendRequest, 4, 1, Ok)];
        room.push(refused(3.0, FriendAccept, 1, 4, "limit_reached"));
        assert_eq!(run(room).result, Verdict::Fail);
    }

    #[test]
    fn a_party_refuses_a_join_only_as_the_model_says() {
        // 1 leads session 9 of three seats, 2 has joined; 1 is friends with 2, 3 and 4.
        let party = |extra: Vec<At>| {
            let mut events = vec![
                befriend(0.5, 1, 2),
                befriend(0.5, 1, 3),
                befriend(0.5, 1, 4),
                session_write(1.0, SessionCreate, 1, "9", Ok),
                session_view(1.0, view(1, "9", 1, &[1], 3)),
                session_write(2.0, SessionJoin, 2, "9", Ok),
                Final::default()
                    .list(1, &[2, 3, 4], &[])
                    .list(2, &[1], &[])
                    .list(3, &[1], &[])
                    .list(4, &[1], &[])
                    .at(100.0),
            ];
            events.extend(extra);
            judge(events).result
        };
        let refused_join = |t, account, code: &str| {
            with_code(session_write(t, SessionJoin, account, "9", Refused), code)
        };
        // A seat is free: full is wrong; with 3 in, it is right.
        assert_eq!(
            party(vec![refused_join(5.0, 4, "session_full")]),
            Verdict::Fail
        );
        assert_eq!(
            party(vec![
                session_write(3.0, SessionJoin, 3, "9", Ok),
                refused_join(5.0, 4, "session_full"),
            ]),
            Verdict::Pass
        );
        // A friend of the leader, no block: not allowed is wrong; a member's block, or no
        // friendship with the leader, makes it right.
        assert_eq!(
            party(vec![refused_join(5.0, 3, "not_allowed")]),
            Verdict::Fail
        );
        assert_eq!(
            party(vec![
                friend(4.0, Block, 2, 3, Ok),
                refused_join(5.0, 3, "not_allowed"),
            ]),
            Verdict::Pass
        );
        assert_eq!(
            party(vec![refused_join(5.0, 5, "not_allowed")]),
            Verdict::Pass
        );
        // The leader left and came back: someone else leads, not judged.
        assert_eq!(
            party(vec![
                session_write(3.0, SessionLeave, 1, "9", Ok),
                session_write(4.0, SessionJoin, 1, "9", Ok),
                refused_join(5.0, 3, "not_allowed"),
            ]),
            Verdict::Pass
        );
        // A standing session is found; a gone one may not be.
        assert_eq!(
            party(vec![refused_join(5.0, 3, "not_found")]),
            Verdict::Fail
        );
        assert_eq!(
            party(vec![
                session_write(3.0, SessionLeave, 2, "9", Ok),
                session_write(4.0, SessionLeave, 1, "9", Ok),
                refused_join(5.0, 3, "not_found"),
            ]),
            Verdict::Pass
        );
        // Only a member of some session is in one already.
        assert_eq!(
            party(vec![refused_join(5.0, 3, "already_in_session")]),
            Verdict::Fail
        );
        assert_eq!(
            party(vec![refused_join(5.0, 2, "already_in_session")]),
            Verdict::Pass
        );
        // A create of unknown outcome may have made a session nobody heard of.
        let mut unknown_create = session_write(3.0, SessionCreate, 3, "-", Unknown);
        write_mut(&mut unknown_create).session = None;
        assert_eq!(
            party(vec![
                unknown_create,
                refused_join(5.0, 3, "already_in_session")
            ]),
            Verdict::Pass
        );
    }

    #[test]
    fn a_request_answered_ok_between_friends_or_while_it_stood_is_wrong() {
        let base = friends_3_4_and_a_request_of_1_to_2;
        let judged = |extra: At| {
            let mut events = base();
            events.push(extra);
            judge(events)
        };
        let twice = judged(friend(5.0, FriendRequest, 1, 2, Ok));
        assert_eq!(twice.result, Verdict::Fail, "{}", twice.detail);
        assert!(
            twice
                .detail
                .contains("friend_request of 1 about 2 answered ok while its request stood at 5s"),
            "{}",
            twice.detail
        );
        let friends = judged(friend(5.0, FriendRequest, 3, 4, Ok));
        assert_eq!(friends.result, Verdict::Fail, "{}", friends.detail);
        assert!(friends.detail.contains("answered ok between friends"));
        // The other side asking back is an accept (`200 friends`); so is a request once
        // the first was cancelled.
        let back = judged(request_befriending(5.0, 2, 1, Ok));
        assert_eq!(back.result, Verdict::Fail, "{}", back.detail);
        assert!(!back.detail.contains("answered ok"), "{}", back.detail);
        let mut anew = base();
        anew.push(friend(3.0, FriendCancel, 1, 2, Ok));
        anew.push(friend(5.0, FriendRequest, 1, 2, Ok));
        let anew = judge(anew);
        assert!(!anew.detail.contains("answered ok"), "{}", anew.detail);
    }

    #[test]
    fn a_removal_answered_ok_with_nothing_to_remove_is_wrong() {
        let judged = |extra: Vec<At>| {
            let mut events = vec![
                befriend(0.5, 3, 4),
                friend(1.0, FriendRequest, 1, 2, Ok),
                session_write(1.5, SessionCreate, 3, "9", Ok),
            ];
            events.extend(extra);
            events.push(
                Final::default()
                    .list(1, &[], &[])
                    .list(2, &[], &[])
                    .list(3, &[], &[])
                    .list(4, &[], &[])
                    .member(3, "9", true, None)
                    .at(100.0),
            );
            judge(events)
        };
        let cancelled = || friend(3.0, FriendCancel, 1, 2, Ok);
        let unfriended = || friend(3.0, Unfriend, 3, 4, Ok);
        // Each once, as it stood: right.
        let once = judged(vec![cancelled(), unfriended()]);
        assert_eq!(once.result, Verdict::Pass, "{}", once.detail);
        for (extra, says) in [
            (
                vec![cancelled(), friend(5.0, FriendCancel, 1, 2, Ok)],
                "friend_cancel of 1 about 2 answered ok with no request of its own open at 5s",
            ),
            (
                vec![cancelled(), friend(5.0, FriendDecline, 2, 1, Ok)],
                "friend_decline of 2 about 1 answered ok with no request of theirs open",
            ),
            (
                vec![unfriended(), friend(5.0, Unfriend, 4, 3, Ok)],
                "unfriend of 4 about 3 answered ok with no friendship",
            ),
            (
                vec![friend(5.0, Unblock, 1, 2, Ok)],
                "unblock of 1 about 2 answered ok with no block",
            ),
            (
                vec![session_write(5.0, SessionJoin, 1, "9", Ok)],
                "session_join of 1 about 9 answered ok by a stranger to its leader",
            ),
        ] {
            let result = judged(extra);
            assert_eq!(result.result, Verdict::Fail, "{}", result.detail);
            assert!(result.detail.contains(says), "{}", result.detail);
        }
        // In flight with what made it: either answer is right.
        let raced = judged(vec![friend(3.0, FriendCancel, 1, 2, Ok), {
            let mut event = friend(3.05, FriendDecline, 2, 1, Ok);
            write_mut(&mut event).sent = 2.9;
            event
        }]);
        assert!(!raced.detail.contains("answered ok"), "{}", raced.detail);
    }

    #[test]
    fn a_block_is_answered_404_to_the_blocked_and_403_to_the_blocker() {
        let blocked = || {
            vec![
                befriend(0.5, 1, 2),
                friend(2.0, Block, 1, 2, Ok),
                Final::default()
                    .list(1, &[], &[])
                    .list(2, &[], &[])
                    .at(100.0),
            ]
        };
        let mut right = blocked();
        right.push(refused(3.0, FriendRequest, 2, 1, "not_found"));
        right.push(refused(3.0, FriendRequest, 1, 2, "blocked"));
        let result = judge(right);
        assert_eq!(result.result, Verdict::Pass, "{}", result.detail);
        assert!(
            result.detail.contains("2 refusals judged"),
            "{}",
            result.detail
        );
        // The two answers swapped: both wrong.
        let mut swapped = blocked();
        swapped.push(refused(3.0, FriendRequest, 2, 1, "blocked"));
        swapped.push(refused(3.0, FriendRequest, 1, 2, "not_found"));
        let result = judge(swapped);
        assert_eq!(result.value, Some(Quantity::Count(2)), "{}", result.detail);
        // A request through the block, answered ok: wrong.
        let mut through = blocked();
        through.push(friend(3.0, FriendRequest, 2, 1, Ok));
        let result = judge(through);
        assert_eq!(result.result, Verdict::Fail, "{}", result.detail);
        assert!(
            result.detail.contains("through a block"),
            "{}",
            result.detail
        );
        // The block ended the friendship: a final read still showing it lost the block.
        let mut kept = blocked();
        kept.pop();
        kept.push(
            Final::default()
                .list(1, &[2], &[])
                .list(2, &[1], &[])
                .at(100.0),
        );
        assert_eq!(judge(kept).result, Verdict::Fail);
        // An unblock of a block that surely stood may not be refused.
        let mut unblock = blocked();
        unblock.push(refused(5.0, Unblock, 1, 2, "not_found"));
        assert_eq!(judge(unblock).result, Verdict::Fail);
    }

    #[test]
    fn a_logout_revokes_the_refresh_token_and_closes_the_connection() {
        let base = || {
            vec![
                befriend(0.5, 1, 2),
                welcome(1.0, 1, 1, "node-1"),
                Final::default()
                    .list(1, &[2], &[])
                    .list(2, &[1], &[])
                    .at(100.0),
            ]
        };
        let mut right = base();
        right.push(logout(5.0, 1, Ok, false));
        right.push(closed(
            5.01,
            1,
            1,
            Some(4003),
            crate::events::CloseCause::CloseFrame,
        ));
        let result = judge(right);
        assert_eq!(result.result, Verdict::Pass, "{}", result.detail);
        assert!(
            result.detail.contains("1 logouts judged"),
            "{}",
            result.detail
        );
        let mut stale = base();
        stale.push(logout(5.0, 1, Ok, true));
        stale.push(closed(
            5.01,
            1,
            1,
            Some(4003),
            crate::events::CloseCause::CloseFrame,
        ));
        let result = judge(stale);
        assert!(
            result.detail.contains("refresh token still taken"),
            "{}",
            result.detail
        );
        let mut open = base();
        open.push(logout(5.0, 1, Ok, false));
        let result = judge(open);
        assert!(result.detail.contains("still open"), "{}", result.detail);
        // A link cut meanwhile may hold the close: not judged.
        let mut cut = base();
        cut.push(logout(5.0, 1, Ok, false));
        cut.extend(crate::checks::testing::action(
            4.0,
            20.0,
            crate::plan::ActionKind::Partition,
            "players<->node-1",
        ));
        assert_eq!(judge(cut).result, Verdict::Pass);
    }

    #[test]
    fn writes_kept_and_undone_pass() {
        let result = judge(vec![
            befriend(1.0, 1, 2),
            request_befriending(2.0, 1, 3, Ok),
            friend(3.0, Unfriend, 3, 1, Ok),
            // A pending request is no friendship.
            friend(3.5, FriendRequest, 1, 4, Ok),
            session_write(4.0, SessionCreate, 1, "9", Ok),
            session_write(5.0, SessionJoin, 2, "9", Ok),
            session_write(6.0, SessionLeave, 2, "9", Ok),
            Final::default()
                .list(1, &[2], &[])
                .list(2, &[1], &[])
                .list(3, &[], &[])
                .list(4, &[], &[])
                .member(1, "9", true, None)
                .member(2, "9", false, None)
                .at(100.0),
        ]);
        assert_eq!(result.result, Verdict::Pass, "{result:?}");
        assert!(
            result
                .detail
                .contains("2 of 2 pairs and 2 of 2 memberships"),
            "{}",
            result.detail
        );
        assert!(
            result.detail.contains("friend_request 3/0/0"),
            "{}",
            result.detail
        );
    }

    #[test]
    fn a_lost_friendship_an_undone_unfriend_and_a_lost_leave_fail() {
        let result = judge(vec![
            befriend(1.0, 1, 2),
            befriend(1.0, 3, 4),
            friend(2.0, Unfriend, 4, 3, Ok),
            session_write(4.0, SessionJoin, 1, "9", Ok),
            session_write(5.0, SessionLeave, 1, "9", Ok),
            Final::default()
                .list(1, &[], &[])
                .list(2, &[], &[])
                .list(3, &[4], &[])
                .list(4, &[3], &[])
                .member(1, "9", true, None)
                .at(100.0),
        ]);
        assert_eq!(result.result, Verdict::Fail);
        assert_eq!(result.value, Some(Quantity::Count(3)));
        assert!(
            result.detail.contains("friends 1-2 gone"),
            "{}",
            result.detail
        );
        assert!(
            result.detail.contains("friends 3-4 present"),
            "{}",
            result.detail
        );
    }

    #[test]
    fn a_friendship_one_side_lists_is_half_and_lost_even_after_an_unknown_write() {
        let result = judge(vec![
            friend(1.0, FriendAccept, 1, 2, Unknown),
            Final::default()
                .list(1, &[2], &[])
                .list(2, &[], &[])
                .at(100.0),
        ]);
        assert_eq!(result.result, Verdict::Fail);
        assert!(
            result.detail.contains("friends 1-2 half"),
            "{}",
            result.detail
        );
    }

    #[test]
    fn an_unknown_write_may_show_either_way_and_a_refused_one_changes_nothing() {
        let result = judge(vec![
            befriend(1.0, 1, 2),
            friend(2.0, Unfriend, 1, 2, Unknown),
            friend(3.0, FriendAccept, 3, 4, Unknown),
            friend(4.0, FriendAccept, 5, 6, Refused),
            session_write(5.0, SessionJoin, 1, "9", Unknown),
            Final::default()
                .list(1, &[], &[])
                .list(2, &[], &[])
                .list(3, &[4], &[])
                .list(4, &[3], &[])
                .list(5, &[], &[])
                .member(1, "9", false, None)
                .at(100.0),
        ]);
        assert_eq!(result.result, Verdict::Pass, "{result:?}");
        // A refused accept that shows up at the end was not refused after all.
        let result = judge(vec![
            friend(4.0, FriendAccept, 5, 6, Refused),
            Final::default()
                .list(5, &[6], &[])
                .list(6, &[5], &[])
                .at(100.0),
        ]);
        assert_eq!(result.result, Verdict::Fail);
    }

    #[test]
    fn two_ok_writes_in_flight_together_may_land_in_either_order() {
        let mut overlapping = befriend(5.0, 1, 2);
        write_mut(&mut overlapping).sent = 4.0;
        let events = vec![
            friend(4.5, Unfriend, 2, 1, Ok),
            overlapping,
            Final::default()
                .list(1, &[], &[])
                .list(2, &[], &[])
                .at(100.0),
        ];
        let result = judge(events.clone());
        assert_eq!(result.result, Verdict::Pass, "{result:?}");
        // One after the other, the later one decides.
        let mut after = events;
        after[1] = befriend(5.0, 1, 2);
        assert_eq!(judge(after).result, Verdict::Fail);
    }

    #[test]
    fn writes_in_fault_windows_are_counted_and_unread_pairs_not_judged() {
        let mut events = action(10.0, 10.0, ActionKind::Kill, "node-1");
        events.extend([
            befriend(12.0, 1, 2),
            befriend(30.0, 3, 4),
            Final::default().list(1, &[2], &[]).at(100.0),
        ]);
        let result = judge(events);
        assert_eq!(result.result, Verdict::Pass, "{result:?}");
        assert!(
            result.detail.contains("1 in fault windows"),
            "{}",
            result.detail
        );
        assert!(result.detail.contains("1 of 2 pairs"), "{}", result.detail);
    }

    #[test]
    fn writes_without_final_reads_or_no_writes_at_all_are_unknown() {
        let result = judge(vec![befriend(1.0, 1, 2)]);
        assert_eq!(result.result, Verdict::Unknown);
        assert!(
            result.detail.contains("no final reads"),
            "{}",
            result.detail
        );
        let result = judge(vec![Final::default().list(1, &[], &[]).at(100.0)]);
        assert_eq!(result.result, Verdict::Unknown);
        let result = judge(vec![befriend(1.0, 1, 2), Final::default().at(100.0)]);
        assert_eq!(result.result, Verdict::Unknown);
    }
}
