//! Latency histograms per op and status counts, recorded from many tasks and merged exactly,
//! with a per-second series.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::api::client::{Answer, ClientError};
use crate::sync::lock;

/// What the report measures, with the contract's op names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Op {
    AuthEmail,
    AuthCode,
    AuthSignup,
    Logout,
    WsConnect,
    E2eLogin,
    FriendsList,
    FriendRequest,
    FriendAccept,
    FriendDecline,
    FriendCancel,
    Unfriend,
    Block,
    Unblock,
    PrivacySet,
    PresenceSet,
    PresenceDelivery,
    SessionCreate,
    SessionJoin,
    SessionLeave,
    Cards,
}

impl Op {
    pub const ALL: [Op; 21] = [
        Op::AuthEmail,
        Op::AuthCode,
        Op::AuthSignup,
        Op::Logout,
        Op::WsConnect,
        Op::E2eLogin,
        Op::FriendsList,
        Op::FriendRequest,
        Op::FriendAccept,
        Op::FriendDecline,
        Op::FriendCancel,
        Op::Unfriend,
        Op::Block,
        Op::Unblock,
        Op::PrivacySet,
        Op::PresenceSet,
        Op::PresenceDelivery,
        Op::SessionCreate,
        Op::SessionJoin,
        Op::SessionLeave,
        Op::Cards,
    ];

    /// The op whose report name is `name`.
    pub fn named(name: &str) -> Option<Op> {
        Op::ALL.into_iter().find(|op| op.name() == name)
    }

    /// The op's name in the JSON report.
    pub fn name(self) -> &'static str {
        match self {
            Op::AuthEmail => "auth_email",
            Op::AuthCode => "auth_code",
            Op::AuthSignup => "auth_signup",
            Op::Logout => "logout",
            Op::WsConnect => "ws_connect",
            Op::E2eLogin => "e2e_login",
            Op::FriendsList => "friends_list",
            Op::FriendRequest => "friend_request",
            Op::FriendAccept => "friend_accept",
            Op::FriendDecline => "friend_decline",
            Op::FriendCancel => "friend_cancel",
            Op::Unfriend => "unfriend",
            Op::Block => "block",
            Op::Unblock => "unblock",
            Op::PrivacySet => "privacy_set",
            Op::PresenceSet => "presence_set",
            Op::PresenceDelivery => "presence_delivery",
            Op::SessionCreate => "session_create",
            Op::SessionJoin => "session_join",
            Op::SessionLeave => "session_leave",
            Op::Cards => "cards",
        }
    }

    /// Whether the op is one HTTP call (counted in `http_calls_per_s` and the series); `e2e_login`
    /// spans several and `presence_delivery` is an event, not a call.
    pub fn is_http(self) -> bool {
        !matches!(self, Op::E2eLogin | Op::PresenceDelivery)
    }
}

/// In the report, ops are map keys by their contract name.
impl Serialize for Op {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> Deserialize<'de> for Op {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        Op::named(&name).ok_or_else(|| D::Error::custom(format!("no op is named {name:?}")))
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How an op ended, as counted in the report's `status` map.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Status {
    /// The HTTP status of the answer (`101` for an accepted WebSocket upgrade).
    Http(u16),
    /// No answer: refused, reset, or timed out.
    NoAnswer,
    /// A `200` cards answer without exactly one card per id asked, in order.
    WrongCount,
    /// A step that is not one call (`e2e_login`, `presence_delivery`) completed.
    Done,
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

impl Status {
    /// How a failed call is counted in the report's status map.
    pub fn of_error(error: &ClientError) -> Status {
        match error {
            ClientError::Api { status, .. } | ClientError::Unexpected { status, .. } => {
                Status::Http(*status)
            }
            ClientError::NoAnswer(_) | ClientError::NotSignedIn => Status::NoAnswer,
        }
    }

    /// The status of a call's result, for the report.
    pub fn of<T>(result: &Result<Answer<T>, ClientError>) -> Status {
        match result {
            Ok(answer) => Status::Http(answer.status),
            Err(e) => Status::of_error(e),
        }
    }

