//! The recorded history of a run (Jepsen style): one JSON object per line in `events.jsonl`,
//! `{"t": <seconds>, "kind": ..., ...}`, each line written and flushed as it happens so the
//! file survives a crash of the supervisor; the writer ([`EventLog`]) and the reader
//! ([`read_history`]) that `report DIR` and the checks work from.
//!
//! Neither side hides a loss: the writer counts the records it could not write
//! ([`EventLog::failed_writes`]), the reader the lines it could not read
//! ([`History::skipped_lines`]), so a report can say how much of the history is missing.
//!
//! What players lived is recorded as the load crate defines it (one [`Event::Player`] per
//! fact), so a new fact needs no new kind here. Conventions the checks rely on: a node's id in
//! player facts is the service name (`node-1`), as the supervisor configures it; `action_end`
//! of a lasting fault (pause, partition, latency) is written when it has healed.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyplay_load::measure::provenance;
use serde::{Deserialize, Serialize};

use crate::control::toxiproxy::ToxicJson;
use crate::plan::{Action, ActionKind, HostKind, Service, Step, Via};
use crate::sync::lock;

/// The machine of a run: the load harness's probe, so load reports and chaos runs say the same.
pub use anyplay_load::measure::provenance::Machine;

/// The event log's file name in a run directory.
pub const EVENTS_FILE: &str = "events.jsonl";

/// One line of the history: when (seconds since the log's zero) and what.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    pub t: f64,
    pub event: Event,
}

/// Everything a run records. `kind` on the line is the variant's snake_case name.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Event {
    /// First line of every log: what ran, where, and with which tool.
    RunStart(RunMeta),
    /// The friend limits every node of the run holds to.
    FriendLimits(FriendLimits),
    /// The per-address limits every node holds to, in a run with them on (`rate_limits`).
    RateLimits(RateLimits),
    /// An instance was launched; a node's carries the version it runs (`built-in`: the cloud
    /// inside anyplay-chaos).
    ServiceStart {
        service: Service,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        version: Option<String>,
    },
    ServiceUp {
        service: Service,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        addr: Option<String>,
    },
    /// A process ended: with an exit `code`, or killed by a `signal` such as `"SIGKILL"`.
    ServiceExit {
        service: Service,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        code: Option<i32>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        signal: Option<String>,
        /// Why, when more is known than the code or signal: `"oom"` for the kernel's OOM killer.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// `at` is the scheduled offset in seconds, beside the actual `t`.
    ActionStart {
        action: ActionKind,
        target: String,
        at: f64,
        /// A partition cut by the hosts' firewalls (absent: by the fault proxy).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        via: Option<Via>,
        /// The version an `upgrade` moves its nodes to.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        to: Option<String>,
        /// The toxic a change through the control API set, as Toxiproxy shows it: a reader
        /// tells a `reset_peer` from a `timeout`, and one toxic from another on a link.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        toxic: Option<ToxicJson>,
    },
    /// The action is complete (a lasting fault: healed); `error` when it could not be done.
    ActionEnd {
        action: ActionKind,
        target: String,
        at: f64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
    /// A player's event connection ended without being replaced, for readers of the file: the
    /// checks find losses in the players' welcomes and closes by the same rule
    /// ([`crate::checks::losses`]).
    PlayerLost {
        account: u64,
        node: String,
        reason: String,
    },
    /// The first welcome after a loss, and from which node (as `player_lost`, for readers).
    PlayerBack {
        account: u64,
        node: String,
    },
    /// One round of the duplicate sampler over every node's `/v1/admin/connections`: only the
    /// accounts seen on two connections in that round.
    CheckSample {
        round: u64,
        duplicates: Vec<u64>,
    },
    Note {
        text: String,
    },
    /// A host of the plan as the run made it, with the services placed on it.
    HostUp {
        host: String,
        host_kind: HostKind,
        address: String,
        services: Vec<Service>,
    },
    /// Offset zero of the timeline: every player is signed in and online.
    TimelineStart,
    /// What a player lived, as the load crate records it ([`PlayerFact`]), its times in log
    /// seconds: `player` is its index in the run, `account` its account.
    Player {
        player: usize,
        account: u64,
        fact: PlayerFact,
    },
    /// The nodes in the order the players' target lists them: a fact's `node_index` names one.
    PlayerNodes {
        nodes: Vec<NodeId>,
    },
    /// The final reads, after the settle: each player's `GET /v1/friends`, each (account,
    /// session) pair a write touched, and which accounts held a connection all through the
    /// reads (`connected`) or none (`offline`); an account that connected or lost its connection
    /// meanwhile is in neither. An account or a pair missing here could not be read.
    FinalState {
        friends: Vec<FriendList>,
        #[serde(default)]
        memberships: Vec<Membership>,
        #[serde(default)]
        connected: Vec<u64>,
        #[serde(default)]
        offline: Vec<u64>,
    },
    /// The load's second-by-second numbers: one per second, becomes the report's series.
    LoadTick(Tick),
    /// A call a player made, or a step the load times as one (`e2e_login`), answered (or
    /// given up) now: the latency gates' samples. Kept apart from the player's facts because
    /// a call may come before the player has an account (its sign-in).
    Call {
        player: usize,
        op: Op,
        status: Status,
        latency_ms: f64,
    },
    ClientExit {
        name: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        code: Option<i32>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        signal: Option<String>,
    },
    /// The plan's `abort` gave the run up: a condition held for its `for`. The timeline stops
    /// here, and the run fails.
    Aborted {
        reason: String,
    },
    /// Records that the run could not write to this log (a full disk, say): the history
    /// misses them, so no check can pass on it.
    Unwritten {
        records: u64,
    },
    /// A load agent stopped answering: its `players` (numbered from `first_player`) played on
    /// unrecorded, or not at all, from here on.
    AgentLost {
        agent: String,
        first_player: usize,
        players: usize,
    },
}

/// The id a node gives itself in its welcome (the service name, `node-1`, under chaos).
pub use anyplay_load::api::wire::NodeId;

pub use anyplay_load::measure::facts::{BurstAnswers, CloseCause, Device, RateLimit, Received};

/// What the load times, by the contract's op names, and how a call ended.
pub use anyplay_load::measure::stats::{Op, Status};

/// A player's fact as the history holds it: times in log seconds.
pub type PlayerFact = anyplay_load::measure::facts::Fact<f64>;

/// A friend or session write and how it was answered, times in log seconds.
pub type WriteFact = anyplay_load::measure::facts::WriteFact<f64>;

/// A player's write with whose it is: what the checks replay.
#[derive(Debug, Clone, Copy)]
pub struct Write<'a> {
    pub account: u64,
    pub fact: &'a WriteFact,
}

