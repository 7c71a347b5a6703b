//! What players live through, as typed facts emitted the moment they happen (Jepsen's history,
//! from the clients' side): every call with its outcome, every welcome and close of an event
//! connection, every event received with its `seq`, every write with `ok | refused | unknown`.
//!
//! A fleet emits them into one [`FactSink`] when somebody asked for them
//! ([`crate::Fleet::facts`]); `anyplay-chaos` writes each into its `events.jsonl` as it is
//! (times in the log's seconds; calls only counted), so nothing is rebuilt from ledgers after a
//! run and a new fact needs nothing new there.
//!
//! A fact is generic over how it tells time: an [`Instant`] in the process that lived it, or
//! µs since the Unix epoch ([`UnixMicros`]) when it travels to another process (a load agent's
//! facts to the supervisor); [`Clock`] converts between the two.

use std::sync::OnceLock;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;

use crate::api::wire::{
    AccountId, CardRelation, CardView, NodeId, Privacy, Session, SessionId, DEFAULT_PING_INTERVAL_S,
};
use crate::measure::stats::{CallClass, Op, Status};

/// Microseconds since the Unix epoch: presence versions carry their send time in it,
/// and facts that travel to another process their time.
pub fn unix_micros() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
}

/// A fact, when it happened, and whose.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Stamped<T = Instant> {
    pub at: T,
    /// The player's index in the run (agents keep the index their share starts at).
    pub player: usize,
    /// The player's account; `None` before its sign-up or sign-in answered.
    pub account: Option<AccountId>,
    pub fact: Fact<T>,
}

/// Microseconds since the Unix epoch on the clock of the process that lived the fact.
pub type UnixMicros = u64;

/// Converts a process's instants to Unix µs and back, from one reading of both clocks, so that
/// a step of the wall clock during a run does not bend the facts' times.
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    instant: Instant,
    unix: UnixMicros,
}

impl Clock {
    /// Reads both clocks now.
    pub fn now() -> Clock {
        Clock {
            instant: Instant::now(),
            unix: unix_micros(),
        }
    }

    pub fn to_unix(&self, at: Instant) -> UnixMicros {
        match at.checked_duration_since(self.instant) {
            Some(after) => self.unix + after.as_micros() as u64,
            None => self
                .unix
                .saturating_sub(self.instant.duration_since(at).as_micros() as u64),
        }
    }

    /// The instant here of `unix` read on a clock `offset_us` ahead of this one (an agent's
    /// clock offset to the supervisor, as measured when it was recruited).
    pub fn to_instant(&self, unix: UnixMicros, offset_us: i64) -> Instant {
        let here = unix as i64 - offset_us - self.unix as i64;
        let span = Duration::from_micros(here.unsigned_abs());
        if here >= 0 {
            self.instant + span
        } else {
            self.instant.checked_sub(span).unwrap_or(self.instant)
        }
    }
}

impl<T> Stamped<T> {
    /// The same fact with every time converted by `f`.
    pub fn map_times<U>(self, f: impl Fn(T) -> U) -> Stamped<U> {
        Stamped {
            at: f(self.at),
            player: self.player,
            account: self.account,
            fact: self.fact.map_times(f),
        }
    }
}

/// Numbers every event connection a fleet opens (the first is 1).
pub type ConnId = u64;

/// Which of an account's devices a connection belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
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

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Fact<T = Instant> {
    /// An op ended ([`Status::class`] says whether it was ok, refused or failed);
    /// `node_index` is the target's node the call went to, when it was one call.
    Call {
        op: Op,
        status: Status,
        latency: Duration,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        node_index: Option<usize>,
    },
    /// A welcome: `opened` is when the upgrade request went out, `node_index` the target's node
    /// the client dialled, `ping_interval_s` the pace of pings it announced (the contract's
    /// default when it named none, and in histories written before it was recorded).
    Welcome {
        conn: ConnId,
        device: Device,
        node: NodeId,
        node_index: usize,
        opened: T,
        #[serde(default = "default_ping_interval_s")]
        ping_interval_s: u64,
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
        sent: T,
        node_index: usize,
    },
    /// An activity change sent at `sent` got no `204` (it failed, or its answer never came):
    /// the cloud may have stored it all the same, so its version may still be shown.
    PresenceUnanswered { version: u64, sent: T },
    /// A friend or session write was answered (or gave up).
    Write(WriteFact<T>),
    /// The `GET /v1/friends` after a welcome, sent at `sent`: each friend's presence.
    Resync {
        conn: ConnId,
        sent: T,
        friends: Vec<(AccountId, bool, u64)>,
    },
    /// A session as an answer showed it.
    SessionView(Session),
    /// A `GET /v1/cards` answered with one card per id, sent at `sent`: what each card showed.
    CardsRead { sent: T, cards: Vec<CardSeen> },
    /// The player closed its connection itself and signed off; `for_good`: it stays away.
    SignOff { for_good: bool },
    /// `POST /v1/auth/logout` sent at `sent` ended so; after an ok one, whether the refresh
    /// token it revoked was still taken (`stale_refresh_taken`).
    LoggedOut {
        sent: T,
        outcome: WriteOutcome,
        stale_refresh_taken: bool,
    },
    /// A burst past one of the cloud's rate limits (`--rate-limits`), from a source address
    /// no player uses, its first call sent at `sent`: how the cloud answered it. `wall_ms` is
    /// when its first call went out and its last answer came, in ms since the Unix epoch: the
    /// cloud's limit windows follow the wall clock's minutes.
    LimitBurst {
        limit: RateLimit,
        source: std::net::IpAddr,
        sent: T,
        wall_ms: (u64, u64),
        answers: BurstAnswers,
    },
    /// The player read its own device's connection slowly (`--slow-readers`) from `from`
    /// until `until` (its connection ended, or it gave up waiting for that), while `senders`,
    /// friends of it, changed their activity `flood` times in all, far faster than it read.
    SlowReading {
        senders: Vec<AccountId>,
        from: T,
        until: T,
        flood: u32,
    },
}

