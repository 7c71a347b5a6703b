//! events_missing: every change a write makes is owed, as its event, to whom the contract
//! names (chaos-plan v1.2); `presence_missing` judges activity changes, this the rest:
//!
//! - an accept, or a request the other side had already asked: `friend_accepted` of the
//!   writer to the other; an unfriend, or a block of a surely standing friendship:
//!   `friend_removed`; a decline: `friend_request_declined`; a cancel:
//!   `friend_request_cancelled`;
//! - a join or a leave: `session_member_joined` or `session_member_left` of the writer to
//!   every other member, that is every account the model shows surely a member of that
//!   session from the write's send until its window ended; and when the leaver surely led
//!   (every staying member surely joined after it) and nobody came or went meanwhile,
//!   `session_leader_changed` naming the longest-standing staying member (any of those
//!   whose joins raced to be first) to each of them;
//! - going online or offline ([`going_online`]): `presence` of the account with that
//!   `online`, to every account the model shows surely its friend all through the window.
//!
//! Owed as presence is: a recipient whose connection stayed up must get the event on it,
//! from the write's send until the window (3 s after the answer) ends, or later when a
//! fault that only slows the event's path held until then; a fault that loses data by
//! nature on that path excuses it. A recipient whose connection broke is owed a made or
//! removed friendship by the resync after its next welcome. The path runs from the node
//! the writer was connected to; a writer with no connection then is not judged, nor is an
//! event whose sender node was SIGKILLed as it answered.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use super::conns::Conns;
use super::fault_table::{self, fmt_num, Fault};
use super::going_online::{self, StateChange};
use super::model::{self, Model, Relation};
use super::paths::{self, Owed};
use super::presence::DELIVERY_WINDOW;
use super::{some, CheckResult, Quantity};
use crate::events::{History, PlayerFact, Write, WriteOp, WriteOutcome};
use crate::plan::ActionKind;

pub const NAME: &str = "events_missing";

/// How long before its answer a write's fan-out may already be under way (a SIGKILL then
/// may take it with the node).
const FAN_OUT: f64 = 0.5;

/// One event a write owes one recipient.
#[derive(Debug, Clone, PartialEq)]
struct Owing {
    kind: &'static str,
    to: u64,
    /// Whose event it may be: the writer's, or a leader's any of the members that may
    /// have taken over.
    about: Vec<u64>,
    /// The friendship it makes (`Some(true)`) or removes, for a resync to show.
    friends: Option<bool>,
}

/// The events `w` (ok) owes, to whom.
fn owings(w: &Write, model: &Model, t: f64) -> Vec<Owing> {
    let friend = |kind, friends| {
        w.other()
            .map(|to| Owing {
                kind,
                to,
                about: vec![w.account],
                friends,
            })
            .into_iter()
            .collect()
    };
    match w.op {
        WriteOp::FriendAccept => friend("friend_accepted", Some(true)),
        WriteOp::FriendRequest if w.befriended => friend("friend_accepted", Some(true)),
        WriteOp::Unfriend => friend("friend_removed", Some(false)),
        // A block tells the blocked only that a friendship ended, when there was one.
        WriteOp::Block
            if w.other().is_some_and(|other| {
                model.surely_held(&Relation::friends(w.account, other), w.sent, w.sent)
            }) =>
        {
            friend("friend_removed", Some(false))
        }
        WriteOp::FriendDecline => friend("friend_request_declined", None),
        WriteOp::FriendCancel => friend("friend_request_cancelled", None),
        WriteOp::SessionJoin | WriteOp::SessionLeave => {
            let Some(session) = w.session() else {
                return Vec::new();
            };
            let kind = if w.op == WriteOp::SessionJoin {
                "session_member_joined"
            } else {
                "session_member_left"
            };
            let staying = Staying::of(w, session, model, t);
            let mut owed: Vec<Owing> = staying
                .members
                .iter()
                .map(|&(to, _)| Owing {
                    kind,
                    to,
                    about: vec![w.account],
                    friends: None,
                })
                .collect();
            if w.op == WriteOp::SessionLeave {
                if let Some(heirs) = staying.heirs() {
                    owed.extend(staying.members.iter().map(|&(to, _)| Owing {
                        kind: "session_leader_changed",
                        to,
                        about: heirs.clone(),
                        friends: None,
                    }));
                }
            }
            owed
        }
        WriteOp::FriendRequest
        | WriteOp::SessionCreate
        | WriteOp::Block
        | WriteOp::Unblock
        | WriteOp::SetPrivacy => Vec::new(),
    }
}

