//! The invariant checks: pure functions from the recorded history to a verdict (Jepsen
//! style), each testable on a hand-made history, plus the faults table.
//!
//! Each check ends `pass`, `fail` or `unknown`. A check with nothing to judge in this run (a
//! failover with one node) passes and says so; one that had something to judge but not the
//! evidence (no samples, no final state) is `unknown`, which fails the run, so missing
//! instrumentation shows. Every detail says how much was judged.

pub(crate) mod abort;
pub(crate) mod cards_privacy;
pub(crate) mod clients;
pub(crate) mod conns;
pub(crate) mod disconnects;
pub(crate) mod duplicates;
pub(crate) mod event_order;
pub(crate) mod events_missing;
pub(crate) mod failover;
pub(crate) mod fault_table;
pub(crate) mod going_online;
pub(crate) mod http_errors;
pub(crate) mod latency;
pub(crate) mod losses;
pub(crate) mod lost_writes;
pub(crate) mod model;
pub(crate) mod outages;
pub(crate) mod paths;
pub(crate) mod players_back;
pub(crate) mod presence;
pub(crate) mod quotas;
pub(crate) mod rate_limits;
pub(crate) mod session_integrity;
pub(crate) mod slow_consumers;
pub(crate) mod stale_online;
#[cfg(test)]
pub(crate) mod testing;
pub(crate) mod unexpected;

use std::fmt;

use serde::{Deserialize, Serialize, Serializer};

use crate::events::History;
use crate::plan::{Abort, Client, Limits};

pub use fault_table::FaultRow;

/// One check's verdict, as the report lists it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CheckResult {
    pub name: String,
    pub limit: Quantity,
    /// `null` when nothing could be measured (say, a player never came back).
    pub value: Option<Quantity>,
    /// `result == pass`, for readers of the v1 report.
    pub pass: bool,
    pub result: Verdict,
    pub detail: String,
}

/// How a check ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    Pass,
    Fail,
    /// Too little evidence to judge: the detail says what was missing.
    Unknown,
}

impl Verdict {
    /// `Pass` or `Fail`.
    pub fn of(pass: bool) -> Verdict {
        if pass {
            Verdict::Pass
        } else {
            Verdict::Fail
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Pass => "pass",
            Verdict::Fail => "fail",
            Verdict::Unknown => "unknown",
        }
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl CheckResult {
    pub fn new(
        name: impl Into<String>,
        limit: Quantity,
        value: Option<Quantity>,
        result: Verdict,
        detail: impl Into<String>,
    ) -> CheckResult {
        CheckResult {
            name: name.into(),
            limit,
            value,
            pass: result == Verdict::Pass,
            result,
            detail: detail.into(),
        }
    }

    /// A count held to its limit.
    pub fn count(name: &str, limit: u64, value: u64, detail: impl Into<String>) -> CheckResult {
        CheckResult::new(
            name,
            Quantity::Count(limit),
            Some(Quantity::Count(value)),
            Verdict::of(value <= limit),
            detail,
        )
    }

    /// Nothing this check judges happened in the run: a pass that says so.
    pub fn not_applicable(name: &str, limit: Quantity, detail: impl Into<String>) -> CheckResult {
        CheckResult::new(name, limit, None, Verdict::Pass, detail)
    }

    /// Something to judge, but not the evidence: `detail` says what was missing.
    pub fn unknown(name: &str, limit: Quantity, detail: impl Into<String>) -> CheckResult {
        CheckResult::new(name, limit, None, Verdict::Unknown, detail)
    }
}

/// A limit or a measured value; JSON writes it as a plain number.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Quantity {
    Count(u64),
    Seconds(f64),
    Ratio(f64),
    ExitCode(i32),
}

impl Serialize for Quantity {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match *self {
            Quantity::Count(n) => serializer.serialize_u64(n),
            Quantity::Seconds(s) => serializer.serialize_f64((s * 1000.0).round() / 1000.0),
            Quantity::Ratio(r) => serializer.serialize_f64(r),
            Quantity::ExitCode(c) => serializer.serialize_i32(c),
        }
    }
}

impl fmt::Display for Quantity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Quantity::Count(n) => write!(f, "{n}"),
            Quantity::Seconds(s) => write!(f, "{}s", fault_table::fmt_num(s)),
            Quantity::Ratio(r) => write!(f, "{}", fmt_ratio(r)),
            Quantity::ExitCode(c) => write!(f, "exit {c}"),
        }
    }
}

