//! The run's report: the JSON schema of the contract (`anyplay-load/report/v1`) as types, built
//! from the recorders; [`json`] writes it and [`table`] prints it.

pub mod json;
pub mod table;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::measure::generator::{GeneratorReport, ProcessReport};
use crate::measure::provenance::Machine;
use crate::measure::stats::{ms, Op, OpStats, Snapshot, Status};
use crate::schedule::{Outcome, Plan};
use crate::settings::Settings;
use crate::target::metrics::Metrics;

pub const SCHEMA: &str = "anyplay-load/report/v1";

#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub schema: &'static str,
    pub machine: Machine,
    pub settings: Settings,
    pub commit: String,
    pub date: String,
    pub generator: GeneratorReport,
    pub scenarios: Vec<ScenarioReport>,
    /// Per node, the `/metrics` series that moved during the run.
    pub server: BTreeMap<String, Metrics>,
    pub process: ProcessReport,
    /// The load agents that played the run (`--agents`): their shares, clocks and health.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agents: Option<Vec<AgentReport>>,
    /// True when a load agent stopped answering: the figures lack its players from then on.
    pub incomplete: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct OpReport {
    pub count: u64,
    pub ok: u64,
    pub p50_ms: f64,
    pub p95_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    pub status: BTreeMap<Status, u64>,
}

impl From<&OpStats> for OpReport {
    fn from(s: &OpStats) -> Self {
        let q = |q| ms(s.latency.value_at_quantile(q));
        OpReport {
            count: s.count,
            ok: s.ok,
            p50_ms: q(0.5),
            p95_ms: q(0.95),
            p99_ms: q(0.99),
            max_ms: ms(s.latency.max()),
            status: s.status.clone(),
        }
    }
}

/// One second of a scenario.
#[derive(Debug, Clone, Serialize)]
pub struct SecondReport {
    pub t: u64,
    pub calls: u64,
    pub errors: u64,
    pub p99_ms: f64,
}

/// Whether an open-loop scenario started its operations at the rate it was asked for.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RateReport {
    pub target_per_s: f64,
    pub achieved_per_s: f64,
    pub reached: bool,
}

impl RateReport {
    /// Reached: at least 95 % of the asked rate started, and nothing skipped for saturation.
    pub fn new(plan: &Plan, outcome: &Outcome) -> Self {
        let achieved_per_s = outcome.achieved_rate(plan);
        RateReport {
            target_per_s: plan.rate,
            achieved_per_s,
            reached: outcome.skipped_saturated == 0 && achieved_per_s >= 0.95 * plan.rate,
        }
    }
}

/// The login wave: how many of the players asked for ended online.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PlayersReport {
    pub asked: usize,
    pub online: usize,
}

/// Presence delivery: expected events against received ones (a later version counts), and
/// the time from send to receipt.
#[derive(Debug, Clone, Serialize)]
pub struct DeliveryReport {
    pub changes: u64,
    pub expected: u64,
    pub received: u64,
    pub missing: u64,
    pub p50_ms: f64,
    pub p95_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

impl DeliveryReport {
    /// The counts, and the delivery times `snapshot` recorded.
    pub fn new(changes: u64, expected: u64, received: u64, snapshot: &Snapshot) -> Self {
        let latency = snapshot.ops.get(&Op::PresenceDelivery).map(|s| &s.latency);
        let q = |q: f64| latency.map_or(0.0, |h| ms(h.value_at_quantile(q)));
        DeliveryReport {
            changes,
            expected,
            received,
            missing: expected.saturating_sub(received),
            p50_ms: q(0.5),
            p95_ms: q(0.95),
            p99_ms: q(0.99),
            max_ms: latency.map_or(0.0, |h| ms(h.max())),
        }
    }
}

/// How the players came back after the storm.
#[derive(Debug, Clone, Serialize)]
pub struct StormReport {
    pub kind: &'static str,
    pub reconnect: crate::reconnect::ReconnectMode,
    pub players_hit: usize,
    pub players_back: usize,
    pub back_s: BackTimes,
    /// Failed calls and connection attempts during the storm.
    pub errors: u64,
    /// Each returned player's time back, so that storms of load agents merge exactly.
    #[serde(skip)]
    pub back: Vec<Duration>,
}

/// Seconds from the break until 50/90/95/99/100 % of the hit players had a welcome again;
/// null for a share not reached within the timeout.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct BackTimes {
    #[serde(rename = "50")]
    pub p50: Option<f64>,
    #[serde(rename = "90")]
    pub p90: Option<f64>,
    #[serde(rename = "95")]
    pub p95: Option<f64>,
    #[serde(rename = "99")]
    pub p99: Option<f64>,
    #[serde(rename = "100")]
    pub all: Option<f64>,
}

