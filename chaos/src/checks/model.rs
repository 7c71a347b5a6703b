//! The model of the contract that checks ask (Jepsen's Knossos, Elle): the relations the
//! cloud's writes make and undo, replayed from the recorded writes into when each relation
//! *may* hold and when it *surely* holds. Friendships (made by an accept, or a request the
//! other side had already asked; undone by an unfriend or a block), open friend requests
//! (made by a request; undone by the other's accept, decline or own request, the asker's
//! cancel, or a block either way), blocks (made by a block, undone by an unblock), card
//! privacy (`friends`, the default, is neither `public` nor `private`) and session
//! memberships (made by a create or a join; undone by a leave).
//!
//! A write takes effect somewhere between its send and its answer. So a relation may hold
//! from a making write's send, and surely ends only at an undoing write's answer when no
//! making write was still in flight then; it surely holds from a making write's answer
//! until the send of the next write that may undo it, unless an undoing write was in
//! flight with the making one. A write with an `unknown` outcome may have taken effect, or
//! may yet: a making one keeps its relation possible from its send on (a branch this model
//! keeps open to the end) and never makes it sure; an undoing one ends what was sure. A
//! refused write changed nothing.

use std::collections::{BTreeSet, HashMap};

use crate::events::{History, PlayerFact, Privacy, Write, WriteOp, WriteOutcome};

/// A relation between accounts that writes make and undo.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Relation {
    /// Two accounts are friends; the lower id first.
    Friends(u64, u64),
    /// A friend request from the first account to the second is open.
    Request(u64, u64),
    /// An account is a member of a session.
    Member(u64, String),
    /// The first account has blocked the second.
    Blocked(u64, u64),
    /// An account's card privacy is `public` or `private` (never `friends`: that is neither).
    Privacy(u64, Privacy),
}

impl Relation {
    pub fn friends(a: u64, b: u64) -> Relation {
        Relation::Friends(a.min(b), a.max(b))
    }

    /// The friendship or membership a write is about, when it is about one.
    pub fn of(write: &Write) -> Option<Relation> {
        match (write.other(), write.session()) {
            (Some(other), _) => Some(Relation::friends(write.account, other)),
            (None, Some(session)) => Some(Relation::Member(write.account, session.to_owned())),
            (None, None) => None,
        }
    }
}

/// What a write makes of its friendship or membership: `Some(true)` it holds after it,
/// `Some(false)` it does not, `None` no change (a request still open, a decline, a cancel).
pub fn effect(write: &Write) -> Option<bool> {
    match write.op {
        // A pending request is not a friendship; an unknown one may have met the other's.
        WriteOp::FriendRequest => {
            (write.befriended || write.outcome == WriteOutcome::Unknown).then_some(true)
        }
        WriteOp::FriendAccept | WriteOp::SessionCreate | WriteOp::SessionJoin => Some(true),
        WriteOp::Unfriend | WriteOp::Block | WriteOp::SessionLeave => Some(false),
        WriteOp::FriendDecline | WriteOp::FriendCancel | WriteOp::Unblock => None,
        WriteOp::SetPrivacy => None,
    }
}

/// Every relation a write makes (`true`) or undoes (`false`).
pub fn effects(write: &Write) -> Vec<(Relation, bool)> {
    let mut out: Vec<(Relation, bool)> =
        Relation::of(write).zip(effect(write)).into_iter().collect();
    let (me, unknown) = (write.account, write.outcome == WriteOutcome::Unknown);
    if let Some(other) = write.other() {
        match write.op {
            WriteOp::FriendRequest => {
                // Asked back: it closes the other's request instead of opening one.
                if !write.befriended || unknown {
                    out.push((Relation::Request(me, other), true));
                }
                if write.befriended || unknown {
                    out.push((Relation::Request(other, me), false));
                }
            }
            WriteOp::FriendAccept | WriteOp::FriendDecline => {
                out.push((Relation::Request(other, me), false));
            }
            WriteOp::FriendCancel => out.push((Relation::Request(me, other), false)),
            WriteOp::Block => out.extend([
                (Relation::Blocked(me, other), true),
                (Relation::Request(me, other), false),
                (Relation::Request(other, me), false),
            ]),
            WriteOp::Unblock => out.push((Relation::Blocked(me, other), false)),
            _ => {}
        }
    }
    if let (WriteOp::SetPrivacy, Some(privacy)) = (write.op, write.privacy) {
        for shown in [Privacy::Public, Privacy::Private] {
            out.push((Relation::Privacy(me, shown), shown == privacy));
        }
    }
    out
}

