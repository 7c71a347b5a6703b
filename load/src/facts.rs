//! What players live through, as typed facts emitted the moment they happen (Jepsen's history,
//! from the clients' side): every call with its outcome, every welcome and close of an event
//! connection, every event received with its `seq`, every write with `ok | refused | unknown`.
//!
//! A fleet emits them into one [`FactSink`] when somebody asked for them
//! ([`crate::Fleet::facts`]); `anyplay-chaos` turns them into its `events.jsonl`, so nothing
//! is rebuilt from ledgers after a run.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;

use crate::stats::{Op, Status};
use crate::wire::{AccountId, NodeId, Session, SessionId};

/// A fact, when it happened, and whose.
#[derive(Debug, Clone)]
pub struct Stamped {
    pub at: Instant,
    /// The player's index in the fleet.
    pub player: usize,
    pub fact: Fact,
}

/// Numbers every event connection a fleet opens (the first is 1).
pub type ConnId = u64;

/// Which of an account's devices a connection belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Device {
    /// The player's own device: it reconnects by the rule.
    Primary,
    /// A second device that opens through another node for a while (`--second-devices`).
    Second,
}

impl Device {
    /// 1 or 2, as the history writes it.
    pub fn number(self) -> u8 {
        match self {
            Device::Primary => 1,
            Device::Second => 2,
        }
    }
}

#[derive(Debug, Clone)]
pub enum Fact {
    /// An op ended ([`Status::class`] says whether it was ok, refused or failed).
    Call {
        op: Op,
        status: Status,
        latency: Duration,
    },
    /// A welcome: `opened` is when the upgrade request went out, `node_index` the target's node
    /// the client dialled.
    Welcome {
        conn: ConnId,
        device: Device,
        node: NodeId,
        node_index: usize,
        opened: Instant,
    },
    /// The connection ended: a close frame's `code`, or a `cause` without one.
    Closed {
        conn: ConnId,
        device: Device,
        code: Option<u16>,
        cause: CloseCause,
    },
    /// An event on connection `conn`, in arrival order.
    Received { conn: ConnId, event: Received },
    /// The player's activity change was acknowledged (`204`).
    PresenceSet {
        version: u64,
        sent: Instant,
        node_index: usize,
    },
    /// A friend or session write was answered (or gave up).
    Write(WriteFact),
    /// The `GET /v1/friends` after a welcome, sent at `sent`: each friend's presence.
    Resync {
        conn: ConnId,
        sent: Instant,
        friends: Vec<(AccountId, bool, u64)>,
    },
    /// A session as an answer showed it.
    SessionView(Session),
    /// The player closed its connection itself and signed off; `for_good`: it stays away.
    SignOff { for_good: bool },
}

/// An event as the client read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Received {
    pub seq: Option<u64>,
    /// The event's `type`.
    pub kind: String,
    /// For presence: whose, its version and online state.
    pub presence: Option<(AccountId, u64, bool)>,
    /// For the first event of a change of this run: from its send to here.
    pub delivery: Option<Duration>,
}

/// How a client saw its connection end when there was no close code to tell.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CloseCause {
    /// The server's close frame (its code goes beside it).
    CloseFrame,
    /// EOF, reset or error without a close frame.
    NoCloseFrame,
    /// The harness cut it on purpose (the `drop` storm).
    Dropped,
    /// Nothing heard for `2 × ping_interval + 5 s`: the client gave it up as dead.
    Silent,
    /// The client closed it (1000): a sign-off, or a second device done.
    ClientClose,
    /// The run ended.
    Shutdown,
}

/// The writes whose effect must survive: friendships and session memberships.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WriteOp {
    FriendRequest,
    FriendAccept,
    FriendDecline,
    FriendCancel,
    Unfriend,
    SessionCreate,
    SessionJoin,
    SessionLeave,
}

/// A write's outcome as the client knows it (Jepsen's ok / fail / info).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WriteOutcome {
    /// 2xx: it happened.
    Ok,
    /// 4xx: the cloud refused it; it did not happen.
    Refused,
    /// No answer, a 5xx or a lost connection: it may or may not have happened.
    Unknown,
}

impl WriteOutcome {
    pub fn of(status: Status) -> WriteOutcome {
        match status.class() {
            CallClass::Ok => WriteOutcome::Ok,
            CallClass::Refused => WriteOutcome::Refused,
            CallClass::Failed => WriteOutcome::Unknown,
        }
    }
}

#[derive(Debug, Clone)]
pub struct WriteFact {
    pub op: WriteOp,
    pub other: Option<AccountId>,
    pub session: Option<SessionId>,
    pub outcome: WriteOutcome,
    /// A friend request answered `200 friends`: it made the friendship.
    pub befriended: bool,
    pub sent: Instant,
}

/// The one classification of a call's outcome, for error ratios and writes alike.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallClass {
    /// 1xx–3xx, or a step that completed.
    Ok,
    /// 4xx: the cloud applied a rule (a full session, a taken handle).
    Refused,
    /// 5xx, no answer, or a wrong answer.
    Failed,
}

/// Where a fleet's facts go: nowhere until somebody takes the receiver.
#[derive(Default)]
pub struct FactSink {
    sender: OnceLock<mpsc::UnboundedSender<Stamped>>,
}

impl FactSink {
    /// The receiver of every fact from now on; `None` when it was taken already.
    pub fn take(&self) -> Option<mpsc::UnboundedReceiver<Stamped>> {
        let (tx, rx) = mpsc::unbounded_channel();
        self.sender.set(tx).ok().map(|()| rx)
    }

    pub fn emit(&self, player: usize, fact: Fact) {
        if let Some(tx) = self.sender.get() {
            // A receiver that went away wants nothing more.
            let _ = tx.send(Stamped {
                at: Instant::now(),
                player,
                fact,
            });
        }
    }
}