fn default_ping_interval_s() -> u64 {
    DEFAULT_PING_INTERVAL_S
}

impl<T> Fact<T> {
    /// The same fact with every time converted by `f`.
    pub fn map_times<U>(self, f: impl Fn(T) -> U) -> Fact<U> {
        match self {
            Fact::Call {
                op,
                status,
                latency,
                node_index,
            } => Fact::Call {
                op,
                status,
                latency,
                node_index,
            },
            Fact::Welcome {
                conn,
                device,
                node,
                node_index,
                opened,
                ping_interval_s,
            } => Fact::Welcome {
                conn,
                device,
                node,
                node_index,
                opened: f(opened),
                ping_interval_s,
            },
            Fact::Closed {
                conn,
                device,
                code,
                cause,
            } => Fact::Closed {
                conn,
                device,
                code,
                cause,
            },
            Fact::Received { conn, event } => Fact::Received { conn, event },
            Fact::PresenceSet {
                version,
                sent,
                node_index,
            } => Fact::PresenceSet {
                version,
                sent: f(sent),
                node_index,
            },
            Fact::PresenceUnanswered { version, sent } => Fact::PresenceUnanswered {
                version,
                sent: f(sent),
            },
            Fact::Write(w) => Fact::Write(WriteFact {
                op: w.op,
                other: w.other,
                session: w.session,
                outcome: w.outcome,
                refusal: w.refusal,
                befriended: w.befriended,
                privacy: w.privacy,
                sent: f(w.sent),
            }),
            Fact::Resync {
                conn,
                sent,
                friends,
            } => Fact::Resync {
                conn,
                sent: f(sent),
                friends,
            },
            Fact::SessionView(session) => Fact::SessionView(session),
            Fact::CardsRead { sent, cards } => Fact::CardsRead {
                sent: f(sent),
                cards,
            },
            Fact::SignOff { for_good } => Fact::SignOff { for_good },
            Fact::LoggedOut {
                sent,
                outcome,
                stale_refresh_taken,
            } => Fact::LoggedOut {
                sent: f(sent),
                outcome,
                stale_refresh_taken,
            },
            Fact::LimitBurst {
                limit,
                source,
                sent,
                wall_ms,
                answers,
            } => Fact::LimitBurst {
                limit,
                source,
                sent: f(sent),
                wall_ms,
                answers,
            },
            Fact::SlowReading {
                senders,
                from,
                until,
                flood,
            } => Fact::SlowReading {
                senders,
                from: f(from),
                until: f(until),
                flood,
            },
        }
    }
}

/// An event as the client read it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Received {
    pub seq: Option<u64>,
    /// The event's `type`.
    pub kind: String,
    /// For presence: whose, its version and online state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub presence: Option<(AccountId, u64, bool)>,
    /// Whose event it is when not presence (`account_id`, or a new `leader`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub about: Option<AccountId>,
    /// For a session's news: which session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<SessionId>,
    /// For the first event of a change of this run: from its send to here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivery: Option<Duration>,
}

impl Received {
    /// Whose event it is: a presence's account, or the account it is about.
    pub fn from(&self) -> Option<AccountId> {
        self.presence.map(|(from, ..)| from).or(self.about)
    }
}

/// One card as read: whose, its shape, and the relation it named (limited and full cards).
/// Written as a three-element array, since a read holds up to 100 of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct CardSeen(pub AccountId, pub CardView, pub Option<CardRelation>);

