//! `rerun` repeats a run: a plan and its seed resolve to the same timeline every time (every
//! action, target and time), the seed draws the random targets, and the committed node-crash
//! run recorded exactly the timeline its stored `plan.yaml` resolves to, as `rerun DIR` loads
//! it. No run is needed: resolving is pure.
//!
//! The players' side of a rerun, the same per-player schedule from the plan's seed, is tested
//! where chaos makes the load settings (`runner::players`, a private module) and in
//! anyplay-load's `planned`.

use std::path::Path;

use serde_json::Value;

use anyplay_chaos::events::{Event, History, Record};
use anyplay_chaos::plan::{Plan, Timeline};
use anyplay_chaos::report::{PLAN_FILE, REPORT_FILE};

fn plans_dir() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../plans")
}

fn resolve(plan: &Plan) -> Timeline {
    plan.resolve(plan.seed)
        .unwrap_or_else(|e| panic!("{}: {e}", plan.name))
}

#[test]
fn every_plan_resolves_to_the_same_timeline_twice_and_from_what_a_run_stores() {
    let mut plans = 0;
    for entry in std::fs::read_dir(plans_dir()).expect("plans/") {
        let path = entry.expect("a plan file").path();
        if path.extension().is_none_or(|e| e != "yaml") {
            continue;
        }
        let first = resolve(&Plan::load(&path).expect("a valid plan"));
        let second = resolve(&Plan::load(&path).expect("a valid plan"));
        assert_eq!(first, second, "{}", path.display());
        // A run stores the plan as `to_yaml` writes it, and `rerun` loads that.
        let stored = Plan::from_yaml(&Plan::load(&path).unwrap().to_yaml()).unwrap();
        let again = resolve(&stored);
        assert_eq!(
            (&again.seed, schedule(&again)),
            (&first.seed, schedule(&first)),
            "{}",
            path.display()
        );
        plans += 1;
    }
    assert!(plans >= 5, "only {plans} plans found");
}

#[test]
fn the_seed_draws_the_random_targets() {
    let plan = Plan::load(&plans_dir().join("rolling-restart.yaml")).unwrap();
    let drawn = |seed| {
        let timeline = plan.resolve(seed).expect("resolves");
        timeline.steps[1].action.target_label()
    };
    assert_eq!(drawn(plan.seed), drawn(plan.seed));
    let targets: std::collections::BTreeSet<String> = (0..32).map(drawn).collect();
    assert!(
        targets.len() > 1,
        "32 seeds all drew {targets:?}: the seed draws nothing"
    );
}

/// What a timeline does: each action as `action_start` records it (action, target, `at`).
fn schedule(timeline: &Timeline) -> Vec<Event> {
    timeline.steps.iter().map(Event::action_start).collect()
}

#[test]
fn rerun_of_the_committed_node_crash_run_resolves_its_recorded_timeline_exactly() {
    let dir = crate::committed::dir();
    // As `runner::rerun` reads it.
    let plan = Plan::load(&dir.join(PLAN_FILE)).expect("the run's plan.yaml");
    let timeline = resolve(&plan);
    let resolved = schedule(&timeline);
    assert_eq!(resolved.len(), 4, "{resolved:?}");

    let history = History::new(
        crate::committed::events_jsonl()
            .lines()
            .map(|line| Record::from_line(line).expect("an event line"))
            .collect(),
    );
    let meta = history.meta().expect("a run_start line");
    assert_eq!((meta.plan.as_str(), meta.seed), ("node-crash", plan.seed));

    let started: Vec<Event> = history
        .iter()
        .filter(|(_, e)| matches!(e, Event::ActionStart { .. }))
        .map(|(_, e)| e.clone())
        .collect();
    assert_eq!(started, resolved, "the recorded action_start lines");
    let ended: Vec<Event> = history
        .iter()
        .filter_map(|(_, e)| match e {
            Event::ActionEnd {
                action,
                target,
                at,
                error: None,
            } => Some(Event::ActionStart {
                action: *action,
                target: target.clone(),
                at: *at,
                via: None,
                to: None,
                toxic: None,
            }),
            _ => None,
        })
        .collect();
    assert_eq!(ended, resolved, "every action ended, without an error");
    // And each fired on time: its `t` from the timeline's zero (its own event).
    let zero = history
        .iter()
        .find_map(|(t, e)| matches!(e, Event::TimelineStart).then_some(t))
        .expect("the timeline's zero");
    for (t, event) in history.iter() {
        if let Event::ActionStart { at, .. } = event {
            let late = t - zero - at;
            assert!((0.0..1.0).contains(&late), "{event:?} fired {late}s late");
        }
    }

    // The report's faults table lists the same actions, targets and times.
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join(REPORT_FILE)).unwrap()).unwrap();
    let faults: Vec<(String, String, f64)> = report["faults"]
        .as_array()
        .expect("faults")
        .iter()
        .map(|f| {
            (
                f["action"].as_str().unwrap().to_owned(),
                f["target"].as_str().unwrap().to_owned(),
                f["at"].as_f64().unwrap(),
            )
        })
        .collect();
    let steps: Vec<(String, String, f64)> = timeline
        .steps
        .iter()
        .map(|s| {
            (
                s.action.kind().to_string(),
                s.action.target_label(),
                s.at.as_secs_f64(),
            )
        })
        .collect();
    assert_eq!(faults, steps, "report.json's faults");

    // And the source plan it was run from resolves to the same actions today.
    let source = Plan::load(&plans_dir().join("node-crash.yaml")).unwrap();
    assert_eq!(schedule(&resolve(&source)), resolved);
}

/// A run directory is data, from wherever it came: `rerun` runs nothing its recorded plan
/// names beyond its own parts (a client's shell command, the services' environment or
/// arguments; the supervisor is root) unless told `--trust-plan`.
#[test]
fn rerun_refuses_a_recorded_plan_that_runs_code_of_its_own_unless_trusted() {
    let dir = std::env::temp_dir().join(format!("anyplay-rerun-untrusted-{}", std::process::id()));
    let marker = dir.join("ran");
    for (part, plan, named) in [
        (
            "clients",
            format!(
                "name: untrusted\nload: {{players: 10}}\nclients:\n  - name: c\n    cmd: \"touch {}\"\n",
                marker.display()
            ),
            "clients.c: touch",
        ),
        (
            "env",
            "name: untrusted\nservices:\n  nodes: {env: {LD_PRELOAD: /tmp/evil.so}}\nload: {players: 10}\n".to_owned(),
            "services.nodes.env: LD_PRELOAD=/tmp/evil.so",
        ),
        (
            "args",
            format!(
                "name: untrusted\nstore: postgres\nservices:\n  postgres: {{}}\n  nats: {{args: [--pid, {}]}}\n  nodes: {{count: 2}}\nload: {{players: 10}}\n",
                marker.display()
            ),
            "services.nats.args: --pid",
        ),
    ] {
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(PLAN_FILE), plan).unwrap();
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_anyplay-chaos"))
            .arg("rerun")
            .arg(&dir)
            .output()
            .expect("anyplay-chaos runs");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{part}: {stderr}");
        assert!(
            stderr.contains("--trust-plan") && stderr.contains(named),
            "{part}: {stderr}"
        );
        assert!(!marker.exists(), "{part}: the recorded plan's code ran");
        assert!(
            !dir.join("runs").exists() && std::fs::read_dir(&dir).unwrap().count() == 1,
            "{part}: nothing was started or written"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