/// The other members of a session around a join or a leave, as the model knows them.
struct Staying {
    /// Each account surely a member from the write's send until its window ended, in id
    /// order, with its membership's [`Model::standing`] at the send.
    members: Vec<(u64, (f64, f64))>,
    /// The writer's own standing then, when it surely was a member.
    writer: Option<(f64, f64)>,
    /// Whether every other member then is among `members`: none joined or left meanwhile.
    settled: bool,
}

impl Staying {
    fn of(w: &Write, session: &str, model: &Model, t: f64) -> Staying {
        let until = t + DELIVERY_WINDOW;
        let of = |m| Relation::Member(m, session.to_owned());
        let mut staying = Staying {
            members: Vec::new(),
            writer: model.standing(&of(w.account), w.sent),
            settled: true,
        };
        for m in model.members(session) {
            if m == w.account {
                continue;
            }
            let membership = of(m);
            if model.surely_held(&membership, w.sent, until) {
                let standing = model.standing(&membership, w.sent);
                staying
                    .members
                    .push((m, standing.expect("surely held at the send")));
            } else if model.may_hold(&membership, w.sent, until) {
                staying.settled = false;
            }
        }
        staying
    }

    /// Who a leaving leader hands leadership to: the members that no other staying member
    /// surely joined before (several when their joins raced). `None` when the leaver did not
    /// surely lead (some staying member may have joined first), nobody stays, or members
    /// came and went meanwhile.
    fn heirs(&self) -> Option<Vec<u64>> {
        // Surely earlier: answered before the other was sent.
        let before = |a: (f64, f64), b: (f64, f64)| a.1 < b.0;
        let writer = self.writer?;
        if !self.settled
            || self.members.is_empty()
            || !self.members.iter().all(|&(_, s)| before(writer, s))
        {
            return None;
        }
        let heirs = self
            .members
            .iter()
            .filter(|&&(_, s)| !self.members.iter().any(|&(_, o)| before(o, s)))
            .map(|&(m, _)| m)
            .collect();
        Some(heirs)
    }
}

#[derive(Debug, Default)]
struct Tally {
    /// Per kind: judged by event.
    by_event: BTreeMap<&'static str, u64>,
    by_resync: u64,
    crossed: u64,
    slowed: u64,
    missing: Vec<String>,
    lost_on_path: u64,
    no_writer_node: u64,
    died_with_origin: u64,
    not_judged_broken: u64,
    tail: u64,
}

