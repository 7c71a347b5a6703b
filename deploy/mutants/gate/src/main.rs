//! Gates cargo-mutants mutants behind a runtime switch, so that one build of the cloud serves
//! every mutant (`deploy/mutants.sh`): mutant `N` is live in a process whose environment says
//! `ANYPLAY_MUTANT=N`, and the cloud is itself in every other.
//!
//! - `sample ALL.json COUNT SEED > SAMPLE.json`: a seeded sample of the mutants this can gate,
//!   numbered from 1.
//! - `apply ROOT SAMPLE.json [SKIP...] > APPLIED.json`: rewrites the copy of the workspace at
//!   ROOT, each mutant's code behind `crate::mutants::on(N)` and marked `/*mutant:N*/`; says
//!   which mutants it applied and why it left the others out.
//! - `blame ROOT < cargo.jsonl`: the mutants whose gated code the build's errors point into,
//!   one number a line, so that the script can leave them out and build again.
//! - `report WORK COMMAND COMMIT > RESULT.json`: the outcome of every run under `WORK/runs`
//!   (`0` is the cloud as it is; `N.rc` each run's exit code, `N/report.json` its report) and
//!   the score; `WORK/result.md` the same as a table.
//!
//! A mutant's gate, by genre: a function's value returns early (`if on(N) { return VALUE; }`);
//! an operator, changed or deleted, chooses between the two expressions
//! (`if on(N) { MUTATED } else { ORIGINAL }`); a deleted match arm gets the guard
//! `if !on(N)`; a replaced guard chooses between the two guards.

use std::collections::BTreeMap;
use std::io::Read as _;
use std::path::Path;

use proc_macro2::LineColumn;
use quote::ToTokens;
use serde::{Deserialize, Serialize};
use syn::visit::Visit;

/// One mutant as `cargo mutants --list --json` writes it (the fields used here).
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Mutant {
    #[serde(default)]
    id: u32,
    name: String,
    file: String,
    genre: String,
    span: Span,
    replacement: String,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
struct Span {
    start: Pos,
    end: Pos,
}

/// cargo-mutants' position: line and column both from 1, the column in characters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
struct Pos {
    line: usize,
    column: usize,
}

impl From<LineColumn> for Pos {
    fn from(lc: LineColumn) -> Pos {
        Pos {
            line: lc.line,
            column: lc.column + 1,
        }
    }
}

const GENRES: [&str; 5] = [
    "FnValue",
    "BinaryOperator",
    "UnaryOperator",
    "MatchArm",
    "MatchArmGuard",
];

#[derive(Debug, Serialize)]
struct Applied {
    applied: Vec<Mutant>,
    /// Mutant id → why it was left out.
    left_out: BTreeMap<u32, String>,
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.iter().map(String::as_str).collect::<Vec<_>>().as_slice() {
        ["sample", all, count, seed] => sample(all, count, seed),
        ["apply", root, sample, skip @ ..] => apply(root, sample, skip),
        ["blame", root] => blame(root),
        ["report", work, command, commit] => report(work, command, commit),
        _ => Err("usage: anyplay-mutants-gate sample ALL.json COUNT SEED | apply ROOT SAMPLE.json [SKIP...] | blame ROOT < cargo.jsonl | report WORK COMMAND COMMIT".into()),
    };
    if let Err(e) = result {
        eprintln!("anyplay-mutants-gate: {e}");
        std::process::exit(2);
    }
}

type Result<T> = std::result::Result<T, String>;

fn read_json<T: for<'de> Deserialize<'de>>(path: &str) -> Result<T> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?;
    serde_json::from_str(&text).map_err(|e| format!("{path}: {e}"))
}

