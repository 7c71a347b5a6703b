//! `anyplay-chaos selftest` (cargo feature `seeded-defects`): proves the checks by running
//! one short plan against the cloud as it is (every check must pass) and once per defect
//! built into the cloud on purpose (the check named for the defect must fail).
//!
//! The defect reaches the nodes through the plan's node environment
//! (`ANYPLAY_SEEDED_DEFECT`); the nodes are this binary, built with the same feature. A
//! release defect (one that breaks only a cluster mixing two releases) runs an upgrade plan
//! instead, the defect in its candidate's environment: the mixed cluster must fail, and the
//! same plan with every node on the candidate must pass.

use std::fmt;
use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, Ordering};

use anyplay_cloud::defects::SeededDefect;
use futures_util::future::LocalBoxFuture;
use futures_util::StreamExt;
use serde::Serialize;

use crate::checks::{self, Verdict as CheckVerdict};
use crate::events::{Machine, Tool};
use crate::plan::Plan;
use crate::report::Verdict;
use crate::runner::{self, RunError, RunOptions};

/// The shared plan: two nodes on PostgreSQL + NATS, churn, second devices, friend writes,
/// sessions raced for their last seat, a node killed and restarted, a node cut from
/// PostgreSQL, and a last kill with no restart before a settle longer than a lease.
pub const PLAN_PATH: &str = "plans/selftest/selftest.yaml";
const PLAN_YAML: &str = include_str!("../../plans/selftest/selftest.yaml");
/// The release defects' plan: node-1 upgraded to the candidate, node-2 left on the release.
pub const UPGRADE_PLAN_PATH: &str = "plans/selftest/upgrade.yaml";
const UPGRADE_PLAN_YAML: &str = include_str!("../../plans/selftest/upgrade.yaml");

/// The file names the self-test writes beside its runs.
pub const JSON_FILE: &str = "selftest.json";
pub const MARKDOWN_FILE: &str = "selftest.md";

/// One run of the self-test: the cloud as it is, with one defect, or with a release defect
/// in every node alike.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Case {
    Clean,
    Defect(SeededDefect),
    /// A release defect on every node: nothing is mixed, so every check must pass.
    Alike(SeededDefect),
}

/// The plans the cases run, as validated once.
pub struct Plans {
    shared: Plan,
    upgrade: Plan,
}

impl Plans {
    pub fn load() -> Result<Plans, crate::plan::PlanError> {
        Ok(Plans {
            shared: Plan::from_yaml(PLAN_YAML)?,
            upgrade: Plan::from_yaml(UPGRADE_PLAN_YAML)?,
        })
    }
}

/// The version the upgrade plan moves node-1 to, which carries a release defect.
const CANDIDATE: &str = "candidate";

impl Case {
    /// The clean run first, then every defect, then the release defects alike.
    pub fn all() -> Vec<Case> {
        std::iter::once(Case::Clean)
            .chain(SeededDefect::ALL.into_iter().map(Case::Defect))
            .chain(
                SeededDefect::ALL
                    .into_iter()
                    .filter(|d| d.between_releases())
                    .map(Case::Alike),
            )
            .collect()
    }

    /// Runs a missed case may take: two for a defect that only a load fast enough against the
    /// machine exercises. A slow reader's friends flood it one answered change at a time;
    /// beside the build and the tests a 2-core machine answered them about as fast as the
    /// reader reads, so no spell got past its queue and the check had nothing to judge.
    pub fn attempts(self) -> usize {
        match self {
            Case::Defect(SeededDefect::SlowConsumersKept) => 2,
            _ => 1,
        }
    }

