//! What the coordinator and its load agents say to each other over NATS: the subjects (all under
//! `anyplay.load.<run id>.`) and the messages, as JSON, each sealed ([`super::seal`]). Histograms travel serialized (V2 with
//! deflate, base64), never as percentiles, so the coordinator merges them exactly.

use std::collections::BTreeMap;
use std::io::Cursor;
use std::time::Duration;

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use clap::ValueEnum;
use hdrhistogram::serialization::{Deserializer, Serializer, V2DeflateSerializer};
use hdrhistogram::Histogram;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::measure::facts::{Stamped, UnixMicros};
use crate::measure::generator::GeneratorReport;
use crate::measure::stats::{Op, OpStats, Second, Snapshot, Status};
use crate::players::final_reads::FinalReads;
use crate::report::{DeliveryReport, PlayersReport, RateReport, ScenarioReport, StormReport};
use crate::scenarios::mixed;
use crate::scenarios::storm::back_times;
use crate::settings::{Scenario, Settings};

/// The subject every idle agent listens on, whatever the run.
pub const ANY_OFFER: &str = "anyplay.load.*.offer";

/// Where the coordinator of `run` offers work.
pub fn offer(run: &str) -> String {
    format!("anyplay.load.{run}.offer")
}

/// Where the coordinator of `run` sends its requests to agent `name`.
pub fn to_agent(run: &str, name: &str) -> String {
    format!("anyplay.load.{run}.to.{name}")
}

/// Where agent `name` of `run` sends its health and results.
pub fn from_agent(run: &str, name: &str) -> String {
    format!("anyplay.load.{run}.from.{name}")
}

/// Every agent's messages of `run`.
pub fn from_any_agent(run: &str) -> String {
    from_agent(run, "*")
}

/// Where agent `name` of `run` asks for sign-in codes.
pub fn codes(run: &str, name: &str) -> String {
    format!("anyplay.load.{run}.codes.{name}")
}

/// Every agent's code requests of `run`.
pub fn any_codes(run: &str) -> String {
    codes(run, "*")
}

/// The run of an offer's subject (`anyplay.load.<run>.offer`).
pub fn offer_run(subject: &str) -> Option<&str> {
    subject
        .strip_prefix("anyplay.load.")?
        .strip_suffix(".offer")
        .filter(|run| is_token(run))
}

/// The last part of a subject: the agent's name on its own subjects.
pub fn last_token(subject: &str) -> Option<&str> {
    subject.rsplit('.').next().filter(|name| is_token(name))
}

/// Whether `token` can be one part of a subject (a run id, an agent's name).
pub fn is_token(token: &str) -> bool {
    !token.is_empty()
        && token
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// Why a message could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ProtocolError {
    #[error("a message that is not the protocol's JSON: {0}")]
    Json(#[from] serde_json::Error),
    #[error("a histogram that does not decode: {0}")]
    Histogram(String),
    #[error("an unknown {what} {name:?}")]
    Unknown { what: &'static str, name: String },
}

pub fn encode<T: Serialize>(message: &T) -> Vec<u8> {
    serde_json::to_vec(message).expect("protocol messages are plain data")
}

pub fn decode<T: DeserializeOwned>(payload: &[u8]) -> Result<T, ProtocolError> {
    Ok(serde_json::from_slice(payload)?)
}

/// A coordinator looks for agents (answered with an [`Answer`]); `at_us` is its clock (µs
/// since the Unix epoch), so that an old offer played again is refused.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Offer {
    pub run: String,
    pub at_us: u64,
}

/// An idle agent takes an offer; `nonce` makes its session's key its own.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Answer {
    pub name: String,
    pub nonce: String,
}

/// A step of a run that every agent starts at one agreed instant, after all of them ended the
/// one before.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Phase {
    /// The login wave and the friend graph.
    WarmUp,
    /// One scenario of `--scenarios`.
    Scenario { scenario: Scenario },
    /// The chaos supervisor's: the players start what they keep doing while its timeline runs
    /// (the `mixed` scenario, and the traffic for `traffic`); the phase ends once it started.
    Play { traffic: Duration },
    /// The chaos supervisor's: a share of the players sign off for good (told in [`Event::Left`]).
    LeaveForGood,
    /// The chaos supervisor's: waits for what `Play` started to end; its result is `mixed`.
    EndPlay,
    /// The chaos supervisor's: the final reads within `limit`, sent in [`Event::Reads`] parts.
    FinalReads { limit: Duration },
}

impl Phase {
    pub fn name(self) -> &'static str {
        match self {
            Phase::WarmUp => "warm-up",
            Phase::Scenario { scenario } => scenario.name(),
            Phase::Play { .. } => "play",
            Phase::LeaveForGood => "leave-for-good",
            Phase::EndPlay => "end-play",
            Phase::FinalReads { .. } => "final-reads",
        }
    }
}

