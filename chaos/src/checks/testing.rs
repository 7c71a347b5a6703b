//! Small builders of hand-made histories for the checks' tests: each returns `(t, event)`,
//! and a `Vec` of them collects into a [`History`].

use anyplay_load::wire::AccountId;

use super::model::Model;
use crate::events::{
    CardRelation, CardSeen, CardView, CloseCause, Event, FriendList, History, Membership, NodeId,
    Privacy, SessionView, Write, WriteOp, WriteOutcome,
};
use crate::plan::{ActionKind, Service};

pub type At = (f64, Event);

/// A hand-made history and the model of its writes, for the checks that ask the model.
pub fn with_model(events: Vec<At>) -> (History, Model) {
    let history: History = events.into_iter().collect();
    let model = Model::of(&history);
    (history, model)
}

pub fn node_up(t: f64, n: u32) -> At {
    (
        t,
        Event::ServiceUp {
            service: Service::Node(n),
            addr: None,
        },
    )
}

pub fn node_exit(t: f64, n: u32) -> At {
    (
        t,
        Event::ServiceExit {
            service: Service::Node(n),
            code: None,
            signal: Some("SIGKILL".into()),
            reason: None,
        },
    )
}

/// `action_start` at `t` and `action_end` at `end`, scheduled at `t`.
pub fn action(t: f64, end: f64, action: ActionKind, target: &str) -> Vec<At> {
    vec![
        (
            t,
            Event::ActionStart {
                action,
                target: target.into(),
                at: t,
                via: None,
            },
        ),
        (
            end,
            Event::ActionEnd {
                action,
                target: target.into(),
                at: t,
                error: None,
            },
        ),
    ]
}

pub fn lost(t: f64, account: u64, node: &str) -> At {
    (
        t,
        Event::PlayerLost {
            account,
            node: node.into(),
            reason: "reset".into(),
        },
    )
}

pub fn back(t: f64, account: u64, node: &str) -> At {
    (
        t,
        Event::PlayerBack {
            account,
            node: node.into(),
        },
    )
}

/// A welcome of the player's own device, opened 50 ms earlier.
pub fn welcome(t: f64, account: u64, conn: u64, node: &str) -> At {
    welcome_device(t, account, conn, node, 1)
}

pub fn welcome_device(t: f64, account: u64, conn: u64, node: &str, device: u8) -> At {
    (
        t,
        Event::Welcome {
            account,
            conn,
            node: NodeId(node.into()),
            device,
            opened: t - 0.05,
        },
    )
}

pub fn closed(t: f64, account: u64, conn: u64, code: Option<u16>, cause: CloseCause) -> At {
    (
        t,
        Event::Closed {
            account,
            conn,
            code,
            cause,
        },
    )
}

/// A presence event of `from` at `version` on `conn` of `account`.
pub fn presence(t: f64, account: u64, conn: u64, seq: u64, from: u64, version: u64) -> At {
    (
        t,
        Event::Received {
            account,
            conn,
            seq: Some(seq),
            event: "presence".into(),
            from: Some(from),
            version: Some(version),
            online: Some(true),
            session: None,
        },
    )
}

/// Any other event on `conn`.
pub fn received(t: f64, account: u64, conn: u64, seq: Option<u64>) -> At {
    (
        t,
        Event::Received {
            account,
            conn,
            seq,
            event: "session_member_joined".into(),
            from: None,
            version: None,
            online: None,
            session: None,
        },
    )
}

/// An activity change sent at `sent` to `node`, acknowledged at `ack`.
pub fn change(ack: f64, account: u64, version: u64, sent: f64, node: &str) -> At {
    (
        ack,
        Event::PresenceChange {
            account,
            version,
            sent,
            node: NodeId(node.into()),
        },
    )
}

/// A friend write of `account` about `other`, sent 100 ms before its answer at `t`.
pub fn friend(t: f64, op: WriteOp, account: u64, other: u64, outcome: WriteOutcome) -> At {
    (
        t,
        Event::Write(Write {
            op,
            account,
            other: Some(other),
            session: None,
            outcome,
            refusal: None,
            befriended: false,
            privacy: None,
            sent: t - 0.1,
        }),
    )
}

/// A friend request of `account` answered `200 friends` (`other` had asked): they are friends
/// from `t`.
pub fn befriend(t: f64, account: u64, other: u64) -> At {
    request_befriending(t, account, other, WriteOutcome::Ok)
}