    /// The checks one of which must fail (`None`: every check must pass).
    pub fn expected_checks(self) -> Option<&'static [&'static str]> {
        let Case::Defect(defect) = self else {
            return None;
        };
        Some(match defect {
            SeededDefect::NoCrossNodeReplace => &[checks::duplicates::NAME],
            // Dropped events of every kind: activity changes and the rest are owed alike.
            SeededDefect::DropCrossNodeEvents => {
                &[checks::presence::NAME, checks::events_missing::NAME]
            }
            SeededDefect::UndoSessionJoin
            | SeededDefect::UndoFriendshipInFault
            | SeededDefect::RefuseAccepts
            | SeededDefect::BlockKeepsFriends
            | SeededDefect::BlockRefusalsSwapped
            | SeededDefect::LogoutKeepsTokens
            | SeededDefect::LogoutLeavesSocket
            | SeededDefect::FullASeatEarly
            | SeededDefect::DailyLimitHalved
            | SeededDefect::DailyLimitIgnored => &[checks::lost_writes::NAME],
            SeededDefect::LeasesNeverExpire => &[checks::stale_online::NAME],
            SeededDefect::SkipSeq => &[checks::event_order::NAME],
            SeededDefect::SessionOneTooMany | SeededDefect::NewestLeads => {
                &[checks::session_integrity::NAME]
            }
            SeededDefect::UnreplacedClose | SeededDefect::DropHealthyConnections => {
                &[checks::disconnects::NAME]
            }
            SeededDefect::PresenceToStrangers | SeededDefect::PresenceVersionBumped => {
                &[checks::unexpected::NAME]
            }
            SeededDefect::SilentLeaves
            | SeededDefect::SilentSignOffs
            | SeededDefect::SilentLeaderChanges => &[checks::events_missing::NAME],
            SeededDefect::PrivateCardsToFriends | SeededDefect::CardsThroughBlocks => {
                &[checks::cards_privacy::NAME]
            }
            SeededDefect::NoRetryAfter | SeededDefect::LenientLimits => {
                &[checks::rate_limits::NAME]
            }
            SeededDefect::SlowConsumersKept => &[checks::slow_consumers::NAME],
            // An old node cannot read the new node's events, nor the new node the old one's.
            SeededDefect::BusFieldRenamed => {
                &[checks::presence::NAME, checks::events_missing::NAME]
            }
            // An old node fails every account it loads from the renamed table.
            SeededDefect::MigrationRenamesColumn => &[checks::http_errors::NAME],
        })
    }

    /// The plan file this case runs.
    pub fn plan_path(self) -> &'static str {
        match self.release_defect() {
            Some(_) => UPGRADE_PLAN_PATH,
            None => PLAN_PATH,
        }
    }

    fn release_defect(self) -> Option<SeededDefect> {
        match self {
            Case::Defect(d) | Case::Alike(d) if d.between_releases() => Some(d),
            _ => None,
        }
    }

    /// The plan this case runs: the shared one with the defect in the nodes' environment;
    /// for a release defect the upgrade plan with the defect in its candidate's, and every
    /// node starting on the candidate when `Alike`.
    pub fn plan(self, plans: &Plans) -> Plan {
        let (Case::Defect(defect) | Case::Alike(defect)) = self else {
            return plans.shared.clone();
        };
        let defect_env = ("ANYPLAY_SEEDED_DEFECT".to_owned(), defect.name().to_owned());
        let mut plan = match self.release_defect() {
            None => {
                let mut plan = plans.shared.clone();
                plan.services.nodes.env.extend([defect_env]);
                // Its spells start in the timeline's first seconds, where the node kill and
                // the store cut left the nodes answering the floods too slowly to matter.
                if defect == SeededDefect::SlowConsumersKept {
                    plan.timeline.retain(|entry| entry.at >= SPELLS_UNTIL);
                }
                plan
            }
            Some(_) => {
                let mut plan = plans.upgrade.clone();
                let candidate = CANDIDATE.parse().expect("a version name");
                plan.versions
                    .get_mut(&candidate)
                    .expect("the upgrade plan declares its candidate")
                    .env
                    .extend([defect_env]);
                if let Case::Alike(_) = self {
                    plan.services.nodes.version = candidate;
                }
                plan
            }
        };
        plan.name = format!("{}-{self}", plan.name);
        plan
    }
}

/// How long into the timeline the slow readers' spells of the shared plan run: the faults
/// before are left out of `slow-consumers-kept`'s run.
const SPELLS_UNTIL: std::time::Duration = std::time::Duration::from_secs(30);

/// A release defect on every node alike: `bus-field-renamed-alike`.
const ALIKE: &str = "-alike";

impl fmt::Display for Case {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Case::Clean => f.write_str("clean"),
            Case::Defect(defect) => write!(f, "{defect}"),
            Case::Alike(defect) => write!(f, "{defect}{ALIKE}"),
        }
    }
}

