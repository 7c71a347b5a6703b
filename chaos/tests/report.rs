//! The report commands with the real binary. `compare A B` on hand-made `report.json`
//! files and on two committed runs: exit 0 without a regression, 1 when B fails a check that A
//! passed, 2 when a side cannot be read. `report DIR` on a hand-made run directory writes a self-contained
//! `report.html` (what a browser draws of it: `tests/browser.rs`). And one tiny run (one
//! SQLite node, no PostgreSQL) with `--junit`, which also shows that the end of every run
//! writes `report.html`, and that its latency gates judge what the load timed.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::{json, Value};

/// A fresh directory for one test's files.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "anyplay-chaos-report-{name}-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn chaos(args: &[&Path]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_anyplay-chaos"))
        .args(args)
        .output()
        .expect("anyplay-chaos runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A report.json in the contract's shape, with the given `(name, limit, value, pass)` checks.
fn report(checks: &[(&str, f64, Option<f64>, bool)], back_100: Option<f64>) -> Value {
    let checks: Vec<Value> = checks
        .iter()
        .map(|(name, limit, value, pass)| {
            json!({"name": name, "limit": limit, "value": value, "pass": pass, "detail": "made up"})
        })
        .collect();
    let verdict = if checks.iter().all(|c| c["pass"] == true) {
        "pass"
    } else {
        "fail"
    };
    json!({
        "schema": "anyplay-chaos/report/v1",
        "plan": {"name": "node-crash"},
        "seed": 7,
        "tool": {"version": "0.1.0", "commit": "abc123"},
        "machine": null,
        "started_at": "2026-01-01T00:00:00Z",
        "verdict": verdict,
        "checks": checks,
        "faults": [{"action": "kill", "target": "node-1", "at": 30.0, "players_hit": 1000,
                    "back_s": {"50": 2.0, "90": 3.0, "95": 3.5, "99": 4.0, "100": back_100},
                    "errors": 12}],
        "load": null,
        "series": []
    })
}

fn write(dir: &Path, name: &str, value: &Value) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, serde_json::to_string_pretty(value).unwrap()).unwrap();
    path
}

const BASELINE: &[(&str, f64, Option<f64>, bool)] = &[
    ("players_back", 20.0, Some(4.8), true),
    ("duplicate_sessions", 0.0, Some(0.0), true),
    ("lost_writes", 0.0, Some(0.0), true),
    ("http_error_ratio", 0.001, Some(0.0002), true),
];