    /// Ok, refused or failed: the one rule for error ratios and write outcomes.
    pub fn class(self) -> CallClass {
        match self {
            Status::Http(code) if code >= 500 => CallClass::Failed,
            Status::Http(code) if code >= 400 => CallClass::Refused,
            Status::Http(_) | Status::Done => CallClass::Ok,
            Status::NoAnswer | Status::WrongCount => CallClass::Failed,
        }
    }

    /// The status whose [`Status::label`] is `label`.
    pub fn labelled(label: &str) -> Option<Status> {
        match label {
            "no_answer" => Some(Status::NoAnswer),
            "wrong_count" => Some(Status::WrongCount),
            "ok" => Some(Status::Done),
            code => code.parse().ok().map(Status::Http),
        }
    }

    /// The key in the report: `"200"`, `"no_answer"`, `"wrong_count"`, `"ok"`.
    pub fn label(self) -> String {
        match self {
            Status::Http(code) => code.to_string(),
            Status::NoAnswer => "no_answer".into(),
            Status::WrongCount => "wrong_count".into(),
            Status::Done => "ok".into(),
        }
    }
}

/// In the report, statuses are map keys by their label.
impl Serialize for Status {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(&self.label())
    }
}

impl<'de> Deserialize<'de> for Status {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let label = String::deserialize(d)?;
        Status::labelled(&label)
            .ok_or_else(|| D::Error::custom(format!("no status is labelled {label:?}")))
    }
}

/// Latencies are kept in microseconds, up to an hour, with 3 significant digits (2 per second
/// of a series).
const MAX_MICROS: u64 = 3_600_000_000;

pub fn histogram(sigfig: u8) -> Histogram<u64> {
    Histogram::new_with_bounds(1, MAX_MICROS, sigfig).expect("constant bounds are valid")
}

/// Adds `from` into `into`; both come from [`histogram`] with the same bounds, so the counts add exactly.
fn add(into: &mut Histogram<u64>, from: &Histogram<u64>) {
    into.add(from).expect("histograms of one shape always add");
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX).max(1)
}

/// Converts a histogram value (µs) to milliseconds for the report.
pub fn ms(micros: u64) -> f64 {
    micros as f64 / 1000.0
}

/// Everything recorded for one op.
#[derive(Debug, Clone)]
pub struct OpStats {
    pub latency: Histogram<u64>,
    pub count: u64,
    pub ok: u64,
    pub status: BTreeMap<Status, u64>,
}

impl OpStats {
    fn new() -> Self {
        OpStats {
            latency: histogram(3),
            count: 0,
            ok: 0,
            status: BTreeMap::new(),
        }
    }

    fn record(&mut self, latency: Duration, status: Status) {
        self.latency.saturating_record(micros(latency));
        self.count += 1;
        self.ok += u64::from(status.class() == CallClass::Ok);
        *self.status.entry(status).or_default() += 1;
    }

    /// Calls that failed by the one error rule (a refusal is an answer, not an error).
    pub fn failed(&self) -> u64 {
        self.status
            .iter()
            .filter(|(status, _)| status.class() == CallClass::Failed)
            .map(|(_, n)| n)
            .sum()
    }

    fn merge(&mut self, other: &OpStats) {
        add(&mut self.latency, &other.latency);
        self.count += other.count;
        self.ok += other.ok;
        for (status, n) in &other.status {
            *self.status.entry(*status).or_default() += n;
        }
    }
}

/// One second of a series: the HTTP calls that completed in it, those that failed by the
/// one error rule ([`Status::class`]: a refusal such as a 404 is an answer, not an error),
/// and their latency. The load report's series and chaos's `load_tick` are both made of it.
#[derive(Debug, Clone)]
pub struct Second {
    pub calls: u64,
    pub errors: u64,
    /// Calls refused by a rate limit (429): players stay within the limits, so none is right.
    pub limited: u64,
    pub latency: Histogram<u64>,
}

impl Default for Second {
    fn default() -> Self {
        Second::new()
    }
}

impl Second {
    pub fn new() -> Self {
        // Two digits are enough for a per-second p99 and keep the series small.
        Second {
            calls: 0,
            errors: 0,
            limited: 0,
            latency: histogram(2),
        }
    }

