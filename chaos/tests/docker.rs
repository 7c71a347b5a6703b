//! The Docker backend on a real engine with the project's local images (deploy/images/build.sh
//! builds them; deploy/test.sh does so before the tests): a plan runs to a pass with the same
//! checks, a pause is a docker pause, a kill is recorded as a signal, and no container outlives its run, not even one whose
//! supervisor was SIGKILLed. Without an engine these tests fail: they exist to check it.

mod remote_engine;

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::support::containers::{containers_of, engine_alone, engine_shared};
use crate::support::{
    a_run_turn, assert_passed, chaos, reduced_plan, reduced_plan_with, report, run_plan, scratch,
};

/// The local images, for a machine that cannot pull the plans' upstream ones.
const LOCAL_IMAGES: [&str; 6] = [
    "--image",
    "postgres=anyplay/postgres:local",
    "--image",
    "nats=anyplay/nats:local",
    "--image",
    "nodes=anyplay/node:local",
];

fn docker_args(extra: &[&'static str]) -> Vec<&'static str> {
    let mut args = vec!["--backend", "docker"];
    args.extend_from_slice(&LOCAL_IMAGES);
    args.extend_from_slice(extra);
    args
}

/// node-crash's every kind of traffic, at lighter rates: the backend is what these runs check,
/// and at the plan's own rates, beside the self-test's two runs on two cores, their deliveries
/// and welcomes came seconds late (the CIs of f6c55d8 and 5637241: a node carrying every
/// player kept its 16 store connections busy, its calls queued for seconds).
fn at_lighter_rates(plan: &mut serde_yaml::Value) {
    for (key, rate) in [
        ("presence_rate", 20),
        ("session_rate", 2),
        ("cards_rate", 8),
        ("friend_rate", 2),
        ("churn_rate", 2),
    ] {
        plan["load"][key] = rate.into();
    }
}

fn events(out: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(out.join("events.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect()
}

#[test]
fn node_crash_passes_in_containers_and_the_kill_is_a_signal() {
    let _engine = engine_shared();
    let _turn = a_run_turn();
    let dir = scratch("docker-node-crash");
    let plan = reduced_plan_with("node-crash", &dir, 200, "10s", at_lighter_rates);
    // And a pause of NATS before the kill: docker pause / unpause.
    let text = std::fs::read_to_string(&plan).unwrap();
    let mut yaml: serde_yaml::Value = serde_yaml::from_str(&text).unwrap();
    let pause: serde_yaml::Value = serde_yaml::from_str("{at: 8s, pause: nats, for: 3s}").unwrap();
    yaml["timeline"].as_sequence_mut().unwrap().insert(0, pause);
    std::fs::write(&plan, serde_yaml::to_string(&yaml).unwrap()).unwrap();
    let out = dir.join("run");
    let output = run_plan(&plan, &out, &docker_args(&[]));
    assert_passed(&output, "node-crash in containers");
    let report = report(&out);
    assert_eq!(report["verdict"], "pass");
    assert!(!report["series"].as_array().unwrap().is_empty());

    // The plan's `kill: node-1` is a SIGKILL of its container, recorded as such.
    let kill = events(&out).into_iter().find(|e| {
        e["kind"] == "service_exit" && e["service"] == "node-1" && e["signal"] == "SIGKILL"
    });
    assert!(kill.is_some(), "no SIGKILL exit of node-1 in events.jsonl");
    let paused = events(&out)
        .into_iter()
        .find(|e| e["kind"] == "action_end" && e["action"] == "pause" && e["target"] == "nats");
    assert!(paused.is_some(), "the pause of nats did not run its course");
    let failed: Vec<_> = events(&out)
        .into_iter()
        .filter(|e| e["kind"] == "action_end" && e["error"].is_string())
        .collect();
    assert!(failed.is_empty(), "actions failed: {failed:?}");
    // Every container's output went to its log.
    for service in ["postgres", "nats", "node-1", "node-2"] {
        let log = std::fs::read_to_string(out.join("logs").join(format!("{service}.log")))
            .unwrap_or_default();
        assert!(
            log.lines().count() > 1,
            "logs/{service}.log is empty:\n{log}"
        );
    }
    let node = std::fs::read_to_string(out.join("logs/node-1.log")).unwrap();
    assert_eq!(
        node.matches("starting node-1: image anyplay/node:local")
            .count(),
        2,
        "one log header per start of the container:\n{node}"
    );
    assert_eq!(containers_of(&out), Vec::<String>::new(), "containers left");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn resource_faults_pass_in_containers_and_leave_nothing_behind() {
    let _engine = engine_shared();
    let _turn = a_run_turn();
    let dir = scratch("docker-resource-faults");
    let plan = reduced_plan("resource-faults", &dir, 200, "10s");
    let out = dir.join("run");
    let output = run_plan(&plan, &out, &docker_args(&[]));
    assert_passed(&output, "resource-faults in containers");
    // Every fault ran its course: limits set and cleared, the disk filled and freed.
    let ended: Vec<String> = events(&out)
        .into_iter()
        .filter(|e| e["kind"] == "action_end")
        .map(|e| {
            assert!(e["error"].is_null(), "a fault failed: {e}");
            e["action"].as_str().unwrap().to_owned()
        })
        .collect();
    for action in ["cpu", "memory", "disk_full", "clock"] {
        assert!(
            ended.iter().any(|a| a == action),
            "{action} never ended: {ended:?}"
        );
    }
    assert_eq!(containers_of(&out), Vec::<String>::new(), "containers left");
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    assert!(
        !mounts.contains(out.to_str().unwrap()),
        "a disk of the run is still mounted"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A container node moved to another image and back: each is a container made again under
/// its name from that image, the history names the version at each start, and the run passes.
#[test]
fn an_upgrade_makes_a_node_s_container_again_from_the_candidate_image() {
    let _engine = engine_shared();
    let _turn = a_run_turn();
    let tagged = std::process::Command::new("docker")
        .args(["tag", "anyplay/node:local", "anyplay/node:candidate"])
        .status()
        .expect("docker runs");
    assert!(tagged.success(), "docker tag anyplay/node:local failed");
    let dir = scratch("docker-upgrade");
    let plan = reduced_plan_with("node-crash", &dir, 40, "5s", |plan| {
        plan["versions"] =
            serde_yaml::from_str("{candidate: {image: 'anyplay/node:candidate'}}").unwrap();
        plan["timeline"] = serde_yaml::from_str(
            "[{at: 3s, upgrade: node-1, to: candidate}, {at: 12s, upgrade: node-1, to: built-in}]",
        )
        .unwrap();
    });
    let out = dir.join("run");
    let output = run_plan(&plan, &out, &docker_args(&[]));
    assert_passed(&output, "an upgrade in containers");
    let versions: Vec<String> = events(&out)
        .into_iter()
        .filter(|e| e["kind"] == "service_start" && e["service"] == "node-1")
        .map(|e| e["version"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(versions, ["built-in", "candidate", "built-in"]);
    let failed: Vec<_> = events(&out)
        .into_iter()
        .filter(|e| e["kind"] == "action_end" && e["error"].is_string())
        .collect();
    assert!(failed.is_empty(), "actions failed: {failed:?}");
    // No container of the run is left: the replaced ones were removed on the way.
    assert!(containers_of(&out).is_empty(), "{:?}", containers_of(&out));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_sigkilled_supervisor_s_containers_go_when_the_next_run_starts() {
    // Another test's run would remove the orphans before they are counted. (The engine
    // before a run turn, as every test takes them: none waits for one holding the other.)
    let _engine = engine_alone();
    let _turn = a_run_turn();
    let dir = scratch("docker-sigkill");
    let plan = reduced_plan("node-crash", &dir, 20, "5s");
    let first = dir.join("first");
    let mut args = vec![
        "run",
        plan.to_str().unwrap(),
        "--out",
        first.to_str().unwrap(),
    ];
    args.extend(docker_args(&[]));
    let mut supervisor = chaos(&args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(120);
    while !std::fs::read_to_string(first.join("events.jsonl"))
        .unwrap_or_default()
        .contains(r#""kind":"timeline_start""#)
    {
        assert!(Instant::now() < deadline, "the first run never got going");
        assert!(
            supervisor.try_wait().unwrap().is_none(),
            "the first run ended early"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    supervisor.kill().unwrap();
    supervisor.wait().unwrap();
    // Docker has no parent-death signal: the containers outlive their supervisor…
    let orphans = containers_of(&first);
    assert_eq!(
        orphans.len(),
        4,
        "postgres, nats and two nodes: {orphans:?}"
    );

    // …until the next run starts on that engine (its own, tiny).
    let second = dir.join("second");
    let quick = reduced_plan("quickstart", &dir, 20, "10s");
    let output = run_plan(&quick, &second, &docker_args(&[]));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("removed 4 containers left by a run that died"),
        "{stderr}"
    );
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert_eq!(containers_of(&first), Vec::<String>::new());
    assert_eq!(containers_of(&second), Vec::<String>::new());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_unreachable_engine_is_a_clear_error_before_anything_starts() {
    let dir = scratch("docker-unreachable");
    let plan = reduced_plan("quickstart", &dir, 10, "1s");
    let out = dir.join("run");
    let output = chaos(&[
        "run",
        plan.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ])
    .args(docker_args(&[]))
    .env(
        "DOCKER_HOST",
        format!("unix://{}/no-engine.sock", dir.display()),
    )
    .output()
    .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("cannot reach the Docker engine"),
        "{stderr}"
    );
    assert!(!out.join("logs/node-1.log").exists(), "nothing started");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_missing_image_is_named_with_how_to_get_it() {
    let _engine = engine_shared();
    let dir = scratch("docker-missing-image");
    let plan = reduced_plan("node-crash", &dir, 10, "1s");
    let out = dir.join("run");
    let output = run_plan(
        &plan,
        &out,
        &docker_args(&["--image", "nats=anyplay/no-such-nats:never"]),
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("nats: anyplay/no-such-nats:never: build it with deploy/images/build.sh"),
        "{stderr}"
    );
    assert!(
        !stderr.contains("postgres:"),
        "only the missing one: {stderr}"
    );
    assert!(!out.join("logs/postgres.log").exists(), "nothing started");
    let _ = std::fs::remove_dir_all(&dir);
}