pub fn check(history: &History, model: &Model, limit: u64) -> CheckResult {
    let limit_q = Quantity::Count(limit);
    let end = history.end();
    let conns = Conns::of(history);
    let faults = fault_table::faults(history);
    // Per (connection, kind, about, session): arrival times.
    let mut arrivals: HashMap<(u64, &str, u64, Option<&str>), Vec<f64>> = HashMap::new();
    // Per connection: when its resync was sent and answered, and which friends it listed.
    let mut resyncs: HashMap<u64, Resync> = HashMap::new();
    let mut states = States::new();
    let mut views = Views::new();
    // Whoever was ever befriended may be owed a change of the other's state.
    // In account order, so that a detail names the same examples on every reading.
    let mut friends_of: HashMap<u64, BTreeSet<u64>> = HashMap::new();
    for (t, account, fact) in history.facts() {
        match fact {
            PlayerFact::Write(fact) => {
                let w = Write { account, fact };
                if let (Some(other), Some(true)) = (w.other(), model::effect(&w)) {
                    friends_of.entry(account).or_default().insert(other);
                    friends_of.entry(other).or_default().insert(account);
                }
            }
            PlayerFact::Received { conn, event } => {
                if let Some((about, _, online)) = event.presence {
                    states
                        .entry((*conn, about.0))
                        .or_default()
                        .push((t, online));
                    views
                        .entry((account, about.0))
                        .or_default()
                        .push((t, online));
                    arrivals
                        .entry((*conn, "presence", about.0, None))
                        .or_default()
                        .push(t);
                } else if let Some(about) = event.about {
                    let session = event.session.as_ref().map(|s| s.0.as_str());
                    arrivals
                        .entry((*conn, event.kind.as_str(), about.0, session))
                        .or_default()
                        .push(t);
                }
            }
            PlayerFact::Resync {
                conn,
                sent,
                friends,
            } => {
                for &(friend, online, _) in friends {
                    views
                        .entry((account, friend.0))
                        .or_default()
                        .push((t, online));
                }
                let listed = friends.iter().map(|f| f.0 .0).collect();
                resyncs.entry(*conn).or_insert(Resync {
                    sent: *sent,
                    answered: t,
                    listed,
                });
            }
            _ => {}
        }
    }
    let mut tally = Tally::default();
    let cx = Context {
        conns: &conns,
        faults: &faults,
        arrivals: &arrivals,
        resyncs: &resyncs,
        model,
    };
    for (t, w) in history.writes() {
        if w.outcome != WriteOutcome::Ok {
            continue;
        }
        for owing in owings(&w, model, t) {
            let j = Judged {
                w: &w,
                t,
                owing: &owing,
                end,
            };
            judge(&j, &cx, &mut tally);
        }
    }
    let none = BTreeSet::new();
    let told = Told {
        states: &states,
        views: &views,
        end,
    };
    for change in going_online::changes(&conns, &super::outages::states(history)) {
        let friends = friends_of.get(&change.account).unwrap_or(&none);
        judge_state(&change, friends, &told, &cx, &mut tally);
    }
    let judged: u64 = tally.by_event.values().sum::<u64>() + tally.by_resync;
    let kinds = tally
        .by_event
        .iter()
        .map(|(kind, n)| format!("{kind} {n}"))
        .collect::<Vec<_>>()
        .join(", ");
    let mut detail = format!(
        "{judged} events owed judged ({} by event: {}; {} by resync), {} crossed nodes, {} owed \
         later by a fault that slowed their path",
        judged - tally.by_resync,
        if kinds.is_empty() { "none" } else { &kinds },
        tally.by_resync,
        tally.crossed,
        tally.slowed
    );
    let count = tally.missing.len() as u64;
    if count > 0 {
        detail.push_str(&format!("; {count} missing ({})", some(&tally.missing, 4)));
    }
    detail.push_str(&super::not_judged([
        (tally.tail, "owed after the history ends"),
        (
            tally.lost_on_path,
            "with a fault that loses data on their path",
        ),
        (tally.no_writer_node, "of writers with no connection"),
        (
            tally.died_with_origin,
            "from a node SIGKILLed as it answered",
        ),
        (
            tally.not_judged_broken,
            "to a broken connection that no resync tells",
        ),
    ]));
    if judged == 0 {
        return CheckResult::unknown(NAME, limit_q, format!("nothing to judge: {detail}"));
    }
    CheckResult::count(NAME, limit, count, detail)
}

/// Each (connection, account) pair's presence events: when, and the `online` they said.
type States = HashMap<(u64, u64), Vec<(f64, bool)>>;

/// What each (recipient, account) pair was told of the account's online state, by events and
/// resyncs, in history order: when, and the `online` said.
type Views = HashMap<(u64, u64), Vec<(f64, bool)>>;

/// Whether `to` last heard `about` in the other state than `online` before `t`: only then
/// is the change news to it (a friend that never heard the account go offline, say
/// because the cloud could not record the close across a fault, sees it online already).
fn is_news(views: &Views, to: u64, about: u64, online: bool, t: f64) -> bool {
    views
        .get(&(to, about))
        .and_then(|v| v.iter().take_while(|(at, _)| *at < t).last())
        .is_some_and(|&(_, was)| was != online)
}

/// What the owed state changes are judged by, beside the [`Context`].
struct Told<'a> {
    states: &'a States,
    views: &'a Views,
    end: f64,
}

