//! External mode end to end: the real `anyplay-cloud` binary as a process of its own, played by
//! the real `anyplay-load` binary through `--url`, `--mail-log`, `--metrics-url` and `--pid`.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::{check_contract_fields, temp_path};

/// The `anyplay-load` binary of this build.
const LOAD: &str = env!("CARGO_BIN_EXE_anyplay-load");

/// The `anyplay-cloud` binary of this build: a workspace member, so it sits beside ours in the
/// target directory (this test runs from `target/release/deps/`).
fn cloud_binary() -> PathBuf {
    let exe = std::env::current_exe().expect("the test executable's path");
    let path = exe
        .parent()
        .and_then(|deps| deps.parent())
        .map(|dir| dir.join("anyplay-cloud"))
        .expect("the test executable sits in target/<profile>/deps");
    assert!(
        path.is_file(),
        "{} is missing: build it first with `cargo build --release --workspace --all-targets` \
         (deploy/test.sh does)",
        path.display()
    );
    path
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free loopback port")
        .port()
}

/// One `anyplay-cloud` process on SQLite with a mail log and no rate limits; killed when
/// dropped, its directory kept when the test failed.
struct CloudProcess {
    child: Child,
    dir: PathBuf,
    api: String,
    ops: String,
}

impl CloudProcess {
    async fn start() -> CloudProcess {
        let dir = temp_path("cloud");
        std::fs::create_dir_all(&dir).expect("the node's directory");
        let (api_port, ops_port) = (free_port(), free_port());
        let log = std::fs::File::create(dir.join("node.log")).expect("the node's log");
        let child = Command::new(cloud_binary())
            .args(["--listen", &format!("127.0.0.1:{api_port}")])
            .args(["--ops-listen", &format!("127.0.0.1:{ops_port}")])
            .args([
                "--database-url",
                &format!("sqlite:{}", dir.join("cloud.db").display()),
            ])
            .args(["--mail-log", &dir.join("mail.log").display().to_string()])
            .arg("--no-rate-limits")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("anyplay-cloud starts");
        let mut node = CloudProcess {
            child,
            dir,
            api: format!("http://127.0.0.1:{api_port}"),
            ops: format!("http://127.0.0.1:{ops_port}"),
        };
        node.wait_ready().await;
        node
    }

    async fn wait_ready(&mut self) {
        let http = reqwest::Client::new();
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let ready = http.get(format!("{}/readyz", self.ops)).send().await;
            if ready.is_ok_and(|r| r.status() == 200) {
                return;
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("anyplay-cloud exited ({status}); its log:\n{}", self.log());
            }
            assert!(
                Instant::now() < deadline,
                "anyplay-cloud not ready in 30 s; its log:\n{}",
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    fn mail_log(&self) -> PathBuf {
        self.dir.join("mail.log")
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("node.log")).unwrap_or_default()
    }
}

impl Drop for CloudProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            eprintln!("anyplay-cloud kept its files in {}", self.dir.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// Runs the `anyplay-load` binary with `args`, bounded in time.
async fn load(args: &[String]) -> Output {
    let run = tokio::process::Command::new(LOAD)
        .args(args)
        .kill_on_drop(true)
        .output();
    tokio::time::timeout(Duration::from_secs(180), run)
        .await
        .expect("anyplay-load ends within 3 minutes")
        .expect("anyplay-load runs")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_load_binary_plays_an_external_cloud_process() {
    let cloud = CloudProcess::start().await;
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
