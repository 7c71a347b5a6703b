//! `report.json`: the run's verdict in the contract's schema (`anyplay-chaos/report/v1`),
//! built from the plan and the recorded history.

use serde::Serialize;

use crate::checks::{self, fault_table, CheckResult, FaultRow};
use crate::events::{Event, History, Machine, Tick, Tool};
use crate::plan::Plan;

pub const SCHEMA: &str = "anyplay-chaos/report/v1";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    Pass,
    Fail,
}

impl Verdict {
    /// The run's verdict: a pass only when every check passed; unknown is no pass.
    pub fn of(checks: &[CheckResult]) -> Verdict {
        if checks.iter().all(|c| c.result == checks::Verdict::Pass) {
            Verdict::Pass
        } else {
            Verdict::Fail
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    pub schema: &'static str,
    /// The resolved plan, in the same shape as the run's `plan.yaml`.
    pub plan: serde_json::Value,
    pub seed: u64,
    pub tool: Tool,
    /// `null` when the history has no `run_start` line.
    pub machine: Option<Machine>,
    pub started_at: Option<String>,
    pub verdict: Verdict,
    pub checks: Vec<CheckResult>,
    pub faults: Vec<FaultRow>,
    /// The load crate's own report, as it wrote it (`null` when absent).
    pub load: serde_json::Value,
    pub series: Vec<SeriesPoint>,
    /// Lines of `events.jsonl` that could not be read (torn by a crash, or damaged): the
    /// checks judged the history without them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unreadable_lines: Vec<usize>,
}

/// Fewer players online after the login wave than the plan asked for.
#[derive(Debug, Clone, PartialEq)]
pub struct LoginShortfall {
    pub asked: u64,
    pub online: u64,
    /// Logins the generator did not start because its in-flight limit was reached.
    pub skipped_saturated: u64,
    pub e2e_login_p50_ms: Option<f64>,
}

impl std::fmt::Display for LoginShortfall {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "only {} of {} players got online before the timeline; the checks judged those",
            self.online, self.asked
        )?;
        if self.skipped_saturated > 0 {
            write!(
                f,
                " ({} logins skipped: the login wave had its in-flight limit of logins running",
                self.skipped_saturated
            )?;
            if let Some(p50) = self.e2e_login_p50_ms {
                write!(f, ", a login took {} ms at p50", p50.round())?;
            }
            write!(f, "; a lower login_rate lets them all in)")?;
        }
        Ok(())
    }
}

/// One second of the run: the load's tick with its time.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SeriesPoint {
    pub t: f64,
    #[serde(flatten)]
    pub tick: Tick,
}

impl Report {
    /// Judges the history against the plan's limits. The seed, tool and machine are the
    /// run's own (its `run_start` line), not this process's.
    pub fn build(plan: &Plan, history: &History, load: serde_json::Value) -> Report {
        let grace = plan.checks.players_back.as_secs_f64();
        let checks = checks::run_all(history, &plan.checks, &plan.clients, plan.abort.as_ref());
        let verdict = Verdict::of(&checks);
        let meta = history.meta();
        Report {
            schema: SCHEMA,
            plan: plan.to_json(),
            seed: meta.map_or(plan.seed, |m| m.seed),
            tool: meta.map_or_else(Tool::current, |m| m.tool.clone()),
            machine: meta.map(|m| m.machine.clone()),
            started_at: meta.map(|m| m.started_at.clone()),
            verdict,
            checks,
            faults: fault_table::table(history, grace),
            load,
            series: history
                .iter()
                .filter_map(|(t, e)| match e {
                    Event::LoadTick(tick) => Some(SeriesPoint {
                        t: (t * 1000.0).round() / 1000.0,
                        tick: tick.clone(),
                    }),
                    _ => None,
                })
                .collect(),
            unreadable_lines: history.skipped_lines().to_vec(),
        }
    }

    /// How far the login wave fell short of the plan's players, read from the load's report:
    /// the checks judge only the players that got online, and a reader must see that.
    pub fn login_shortfall(&self) -> Option<LoginShortfall> {
        let login = self
            .load
            .get("scenarios")?
            .as_array()?
            .iter()
            .find(|s| s.get("name").and_then(|n| n.as_str()) == Some("login"))?;
        let count = |pointer: &str| login.pointer(pointer).and_then(|v| v.as_u64());
        let shortfall = LoginShortfall {
            asked: count("/players/asked")?,
            online: count("/players/online")?,
            skipped_saturated: count("/skipped_saturated").unwrap_or(0),
            e2e_login_p50_ms: login
                .pointer("/ops/e2e_login/p50_ms")
                .and_then(|v| v.as_f64()),
        };
        (shortfall.online < shortfall.asked).then_some(shortfall)
    }

    /// The plan's name, for titles.
    pub fn plan_name(&self) -> &str {
        self.plan
            .get("name")
            .and_then(|n| n.as_str())
            .unwrap_or("?")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::RunMeta;

    fn plan() -> Plan {
        Plan::from_yaml("name: tiny\nseed: 3\nload: {players: 2}\n").unwrap()
    }

    #[test]
    fn the_report_has_the_contract_fields_in_order() {
        let history: History = [
            (0.0, Event::RunStart(RunMeta::now("tiny", 3))),
            (1.0, Event::LoadTick(Tick::default())),
        ]
        .into_iter()
        .collect();
        let report = Report::build(&plan(), &history, serde_json::Value::Null);
        let json = serde_json::to_value(&report).unwrap();
        let mut keys: Vec<&str> = json
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        keys.sort_unstable();
        let mut expected = [
            "schema",
            "plan",
            "seed",
            "tool",
            "machine",
            "started_at",
            "verdict",
            "checks",
            "faults",
            "load",
            "series",
        ];
        expected.sort_unstable();
        assert_eq!(keys, expected);
        assert_eq!(json["schema"], SCHEMA);
        assert_eq!(json["seed"], 3);
        assert_eq!(json["plan"]["name"], "tiny");
        let point = json["series"][0].as_object().unwrap();
        for key in [
            "t",
            "online",
            "welcomes",
            "disconnects",
            "http_calls",
            "http_errors",
            "p99_ms",
            "presence_p99_ms",
            "nodes",
        ] {
            assert!(point.contains_key(key), "series lacks {key}");
        }
    }

    #[test]
    fn one_failed_check_fails_the_run() {
        // No samples and no ticks: those checks are unknown, hence failed.
        let report = Report::build(&plan(), &History::default(), serde_json::Value::Null);
        assert_eq!(report.verdict, Verdict::Fail);
        assert_eq!(serde_json::to_value(report.verdict).unwrap(), "fail");
    }

    #[test]
    fn an_unknown_check_alone_fails_the_run_and_each_check_writes_its_result() {
        let count = |name: &str| CheckResult::count(name, 0, 0, "");
        let mut checks = vec![count("a"), count("b")];
        assert_eq!(Verdict::of(&checks), Verdict::Pass);
        checks[1] = CheckResult::unknown("b", checks::Quantity::Count(0), "no samples");
        assert_eq!(Verdict::of(&checks), Verdict::Fail);
        let json = serde_json::to_string(&checks[1]).unwrap();
        assert_eq!(
            json,
            r#"{"name":"b","limit":0,"value":null,"pass":false,"result":"unknown","detail":"no samples"}"#
        );
    }
}
