//! External mode end to end against the fake node: sign-in codes from the mail log, every
//! scenario's report, the drop storm, the player event feed and the ledger.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;

use anyplay_load::generator::SchedLag;
use anyplay_load::progress::Progress;
use anyplay_load::report::{json, table};
use anyplay_load::scenarios::{friends, login, Ctx};
use anyplay_load::settings::{Args, Mode, Settings};
use anyplay_load::stats::{Op, Status};
use anyplay_load::{runner, Break, EventKind, Fleet, Target};

use crate::fake_cloud;

fn mail_log(name: &str) -> PathBuf {
    let path = std::env::temp_dir().join(format!("anyplay-load-{name}-{}.log", std::process::id()));
    let _ = std::fs::remove_file(&path);
    path
}

fn settings(url: &str, mail_log: &Path, extra: &[&str]) -> Settings {
    let mut argv = vec![
        "anyplay-load",
        "--url",
        url,
        "--mail-log",
        mail_log.to_str().expect("utf-8 path"),
    ];
    argv.extend_from_slice(extra);
    Settings::from_args(Args::try_parse_from(argv).expect("flags parse")).expect("valid settings")
}

fn target(settings: &Settings) -> Target {
    match &settings.mode {
        Mode::External(external) => Target::external(external).expect("target"),
        other => panic!("expected external mode, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_against_an_external_node_reports_every_scenario() {
    let log = mail_log("run");
    let url = fake_cloud::start(log.clone()).await;
    let metrics = format!("{url}/metrics");
    let settings = settings(
        &url,
        &log,
        &[
            "--metrics-url",
            &metrics,
            "--players",
            "60",
            "--returning",
            "10",
            "--rate",
            "200",
            "--friends",
            "4",
            "--scenarios",
            "presence,sessions,cards,storm",
            "--presence-rate",
            "50",
            "--presence-seconds",
            "1",
            "--session-rate",
            "10",
            "--session-seconds",
            "1",
            "--session-size",
            "3",
            "--session-hold",
            "200ms",
            "--cards-rate",
            "50",
            "--cards-seconds",
            "1",
            "--cards-size",
            "100",
            "--source-ips",
            "127.0.0.2-127.0.0.5",
        ],
    );
    let report = runner::run(&settings, target(&settings), Progress::hidden())
        .await
        .expect("the run");
    let names: Vec<&str> = report.scenarios.iter().map(|s| s.name).collect();
    assert_eq!(
        names,
        ["login", "friends", "presence", "sessions", "cards", "storm"]
    );
    let scenario = |name: &str| {
        report
            .scenarios
            .iter()
            .find(|s| s.name == name)
            .expect("scenario")
    };

    let login = scenario("login");
    assert_eq!(login.players.as_ref().map(|p| p.online), Some(60));
    assert_eq!(login.ops[&Op::E2eLogin].ok, 60);
    // 10 returning players sign in: only 50 sign up.
    assert_eq!(login.ops[&Op::AuthSignup].count, 50);
    assert_eq!(
        login.ops[&Op::FriendsList].count,
        60,
        "a friends list after every welcome"
    );
    assert_eq!(login.ops[&Op::WsConnect].status[&Status::Http(101)], 60);

    let friends = scenario("friends");
    assert_eq!(
        (
            friends.ops[&Op::FriendRequest].ok,
            friends.ops[&Op::FriendAccept].ok
        ),
        (120, 120)
    );

    let delivery = scenario("presence").delivery.as_ref().expect("delivery");
    assert!(delivery.changes >= 45, "{delivery:?}");
    assert_eq!(
        delivery.expected,
        delivery.changes * 4,
        "4 friends online per change"
    );
    assert_eq!(delivery.missing, 0, "{delivery:?}");

    let sessions = scenario("sessions");
    for op in [Op::SessionCreate, Op::SessionJoin, Op::SessionLeave] {
        assert_eq!(sessions.ops[&op].ok, sessions.ops[&op].count, "{op}");
    }
    assert_eq!(sessions.ops[&Op::SessionCreate].count, 10);

    let cards = &scenario("cards").ops[&Op::Cards];
    assert_eq!((cards.count, cards.ok), (50, 50), "{:?}", cards.status);

    let storm = scenario("storm").storm.as_ref().expect("storm");
    assert_eq!((storm.players_hit, storm.players_back), (60, 60));
    // spec reconnect after a drop waits 0.5 to 1.5 s.
    let all_back = storm.back_s.all.expect("everyone back");
    assert!((0.5..5.0).contains(&all_back), "{all_back}");
    assert_eq!(storm.errors, 0);

    assert!(
        report.server["node-1"]["fake_requests_total"] > 500.0,
        "{:?}",
        report.server
    );
    assert!(report.generator.rss_mb_peak > 0.0);

    let text = table::render(&report);
    assert!(
        text.contains("storm drop (spec reconnect): 60 players hit, 60 back; 50% "),
        "{text}"
    );
    let json_path = log.with_extension("json");
    json::write(&report, &json_path).expect("written");
    let written: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json_path).expect("readable"))
            .expect("json");
    let written_back = written["scenarios"][5]["storm"]["back_s"]["100"].as_f64();
    assert!(
        written_back.is_some_and(|s| (s - all_back).abs() < 1e-6),
        "{written_back:?}"
    );
    if std::env::var_os("SHOW_REPORT").is_some() {
        println!(
            "{text}\n{}",
            serde_json::to_string_pretty(&written).expect("json")
        );
    }
    let _ = std::fs::remove_file(&json_path);
    let _ = std::fs::remove_file(&log);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_library_caller_sees_player_events_drops_and_ledgers() {
    let log = mail_log("fleet");
    let url = fake_cloud::start(log.clone()).await;
    let settings = settings(
        &url,
        &log,
        &[
            "--players",
            "8",
            "--friends",
            "2",
            "--reconnect",
            "immediate",
            "--scenarios",
            "presence",
        ],
    );
    let target = target(&settings);
    let fleet = Arc::new(
        Fleet::new(&target, 8, settings.reconnect, None)
            .await
            .expect("fleet"),
    );
    let ctx = Ctx {
        settings: Arc::new(settings),
        fleet: fleet.clone(),
        lag: SchedLag::new(),
        progress: Progress::hidden(),
        control: None,
    };
    login::run(&ctx).await;
    friends::run(&ctx).await;
    assert_eq!(fleet.online_count(), 8);

    let mut events = fleet.subscribe();
    fleet.drop_all();
    let (mut lost, mut back) = (HashSet::new(), HashSet::new());
    while back.len() < 8 {
        let event = tokio::time::timeout(Duration::from_secs(5), events.recv())
            .await
            .expect("events")
            .expect("open");
        match event.kind {
            EventKind::Lost { reason } => {
                assert_eq!(reason, Break::Dropped);
                lost.insert(event.player);
            }
            EventKind::Welcome { node, .. } if lost.contains(&event.player) => {
                assert_eq!(node, "fake-1");
                back.insert(event.player);
            }
            _ => {}
        }
    }
    for player in fleet.players() {
        assert_eq!(player.ledger().friends.len(), 2, "player {}", player.index);
        assert_eq!(player.verify_ledger().await.expect("verified"), []);
    }
    fleet.shutdown().await;
    assert_eq!(fleet.online_count(), 8, "a shutdown is not a loss");
    let _ = std::fs::remove_file(&log);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ladder_reports_ramp_and_steady_per_rung_and_the_knee() {
    let log = mail_log("ladder");
    let url = fake_cloud::start(log.clone()).await;
    let settings = settings(
        &url,
        &log,
        &[
            "--players",
            "20",
            "--friends",
            "4",
            "--scenarios",
            "ladder",
            "--ladder",
            "30,50",
            "--ladder-warmup",
            "500ms",
            "--ladder-steady",
            "1",
            "--ladder-think",
            "500ms",
            "--budget-ms",
            "1000",
        ],
    );
    let report = runner::run(&settings, target(&settings), Progress::hidden())
        .await
        .expect("the run");
    let ladder = report
        .scenarios
        .last()
        .expect("ladder")
        .ladder
        .as_ref()
        .expect("ladder report");
    let players: Vec<usize> = ladder.rungs.iter().map(|r| r.players).collect();
    assert_eq!(players, [30, 50]);
    for rung in &ladder.rungs {
        assert_eq!(rung.online, rung.players);
        // players / think calls per second over the steady second.
        assert!(
            rung.steady_calls >= (rung.players * 2 - 2) as u64,
            "{rung:?}"
        );
        assert!(rung.within_budget, "{rung:?}");
    }
    assert_eq!(ladder.knee, Some(50));
    let _ = std::fs::remove_file(&log);
}