fn sample(all: &str, count: &str, seed: &str) -> Result<()> {
    let mut mutants: Vec<Mutant> = read_json(all)?;
    let count: usize = count.parse().map_err(|_| format!("count {count:?}"))?;
    let mut state: u64 = seed.parse().map_err(|_| format!("seed {seed:?}"))?;
    mutants.retain(|m| GENRES.contains(&m.genre.as_str()));
    for m in &mut mutants {
        if let Some(ok) = as_result(&m.replacement) {
            m.name = m.name.replace(&m.replacement, &ok);
            m.replacement = ok;
        }
    }
    let mut seen = std::collections::HashSet::new();
    mutants.retain(|m| seen.insert((m.file.clone(), m.span.start, m.replacement.clone())));
    // Fisher-Yates with splitmix64: the same list and seed give the same sample.
    for i in (1..mutants.len()).rev() {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        mutants.swap(i, (z % (i as u64 + 1)) as usize);
    }
    mutants.truncate(count);
    for (i, m) in mutants.iter_mut().enumerate() {
        m.id = i as u32 + 1;
    }
    println!(
        "{}",
        serde_json::to_string_pretty(&mutants).map_err(|e| e.to_string())?
    );
    Ok(())
}

/// The cloud's `StoreResult<T>` and `ApiResult<T>` are `Result`s by another name, which
/// cargo-mutants does not see: it fills them as containers (`StoreResult::new(v)`,
/// `::from(v)`, `::from_iter([v])`), which cannot compile. `Ok(v)` is what it would have
/// written for a `Result`.
fn as_result(replacement: &str) -> Option<String> {
    let (alias, call) = replacement.split_once("::")?;
    if !alias.ends_with("Result") || alias == "Result" {
        return None;
    }
    let inner = call
        .strip_prefix("from_iter([")
        .and_then(|r| r.strip_suffix("])"))
        .or_else(|| call.strip_prefix("new(").and_then(|r| r.strip_suffix(')')))
        .or_else(|| call.strip_prefix("from(").and_then(|r| r.strip_suffix(')')))?;
    Some(if inner.is_empty() {
        "Ok(Default::default())".to_owned()
    } else {
        format!("Ok({inner})")
    })
}

/// One change to a file's text: `range` replaced by `text` (an empty range inserts).
#[derive(Debug)]
struct Edit {
    id: u32,
    range: (usize, usize),
    text: String,
}

impl Edit {
    fn conflicts(&self, other: &Edit) -> bool {
        let (a, b) = (self.range, other.range);
        let inside = |p: usize, r: (usize, usize)| r.0 < p && p < r.1;
        if a.0 == a.1 || b.0 == b.1 {
            // Two insertions at one place chain; an insertion inside a rewritten range would
            // be copied into both of its branches.
            inside(a.0, b) || inside(b.0, a)
        } else {
            a.0 < b.1 && b.0 < a.1
        }
    }
}

fn apply(root: &str, sample: &str, skip: &[&str]) -> Result<()> {
    let sampled: Vec<Mutant> = read_json(sample)?;
    let skip: Vec<u32> = skip
        .iter()
        .map(|s| s.parse().map_err(|_| format!("mutant id {s:?}")))
        .collect::<Result<_>>()?;
    let mut by_file: BTreeMap<&str, Vec<&Mutant>> = BTreeMap::new();
    let mut left_out = BTreeMap::new();
    for m in &sampled {
        if skip.contains(&m.id) {
            left_out.insert(m.id, "its gate does not build".to_owned());
        } else {
            by_file.entry(&m.file).or_default().push(m);
        }
    }
    let mut applied = Vec::new();
    for (file, mutants) in by_file {
        if !file.starts_with("cloud/src/") || file.contains("..") {
            return Err(format!("{file}: not a file of the cloud"));
        }
        let path = Path::new(root).join(file);
        let source = std::fs::read_to_string(&path).map_err(|e| format!("{file}: {e}"))?;
        let syntax = syn::parse_file(&source).map_err(|e| format!("{file}: {e}"))?;
        let mut found = Finder::default();
        found.visit_file(&syntax);
        let text = Text::new(&source);
        let mut edits: Vec<Edit> = Vec::new();
        for m in mutants {
            let edit = match gate(m, &found, &text) {
                Ok(edit) => edit,
                Err(why) => {
                    left_out.insert(m.id, why);
                    continue;
                }
            };
            if let Some(other) = edits.iter().find(|e| e.conflicts(&edit)) {
                left_out.insert(m.id, format!("overlaps mutant {}", other.id));
                continue;
            }
            edits.push(edit);
            applied.push(m.clone());
        }
        // From the end, so that each edit's offsets still hold; chained insertions in order.
        edits.sort_by_key(|e| (std::cmp::Reverse(e.range.0), std::cmp::Reverse(e.id)));
        let mut out = source.clone();
        for e in edits {
            out.replace_range(e.range.0..e.range.1, &e.text);
        }
        std::fs::write(&path, out).map_err(|e| format!("{file}: {e}"))?;
    }
    install_switch(Path::new(root))?;
    applied.sort_by_key(|m| m.id);
    let report = Applied { applied, left_out };
    println!(
        "{}",
        serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?
    );
    Ok(())
}

