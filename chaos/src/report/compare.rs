//! `compare A B`: two runs' checks and faults side by side, each change judged better,
//! worse or the same within noise, for a release gate against a stored baseline: a check
//! that A passed and B fails is a regression.
//!
//! It reads stored `report.json` files (a baseline may come from an older build), so it
//! works from the contract's JSON, not from a run judged again.
//!
//! Noise: times are the same within 10 % or 0.5 s, counts within 10 %, ratios within 10 %
//! or 0.0001; a client's exit code only by its pass or fail. A latency gate (`latency.<op>`)
//! is the same within the tolerance the gate asks (`--latency-tolerance`, default 20 %), and
//! slower than that is a regression even where both runs pass.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::checks::{Quantity, Verdict};
use crate::events::Tool;
use crate::plan::ActionKind;
use crate::report::json::SCHEMA;
use crate::report::markdown::table;
use crate::report::REPORT_FILE;

#[derive(Debug, thiserror::Error)]
pub enum CompareError {
    #[error("cannot read {}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{} is not a run report", path.display())]
    Parse {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    #[error("{} is a `{found}` report; compare reads `{SCHEMA}`", path.display())]
    Schema { path: PathBuf, found: String },
}

/// What a comparison needs of a stored `report.json`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Stored {
    /// Where it was read from.
    #[serde(skip)]
    pub path: PathBuf,
    pub schema: String,
    pub plan: serde_json::Value,
    pub seed: u64,
    pub tool: Tool,
    pub checks: Vec<StoredCheck>,
    pub faults: Vec<StoredFault>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct StoredCheck {
    pub name: String,
    pub limit: f64,
    pub value: Option<f64>,
    pub pass: bool,
    /// Absent in v1 reports, which knew only pass and fail.
    #[serde(default)]
    pub result: Option<Verdict>,
    #[serde(default)]
    pub detail: String,
}

impl StoredCheck {
    /// `pass`, `FAIL` or `UNKNOWN` (unknown counts as not passing).
    fn outcome(&self) -> &'static str {
        match self.result {
            Some(Verdict::Unknown) => "UNKNOWN",
            _ if self.pass => "pass",
            _ => "FAIL",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct StoredFault {
    pub action: ActionKind,
    pub target: String,
    pub at: f64,
    pub players_hit: u64,
    pub back_s: StoredBack,
    pub errors: u64,
}

/// The seconds until every player hit was back (`None`: never, or nobody was hit).
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
pub struct StoredBack {
    #[serde(rename = "100")]
    pub p100: Option<f64>,
}

impl Stored {
    fn plan_name(&self) -> &str {
        self.plan
            .get("name")
            .and_then(|n| n.as_str())
            .unwrap_or("?")
    }

    fn passed(&self) -> usize {
        self.checks.iter().filter(|c| c.pass).count()
    }
}

/// Reads a run directory's `report.json`, or a `report.json` file itself.
pub fn read(path: &Path) -> Result<Stored, CompareError> {
    let file = if path.is_dir() {
        path.join(REPORT_FILE)
    } else {
        path.to_owned()
    };
    let text = crate::run_files::read_to_string(&file).map_err(|source| CompareError::Read {
        path: file.clone(),
        source,
    })?;
    let value: serde_json::Value =
        serde_json::from_str(&text).map_err(|source| CompareError::Parse {
            path: file.clone(),
            source,
        })?;
    // The schema first, so a report of another kind says so rather than "missing field".
    let found = value.get("schema").and_then(|s| s.as_str()).unwrap_or("");
    if found != SCHEMA {
        return Err(CompareError::Schema {
            path: file,
            found: found.to_owned(),
        });
    }
    let mut stored: Stored =
        serde_json::from_value(value).map_err(|source| CompareError::Parse {
            path: file.clone(),
            source,
        })?;
    stored.path = file;
    Ok(stored)
}

/// How B compares with A.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    Better,
    Worse,
    /// Equal, or different within noise.
    Same,
    OnlyInA,
    OnlyInB,
}

impl Change {
    pub fn as_str(self) -> &'static str {
        match self {
            Change::Better => "better",
            Change::Worse => "worse",
            Change::Same => "same",
            Change::OnlyInA => "only in A",
            Change::OnlyInB => "only in B",
        }
    }
}

/// What a check's number measures, known from its name; it decides the noise and how the
/// number prints.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Measure {
    Seconds,
    /// A latency gate's measured quantile, in seconds, the same as A's within this share.
    Latency(f64),
    Count,
    Ratio,
    ExitCode,
}

