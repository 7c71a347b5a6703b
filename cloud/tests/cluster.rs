//! What only a cluster can show, on two nodes A and B sharing PostgreSQL and
//! NATS: replacement across nodes, presence across nodes, the limits of the
//! store under calls spread over both nodes, and a node that lost NATS.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use futures_util::future::join_all;
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

use crate::concurrency::{thirty_joins_never_overfill_four, twenty_requests_give_exactly_ten};
use crate::events::push_presence;
use crate::support::{End, Player, TestCloud, TestNats, TestNode, Through, SOON};

/// The connections `node` lists for `account_id`.
async fn listed(node: &TestNode, account_id: i64) -> Vec<Value> {
    node.connections()
        .await
        .into_iter()
        .filter(|c| c["account_id"] == account_id)
        .collect()
}

/// A client that gives up before its welcome (a storm's clients wait 10 s for one, then try
/// again) is shed while its record waits: the node drops it, counts it, and never welcomes or
/// lists it.
#[tokio::test]
async fn a_client_gone_before_its_welcome_is_shed_while_its_record_waits() {
    let cloud = TestCloud::pair(&[]).await;
    let ann = cloud.signup("ann").await;
    let a = cloud.node(0);
    let mut held = shed_while_its_record_waits(&cloud, a, &ann).await;
    sqlx::query("ROLLBACK")
        .execute(&mut held)
        .await
        .expect("rollback");
    assert!(listed(a, ann.id).await.is_empty());
    let welcomes = "anyplay_welcome_step_seconds_count{step=\"welcome\"}";
    assert_eq!(a.metric(welcomes).await, 0.0);
    // Her next connection is welcomed as usual.
    let (_events, welcome) = a.connect(&ann).await;
    assert_eq!(welcome["node"], a.id.as_str());
}

