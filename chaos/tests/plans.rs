//! The shipped plans and the plan contract, from the outside: every plan in `plans/` is
//! valid and resolves the same way twice; bad plans are refused naming the line and the key;
//! `anyplay-chaos check` maps both to the contract's exit codes.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyplay_chaos::plan::{Plan, PlanError};

fn plans_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../plans")
}

fn shipped_plans() -> Vec<PathBuf> {
    let mut plans: Vec<PathBuf> = std::fs::read_dir(plans_dir())
        .expect("plans/ at the workspace root")
        .map(|entry| entry.expect("a directory entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "yaml"))
        .collect();
    plans.sort();
    plans
}

mod shipped {
    use super::*;

    #[test]
    fn the_five_plans_are_there() {
        let names: Vec<String> = shipped_plans()
            .iter()
            .filter_map(|p| p.file_stem()?.to_str().map(str::to_owned))
            .collect();
        for wanted in [
            "quickstart",
            "node-crash",
            "rolling-restart",
            "dependency-faults",
            "storm",
        ] {
            assert!(
                names.iter().any(|n| n == wanted),
                "plans/{wanted}.yaml is missing"
            );
        }
    }

    #[test]
    fn every_plan_is_valid_and_named_after_its_file() {
        for path in shipped_plans() {
            let plan = Plan::load(&path).unwrap_or_else(|err| panic!("{}: {err}", path.display()));
            let stem = path
                .file_stem()
                .and_then(|s| s.to_str())
                .unwrap_or_default();
            assert_eq!(plan.name, stem, "{}", path.display());
        }
    }

    #[test]
    fn every_plan_opens_with_a_comment_saying_what_it_proves() {
        for path in shipped_plans() {
            let text = std::fs::read_to_string(&path).unwrap();
            assert!(
                text.starts_with("# "),
                "{} opens without a comment",
                path.display()
            );
        }
    }

    #[test]
    fn every_plan_resolves_the_same_way_twice() {
        for path in shipped_plans() {
            let plan = Plan::load(&path).unwrap();
            let first = plan.resolve(plan.seed).unwrap();
            assert_eq!(
                plan.resolve(plan.seed).unwrap(),
                first,
                "{}",
                path.display()
            );
            assert_eq!(
                first.to_string(),
                plan.resolve(plan.seed).unwrap().to_string()
            );
        }
    }

    #[test]
    fn the_canonical_text_reads_back_to_the_same_plan() {
        for path in shipped_plans() {
            let plan = Plan::load(&path).unwrap();
            let text = plan.to_yaml();
            let again = Plan::from_yaml(&text).unwrap_or_else(|err| panic!("{text}\n{err}"));
            assert_eq!(again.to_yaml(), text, "{}", path.display());
            // Lines differ between the two texts; the timelines are otherwise the same.
            let strip = |p: &Plan| {
                let mut steps = p.resolve(p.seed).unwrap().steps;
                steps.iter_mut().for_each(|s| s.line = 0);
                steps
            };
            assert_eq!(strip(&again), strip(&plan), "{}", path.display());
        }
    }

    #[test]
    fn the_quickstart_stays_small() {
        let plan = Plan::load(&plans_dir().join("quickstart.yaml")).unwrap();
        assert_eq!(plan.services.nodes.count, 1);
        assert!(plan.services.postgres.is_none() && plan.services.nats.is_none());
        let last = plan.timeline.iter().map(|e| e.at).max().unwrap_or_default();
        let ramp = f64::from(plan.load.players) / f64::from(plan.load.login_rate);
        assert!(
            ramp + (last + plan.settle).as_secs_f64() < 60.0,
            "quickstart runs over a minute"
        );
    }
}

/// The example plan of the contract (spec/chaos-plan.md), verbatim: outside plans are
/// written against that text, so every key and value in it must be accepted.
const SPEC_EXAMPLE: &str = r#"name: node-crash            # [a-z0-9-]+
description: "SIGKILL one of two nodes under load, then bring it back"
seed: 7                     # every random choice of the run derives from it (default 1)
backend: process            # process | docker
store: postgres             # sqlite | postgres (a cluster of more than one node needs postgres and nats)
services:
  postgres: {}              # optional keys: image (docker), port, args
  nats: {}                  # optional keys: image, port, args
  nodes:
    count: 2
    drain_timeout: 5s
    db_connections: 16
    env: {}                 # extra environment for every node
load:
  players: 2000
  login_rate: 200           # logins per second during the ramp
  friends: 10
  reconnect: spec           # spec | immediate
  presence_rate: 100        # activity changes per second for the whole run (0: none)
  session_rate: 5           # sessions per second (0: none)
  cards_rate: 50            # gamer-card calls per second (0: none)
  through_proxy: true       # players reach nodes through the fault proxy (needed to drop or cut them)
timeline:                   # offsets count from the moment every player is signed in and online
  - { at: 30s, kill: node-1 }
  - { at: 45s, start: node-1 }
  - { at: 60s, stop: node-2 }          # SIGTERM; the node drains; SIGKILL only after drain_timeout + 5 s
  - { at: 75s, start: node-2 }
  - { at: 90s, rolling: nodes, gap: 2s }   # each node in turn: stop, start, wait ready, gap
  - { at: 120s, drop: players }        # every player connection cut at once, no close frame
  - { at: 130s, pause: nats, for: 5s } # SIGSTOP then SIGCONT (docker pause / unpause)
  - { at: 140s, partition: [node-1, postgres], for: 10s }
  - { at: 155s, latency: [node-2, nats], ms: 200, jitter: 50, for: 10s }
  - { at: 170s, restart: random-node } # stop + start; random-node is drawn with the seed
clients:                    # optional: real client programs that ride through the run alongside the load
  - name: headless-1
    cmd: "./my-client --headless --server {urls} --name {name} --out {out}"
    expect_exit: 0          # a check of its own: the program must exit with this code
settle: 30s                 # time after the last action before the final checks
checks:
  players_back: 20s         # after every fault: every player who lost a connection is back within
  duplicate_sessions: 0     # accounts connected twice (on two nodes, or twice on one) in two consecutive samples
  presence_missing: 0       # changes that an online friend never saw (a later version counts as seen)
  lost_writes: 0            # acknowledged friend/session writes missing at the end
  http_error_ratio: 0.001   # failed calls / all calls, outside fault windows
  failover: 7s              # from a node's kill until all its players are back elsewhere
"#;

#[test]
fn the_contract_example_is_valid() {
    let plan = Plan::from_yaml(SPEC_EXAMPLE).unwrap_or_else(|err| panic!("{err}"));
    let timeline = plan.resolve(plan.seed).unwrap();
    assert_eq!(timeline.steps.len(), 10);
    assert_eq!(plan.clients[0].name, "headless-1");
}

/// Plans share the one duration grammar of the workspace: decimals and hours are fine.
#[test]
fn decimal_and_hour_durations_are_accepted() {
    for (text, want) in [("1.5s", 1_500), ("0.5m", 30_000), ("1h", 3_600_000)] {
        let plan = Plan::from_yaml(&format!(
            "name: decimals\nload: {{players: 10, through_proxy: true}}\nsettle: {text}\n"
        ))
        .unwrap_or_else(|err| panic!("{text}: {err}"));
        assert_eq!(plan.settle.as_millis(), want, "{text}");
    }
}

/// Bad plans: each refusal must name the line and the key.
mod refused {
    use super::*;

    const HEAD: &str = "name: bad\nload: {players: 10, through_proxy: true}\n";

    fn refusal(src: &str) -> (usize, String, String) {
        match Plan::from_yaml(src) {
            Err(PlanError::Invalid { line, key, message }) => (line, key, message),
            other => panic!("expected a refusal of\n{src}\ngot {other:?}"),
        }
    }

    #[test]
    fn an_unknown_key() {
        let (line, key, _) = refusal(&format!("{HEAD}settel: 5s\n"));
        assert_eq!((line, key.as_str()), (3, "settel"));
        let (line, key, _) = refusal(&format!(
            "{HEAD}timeline:\n  - at: 1s\n    drop: players\n    fro: 2s\n"
        ));
        assert_eq!((line, key.as_str()), (6, "timeline[0].fro"));
    }

    #[test]
    fn a_bad_duration() {
        let (line, key, message) = refusal(&format!(
            "{HEAD}timeline:\n  - {{ at: 1d, drop: players }}\n"
        ));
        assert_eq!((line, key.as_str()), (4, "timeline[0].at"));
        assert!(
            message.contains("1d") && message.contains("500ms"),
            "{message}"
        );
        let (line, key, _) = refusal(&format!("{HEAD}checks:\n  failover: soon\n"));
        assert_eq!((line, key.as_str()), (4, "checks.failover"));
        for bad in ["'5 s'", "5sec", "-1s", "0.0001s", "5"] {
            let (line, key, _) = refusal(&format!("{HEAD}settle: {bad}\n"));
            assert_eq!((line, key.as_str()), (3, "settle"), "{bad}");
        }
    }

    #[test]
    fn an_unknown_target() {
        let (line, key, message) = refusal(&format!(
            "{HEAD}timeline:\n  - {{ at: 1s, drop: players }}\n  - {{ at: 2s, kill: redis }}\n"
        ));
        assert_eq!((line, key.as_str()), (5, "timeline[1].kill"));
        assert!(message.contains("redis"), "{message}");
    }

    #[test]
    fn a_start_of_a_running_node() {
        let (line, key, message) = refusal(&format!(
            "{HEAD}timeline:\n  - {{ at: 5s, kill: node-1 }}\n  - {{ at: 9s, start: node-1 }}\n  - {{ at: 12s, start: node-1 }}\n"
        ));
        assert_eq!((line, key.as_str()), (6, "timeline[2].start"));
        assert!(message.contains("already running"), "{message}");
    }

    #[test]
    fn a_cluster_on_sqlite() {
        let (line, key, message) = refusal(
            "name: bad\nstore: sqlite\nservices:\n  nodes:\n    count: 2\nload: {players: 10}\n",
        );
        assert_eq!((line, key.as_str()), (2, "store"));
        assert!(message.contains("store: postgres"), "{message}");
    }

    #[test]
    fn an_action_on_a_service_the_topology_lacks() {
        let (line, key, _) = refusal(&format!(
            "{HEAD}timeline:\n  - {{ at: 1s, restart: postgres }}\n"
        ));
        assert_eq!((line, key.as_str()), (4, "timeline[0].restart"));
    }
}

/// The `check` command's exit codes and output.
mod command {
    use super::*;

    fn check(plan: &Path) -> std::process::Output {
        Command::new(env!("CARGO_BIN_EXE_anyplay-chaos"))
            .arg("check")
            .arg(plan)
            .output()
            .expect("the binary runs")
    }

    #[test]
    fn a_valid_plan_prints_its_timeline_and_exits_0() {
        let out = check(&plans_dir().join("rolling-restart.yaml"));
        assert_eq!(out.status.code(), Some(0));
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(stdout.contains("wait until node-3 is ready"), "{stdout}");
        assert!(stdout.contains("drawn from random-node"), "{stdout}");
    }

    #[test]
    fn an_invalid_plan_exits_2_naming_line_and_key() {
        let dir = std::env::temp_dir().join(format!("anyplay-plans-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("bad.yaml");
        std::fs::write(
            &path,
            "name: bad\nload: {players: 1}\ntimeline:\n  - { at: 1s, start: node-1 }\n",
        )
        .unwrap();
        let out = check(&path);
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(out.status.code(), Some(2));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("line 4: timeline[0].start:"), "{stderr}");
    }

    #[test]
    fn a_docker_plan_names_its_images() {
        let dir = std::env::temp_dir().join(format!("anyplay-plans-docker-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("docker.yaml");
        std::fs::write(
            &path,
            "name: docker\nbackend: docker\nstore: postgres\nservices:\n  postgres: {}\n  \
             nats: {image: nats:2.9}\n  nodes: {count: 2}\nload: {players: 1}\n",
        )
        .unwrap();
        let out = check(&path);
        std::fs::remove_dir_all(&dir).unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(0), "{stdout}");
        assert!(
            stdout
                .contains("images: postgres postgres:16, nats nats:2.9, nodes anyplay/node:local"),
            "{stdout}"
        );
    }
}