/// The switch the gates read: `ANYPLAY_MUTANT`, once per process.
fn install_switch(root: &Path) -> Result<()> {
    let module = r#"//! Written by deploy/mutants/gate: the mutant this process runs (`ANYPLAY_MUTANT`, 0: none).
pub fn on(id: u32) -> bool {
    static ACTIVE: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    *ACTIVE.get_or_init(|| {
        std::env::var("ANYPLAY_MUTANT").ok().and_then(|v| v.parse().ok()).unwrap_or(0)
    }) == id
}
"#;
    let src = root.join("cloud/src");
    std::fs::write(src.join("mutants.rs"), module).map_err(|e| e.to_string())?;
    let lib = src.join("lib.rs");
    let mut text = std::fs::read_to_string(&lib).map_err(|e| e.to_string())?;
    if !text.contains("pub mod mutants;") {
        text.push_str("\n#[doc(hidden)]\npub mod mutants;\n");
        std::fs::write(&lib, text).map_err(|e| e.to_string())?;
    }
    Ok(())
}

fn gate(m: &Mutant, found: &Finder, text: &Text) -> Result<Edit> {
    let on = format!("crate::mutants::on({})", m.id);
    let mark = format!("/*mutant:{}*/", m.id);
    let start = text.offset(m.span.start)?;
    let end = text.offset(m.span.end)?;
    let (range, new) = match m.genre.as_str() {
        // The span is the function's body, inside its braces.
        "FnValue" => (
            (start, start),
            format!("{mark} if {on} {{ return {}; }} ", m.replacement),
        ),
        "MatchArmGuard" => (
            (start, end),
            format!(
                "({mark} if {on} {{ {} }} else {{ {} }})",
                m.replacement,
                text.slice(start, end)
            ),
        ),
        "BinaryOperator" | "UnaryOperator" => {
            let (expr, op) = found
                .operators
                .iter()
                .find(|(_, op)| op.0 == m.span.start)
                .ok_or("no operator expression at its place (in a macro?)")?;
            let (e0, e1) = (text.offset(expr.0)?, text.offset(expr.1)?);
            let (o0, o1) = (text.offset(op.0)?, text.offset(op.1)?);
            let mutated = format!(
                "{}{}{}",
                text.slice(e0, o0),
                m.replacement,
                text.slice(o1, e1)
            );
            (
                (e0, e1),
                format!(
                    "({mark} if {on} {{ {mutated} }} else {{ {} }})",
                    text.slice(e0, e1)
                ),
            )
        }
        "MatchArm" => {
            let arm = found
                .arms
                .iter()
                .find(|a| a.start == m.span.start)
                .ok_or("no match arm at its place")?;
            match arm.guard {
                None => {
                    let p = text.offset(arm.pat_end)?;
                    ((p, p), format!(" if {mark} !{on}"))
                }
                Some((g0, g1)) => {
                    let (g0, g1) = (text.offset(g0)?, text.offset(g1)?);
                    (
                        (g0, g1),
                        format!("{mark} !{on} && ({})", text.slice(g0, g1)),
                    )
                }
            }
        }
        other => return Err(format!("genre {other} is not gated")),
    };
    Ok(Edit {
        id: m.id,
        range,
        text: new,
    })
}