impl std::ops::Deref for Write<'_> {
    type Target = WriteFact;

    fn deref(&self) -> &WriteFact {
        self.fact
    }
}

impl<'a> Write<'a> {
    /// The account a friend write is about.
    pub fn other(&self) -> Option<u64> {
        self.fact.other.map(|a| a.0)
    }

    /// The session a session write is about.
    pub fn session(&self) -> Option<&'a str> {
        self.fact.session.as_ref().map(|s| s.0.as_str())
    }
}
pub use anyplay_load::settings::RateLimits;

pub use anyplay_load::api::wire::{CardRelation, CardView, Privacy};
pub use anyplay_load::measure::facts::{CardSeen, WriteOp, WriteOutcome};

/// The final reads' records, as the players (in this process or on agents) read them.
pub use anyplay_load::players::final_reads::{FriendList, Membership, SessionView};

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Tick {
    pub online: u64,
    pub welcomes: u64,
    pub disconnects: u64,
    pub http_calls: u64,
    pub http_errors: u64,
    /// The players' calls refused by a rate limit (429).
    #[serde(default)]
    pub limited: u64,
    /// `null` in a second without calls.
    pub p99_ms: Option<f64>,
    pub presence_p99_ms: Option<f64>,
    pub nodes: BTreeMap<String, NodeTick>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NodeTick {
    pub up: bool,
    /// Cores busy (1.0 = one core fully used).
    pub cpu: f64,
    pub rss_mb: f64,
    pub pool_busy: u64,
    /// The players' calls sent to this node in the second, and how many failed.
    #[serde(default)]
    pub http_calls: u64,
    #[serde(default)]
    pub http_errors: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunMeta {
    pub plan: String,
    pub seed: u64,
    /// RFC 3339, UTC.
    pub started_at: String,
    pub machine: Machine,
    pub tool: Tool,
}

/// The friend limits of cloud-api ("Limits (configurable)"), as the nodes run with them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct FriendLimits {
    pub max_friends: u32,
    pub max_outgoing: u32,
    /// Requests an account younger than a day may open per 24 h.
    pub daily_requests_new: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Tool {
    pub version: String,
    pub commit: String,
}

impl RunMeta {
    /// The metadata of a run that starts now on this machine with this build.
    pub fn now(plan: &str, seed: u64) -> RunMeta {
        let started_at = time::OffsetDateTime::now_utc()
            .format(&time::format_description::well_known::Rfc3339)
            .unwrap_or_default();
        RunMeta {
            plan: plan.to_owned(),
            seed,
            started_at,
            machine: Machine::detect(),
            tool: Tool::current(),
        }
    }
}

impl Tool {
    /// This build's version and the commit it came from.
    pub fn current() -> Tool {
        Tool {
            version: env!("CARGO_PKG_VERSION").to_owned(),
            commit: provenance::commit(),
        }
    }
}

impl Event {
    /// `action_start` for a resolved step.
    pub fn action_start(step: &Step) -> Event {
        Event::ActionStart {
            action: step.action.kind(),
            target: step.action.target_label(),
            at: step.at.as_secs_f64(),
            via: matches!(step.action, Action::Firewall { .. }).then_some(Via::Firewall),
            to: match step.action {
                Action::Upgrade { to, .. } => Some(to.to_string()),
                _ => None,
            },
            toxic: None,
        }
    }

    /// `action_end` for a resolved step, with the error if it could not be done.
    pub fn action_end(step: &Step, error: Option<String>) -> Event {
        Event::ActionEnd {
            action: step.action.kind(),
            target: step.action.target_label(),
            at: step.at.as_secs_f64(),
            error,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum EventsError {
    #[error("cannot open {}: {source}", path.display())]
    Open {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot write to the event log: {0}")]
    Write(#[source] std::io::Error),
    #[error("cannot encode an event: {0}")]
    Encode(#[source] serde_json::Error),
}

impl Record {
    /// The record as one JSON line, `t` first, without the newline.
    pub fn to_line(&self) -> Result<String, serde_json::Error> {
        let event = serde_json::to_string(&self.event)?;
        // A tagged enum always serializes as an object: `{"kind":...}`. Microseconds are plenty.
        let t = (self.t * 1e6).round() / 1e6;
        Ok(format!(
            "{{\"t\":{},{}",
            serde_json::to_string(&t)?,
            &event[1..]
        ))
    }

    pub fn from_line(line: &str) -> Result<Record, serde_json::Error> {
        use serde::de::Error as _;
        let mut value: serde_json::Value = serde_json::from_str(line)?;
        let t = value
            .as_object_mut()
            .and_then(|object| object.remove("t"))
            .and_then(|t| t.as_f64())
            .ok_or_else(|| serde_json::Error::custom("a record needs a number `t`"))?;
        Ok(Record {
            t,
            event: Event::deserialize(value)?,
        })
    }
}

/// The writer: cheap to clone, shared by every task of a run; each record is one `write` of
/// one whole line to an unbuffered file, so nothing waits in memory when the process dies.
#[derive(Debug, Clone)]
pub struct EventLog {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    zero: Instant,
    file: Mutex<Writer>,
    /// Records that could not be written, whole or in part.
    failed: AtomicU64,
    /// Sees each event as it is recorded (`--metrics`), at most one.
    observer: std::sync::OnceLock<Observer>,
}

/// What [`EventLog::observe`] calls with each event recorded.
pub type Observe = Arc<dyn Fn(&Event) + Send + Sync>;

struct Observer(Observe);

impl std::fmt::Debug for Observer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Observer")
    }
}

#[derive(Debug)]
struct Writer {
    file: File,
    /// The last write failed and may have left part of a line: the next record starts a line
    /// of its own, so that only the torn record is lost, not the one after it too.
    torn: bool,
}

impl EventLog {
    /// Creates (or truncates) the log at `path`; `t` counts seconds from `zero`.
    pub fn create(path: &Path, zero: Instant) -> Result<EventLog, EventsError> {
        let file = crate::run_files::create(path).map_err(|source| EventsError::Open {
            path: path.to_owned(),
            source,
        })?;
        Ok(EventLog {
            inner: Arc::new(Inner {
                zero,
                file: Mutex::new(Writer { file, torn: false }),
                failed: AtomicU64::new(0),
                observer: std::sync::OnceLock::new(),
            }),
        })
    }

    /// Seconds since the log's zero, as `record` would stamp them now.
    pub fn now(&self) -> f64 {
        seconds_since(self.inner.zero, Instant::now())
    }

    /// `at` in seconds since the log's zero.
    pub fn seconds(&self, at: Instant) -> f64 {
        seconds_since(self.inner.zero, at)
    }

    /// Stamps `event` with the current `t` and appends it. A failure is also counted (see
    /// [`EventLog::failed_writes`]), so callers that cannot act on it may ignore it.
    pub fn record(&self, event: Event) -> Result<(), EventsError> {
        // A panic elsewhere while holding the lock leaves the file itself intact.
        let mut writer = lock(&self.inner.file);
        // Stamped under the lock, so times of `record` never go backwards.
        let record = Record {
            t: self.now(),
            event,
        };
        self.append(&mut writer, &record)
    }

    /// Appends `event` stamped with when it happened (`at`), which may be a moment before now:
    /// facts reach the log through a queue. Readers order the history by `t`.
    pub fn record_at(&self, at: Instant, event: Event) -> Result<(), EventsError> {
        let record = Record {
            t: self.seconds(at),
            event,
        };
        self.append(&mut lock(&self.inner.file), &record)
    }

    /// Has `observe` see every event recorded from now on (under the log's lock, so in order);
    /// false when the log has an observer already.
    pub fn observe(&self, observe: Observe) -> bool {
        self.inner.observer.set(Observer(observe)).is_ok()
    }

    fn append(&self, writer: &mut Writer, record: &Record) -> Result<(), EventsError> {
        if let Some(Observer(observe)) = self.inner.observer.get() {
            observe(&record.event);
        }
        let mut line = match record.to_line() {
            Ok(line) => line,
            Err(error) => return Err(self.failed(EventsError::Encode(error))),
        };
        if writer.torn {
            line.insert(0, '\n');
        }
        line.push('\n');
        match writer.file.write_all(line.as_bytes()) {
            Ok(()) => {
                writer.torn = false;
                Ok(())
            }
            Err(error) => {
                writer.torn = true;
                Err(self.failed(EventsError::Write(error)))
            }
        }
    }

    /// How many records could not be written (the report says so: its history misses them).
    pub fn failed_writes(&self) -> u64 {
        self.inner.failed.load(Ordering::Relaxed)
    }

    /// Forces what was written onto the disk; for the end of a run, so that a power loss
    /// right after it keeps the whole history.
    pub fn sync(&self) -> Result<(), EventsError> {
        lock(&self.inner.file)
            .file
            .sync_all()
            .map_err(EventsError::Write)
    }

    /// Counts a failed record; the first is also logged, the rest only counted.
    fn failed(&self, error: EventsError) -> EventsError {
        if self.inner.failed.fetch_add(1, Ordering::Relaxed) == 0 {
            tracing::warn!("{error}; further failures are only counted");
        }
        error
    }
}

fn seconds_since(zero: Instant, now: Instant) -> f64 {
    match now.checked_duration_since(zero) {
        Some(d) => d.as_secs_f64(),
        None => -zero
            .checked_duration_since(now)
            .unwrap_or(Duration::ZERO)
            .as_secs_f64(),
    }
}

/// A run's history in time order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct History {
    records: Vec<Record>,
    /// Line numbers (from 1) of the file's lines that could not be read.
    skipped: Vec<usize>,
}

impl History {
    pub fn new(mut records: Vec<Record>) -> History {
        records.sort_by(|a, b| a.t.total_cmp(&b.t));
        History {
            records,
            skipped: Vec::new(),
        }
    }

    /// The lines of `events.jsonl` (numbered from 1) that were torn or did not parse, and so
    /// are missing from this history.
    pub fn skipped_lines(&self) -> &[usize] {
        &self.skipped
    }

    pub fn records(&self) -> &[Record] {
        &self.records
    }

    /// `(t, event)` in time order.
    pub fn iter(&self) -> impl Iterator<Item = (f64, &Event)> {
        self.records.iter().map(|r| (r.t, &r.event))
    }

    /// The time of the last record (0 when empty).
    pub fn end(&self) -> f64 {
        self.records.last().map_or(0.0, |r| r.t)
    }

    /// The load agents lost during the run, by name.
    pub fn lost_agents(&self) -> Vec<&str> {
        self.iter()
            .filter_map(|(_, e)| match e {
                Event::AgentLost { agent, .. } => Some(agent.as_str()),
                _ => None,
            })
            .collect()
    }

    /// How many records the run said it could not write.
    pub fn unwritten(&self) -> u64 {
        self.iter()
            .map(|(_, e)| match e {
                Event::Unwritten { records } => *records,
                _ => 0,
            })
            .sum()
    }

    /// The friend limits the nodes held to, when the run recorded them.
    pub fn friend_limits(&self) -> Option<FriendLimits> {
        self.iter().find_map(|(_, e)| match e {
            Event::FriendLimits(limits) => Some(*limits),
            _ => None,
        })
    }

    /// The per-address limits the nodes held to, in a run with them on.
    pub fn rate_limits(&self) -> Option<RateLimits> {
        self.iter().find_map(|(_, e)| match e {
            Event::RateLimits(limits) => Some(*limits),
            _ => None,
        })
    }

    /// `(t, account, fact)` of every player fact, in time order.
    pub fn facts(&self) -> impl Iterator<Item = (f64, u64, &PlayerFact)> {
        self.iter().filter_map(|(t, e)| match e {
            Event::Player { account, fact, .. } => Some((t, *account, fact)),
            _ => None,
        })
    }

    /// Why the plan's `abort` gave the run up, and when, if it did.
    pub fn aborted(&self) -> Option<(f64, &str)> {
        self.iter().find_map(|(t, e)| match e {
            Event::Aborted { reason } => Some((t, reason.as_str())),
            _ => None,
        })
    }

    /// `(t, op, latency in ms)` of every call and timed step, in answer order.
    pub fn calls(&self) -> impl Iterator<Item = (f64, Op, f64)> + '_ {
        self.iter().filter_map(|(t, e)| match e {
            Event::Call { op, latency_ms, .. } => Some((t, *op, *latency_ms)),
            _ => None,
        })
    }

    /// `(t, write)` of every player's write, in answer order.
    pub fn writes(&self) -> impl Iterator<Item = (f64, Write<'_>)> {
        self.facts().filter_map(|(t, account, fact)| match fact {
            PlayerFact::Write(fact) => Some((t, Write { account, fact })),
            _ => None,
        })
    }

    /// The nodes as the players' target listed them, by a fact's `node_index`.
    pub fn player_nodes(&self) -> PlayerNodes<'_> {
        PlayerNodes(
            self.iter()
                .find_map(|(_, e)| match e {
                    Event::PlayerNodes { nodes } => Some(nodes.as_slice()),
                    _ => None,
                })
                .unwrap_or_default(),
        )
    }

    /// The `run_start` line, when the log has one.
    pub fn meta(&self) -> Option<&RunMeta> {
        self.iter().find_map(|(_, e)| match e {
            Event::RunStart(meta) => Some(meta),
            _ => None,
        })
    }
}

/// The nodes as the players' target listed them (see [`History::player_nodes`]).
pub struct PlayerNodes<'a>(&'a [NodeId]);

impl PlayerNodes<'_> {
    /// The node `index` names (`node-{index + 1}` when the run did not say).
    pub fn name(&self, index: usize) -> String {
        self.0
            .get(index)
            .map_or_else(|| format!("node-{}", index + 1), |n| n.0.clone())
    }
}

impl FromIterator<(f64, Event)> for History {
    fn from_iter<I: IntoIterator<Item = (f64, Event)>>(iter: I) -> History {
        History::new(
            iter.into_iter()
                .map(|(t, event)| Record { t, event })
                .collect(),
        )
    }
}

/// Reads a run's `events.jsonl`. A line that does not parse (cut short by a crash or a failed
/// write, or garbled) is skipped with a warning and listed in [`History::skipped_lines`]: the
/// rest of the history still counts.
pub fn read_history(path: &Path) -> Result<History, EventsError> {
    // Lossy: a write torn inside a multi-byte character must not make the whole file unreadable.
    let bytes = crate::run_files::read(path).map_err(|source| EventsError::Open {
        path: path.to_owned(),
        source,
    })?;
    let text = String::from_utf8_lossy(&bytes);
    let mut records = Vec::new();
    let mut skipped = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        match Record::from_line(line) {
            Ok(record) => records.push(record),
            Err(error) => {
                tracing::warn!("{}:{}: skipped: {error}", path.display(), i + 1);
                skipped.push(i + 1);
            }
        }
    }
    Ok(History {
        skipped,
        ..History::new(records)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::testing as h;

    fn temp_dir(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("anyplay-events-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn lines_carry_t_first_and_the_contract_fields() {
        let record = Record {
            t: 30.0123456789,
            event: Event::ServiceExit {
                service: Service::Node(1),
                code: None,
                signal: Some("SIGKILL".into()),
                reason: None,
            },
        };
        assert_eq!(
            record.to_line().unwrap(),
            r#"{"t":30.012346,"kind":"service_exit","service":"node-1","signal":"SIGKILL"}"#
        );
        let start = Record {
            t: 30.02,
            event: Event::ActionStart {
                action: ActionKind::Kill,
                target: "node-1".into(),
                at: 30.0,
                via: None,
                to: None,
                toxic: None,
            },
        };
        assert_eq!(
            start.to_line().unwrap(),
            r#"{"t":30.02,"kind":"action_start","action":"kill","target":"node-1","at":30.0}"#
        );
        let (t, event) = h::session_write(1.0, WriteOp::SessionJoin, 4, "9", WriteOutcome::Unknown);
        assert_eq!(
            Record { t, event }.to_line().unwrap(),
            r#"{"t":1.0,"kind":"player","player":4,"account":4,"fact":{"kind":"write","op":"session_join","other":null,"session":"9","outcome":"unknown","befriended":false,"sent":0.9}}"#
        );
    }

    #[test]
    fn every_kind_reads_back_equal() {
        let mut nodes = BTreeMap::new();
        nodes.insert(
            "node-1".to_owned(),
            NodeTick {
                up: true,
                cpu: 0.5,
                rss_mb: 40.0,
                pool_busy: 3,
                http_calls: 20,
                http_errors: 1,
            },
        );
        let events = vec![
            Event::RunStart(RunMeta {
                plan: "p".into(),
                seed: 7,
                started_at: "2025-01-01T00:00:00Z".into(),
                machine: Machine::default(),
                tool: Tool {
                    version: "0.1.0".into(),
                    commit: "abc".into(),
                },
            }),
            Event::ServiceUp {
                service: Service::Postgres,
                addr: Some("127.0.0.1:5432".into()),
            },
            Event::ServiceStart {
                service: Service::Node(1),
                version: Some("candidate".into()),
            },
            Event::ActionEnd {
                action: ActionKind::Pause,
                target: "nats".into(),
                at: 130.0,
                error: None,
            },
            Event::PlayerLost {
                account: 1,
                node: "node-1".into(),
                reason: "reset".into(),
            },
            Event::PlayerBack {
                account: 1,
                node: "node-2".into(),
            },
            Event::CheckSample {
                round: 3,
                duplicates: vec![5],
            },
            Event::Note { text: "hi".into() },
            Event::TimelineStart,
            Event::PlayerNodes {
                nodes: vec![NodeId("node-1".into()), NodeId("node-2".into())],
            },
            Event::FinalState {
                friends: vec![FriendList {
                    account: 1,
                    friends: vec![2],
                    online: vec![2],
                }],
                memberships: vec![Membership {
                    account: 1,
                    session: "9".into(),
                    member: true,
                    view: None,
                }],
                connected: vec![1],
                offline: vec![2],
            },
            Event::LoadTick(Tick {
                online: 10,
                p99_ms: Some(12.5),
                nodes,
                ..Tick::default()
            }),
            Event::ClientExit {
                name: "c".into(),
                code: Some(0),
                signal: None,
            },
            Event::Unwritten { records: 2 },
        ];
        let facts = [
            h::change(1.0, 1, 10, 0.25, "node-1"),
            h::welcome_device(1.0, 1, 3, "node-2", 2),
            h::closed(1.0, 1, 3, Some(4001), CloseCause::CloseFrame),
            h::presence(1.0, 2, 4, 7, 1, 10),
            h::received(1.0, 2, 4, None),
            h::befriend(1.0, 1, 2),
            h::set_privacy(1.0, 1, Privacy::Private),
            h::cards_read(
                1.0,
                2,
                &[
                    (1, CardView::Limited, Some(CardRelation::Friend)),
                    (9, CardView::Missing, None),
                ],
            ),
            h::resync(1.0, 2, 4, &[(1, true, 10)]),
            h::session_view(1.0, h::view(1, "9", 1, &[1], 4)),
            h::sign_off(1.0, 1, true),
            h::logout(1.0, 1, WriteOutcome::Ok, false),
            h::slow_reading(0.5, 1.0),
        ];
        for event in events.into_iter().chain(facts.into_iter().map(|(_, e)| e)) {
            let record = Record { t: 1.5, event };
            let line = record.to_line().unwrap();
            assert_eq!(Record::from_line(&line).unwrap(), record, "{line}");
        }
    }

    #[test]
    fn the_log_is_readable_while_written_and_after_a_torn_line() {
        let dir = temp_dir("torn");
        let path = dir.join(EVENTS_FILE);
        let log = EventLog::create(&path, Instant::now()).unwrap();
        let clone = log.clone();
        let writer = std::thread::spawn(move || {
            for i in 0..50 {
                clone
                    .record(Event::Note {
                        text: format!("{i}"),
                    })
                    .unwrap();
            }
        });
        for i in 0..50 {
            log.record(h::sign_off(0.0, i, false).1).unwrap();
        }
        writer.join().unwrap();
        // Nothing buffered: the file already holds every line.
        let history = read_history(&path).unwrap();
        assert_eq!(history.records().len(), 100);
        assert!(history.records().windows(2).all(|w| w[0].t <= w[1].t));

        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        file.write_all(b"{\"t\":9.0,\"kind\":\"no").unwrap();
        let history = read_history(&path).unwrap();
        assert_eq!(history.records().len(), 100);
        assert_eq!(history.skipped_lines(), [101]);
        log.sync().unwrap();
        assert_eq!(log.failed_writes(), 0);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_failed_write_is_counted_not_lost_silently() {
        // Every write to /dev/full fails with ENOSPC, as on a full disk.
        let log = EventLog::create(Path::new("/dev/full"), Instant::now()).unwrap();
        let note = || Event::Note { text: "x".into() };
        assert!(matches!(log.record(note()), Err(EventsError::Write(_))));
        assert!(log.clone().record(note()).is_err());
        assert_eq!(log.failed_writes(), 2);
    }

    #[test]
    fn torn_and_bad_lines_in_the_middle_are_skipped_and_counted() {
        let dir = temp_dir("bad");
        let path = dir.join(EVENTS_FILE);
        let lines = [
            r#"{"t":1,"kind":"note","text":"a"}"#,
            r#"{"t":2,"kind":"no"#,
            r#"{"t":2,"kind":"nope"}"#,
            "\u{fffd}garbage",
            r#"{"t":3,"kind":"note","text":"b"}"#,
        ];
        std::fs::write(&path, lines.join("\n") + "\n").unwrap();
        let history = read_history(&path).unwrap();
        let texts: Vec<&Event> = history.iter().map(|(_, e)| e).collect();
        assert_eq!(
            texts,
            [
                &Event::Note { text: "a".into() },
                &Event::Note { text: "b".into() }
            ]
        );
        assert_eq!(history.skipped_lines(), [2, 3, 4]);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn run_metadata_is_filled() {
        let meta = RunMeta::now("p", 3);
        assert!(meta.started_at.ends_with('Z'), "{}", meta.started_at);
        assert!(meta.machine.cores >= 1);
        assert!(!meta.tool.version.is_empty());
    }
}