impl FromStr for Case {
    type Err = String;

    fn from_str(s: &str) -> Result<Case, String> {
        Case::all()
            .into_iter()
            .find(|case| case.to_string() == s)
            .ok_or_else(|| {
                let names: Vec<String> = Case::all().iter().map(|c| c.to_string()).collect();
                format!("{s:?}: not a case of the self-test ({})", names.join(", "))
            })
    }
}

/// How one case ended, as the table shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    /// Clean run: every check passed.
    Pass,
    /// Clean run: a check failed.
    Fail,
    /// The defect made its check fail.
    Caught,
    /// The defect's check passed (or could not judge).
    Missed,
}

impl Outcome {
    pub fn expected(self) -> bool {
        matches!(self, Outcome::Pass | Outcome::Caught)
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Outcome::Pass => "pass",
            Outcome::Fail => "fail",
            Outcome::Caught => "caught",
            Outcome::Missed => "missed",
        })
    }
}

/// One row of the table.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub defect: String,
    pub plan: String,
    /// `every check passes` for the clean run.
    pub expected_check: String,
    pub result: Outcome,
    /// The expected check's detail; for the clean run, the failed checks' (if any).
    pub detail: String,
    /// Other checks that failed in this run, beside the expected one.
    pub also_failed: Vec<String>,
    pub run_dir: PathBuf,
    /// The runs this row took ([`Case::attempts`]); the row is the last one's.
    pub runs: usize,
}

/// What `selftest.json` holds.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    pub passed: bool,
    pub seed: u64,
    pub tool: Tool,
    pub machine: Machine,
    /// The command line that produced it.
    pub command: String,
    pub rows: Vec<Row>,
}

/// Judges one finished run of `case`.
pub fn judge(case: Case, report: &crate::report::Report, dir: &Path) -> Row {
    let failed: Vec<&checks::CheckResult> = report
        .checks
        .iter()
        .filter(|c| c.result != CheckVerdict::Pass)
        .collect();
    let (expected_check, result, detail, also_failed) = match case.expected_checks() {
        None => (
            "every check passes".to_owned(),
            if report.verdict == Verdict::Pass {
                Outcome::Pass
            } else {
                Outcome::Fail
            },
            failed
                .iter()
                .map(|c| format!("{}: {}", c.name, c.detail))
                .collect::<Vec<_>>()
                .join("; "),
            failed.iter().map(|c| c.name.clone()).collect(),
        ),
        Some(names) => {
            let checks: Vec<&checks::CheckResult> = report
                .checks
                .iter()
                .filter(|c| names.contains(&c.name.as_str()))
                .collect();
            let caught = checks.iter().any(|c| c.result == CheckVerdict::Fail);
            let detail = checks
                .iter()
                .map(|c| c.detail.as_str())
                .collect::<Vec<_>>()
                .join("; ");
            (
                names.join(" or "),
                if caught {
                    Outcome::Caught
                } else {
                    Outcome::Missed
                },
                if checks.is_empty() {
                    "the check did not run".to_owned()
                } else {
                    detail
                },
                failed
                    .iter()
                    .filter(|c| !names.contains(&c.name.as_str()))
                    .map(|c| c.name.clone())
                    .collect(),
            )
        }
    };
    Row {
        defect: match case {
            Case::Clean => "(none)".to_owned(),
            Case::Defect(d) => d.name().to_owned(),
            Case::Alike(d) => format!("{d} on every node alike"),
        },
        plan: case.plan_path().to_owned(),
        expected_check,
        result,
        detail,
        also_failed,
        run_dir: dir.to_owned(),
        runs: 1,
    }
}

/// The table, as printed and as `selftest.md` holds it.
pub fn table(rows: &[Row]) -> String {
    let mut out = String::from(
        "| defect | plan | expected check | result | also failed |\n|---|---|---|---|---|\n",
    );
    for row in rows {
        let also = if row.also_failed.is_empty() {
            "-".to_owned()
        } else {
            row.also_failed.join(", ")
        };
        let result = match row.runs {
            1 => row.result.to_string(),
            n => format!("{} (run {n})", row.result),
        };
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} |\n",
            row.defect, row.plan, row.expected_check, result, also
        ));
    }
    out
}