/// A ratio to three significant digits, in plain notation to compare with a limit like 0.001.
fn fmt_ratio(r: f64) -> String {
    if r <= 0.0 || !r.is_finite() {
        return format!("{r}");
    }
    let decimals = (2 - r.log10().floor() as i32).max(0) as usize;
    let text = format!("{r:.decimals$}");
    if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.').to_owned()
    } else {
        text
    }
}

/// Every check of a run, in report order; `client:<name>` last.
pub fn run_all(
    history: &History,
    limits: &Limits,
    clients: &[Client],
    abort: Option<&Abort>,
) -> Vec<CheckResult> {
    // Losses and errors are laid to a fault up to `players_back` after it ended.
    let grace = limits.players_back.as_secs_f64();
    // One model of the contract for every check that asks it.
    let model = model::Model::of(history);
    let mut results = vec![
        players_back::check(history, limits.players_back),
        duplicates::check(history, limits.duplicate_sessions),
        presence::check(history, &model, limits.presence_missing),
        events_missing::check(history, &model, limits.events_missing),
        lost_writes::check(history, &model, limits.lost_writes, grace),
        http_errors::check(history, limits.http_error_ratio, grace),
        // Nothing in a run may be refused by a limit but a burst past it: no room to give.
        rate_limits::check(history, 0),
        failover::check(history, limits.failover, grace),
        stale_online::check(history, limits.stale_online),
        event_order::check(history, limits.event_order),
        session_integrity::check(history, limits.session_integrity),
        unexpected::check(history, &model, limits.unexpected_events),
        disconnects::check(history, &model, limits.unexplained_disconnects, grace),
        // A reader far behind is closed 1013 by the contract: no room to give.
        slow_consumers::check(history, &model, 0),
        cards_privacy::check(history, &model, limits.cards_privacy),
    ];
    results.extend(
        limits
            .latency
            .iter()
            .map(|gate| latency::check(history, gate)),
    );
    // A history with a hole (a lost agent's players went on unrecorded, records that could
    // not be written or read back) is only part of the evidence, and a part can neither pass
    // nor fail the whole.
    if let Some(missing) = incomplete(history) {
        for result in &mut results {
            *result = CheckResult::unknown(
                &result.name,
                result.limit,
                format!(
                    "{missing} (on what was recorded: {}, {})",
                    result.result, result.detail
                ),
            );
        }
    }
    results.extend(
        clients
            .iter()
            .map(|c| clients::check(history, &c.name, c.expect_exit)),
    );
    results.extend(abort.map(|abort| abort::check(history, abort)));
    results
}

/// What the history misses, when it is not whole.
fn incomplete(history: &History) -> Option<String> {
    let mut missing = Vec::new();
    let lost = history.lost_agents();
    if !lost.is_empty() {
        missing.push(format!(
            "load agent {} lost: its players' facts are missing",
            lost.join(", ")
        ));
    }
    let unwritten = history.unwritten();
    if unwritten > 0 {
        missing.push(format!(
            "{unwritten} records could not be written to the history"
        ));
    }
    let skipped = history.skipped_lines();
    if !skipped.is_empty() {
        missing.push(format!(
            "{} lines of the history could not be read (line {})",
            skipped.len(),
            some(skipped, 3)
        ));
    }
    (!missing.is_empty()).then(|| missing.join("; "))
}

/// A detail's tail naming what was left unjudged: `; N what not judged` for each count
/// above zero.
fn not_judged<S: AsRef<str>>(counts: impl IntoIterator<Item = (u64, S)>) -> String {
    counts
        .into_iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, what)| format!("; {n} {} not judged", what.as_ref()))
        .collect()
}

