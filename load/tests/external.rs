//! External mode end to end: the real `anyplay-cloud` binary as a process of its own, played by
//! the real `anyplay-load` binary through `--url`, `--mail-log`, `--metrics-url` and `--pid`.

use std::time::{Duration, Instant};

use serde_json::Value;

use crate::processes::{load, CloudProcess};
use crate::support::{check_contract_fields, temp_path};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_load_binary_plays_an_external_cloud_process() {
    let cloud = CloudProcess::sqlite().await;
    let json_path = temp_path("external.json");
    let pid = cloud.child.id().to_string();
    let args: Vec<String> = [
        "--url",
        &cloud.api,
        "--mail-log",
        &cloud.mail_log().display().to_string(),
        "--metrics-url",
        &format!("{}/metrics", cloud.ops),
        "--pid",
        &pid,
        "--players",
        "40",
        "--rate",
        "100",
        "--friends",
        "4",
        "--scenarios",
        "presence,sessions,cards,storm",
        "--presence-rate",
        "40",
        "--presence-seconds",
        "1",
        "--session-rate",
        "5",
        "--session-seconds",
        "1",
        "--session-size",
        "3",
        "--session-hold",
        "200ms",
        "--cards-rate",
        "40",
        "--cards-seconds",
        "1",
        "--json",
        &json_path.display().to_string(),
    ]
    .map(String::from)
    .to_vec();
    let out = load(&args).await;
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(
        out.status.success(),
        "anyplay-load failed ({}):\n{stdout}\n{stderr}\ncloud log:\n{}",
        out.status,
        cloud.log()
    );
    for line in [
        "== login: ",
        "== friends: ",
        "== presence: ",
        "== sessions: ",
        "== cards: ",
        "== storm: ",
        "online: 40 of 40 players",
        "storm drop (spec reconnect): 40 players hit, 40 back; ",
        &format!("node pid {pid}: "),
    ] {
        assert!(stdout.contains(line), "no {line:?} in\n{stdout}");
    }

    let text = std::fs::read_to_string(&json_path).expect("the --json report");
    let _ = std::fs::remove_file(&json_path);
    let report: Value = serde_json::from_str(&text).expect("JSON");
    check_contract_fields(&report);
    assert_eq!(report["settings"]["mode"]["kind"], "external");
    assert_eq!(report["process"]["cloud_in_harness"], false);
    let node = &report["process"]["nodes"][0];
    assert_eq!(node["pid"].as_u64(), Some(u64::from(cloud.child.id())));
    assert!(node["rss_mb_peak"].as_f64() > Some(0.0), "{node}");
    let metrics = report["server"]["node-1"]
        .as_object()
        .expect("what node-1's /metrics say changed");
    assert!(
        metrics
            .keys()
            .any(|k| k.starts_with("anyplay_http_requests")),
        "{metrics:?}"
    );

    let scenarios = report["scenarios"].as_array().expect("scenarios");
    let by_name = |name: &str| {
        scenarios
            .iter()
            .find(|s| s["name"] == name)
            .unwrap_or_else(|| panic!("no {name}"))
    };
    assert_eq!(by_name("login")["ops"]["e2e_login"]["ok"], 40);
    let delivery = &by_name("presence")["delivery"];
    assert_eq!(delivery["missing"], 0, "{delivery}");
    assert!(delivery["expected"].as_u64() > Some(0), "{delivery}");
    let cards = &by_name("cards")["ops"]["cards"];
    assert_eq!(
        (cards["count"].as_u64(), cards["ok"].as_u64()),
        (Some(40), Some(40)),
        "{cards}"
    );
    let storm = &by_name("storm")["storm"];
    assert_eq!(storm["players_back"], 40, "{storm}");
    assert_eq!(storm["errors"], 0, "{storm}");
}

#[tokio::test]
async fn bad_settings_are_refused_before_anything_starts() {
    // No cloud listens on port 9: a refusal must come before any call.
    let refused = [
        (vec!["--players", "0"], "--players"),
        (
            vec!["--scenarios", "cards", "--cards-size", "101"],
            "--cards-size",
        ),
        (vec!["--storm", "kill-node"], "--storm"),
        // Two sockets a player in process: more than any process may open.
        (vec!["--players", "1000000"], "sockets for 1000000 players"),
        (
            vec![
                "--url",
                "http://127.0.0.1:9",
                "--mail-log",
                "m",
                "--storm",
                "stop-node",
            ],
            "--storm",
        ),
        (
            vec![
                "--url",
                "http://127.0.0.1:9",
                "--mail-log",
                "m",
                "--agents",
                "0",
                "--nats",
                "nats://127.0.0.1:9",
            ],
            "--agents",
        ),
        (
            vec![
                "--url",
                "http://127.0.0.1:9",
                "--mail-log",
                "m",
                "--agents",
                "3",
            ],
            "--agents",
        ),
    ];
    for (flags, flag) in refused {
        let args: Vec<String> = flags.iter().map(|f| f.to_string()).collect();
        let started = Instant::now();
        let out = load(&args).await;
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{flags:?}: {stderr}");
        assert!(
            stderr.contains("refused") && stderr.contains(flag),
            "{flags:?}: {stderr}"
        );
        assert!(started.elapsed() < Duration::from_secs(10), "{flags:?}");
    }
}
