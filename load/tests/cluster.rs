//! The in-process cluster end to end: two real `anyplay-cloud` nodes on the PostgreSQL and NATS
//! of `deploy/test-services.sh` (a database of the run's own): login and presence across the
//! nodes with a `drop` storm, and a `kill-node` storm whose players come back on node 2.

use std::collections::{BTreeSet, HashSet};
use std::sync::Arc;

use anyplay_load::measure::facts::Fact;
use anyplay_load::measure::generator::SchedLag;
use anyplay_load::measure::progress::Progress;
use anyplay_load::measure::stats::Op;
use anyplay_load::scenarios::{friends, login, presence, storm, Ctx};
use anyplay_load::settings::Settings;
use anyplay_load::target::inprocess::InProcess;
use anyplay_load::{run, Fleet};

use crate::support::{
    assert_friends_kept, check_contract_fields, scenario, services, settings, written,
};

/// `flags` on a two-node cluster of the test services.
fn cluster(flags: &[&str]) -> Settings {
    let services = services();
    let mut all = vec![
        "--nodes",
        "2",
        "--database-url",
        &services.postgres_url,
        "--nats-url",
        &services.nats_url,
    ];
    all.extend_from_slice(flags);
    settings(&all)
}

/// The sum of a node's `/metrics` series whose names start with `prefix`, as moved in the run.
fn moved(series: &anyplay_load::target::metrics::Metrics, prefix: &str) -> f64 {
    series
        .iter()
        .filter(|(name, _)| name.starts_with(prefix))
        .map(|(_, moved)| moved)
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_nodes_deliver_presence_across_the_cluster_and_survive_a_drop() {
    let settings = cluster(&[
        "--players",
        "40",
        "--rate",
        "100",
        "--friends",
        "4",
        "--scenarios",
        "presence,storm",
        "--presence-rate",
        "40",
        "--presence-seconds",
        "1",
    ]);
    let (cloud, target) = InProcess::start(&settings.mode).await.expect("the cluster");
    assert_eq!(target.nodes.len(), 2);
    let report = run::run(&settings, target, Progress::hidden()).await;
    cloud.shutdown().await;
    let report = report.expect("the run");

    let login = scenario(&report, "login");
    assert_eq!(login.players.as_ref().map(|p| p.online), Some(40));
    assert_eq!(login.ops[&Op::E2eLogin].ok, 40);
    let friends = scenario(&report, "friends");
    assert_eq!(friends.ops[&Op::FriendAccept].ok, 80);

    // Players alternate between the nodes and befriend their ring neighbours, so half of
    // every change's friends are on the other node.
    let delivery = scenario(&report, "presence")
        .delivery
        .clone()
        .expect("delivery");
    assert!(delivery.changes >= 35, "{delivery:?}");
    assert_eq!(delivery.expected, delivery.changes * 4, "{delivery:?}");
    assert_eq!(delivery.missing, 0, "{delivery:?}");

    let storm = scenario(&report, "storm");
    let back = storm.storm.as_ref().expect("storm");
    assert_eq!((back.players_hit, back.players_back), (40, 40), "{back:?}");
    assert_eq!(back.errors, 0, "{:?}", storm.ops);
    assert!(back.back_s.all.is_some_and(|s| s < 15.0), "{back:?}");

    for node in ["node-1", "node-2"] {
        let series = &report.server[node];
        assert!(
            moved(series, "anyplay_http_requests") > 0.0,
            "{node}: {series:?}"
        );
        assert!(
            moved(series, "anyplay_nats_messages_out") > 0.0
                && moved(series, "anyplay_nats_messages_in") > 0.0,
            "{node} used the bus both ways: {series:?}"
        );
    }
    let json = written(&report);
    check_contract_fields(&json);
    assert_eq!(json["settings"]["mode"]["kind"], "cluster");
    assert_eq!(json["settings"]["mode"]["nodes"], 2);
    assert!(
        !json["settings"].to_string().contains("postgres://"),
        "the database URL may carry a password"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_node_s_players_come_back_on_the_other_node() {
    let settings = cluster(&[
        "--players",
        "20",
        "--friends",
        "4",
        "--scenarios",
        "presence,storm",
        "--storm",
        "kill-node",
        "--storm-timeout",
        "40",
        "--presence-rate",
        "20",
        "--presence-seconds",
        "1",
    ]);
    let (cloud, target) = InProcess::start(&settings.mode).await.expect("the cluster");
    let fleet = Arc::new(
        Fleet::new(
            &target,
            0..20,
            settings.reconnect,
            settings.seed,
            None,
            None,
        )
        .await
        .expect("fleet"),
    );
    let ctx = Ctx {
        settings: Arc::new(settings),
        fleet: fleet.clone(),
        lag: SchedLag::new(),
        progress: Progress::hidden(),
        control: target.control.clone(),
    };
    login::run(&ctx).await;
    friends::run(&ctx).await;
    assert_eq!(fleet.online_count(), 20);
    let on_node_1: BTreeSet<usize> = fleet
        .players()
        .iter()
        .filter(|p| p.node() == 0)
        .map(|p| p.index)
        .collect();
    assert_eq!(on_node_1.len(), 10, "players alternate between the nodes");

    let mut facts = fleet.facts().expect("the facts");
    let report = storm::run(&ctx).await.expect("the storm");
    let storm = report.storm.as_ref().expect("storm");
    assert_eq!((storm.kind, storm.players_hit), ("kill-node", 10));
    assert_eq!(storm.players_back, 10, "{storm:?}");
    // A lost connection, a failed try on the dead node, then node 2: two spec pauses.
    assert!(
        storm.back_s.all.is_some_and(|s| (0.4..30.0).contains(&s)),
        "{storm:?}"
    );

    let mut came_back = HashSet::new();
    while let Ok(stamped) = facts.try_recv() {
        if let Fact::Welcome { node_index, .. } = stamped.fact {
            assert_eq!(
                node_index, 1,
                "player {} welcomed by node 1",
                stamped.player
            );
            came_back.insert(stamped.player);
        }
    }
    assert_eq!(came_back.into_iter().collect::<BTreeSet<_>>(), on_node_1);
    for player in fleet.players() {
        assert!(player.is_online(), "player {}", player.index);
        assert_eq!(player.node(), 1, "player {}", player.index);
        // What the cloud acknowledged before the crash is still there.
        assert_friends_kept(player).await;
    }

    // Node 2 alone now holds everyone: presence still reaches every friend.
    let after = presence::run(&ctx).await;
    let delivery = after.delivery.as_ref().expect("delivery");
    assert!(delivery.changes > 0, "{delivery:?}");
    assert_eq!(delivery.missing, 0, "{delivery:?}");

    fleet.shutdown().await;
    cloud.shutdown().await;
}