#[test]
fn compare_exits_1_when_b_fails_a_check_that_a_passed() {
    let dir = scratch("regression");
    let a = write(&dir, "a.json", &report(BASELINE, Some(4.8)));
    let mut worse = BASELINE.to_vec();
    worse[2] = ("lost_writes", 0.0, Some(3.0), false);
    let b = write(&dir, "b.json", &report(&worse, Some(4.9)));

    let output = chaos(&[Path::new("compare"), &a, &b]);
    let stdout = text(&output.stdout);
    assert_eq!(
        output.status.code(),
        Some(1),
        "{stdout}{}",
        text(&output.stderr)
    );
    assert!(
        stdout.contains("REGRESSION: B fails lost_writes that A passed"),
        "{stdout}"
    );
    assert!(stdout.contains("worse: REGRESSION"), "{stdout}");
    // 4.8 s and 4.9 s are the same within noise.
    assert!(stdout.contains("| kill node-1 at 30s |"), "{stdout}");

    // The other way round B fixed it: better, and no gate failure.
    let output = chaos(&[Path::new("compare"), &b, &a]);
    let stdout = text(&output.stdout);
    assert_eq!(output.status.code(), Some(0), "{stdout}");
    assert!(stdout.contains("no regression"), "{stdout}");
    assert!(stdout.contains("better"), "{stdout}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn compare_exits_0_for_run_directories_without_a_regression() {
    let dir = scratch("same");
    for (run, back) in [("a", Some(4.8)), ("b", None)] {
        std::fs::create_dir_all(dir.join(run)).unwrap();
        write(&dir.join(run), "report.json", &report(BASELINE, back));
    }
    let output = chaos(&[Path::new("compare"), &dir.join("a"), &dir.join("b")]);
    let stdout = text(&output.stdout);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{stdout}{}",
        text(&output.stderr)
    );
    // A fault whose players never came back is worse, but only checks gate a release.
    assert!(
        stdout.contains("never") && stdout.contains("worse"),
        "{stdout}"
    );
    assert!(stdout.contains("no regression"), "{stdout}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The committed runs of node-crash under both backends (results/backends/).
fn committed_run(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../results")
        .join(name)
        .join("run")
}

#[test]
fn compare_of_two_committed_runs_prints_them_side_by_side_and_gates_a_regression() {
    let (a, b) = (
        committed_run("node-crash-process"),
        committed_run("node-crash-docker"),
    );
    let output = chaos(&[Path::new("compare"), &a, &b]);
    let stdout = text(&output.stdout);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{stdout}{}",
        text(&output.stderr)
    );
    for expected in [
        "| check ",
        "| players_back ",
        "| failover ",
        "| kill node-1 at 20s ",
        "| stop node-2 at 50s ",
        "no regression",
    ] {
        assert!(stdout.contains(expected), "{expected:?} missing:\n{stdout}");
    }

    // The same run B, made up to have lost writes: the gate fails.
    let dir = scratch("committed-regression");
    let mut worse: Value =
        serde_json::from_str(&std::fs::read_to_string(b.join("report.json")).unwrap()).unwrap();
    let lost = worse["checks"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|c| c["name"] == "lost_writes")
        .expect("a lost_writes check");
    lost["value"] = json!(2.0);
    lost["pass"] = json!(false);
    worse["verdict"] = json!("fail");
    let worse = write(&dir, "report.json", &worse);
    let output = chaos(&[Path::new("compare"), &a, &worse]);
    let stdout = text(&output.stdout);
    assert_eq!(output.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains("REGRESSION: B fails lost_writes that A passed"),
        "{stdout}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn compare_exits_2_when_a_side_cannot_be_read() {
    let dir = scratch("unreadable");
    let good = write(&dir, "good.json", &report(BASELINE, Some(4.8)));
    let not_json = dir.join("not.json");
    std::fs::write(&not_json, "{ not json").unwrap();
    let other = write(
        &dir,
        "load.json",
        &json!({"schema": "anyplay-load/report/v1"}),
    );
    let empty_dir = dir.join("empty");
    std::fs::create_dir_all(&empty_dir).unwrap();
    for bad in [&dir.join("missing.json"), &not_json, &other, &empty_dir] {
        for (a, b) in [(&good, bad), (bad, &good)] {
            let output = chaos(&[Path::new("compare"), a, b]);
            assert_eq!(
                output.status.code(),
                Some(2),
                "{} {}",
                a.display(),
                b.display()
            );
            let stderr = text(&output.stderr);
            assert!(
                stderr.contains(&*bad.file_name().unwrap().to_string_lossy())
                    || stderr.contains("report.json"),
                "{stderr}"
            );
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn report_dir_writes_a_self_contained_html_page() {
    let dir = scratch("html");
    std::fs::write(
        dir.join("plan.yaml"),
        "name: tiny\ndescription: \"<b>bold</b> & https://example.invalid\"\nload: {players: 2, through_proxy: true}\ntimeline:\n  - {at: 1s, kill: node-1}\n  - {at: 2s, start: node-1}\n",
    )
    .unwrap();
    let lines = [
        r#"{"t":0.0,"kind":"run_start","plan":"tiny","seed":1,"started_at":"2026-01-01T00:00:00Z","machine":{"os":"Linux","arch":"x86_64","cpu":"X","cores":2,"memory_mb":1024},"tool":{"version":"0.1.0","commit":"abc"}}"#,
        r#"{"t":0.1,"kind":"service_up","service":"node-1"}"#,
        r#"{"t":1.0,"kind":"load_tick","online":2,"welcomes":2,"disconnects":0,"http_calls":5,"http_errors":0,"p99_ms":2.0,"presence_p99_ms":null,"nodes":{}}"#,
        r#"{"t":1.5,"kind":"action_start","action":"kill","target":"node-1","at":1.0}"#,
        r#"{"t":1.51,"kind":"service_exit","service":"node-1","signal":"SIGKILL"}"#,
        r#"{"t":1.52,"kind":"action_end","action":"kill","target":"node-1","at":1.0}"#,
        r#"{"t":2.0,"kind":"load_tick","online":0,"welcomes":0,"disconnects":2,"http_calls":5,"http_errors":5,"p99_ms":1.0,"presence_p99_ms":null,"nodes":{}}"#,
        r#"{"t":2.5,"kind":"action_start","action":"start","target":"node-1","at":2.0}"#,
        r#"{"t":2.9,"kind":"service_up","service":"node-1"}"#,
        r#"{"t":2.9,"kind":"action_end","action":"start","target":"node-1","at":2.0}"#,
        r#"{"t":3.0,"kind":"load_tick","online":2,"welcomes":2,"disconnects":0,"http_calls":5,"http_errors":0,"p99_ms":2.0,"presence_p99_ms":null,"nodes":{}}"#,
    ];
    std::fs::write(dir.join("events.jsonl"), lines.join("\n") + "\n").unwrap();

    let output = chaos(&[Path::new("report"), &dir]);
    // No samples of connections: some checks are unknown, so the verdict is a fail.
    assert_eq!(output.status.code(), Some(1), "{}", text(&output.stderr));
    let html = std::fs::read_to_string(dir.join("report.html")).expect("report.html");
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert_eq!(html.matches("<svg").count(), 1);
    assert!(html.contains(">kill node-1</text>") && html.contains(">start node-1</text>"));
    assert!(html.contains("node-1 down: 1.5s to 2.9s"), "no down band");
    assert!(html.contains("&lt;b&gt;bold&lt;/b&gt; &amp; https://example.invalid"));
    let page = html.replace("https://example.invalid", "");
    for reference in [
        "http://", "https://", "src=", "href=", "url(", "@import", "<link",
    ] {
        assert!(!page.contains(reference), "{reference} in report.html");
    }
    // No external script: one inline script (it measures what was drawn), and a policy
    // that lets the browser fetch nothing.
    assert_eq!(page.matches("<script").count(), 1);
    assert!(page.contains("<script>\n") && page.contains("default-src 'none'"));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The supervisor runs as root and `report DIR` takes anybody's directory: a report file
/// there that is a symlink is refused, not followed, and its target is left as it was.
#[test]
fn report_dir_writes_through_no_symlink() {
    let dir = scratch("symlink");
    std::fs::write(
        dir.join("plan.yaml"),
        "name: tiny\nload: {players: 2, through_proxy: true}\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("events.jsonl"),
        r#"{"t":1.0,"kind":"load_tick","online":2,"welcomes":2,"disconnects":0,"http_calls":5,"http_errors":0,"p99_ms":2.0,"presence_p99_ms":null,"nodes":{}}"#.to_owned() + "\n",
    )
    .unwrap();
    let victim = dir.join("victim");
    std::fs::write(&victim, "precious").unwrap();
    std::os::unix::fs::symlink(&victim, dir.join("report.json")).unwrap();
    let output = chaos(&[Path::new("report"), &dir]);
    assert_eq!(output.status.code(), Some(2), "{}", text(&output.stderr));
    assert!(
        text(&output.stderr).contains("report.json"),
        "{}",
        text(&output.stderr)
    );
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `run --out DIR` takes anybody's directory too, and every child of the run writes in it (a
/// node's database, the logs, a client's files): a DIR that is a symlink, or that holds one
/// beneath it, is refused before anything starts, and the links' targets are left as they were.
#[test]
fn run_out_refuses_a_directory_that_is_or_holds_a_link() {
    let dir = scratch("planted");
    let victim = dir.join("victim");
    std::fs::create_dir_all(&victim).unwrap();
    std::fs::write(victim.join("node-1.log"), "precious").unwrap();
    let out = dir.join("run");
    for (planted, at) in [("logs", &victim), ("cloud.db", &victim.join("node-1.log"))] {
        let _ = std::fs::remove_dir_all(&out);
        std::fs::create_dir_all(&out).unwrap();
        std::os::unix::fs::symlink(at, out.join(planted)).unwrap();
        let (_, output) = tiny_run(&dir, "planted", "load: {players: 2}\n", &[]);
        let stderr = text(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{planted}: {stderr}");
        assert!(
            stderr.contains(&format!("{planted} is a symlink")),
            "{stderr}"
        );
        assert!(
            !out.join("events.jsonl").exists(),
            "{planted}: the run started"
        );
    }
    let _ = std::fs::remove_dir_all(&out);
    std::os::unix::fs::symlink(&victim, &out).unwrap();
    let (_, output) = tiny_run(&dir, "planted", "load: {players: 2}\n", &[]);
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("is a symlink: name the directory itself"),
        "{stderr}"
    );
    assert_eq!(
        std::fs::read_dir(&victim).unwrap().count(),
        1,
        "something was written through the link"
    );
    assert_eq!(
        std::fs::read_to_string(victim.join("node-1.log")).unwrap(),
        "precious"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Runs plan `name` (one SQLite node, then `rest`) into `dir/run` with `args` more.
fn tiny_run(dir: &Path, name: &str, rest: &str, args: &[&Path]) -> (PathBuf, Output) {
    let plan = dir.join(format!("{name}.yaml"));
    let head = format!("name: {name}\nstore: sqlite\nservices:\n  nodes: {{count: 1}}\n");
    std::fs::write(&plan, head + rest).unwrap();
    let out = dir.join("run");
    let mut all = vec![Path::new("run"), &plan, Path::new("--out"), &out];
    all.extend_from_slice(args);
    let output = chaos(&all);
    (out, output)
}

#[test]
fn a_run_with_junit_writes_the_checks_and_report_html() {
    let dir = scratch("junit");
    // `players_back: 100ms` cannot be met (a reconnect takes longer): one sure failure. So
    // cannot a sign-in within 1 ms (it is several calls); every friends list within an hour,
    // every delivery within a minute surely are.
    let junit = dir.join("checks.xml");
    let (out, output) = tiny_run(
        &dir,
        "junit-tiny",
        "load: {players: 10, login_rate: 100, friends: 2, presence_rate: 5, session_rate: 1, cards_rate: 2, through_proxy: true}\n\
         timeline:\n  - {at: 1s, drop: players}\nsettle: 3s\nchecks:\n  players_back: 100ms\n  \
         latency:\n    e2e_login: {p50: 1ms}\n    friends_list: {max: 1h}\n    \
         presence_delivery: {p99: 1m, during: outside_faults}\n",
        &[Path::new("--junit"), &junit],
    );
    let stdout = text(&output.stdout);
    assert_eq!(
        output.status.code(),
        Some(1),
        "{stdout}{}",
        text(&output.stderr)
    );
    assert!(
        out.join("report.html").is_file(),
        "the run wrote no report.html"
    );

    let xml = std::fs::read_to_string(&junit).expect("the JUnit file");
    let doc = roxmltree::Document::parse(&xml).expect("well-formed XML");
    let suite = doc
        .descendants()
        .find(|n| n.has_tag_name("testsuite"))
        .expect("a testsuite");
    assert_eq!(suite.attribute("name"), Some("junit-tiny"));
    let cases: Vec<_> = suite
        .children()
        .filter(|n| n.has_tag_name("testcase"))
        .collect();
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
    let checks = report["checks"].as_array().unwrap();
    assert_eq!(cases.len(), checks.len());
    for (case, check) in cases.iter().zip(checks) {
        assert_eq!(case.attribute("name"), check["name"].as_str());
        let failure = case.children().find(|n| n.has_tag_name("failure"));
        assert_eq!(
            failure.is_none(),
            check["pass"] == true,
            "{}",
            check["name"]
        );
        if let Some(failure) = failure {
            assert_eq!(failure.attribute("message"), check["detail"].as_str());
        }
    }
    let verdict = |name: &str| {
        let check = checks.iter().find(|c| c["name"] == name);
        check.map(|c| {
            (
                c["result"].as_str().unwrap().to_owned(),
                c["detail"].clone(),
            )
        })
    };
    assert_eq!(verdict("latency.e2e_login").unwrap().0, "fail");
    assert_eq!(verdict("latency.friends_list").unwrap().0, "pass");
    let delivery = verdict("latency.presence_delivery").unwrap();
    assert_eq!(delivery.0, "pass", "{}", delivery.1);
    let failures = checks.iter().filter(|c| c["pass"] == false).count();
    assert!(failures >= 1);
    assert_eq!(
        suite.attribute("failures"),
        Some(failures.to_string().as_str())
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn an_abort_condition_met_ends_the_run_early_and_fails_it_with_the_reason() {
    let dir = scratch("abort");
    // Every player's connection reset and none let back for 40 s; the run gives up once fewer
    // than half were online for 2 s.
    let started = std::time::Instant::now();
    let (out, output) = tiny_run(
        &dir,
        "abort-tiny",
        "load: {players: 10, login_rate: 100, friends: 2, presence_rate: 5, through_proxy: true}\n\
         timeline:\n  - {at: 1s, partition: [players, node-1], mode: drop, for: 40s}\n  - {at: 2s, drop: players}\nsettle: 5s\n\
         abort: {when: {players_online_below: 0.5}, for: 2s}\n",
        &[],
    );
    let took = started.elapsed();
    let stdout = text(&output.stdout);
    assert_eq!(
        output.status.code(),
        Some(1),
        "{stdout}{}",
        text(&output.stderr)
    );
    // The timeline alone is 41 s and the settle 5 s more.
    assert!(took.as_secs() < 35, "the run took {took:?}");
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
    assert_eq!(report["verdict"], "fail");
    let abort = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "abort")
        .expect("the abort check");
    assert_eq!(abort["result"], "fail");
    let detail = abort["detail"].as_str().unwrap();
    assert!(
        detail.contains("players online") && detail.contains("for 2s"),
        "{detail}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