/// A file's text, addressed by cargo-mutants' positions.
struct Text<'a> {
    source: &'a str,
    line_starts: Vec<usize>,
}

impl<'a> Text<'a> {
    fn new(source: &'a str) -> Text<'a> {
        let mut line_starts = vec![0];
        line_starts.extend(source.match_indices('\n').map(|(i, _)| i + 1));
        Text {
            source,
            line_starts,
        }
    }

    fn offset(&self, pos: Pos) -> Result<usize> {
        let start = *self
            .line_starts
            .get(pos.line.wrapping_sub(1))
            .ok_or(format!("line {} is past the end", pos.line))?;
        let line = &self.source[start..];
        let column = pos.column.saturating_sub(1);
        match line.char_indices().nth(column) {
            Some((i, _)) => Ok(start + i),
            None if line.chars().count() == column => Ok(self.source.len()),
            None => Err(format!("{}:{} is past the end", pos.line, pos.column)),
        }
    }

    fn slice(&self, from: usize, to: usize) -> &'a str {
        &self.source[from..to]
    }
}

/// Where the tokens of `node` start and end.
fn range(node: &impl ToTokens) -> Option<(Pos, Pos)> {
    let tokens: Vec<_> = node.to_token_stream().into_iter().collect();
    let first = tokens.first()?.span().start();
    let last = tokens.last()?.span().end();
    Some((first.into(), last.into()))
}

struct Arm {
    start: Pos,
    pat_end: Pos,
    guard: Option<(Pos, Pos)>,
}

/// Every operator expression (its range, its operator's range) and every match arm of a file.
#[derive(Default)]
struct Finder {
    operators: Vec<((Pos, Pos), (Pos, Pos))>,
    arms: Vec<Arm>,
}

impl<'ast> Visit<'ast> for Finder {
    fn visit_expr_binary(&mut self, node: &'ast syn::ExprBinary) {
        if let (Some(expr), Some(op)) = (range(node), range(&node.op)) {
            self.operators.push((expr, op));
        }
        syn::visit::visit_expr_binary(self, node);
    }

    fn visit_expr_unary(&mut self, node: &'ast syn::ExprUnary) {
        if let (Some(expr), Some(op)) = (range(node), range(&node.op)) {
            self.operators.push((expr, op));
        }
        syn::visit::visit_expr_unary(self, node);
    }

    fn visit_arm(&mut self, node: &'ast syn::Arm) {
        if let (Some(arm), Some(pat)) = (range(node), range(&node.pat)) {
            let guard = node.guard.as_ref().and_then(|(_, g)| range(g));
            for start in [arm.0, pat.0] {
                self.arms.push(Arm {
                    start,
                    pat_end: pat.1,
                    guard,
                });
            }
        }
        syn::visit::visit_arm(self, node);
    }
}

#[derive(Deserialize)]
struct CargoMessage {
    reason: String,
    message: Option<Diagnostic>,
}

#[derive(Deserialize)]
struct Diagnostic {
    level: String,
    spans: Vec<DiagnosticSpan>,
}

#[derive(Deserialize)]
struct DiagnosticSpan {
    file_name: String,
    line_start: usize,
    is_primary: bool,
}

