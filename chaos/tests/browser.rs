//! The report as a browser shows it: `anyplay-chaos report` renders `report.html` from the
//! committed run of `plans/node-crash.yaml`, headless Debian Chromium opens it, and the
//! page's own script (`report/html/drawn.rs`) says what was drawn: the players-online line,
//! one labelled marker per timeline action with players online dipping after the kill and
//! back before the next action, and node-1's bands up, down, up. Then a screenshot.
//!
//! Chromium is required, not optional: without it this test fails and says how to install
//! it (`deploy/test.sh` does). The flags are those of `deploy/screenshot-report.sh`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

const CHROMIUM: &str = "/usr/bin/chromium";
/// Headless as root, offline, with nothing of a profile or a background service.
const FLAGS: [&str; 8] = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
];
/// The page laid out as the screenshot shows it.
const WINDOW_SIZE: &str = "--window-size=1400,1800";
/// Generous for a cold start on a busy 2-core machine.
const BROWSER_TIMEOUT: Duration = Duration::from_secs(120);

/// A fresh directory for this test's files.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "anyplay-chaos-browser-{name}-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The committed run's inputs in `dir`, its event log unzipped, and `report DIR` run on it.
fn render_committed_run(dir: &Path) -> PathBuf {
    for file in ["plan.yaml", "load.json"] {
        std::fs::copy(crate::committed::dir().join(file), dir.join(file))
            .unwrap_or_else(|e| panic!("copying {file}: {e}"));
    }
    std::fs::write(dir.join("events.jsonl"), crate::committed::events_jsonl()).unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_anyplay-chaos"))
        .arg("report")
        .arg(dir)
        .output()
        .expect("anyplay-chaos runs");
    assert_eq!(
        output.status.code(),
        Some(0),
        "report of the committed (passing) run: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    dir.join("report.html")
}

/// Runs headless Chromium with its own new profile on `page`, bounded in time.
fn chromium(profile: &Path, args: &[&str], page: &Path) -> Output {
    assert!(
        Path::new(CHROMIUM).is_file(),
        "{CHROMIUM} is missing: the browser test needs Debian's Chromium (apt-get install chromium)"
    );
    std::fs::create_dir_all(profile).unwrap();
    let mut child = Command::new(CHROMIUM)
        .args(FLAGS)
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(args)
        .arg(format!("file://{}", page.display()))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("chromium starts");
    let deadline = Instant::now() + BROWSER_TIMEOUT;
    // Polled, so a hung browser is killed rather than hanging the suite.
    while child.try_wait().expect("chromium is waited for").is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("chromium did not finish within {BROWSER_TIMEOUT:?}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    child.wait_with_output().expect("chromium's output")
}

/// The JSON the page's script wrote into `<pre id="drawn">` of the dumped DOM.
fn drawn(dom: &str) -> Value {
    let start = dom
        .find("<pre id=\"drawn\"")
        .and_then(|i| dom[i..].find('>').map(|j| i + j + 1))
        .unwrap_or_else(|| panic!("no <pre id=\"drawn\"> in the DOM:\n{dom}"));
    let end = start + dom[start..].find("</pre>").expect("</pre>");
    let text = dom[start..end]
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&");
    assert!(!text.is_empty(), "the page's script wrote nothing");
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

#[test]
fn chromium_draws_the_node_crash_report_and_takes_its_screenshot() {
    let dir = scratch("node-crash");
    let page = render_committed_run(&dir);

    let output = chromium(
        &dir.join("profile-dom"),
        &["--dump-dom", WINDOW_SIZE],
        &page,
    );
    let dom = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "chromium --dump-dom failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let drawn = drawn(&dom);

    // Every series of the four panels has a line (or, for errors, bars) on screen; the
    // players-online line spans the timeline and the settle, more than half of the 1,206-unit
    // time axis (the login wave and the friend graph before it have no series).
    let series = &drawn["series"];
    for name in [
        "online",
        "welcomes",
        "disconnects",
        "calls",
        "HTTP p99",
        "presence delivery p99",
    ] {
        assert!(
            series[name]["drawn"].as_u64() >= Some(1),
            "{name} not drawn: {series}"
        );
    }
    assert!(series["online"]["width"].as_f64() > Some(600.0), "{series}");

    // One marker per timeline action, each line and label drawn, in timeline order.
    let markers = drawn["markers"].as_array().expect("markers");
    let labels: Vec<&str> = markers
        .iter()
        .map(|m| m["label"].as_str().unwrap())
        .collect();
    assert_eq!(
        labels,
        ["kill node-1", "start node-1", "stop node-2", "start node-2"]
    );
    for m in markers {
        assert_eq!(
            (&m["line"], &m["text"]),
            (&Value::Bool(true), &Value::Bool(true)),
            "{m}"
        );
    }
    // At the kill, players online dip below their level before it (the line goes down the
    // panel: larger y) and are back at that level or above before node-1 is started again
    // (churn moves the level a little). The level is the line's last data point before the
    // kill: the second's sample may fall just after the kill or just before.
    let online = &markers[0]["online"];
    let y = |key: &str| {
        online[key]
            .as_f64()
            .unwrap_or_else(|| panic!("{key}: {online}"))
    };
    assert!(
        y("lowest") - y("before") > 10.0,
        "no visible dip after the kill: {online}"
    );
    assert!(
        y("before_next") - y("before") < 2.0,
        "players online not back before the next action: {online}"
    );

    // The node-state bands: node-1 killed and started again, node-2 drained and started
    // again; both down at the very end, when the run stops every service.
    let bands = &drawn["bands"];
    assert_eq!(
        bands["node-1"],
        serde_json::json!(["up", "down", "up", "down"])
    );
    assert_eq!(
        bands["node-2"],
        serde_json::json!(["up", "draining", "down", "up", "down"])
    );

    let png = dir.join("report.png");
    let output = chromium(
        &dir.join("profile-shot"),
        &[&format!("--screenshot={}", png.display()), WINDOW_SIZE],
        &page,
    );
    assert!(
        output.status.success(),
        "chromium --screenshot failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let bytes = std::fs::read(&png).expect("the screenshot");
    assert!(bytes.starts_with(b"\x89PNG\r\n\x1a\n"), "not a PNG");
    // The IHDR chunk right after the signature gives width and height.
    let size = |at: usize| u32::from_be_bytes(bytes[at..at + 4].try_into().unwrap());
    assert_eq!((size(16), size(20)), (1400, 1800));
    // A blank page compresses to a few kB; charts, bands and tables do not.
    assert!(bytes.len() > 50_000, "{} bytes: a blank page?", bytes.len());
    std::fs::remove_dir_all(&dir).unwrap();
}