/// `a, b, c` and `…` after `max` items, for details that name examples.
fn some<T: fmt::Display>(items: impl IntoIterator<Item = T>, max: usize) -> String {
    let mut out = Vec::new();
    let mut more = false;
    for (i, item) in items.into_iter().enumerate() {
        if i == max {
            more = true;
            break;
        }
        out.push(item.to_string());
    }
    let mut text = out.join(", ");
    if more {
        text.push_str(", …");
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities_are_plain_numbers_in_json() {
        let json = serde_json::to_string(&[
            Quantity::Count(3),
            Quantity::Seconds(1.23456),
            Quantity::Ratio(0.001),
            Quantity::ExitCode(-1),
        ])
        .unwrap();
        assert_eq!(json, "[3,1.235,0.001,-1]");
    }

    #[test]
    fn quantities_print_with_units() {
        assert_eq!(Quantity::Seconds(20.0).to_string(), "20s");
        assert_eq!(Quantity::Ratio(0.0004).to_string(), "0.0004");
        assert_eq!(Quantity::Ratio(0.001).to_string(), "0.001");
        assert_eq!(Quantity::Ratio(0.00123456).to_string(), "0.00123");
        assert_eq!(Quantity::Ratio(0.25).to_string(), "0.25");
        assert_eq!(Quantity::Ratio(1.0).to_string(), "1");
        assert_eq!(Quantity::Ratio(0.0).to_string(), "0");
        assert_eq!(Quantity::ExitCode(0).to_string(), "exit 0");
    }

    #[test]
    fn an_empty_history_runs_every_check() {
        let clients = vec![Client {
            name: "c".into(),
            cmd: "true".into(),
            expect_exit: 0,
        }];
        let results = run_all(&History::default(), &Limits::default(), &clients, None);
        let names: Vec<&str> = results.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "players_back",
                "duplicate_sessions",
                "presence_missing",
                "events_missing",
                "lost_writes",
                "http_error_ratio",
                "rate_limits",
                "failover",
                "stale_online",
                "event_order",
                "session_integrity",
                "unexpected_events",
                "unexplained_disconnects",
                "slow_consumers",
                "cards_privacy",
                "client:c"
            ]
        );
        // Nothing recorded: the checks that need evidence say so, and none of them passes
        // by default.
        let unknown: Vec<&str> = results
            .iter()
            .filter(|r| r.result == Verdict::Unknown)
            .map(|r| r.name.as_str())
            .collect();
        assert_eq!(
            unknown,
            [
                "duplicate_sessions",
                "presence_missing",
                "events_missing",
                "lost_writes",
                "http_error_ratio",
                "rate_limits",
                "stale_online",
                "event_order",
                "session_integrity",
                "unexpected_events",
                "unexplained_disconnects",
                "client:c",
            ]
        );
        assert!(results
            .iter()
            .all(|r| r.pass == (r.result == Verdict::Pass)));
    }

    #[test]
    fn a_lost_agent_leaves_every_player_check_unknown_and_names_it() {
        let history = History::new(vec![crate::events::Record {
            t: 3.0,
            event: crate::events::Event::AgentLost {
                agent: "agent-2".into(),
                first_player: 50,
                players: 50,
            },
        }]);
        let clients = vec![Client {
            name: "c".into(),
            cmd: "true".into(),
            expect_exit: 0,
        }];
        let results = run_all(&history, &Limits::default(), &clients, None);
        for result in results.iter().filter(|r| !r.name.starts_with("client:")) {
            assert_eq!(result.result, Verdict::Unknown, "{result:?}");
            assert!(result.detail.contains("agent-2 lost"), "{}", result.detail);
        }
    }

    #[test]
    fn a_history_with_a_hole_passes_no_check() {
        let whole = vec![crate::events::Record {
            t: 1.0,
            event: crate::events::Event::Note { text: "x".into() },
        }];
        let mut unwritten = whole.clone();
        unwritten.push(crate::events::Record {
            t: 2.0,
            event: crate::events::Event::Unwritten { records: 3 },
        });
        let results = run_all(&History::new(unwritten), &Limits::default(), &[], None);
        for result in &results {
            assert_eq!(result.result, Verdict::Unknown, "{result:?}");
            assert!(result.detail.contains("3 records could not be written"));
        }
        let dir = std::env::temp_dir().join(format!("anyplay-hole-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("events.jsonl");
        std::fs::write(
            &path,
            "{\"t\":1,\"kind\":\"note\",\"text\":\"a\"}\n{\"t\":2,\"ki\n",
        )
        .unwrap();
        let torn = crate::events::read_history(&path).unwrap();
        let results = run_all(&torn, &Limits::default(), &[], None);
        assert!(results.iter().all(|r| r.result == Verdict::Unknown
            && r.detail
                .contains("1 lines of the history could not be read (line 2)")));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_result_is_written_beside_pass() {
        let result = CheckResult::unknown("x", Quantity::Count(0), "no samples");
        let json = serde_json::to_value(&result).unwrap();
        assert_eq!(json["result"], "unknown");
        assert_eq!(json["pass"], false);
        let result = CheckResult::count("x", 1, 1, "");
        assert_eq!(serde_json::to_value(&result).unwrap()["result"], "pass");
    }

    #[test]
    fn not_judged_names_only_what_was_left() {
        assert_eq!(
            not_judged([(0, "a"), (2, "deliveries to b"), (1, "c")]),
            "; 2 deliveries to b not judged; 1 c not judged"
        );
        assert_eq!(not_judged::<&str>([]), "");
    }

    #[test]
    fn some_cuts_long_lists() {
        assert_eq!(some([1, 2, 3], 2), "1, 2, …");
        assert_eq!(some([1, 2], 2), "1, 2");
    }
}