impl Measure {
    fn of(check: &str, latency_tolerance: f64) -> Measure {
        match check {
            "players_back" | "failover" => Measure::Seconds,
            name if name.starts_with("latency.") => Measure::Latency(latency_tolerance),
            "http_error_ratio" => Measure::Ratio,
            name if name.starts_with("client:") => Measure::ExitCode,
            _ => Measure::Count,
        }
    }

    /// Whether `b` is `a` within noise.
    fn same(self, a: f64, b: f64) -> bool {
        let diff = (a - b).abs();
        let relative = 0.1 * a.abs().max(b.abs());
        match self {
            Measure::Seconds => diff <= relative.max(0.5),
            Measure::Latency(tolerance) => diff <= tolerance * a.abs(),
            Measure::Count => diff <= relative,
            Measure::Ratio => diff <= relative.max(1e-4),
            Measure::ExitCode => diff == 0.0,
        }
    }

    fn quantity(self, v: f64) -> Quantity {
        match self {
            Measure::Seconds | Measure::Latency(_) => Quantity::Seconds(v),
            Measure::Count => Quantity::Count(v.max(0.0).round() as u64),
            Measure::Ratio => Quantity::Ratio(v),
            Measure::ExitCode => Quantity::ExitCode(v.round() as i32),
        }
    }
}

/// One check in A and B.
#[derive(Debug, Clone, PartialEq)]
pub struct CheckDiff {
    pub name: String,
    pub a: Option<StoredCheck>,
    pub b: Option<StoredCheck>,
    pub change: Change,
}

impl CheckDiff {
    /// B fails what A passed, or is slower than A beyond the tolerance.
    pub fn regression(&self) -> bool {
        self.failed() || self.slower()
    }

    /// B fails what A passed.
    fn failed(&self) -> bool {
        matches!((&self.a, &self.b), (Some(a), Some(b)) if a.pass && !b.pass)
    }

    /// A latency gate that B measured slower than A beyond the tolerance.
    fn slower(&self) -> bool {
        matches!(Measure::of(&self.name, 0.0), Measure::Latency(_))
            && self.change == Change::Worse
            && matches!((&self.a, &self.b), (Some(a), Some(b)) if a.value.is_some() && b.value.is_some())
    }
}

/// One action in A and B, matched by action, target and scheduled time.
#[derive(Debug, Clone, PartialEq)]
pub struct FaultDiff {
    pub a: Option<StoredFault>,
    pub b: Option<StoredFault>,
    pub change: Change,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Comparison {
    pub checks: Vec<CheckDiff>,
    pub faults: Vec<FaultDiff>,
    /// How much slower than A a latency gate of B may measure and be the same (a share).
    pub latency_tolerance: f64,
}

impl Comparison {
    /// The checks B fails that A passed, and the latency gates B measured slower than A
    /// beyond the tolerance: a non-empty list fails a release gate.
    pub fn regressions(&self) -> Vec<&str> {
        self.checks
            .iter()
            .filter(|c| c.regression())
            .map(|c| c.name.as_str())
            .collect()
    }
}

/// The latency tolerance when none is asked: 20 %.
pub const LATENCY_TOLERANCE: f64 = 0.2;

/// Pairs the checks by name and the faults by action, target and time, A's order first; a
/// latency gate of B is the same as A's within `latency_tolerance` (a share of A's).
pub fn compare(a: &Stored, b: &Stored, latency_tolerance: f64) -> Comparison {
    let checks = pair(&a.checks, &b.checks, |x, y| x.name == y.name)
        .into_iter()
        .map(|(x, y)| {
            let name = x.or(y).map(|c| c.name.clone()).unwrap_or_default();
            let change = match (x, y) {
                (Some(x), Some(y)) => check_change(&name, x, y, latency_tolerance),
                (Some(_), None) => Change::OnlyInA,
                (None, _) => Change::OnlyInB,
            };
            CheckDiff {
                name,
                a: x.cloned(),
                b: y.cloned(),
                change,
            }
        })
        .collect();
    let faults = pair(&a.faults, &b.faults, |x, y| {
        x.action == y.action && x.target == y.target && x.at == y.at
    })
    .into_iter()
    .map(|(x, y)| FaultDiff {
        a: x.cloned(),
        b: y.cloned(),
        change: match (x, y) {
            (Some(x), Some(y)) => back_change(x, y),
            (Some(_), None) => Change::OnlyInA,
            (None, _) => Change::OnlyInB,
        },
    })
    .collect();
    Comparison {
        checks,
        faults,
        latency_tolerance,
    }
}

/// Every item of `a` with its match in `b` (each used once), then what `b` has left.
fn pair<'a, T>(
    a: &'a [T],
    b: &'a [T],
    same: impl Fn(&T, &T) -> bool,
) -> Vec<(Option<&'a T>, Option<&'a T>)> {
    let mut used = vec![false; b.len()];
    let mut out: Vec<(Option<&T>, Option<&T>)> = a
        .iter()
        .map(|x| {
            let found = b
                .iter()
                .enumerate()
                .position(|(i, y)| !used[i] && same(x, y));
            if let Some(i) = found {
                used[i] = true;
            }
            (Some(x), found.map(|i| &b[i]))
        })
        .collect();
    out.extend(
        b.iter()
            .zip(used)
            .filter(|(_, used)| !used)
            .map(|(y, _)| (None, Some(y))),
    );
    out
}