/// One relation's replay.
#[derive(Debug, Clone, Default)]
struct Spans {
    /// Closed spans in which it may have held.
    closed: Vec<(f64, f64)>,
    /// The start of the span it may hold in now.
    open: Option<f64>,
    /// The latest answer of a making write that took (or may take) effect.
    made_answered: f64,
    /// An unknown making write: the relation stays possible to the end.
    branch: bool,
    /// Closed spans in which it surely held, and the start of the one it surely holds in now.
    sure: Vec<(f64, f64)>,
    sure_open: Option<f64>,
    /// The latest answer of an undoing write that took (or may take) effect.
    undone_answered: f64,
}

impl Spans {
    fn apply(&mut self, made: bool, outcome: WriteOutcome, sent: f64, t: f64) {
        match (made, outcome) {
            (_, WriteOutcome::Refused) => {}
            (true, _) => {
                self.open.get_or_insert(sent);
                self.made_answered = self.made_answered.max(t);
                self.branch |= outcome == WriteOutcome::Unknown;
                // Sure once answered, unless an undo in flight with it may have landed after.
                if outcome == WriteOutcome::Ok
                    && self.sure_open.is_none()
                    && self.undone_answered < sent
                {
                    self.sure_open = Some(t);
                }
            }
            (false, _) => {
                self.undone_answered = self.undone_answered.max(t);
                if let Some(start) = self.sure_open.take() {
                    // In flight when the making write was answered: never sure.
                    if sent > start {
                        self.sure.push((start, sent));
                    }
                }
                // A making write answered after this one was sent may have landed after it.
                if outcome == WriteOutcome::Unknown || self.branch || self.made_answered > sent {
                    return;
                }
                if let Some(start) = self.open.take() {
                    self.closed.push((start, t));
                }
            }
        }
    }

    fn may_hold(&self, from: f64, until: f64) -> bool {
        self.open.is_some_and(|start| start <= until)
            || self
                .closed
                .iter()
                .any(|&(start, end)| start <= until && from <= end)
    }

    /// The span holding surely at `at`: `(may, sure)`, the send from which it may have held
    /// and the answer from which it surely did.
    fn standing(&self, at: f64) -> Option<(f64, f64)> {
        let holding = |&(start, end): &(f64, f64)| start <= at && at <= end;
        let sure = self
            .sure_open
            .filter(|&start| start <= at)
            .or_else(|| self.sure.iter().find(|s| holding(s)).map(|s| s.0))?;
        let may = self
            .open
            .filter(|&start| start <= at)
            .or_else(|| self.closed.iter().find(|s| holding(s)).map(|s| s.0))
            .unwrap_or(sure);
        Some((may.min(sure), sure))
    }

    fn surely_held(&self, from: f64, until: f64) -> bool {
        self.sure_open.is_some_and(|start| start <= from)
            || self
                .sure
                .iter()
                .any(|&(start, end)| start <= from && until <= end)
    }
}

/// The relations of a run, replayed from its writes.
#[derive(Debug, Clone, Default)]
pub struct Model {
    relations: HashMap<Relation, Spans>,
    sessions: HashMap<String, Session>,
    /// Each account's sessions, in id order.
    sessions_of: HashMap<u64, BTreeSet<String>>,
    /// Each account's first create that may have made a session nobody heard the id of
    /// (an unknown outcome): from its send on, the account may be in one.
    unnamed_since: HashMap<u64, f64>,
    /// Every account each account's friend writes named, either way, in id order.
    partners: HashMap<u64, BTreeSet<u64>>,
}