/// Holds `player`'s token as a logout would, so that its registration on `node` waits for it;
/// connects, and leaves once the record's statement waits (it is written when the token is
/// let go); returns when the node shed the welcome, with the token still held by the returned
/// connection's transaction.
async fn shed_while_its_record_waits(
    cloud: &TestCloud,
    node: &TestNode,
    player: &Player,
) -> sqlx::PgConnection {
    let (mut held, mut sql) = (cloud.sql().await, cloud.sql().await);
    sqlx::query("BEGIN")
        .execute(&mut held)
        .await
        .expect("begin");
    sqlx::query("SELECT 1 FROM access_tokens WHERE account_id = $1 FOR UPDATE")
        .bind(player.id)
        .execute(&mut held)
        .await
        .expect("hold the token");
    let upgraded = node.try_connect(player).await.expect("upgraded");
    let deadline = Instant::now() + SOON;
    loop {
        let waiting: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() \
             AND wait_event_type = 'Lock' AND query LIKE '%INSERT INTO connections%'",
        )
        .fetch_one(&mut sql)
        .await
        .expect("read");
        if waiting > 0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the record's statement never waited"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    drop(upgraded);
    while node.metric("anyplay_welcomes_shed_total").await < 1.0 {
        assert!(Instant::now() < deadline, "the gone client was not shed");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    held
}

/// A record left by a welcome shed after the record was written told nobody anything: the
/// account's next connection, on that node or the other, tells its friends it is online.
#[tokio::test]
async fn a_connection_after_a_shed_welcome_s_record_is_told_to_friends_on_node_a() {
    online_after_a_shed_welcome(0).await;
}

#[tokio::test]
async fn a_connection_after_a_shed_welcome_s_record_is_told_to_friends_on_node_b() {
    online_after_a_shed_welcome(1).await;
}

/// Ann's welcome on node A is shed while her record waits for her token, which is then let
/// go, so the record is written after all; she connects again on node `next`.
async fn online_after_a_shed_welcome(next: usize) {
    let cloud = TestCloud::pair(&[]).await;
    let ann = cloud.signup("ann").await;
    let bob = cloud.signup("bob").await;
    cloud.befriend(&ann, &bob).await;
    let a = cloud.node(0);
    let (mut bob_events, _) = a.connect(&bob).await;
    let mut sql = shed_while_its_record_waits(&cloud, a, &ann).await;
    sqlx::query("ROLLBACK")
        .execute(&mut sql)
        .await
        .expect("rollback");
    let deadline = Instant::now() + SOON;
    loop {
        let record: Option<String> =
            sqlx::query_scalar("SELECT node FROM connections WHERE account_id = $1")
                .bind(ann.id)
                .fetch_optional(&mut sql)
                .await
                .expect("read");
        if record.is_some() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the shed welcome's record was not written"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (_ann_events, _) = cloud.node(next).connect(&ann).await;
    let e = bob_events.next_of("presence").await;
    assert_eq!(
        (e["account_id"].as_i64(), &e["online"]),
        (Some(ann.id), &json!(true)),
        "{e}"
    );
}

#[tokio::test]
async fn a_connection_on_node_b_replaces_one_on_node_a_with_4001() {
    let cloud = TestCloud::pair(&[]).await;
    let ann = cloud.signup("ann").await;
    let bob = cloud.signup("bob").await;
    let (a, b) = (cloud.node(0), cloud.node(1));
    let (mut bob_ev, _) = a.connect(&bob).await;
    let (mut first, w1) = a.connect(&ann).await;
    assert_eq!(w1["node"], a.id.as_str());
    // Friends while online: every presence event bob gets is about the ann of that moment.
    cloud.befriend(&ann, &bob).await;
    let e = bob_ev.next_of("presence").await;
    assert_eq!(e["online"], true, "{e}");
    first.next_of("presence").await;
    let (mut second, w2) = b.connect(&ann).await;
    assert_eq!(w2["node"], b.id.as_str());
    assert_ne!(w1["connection_id"], w2["connection_id"]);
    assert_eq!(first.closed().await, End::Close(4001));
    // Each welcome's steps are timed; only B's had an old connection to close.
    let steps = |step: &str| format!("anyplay_welcome_step_seconds_count{{step=\"{step}\"}}");
    for (node, welcomes, replaced) in [(a, 2.0, 0.0), (b, 1.0, 1.0)] {
        for step in ["turn", "register", "welcome"] {
            assert_eq!(
                node.metric(&steps(step)).await,
                welcomes,
                "{} {step}",
                node.id
            );
        }
        assert_eq!(
            node.metric(&steps("replace")).await,
            replaced,
            "{}",
            node.id
        );
    }

    // A forgets the old connection as its socket ends; B lists the new one.
    let deadline = Instant::now() + SOON;
    loop {
        let on_a = listed(a, ann.id).await;
        if on_a.is_empty() {
            break;
        }
        assert!(Instant::now() < deadline, "A still lists {on_a:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let on_b = listed(b, ann.id).await;
    assert_eq!(on_b.len(), 1, "{on_b:?}");
    assert_eq!(on_b[0]["connection_id"], w2["connection_id"]);

    // A replacement is not an offline, not even across nodes.
    let (s, list) = b
        .call(Method::GET, "/v1/friends", Some(&bob.access), None)
        .await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(list["friends"][0]["presence"]["online"], true, "{list}");
    let (s, _) = a
        .call(
            Method::PUT,
            "/v1/presence",
            Some(&ann.access),
            Some(json!({"activity": "a", "version": 1})),
        )
        .await;
    assert_eq!(s, StatusCode::NO_CONTENT);
    let mut seen = Vec::new();
    loop {
        let e = bob_ev.next_of("presence").await;
        seen.push(e["online"].as_bool());
        if e["version"] == 1 {
            break;
        }
    }
    assert!(
        !seen.contains(&Some(false)),
        "a replacement is not an offline: {seen:?}"
    );

    // The new connection on B gets the events, even those made on A.
    let (s, _) = a
        .call(
            Method::PUT,
            "/v1/presence",
            Some(&bob.access),
            Some(json!({"activity": "b", "version": 1})),
        )
        .await;
    assert_eq!(s, StatusCode::NO_CONTENT);
    let e = second.next_of("presence").await;
    let e = if e["version"] == 1 {
        e
    } else {
        second.next_of("presence").await
    };
    assert_eq!(
        (e["account_id"].as_i64(), e["activity"].as_str()),
        (Some(bob.id), Some("b"))
    );
}

/// Issue 11: while NATS was paused, a connection on B was welcomed at once and ann's
/// older one on A stayed open until NATS came back (its 4001 waited on the bus). Now A
/// finds the record taken at its next lease renewal and closes with 4001, and B's
/// welcome waits for that renewal.
#[tokio::test]
async fn with_nats_paused_the_old_connection_closes_4001_before_the_new_welcome() {
    let nats = TestNats::start().await;
    let cloud = TestCloud::pair_builder().nats(&nats.url).start(&[]).await;
    let ann = cloud.signup("ann").await;
    let (a, b) = (cloud.node(0), cloud.node(1));
    let (mut first, _) = a.connect(&ann).await;
    nats.pause();
    let closed = async {
        let end = first.closed().await;
        (end, Instant::now())
    };
    let welcomed = async {
        let (events, welcome) = b.connect(&ann).await;
        (events, welcome, Instant::now())
    };
    let ((end, closed_at), (_second, welcome, welcomed_at)) = tokio::join!(closed, welcomed);
    nats.resume();
    assert_eq!(end, End::Close(4001));
    assert_eq!(welcome["node"], b.id.as_str());
    assert!(
        closed_at <= welcomed_at,
        "the new connection was welcomed {:?} before the old one was closed",
        closed_at - welcomed_at
    );
    let on_a = listed(a, ann.id).await;
    assert!(on_a.is_empty(), "A still lists {on_a:?}");
}

#[tokio::test]
async fn presence_from_a_socket_on_node_a_reaches_a_friend_on_node_b() {
    let cloud = TestCloud::pair(&[]).await;
    let ann = cloud.signup("ann").await;
    let bob = cloud.signup("bob").await;
    let eve = cloud.signup("eve").await;
    let (a, b) = (cloud.node(0), cloud.node(1));
    let (mut bob_ev, _) = b.connect(&bob).await;
    let (mut eve_ev, _) = b.connect(&eve).await;
    // Made friends while bob is online: he hears that ann is offline now.
    cloud.befriend(&ann, &bob).await;
    let e = bob_ev.next_of("presence").await;
    assert_eq!(
        (e["account_id"].as_i64(), e["online"].as_bool()),
        (Some(ann.id), Some(false)),
        "{e}"
    );

    let (ann_ev, _) = a.connect(&ann).await;
    let e = bob_ev.next_of("presence").await;
    assert_eq!(
        (e["account_id"].as_i64(), e["online"].as_bool()),
        (Some(ann.id), Some(true)),
        "{e}"
    );

    // A change made on A, where ann's socket is, reaches bob on B.
    let (s, _) = a
        .call(
            Method::PUT,
            "/v1/presence",
            Some(&ann.access),
            Some(json!({"activity": "in lobby", "version": 3})),
        )
        .await;
    assert_eq!(s, StatusCode::NO_CONTENT);
    let e = bob_ev.next_of("presence").await;
    assert_eq!(
        (
            e["account_id"].as_i64(),
            e["online"].as_bool(),
            e["activity"].as_str(),
            e["version"].as_u64()
        ),
        (Some(ann.id), Some(true), Some("in lobby"), Some(3)),
        "{e}"
    );

    // So does going offline on A.
    drop(ann_ev);
    let e = bob_ev.next_of("presence").await;
    assert_eq!(
        (
            e["account_id"].as_i64(),
            e["online"].as_bool(),
            e["version"].as_u64()
        ),
        (Some(ann.id), Some(false), Some(3)),
        "{e}"
    );

    // Nobody who is not a friend hears any of it.
    let heard = eve_ev.quiet_for(Duration::from_millis(300)).await;
    assert!(heard.is_none(), "{heard:?}");
}

#[tokio::test]
async fn twenty_friend_requests_through_both_nodes_give_exactly_ten() {
    let cloud = TestCloud::pair(&[]).await;
    twenty_requests_give_exactly_ten(&cloud, Through::Alternating).await;
}

#[tokio::test]
async fn thirty_joins_through_both_nodes_never_overfill_a_session_of_four() {
    let cloud = TestCloud::pair(&[]).await;
    thirty_joins_never_overfill_four(&cloud, Through::Alternating).await;
}

/// Presence made before a connection opened must not overtake newer presence.
/// Bob accepts five friends at once through B: B's router queues each friend's
/// presence of that moment ("offline") for bob, who is not connected. Bob and
/// the friends then connect on A, so bob hears them come online. B's one store
/// connection is kept wanted by a stream of calls, so B's router looks up where
/// bob is only after he connected. What bob last heard of each friend must be
/// what `GET /v1/friends` says: online.
#[tokio::test]
async fn presence_made_before_a_connection_does_not_overtake_newer_presence() {
    let cloud = TestCloud::pair(&["--db-connections", "1"]).await;
    let bob = cloud.signup("bob").await;
    let busy = cloud.signup("busy").await;
    let friends = cloud.signup_many("friend_", 5).await;
    for f in &friends {
        let (s, v) = cloud
            .call(
                f,
                Method::POST,
                "/v1/friends/requests",
                Some(json!({"handle": "bob"})),
            )
            .await;
        assert_eq!(s, StatusCode::CREATED, "{v}");
    }
    let (a, b) = (cloud.node(0), cloud.node(1));
    let stop = AtomicBool::new(false);
    let cards = format!("/v1/cards?ids={}", vec![bob.id.to_string(); 100].join(","));
    let keep_b_busy = join_all((0..200).map(|_| async {
        while !stop.load(Ordering::Relaxed) {
            b.call(Method::GET, &cards, Some(&busy.access), None).await;
        }
    }));
    let scenario = async {
        let bob = &bob;
        let accepts = join_all(friends.iter().map(|f| async move {
            let path = format!("/v1/friends/requests/{}/accept", f.id);
            b.call(Method::POST, &path, Some(&bob.access), None).await
        }))
        .await;
        assert!(
            accepts.iter().all(|(s, _)| *s == StatusCode::OK),
            "{accepts:?}"
        );
        let (bob_ev, _) = a.connect(bob).await;
        let sockets = join_all(friends.iter().map(|f| a.connect(f))).await;
        // Long enough for B's queue to empty under the load.
        tokio::time::sleep(Duration::from_secs(2)).await;
        stop.store(true, Ordering::Relaxed);
        (bob_ev, sockets)
    };
    let ((mut bob_ev, _sockets), _) = tokio::join!(scenario, keep_b_busy);

    let (s, list) = a
        .call(Method::GET, "/v1/friends", Some(&bob.access), None)
        .await;
    assert_eq!(s, StatusCode::OK);
    for f in list["friends"].as_array().unwrap() {
        assert_eq!(f["presence"]["online"], true, "{list}");
    }
    let mut heard = Vec::new();
    while let Some(e) = bob_ev.quiet_for(Duration::from_secs(1)).await {
        heard.push(e);
    }
    for f in &friends {
        let last = heard.iter().rev().find(|e| e["account_id"] == f.id);
        assert_eq!(
            last.map(|e| e["online"].clone()),
            Some(Value::Bool(true)),
            "what bob last heard of {}; all he heard: {heard:#?}",
            f.handle
        );
    }
}

/// A node SIGKILLed with 100 players connected: their friends on the other node see
/// them go offline (their connection records expire: about 10 s, 15 s allowed), and the
/// players then reconnect to the other node, never connected twice in any sample.
#[tokio::test]
async fn a_killed_node_s_players_go_offline_then_come_back_once_on_the_other() {
    let cloud = TestCloud::pair(&[]).await;
    let (a, b) = (cloud.node(0), cloud.node(1));
    let away = cloud.signup_many("away_", 100).await;
    let watchers = cloud.signup_many("watch_", 10).await;
    for (i, player) in away.iter().enumerate() {
        cloud.befriend(player, &watchers[i % watchers.len()]).await;
    }
    let mut watching = Vec::new();
    for w in &watchers {
        watching.push(b.connect(w).await.0);
    }
    let mut sockets = Vec::new();
    for p in &away {
        sockets.push(a.connect(p).await.0);
    }

    a.signal(nix::sys::signal::Signal::SIGKILL);
    let killed = Instant::now();
    let deadline = killed + Duration::from_secs(15);
    for (w, events) in watching.iter_mut().enumerate() {
        let mut offline: Vec<i64> = Vec::new();
        let friends: Vec<i64> = away
            .iter()
            .skip(w)
            .step_by(watchers.len())
            .map(|p| p.id)
            .collect();
        while offline.len() < friends.len() {
            let left = deadline.saturating_duration_since(Instant::now());
            let Some(e) = events.quiet_for(left).await else {
                panic!(
                    "watcher {w} saw {} of {} friends go offline within 15 s",
                    offline.len(),
                    friends.len()
                );
            };
            if e["type"] == "presence"
                && e["online"] == false
                && !offline.contains(&e["account_id"].as_i64().unwrap())
            {
                offline.push(e["account_id"].as_i64().unwrap());
            }
        }
    }
    let went_offline = killed.elapsed();

    // Back on B, one connection each, whatever the sample.
    drop(sockets);
    let mut back = Vec::new();
    for p in &away {
        back.push(b.connect(p).await);
    }
    for _ in 0..8 {
        let listed = b.connections().await;
        let mut accounts: Vec<i64> = listed
            .iter()
            .map(|c| c["account_id"].as_i64().unwrap())
            .collect();
        let total = accounts.len();
        accounts.sort_unstable();
        accounts.dedup();
        assert_eq!(
            accounts.len(),
            total,
            "an account is connected twice: {listed:?}"
        );
        assert_eq!(total, away.len() + watchers.len());
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    eprintln!("every friend saw the killed node's players offline after {went_offline:?}");
}

/// The rows of `account_id` in the cloud-wide connection record.
async fn recorded(sql: &mut sqlx::PgConnection, account_id: i64) -> Vec<String> {
    sqlx::query_scalar("SELECT connection_id FROM connections WHERE account_id = $1")
        .bind(account_id)
        .fetch_all(sql)
        .await
        .expect("the connection record")
}

/// Regression (issue 12): two connects of one account at the same moment on two
/// nodes both found no record (a row lock locks nothing when there is no row), and
/// both sockets stayed open. In every round exactly one must be closed with 4001.
#[tokio::test]
async fn two_connects_at_once_on_two_nodes_leave_exactly_one() {
    let cloud = TestCloud::pair(&[]).await;
    let ann = cloud.signup("ann").await;
    let (a, b) = (cloud.node(0), cloud.node(1));
    let mut sql = cloud.sql().await;
    for round in 0..10 {
        let ((mut on_a, wa), (mut on_b, wb)) = tokio::join!(a.connect(&ann), b.connect(&ann));
        // The one that registered first is replaced: which one is up to the race.
        let ended = tokio::select! {
            end = on_a.closed() => (end, "a"),
            end = on_b.closed() => (end, "b"),
        };
        assert_eq!(ended.0, End::Close(4001), "round {round}: {ended:?}");
        let (mut survivor, welcome) = if ended.1 == "a" {
            (on_b, wb)
        } else {
            (on_a, wa)
        };
        let after = survivor.quiet_for(Duration::from_millis(500)).await;
        assert!(
            after.is_none(),
            "round {round}: the newer connection stays open: {after:?}"
        );
        assert_eq!(
            recorded(&mut sql, ann.id).await,
            vec![welcome["connection_id"].as_str().unwrap().to_string()],
            "round {round}: one record, the survivor's"
        );
        // Offline again before the next round, so that both connects find no record.
        survivor.ws.close(None).await.unwrap();
        let deadline = Instant::now() + SOON;
        while !recorded(&mut sql, ann.id).await.is_empty() {
            assert!(Instant::now() < deadline, "round {round}: the record stays");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// Issue 12, item 7: every event, even one between two players of the same
/// node, waited in one unbounded queue behind a `publish` that NATS did not take.
#[tokio::test]
async fn presence_within_a_node_flows_while_nats_is_gone_and_remote_events_are_shed() {
    let mut nats = TestNats::start().await;
    let cloud = TestCloud::pair_builder()
        .nats(&nats.url)
        .start(&["--no-rate-limits", "--bus-queue", "64"])
        .await;
    let (a, b) = (cloud.node(0), cloud.node(1));
    let ann = cloud.signup("ann").await;
    let bob = cloud.signup("bob").await;
    let pushers = cloud.signup_many("pusher", 4).await;
    let far = cloud.signup_many("far", 4).await;
    cloud.befriend(&ann, &bob).await;
    for (p, f) in pushers.iter().zip(&far) {
        cloud.befriend(p, f).await;
    }
    // ann and bob on A; the pushers' friends on B, so every push is for B.
    let (mut bob_ev, _) = a.connect(&bob).await;
    let (_ann_ev, _) = a.connect(&ann).await;
    let mut far_ev = Vec::new();
    for f in &far {
        far_ev.push(b.connect(f).await.0);
    }
    let e = bob_ev.next_of("presence").await;
    assert_eq!(
        (e["account_id"].as_i64(), e["online"].as_bool()),
        (Some(ann.id), Some(true))
    );

    nats.kill();
    // Far more events for B than NATS's client and the bus queue hold.
    push_presence(a, &pushers, 1, 700).await;
    let started = Instant::now();
    let (s, _) = a
        .call(
            Method::PUT,
            "/v1/presence",
            Some(&ann.access),
            Some(json!({"activity": "still here", "version": 9})),
        )
        .await;
    assert_eq!(s, StatusCode::NO_CONTENT);
    let heard = tokio::time::timeout(Duration::from_secs(3), async {
        loop {
            let e = bob_ev.next_of("presence").await;
            if e["account_id"] == ann.id && e["version"] == 9 {
                return e;
            }
        }
    })
    .await;
    assert!(
        heard.is_ok(),
        "bob, on ann's node, did not hear her change within 3 s of it while NATS was gone"
    );
    assert!(started.elapsed() < Duration::from_secs(3));
    let shed = a.metric("anyplay_nats_shed_total").await;
    let queued = a.metric("anyplay_nats_queued").await;
    assert!(shed > 0.0, "nothing shed");
    assert!(queued <= 64.0, "{queued} queued, over the bound of 64");
}

/// Issue 30: two clusters on one NATS heard each other, their subjects named after node ids
/// alone: an event for an account on a node reached the account of that id on the other
/// cluster's node of that name. With their own `--cluster-id`, they share a NATS unheard.
#[tokio::test]
async fn clusters_with_ids_of_their_own_share_a_nats_unheard() {
    let flags = |id| ["--no-rate-limits", "--cluster-id", id];
    let ids = ["twin-a", "twin-b"];
    let one = TestCloud::pair_builder()
        .node_ids(ids)
        .start(&flags("one"))
        .await;
    let two = TestCloud::pair_builder()
        .node_ids(ids)
        .start(&flags("two"))
        .await;
    let (ann, other) = (one.signup("ann").await, two.signup("ann").await);
    assert_eq!(ann.id, other.id, "fresh databases number alike");
    let bob = one.signup("bob").await;
    one.befriend(&ann, &bob).await;
    let (mut other_ev, _) = two.node(1).connect(&other).await;
    let (mut ann_ev, _) = one.node(1).connect(&ann).await;
    // Bob's change on twin-a goes over NATS to twin-b, which holds ann.
    push_presence(one.node(0), std::slice::from_ref(&bob), 10, 1).await;
    let e = ann_ev.next_of("presence").await;
    assert_eq!(e["account_id"], bob.id, "{e}");
    assert_eq!(
        other_ev.quiet_for(Duration::from_secs(2)).await,
        None,
        "cluster two's account of ann's id heard cluster one"
    );
}