/// What the coordinator asks of an agent; each has a [`Reply`].
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Request {
    /// Play this share of the run against these nodes (their public URLs).
    Assign {
        settings: Box<Settings>,
        nodes: Vec<String>,
        /// Stream every fact of the players ([`Event::Facts`]): the chaos supervisor's history.
        #[serde(default)]
        facts: bool,
    },
    /// What the agent's clock says (for its offset to the coordinator's).
    Clock,
    /// Start `phase` when the agent's clock reads `at_us` (µs since the Unix epoch).
    Phase { phase: Phase, at_us: u64 },
    /// Stop the players and tell the health of the whole run.
    Finish,
    /// The run is over without a finish (the coordinator gave up): stop the players.
    Abort,
}

/// An agent's answer to a [`Request`].
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Reply {
    Assigned,
    Clock {
        now_us: u64,
    },
    Starting,
    Finished(Box<Finished>),
    Aborted,
    /// The request cannot be done, and why.
    Refused {
        reason: String,
    },
}

/// An agent's own health over its whole run, with its scheduler lateness as a histogram.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Finished {
    pub generator: GeneratorReport,
    pub sched_lag: WireHistogram,
    /// Facts sent over the whole run, so the coordinator knows when it has them all.
    #[serde(default)]
    pub facts_sent: u64,
}

/// What an agent sends on its own, on [`from_agent`].
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Event {
    /// Once a second while it holds a run.
    Health(Health),
    /// A phase ended; its scenarios' results, in order.
    PhaseDone {
        phase: Phase,
        results: Vec<ScenarioResult>,
    },
    /// A phase could not be played.
    PhaseFailed { phase: Phase, error: String },
    /// Facts the players lived, in order, timed by the agent's clock.
    Facts { facts: Vec<Stamped<UnixMicros>> },
    /// How many players signed off for good in [`Phase::LeaveForGood`].
    Left { players: usize },
    /// A part of the agent's [`Phase::FinalReads`].
    Reads(FinalReads),
}

/// One second of an agent's health.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct Health {
    /// When, by the agent's clock (µs since the Unix epoch).
    pub at_us: u64,
    /// How late a probe task woke in that second: the agent's runtime under load.
    pub sched_lag_ms_p99: f64,
    /// CPU cores the agent used in that second.
    pub cpu: f64,
    pub rss_mb: f64,
    /// Event connections its players hold.
    pub connections: usize,
    /// Its players online (welcomed on their own device).
    #[serde(default)]
    pub online: usize,
    /// Its messages to the coordinator waiting to be sent.
    pub send_queue: usize,
}

/// A sign-in code asked for by an agent.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CodeRequest {
    pub email: String,
}

/// The coordinator's answer: the code, or why there is none.
pub type CodeReply = Result<String, String>;

/// A histogram as it travels: V2 with deflate, base64.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WireHistogram(pub String);

impl WireHistogram {
    pub fn encode(histogram: &Histogram<u64>) -> Self {
        let mut bytes = Vec::new();
        V2DeflateSerializer::new()
            .serialize(histogram, &mut bytes)
            .expect("a histogram serializes into memory");
        WireHistogram(STANDARD.encode(bytes))
    }

    pub fn decode(&self) -> Result<Histogram<u64>, ProtocolError> {
        let bytes = STANDARD
            .decode(&self.0)
            .map_err(|e| ProtocolError::Histogram(e.to_string()))?;
        Deserializer::new()
            .deserialize(&mut Cursor::new(bytes))
            .map_err(|e| ProtocolError::Histogram(format!("{e:?}")))
    }
}

/// One op of a scenario's result.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WireOp {
    pub count: u64,
    pub ok: u64,
    pub status: BTreeMap<String, u64>,
    pub latency: WireHistogram,
}

/// One second of a scenario's series.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WireSecond {
    pub calls: u64,
    pub errors: u64,
    #[serde(default)]
    pub limited: u64,
    pub latency: WireHistogram,
}

/// Presence deliveries as counts; their times are the `presence_delivery` op.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct WireDelivery {
    pub changes: u64,
    pub expected: u64,
    pub received: u64,
}

/// The storm as each returned player's time back.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WireStorm {
    pub kind: crate::settings::StormKind,
    pub reconnect: crate::reconnect::ReconnectMode,
    pub players_hit: usize,
    pub back_us: Vec<u64>,
}

/// One scenario as an agent played it: everything its report is made of, nothing computed.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ScenarioResult {
    /// Its name in reports: a `--scenarios` name, or `mixed`.
    pub scenario: String,
    pub seconds: f64,
    /// When its recording began, in ms after the phase's agreed start.
    pub began_ms: f64,
    pub ops: BTreeMap<String, WireOp>,
    pub series: Vec<WireSecond>,
    pub skipped_saturated: u64,
    pub rate: Option<RateReport>,
    pub players: Option<PlayersReport>,
    pub delivery: Option<WireDelivery>,
    pub storm: Option<WireStorm>,
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

