//! Small builders of hand-made histories for the checks' tests: each returns `(t, event)`,
//! and a `Vec` of them collects into a [`History`].

pub use crate::events::{Event, PlayerFact};
pub use anyplay_load::api::wire::{AccountId, SessionId};

use anyplay_load::api::wire::Session;

use super::model::Model;
use crate::events::{
    CardRelation, CardSeen, CardView, CloseCause, Device, FriendList, History, Membership, NodeId,
    Privacy, Received, SessionView, WriteFact as Write, WriteOp, WriteOutcome,
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
                to: None,
                toxic: None,
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

/// `action`'s events of a partition cut by the hosts' firewalls.
pub fn via_firewall(mut action: Vec<At>) -> Vec<At> {
    if let Some((_, Event::ActionStart { via, .. })) = action.first_mut() {
        *via = Some(crate::plan::Via::Firewall);
    }
    action
}

/// A player fact of `account` at `t`.
pub fn player(t: f64, account: u64, fact: PlayerFact) -> At {
    (
        t,
        Event::Player {
            player: account as usize,
            account,
            fact,
        },
    )
}

/// The connection the loss helpers give `account` on `node`: one per pair.
fn conn_on(account: u64, node: &str) -> u64 {
    1_000_000 + account * 100 + node_index(node) as u64
}

/// `account` connected to `node` (a welcome of its own device on the loss helpers'
/// connection there).
pub fn on(t: f64, account: u64, node: &str) -> At {
    welcome(t, account, conn_on(account, node), node)
}

/// `account` lost its connection to `node` (taken by [`on`] or [`back`]) without a close frame.
pub fn lost(t: f64, account: u64, node: &str) -> At {
    closed(
        t,
        account,
        conn_on(account, node),
        None,
        CloseCause::NoCloseFrame,
    )
}

/// `account`'s connection to `node` (taken by [`on`] or [`back`]) closed by the server with
/// `code`.
pub fn lost_closed(t: f64, account: u64, node: &str, code: u16) -> At {
    closed(
        t,
        account,
        conn_on(account, node),
        Some(code),
        CloseCause::CloseFrame,
    )
}

/// `account` welcomed by `node` again after a loss.
pub fn back(t: f64, account: u64, node: &str) -> At {
    on(t, account, node)
}

/// A welcome of the player's own device, opened 50 ms earlier.
pub fn welcome(t: f64, account: u64, conn: u64, node: &str) -> At {
    welcome_device(t, account, conn, node, 1)
}

/// A welcome of the player's own device by a node that pings every `ping_interval_s`.
pub fn welcome_pinging(t: f64, account: u64, conn: u64, node: &str, ping_interval_s: u64) -> At {
    welcome_of(t, account, conn, node, Device::Primary, ping_interval_s)
}

/// Account `from`'s activity change on `conn`, read `delivery` seconds after it was sent.
pub fn change_read(t: f64, account: u64, conn: u64, from: u64, delivery: f64) -> At {
    let mut at = presence(t, account, conn, 1, from, 10);
    received_mut(&mut at).delivery = Some(std::time::Duration::from_secs_f64(delivery));
    at
}

/// A welcome of device 1 (the player's own) or 2 (its second).
pub fn welcome_device(t: f64, account: u64, conn: u64, node: &str, device: u8) -> At {
    let device = if device == 2 {
        Device::Second
    } else {
        Device::Primary
    };
    let interval = anyplay_load::api::wire::DEFAULT_PING_INTERVAL_S;
    welcome_of(t, account, conn, node, device, interval)
}

fn welcome_of(
    t: f64,
    account: u64,
    conn: u64,
    node: &str,
    device: Device,
    ping_interval_s: u64,
) -> At {
    player(
        t,
        account,
        PlayerFact::Welcome {
            conn,
            device,
            node: NodeId(node.into()),
            node_index: node_index(node),
            opened: t - 0.05,
            ping_interval_s,
        },
    )
}

pub fn closed(t: f64, account: u64, conn: u64, code: Option<u16>, cause: CloseCause) -> At {
    player(
        t,
        account,
        PlayerFact::Closed {
            conn,
            device: Device::Primary,
            code,
            cause,
        },
    )
}

/// A presence event of `from` at `version` on `conn` of `account`.
pub fn presence(t: f64, account: u64, conn: u64, seq: u64, from: u64, version: u64) -> At {
    player(
        t,
        account,
        PlayerFact::Received {
            conn,
            event: Received {
                seq: Some(seq),
                kind: "presence".into(),
                presence: Some((AccountId(from), version, true)),
                about: None,
                session: None,
                delivery: None,
            },
        },
    )
}

/// Any other event on `conn`.
pub fn received(t: f64, account: u64, conn: u64, seq: Option<u64>) -> At {
    player(
        t,
        account,
        PlayerFact::Received {
            conn,
            event: Received {
                seq,
                kind: "session_member_joined".into(),
                presence: None,
                about: None,
                session: None,
                delivery: None,
            },
        },
    )
}

/// The node index of `node-N` (N - 1).
fn node_index(node: &str) -> usize {
    node.trim_start_matches("node-")
        .parse::<usize>()
        .map_or(0, |n| n.saturating_sub(1))
}

/// An activity change sent at `sent` to `node`, acknowledged at `ack`.
pub fn change(ack: f64, account: u64, version: u64, sent: f64, node: &str) -> At {
    player(
        ack,
        account,
        PlayerFact::PresenceSet {
            version,
            sent,
            node_index: node_index(node),
        },
    )
}

/// A friend write of `account` about `other`, sent 100 ms before its answer at `t`.
pub fn friend(t: f64, op: WriteOp, account: u64, other: u64, outcome: WriteOutcome) -> At {
    write(
        t,
        account,
        Write {
            other: Some(AccountId(other)),
            ..write_of(op, outcome, t)
        },
    )
}

/// A write answered at `t`, sent 100 ms before, about nobody yet.
fn write_of(op: WriteOp, outcome: WriteOutcome, t: f64) -> Write {
    Write {
        op,
        other: None,
        session: None,
        outcome,
        refusal: None,
        befriended: false,
        privacy: None,
        sent: t - 0.1,
    }
}

fn write(t: f64, account: u64, w: Write) -> At {
    player(t, account, PlayerFact::Write(w))
}

/// A friend request of `account` answered `200 friends` (`other` had asked): they are friends
/// from `t`.
pub fn befriend(t: f64, account: u64, other: u64) -> At {
    request_befriending(t, account, other, WriteOutcome::Ok)
}

/// A friend request answered `200 friends`.
pub fn request_befriending(t: f64, account: u64, other: u64, outcome: WriteOutcome) -> At {
    let (t, mut event) = friend(t, WriteOp::FriendRequest, account, other, outcome);
    if let Event::Player {
        fact: PlayerFact::Write(w),
        ..
    } = &mut event
    {
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
    write(
        t,
        account,
        Write {
            session: Some(SessionId(session.into())),
            ..write_of(op, outcome, t)
        },
    )
}

/// `account` sets its card privacy, sent 100 ms before its answer at `t`.
pub fn set_privacy(t: f64, account: u64, privacy: Privacy) -> At {
    write(
        t,
        account,
        Write {
            privacy: Some(privacy),
            ..write_of(WriteOp::SetPrivacy, WriteOutcome::Ok, t)
        },
    )
}

/// A gamer-card call of `account` answered at `t` (sent 50 ms before): each card's id,
/// shape and relation.
pub fn cards_read(t: f64, account: u64, cards: &[(u64, CardView, Option<CardRelation>)]) -> At {
    player(
        t,
        account,
        PlayerFact::CardsRead {
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
    player(
        t,
        account,
        PlayerFact::LoggedOut {
            sent: t - 0.05,
            outcome,
            stale_refresh_taken: stale,
        },
    )
}

pub fn resync(t: f64, account: u64, conn: u64, friends: &[(u64, bool, u64)]) -> At {
    player(
        t,
        account,
        PlayerFact::Resync {
            conn,
            sent: t - 0.05,
            friends: friends
                .iter()
                .map(|&(friend, online, version)| (AccountId(friend), online, version))
                .collect(),
        },
    )
}

pub fn sign_off(t: f64, account: u64, for_good: bool) -> At {
    player(t, account, PlayerFact::SignOff { for_good })
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

/// A session as an answer to `view.account` showed it.
pub fn session_view(t: f64, view: SessionView) -> At {
    player(
        t,
        view.account,
        PlayerFact::SessionView(Session {
            id: SessionId(view.session),
            leader: AccountId(view.leader),
            members: view.members.into_iter().map(AccountId).collect(),
            max_members: view.max_members,
        }),
    )
}

/// Account 1 read its connection slowly from `from` to `until` while account 2 flooded it,
/// recorded as the spell ended.
pub fn slow_reading(from: f64, until: f64) -> At {
    player(
        until,
        1,
        PlayerFact::SlowReading {
            senders: vec![AccountId(2)],
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

/// The player fact of a hand-made record, to change it.
pub fn fact_mut(at: &mut At) -> &mut PlayerFact {
    match &mut at.1 {
        Event::Player { fact, .. } => fact,
        other => panic!("not a player fact: {other:?}"),
    }
}

/// The write of a hand-made record, to change it.
pub fn write_mut(at: &mut At) -> &mut Write {
    match fact_mut(at) {
        PlayerFact::Write(w) => w,
        other => panic!("not a write: {other:?}"),
    }
}

/// The event received in a hand-made record, to change it.
pub fn received_mut(at: &mut At) -> &mut Received {
    match fact_mut(at) {
        PlayerFact::Received { event, .. } => event,
        other => panic!("not a received event: {other:?}"),
    }
}

/// The account a hand-made player record is of.
pub fn account_of(at: &At) -> Option<u64> {
    match &at.1 {
        Event::Player { account, .. } => Some(*account),
        _ => None,
    }
}
