//! `up --api` (issue 33): Toxiproxy's own Node client (npm `toxiproxy-node-client`, installed
//! by deploy/test.sh into deploy/toxiproxy-client) drives the faults of a running topology
//! while players play; after Ctrl-C the run is judged and reported as a `run`, and every
//! change it made is a timeline action of the history and a row of the faults table.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::{a_run_turn, chaos, reduced_plan_with, report, scratch, workspace};

/// A loopback port nothing listens on now.
fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

/// Waits until the supervisor says every player is online (its timeline started).
fn until_playing(supervisor: &mut Child, out: &Path) {
    let deadline = Instant::now() + Duration::from_secs(180);
    loop {
        let events = std::fs::read_to_string(out.join("events.jsonl")).unwrap_or_default();
        if events.contains(r#""kind":"timeline_start""#) {
            return;
        }
        assert!(Instant::now() < deadline, "never playing:\n{events}");
        assert!(
            supervisor.try_wait().unwrap().is_none(),
            "the supervisor ended early"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn toxiproxys_client_drives_a_running_up_and_the_run_is_judged_after_ctrl_c() {
    let client = workspace().join("deploy/toxiproxy-client");
    assert!(
        client.join("node_modules/toxiproxy-node-client").is_dir(),
        "Toxiproxy's client is not installed: npm ci --prefix deploy/toxiproxy-client (deploy/test.sh does)"
    );
    let _turn = a_run_turn();
    let dir = scratch("control-api");
    let plan = reduced_plan_with("network-faults", &dir, 60, "10s", |plan| {
        plan["timeline"] = serde_yaml::Value::Sequence(Vec::new());
    });
    let out = dir.join("out");
    let api = format!("127.0.0.1:{}", free_port());
    let mut supervisor = chaos(&[
        "up",
        plan.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--api",
        &api,
    ])
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    until_playing(&mut supervisor, &out);

    let driven = Command::new("node")
        .arg(client.join("drive.js"))
        .arg(format!("http://{api}"))
        .output()
        .expect("node runs");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(supervisor.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    let output = supervisor.wait_with_output().unwrap();
    assert!(
        driven.status.success(),
        "the client failed:\n{}\n{}",
        String::from_utf8_lossy(&driven.stdout),
        String::from_utf8_lossy(&driven.stderr)
    );
    crate::support::assert_passed(&output, "up after Ctrl-C");

    // Every change is a timeline action with its start and end.
    let events = std::fs::read_to_string(out.join("events.jsonl")).unwrap();
    let actions: Vec<Value> = events
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|e| e["kind"] == "action_start" || e["kind"] == "action_end")
        .collect();
    let started = |action: &str, target: &str| {
        actions
            .iter()
            .filter(|e| {
                e["kind"] == "action_start" && e["action"] == action && e["target"] == target
            })
            .count()
    };
    // latency both ways, then the downstream one again after its update; the reset's one.
    assert_eq!(started("latency", "node-1<->players"), 3, "{actions:#?}");
    assert_eq!(started("latency", "node-1<->postgres"), 1);
    assert_eq!(started("bandwidth", "node-2<->players"), 1);
    // timeout, then reset_peer (a timeout that ends by RST).
    assert_eq!(started("timeout", "node-2<->players"), 1);
    assert_eq!(started("timeout", "node-1<->players"), 1);
    assert_eq!(started("partition", "node-2<->nats"), 1);
    assert_eq!(started("partition", "node-2<->players"), 1);
    let ends = actions.iter().filter(|e| e["kind"] == "action_end").count();
    assert_eq!(ends * 2, actions.len(), "every start has its end");

    // The report lists each change as a fault.
    let report = report(&out);
    let faults = report["faults"].as_array().unwrap();
    assert_eq!(faults.len(), 9, "{faults:#?}");
    assert_eq!(report["verdict"], "pass");
    let _ = std::fs::remove_dir_all(&dir);
}