/// `selftest.md`: the table, then each row's detail.
pub fn markdown(summary: &Summary) -> String {
    let mut out = format!(
        "# Self-test: {}\n\nCommand: `{}`  \nCommit: {} (anyplay {})  \nMachine: {}, {} cores, {} MB, {}  \nSeed: {}\n\n",
        if summary.passed { "passed" } else { "FAILED" },
        summary.command,
        summary.tool.commit,
        summary.tool.version,
        summary.machine.cpu,
        summary.machine.cores,
        summary.machine.memory_mb,
        summary.machine.os,
        summary.seed,
    );
    out.push_str(&table(&summary.rows));
    out.push_str("\n## Details\n\n");
    for row in &summary.rows {
        out.push_str(&format!(
            "- **{}** ({}, {}): {}  \n  run: `{}`\n",
            row.defect,
            row.expected_check,
            row.result,
            if row.detail.is_empty() {
                "-"
            } else {
                &row.detail
            },
            row.run_dir.display()
        ));
    }
    out
}

/// Runs `case` into `out/<case>`, and once more into `out/<case>.run-2` when it missed and
/// [`Case::attempts`] allows; the last run's row, with the details of those that missed.
async fn run_case(
    case: Case,
    plans: &Plans,
    out: &Path,
    interrupted: &AtomicBool,
) -> Result<Row, RunError> {
    let mut earlier = Vec::new();
    let mut attempt = 1;
    loop {
        let name = match attempt {
            1 => case.to_string(),
            n => format!("{case}.run-{n}"),
        };
        eprintln!("anyplay-chaos selftest: {name}");
        let finished = runner::run(RunOptions {
            plan: case.plan(plans),
            out: Some(out.join(&name)),
            seed: None,
            images: Vec::new(),
            metrics: None,
        })
        .await?;
        interrupted.fetch_or(finished.interrupted, Ordering::SeqCst);
        let mut row = judge(case, &finished.report, &finished.dir);
        eprintln!("anyplay-chaos selftest: {name}: {}", row.result);
        let again = row.result == Outcome::Missed
            && attempt < case.attempts()
            && !interrupted.load(Ordering::SeqCst);
        if !again {
            row.runs = attempt;
            for detail in earlier {
                row.detail
                    .push_str(&format!("; an earlier run missed: {detail}"));
            }
            return Ok(row);
        }
        earlier.push(row.detail);
        attempt += 1;
    }
}