/// A friend request answered `200 friends`.
pub fn request_befriending(t: f64, account: u64, other: u64, outcome: WriteOutcome) -> At {
    let (t, mut event) = friend(t, WriteOp::FriendRequest, account, other, outcome);
    if let Event::Write(w) = &mut event {
        w.befriended = true;
    }
    (t, event)
}

pub fn session_write(
    t: f64,
    op: WriteOp,
    account: u64,
    session: &str,
    outcome: WriteOutcome,
) -> At {
    (
        t,
        Event::Write(Write {
            op,
            account,
            other: None,
            session: Some(session.into()),
            outcome,
            refusal: None,
            befriended: false,
            privacy: None,
            sent: t - 0.1,
        }),
    )
}

/// `account` sets its card privacy, sent 100 ms before its answer at `t`.
pub fn set_privacy(t: f64, account: u64, privacy: Privacy) -> At {
    (
        t,
        Event::Write(Write {
            op: WriteOp::SetPrivacy,
            account,
            other: None,
            session: None,
            outcome: WriteOutcome::Ok,
            refusal: None,
            befriended: false,
            privacy: Some(privacy),
            sent: t - 0.1,
        }),
    )
}

/// A gamer-card call of `account` answered at `t` (sent 50 ms before): each card's id,
/// shape and relation.
pub fn cards_read(t: f64, account: u64, cards: &[(u64, CardView, Option<CardRelation>)]) -> At {
    (
        t,
        Event::CardsRead {
            account,
            sent: t - 0.05,
            cards: cards
                .iter()
                .map(|&(id, view, relation)| CardSeen(AccountId(id), view, relation))
                .collect(),
        },
    )
}

/// A logout of `account` answered at `t` (sent 50 ms before); `stale`: the refresh token it
/// revoked was taken after it.
pub fn logout(t: f64, account: u64, outcome: WriteOutcome, stale: bool) -> At {
    (
        t,
        Event::Logout {
            account,
            sent: t - 0.05,
            outcome,
            stale_refresh_taken: stale,
        },
    )
}

pub fn resync(t: f64, account: u64, conn: u64, friends: &[(u64, bool, u64)]) -> At {
    (
        t,
        Event::Resync {
            account,
            conn,
            sent: t - 0.05,
            friends: friends
                .iter()
                .map(
                    |&(account, online, version)| crate::events::FriendPresence {
                        account,
                        online,
                        version,
                    },
                )
                .collect(),
        },
    )
}

pub fn sign_off(t: f64, account: u64, for_good: bool) -> At {
    (t, Event::SignOff { account, for_good })
}

pub fn view(account: u64, session: &str, leader: u64, members: &[u64], max: u32) -> SessionView {
    SessionView {
        account,
        session: session.into(),
        leader,
        members: members.to_vec(),
        max_members: max,
    }
}

pub fn session_view(t: f64, view: SessionView) -> At {
    (t, Event::SessionView(view))
}

/// Account 1 read its connection slowly from `from` to `until` while account 2 flooded it,
/// recorded as the spell ended.
pub fn slow_reading(from: f64, until: f64) -> At {
    (
        until,
        Event::SlowReading {
            account: 1,
            senders: vec![2],
            from,
            until,
            flood: 2000,
        },
    )
}

pub fn end(t: f64) -> At {
    (t, Event::Note { text: "end".into() })
}

/// The final reads, built up piece by piece.
#[derive(Debug, Clone, Default)]
pub struct Final {
    pub friends: Vec<FriendList>,
    pub memberships: Vec<Membership>,
    pub connected: Vec<u64>,
    pub offline: Vec<u64>,
}

impl Final {
    /// `account`'s friend list, and which of them it was shown online.
    pub fn list(mut self, account: u64, friends: &[u64], online: &[u64]) -> Final {
        self.friends.push(FriendList {
            account,
            friends: friends.to_vec(),
            online: online.to_vec(),
        });
        self
    }

    pub fn member(
        mut self,
        account: u64,
        session: &str,
        member: bool,
        view: Option<SessionView>,
    ) -> Final {
        self.memberships.push(Membership {
            account,
            session: session.into(),
            member,
            view,
        });
        self
    }

    pub fn connected(mut self, accounts: &[u64]) -> Final {
        self.connected.extend(accounts);
        self
    }

    pub fn offline(mut self, accounts: &[u64]) -> Final {
        self.offline.extend(accounts);
        self
    }

    pub fn at(self, t: f64) -> At {
        (
            t,
            Event::FinalState {
                friends: self.friends,
                memberships: self.memberships,
                connected: self.connected,
                offline: self.offline,
            },
        )
    }
}