    /// Counts one HTTP call that took `latency` and ended as `status`.
    pub fn record_call(&mut self, latency: Duration, status: Status) {
        self.calls += 1;
        self.errors += u64::from(status.class() == CallClass::Failed);
        self.limited += u64::from(status == Status::Http(429));
        self.latency.saturating_record(micros(latency));
    }

    /// The p99 latency in milliseconds; none in a second without calls.
    pub fn p99_ms(&self) -> Option<f64> {
        (self.calls > 0).then(|| ms(self.latency.value_at_quantile(0.99)))
    }

    fn merge(&mut self, other: &Second) {
        self.calls += other.calls;
        self.errors += other.errors;
        self.limited += other.limited;
        add(&mut self.latency, &other.latency);
    }
}

/// A merged view of a recorder.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    pub ops: BTreeMap<Op, OpStats>,
    pub series: Vec<Second>,
}

impl Snapshot {
    /// Adds `other` into this one, op by op and second by second.
    pub fn merge(&mut self, other: &Snapshot) {
        self.merge_shifted(other, 0);
    }

    /// Adds `other`, whose series starts `offset` seconds into this one's.
    pub fn merge_shifted(&mut self, other: &Snapshot, offset: usize) {
        for (op, stats) in &other.ops {
            self.ops
                .entry(*op)
                .or_insert_with(OpStats::new)
                .merge(stats);
        }
        let end = offset + other.series.len();
        if self.series.len() < end {
            self.series.resize_with(end, Second::new);
        }
        for (mine, theirs) in self.series[offset..].iter_mut().zip(&other.series) {
            mine.merge(theirs);
        }
    }

    /// HTTP calls, and how many of them failed.
    pub fn http_calls(&self) -> (u64, u64) {
        self.ops
            .iter()
            .filter(|(op, _)| op.is_http())
            .fold((0, 0), |(calls, errors), (_, s)| {
                (calls + s.count, errors + s.failed())
            })
    }

    /// The latency of every HTTP call, all ops together.
    pub fn http_latency(&self) -> Histogram<u64> {
        let mut all = histogram(3);
        for stats in self
            .ops
            .iter()
            .filter(|(op, _)| op.is_http())
            .map(|(_, s)| s)
        {
            add(&mut all, &stats.latency);
        }
        all
    }
}

#[derive(Default)]
struct Shard {
    ops: BTreeMap<Op, OpStats>,
    series: Vec<Second>,
}

struct Inner {
    start: Instant,
    shards: Vec<Mutex<Shard>>,
}

/// Shared by every task of a scenario: each thread records into its own shard, so recording does
/// not contend, and [`Recorder::snapshot`] adds the shards' histograms (an exact merge).
#[derive(Clone)]
pub struct Recorder {
    inner: Arc<Inner>,
}

const SHARDS: usize = 8;

fn shard_index() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static INDEX: usize = NEXT.fetch_add(1, Ordering::Relaxed) % SHARDS;
    }
    INDEX.with(|i| *i)
}

impl Default for Recorder {
    fn default() -> Self {
        Self::new()
    }
}

impl Recorder {
    /// A recorder whose series starts now.
    pub fn new() -> Self {
        let shards = (0..SHARDS).map(|_| Mutex::new(Shard::default())).collect();
        Recorder {
            inner: Arc::new(Inner {
                start: Instant::now(),
                shards,
            }),
        }
    }

    pub fn start(&self) -> Instant {
        self.inner.start
    }

    /// Records one op that took `latency` and ended as `status`.
    pub fn record(&self, op: Op, latency: Duration, status: Status) {
        let mut shard = lock(&self.inner.shards[shard_index()]);
        shard
            .ops
            .entry(op)
            .or_insert_with(OpStats::new)
            .record(latency, status);
        if op.is_http() {
            let second =
                usize::try_from(self.inner.start.elapsed().as_secs()).unwrap_or(usize::MAX);
            if shard.series.len() <= second {
                shard.series.resize_with(second + 1, Second::new);
            }
            shard.series[second].record_call(latency, status);
        }
    }