/// Runs the cases, `jobs` at a time, each into `out/<case>`, and writes the summary files
/// there. After an interrupted run no further case starts; the ones running end as they do.
/// Boxed, as `runner::run`.
pub fn run<'a>(
    cases: &'a [Case],
    out: &'a Path,
    jobs: NonZeroUsize,
    command: String,
) -> LocalBoxFuture<'a, Result<Summary, RunError>> {
    Box::pin(async move {
        let plans = Plans::load()?;
        let interrupted = AtomicBool::new(false);
        let mut finished: Vec<(usize, Result<Option<Row>, RunError>)> =
            futures_util::stream::iter(cases.iter().enumerate())
                .map(|(order, &case)| {
                    let (plans, interrupted) = (&plans, &interrupted);
                    let run = async move {
                        if interrupted.load(Ordering::SeqCst) {
                            return Ok(None);
                        }
                        run_case(case, plans, out, interrupted).await.map(Some)
                    };
                    async move { (order, run.await) }
                })
                // A case starts as soon as any running one ends, not only the oldest.
                .buffer_unordered(jobs.get())
                .collect()
                .await;
        finished.sort_by_key(|(order, _)| *order);
        // Every started run has ended (and cleaned up) before an error is reported.
        let mut rows = Vec::new();
        for (_, row) in finished {
            rows.extend(row?);
        }
        let summary = Summary {
            passed: rows.len() == cases.len() && rows.iter().all(|r| r.result.expected()),
            seed: plans.shared.seed,
            tool: Tool::current(),
            machine: Machine::detect(),
            command,
            rows,
        };
        let write = |name: &str, text: String| {
            let path = out.join(name);
            std::fs::write(&path, text).map_err(runner::file(&path))
        };
        write(
            JSON_FILE,
            serde_json::to_string_pretty(&summary).expect("the summary serializes"),
        )?;
        write(MARKDOWN_FILE, markdown(&summary))?;
        Ok(summary)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::VersionName;

    #[test]
    fn the_plans_are_valid_and_short() {
        let plans = Plans::load().expect("the self-test's plans are valid");
        for plan in [&plans.shared, &plans.upgrade] {
            let timeline = plan.resolve(plan.seed).unwrap();
            let length = timeline.length();
            assert!(
                length + plan.settle <= std::time::Duration::from_secs(60),
                "{}: timeline {length:?} + settle {:?}",
                plan.name,
                plan.settle
            );
        }
    }

    #[test]
    fn every_case_names_its_checks_and_parses_back() {
        for case in Case::all() {
            assert_eq!(case.to_string().parse::<Case>(), Ok(case));
            let must_pass = matches!(case, Case::Clean | Case::Alike(_));
            assert_eq!(case.expected_checks().is_none(), must_pass, "{case}");
        }
        assert!(Case::all().contains(&Case::Alike(SeededDefect::BusFieldRenamed)));
        assert!(!Case::all().contains(&Case::Alike(SeededDefect::SkipSeq)));
    }

    #[test]
    fn a_defect_reaches_the_nodes_through_their_environment() {
        let plans = Plans::load().unwrap();
        let plan = Case::Defect(SeededDefect::SkipSeq).plan(&plans);
        assert_eq!(
            plan.services.nodes.env.get("ANYPLAY_SEEDED_DEFECT"),
            Some(&"skip-seq".to_owned())
        );
        assert!(!Case::Clean
            .plan(&plans)
            .services
            .nodes
            .env
            .contains_key("ANYPLAY_SEEDED_DEFECT"));
    }

    #[test]
    fn a_release_defect_reaches_only_the_candidate_unless_alike() {
        let plans = Plans::load().unwrap();
        let candidate: VersionName = CANDIDATE.parse().unwrap();
        let defect = SeededDefect::MigrationRenamesColumn;
        let mixed = Case::Defect(defect).plan(&plans);
        assert_eq!(
            mixed.versions[&candidate].env.get("ANYPLAY_SEEDED_DEFECT"),
            Some(&defect.name().to_owned())
        );
        assert!(!mixed
            .services
            .nodes
            .env
            .contains_key("ANYPLAY_SEEDED_DEFECT"));
        assert_eq!(mixed.services.nodes.version, VersionName::BUILT_IN);
        let alike = Case::Alike(defect).plan(&plans);
        assert_eq!(alike.services.nodes.version, candidate);
        assert_eq!(Case::Alike(defect).plan_path(), UPGRADE_PLAN_PATH);
        assert_eq!(Case::Defect(SeededDefect::SkipSeq).plan_path(), PLAN_PATH);
    }

    #[test]
    fn only_a_pace_bound_defect_runs_again_and_the_table_says_which_run_caught_it() {
        let again: Vec<Case> = Case::all()
            .into_iter()
            .filter(|c| c.attempts() > 1)
            .collect();
        assert_eq!(again, [Case::Defect(SeededDefect::SlowConsumersKept)]);
        let row = |runs| Row {
            defect: "slow-consumers-kept".into(),
            plan: PLAN_PATH.into(),
            expected_check: "slow_consumers".into(),
            result: Outcome::Caught,
            detail: String::new(),
            also_failed: Vec::new(),
            run_dir: PathBuf::new(),
            runs,
        };
        let table = table(&[row(1), row(2)]);
        assert!(table.contains("| slow_consumers | caught | - |"), "{table}");
        assert!(
            table.contains("| slow_consumers | caught (run 2) | - |"),
            "{table}"
        );
    }

    #[test]
    fn slow_consumers_kept_runs_the_shared_plan_without_its_early_faults() {
        let plans = Plans::load().unwrap();
        let plan = Case::Defect(SeededDefect::SlowConsumersKept).plan(&plans);
        assert!(plan.timeline.iter().all(|e| e.at >= SPELLS_UNTIL));
        assert!(!plan.timeline.is_empty(), "the last kill stays");
        assert!(plans.shared.timeline.iter().any(|e| e.at < SPELLS_UNTIL));
    }
}