/// Judges one state change owed to each friend of its account.
fn judge_state(
    change: &StateChange<'_>,
    friends: &BTreeSet<u64>,
    told: &Told<'_>,
    cx: &Context<'_>,
    tally: &mut Tally,
) {
    let Told { states, views, end } = *told;
    let kind = if change.online { "online" } else { "offline" };
    let heard_before = if change.online {
        change.since
    } else {
        change.at
    };
    for &to in friends {
        if !is_news(views, to, change.account, change.online, heard_before) {
            continue;
        }
        let Some(conn) = cx.conns.up_at(to, change.at) else {
            continue;
        };
        let owed = Owed::on(
            cx.faults,
            &change.path(&conn.node),
            change.at,
            change.at + DELIVERY_WINDOW,
        )
        .slowed_on(conn, change.at);
        if owed.by > end {
            tally.tail += 1;
            continue;
        }
        // Changed back meanwhile: only the latest state is owed.
        if change.undone.is_some_and(|u| u <= owed.by)
            || !cx
                .model
                .surely_held(&Relation::friends(change.account, to), change.at, owed.by)
        {
            continue;
        }
        let dies = cx.faults.iter().any(|f| {
            f.action == ActionKind::Kill
                && f.target == change.node
                && f.start - FAN_OUT <= owed.by
                && change.at <= f.end + FAN_OUT
        });
        if dies {
            tally.died_with_origin += 1;
            continue;
        }
        let broke = conn.closed_by(owed.by)
            || cx
                .conns
                .next_after(to, change.at)
                .is_some_and(|n| n.welcomed <= owed.by);
        if broke {
            tally.not_judged_broken += 1;
            continue;
        }
        if owed.lost {
            tally.lost_on_path += 1;
            continue;
        }
        *tally.by_event.entry(kind).or_default() += 1;
        tally.crossed += u64::from(change.node != conn.node);
        tally.slowed += u64::from(owed.by > change.at + DELIVERY_WINDOW);
        let times = states
            .get(&(conn.id, change.account))
            .map_or(&[][..], Vec::as_slice);
        let told = |t: f64, online: bool| online == change.online && t >= change.since;
        if !times.iter().any(|&(t, on)| told(t, on) && t <= owed.by) {
            let late = times.iter().any(|&(t, on)| told(t, on) && t > owed.by);
            tally.missing.push(format!(
                "{kind} of {} → {to} at {}s ({})",
                change.account,
                fmt_num(change.at),
                if late { "late" } else { "never" }
            ));
        }
    }
}

/// What the judging of one owed event reads.
struct Context<'a> {
    conns: &'a Conns,
    faults: &'a [Fault],
    arrivals: &'a HashMap<(u64, &'a str, u64, Option<&'a str>), Vec<f64>>,
    resyncs: &'a HashMap<u64, Resync>,
    model: &'a Model,
}

/// The `GET /v1/friends` after a welcome.
struct Resync {
    sent: f64,
    answered: f64,
    listed: HashSet<u64>,
}

/// One owed event and the write that owes it.
struct Judged<'a> {
    w: &'a Write<'a>,
    t: f64,
    owing: &'a Owing,
    end: f64,
}

