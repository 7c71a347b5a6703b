//! `summary.md`: the checks table and the faults table as aligned Markdown, readable in a
//! terminal as is; the same tables end a run on stdout.

use crate::checks::fault_table::{fmt_num, shown};
use crate::report::json::{Report, Verdict};

/// The whole summary: a title, the run's identity, then the tables.
pub fn summary(report: &Report) -> String {
    let verdict = match report.verdict {
        Verdict::Pass => "PASS",
        Verdict::Fail => "FAIL",
    };
    let mut out = format!("# anyplay-chaos: {} — {verdict}\n\n", report.plan_name());
    out.push_str(&format!(
        "seed {} · started {} · anyplay-chaos {} ({})\n\n",
        report.seed,
        report.started_at.as_deref().unwrap_or("?"),
        report.tool.version,
        report.tool.commit
    ));
    if !report.unreadable_lines.is_empty() {
        out.push_str(&format!(
            "**{} lines of events.jsonl could not be read** (judged without them): {:?}\n\n",
            report.unreadable_lines.len(),
            report.unreadable_lines
        ));
    }
    if let Some(shortfall) = report.login_shortfall() {
        out.push_str(&format!("**Load:** {shortfall}.\n\n"));
    }
    out.push_str(&tables(report));
    // The plan's name, its start and the tool's identity come from the run directory too.
    crate::printable::lines(&out).into_owned()
}

/// Columns of the checks table, and which are right-aligned.
pub(crate) const CHECK_COLUMNS: [&str; 5] = ["check", "limit", "value", "result", "detail"];
pub(crate) const CHECK_RIGHT: [bool; 5] = [false, true, true, false, false];
/// Columns of the faults table, and which are right-aligned.
pub(crate) const FAULT_COLUMNS: [&str; 10] = [
    "at",
    "action",
    "target",
    "players hit",
    "50%",
    "90%",
    "95%",
    "99%",
    "100%",
    "errors",
];
pub(crate) const FAULT_RIGHT: [bool; 10] =
    [true, false, false, true, true, true, true, true, true, true];

/// One check as the tables show it (summary.md and report.html alike).
pub(crate) fn check_row(c: &crate::checks::CheckResult) -> Vec<String> {
    vec![
        c.name.clone(),
        c.limit.to_string(),
        c.value.map_or_else(|| "—".to_owned(), |v| v.to_string()),
        result_cell(c.result).to_owned(),
        c.detail.clone(),
    ]
}

/// A check's result as the tables show it: what needs a look in capitals.
pub(crate) fn result_cell(result: crate::checks::Verdict) -> &'static str {
    match result {
        crate::checks::Verdict::Pass => "pass",
        crate::checks::Verdict::Fail => "FAIL",
        crate::checks::Verdict::Unknown => "UNKNOWN",
    }
}

/// One fault as the tables show it (summary.md and report.html alike).
pub(crate) fn fault_row(f: &crate::checks::fault_table::FaultRow) -> Vec<String> {
    let b = &f.back_s;
    let back = |v: Option<f64>| match (f.players_hit, v) {
        (0, _) => "—".to_owned(),
        (_, Some(s)) => format!("{}s", fmt_num(s)),
        (_, None) => "never".to_owned(),
    };
    let (action, target) = shown(f.action, &f.target, f.to.as_deref(), f.toxic.as_ref());
    vec![
        format!("{}s", fmt_num(f.at)),
        action,
        target,
        f.players_hit.to_string(),
        back(b.p50),
        back(b.p90),
        back(b.p95),
        back(b.p99),
        back(b.p100),
        f.errors.to_string(),
    ]
}

/// The checks table and the faults table.
pub fn tables(report: &Report) -> String {
    let checks: Vec<Vec<String>> = report.checks.iter().map(check_row).collect();
    let faults: Vec<Vec<String>> = report.faults.iter().map(fault_row).collect();
    let mut out = String::from("## Checks\n\n");
    out.push_str(&table(&CHECK_COLUMNS, &CHECK_RIGHT, &checks));
    out.push_str("\n## Faults\n\n");
    if faults.is_empty() {
        out.push_str("(no actions)\n");
    } else {
        out.push_str(&table(&FAULT_COLUMNS, &FAULT_RIGHT, &faults));
    }
    out
}