/// What a run tells of one session beside its memberships.
#[derive(Debug, Clone, Default)]
struct Session {
    /// Who created it (answered ok), and when that was answered: its leader until it leaves.
    creator: Option<(u64, f64)>,
    /// Its `max_members`, as any view of it said.
    seats: Option<u32>,
    /// Every account that ever was or may have been a member, in id order.
    members: BTreeSet<u64>,
}

impl Model {
    pub fn of(history: &History) -> Model {
        let mut model = Model::default();
        for (t, account, fact) in history.facts() {
            match fact {
                PlayerFact::Write(fact) => model.apply(&Write { account, fact }, t),
                PlayerFact::SessionView(view) => {
                    model.sessions.entry(view.id.0.clone()).or_default().seats =
                        Some(view.max_members);
                }
                _ => {}
            }
        }
        model
    }

    /// Replays one write, answered at `t` (writes come in answer order).
    fn apply(&mut self, write: &Write, t: f64) {
        if write.op == WriteOp::SessionCreate
            && write.outcome == WriteOutcome::Unknown
            && write.session.is_none()
        {
            self.unnamed_since
                .entry(write.account)
                .or_insert(write.sent);
        }
        if let Some(other) = write.other() {
            self.partners
                .entry(write.account)
                .or_default()
                .insert(other);
            self.partners
                .entry(other)
                .or_default()
                .insert(write.account);
        }
        if let Some(id) = write.session() {
            let session = self.sessions.entry(id.to_owned()).or_default();
            if write.op == WriteOp::SessionCreate && write.outcome == WriteOutcome::Ok {
                session.creator = Some((write.account, t));
            }
            if write.outcome != WriteOutcome::Refused {
                session.members.insert(write.account);
                self.sessions_of
                    .entry(write.account)
                    .or_default()
                    .insert(id.to_owned());
            }
        }
        for (relation, made) in effects(write) {
            self.relations
                .entry(relation)
                .or_default()
                .apply(made, write.outcome, write.sent, t);
        }
    }

    /// Who leads `session` all through `[from, until]`, when the model is sure: its creator,
    /// surely a member since its create was answered (leadership passes only at a leave).
    pub fn creator_leads(&self, session: &str, from: f64, until: f64) -> Option<u64> {
        let (creator, made) = self.sessions.get(session)?.creator?;
        let membership = Relation::Member(creator, session.to_owned());
        let since = self.standing(&membership, from)?.1;
        (since <= made && self.surely_held(&membership, from, until)).then_some(creator)
    }

    /// The `max_members` of `session`, when a view of it was read.
    pub fn seats(&self, session: &str) -> Option<u32> {
        self.sessions.get(session)?.seats
    }