fn judge(j: &Judged<'_>, cx: &Context<'_>, tally: &mut Tally) {
    let Context {
        conns,
        faults,
        arrivals,
        resyncs,
        model,
    } = cx;
    let (w, owing) = (j.w, j.owing);
    // Offline when it was sent: owed nothing.
    let Some(conn) = conns.up_at(owing.to, w.sent) else {
        return;
    };
    let Some(sender) = conns.up_at(w.account, w.sent).map(|c| c.node.as_str()) else {
        tally.no_writer_node += 1;
        return;
    };
    let owed = Owed::on(
        faults,
        &paths::delivery(sender, &conn.node),
        w.sent,
        j.t + DELIVERY_WINDOW,
    )
    .slowed_on(conn, w.sent);
    // Answered just before its node's SIGKILL: the fan-out to other nodes follows the
    // answer and dies with it.
    let dies = sender != conn.node
        && faults.iter().any(|f| {
            f.action == ActionKind::Kill
                && f.target == sender
                && f.start - FAN_OUT <= j.t
                && j.t <= f.end + FAN_OUT
        });
    if dies {
        tally.died_with_origin += 1;
        return;
    }
    if owed.by > j.end {
        tally.tail += 1;
        return;
    }
    let next = conns.next_after(owing.to, w.sent);
    let broke = conn.closed_by(owed.by) || next.is_some_and(|n| n.welcomed <= owed.by);
    let label = || {
        let session = w
            .session
            .as_ref()
            .map_or(String::new(), |s| format!(" in session {s}"));
        let about = owing.about.iter().map(u64::to_string).collect::<Vec<_>>();
        format!(
            "{} of {}{session} → {} at {}s",
            owing.kind,
            about.join(" or "),
            owing.to,
            fmt_num(j.t)
        )
    };
    if !broke {
        if owed.lost {
            tally.lost_on_path += 1;
            return;
        }
        *tally.by_event.entry(owing.kind).or_default() += 1;
        tally.crossed += u64::from(sender != conn.node);
        tally.slowed += u64::from(owed.by > j.t + DELIVERY_WINDOW);
        let times = || {
            owing.about.iter().flat_map(|&about| {
                let key = (conn.id, owing.kind, about, w.session());
                arrivals.get(&key).into_iter().flatten().copied()
            })
        };
        if !times().any(|a| a >= w.sent && a <= owed.by) {
            let late = times().any(|a| a > owed.by);
            tally.missing.push(format!(
                "{} ({})",
                label(),
                if late { "late" } else { "never" }
            ));
        }
        return;
    }
    // Broken: a made or removed friendship shows in the resync after the next welcome,
    // unless a later write may have turned it again by then.
    let resync = next
        .and_then(|n| resyncs.get(&n.id))
        .filter(|r| r.sent > j.t);
    match (owing.friends, resync) {
        (Some(made), Some(r)) => {
            tally.by_resync += 1;
            let pair = Relation::friends(w.account, owing.to);
            let listed = r.listed.contains(&w.account);
            let wrong = if made {
                !listed && model.surely_held(&pair, r.sent, r.answered)
            } else {
                listed && !model.may_hold(&pair, r.sent, r.answered)
            };
            if wrong {
                tally
                    .missing
                    .push(format!("{} (resync disagrees)", label()));
            }
        }
        _ => tally.not_judged_broken += 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::testing::*;
    use crate::checks::Verdict;
    use crate::events::CloseCause;
    use WriteOp::*;
    use WriteOutcome::*;

    /// Players 1, 2, 3 online on node-1 from the start; 1 and 2 friends.
    fn base() -> Vec<At> {
        vec![
            welcome(0.0, 1, 1, "node-1"),
            welcome(0.0, 2, 2, "node-1"),
            welcome(0.0, 3, 3, "node-1"),
            friend(0.2, FriendRequest, 2, 1, Ok),
            end(40.0),
        ]
    }

    /// An event of `kind` about `about` on connection `conn` of `account`.
    fn event(t: f64, account: u64, kind: &str, about: u64, session: Option<&str>) -> At {
        let mut at = received(t, account, account, Some(1));
        let event = received_mut(&mut at);
        event.kind = kind.into();
        event.about = Some(AccountId(about));
        event.session = session.map(|s| SessionId(s.into()));
        at
    }

    fn judge(extra: Vec<At>) -> CheckResult {
        let mut events = base();
        events.extend(extra);
        let (history, model) = with_model(events);
        check(&history, &model, 0)
    }

    #[test]
    fn an_accept_is_owed_to_the_requester_in_its_window() {
        let told = judge(vec![
            befriend(5.0, 1, 2),
            event(5.02, 2, "friend_accepted", 1, None),
        ]);
        assert_eq!(told.result, Verdict::Pass, "{}", told.detail);
        assert!(told.detail.contains("friend_accepted 1"), "{}", told.detail);
        let untold = judge(vec![befriend(5.0, 1, 2)]);
        assert_eq!(untold.result, Verdict::Fail, "{}", untold.detail);
        assert!(
            untold
                .detail
                .contains("friend_accepted of 1 → 2 at 5s (never)"),
            "{}",
            untold.detail
        );
        let late = judge(vec![
            befriend(5.0, 1, 2),
            event(9.0, 2, "friend_accepted", 1, None),
        ]);
        assert_eq!(late.result, Verdict::Fail, "{}", late.detail);
        assert!(late.detail.contains("(late)"), "{}", late.detail);
    }

    /// `about`'s presence with `online` on `account`'s connection.
    fn state(t: f64, account: u64, about: u64, online: bool) -> At {
        let mut at = event(t, account, "presence", about, None);
        let event = received_mut(&mut at);
        event.presence = Some((AccountId(about), 1, online));
        event.about = None;
        at
    }

    #[test]
    fn going_offline_and_online_again_is_owed_to_friends_that_heard_otherwise() {
        let signed_off = |back: f64| {
            vec![
                befriend(2.0, 1, 2),
                event(2.02, 2, "friend_accepted", 1, None),
                // Befriended: each side is told the other's presence.
                state(2.03, 2, 1, true),
                closed(10.0, 1, 1, Some(1000), CloseCause::ClientClose),
                welcome(back, 1, 4, "node-1"),
            ]
        };
        let mut told = signed_off(20.0);
        told.extend([state(10.02, 2, 1, false), state(20.01, 2, 1, true)]);
        let result = judge(told);
        assert_eq!(result.result, Verdict::Pass, "{}", result.detail);
        assert!(result.detail.contains("offline 1"), "{}", result.detail);
        assert!(result.detail.contains("online 1"), "{}", result.detail);
        let mut no_offline = signed_off(20.0);
        no_offline.push(state(20.01, 2, 1, true));
        let result = judge(no_offline);
        assert_eq!(result.result, Verdict::Fail, "{}", result.detail);
        assert!(
            result.detail.contains("offline of 1 → 2 at 10s (never)"),
            "{}",
            result.detail
        );
        let mut no_online = signed_off(20.0);
        no_online.push(state(10.02, 2, 1, false));
        assert_eq!(judge(no_online).result, Verdict::Fail);
        // Back within the window: only the latest state, online, is owed, and 2 has it.
        let mut back = signed_off(11.0);
        back.push(state(11.01, 2, 1, true));
        let result = judge(back);
        assert_eq!(result.result, Verdict::Pass, "{}", result.detail);
        // A break without a close frame: the cloud may not know yet; nothing is owed.
        let silent = vec![
            befriend(2.0, 1, 2),
            event(2.02, 2, "friend_accepted", 1, None),
            closed(10.0, 1, 1, None, CloseCause::NoCloseFrame),
            welcome(20.0, 1, 4, "node-1"),
        ];
        let result = judge(silent);
        assert_eq!(result.result, Verdict::Pass, "{}", result.detail);
    }

    #[test]
    fn a_sign_off_cut_off_on_its_way_in_is_not_owed() {
        // 1 on node-1 signs off while its link to node-1 is cut, and is back on node-2 before
        // the cut heals: node-1 never read the close, so its friend 5 on node-2 was owed no
        // offline. The same close with the link up is owed.
        let signed_off = || {
            vec![
                welcome(0.0, 5, 5, "node-2"),
                befriend(2.0, 1, 5),
                event(2.02, 5, "friend_accepted", 1, None),
                state(2.03, 5, 1, true),
                closed(10.0, 1, 1, Some(1000), CloseCause::ClientClose),
                welcome(15.0, 1, 6, "node-2"),
            ]
        };
        let mut cut = signed_off();
        cut.extend(action(8.0, 30.0, ActionKind::Partition, "players<->node-1"));
        let result = judge(cut);
        assert_ne!(result.result, Verdict::Fail, "{}", result.detail);
        assert!(
            result.detail.contains("1 with a fault that loses data"),
            "{}",
            result.detail
        );
        let result = judge(signed_off());
        assert_eq!(result.result, Verdict::Fail, "{}", result.detail);
        assert!(
            result.detail.contains("offline of 1 → 5 at 10s (never)"),
            "{}",
            result.detail
        );
        // A cut off the change's way (the friend's node from the store) excuses nothing.
        let mut elsewhere = signed_off();
        elsewhere.extend(action(
            8.0,
            30.0,
            ActionKind::Partition,
            "node-2<->postgres",
        ));
        let result = judge(elsewhere);
        assert_eq!(result.result, Verdict::Fail, "{}", result.detail);
    }

    #[test]
    fn a_block_owes_friend_removed_only_when_they_were_friends() {
        let friends_then_block = || {
            vec![
                befriend(2.0, 1, 2),
                event(2.02, 2, "friend_accepted", 1, None),
                friend(5.0, Block, 1, 2, Ok),
            ]
        };
        let mut told = friends_then_block();
        told.push(event(5.02, 2, "friend_removed", 1, None));
        let result = judge(told);
        assert_eq!(result.result, Verdict::Pass, "{}", result.detail);
        let result = judge(friends_then_block());
        assert_eq!(result.result, Verdict::Fail, "{}", result.detail);
        assert!(
            result.detail.contains("friend_removed of 1 → 2"),
            "{}",
            result.detail
        );
        // Strangers: a block tells the blocked account nothing, so nothing is owed.
        let result = judge(vec![friend(5.0, Block, 1, 2, Ok)]);
        assert!(result.detail.contains("0 events owed"), "{}", result.detail);
    }

    #[test]
    fn a_slow_path_owes_it_later_and_a_broken_connection_by_resync() {
        let mut slowed = vec![
            befriend(5.0, 1, 2),
            event(12.0, 2, "friend_accepted", 1, None),
        ];
        slowed.extend(action(4.0, 10.0, ActionKind::Cpu, "node-1"));
        assert_eq!(judge(slowed).result, Verdict::Pass);
        let broken = judge(vec![
            friend(5.0, Unfriend, 1, 2, Ok),
            closed(5.5, 2, 2, None, crate::events::CloseCause::NoCloseFrame),
            welcome(7.0, 2, 4, "node-1"),
            resync(7.2, 2, 4, &[]),
        ]);
        assert_eq!(broken.result, Verdict::Pass, "{}", broken.detail);
        assert!(broken.detail.contains("1 by resync"), "{}", broken.detail);
        let wrong = judge(vec![
            befriend(4.0, 1, 2),
            event(4.02, 2, "friend_accepted", 1, None),
            friend(5.0, Unfriend, 1, 2, Ok),
            closed(5.5, 2, 2, None, crate::events::CloseCause::NoCloseFrame),
            welcome(7.0, 2, 4, "node-1"),
            resync(7.2, 2, 4, &[(1, true, 3)]),
        ]);
        assert_eq!(wrong.result, Verdict::Fail, "{}", wrong.detail);
        assert!(
            wrong.detail.contains("resync disagrees"),
            "{}",
            wrong.detail
        );
        // Befriended again before the resync: it rightly lists the friend.
        let again = judge(vec![
            befriend(4.0, 1, 2),
            event(4.02, 2, "friend_accepted", 1, None),
            friend(5.0, Unfriend, 1, 2, Ok),
            closed(5.5, 2, 2, None, crate::events::CloseCause::NoCloseFrame),
            befriend(6.0, 2, 1),
            welcome(7.0, 2, 4, "node-1"),
            resync(7.2, 2, 4, &[(1, true, 3)]),
        ]);
        assert_eq!(again.result, Verdict::Pass, "{}", again.detail);
    }

    #[test]
    fn a_leave_is_owed_to_every_other_sure_member() {
        let party = || {
            vec![
                session_write(1.0, SessionCreate, 1, "9", Ok),
                session_write(2.0, SessionJoin, 2, "9", Ok),
                event(2.01, 1, "session_member_joined", 2, Some("9")),
                session_write(3.0, SessionJoin, 3, "9", Ok),
                event(3.01, 1, "session_member_joined", 3, Some("9")),
                event(3.01, 2, "session_member_joined", 3, Some("9")),
            ]
        };
        let mut told = party();
        told.push(session_write(8.0, SessionLeave, 3, "9", Ok));
        told.push(event(8.01, 1, "session_member_left", 3, Some("9")));
        told.push(event(8.01, 2, "session_member_left", 3, Some("9")));
        let result = judge(told);
        assert_eq!(result.result, Verdict::Pass, "{}", result.detail);
        let mut silent = party();
        silent.push(session_write(8.0, SessionLeave, 3, "9", Ok));
        silent.push(event(8.01, 1, "session_member_left", 3, Some("9")));
        let result = judge(silent);
        assert_eq!(result.result, Verdict::Fail, "{}", result.detail);
        assert!(
            result
                .detail
                .contains("session_member_left of 3 in session 9 → 2"),
            "{}",
            result.detail
        );
        // 2 left as 3 joined: not surely a member, not owed.
        let mut racing = party();
        racing.retain(|at| !(at.0 == 3.01 && account_of(at) == Some(2)));
        racing.push(session_write(3.02, SessionLeave, 2, "9", Ok));
        racing.push(event(3.03, 1, "session_member_left", 2, Some("9")));
        let result = judge(racing);
        assert_eq!(result.result, Verdict::Pass, "{}", result.detail);
    }

    #[test]
    fn a_leaders_leave_owes_the_longest_standing_member_as_leader() {
        let party = |third_joins: f64| {
            vec![
                session_write(1.0, SessionCreate, 1, "9", Ok),
                session_write(2.0, SessionJoin, 2, "9", Ok),
                event(2.01, 1, "session_member_joined", 2, Some("9")),
                session_write(third_joins, SessionJoin, 3, "9", Ok),
                event(third_joins + 0.01, 1, "session_member_joined", 3, Some("9")),
                event(third_joins + 0.01, 2, "session_member_joined", 3, Some("9")),
                session_write(8.0, SessionLeave, 1, "9", Ok),
                event(8.01, 2, "session_member_left", 1, Some("9")),
                event(8.01, 3, "session_member_left", 1, Some("9")),
            ]
        };
        let told = |heir| {
            let mut events = party(3.0);
            events.push(event(8.02, 2, "session_leader_changed", heir, Some("9")));
            events.push(event(8.02, 3, "session_leader_changed", heir, Some("9")));
            events
        };
        let result = judge(told(2));
        assert_eq!(result.result, Verdict::Pass, "{}", result.detail);
        assert!(
            result.detail.contains("session_leader_changed 2"),
            "{}",
            result.detail
        );
        let wrong = judge(told(3));
        assert_eq!(wrong.result, Verdict::Fail, "{}", wrong.detail);
        let mut silent = party(3.0);
        silent.push(event(8.02, 2, "session_leader_changed", 2, Some("9")));
        let result = judge(silent);
        assert_eq!(result.result, Verdict::Fail, "{}", result.detail);
        assert!(
            result
                .detail
                .contains("session_leader_changed of 2 in session 9 → 3"),
            "{}",
            result.detail
        );
        // 3's join raced 2's: either may lead.
        let mut raced = party(2.05);
        raced.push(event(8.02, 2, "session_leader_changed", 3, Some("9")));
        raced.push(event(8.02, 3, "session_leader_changed", 3, Some("9")));
        let result = judge(raced);
        assert_eq!(result.result, Verdict::Pass, "{}", result.detail);
    }

    #[test]
    fn an_event_that_does_not_say_whose_it_is_is_not_the_one_owed() {
        let mut unnamed = event(5.02, 2, "friend_accepted", 1, None);
        received_mut(&mut unnamed).about = None;
        let result = judge(vec![befriend(5.0, 1, 2), unnamed]);
        assert_eq!(result.result, Verdict::Fail, "{}", result.detail);
        assert!(
            result
                .detail
                .contains("friend_accepted of 1 → 2 at 5s (never)"),
            "{}",
            result.detail
        );
    }

    #[test]
    fn a_fault_that_loses_data_on_the_path_excuses_it_and_none_elsewhere() {
        let mut cut = vec![welcome(0.0, 5, 5, "node-2"), befriend(5.0, 5, 2)];
        cut.extend(action(4.0, 10.0, ActionKind::Partition, "node-2<->nats"));
        let result = judge(cut);
        assert_eq!(result.result, Verdict::Unknown, "{}", result.detail);
        assert!(
            result.detail.contains("1 with a fault that loses data"),
            "{}",
            result.detail
        );
        let mut elsewhere = vec![befriend(5.0, 1, 2)];
        elsewhere.extend(action(4.0, 10.0, ActionKind::Partition, "node-2<->nats"));
        assert_eq!(judge(elsewhere).result, Verdict::Fail);
    }
}