fn blame(root: &str) -> Result<()> {
    let mut input = String::new();
    std::io::stdin()
        .read_to_string(&mut input)
        .map_err(|e| e.to_string())?;
    let mut blamed = std::collections::BTreeSet::new();
    let mut files: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for line in input.lines() {
        let Ok(msg) = serde_json::from_str::<CargoMessage>(line) else {
            continue;
        };
        let Some(diag) = msg.message.filter(|_| msg.reason == "compiler-message") else {
            continue;
        };
        if diag.level != "error" {
            continue;
        }
        for span in diag.spans.iter().filter(|s| s.is_primary) {
            let Some(file) = span
                .file_name
                .find("cloud/src/")
                .map(|i| &span.file_name[i..])
            else {
                continue;
            };
            let lines = files.entry(file.to_owned()).or_insert_with(|| {
                std::fs::read_to_string(Path::new(root).join(file))
                    .unwrap_or_default()
                    .lines()
                    .map(str::to_owned)
                    .collect()
            });
            // The gate whose mark is nearest above the error (a gate's code starts at its mark).
            let upto = span.line_start.min(lines.len());
            let id = lines[..upto]
                .iter()
                .rev()
                .find_map(|l| mark_in(l))
                .or_else(|| lines[upto..].iter().find_map(|l| mark_in(l)));
            blamed.extend(id);
        }
    }
    for id in blamed {
        println!("{id}");
    }
    Ok(())
}

/// The last mutant mark on a line.
fn mark_in(line: &str) -> Option<u32> {
    let at = line.rfind("/*mutant:")?;
    let rest = &line[at + "/*mutant:".len()..];
    rest[..rest.find("*/")?].parse().ok()
}

/// How a run with one mutant (or none) ended.
#[derive(Debug, Serialize)]
struct Outcome {
    id: u32,
    name: String,
    genre: String,
    /// `killed` (a check failed), `not_started` (exit 2), `timeout`, `survived` (every check
    /// passed), `error`, or `not_run` (left out by `--ids`).
    outcome: String,
    exit: Option<i32>,
    failed_checks: Vec<String>,
}

#[derive(Debug, Serialize)]
struct Score {
    /// The commit whose cloud was mutated (the runs' own builds are of a copy without git).
    commit: String,
    tool: serde_json::Value,
    machine: serde_json::Value,
    command: String,
    plan: serde_json::Value,
    listed: usize,
    sampled: usize,
    applied: usize,
    left_out: BTreeMap<u32, String>,
    /// The cloud as it is, before and after the mutants: each must pass.
    clean: Vec<Outcome>,
    killed: usize,
    survived: usize,
    /// Killed among those that ran, in percent.
    score: f64,
    mutants: Vec<Outcome>,
}