/// A per-address limit of the cloud contract that a burst goes past on purpose.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RateLimit {
    /// Calls per source address per minute (the burst calls `GET /v1/me`).
    Calls,
    /// `POST /v1/auth/email` per source address and per email in 15 minutes (the burst asks
    /// for one fresh email's code).
    AuthEmail,
}

/// How the cloud answered the calls of a burst, counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BurstAnswers {
    pub calls: u32,
    /// Answered by the call itself (2xx, or a 4xx of its own): it passed the limit.
    pub ok: u32,
    /// 429 with a `Retry-After` of whole seconds.
    pub limited: u32,
    /// 429 without a valid `Retry-After`.
    pub no_retry_after: u32,
    /// A 5xx or no answer: the call may or may not have been counted.
    pub failed: u32,
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

/// The writes whose effect must survive: friendships, blocks, card privacy and session
/// memberships.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WriteOp {
    FriendRequest,
    FriendAccept,
    FriendDecline,
    FriendCancel,
    Unfriend,
    Block,
    Unblock,
    /// `PATCH /v1/me {"privacy"}`: the new privacy goes beside it.
    SetPrivacy,
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

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WriteFact<T = Instant> {
    pub op: WriteOp,
    pub other: Option<AccountId>,
    pub session: Option<SessionId>,
    pub outcome: WriteOutcome,
    /// A refusal's error code (`not_found`, `already_friends` …), when the cloud sent one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refusal: Option<String>,
    /// A friend request answered `200 friends`: it made the friendship.
    pub befriended: bool,
    /// The privacy a [`WriteOp::SetPrivacy`] asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub privacy: Option<Privacy>,
    pub sent: T,
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

    /// Whether somebody takes the facts (a fleet that nobody listens to keeps none).
    pub fn is_taken(&self) -> bool {
        self.sender.get().is_some()
    }

    pub fn emit(&self, player: usize, account: Option<AccountId>, fact: Fact) {
        if self.is_taken() {
            self.forward(Stamped {
                at: Instant::now(),
                player,
                account,
                fact,
            });
        }
    }

    /// Passes on a fact stamped elsewhere (a load agent's, on the coordinator).
    pub fn forward(&self, stamped: Stamped) {
        if let Some(tx) = self.sender.get() {
            // A receiver that went away wants nothing more.
            let _ = tx.send(stamped);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::stats::{Op, Status};

    fn near(a: Instant, b: Instant) -> bool {
        let gap = if a > b { a - b } else { b - a };
        gap <= Duration::from_micros(1)
    }

    #[test]
    fn a_fact_crosses_to_another_process_with_its_times() {
        let clock = Clock::now();
        let at = Instant::now();
        let sent = at - Duration::from_millis(250);
        let fact = Stamped {
            at,
            player: 7,
            account: Some(AccountId(42)),
            fact: Fact::Write(WriteFact {
                op: WriteOp::FriendAccept,
                other: Some(AccountId(43)),
                session: None,
                outcome: WriteOutcome::Unknown,
                refusal: None,
                befriended: false,
                privacy: None,
                sent,
            }),
        };
        let line = serde_json::to_string(&fact.map_times(|t| clock.to_unix(t))).unwrap();
        let back: Stamped<UnixMicros> = serde_json::from_str(&line).unwrap();
        // Read on the same clock: the same instants.
        let here = back.clone().map_times(|t| clock.to_instant(t, 0));
        assert!(near(here.at, at));
        let Fact::Write(w) = &here.fact else {
            panic!("{line}")
        };
        assert!(near(w.sent, sent));
        assert_eq!((here.player, here.account), (7, Some(AccountId(42))));
        // Read from a clock 2 s ahead of this one: 2 s earlier here.
        let ahead = back.map_times(|t| clock.to_instant(t, 2_000_000));
        assert!(near(ahead.at + Duration::from_secs(2), at));
    }

    #[test]
    fn calls_keep_their_op_and_status_by_their_report_names() {
        for (op, status) in [
            (Op::FriendRequest, Status::Http(409)),
            (Op::E2eLogin, Status::Done),
            (Op::Cards, Status::WrongCount),
            (Op::WsConnect, Status::NoAnswer),
        ] {
            let fact: Fact<UnixMicros> = Fact::Call {
                op,
                status,
                latency: Duration::from_millis(3),
                node_index: Some(1),
            };
            let line = serde_json::to_string(&fact).unwrap();
            assert!(line.contains(op.name()), "{line}");
            let Fact::Call {
                op: o, status: s, ..
            } = serde_json::from_str::<Fact<UnixMicros>>(&line).unwrap()
            else {
                panic!("{line}")
            };
            assert_eq!((o, s), (op, status));
        }
    }
}