    /// Every account that ever was, or may have been, a member of `session`, in id order.
    pub fn members(&self, session: &str) -> impl Iterator<Item = u64> + '_ {
        self.sessions
            .get(session)
            .into_iter()
            .flat_map(|s| s.members.iter().copied())
    }

    /// Whether `account` may have been in some session at a moment of `[from, until]`
    /// (one a create of unknown outcome may have made, whose id nobody heard, included).
    pub fn may_be_in_a_session(&self, account: u64, from: f64, until: f64) -> bool {
        self.unnamed_since
            .get(&account)
            .is_some_and(|&since| since <= until)
            || self.sessions_of.get(&account).is_some_and(|sessions| {
                sessions
                    .iter()
                    .any(|s| self.may_hold(&Relation::Member(account, s.clone()), from, until))
            })
    }

    /// How many accounts `account` may have stood in `relation(other)` with at some moment
    /// of `[from, until]`: never fewer than at any one moment then.
    pub fn may_count(
        &self,
        account: u64,
        relation: impl Fn(u64) -> Relation,
        from: f64,
        until: f64,
    ) -> usize {
        self.partners.get(&account).map_or(0, |partners| {
            partners
                .iter()
                .filter(|&&other| self.may_hold(&relation(other), from, until))
                .count()
        })
    }

    /// Whether `relation` may have held at some moment of `[from, until]`.
    pub fn may_hold(&self, relation: &Relation, from: f64, until: f64) -> bool {
        self.relations
            .get(relation)
            .is_some_and(|spans| spans.may_hold(from, until))
    }

    /// When `relation`, surely holding at `at`, began: `(may, sure)`, the send of the write
    /// that may have made it and the answer from which it surely held (a session's join
    /// order, say).
    pub fn standing(&self, relation: &Relation, at: f64) -> Option<(f64, f64)> {
        self.relations.get(relation)?.standing(at)
    }

    /// Whether `relation` surely held all through `[from, until]`.
    pub fn surely_held(&self, relation: &Relation, from: f64, until: f64) -> bool {
        self.relations
            .get(relation)
            .is_some_and(|spans| spans.surely_held(from, until))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::testing::*;

    fn model(events: Vec<At>) -> Model {
        Model::of(&events.into_iter().collect())
    }

    #[test]
    fn a_friendship_may_hold_from_its_accepts_send_to_its_unfriends_answer() {
        let m = model(vec![
            friend(2.0, WriteOp::FriendRequest, 1, 2, WriteOutcome::Ok),
            friend(4.0, WriteOp::FriendAccept, 2, 1, WriteOutcome::Ok),
            friend(10.0, WriteOp::Unfriend, 1, 2, WriteOutcome::Ok),
        ]);
        let pair = Relation::friends(2, 1);
        // The accept was sent 0.1 s before its answer; the unfriend answered at 10.
        assert!(!m.may_hold(&pair, 0.0, 3.8));
        assert!(m.may_hold(&pair, 3.95, 3.95));
        assert!(m.may_hold(&pair, 9.0, 9.0));
        assert!(!m.may_hold(&pair, 10.1, 20.0));
        assert!(!m.may_hold(&Relation::friends(1, 3), 0.0, 20.0));
    }

    #[test]
    fn an_unknown_or_concurrent_making_write_keeps_the_relation_possible() {
        let unknown = model(vec![
            friend(4.0, WriteOp::FriendAccept, 2, 1, WriteOutcome::Unknown),
            friend(10.0, WriteOp::Unfriend, 1, 2, WriteOutcome::Ok),
        ]);
        assert!(unknown.may_hold(&Relation::friends(1, 2), 30.0, 31.0));
        // The accept answered after the unfriend was sent: either may have landed last.
        let racing = model(vec![
            friend(10.0, WriteOp::Unfriend, 1, 2, WriteOutcome::Ok),
            friend(10.05, WriteOp::FriendAccept, 2, 1, WriteOutcome::Ok),
        ]);
        assert!(racing.may_hold(&Relation::friends(1, 2), 30.0, 31.0));
        let refused = model(vec![friend(
            4.0,
            WriteOp::FriendAccept,
            2,
            1,
            WriteOutcome::Refused,
        )]);
        assert!(!refused.may_hold(&Relation::friends(1, 2), 0.0, 31.0));
    }

    #[test]
    fn a_membership_follows_its_own_accounts_join_and_leave() {
        let m = model(vec![
            session_write(2.0, WriteOp::SessionJoin, 5, "9", WriteOutcome::Ok),
            session_write(8.0, WriteOp::SessionLeave, 5, "9", WriteOutcome::Ok),
        ]);
        let member = Relation::Member(5, "9".into());
        assert!(m.may_hold(&member, 3.0, 3.0));
        assert!(!m.may_hold(&member, 8.5, 9.0));
        assert!(!m.may_hold(&Relation::Member(6, "9".into()), 3.0, 3.0));
        assert!(m.surely_held(&member, 2.5, 7.8));
        assert!(!m.surely_held(&member, 2.5, 8.0));
        assert_eq!(m.standing(&member, 5.0), Some((1.9, 2.0)));
        assert_eq!(m.standing(&member, 1.95), None);
        assert_eq!(m.standing(&member, 8.5), None);
    }

    #[test]
    fn a_request_is_surely_open_from_its_answer_to_the_next_write_that_may_close_it() {
        let m = model(vec![
            friend(2.0, WriteOp::FriendRequest, 1, 2, WriteOutcome::Ok),
            friend(6.0, WriteOp::FriendAccept, 2, 1, WriteOutcome::Ok),
        ]);
        let request = Relation::Request(1, 2);
        assert!(m.surely_held(&request, 2.0, 5.9));
        assert!(!m.surely_held(&request, 2.0, 5.95));
        assert!(!m.surely_held(&Relation::Request(2, 1), 2.0, 3.0));
        assert!(!m.may_hold(&request, 6.1, 9.0));
        // A cancel in flight with the request's answer: never sure.
        let racing = model(vec![
            friend(2.0, WriteOp::FriendRequest, 1, 2, WriteOutcome::Ok),
            friend(2.05, WriteOp::FriendCancel, 1, 2, WriteOutcome::Ok),
        ]);
        assert!(!racing.surely_held(&request, 2.0, 2.0));
        // Asked back: the other's request closes and no new one opens.
        let back = model(vec![
            friend(2.0, WriteOp::FriendRequest, 1, 2, WriteOutcome::Ok),
            request_befriending(5.0, 2, 1, WriteOutcome::Ok),
        ]);
        assert!(!back.may_hold(&Relation::Request(2, 1), 0.0, 9.0));
        assert!(!back.may_hold(&request, 5.1, 9.0));
        assert!(back.surely_held(&Relation::friends(1, 2), 5.0, 9.0));
    }

    #[test]
    fn a_block_ends_friendship_and_requests_and_stands_until_its_unblock() {
        let m = model(vec![
            befriend(1.0, 1, 2),
            friend(2.0, WriteOp::FriendRequest, 3, 1, WriteOutcome::Ok),
            friend(4.0, WriteOp::Block, 1, 2, WriteOutcome::Ok),
            friend(5.0, WriteOp::Block, 1, 3, WriteOutcome::Ok),
            friend(9.0, WriteOp::Unblock, 1, 2, WriteOutcome::Ok),
        ]);
        assert!(!m.may_hold(&Relation::friends(1, 2), 4.1, 20.0));
        assert!(!m.may_hold(&Relation::Request(3, 1), 5.1, 20.0));
        assert!(m.surely_held(&Relation::Blocked(1, 2), 4.0, 8.8));
        assert!(!m.may_hold(&Relation::Blocked(2, 1), 0.0, 20.0));
        assert!(!m.may_hold(&Relation::Blocked(1, 2), 9.1, 20.0));
        assert!(m.surely_held(&Relation::Blocked(1, 3), 5.0, 20.0));
    }

    #[test]
    fn privacy_is_public_or_private_from_its_write_and_friends_is_neither() {
        let m = model(vec![
            set_privacy(2.0, 1, Privacy::Private),
            set_privacy(5.0, 1, Privacy::Public),
            set_privacy(8.0, 1, Privacy::Friends),
        ]);
        let (public, private) = (
            Relation::Privacy(1, Privacy::Public),
            Relation::Privacy(1, Privacy::Private),
        );
        assert!(!m.may_hold(&private, 0.0, 1.8));
        assert!(m.surely_held(&private, 2.0, 4.85));
        assert!(!m.may_hold(&public, 2.0, 4.85));
        assert!(m.surely_held(&public, 5.0, 7.85));
        assert!(!m.may_hold(&private, 5.1, 20.0));
        assert!(!m.may_hold(&public, 8.1, 20.0));
    }
}
