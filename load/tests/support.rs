//! What the integration tests share: settings from flags, the contract's report checks, and the
//! PostgreSQL + NATS that `deploy/test-services.sh` starts for the cluster tests.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

use clap::Parser;
use serde_json::Value;

use anyplay_load::report::{json, Report, ScenarioReport};
use anyplay_load::settings::{Args, Settings};
use anyplay_load::Player;

/// The op names of `shared/spec/load.md`, all of them.
pub const SPEC_OPS: [&str; 14] = [
    "auth_email",
    "auth_code",
    "auth_signup",
    "ws_connect",
    "e2e_login",
    "friends_list",
    "friend_request",
    "friend_accept",
    "presence_set",
    "presence_delivery",
    "session_create",
    "session_join",
    "session_leave",
    "cards",
];

/// Validated settings from `anyplay-load` flags.
pub fn settings(flags: &[&str]) -> Settings {
    let argv = std::iter::once("anyplay-load").chain(flags.iter().copied());
    Settings::from_args(Args::try_parse_from(argv).expect("flags parse")).expect("valid settings")
}

/// A fresh path in the temp directory, unique within this test process (tests run in parallel).
pub fn temp_path(name: &str) -> PathBuf {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    std::env::temp_dir().join(format!("anyplay-load-it-{}-{n}-{name}", std::process::id()))
}

/// The scenario `name` of `report`.
pub fn scenario<'a>(report: &'a Report, name: &str) -> &'a ScenarioReport {
    report
        .scenarios
        .iter()
        .find(|s| s.name == name)
        .unwrap_or_else(|| panic!("no {name} scenario in the report"))
}

/// The report as `--json` writes it, read back.
pub fn written(report: &Report) -> Value {
    let path = temp_path("report.json");
    json::write(report, &path).expect("the report is written");
    let text = std::fs::read_to_string(&path).expect("the report is readable");
    let _ = std::fs::remove_file(&path);
    serde_json::from_str(&text).expect("the report is JSON")
}

fn has(v: &Value, path: &str, keys: &[&str]) {
    for key in keys {
        assert!(v.get(key).is_some(), "the report has no {path}{key}: {v:#}");
    }
}

/// Checks that a written report has every field `shared/spec/load.md` names, each scenario its
/// own (`delivery` for presence only, `storm` for the storm only), and only the contract's op
/// names; returns the op names it saw.
pub fn check_contract_fields(v: &Value) -> BTreeSet<String> {
    has(
        v,
        "",
        &[
            "schema",
            "machine",
            "settings",
            "commit",
            "date",
            "generator",
            "scenarios",
            "server",
            "process",
        ],
    );
    assert_eq!(v["schema"], "anyplay-load/report/v1");
    has(
        &v["generator"],
        "generator.",
        &["sched_lag_ms", "cpu_cores_avg", "rss_mb_peak"],
    );
    has(
        &v["generator"]["sched_lag_ms"],
        "generator.sched_lag_ms.",
        &["p50", "p99", "max"],
    );
    assert!(
        v["generator"]["rss_mb_peak"].as_f64() > Some(0.0),
        "{:#}",
        v["generator"]
    );
    let mut ops = BTreeSet::new();
    for s in v["scenarios"].as_array().expect("a scenario list") {
        let name = s["name"].as_str().expect("a scenario name");
        has(
            s,
            &format!("{name}."),
            &[
                "name",
                "seconds",
                "http_calls_per_s",
                "ops",
                "skipped_saturated",
                "series",
            ],
        );
        assert_eq!(s.get("delivery").is_some(), name == "presence", "{name}");
        assert_eq!(s.get("storm").is_some(), name == "storm", "{name}");
        for (op, stats) in s["ops"].as_object().expect("an op map") {
            assert!(
                SPEC_OPS.contains(&op.as_str()),
                "{name}: {op} is no op name of the contract"
            );
            has(
                stats,
                &format!("{name}.ops.{op}."),
                &[
                    "count", "ok", "p50_ms", "p95_ms", "p99_ms", "max_ms", "status",
                ],
            );
            ops.insert(op.clone());
        }
        for second in s["series"].as_array().expect("a series") {
            has(
                second,
                &format!("{name}.series[]."),
                &["t", "calls", "errors", "p99_ms"],
            );
        }
    }
    ops
}

/// The PostgreSQL and NATS of `deploy/test-services.sh`. A cluster test without them fails:
/// skipping would pass a suite that never ran the cluster.
pub struct Services {
    pub postgres_url: String,
    pub nats_url: String,
}

pub fn services() -> Services {
    let var = |name: &str| {
        std::env::var(name).unwrap_or_else(|_| {
            panic!(
                "{name} is not set: the cluster tests need the PostgreSQL and NATS that \
                 deploy/test.sh starts. Run `deploy/test.sh`, or from the workspace \
                 `source deploy/test-services.sh && cargo test --release -p anyplay-load` \
                 in one shell"
            )
        })
    };
    Services {
        postgres_url: var("ANYPLAY_TEST_POSTGRES_URL"),
        nats_url: var("ANYPLAY_TEST_NATS_URL"),
    }
}

/// Every friendship the cloud acknowledged to `player` is still in its `GET /v1/friends`.
pub async fn assert_friends_kept(player: &Player) {
    let listed: BTreeSet<_> = player
        .list_friends(std::time::Instant::now())
        .await
        .expect("the friends list")
        .friends
        .iter()
        .map(|f| f.account_id)
        .collect();
    let acknowledged = player.ledger().friends;
    assert!(
        acknowledged.is_subset(&listed),
        "player {}: acknowledged {acknowledged:?}, listed {listed:?}",
        player.index
    );
}
