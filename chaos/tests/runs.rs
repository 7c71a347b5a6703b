//! Whole runs of the shipped plans with the real binary, on real PostgreSQL, NATS and
//! nodes, with fewer players so the suite stays quick; and a supervisor SIGKILLed in the
//! middle of a run, which must leave no process behind.

mod support;

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::Value;

use support::{chaos, one_at_a_time, reduced_plan, report, run_plan, scratch};

/// Runs a reduced plan and asserts a pass, with every check and the files a run writes.
fn passes(name: &str, players: u32) {
    let _turn = one_at_a_time();
    let dir = scratch(name);
    let plan = reduced_plan(name, &dir, players, "10s");
    let out = dir.join("run");
    let output = run_plan(&plan, &out, &[]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{name} did not pass:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    for file in [
        "plan.yaml",
        "events.jsonl",
        "report.json",
        "summary.md",
        "report.html",
        "load.json",
        "logs/node-1.log",
        "logs/node-2.log",
        "logs/postgres.log",
        "logs/nats.log",
    ] {
        assert!(out.join(file).is_file(), "{file} is missing");
    }
    let report = report(&out);
    assert_eq!(report["schema"], "anyplay-chaos/report/v1");
    assert_eq!(report["verdict"], "pass");
    let checks: Vec<&str> = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    for check in [
        "players_back",
        "duplicate_sessions",
        "presence_missing",
        "lost_writes",
        "http_error_ratio",
        "failover",
    ] {
        assert!(checks.contains(&check), "{check} missing from {checks:?}");
    }
    assert!(!report["series"].as_array().unwrap().is_empty());
    assert!(
        stdout.contains("## Checks") && stdout.contains("## Faults"),
        "{stdout}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn node_crash_passes_on_postgres_and_nats() {
    passes("node-crash", 200);
}

#[test]
fn dependency_faults_pass_on_postgres_and_nats() {
    passes("dependency-faults", 200);
}

#[test]
fn nodes_outlive_restarts_of_nats_and_postgres() {
    let _turn = one_at_a_time();
    let dir = scratch("dependency-restarts");
    let plan = reduced_plan("dependency-restarts", &dir, 100, "15s");
    let out = dir.join("run");
    let output = run_plan(&plan, &out, &[]);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    // After the last restart was done, presence changes still reached friends, who are
    // spread over both nodes (so through NATS), and the nodes answered calls.
    let events = std::fs::read_to_string(out.join("events.jsonl")).unwrap();
    let after: Vec<Value> = events
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .skip_while(|e| !(e["kind"] == "action_end" && e["target"] == "postgres"))
        .collect();
    assert!(!after.is_empty(), "the postgres restart never ended");
    assert!(
        after.iter().any(|e| e["kind"] == "presence_seen"),
        "no presence delivered after the restarts"
    );
    assert!(
        after.iter().any(|e| e["kind"] == "load_tick"
            && e["http_calls"].as_u64() > Some(0)
            && e["http_errors"] == 0),
        "the nodes did not serve again"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Every process whose command line names `dir`.
fn processes_under(dir: &Path) -> Vec<String> {
    let needle = dir.to_str().unwrap();
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        let cwd = std::fs::read_link(entry.path().join("cwd")).unwrap_or_default();
        if cmdline.contains(needle) || cwd.starts_with(dir) {
            found.push(format!("{pid}: {cmdline}"));
        }
    }
    found
}

#[test]
fn a_sigkilled_supervisor_leaves_no_process_behind() {
    let _turn = one_at_a_time();
    let dir = scratch("sigkill");
    let plan = reduced_plan("node-crash", &dir, 50, "5s");
    let out = dir.join("run");
    let mut supervisor = chaos(&[
        "run",
        plan.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ])
    .stdout(Stdio::null())
    .stderr(Stdio::null())
    .spawn()
    .unwrap();
    // Wait until the whole topology is up and players play.
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let events = std::fs::read_to_string(out.join("events.jsonl")).unwrap_or_default();
        if events.contains(r#""kind":"timeline_start""#) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the run never got going:\n{events}"
        );
        assert!(
            supervisor.try_wait().unwrap().is_none(),
            "the supervisor ended early"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        !processes_under(&out).is_empty(),
        "the topology runs under the run directory"
    );
    supervisor.kill().unwrap();
    supervisor.wait().unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let left = processes_under(&out);
        if left.is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "processes left after the supervisor died:\n{}",
            left.join("\n")
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let _ = std::fs::remove_dir_all(&dir);
}