/// Pass or fail first; with the same outcome, the number (lower is better; none measured
/// is worst).
fn check_change(name: &str, a: &StoredCheck, b: &StoredCheck, latency_tolerance: f64) -> Change {
    match (a.pass, b.pass) {
        (true, false) => return Change::Worse,
        (false, true) => return Change::Better,
        _ => {}
    }
    let measure = Measure::of(name, latency_tolerance);
    if measure == Measure::ExitCode {
        return Change::Same;
    }
    match (a.value, b.value) {
        (None, None) => Change::Same,
        (Some(_), None) => Change::Worse,
        (None, Some(_)) => Change::Better,
        (Some(x), Some(y)) if measure.same(x, y) => Change::Same,
        (Some(x), Some(y)) if y < x => Change::Better,
        _ => Change::Worse,
    }
}

/// A fault's players-back time: nobody hit beats any time, any time beats never back.
fn back_change(a: &StoredFault, b: &StoredFault) -> Change {
    let rank = |f: &StoredFault| match (f.players_hit, f.back_s.p100) {
        (0, _) => (0, 0.0),
        (_, Some(s)) => (1, s),
        (_, None) => (2, 0.0),
    };
    let ((ra, sa), (rb, sb)) = (rank(a), rank(b));
    if ra != rb {
        return if rb < ra {
            Change::Better
        } else {
            Change::Worse
        };
    }
    if ra != 1 || Measure::Seconds.same(sa, sb) {
        Change::Same
    } else if sb < sa {
        Change::Better
    } else {
        Change::Worse
    }
}