    /// The shards merged.
    pub fn snapshot(&self) -> Snapshot {
        let mut all = Snapshot::default();
        for shard in &self.inner.shards {
            let shard = lock(shard);
            all.merge(&Snapshot {
                ops: shard.ops.clone(),
                series: shard.series.clone(),
            });
        }
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    #[test]
    fn merged_percentiles_equal_one_histogram_of_everything() {
        let recorder = Recorder::new();
        let mut reference = histogram(3);
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let per_thread: Vec<Vec<u64>> = (0..4)
            .map(|_| {
                (0..5_000)
                    .map(|_| rng.random_range(50..2_000_000))
                    .collect()
            })
            .collect();
        for values in &per_thread {
            for v in values {
                reference.saturating_record(*v);
            }
        }
        std::thread::scope(|scope| {
            for values in &per_thread {
                let recorder = recorder.clone();
                scope.spawn(move || {
                    for v in values {
                        recorder.record(Op::Cards, Duration::from_micros(*v), Status::Http(200));
                    }
                });
            }
        });
        let snap = recorder.snapshot();
        let cards = &snap.ops[&Op::Cards];
        assert_eq!(cards.count, 20_000);
        for q in [0.5, 0.9, 0.95, 0.99, 0.999, 1.0] {
            assert_eq!(
                cards.latency.value_at_quantile(q),
                reference.value_at_quantile(q),
                "quantile {q}"
            );
        }
        assert_eq!(cards.latency.max(), reference.max());
    }

    #[test]
    fn statuses_and_ok_are_counted_per_op() {
        let recorder = Recorder::new();
        let ms = Duration::from_millis(1);
        recorder.record(Op::Cards, ms, Status::Http(200));
        recorder.record(Op::Cards, ms, Status::WrongCount);
        recorder.record(Op::Cards, ms, Status::NoAnswer);
        recorder.record(Op::FriendsList, ms, Status::Http(404));
        recorder.record(Op::E2eLogin, ms, Status::Done);
        let snap = recorder.snapshot();
        let cards = &snap.ops[&Op::Cards];
        assert_eq!((cards.count, cards.ok), (3, 1));
        let labels: Vec<String> = cards.status.keys().map(|s| s.label()).collect();
        assert_eq!(labels, ["200", "no_answer", "wrong_count"]);
        // e2e_login is not an HTTP call: it stays out of the call counts and the series; a
        // 404 is a call that was answered, not an error.
        assert_eq!(snap.http_calls(), (4, 2));
        assert_eq!(snap.series.iter().map(|s| s.calls).sum::<u64>(), 4);
    }

    #[test]
    fn a_second_counts_a_refusal_as_a_call_and_a_failure_as_an_error() {
        let mut second = Second::new();
        assert_eq!(second.p99_ms(), None);
        let ms = Duration::from_millis(1);
        second.record_call(ms, Status::Http(200));
        second.record_call(ms, Status::Http(404));
        second.record_call(ms, Status::Http(409));
        second.record_call(ms, Status::Http(503));
        second.record_call(Duration::from_millis(40), Status::NoAnswer);
        assert_eq!((second.calls, second.errors), (5, 2));
        let p99 = second.p99_ms().expect("a second with calls has a p99");
        assert!((39.5..=40.5).contains(&p99), "{p99}");
    }

    #[test]
    fn the_series_counts_a_refusal_as_a_call_not_an_error() {
        let recorder = Recorder::new();
        recorder.record(Op::Cards, Duration::from_millis(1), Status::Http(404));
        recorder.record(Op::Cards, Duration::from_millis(1), Status::Http(503));
        let snap = recorder.snapshot();
        assert_eq!((snap.series[0].calls, snap.series[0].errors), (2, 1));
    }

    #[test]
    fn snapshots_merge_by_op_and_second() {
        let (a, b) = (Recorder::new(), Recorder::new());
        a.record(Op::PresenceSet, Duration::from_millis(2), Status::Http(204));
        b.record(Op::PresenceSet, Duration::from_millis(4), Status::Http(503));
        let mut merged = a.snapshot();
        merged.merge(&b.snapshot());
        assert_eq!(merged.ops[&Op::PresenceSet].count, 2);
        assert_eq!(merged.series[0].calls, 2);
        assert_eq!(merged.series[0].errors, 1);
        merged.merge_shifted(&b.snapshot(), 3);
        assert_eq!(merged.series.len(), 4);
        assert_eq!((merged.series[0].calls, merged.series[3].calls), (2, 1));
    }
}
