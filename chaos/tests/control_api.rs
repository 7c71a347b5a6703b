//! `up --api` (issue 33): Toxiproxy's own Node client (npm `toxiproxy-node-client`, installed
//! by deploy/test.sh into deploy/toxiproxy-client), Python client (PyPI `toxiproxy-python`,
//! in deploy/python/.venv) and Rust client (crates.io `toxiproxy_rust`, deploy/toxiproxy-rust,
//! built by deploy/test.sh) drive the faults of a running topology while players play, `--metrics` (checked with Prometheus' own OpenMetrics parser, from
//! PyPI) follows the players through a `drop`, then anyplay's service actions and the
//! refusals; after Ctrl-C the run
//! is judged and reported as a `run`, and every change it made is a timeline action of the
//! history and a row of the faults table. `run --metrics` follows the players through its
//! timeline's `drop` the same way.

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

/// `METHOD path` with `body` on `api`, as plain HTTP/1.1: the status and the body.
fn request(api: &str, method: &str, path: &str, headers: &str, body: &str) -> (u16, String) {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(api).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: {api}\r\nConnection: close\r\n{headers}\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    let status = answer
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or(0);
    let body = answer.split("\r\n\r\n").nth(1).unwrap_or_default();
    (status, body.to_owned())
}

/// anyplay's own part of the API: service actions as plan entries, and what is refused.
fn service_actions_and_refusals(api: &str) {
    let act = |entry: &str| request(api, "POST", "/anyplay/actions", "", entry);
    let (status, body) = act(r#"{"kill": "node-1"}"#);
    assert_eq!(status, 200, "{body}");
    let answer: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        (answer["action"].as_str(), answer["target"].as_str()),
        (Some("kill"), Some("node-1"))
    );
    let (status, body) = act(r#"{"kill": "node-1"}"#);
    assert_eq!(status, 400, "killed already: {body}");
    assert!(body.contains("it is stopped"), "{body}");
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(act(r#"{"start": "node-1"}"#).0, 200);
    let (status, body) = act(r#"{"latency": ["node-1", "nats"], "ms": 5, "for": "2s"}"#);
    assert_eq!(status, 400, "a link fault goes through the toxics: {body}");
    assert_eq!(act(r#"{"kill": "node-9"}"#).0, 400);
    assert_eq!(act(r#"{"kill": "node-1", "at": "3s"}"#).0, 400);
    assert_eq!(act(r#"{"kill": "node-1""#).0, 400);

    // Toxiproxy's own refusals of what it does not serve.
    let browser = "User-Agent: Mozilla/5.0\r\n";
    assert_eq!(request(api, "GET", "/proxies", browser, "").0, 403);
    let huge = format!(
        r#"{{"type": "latency", "name": "{}"}}"#,
        "x".repeat(100_000)
    );
    assert_eq!(
        request(api, "POST", "/proxies/node-1-nats/toxics", "", &huge).0,
        413
    );
    let made_up = r#"{"name": "elsewhere", "listen": "127.0.0.1:0", "upstream": "10.0.0.1:22"}"#;
    let (status, body) = request(api, "POST", "/proxies", "", made_up);
    assert_eq!(status, 400);
    assert!(
        body.contains("is none of the topology's services"),
        "{body}"
    );
    assert_eq!(
        request(api, "POST", "/populate", "", r#"[{"name": "elsewhere"}]"#).0,
        400
    );
    let moved = r#"[{"name": "node-1-nats", "upstream": "10.0.0.1:4222"}]"#;
    assert_eq!(request(api, "POST", "/populate", "", moved).0, 400);
    let (status, body) = request(api, "POST", "/populate", "", r#"[{"name": "node-1-nats"}]"#);
    assert_eq!(status, 201, "{body}");
    assert_eq!(
        request(api, "DELETE", "/proxies/node-1-nats/toxics/none", "", "").0,
        404
    );
    let elsewhere = r#"{"enabled": true, "upstream": "10.0.0.1:22"}"#;
    assert_eq!(
        request(api, "POST", "/proxies/node-1-nats", "", elsewhere).0,
        400
    );
    deleted_proxy_is_gone_until_given_again(api);
}

/// `DELETE /proxies/{name}` as in Toxiproxy: the proxy is gone (404, not listed, not brought
/// back by a reset) and its address refuses connections; `POST /proxies` at its addresses
/// makes it again, and so does `POST /populate`.
fn deleted_proxy_is_gone_until_given_again(api: &str) {
    use std::io::Read;
    let (_, listed) = request(api, "GET", "/proxies/node-1-nats", "", "");
    let listed: Value = serde_json::from_str(&listed).unwrap();
    let gone = |what: &str| {
        assert_eq!(
            request(api, "GET", "/proxies/node-1-nats", "", "").0,
            404,
            "{what}"
        );
        let (_, all) = request(api, "GET", "/proxies", "", "");
        assert!(!all.contains("node-1-nats"), "{what}: {all}");
    };
    assert_eq!(
        request(api, "DELETE", "/proxies/node-1-nats", "", "").0,
        204
    );
    gone("deleted");
    assert_eq!(
        request(api, "DELETE", "/proxies/node-1-nats", "", "").0,
        404
    );
    let toxic = r#"{"type": "latency"}"#;
    let path = "/proxies/node-1-nats/toxics";
    assert_eq!(request(api, "POST", path, "", toxic).0, 404);
    let listen = listed["listen"].as_str().unwrap();
    let mut probe = std::net::TcpStream::connect(listen).unwrap();
    probe
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    match probe.read(&mut [0u8; 16]) {
        Ok(0) => {}
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
        other => panic!("a deleted proxy let a connection through: {other:?}"),
    }
    assert_eq!(request(api, "POST", "/reset", "", "").0, 204);
    gone("after a reset");

    let again = serde_json::json!({
        "name": "node-1-nats",
        "listen": listed["listen"],
        "upstream": listed["upstream"],
    })
    .to_string();
    let (status, body) = request(api, "POST", "/proxies", "", &again);
    assert_eq!(status, 201, "{body}");
    assert_eq!(
        serde_json::from_str::<Value>(&body).unwrap()["enabled"],
        true
    );
    assert_eq!(request(api, "POST", "/proxies", "", &again).0, 409);
    // Another proxy to the same service is refused, naming those that reach it.
    let another = again.replace("\"node-1-nats\"", "\"my-nats\"");
    let (status, body) = request(api, "POST", "/proxies", "", &another);
    assert_eq!(status, 400);
    assert!(body.contains("is reached through node-1-nats"), "{body}");
    assert_eq!(
        request(api, "DELETE", "/proxies/node-1-nats", "", "").0,
        204
    );
    let (status, body) = request(api, "POST", "/populate", "", &format!("[{again}]"));
    assert_eq!(status, 201, "{body}");
    assert_eq!(request(api, "GET", "/proxies/node-1-nats", "", "").0, 200);
}

/// One scrape of `--metrics`, parsed by Prometheus' own OpenMetrics parser: its samples.
fn scrape(metrics: &str) -> Vec<(String, Value, f64)> {
    let (status, text) = request(metrics, "GET", "/metrics", "", "");
    assert_eq!(status, 200, "{text}");
    let python = workspace().join("deploy/python/.venv/bin/python");
    let mut parser = Command::new(python)
        .arg(workspace().join("deploy/python/openmetrics_parse.py"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the OpenMetrics parser runs");
    std::io::Write::write_all(&mut parser.stdin.take().unwrap(), text.as_bytes()).unwrap();
    let parsed = parser.wait_with_output().unwrap();
    assert!(
        parsed.status.success(),
        "not OpenMetrics: {}\n{text}",
        String::from_utf8_lossy(&parsed.stderr)
    );
    serde_json::from_slice(&parsed.stdout).unwrap()
}

fn sample(samples: &[(String, Value, f64)], name: &str) -> f64 {
    samples
        .iter()
        .find(|(n, _, _)| n == name)
        .map(|(_, _, value)| *value)
        .unwrap_or_else(|| panic!("no {name} in {samples:?}"))
}

/// `--metrics` while players play: a `drop` takes the players online down, and they come back.
fn players_online_moves_with_a_drop(api: &str, metrics: &str) {
    let before = scrape(metrics);
    let online = sample(&before, "anyplay_players_online");
    assert!(online > 0.0, "{before:?}");
    assert!(sample(&before, "anyplay_calls_total") > 0.0);
    // The client's toxics are over, each counted active and then not.
    let latency = before.iter().find(|(name, labels, _)| {
        name == "anyplay_faults_active"
            && labels["action"] == "latency"
            && labels["target"] == "node-1<->players"
    });
    assert_eq!(latency.map(|(_, _, value)| *value), Some(0.0), "{before:?}");

    let (status, body) = request(
        api,
        "POST",
        "/anyplay/actions",
        "",
        r#"{"drop": "players"}"#,
    );
    assert_eq!(status, 200, "{body}");
    let mut seen = Vec::new();
    let until = Instant::now() + Duration::from_secs(8);
    while Instant::now() < until {
        seen.push(sample(&scrape(metrics), "anyplay_players_online"));
        std::thread::sleep(Duration::from_millis(250));
    }
    let lowest = seen.iter().copied().fold(f64::INFINITY, f64::min);
    assert!(
        lowest < online,
        "players online {online} before the drop, then {seen:?}"
    );
    assert!(
        seen.last().copied().unwrap_or_default() > lowest,
        "back after the drop: {seen:?}"
    );
}

/// The supervisor, killed if the test ends early (its children die with it).
struct Held(Option<Child>);

impl Drop for Held {
    fn drop(&mut self) {
        if let Some(child) = &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// `anyplay-chaos COMMAND PLAN --out OUT EXTRA…`, once it says every player is online (its
/// timeline started).
fn playing(command: &str, plan: &Path, out: &Path, extra: &[&str]) -> Held {
    let mut supervisor = chaos(&[
        command,
        plan.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ])
    .args(extra)
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(180);
    loop {
        let events = std::fs::read_to_string(out.join("events.jsonl")).unwrap_or_default();
        if events.contains(r#""kind":"timeline_start""#) {
            return Held(Some(supervisor));
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
    assert!(
        workspace()
            .join("deploy/python/.venv/bin/python")
            .is_file(),
        "Toxiproxy's Python client and the OpenMetrics parser are not installed (deploy/test.sh installs them)"
    );
    let rust_client = workspace().join("target/toxiproxy-rust/debug/anyplay-toxiproxy-rust");
    assert!(
        rust_client.is_file(),
        "Toxiproxy's Rust client is not built: cargo build --manifest-path \
         deploy/toxiproxy-rust/Cargo.toml --target-dir target/toxiproxy-rust (deploy/test.sh does)"
    );
    let _turn = a_run_turn();
    let dir = scratch("control-api");
    let plan = reduced_plan_with("network-faults", &dir, 60, "10s", |plan| {
        plan["timeline"] = serde_yaml::Value::Sequence(Vec::new());
    });
    let out = dir.join("out");
    let api = format!("127.0.0.1:{}", free_port());
    let metrics = format!("127.0.0.1:{}", free_port());
    let mut held = playing("up", &plan, &out, &["--api", &api, "--metrics", &metrics]);

    // First, while the players are spread over both nodes: a kill must hit some (failover).
    service_actions_and_refusals(&api);
    let driven = Command::new("node")
        .arg(client.join("drive.js"))
        .arg(format!("http://{api}"))
        .output()
        .expect("node runs");
    if driven.status.success() {
        players_online_moves_with_a_drop(&api, &metrics);
    }
    let (host, port) = api.split_once(':').unwrap();
    let python = Command::new(workspace().join("deploy/python/.venv/bin/python"))
        .arg(workspace().join("deploy/python/toxiproxy_drive.py"))
        .args([host, port])
        .output()
        .expect("python runs");
    let rust = Command::new(&rust_client)
        .arg(&api)
        .output()
        .expect("the Rust client runs");
    let clients_passed =
        driven.status.success() && python.status.success() && rust.status.success();
    let supervisor = held.0.take().unwrap();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(supervisor.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    let output = supervisor.wait_with_output().unwrap();
    for (name, client) in [("Node", &driven), ("Python", &python), ("Rust", &rust)] {
        assert!(
            clients_passed,
            "Toxiproxy's {name} client ({}):\n{}\n{}",
            client.status,
            String::from_utf8_lossy(&client.stdout),
            String::from_utf8_lossy(&client.stderr)
        );
    }
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
    assert_eq!(started("bandwidth", "node-2<->players"), 2);
    // timeout, then reset_peer (a timeout that ends by RST).
    assert_eq!(started("timeout", "node-2<->players"), 1);
    assert_eq!(started("timeout", "node-1<->players"), 1);
    assert_eq!(started("partition", "node-2<->nats"), 2);
    assert_eq!(started("partition", "node-2<->players"), 1);
    // The Python client's.
    assert_eq!(started("slicer", "node-1<->players"), 1);
    assert_eq!(started("slow_close", "node-1<->postgres"), 1);
    assert_eq!(started("limit_data", "node-2<->players"), 1);
    // Deleted twice (each a partition until given again), then the Python client's down.
    assert_eq!(started("partition", "node-1<->nats"), 3);
    // The Rust client's (bandwidth and partition above).
    assert_eq!(started("latency", "node-2<->players"), 1);
    assert_eq!(started("slicer", "node-2<->players"), 1);
    assert_eq!(started("timeout", "node-1<->postgres"), 1);
    assert_eq!(started("drop", "players"), 1);
    assert_eq!(started("kill", "node-1"), 1);
    assert_eq!(started("start", "node-1"), 1);
    let ends = actions.iter().filter(|e| e["kind"] == "action_end").count();
    assert_eq!(ends * 2, actions.len(), "every start has its end");

    // The report lists each change as a fault.
    let report = report(&out);
    let faults = report["faults"].as_array().unwrap();
    assert_eq!(faults.len(), 23, "{faults:#?}");
    assert_eq!(report["verdict"], "pass");
    // Each toxic as Toxiproxy names it: the reset_peer is not shown as the timeout it is on
    // the proxy.
    let toxic_of = |kind: &str| faults.iter().find(|f| f["toxic"]["type"] == kind);
    let reset_peer = toxic_of("reset_peer").expect("the reset_peer in the faults");
    assert_eq!(reset_peer["action"], "timeout");
    assert_eq!(reset_peer["toxic"]["name"], "reset_peer_upstream");
    assert_eq!(reset_peer["toxic"]["attributes"]["timeout"], 500);
    assert_eq!(toxic_of("timeout").unwrap()["toxic"]["toxicity"], 0.5);
    let summary = std::fs::read_to_string(out.join("summary.md")).unwrap();
    assert!(
        summary.contains("| reset_peer ")
            && summary.contains("reset_peer_upstream: upstream, timeout=500"),
        "{summary}"
    );

    // The recorded plan's timeline is what the API did, for `rerun` to replay; it resolves.
    let recorded = anyplay_chaos::plan::Plan::load_from_run(&out.join("plan.yaml"))
        .expect("the recorded plan with the API's changes is valid");
    let kinds: Vec<String> = recorded
        .timeline
        .iter()
        .map(|entry| entry.action.kind().to_string())
        .collect();
    // latency ×4 (down, up, down again after its update, postgres), bandwidth, timeout ×2
    // (one was reset_peer), partition ×5 (two deletes), slicer, slow_close, limit_data, drop,
    // kill, start; the Rust client's latency, slicer, timeout, partition and bandwidth.
    assert_eq!(kinds.len(), 23, "{kinds:?}");
    for kind in [
        "latency",
        "bandwidth",
        "timeout",
        "partition",
        "slicer",
        "slow_close",
        "limit_data",
        "drop",
        "kill",
        "start",
    ] {
        assert!(kinds.iter().any(|k| k == kind), "{kind} in {kinds:?}");
    }
    // The reset_peer replays as a timeout that resets, the timeout as one that closes.
    let closes: Vec<bool> = recorded
        .timeline
        .iter()
        .filter_map(|entry| match entry.action {
            anyplay_chaos::plan::Action::Link {
                fault: anyplay_chaos::plan::LinkFault::Timeout { reset, .. },
                ..
            } => Some(reset),
            _ => None,
        })
        .collect();
    assert_eq!(
        closes,
        [false, true, false],
        "the timeout, the reset_peer, Rust's timeout"
    );
    // What `rerun` fires is what the API did: the recorded timeline resolves to the same
    // actions on the same targets as the history's `action_start` lines.
    let timeline = recorded.resolve(recorded.seed).expect("it resolves");
    let mut replayed: Vec<(String, String)> = timeline
        .steps
        .iter()
        .map(|step| (step.action.kind().to_string(), step.action.target_label()))
        .collect();
    let mut done: Vec<(String, String)> = actions
        .iter()
        .filter(|e| e["kind"] == "action_start")
        .map(|e| {
            let text = |key: &str| e[key].as_str().unwrap_or_default().to_owned();
            (text("action"), text("target"))
        })
        .collect();
    replayed.sort();
    done.sort();
    assert_eq!(replayed, done);
    let _ = std::fs::remove_dir_all(&dir);
}

/// `run --metrics`: while a plan's timeline fires its `drop`, the scrape shows the players
/// online fall and come back, and the run ends judged as without the flag.
#[test]
fn run_metrics_follow_the_players_through_the_timelines_drop() {
    assert!(
        workspace().join("deploy/python/.venv/bin/python").is_file(),
        "the OpenMetrics parser is not installed (deploy/test.sh installs it)"
    );
    let _turn = a_run_turn();
    let dir = scratch("run-metrics");
    let plan = reduced_plan_with("network-faults", &dir, 60, "10s", |plan| {
        plan["timeline"] = serde_yaml::from_str("[{at: 6s, drop: players}]").unwrap();
    });
    let out = dir.join("out");
    let metrics = format!("127.0.0.1:{}", free_port());
    let mut held = playing("run", &plan, &out, &["--metrics", &metrics]);
    // The series counts each second as it ends.
    let deadline = Instant::now() + Duration::from_secs(4);
    let online = loop {
        let online = sample(&scrape(&metrics), "anyplay_players_online");
        if online > 0.0 || Instant::now() > deadline {
            break online;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(online > 0.0, "nobody online once the timeline started");
    let mut seen = Vec::new();
    let until = Instant::now() + Duration::from_secs(14);
    while Instant::now() < until {
        seen.push(sample(&scrape(&metrics), "anyplay_players_online"));
        std::thread::sleep(Duration::from_millis(250));
    }
    let lowest = seen.iter().copied().fold(f64::INFINITY, f64::min);
    assert!(lowest < online, "{online} online, then {seen:?}");
    assert!(
        seen.last().copied().unwrap_or_default() > lowest,
        "back after the drop: {seen:?}"
    );
    let output = held.0.take().unwrap().wait_with_output().unwrap();
    crate::support::assert_passed(&output, "run --metrics");
    let _ = std::fs::remove_dir_all(&dir);
}