impl ScenarioResult {
    /// `report`'s parts, its recording having begun `began_ms` after the phase's start.
    pub fn of(report: &ScenarioReport, began_ms: f64) -> Result<Self, ProtocolError> {
        let scenario = report_name(report.name)?.to_string();
        let snapshot = &report.snapshot;
        Ok(ScenarioResult {
            scenario,
            seconds: report.seconds,
            began_ms,
            ops: snapshot
                .ops
                .iter()
                .map(|(op, s)| {
                    let wire = WireOp {
                        count: s.count,
                        ok: s.ok,
                        status: s.status.iter().map(|(k, n)| (k.label(), *n)).collect(),
                        latency: WireHistogram::encode(&s.latency),
                    };
                    (op.name().to_string(), wire)
                })
                .collect(),
            series: snapshot
                .series
                .iter()
                .map(|s| WireSecond {
                    calls: s.calls,
                    errors: s.errors,
                    limited: s.limited,
                    latency: WireHistogram::encode(&s.latency),
                })
                .collect(),
            skipped_saturated: report.skipped_saturated,
            rate: report.rate.clone(),
            players: report.players.clone(),
            delivery: report.delivery.as_ref().map(|d| WireDelivery {
                changes: d.changes,
                expected: d.expected,
                received: d.received,
            }),
            storm: report.storm.as_ref().map(|s| WireStorm {
                kind: storm_kind_named(s.kind),
                reconnect: s.reconnect,
                players_hit: s.players_hit,
                back_us: s.back.iter().copied().map(micros).collect(),
            }),
        })
    }

    /// The recorded figures back as a snapshot.
    pub fn snapshot(&self) -> Result<Snapshot, ProtocolError> {
        let mut ops = BTreeMap::new();
        for (name, wire) in &self.ops {
            let op = Op::named(name).ok_or_else(|| ProtocolError::Unknown {
                what: "op",
                name: name.clone(),
            })?;
            let mut status = BTreeMap::new();
            for (label, n) in &wire.status {
                let key = Status::labelled(label).ok_or_else(|| ProtocolError::Unknown {
                    what: "status",
                    name: label.clone(),
                })?;
                status.insert(key, *n);
            }
            let stats = OpStats {
                latency: wire.latency.decode()?,
                count: wire.count,
                ok: wire.ok,
                status,
            };
            ops.insert(op, stats);
        }
        let series = self
            .series
            .iter()
            .map(|s| {
                Ok(Second {
                    calls: s.calls,
                    errors: s.errors,
                    limited: s.limited,
                    latency: s.latency.decode()?,
                })
            })
            .collect::<Result<_, ProtocolError>>()?;
        Ok(Snapshot { ops, series })
    }

    /// The scenario's report, as the agent made it.
    pub fn report(&self) -> Result<ScenarioReport, ProtocolError> {
        let snapshot = self.snapshot()?;
        let mut report = ScenarioReport::new(
            report_name(&self.scenario)?,
            &snapshot,
            Duration::try_from_secs_f64(self.seconds).unwrap_or_default(),
        );
        report.skipped_saturated = self.skipped_saturated;
        report.rate = self.rate.clone();
        report.players = self.players.clone();
        report.delivery = self
            .delivery
            .map(|d| DeliveryReport::new(d.changes, d.expected, d.received, &snapshot));
        report.storm = self.storm.as_ref().map(|s| {
            let back: Vec<Duration> = s
                .back_us
                .iter()
                .copied()
                .map(Duration::from_micros)
                .collect();
            StormReport {
                kind: s.kind.name(),
                reconnect: s.reconnect,
                players_hit: s.players_hit,
                players_back: back.len(),
                back_s: back_times(back.clone(), s.players_hit),
                errors: snapshot.http_calls().1,
                back,
            }
        });
        Ok(report)
    }
}

/// A scenario's name as reports hold it: a `--scenarios` name, or `mixed`.
fn report_name(name: &str) -> Result<&'static str, ProtocolError> {
    Scenario::value_variants()
        .iter()
        .map(|s| s.name())
        .chain([mixed::NAME])
        .find(|s| *s == name)
        .ok_or_else(|| ProtocolError::Unknown {
            what: "scenario",
            name: name.to_string(),
        })
}

fn storm_kind_named(name: &str) -> crate::settings::StormKind {
    crate::settings::StormKind::value_variants()
        .iter()
        .copied()
        .find(|k| k.name() == name)
        .expect("a storm report names its kind by StormKind::name")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::wire::AccountId;
    use crate::measure::facts::Fact;

    #[test]
    fn what_an_agent_tells_of_its_players_travels_and_comes_back() {
        let events = [
            Event::Facts {
                facts: vec![Stamped {
                    at: 1_700_000_000_000_000,
                    player: 3,
                    account: Some(AccountId(9)),
                    fact: Fact::SignOff { for_good: true },
                }],
            },
            Event::Left { players: 4 },
            Event::Reads(FinalReads {
                connected: vec![9],
                ..FinalReads::default()
            }),
        ];
        for event in events {
            let again: Event = decode(&encode(&event)).unwrap();
            assert_eq!(encode(&again), encode(&event));
        }
    }
}