impl BackTimes {
    /// The shares in percent with their times, in order.
    pub fn shares(&self) -> [(u32, Option<f64>); 5] {
        [
            (50, self.p50),
            (90, self.p90),
            (95, self.p95),
            (99, self.p99),
            (100, self.all),
        ]
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct RungReport {
    pub players: usize,
    pub online: usize,
    pub ramp_p99_ms: f64,
    pub steady_p99_ms: f64,
    pub steady_calls: u64,
    pub steady_errors: u64,
    pub skipped_saturated: u64,
    pub within_budget: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct LadderReport {
    pub budget_ms: f64,
    pub rungs: Vec<RungReport>,
    /// The last rung whose steady p99 was within the budget.
    pub knee: Option<usize>,
}

#[derive(Debug, Clone, Serialize)]
pub struct ScenarioReport {
    pub name: &'static str,
    pub seconds: f64,
    pub http_calls_per_s: f64,
    pub ops: BTreeMap<Op, OpReport>,
    pub skipped_saturated: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rate: Option<RateReport>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub players: Option<PlayersReport>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delivery: Option<DeliveryReport>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub storm: Option<StormReport>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ladder: Option<LadderReport>,
    pub series: Vec<SecondReport>,
    /// What the figures above were made from, so that reports of load agents merge exactly.
    #[serde(skip)]
    pub snapshot: Snapshot,
    /// When its recording began (a load agent tells it relative to the agreed start).
    #[serde(skip)]
    pub began: Instant,
}

impl ScenarioReport {
    /// The common part of a scenario's report, from what it recorded over `elapsed`.
    pub fn new(name: &'static str, snapshot: &Snapshot, elapsed: Duration) -> Self {
        let seconds = elapsed.as_secs_f64();
        let (calls, _) = snapshot.http_calls();
        ScenarioReport {
            name,
            seconds,
            http_calls_per_s: if seconds > 0.0 {
                calls as f64 / seconds
            } else {
                0.0
            },
            ops: snapshot
                .ops
                .iter()
                .map(|(op, stats)| (*op, OpReport::from(stats)))
                .collect(),
            skipped_saturated: 0,
            rate: None,
            players: None,
            delivery: None,
            storm: None,
            ladder: None,
            series: snapshot
                .series
                .iter()
                .enumerate()
                .map(|(t, s)| SecondReport {
                    t: t as u64,
                    calls: s.calls,
                    errors: s.errors,
                    p99_ms: s.p99_ms().unwrap_or(0.0),
                })
                .collect(),
            snapshot: snapshot.clone(),
            began: Instant::now()
                .checked_sub(elapsed)
                .unwrap_or_else(Instant::now),
        }
    }

    /// Adds what the scheduler did.
    pub fn scheduled(mut self, plan: &Plan, outcome: &Outcome) -> Self {
        self.skipped_saturated += outcome.skipped_saturated;
        self.rate = Some(RateReport::new(plan, outcome));
        self
    }
}

/// One agent in the run's report.
#[derive(Debug, Clone, Serialize)]
pub struct AgentReport {
    pub name: String,
    /// Its players: the first one's number in the run, and how many.
    pub players: [usize; 2],
    /// Its clock minus the coordinator's.
    pub clock_offset_ms: f64,
    /// The round trip of the ping the offset came from.
    pub rtt_ms: f64,
    pub health: Vec<HealthReport>,
    /// It stopped answering during the run: its players are missing from then on.
    pub lost: bool,
    /// When it was found lost, in seconds after the first phase's start.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lost_at_s: Option<f64>,
}

/// One second of an agent's health, at `t` seconds after the first phase's start (by the
/// coordinator's clock; negative before it).
#[derive(Debug, Clone, Serialize)]
pub struct HealthReport {
    pub t: f64,
    pub sched_lag_ms_p99: f64,
    pub cpu: f64,
    pub rss_mb: f64,
    pub connections: usize,
    pub send_queue: usize,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::stats::Recorder;

    #[test]
    fn a_scenario_has_every_field_the_contract_names() {
        let recorder = Recorder::new();
        recorder.record(Op::PresenceSet, Duration::from_millis(3), Status::Http(204));
        recorder.record(Op::PresenceSet, Duration::from_millis(5), Status::NoAnswer);
        let plan = Plan {
            rate: 10.0,
            count: 2,
            max_in_flight: 5,
        };
        let outcome = Outcome {
            started: 2,
            skipped_saturated: 0,
            elapsed: Duration::from_secs(1),
            start_span: Duration::from_secs(1),
        };
        let mut report =
            ScenarioReport::new("presence", &recorder.snapshot(), Duration::from_secs(2))
                .scheduled(&plan, &outcome);
        report.delivery = Some(DeliveryReport {
            changes: 1,
            expected: 2,
            received: 2,
            missing: 0,
            p50_ms: 1.0,
            p95_ms: 1.0,
            p99_ms: 1.0,
            max_ms: 1.0,
        });
        let v = serde_json::to_value(&report).expect("serializes");
        for key in [
            "name",
            "seconds",
            "http_calls_per_s",
            "ops",
            "skipped_saturated",
            "delivery",
            "series",
        ] {
            assert!(v.get(key).is_some(), "missing {key}: {v}");
        }
        assert!(
            v.get("storm").is_none(),
            "storm is for the storm scenario only"
        );
        let op = &v["ops"]["presence_set"];
        for key in [
            "count", "ok", "p50_ms", "p95_ms", "p99_ms", "max_ms", "status",
        ] {
            assert!(
                op.get(key).is_some(),
                "missing ops.presence_set.{key}: {op}"
            );
        }
        assert_eq!(op["status"]["204"], 1);
        assert_eq!(op["status"]["no_answer"], 1);
        assert_eq!(v["http_calls_per_s"], 1.0);
        let second = &v["series"][0];
        for key in ["t", "calls", "errors", "p99_ms"] {
            assert!(second.get(key).is_some(), "missing series.{key}: {second}");
        }
        assert_eq!(
            v["rate"]["reached"], false,
            "2 of 10/s is not the rate asked"
        );
    }
}