fn report(work: &str, command: &str, commit: &str) -> Result<()> {
    let work = Path::new(work);
    let path = |p: &str| work.join(p).display().to_string();
    let listed: Vec<serde_json::Value> = read_json(&path("all.json"))?;
    let sampled: Vec<Mutant> = read_json(&path("sample.json"))?;
    let applied: serde_json::Value = read_json(&path("applied.json"))?;
    let left_out: BTreeMap<u32, String> =
        serde_json::from_value(applied["left_out"].clone()).map_err(|e| e.to_string())?;
    let applied: Vec<Mutant> =
        serde_json::from_value(applied["applied"].clone()).map_err(|e| e.to_string())?;
    let outcome = |run: &str, id: u32, name: &str, genre: &str| -> Outcome {
        let exit = std::fs::read_to_string(work.join("runs").join(format!("{run}.rc")))
            .ok()
            .and_then(|s| s.trim().parse::<i32>().ok());
        let report: Option<serde_json::Value> = read_json(
            &work
                .join("runs")
                .join(run)
                .join("report.json")
                .display()
                .to_string(),
        )
        .ok();
        let failed_checks = report
            .as_ref()
            .and_then(|r| r["checks"].as_array().cloned())
            .unwrap_or_default()
            .iter()
            .filter(|c| c["pass"] == false)
            .filter_map(|c| c["name"].as_str().map(str::to_owned))
            .collect();
        let outcome = match exit {
            Some(0) => "survived",
            Some(1) => "killed",
            Some(2) => "not_started",
            Some(124) => "timeout",
            Some(_) => "error",
            None => "not_run",
        };
        Outcome {
            id,
            name: name.to_owned(),
            genre: genre.to_owned(),
            outcome: outcome.to_owned(),
            exit,
            failed_checks,
        }
    };
    let clean: Vec<Outcome> = ["0", "0-end"]
        .iter()
        .map(|run| outcome(run, 0, &format!("the cloud as it is ({run})"), ""))
        .collect();
    let first: Option<serde_json::Value> = read_json(&path("runs/0/report.json")).ok();
    let field = |k: &str| {
        first
            .as_ref()
            .map_or(serde_json::Value::Null, |r| r[k].clone())
    };
    let mutants: Vec<Outcome> = applied
        .iter()
        .map(|m| outcome(&m.id.to_string(), m.id, &m.name, &m.genre))
        .filter(|o| o.outcome != "not_run")
        .collect();
    let count = |o: &str| mutants.iter().filter(|m| m.outcome == o).count();
    let killed = count("killed") + count("not_started") + count("timeout");
    let survived = count("survived");
    let score = Score {
        commit: commit.to_owned(),
        tool: field("tool"),
        machine: field("machine"),
        command: command.to_owned(),
        plan: field("plan"),
        listed: listed.len(),
        sampled: sampled.len(),
        applied: applied.len(),
        left_out,
        clean,
        killed,
        survived,
        score: if killed + survived == 0 {
            0.0
        } else {
            (1000.0 * killed as f64 / (killed + survived) as f64).round() / 10.0
        },
        mutants,
    };
    std::fs::write(work.join("result.md"), markdown(&score)).map_err(|e| e.to_string())?;
    println!(
        "{}",
        serde_json::to_string_pretty(&score).map_err(|e| e.to_string())?
    );
    Ok(())
}

fn markdown(s: &Score) -> String {
    let mut out = String::from("# Mutation testing of the verdict\n\n");
    out += &format!("Command: `{}`  \n", s.command);
    out += &format!(
        "Commit: {} (anyplay {})  \nMachine: {}, {} cores, {} MB, {}  \n\n",
        s.commit,
        s.tool["version"].as_str().unwrap_or("?"),
        s.machine["cpu"].as_str().unwrap_or("?"),
        s.machine["cores"],
        s.machine["memory_mb"],
        s.machine["os"].as_str().unwrap_or("?"),
    );
    out += &format!(
        "{} mutants listed in scope, {} sampled, {} gated into one build ({} left out). \
         Of those that ran, **{} killed, {} survived: {} %**.\n\n",
        s.listed,
        s.sampled,
        s.applied,
        s.left_out.len(),
        s.killed,
        s.survived,
        s.score
    );
    out += "| run | outcome | failed checks |\n|---|---|---|\n";
    for c in &s.clean {
        out += &format!(
            "| {} | {} | {} |\n",
            c.name,
            pass_or(c),
            c.failed_checks.join(", ")
        );
    }
    out += "\n| # | mutant | genre | outcome | failed checks |\n|--:|---|---|---|---|\n";
    for m in &s.mutants {
        out += &format!(
            "| {} | `{}` | {} | {} | {} |\n",
            m.id,
            m.name.replace('|', "\\|"),
            m.genre,
            m.outcome,
            m.failed_checks.join(", ")
        );
    }
    if !s.left_out.is_empty() {
        out += "\n| # | left out because |\n|--:|---|\n";
        for (id, why) in &s.left_out {
            out += &format!("| {id} | {why} |\n");
        }
    }
    out
}

fn pass_or(c: &Outcome) -> &str {
    match c.outcome.as_str() {
        "survived" => "pass",
        "killed" => "FAIL",
        other => other,
    }
}