/// A Markdown table padded so its columns line up in a terminal; `right` marks the columns
/// aligned right (any not given align left). `compare` prints its tables with it too.
pub(crate) fn table(headers: &[&str], right: &[bool], rows: &[Vec<String>]) -> String {
    let cell = |text: &str| crate::printable::line(text).replace('|', "\\|");
    let rows: Vec<Vec<String>> = rows
        .iter()
        .map(|r| r.iter().map(|c| cell(c)).collect())
        .collect();
    let widths: Vec<usize> = headers
        .iter()
        .enumerate()
        .map(|(i, h)| {
            rows.iter()
                .map(|r| r.get(i).map_or(0, |c| c.chars().count()))
                .chain([h.chars().count(), 3])
                .max()
                .unwrap_or(3)
        })
        .collect();
    let line = |cells: Vec<String>| -> String {
        let padded: Vec<String> = cells
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let pad = widths[i].saturating_sub(c.chars().count());
                if right.get(i).copied().unwrap_or(false) {
                    format!("{}{c}", " ".repeat(pad))
                } else {
                    format!("{c}{}", " ".repeat(pad))
                }
            })
            .collect();
        format!("| {} |\n", padded.join(" | "))
    };
    let mut out = line(headers.iter().map(|h| (*h).to_owned()).collect());
    let rule: Vec<String> = widths
        .iter()
        .zip(right.iter().copied().chain(std::iter::repeat(false)))
        .map(|(w, r)| {
            if r {
                format!("{}:", "-".repeat(w + 1))
            } else {
                "-".repeat(w + 2)
            }
        })
        .collect();
    out.push_str(&format!("|{}|\n", rule.join("|")));
    for row in rows {
        out.push_str(&line(row));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::testing as h;
    use crate::events::{Event, History};
    use crate::plan::{ActionKind, Plan};

    #[test]
    fn the_summary_shows_both_tables_aligned() {
        let plan = Plan::from_yaml("name: tiny\nload: {players: 2, through_proxy: true}\ntimeline:\n  - {at: 1s, drop: players}\n").unwrap();
        let history: History = [
            (
                1.0,
                Event::ActionStart {
                    action: ActionKind::Drop,
                    target: "players".into(),
                    at: 1.0,
                    via: None,
                    to: None,
                    toxic: None,
                },
            ),
            h::on(0.5, 1, "node-1"),
            h::lost(1.1, 1, "node-1"),
            h::back(2.6, 1, "node-1"),
        ]
        .into_iter()
        .collect();
        let report = Report::build(&plan, &history, serde_json::Value::Null);
        let text = summary(&report);
        assert!(text.starts_with("# anyplay-chaos: tiny — FAIL"), "{text}");
        assert!(text.contains("| players_back "), "{text}");
        assert!(text.contains("1.6s"), "{text}");
        // Every line of a table has the same width.
        for block in text.split("\n\n").filter(|b| b.starts_with('|')) {
            let widths: Vec<usize> = block.lines().map(|l| l.chars().count()).collect();
            assert!(widths.windows(2).all(|w| w[0] == w[1]), "{block}");
        }
    }

    #[test]
    fn a_login_wave_that_fell_short_is_said_above_the_tables() {
        let plan = Plan::from_yaml("name: tiny\nload: {players: 2000}\n").unwrap();
        let load = |online: u64, skipped: u64| {
            serde_json::json!({"scenarios": [{
                "name": "login",
                "skipped_saturated": skipped,
                "players": {"asked": 2000, "online": online},
                "ops": {"e2e_login": {"p50_ms": 4263.9}},
            }]})
        };
        let short = summary(&Report::build(&plan, &History::default(), load(1434, 566)));
        assert!(
            short.contains(
                "**Load:** only 1434 of 2000 players got online before the timeline; the checks \
                 judged those (566 logins skipped: the login wave had its in-flight limit of \
                 logins running, a login took 4264 ms at p50; a lower login_rate lets them all in)."
            ),
            "{short}"
        );
        let full = summary(&Report::build(&plan, &History::default(), load(2000, 0)));
        assert!(!full.contains("**Load:**"), "{full}");
        let none = summary(&Report::build(
            &plan,
            &History::default(),
            serde_json::Value::Null,
        ));
        assert!(!none.contains("**Load:**"), "{none}");
    }

    #[test]
    fn an_unknown_check_shows_as_unknown_not_as_a_failure() {
        let plan = Plan::from_yaml("name: tiny\nload: {players: 2}\n").unwrap();
        let report = Report::build(&plan, &History::default(), serde_json::Value::Null);
        let text = summary(&report);
        let row = text
            .lines()
            .find(|l| l.starts_with("| duplicate_sessions "))
            .unwrap();
        assert!(row.contains("| UNKNOWN "), "{row}");
        assert!(row.contains("no connection samples recorded"), "{row}");
        assert!(text.starts_with("# anyplay-chaos: tiny — FAIL"), "{text}");
    }

    #[test]
    fn pipes_in_details_are_escaped() {
        let out = table(&["a"], &[false], &[vec!["x|y".to_owned()]]);
        assert!(out.contains("x\\|y"));
    }
}