/// The comparison as aligned tables, and the verdict of the gate.
pub fn render(a: &Stored, b: &Stored, comparison: &Comparison) -> String {
    let side = |label: &str, s: &Stored| {
        format!(
            "{label}: {} — {}, seed {}, {} of {} checks passed, anyplay-chaos {} ({})\n",
            s.path.display(),
            s.plan_name(),
            s.seed,
            s.passed(),
            s.checks.len(),
            s.tool.version,
            s.tool.commit
        )
    };
    let mut out = side("A", a) + &side("B", b);
    if a.plan_name() != b.plan_name() {
        let _ = writeln!(
            out,
            "note: different plans ({} and {}): only checks and faults with the same name and time pair up",
            a.plan_name(),
            b.plan_name()
        );
    }

    let checks: Vec<Vec<String>> = comparison
        .checks
        .iter()
        .map(|c| {
            let measure = Measure::of(&c.name, comparison.latency_tolerance);
            let limit = match (&c.a, &c.b) {
                (Some(x), Some(y)) if x.limit != y.limit => format!(
                    "{} → {}",
                    measure.quantity(x.limit),
                    measure.quantity(y.limit)
                ),
                _ => {
                    c.a.as_ref()
                        .or(c.b.as_ref())
                        .map(|x| measure.quantity(x.limit).to_string())
                        .unwrap_or_default()
                }
            };
            let cell = |x: &Option<StoredCheck>| match x {
                None => "—".to_owned(),
                Some(x) => format!(
                    "{} {}",
                    x.value
                        .map_or_else(|| "—".to_owned(), |v| measure.quantity(v).to_string()),
                    x.outcome()
                ),
            };
            let change = if c.regression() {
                "worse: REGRESSION".to_owned()
            } else {
                c.change.as_str().to_owned()
            };
            vec![c.name.clone(), limit, cell(&c.a), cell(&c.b), change]
        })
        .collect();
    out.push_str("\n## Checks\n\n");
    out.push_str(&table(
        &["check", "limit", "A", "B", "change"],
        &[],
        &checks,
    ));

    out.push_str("\n## Faults (seconds until every player hit was back)\n\n");
    if comparison.faults.is_empty() {
        out.push_str("(no actions)\n");
    } else {
        let faults: Vec<Vec<String>> = comparison
            .faults
            .iter()
            .map(|f| {
                let name = f.a.as_ref().or(f.b.as_ref()).map_or_else(String::new, |x| {
                    format!("{} {} at {}", x.action, x.target, Quantity::Seconds(x.at))
                });
                let hit = |x: &Option<StoredFault>| {
                    x.as_ref()
                        .map_or_else(|| "—".to_owned(), |x| x.players_hit.to_string())
                };
                let back = |x: &Option<StoredFault>| match x {
                    None => "—".to_owned(),
                    Some(x) if x.players_hit == 0 => "nobody hit".to_owned(),
                    Some(x) => x
                        .back_s
                        .p100
                        .map_or_else(|| "never".to_owned(), |s| Quantity::Seconds(s).to_string()),
                };
                let errors = |x: &Option<StoredFault>| {
                    x.as_ref()
                        .map_or_else(|| "—".to_owned(), |x| x.errors.to_string())
                };
                vec![
                    name,
                    hit(&f.a),
                    hit(&f.b),
                    back(&f.a),
                    back(&f.b),
                    errors(&f.a),
                    errors(&f.b),
                    f.change.as_str().to_owned(),
                ]
            })
            .collect();
        out.push_str(&table(
            &[
                "fault", "hit A", "hit B", "back A", "back B", "errors A", "errors B", "change",
            ],
            &[],
            &faults,
        ));
    }

    out.push('\n');
    let tolerance = comparison.latency_tolerance * 100.0;
    let names = |diffs: Vec<&CheckDiff>| {
        diffs
            .iter()
            .map(|c| c.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let failed: Vec<&CheckDiff> = comparison.checks.iter().filter(|c| c.failed()).collect();
    let slower: Vec<&CheckDiff> = comparison
        .checks
        .iter()
        .filter(|c| c.slower() && !c.failed())
        .collect();
    if failed.is_empty() && slower.is_empty() {
        let _ = writeln!(
            out,
            "no regression: B fails no check that A passed, and no latency gate is more than {tolerance} % slower"
        );
    }
    if !failed.is_empty() {
        let _ = writeln!(out, "REGRESSION: B fails {} that A passed", names(failed));
    }
    if !slower.is_empty() {
        let _ = writeln!(
            out,
            "REGRESSION: B is more than {tolerance} % slower than A in {}",
            names(slower)
        );
    }
    let _ = writeln!(
        out,
        "(same = within noise: times 10 % or 0.5 s, counts 10 %, ratios 10 % or 0.0001, latency gates {tolerance} %)"
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(name: &str, limit: f64, value: Option<f64>, pass: bool) -> StoredCheck {
        StoredCheck {
            name: name.into(),
            limit,
            value,
            pass,
            result: Some(Verdict::of(pass)),
            detail: String::new(),
        }
    }

    fn fault(at: f64, hit: u64, back: Option<f64>) -> StoredFault {
        StoredFault {
            action: ActionKind::Kill,
            target: "node-1".into(),
            at,
            players_hit: hit,
            back_s: StoredBack { p100: back },
            errors: 0,
        }
    }

    fn stored(checks: Vec<StoredCheck>, faults: Vec<StoredFault>) -> Stored {
        Stored {
            path: PathBuf::from("r.json"),
            schema: SCHEMA.into(),
            plan: serde_json::json!({"name": "p"}),
            seed: 1,
            tool: Tool {
                version: "0.1.0".into(),
                commit: "abc".into(),
            },
            checks,
            faults,
        }
    }

    #[test]
    fn noise_is_ten_percent_or_half_a_second_for_times() {
        let s = Measure::Seconds;
        assert!(s.same(8.5, 8.9));
        assert!(s.same(1.0, 1.5));
        assert!(!s.same(1.0, 1.6));
        assert!(s.same(20.0, 21.9));
        assert!(!s.same(20.0, 22.5));
        let c = Measure::Count;
        assert!(c.same(0.0, 0.0) && !c.same(0.0, 1.0) && c.same(100.0, 105.0));
        let r = Measure::Ratio;
        assert!(r.same(0.0, 0.0001) && !r.same(0.0, 0.0005));
    }

    #[test]
    fn a_latency_gate_slower_than_the_tolerance_is_a_regression_though_it_passes() {
        let run = |e2e: f64, friends: f64| {
            stored(
                vec![
                    check("latency.e2e_login", 0.3, Some(e2e), true),
                    check("latency.friends_list", 0.1, Some(friends), true),
                ],
                vec![],
            )
        };
        let (a, b) = (run(0.100, 0.050), run(0.125, 0.059));
        let cmp = compare(&a, &b, LATENCY_TOLERANCE);
        // 25 % slower is past 20 %; 18 % is within it.
        let changes: Vec<Change> = cmp.checks.iter().map(|c| c.change).collect();
        assert_eq!(changes, vec![Change::Worse, Change::Same]);
        assert_eq!(cmp.regressions(), vec!["latency.e2e_login"]);
        let text = render(&a, &b, &cmp);
        assert!(
            text.contains("REGRESSION: B is more than 20 % slower than A in latency.e2e_login"),
            "{text}"
        );
        // A wider tolerance lets it through; faster is never a regression.
        assert!(compare(&a, &b, 0.3).regressions().is_empty());
        assert!(compare(&b, &a, LATENCY_TOLERANCE).regressions().is_empty());
    }

    #[test]
    fn a_check_b_fails_that_a_passed_is_a_regression() {
        let a = stored(
            vec![
                check("players_back", 20.0, Some(8.5), true),
                check("lost_writes", 0.0, Some(0.0), true),
                check("presence_missing", 0.0, Some(3.0), false),
            ],
            vec![],
        );
        let b = stored(
            vec![
                check("players_back", 20.0, Some(8.7), true),
                check("lost_writes", 0.0, Some(2.0), false),
                check("presence_missing", 0.0, Some(0.0), true),
            ],
            vec![],
        );
        let cmp = compare(&a, &b, LATENCY_TOLERANCE);
        let changes: Vec<Change> = cmp.checks.iter().map(|c| c.change).collect();
        assert_eq!(changes, vec![Change::Same, Change::Worse, Change::Better]);
        assert_eq!(cmp.regressions(), vec!["lost_writes"]);
        let text = render(&a, &b, &cmp);
        assert!(text.contains("worse: REGRESSION"), "{text}");
        assert!(
            text.contains("REGRESSION: B fails lost_writes that A passed"),
            "{text}"
        );
        assert!(
            text.contains("| players_back     | 20s   | 8.5s pass | 8.7s pass"),
            "{text}"
        );
    }

    #[test]
    fn an_unknown_check_counts_as_not_passing_and_shows_as_unknown() {
        let a = stored(
            vec![check("presence_missing", 0.0, Some(0.0), true)],
            vec![],
        );
        let mut unknown = check("presence_missing", 0.0, None, false);
        unknown.result = Some(Verdict::Unknown);
        let b = stored(vec![unknown], vec![]);
        let cmp = compare(&a, &b, LATENCY_TOLERANCE);
        assert_eq!(cmp.regressions(), vec!["presence_missing"]);
        let text = render(&a, &b, &cmp);
        assert!(text.contains("| — UNKNOWN |"), "{text}");
        assert!(
            text.contains("B: r.json — p, seed 1, 0 of 1 checks passed"),
            "{text}"
        );
    }

    #[test]
    fn with_the_same_outcome_the_number_decides() {
        let a = check("players_back", 20.0, Some(10.0), true);
        assert_eq!(
            check_change(
                "players_back",
                &a,
                &check("players_back", 20.0, Some(5.0), true),
                LATENCY_TOLERANCE
            ),
            Change::Better
        );
        assert_eq!(
            check_change(
                "players_back",
                &a,
                &check("players_back", 20.0, Some(15.0), true),
                LATENCY_TOLERANCE
            ),
            Change::Worse
        );
        // Nothing measured (a player never back) is the worst.
        let never = check("players_back", 20.0, None, false);
        let late = check("players_back", 20.0, Some(30.0), false);
        assert_eq!(
            check_change("players_back", &late, &never, LATENCY_TOLERANCE),
            Change::Worse
        );
        // An exit code is not better for being lower.
        let c = |code| check("client:x", 0.0, Some(code), false);
        assert_eq!(
            check_change("client:x", &c(3.0), &c(1.0), LATENCY_TOLERANCE),
            Change::Same
        );
    }

    #[test]
    fn faults_pair_by_action_target_and_time() {
        let a = stored(
            vec![],
            vec![fault(5.0, 10, Some(1.0)), fault(15.0, 10, Some(4.0))],
        );
        let b = stored(
            vec![],
            vec![
                fault(15.0, 10, None),
                fault(5.0, 10, Some(1.2)),
                fault(30.0, 0, None),
            ],
        );
        let cmp = compare(&a, &b, LATENCY_TOLERANCE);
        let changes: Vec<Change> = cmp.faults.iter().map(|f| f.change).collect();
        assert_eq!(changes, vec![Change::Same, Change::Worse, Change::OnlyInB]);
        // Fault changes never make a regression: only checks do.
        assert!(cmp.regressions().is_empty());
        assert_eq!(
            back_change(&fault(1.0, 5, Some(3.0)), &fault(1.0, 0, None)),
            Change::Better
        );
    }

    #[test]
    fn a_check_only_on_one_side_is_shown_not_judged() {
        let a = stored(vec![check("client:x", 0.0, Some(0.0), true)], vec![]);
        let b = stored(vec![check("failover", 7.0, Some(2.0), true)], vec![]);
        let cmp = compare(&a, &b, LATENCY_TOLERANCE);
        let changes: Vec<Change> = cmp.checks.iter().map(|c| c.change).collect();
        assert_eq!(changes, vec![Change::OnlyInA, Change::OnlyInB]);
        assert!(cmp.regressions().is_empty());
    }

    #[test]
    fn reading_refuses_what_is_not_a_run_report() {
        let dir = std::env::temp_dir().join(format!("anyplay-compare-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let missing = read(&dir.join("nope.json")).unwrap_err();
        assert!(matches!(missing, CompareError::Read { .. }), "{missing}");
        std::fs::write(dir.join("bad.json"), "{").unwrap();
        let bad = read(&dir.join("bad.json")).unwrap_err();
        assert!(matches!(bad, CompareError::Parse { .. }), "{bad}");
        std::fs::write(
            dir.join("load.json"),
            r#"{"schema": "anyplay-load/report/v1"}"#,
        )
        .unwrap();
        let other = read(&dir.join("load.json")).unwrap_err();
        assert!(matches!(other, CompareError::Schema { .. }), "{other}");
        // A directory means its report.json.
        let report = serde_json::json!({
            "schema": SCHEMA, "plan": {"name": "p"}, "seed": 2,
            "tool": {"version": "0.1.0", "commit": "abc"},
            "checks": [{"name": "lost_writes", "limit": 0, "value": 0, "pass": true, "detail": ""}],
            "faults": [{"action": "kill", "target": "node-1", "at": 15.0, "players_hit": 3,
                        "back_s": {"50": 1.0, "90": 2.0, "95": 2.0, "99": 2.0, "100": null}, "errors": 4}]
        });
        std::fs::write(dir.join(REPORT_FILE), report.to_string()).unwrap();
        let stored = read(&dir).unwrap();
        assert_eq!(stored.path, dir.join(REPORT_FILE));
        assert_eq!(stored.checks[0].value, Some(0.0));
        assert_eq!(stored.faults[0].back_s.p100, None);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
