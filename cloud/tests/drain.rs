//! Graceful drain: readiness off, new calls 503 `draining`, sockets closed with
//! 1001, exit 0 — for one node's process, and for one node of a pair while the
//! other keeps serving; and what must not hold a drain up: a call cut off
//! half-way, a client that stopped reading, a socket upgraded as the drain starts.

use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use reqwest::{Method, StatusCode};

use futures_util::StreamExt;
use sqlx::{Connection, Executor};
use tokio::io::AsyncWriteExt;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::Message;

use crate::events::{a_stalled_reader, push_presence};
use crate::support::{raw, End, Player, TestCloud, TestNode, Topology};

#[tokio::test]
async fn sigterm_drains_and_exits_zero() {
    let mut cloud = TestCloud::start(Topology::Single, &["--drain-timeout", "5s"]).await;
    let ann = cloud.signup("ann").await;
    let bob = cloud.signup("bob").await;
    // Not read until the drain is under way: the node waits for the closing
    // handshake, which keeps the drain open long enough to observe it.
    let (mut ann_ev, _) = cloud.connect(&ann).await;
    let (mut bob_ev, _) = cloud.connect(&bob).await;

    let node = cloud.node(0);
    node.signal(Signal::SIGTERM);
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let (s, _) = node.ops_get("/readyz").await;
        if s == StatusCode::SERVICE_UNAVAILABLE {
            break;
        }
        assert!(Instant::now() < deadline, "readiness never turned 503");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let (s, v) = node
        .call(Method::GET, "/v1/me", Some(&ann.access), None)
        .await;
    assert_eq!(
        (s, v["error"]["code"].as_str()),
        (StatusCode::SERVICE_UNAVAILABLE, Some("draining"))
    );

    assert_eq!(ann_ev.closed().await, End::Close(1001));
    assert_eq!(bob_ev.closed().await, End::Close(1001));
    let node = cloud.node_mut(0);
    let status = node.exit_status(Duration::from_secs(20)).await;
    assert_eq!(status.code(), Some(0), "log:\n{}", node.log());
}

/// An answer given once a drain has begun says `Connection: close` and the node closes that
/// connection: a client that reused it would not know whether its next call was applied. (An
/// outside test saw 22 calls under load break that way, each on a connection whose last answer
/// was a 503 `draining` kept alive.)
#[tokio::test]
async fn an_answer_while_draining_closes_its_connection() {
    let cloud = TestCloud::start(Topology::Single, &["--drain-timeout", "5s"]).await;
    let ann = cloud.signup("ann").await;
    // Not read: the node waits for its closing handshake, which keeps the drain open.
    let (_ann_ev, _) = cloud.connect(&ann).await;
    let node = cloud.node(0);
    let request = format!(
        "GET /v1/me HTTP/1.1\r\nHost: node\r\nAuthorization: Bearer {}\r\n\r\n",
        ann.access
    );
    let mut kept = raw::connect(node).await;
    let before = raw::head(&mut kept, &request).await.to_lowercase();
    assert!(before.starts_with("http/1.1 200"), "{before}");
    assert!(!before.contains("connection: close"), "{before}");
    node.signal(Signal::SIGTERM);
    let deadline = Instant::now() + Duration::from_secs(5);
    while node.ops_get("/readyz").await.0 != StatusCode::SERVICE_UNAVAILABLE {
        assert!(Instant::now() < deadline, "readiness never turned 503");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let mut fresh = raw::connect(node).await;
    let during = raw::head(&mut fresh, &request).await.to_lowercase();
    assert!(during.starts_with("http/1.1 503"), "{during}");
    assert!(during.contains("connection: close"), "{during}");
    assert!(raw::closed_within(&mut fresh, Duration::from_secs(2)).await);
}

#[tokio::test]
async fn the_admin_drain_call_does_the_same() {
    let mut cloud = TestCloud::start(Topology::Single, &["--admin-token", "s3cret"]).await;
    let ann = cloud.signup("ann").await;
    let (mut ev, _) = cloud.connect(&ann).await;
    let node = cloud.node(0);
    let url = format!("{}/v1/admin/drain", node.ops);
    let s = node.http.post(&url).send().await.unwrap().status();
    assert_eq!(s, StatusCode::UNAUTHORIZED, "the admin token is required");
    let s = node
        .http
        .post(&url)
        .bearer_auth("s3cret")
        .send()
        .await
        .unwrap()
        .status();
    assert_eq!(s, StatusCode::ACCEPTED);
    assert_eq!(ev.closed().await, End::Close(1001));
    let status = cloud.node_mut(0).exit_status(Duration::from_secs(10)).await;
    assert_eq!(status.code(), Some(0));
}

#[tokio::test]
async fn draining_one_node_of_a_pair_leaves_the_other_serving() {
    let mut cloud = TestCloud::pair(&["--drain-timeout", "5s"]).await;
    let ann = cloud.signup("ann").await;
    let bob = cloud.signup("bob").await;
    // Placed by hand: ann's socket on A, bob's on B. They become friends while
    // online, so every presence event bob gets is about the ann of that moment.
    let (mut ann_ev, _) = cloud.node(0).connect(&ann).await;
    let (mut bob_ev, _) = cloud.node(1).connect(&bob).await;
    cloud.befriend(&ann, &bob).await;
    let e = bob_ev.next_of("presence").await;
    assert_eq!(
        (e["account_id"].as_i64(), e["online"].as_bool()),
        (Some(ann.id), Some(true)),
        "{e}"
    );

    let a = cloud.node(0);
    let s = a
        .http
        .post(format!("{}/v1/admin/drain", a.ops))
        .send()
        .await
        .unwrap()
        .status();
    assert_eq!(s, StatusCode::ACCEPTED);
    assert_eq!(ann_ev.closed().await, End::Close(1001));
    let status = cloud.node_mut(0).exit_status(Duration::from_secs(10)).await;
    assert_eq!(status.code(), Some(0), "log:\n{}", cloud.node(0).log());

    // B kept its socket and its calls, and its player heard ann leave.
    let b = cloud.node(1);
    let e = bob_ev.next_of("presence").await;
    assert_eq!(
        (e["account_id"].as_i64(), e["online"].as_bool()),
        (Some(ann.id), Some(false)),
        "{e}"
    );
    assert_eq!(b.ops_get("/readyz").await.0, StatusCode::OK);
    let (s, list) = b
        .call(Method::GET, "/v1/friends", Some(&bob.access), None)
        .await;
    assert_eq!(s, StatusCode::OK, "{list}");
    assert_eq!(list["friends"][0]["presence"]["online"], false, "{list}");

    // Back on B, as the reconnect rule after 1001 has it: bob sees ann online.
    let (_ann_ev, welcome) = b.connect(&ann).await;
    assert_eq!(welcome["node"], b.id.as_str());
    let e = bob_ev.next_of("presence").await;
    assert_eq!(
        (e["account_id"].as_i64(), e["online"].as_bool()),
        (Some(ann.id), Some(true)),
        "{e}"
    );
    let listed: Vec<_> = b
        .connections()
        .await
        .iter()
        .map(|c| c["account_id"].clone())
        .collect();
    assert!(
        listed.contains(&ann.id.into()) && listed.contains(&bob.id.into()),
        "{listed:?}"
    );
}

/// `players` each send a presence change and hang up before the answer; the
/// connections are returned, to be dropped when the caller likes.
async fn writes_then_hang_up(node: &TestNode, players: &[Player]) -> Vec<tokio::net::TcpStream> {
    let mut clients = Vec::new();
    for p in players {
        let mut stream = raw::connect(node).await;
        let body = r#"{"activity": "x", "version": 7}"#;
        let request = format!(
            "PUT /v1/presence HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\n\
             Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            p.access,
            body.len()
        );
        stream.write_all(request.as_bytes()).await.unwrap();
        clients.push(stream);
    }
    clients
}

/// Holds SQLite's write lock from another connection: the node's writes wait.
async fn hold_write_lock(node: &TestNode) -> sqlx::SqliteConnection {
    let mut holder = sqlx::SqliteConnection::connect(&node.sqlite_url())
        .await
        .unwrap();
    holder.execute("BEGIN IMMEDIATE").await.unwrap();
    holder
}

/// Issue 12, item 6: the count of calls in flight was lowered after the handler
/// returned, so a call whose client left half-way (the handler is dropped)
/// stayed counted for good and every later drain waited its whole timeout.
#[tokio::test]
async fn a_call_whose_client_left_does_not_hold_up_the_drain() {
    let mut cloud = TestCloud::start(Topology::Single, &["--drain-timeout", "30s"]).await;
    let players = cloud.signup_many("player", 2).await;
    let node = cloud.node(0);
    // Slow calls: they wait for the store's write lock.
    let mut holder = hold_write_lock(node).await;
    let clients = writes_then_hang_up(node, &players).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    drop(clients);
    tokio::time::sleep(Duration::from_millis(300)).await;
    holder.execute("ROLLBACK").await.unwrap();

    let started = Instant::now();
    node.signal(Signal::SIGTERM);
    let node = cloud.node_mut(0);
    let status = node.exit_status(Duration::from_secs(40)).await;
    assert_eq!(status.code(), Some(0));
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "the drain took {:?} of its 30 s timeout",
        started.elapsed()
    );
}

/// Issue 12, item 6: the store's "waiting" gauge had the same flaw: a caller
/// dropped while it waited for the writer stayed counted.
#[tokio::test]
async fn callers_that_leave_while_waiting_for_the_store_are_not_counted_as_waiting() {
    let cloud = TestCloud::start(Topology::Single, &[]).await;
    let players = cloud.signup_many("player", 4).await;
    let node = cloud.node(0);
    let mut holder = hold_write_lock(node).await;
    let clients = writes_then_hang_up(node, &players).await;
    let deadline = Instant::now() + Duration::from_secs(4);
    while node.metric("anyplay_store_pool_waiting").await < 2.0 {
        assert!(Instant::now() < deadline, "the writes never queued");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // They give up; then the lock goes.
    drop(clients);
    tokio::time::sleep(Duration::from_millis(300)).await;
    holder.execute("ROLLBACK").await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let waiting = node.metric("anyplay_store_pool_waiting").await;
        if waiting == 0.0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{waiting} callers still counted as waiting, though none is left"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Issue 12, item 5: the drain's 1001 could not reach a client that stopped
/// reading (its write never finished), so the drain waited its whole timeout.
#[tokio::test]
async fn a_drain_finishes_despite_a_client_that_stopped_reading() {
    let mut cloud = TestCloud::start(
        Topology::Single,
        &["--drain-timeout", "30s", "--ping-interval", "60s"],
    )
    .await;
    let (_ann, _ws, pushers) = a_stalled_reader(&cloud).await;
    // Until the socket takes no more: both ends' buffers and its queue are full.
    let node = cloud.node(0);
    let (mut version, mut sent) = (1, -1.0);
    loop {
        push_presence(node, &pushers, version, 50).await;
        version += 50;
        let now = node.metric("anyplay_events_sent_total").await;
        if now == sent {
            break;
        }
        sent = now;
        assert!(version < 20_000, "the socket never filled up");
    }
    let started = Instant::now();
    cloud.node(0).signal(Signal::SIGTERM);
    let node = cloud.node_mut(0);
    let status = node.exit_status(Duration::from_secs(40)).await;
    assert_eq!(status.code(), Some(0));
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "the drain took {:?} of its 30 s timeout",
        started.elapsed()
    );
}

/// How one connection attempt around a drain went.
#[derive(Debug)]
enum Attempt {
    /// No welcome (refused, 503, or the node had gone).
    NotWelcomed,
    /// Welcomed, then closed with this code (None: no close frame).
    Welcomed(Option<u16>),
}

async fn attempt(url: String, token: String) -> Attempt {
    let mut req = url.into_client_request().unwrap();
    req.headers_mut()
        .insert("authorization", format!("Bearer {token}").parse().unwrap());
    let Ok((mut ws, _)) = tokio_tungstenite::connect_async(req).await else {
        return Attempt::NotWelcomed;
    };
    match tokio::time::timeout(Duration::from_secs(20), ws.next()).await {
        Ok(Some(Ok(Message::Text(t)))) if t.contains("\"welcome\"") => {}
        _ => return Attempt::NotWelcomed,
    }
    loop {
        match tokio::time::timeout(Duration::from_secs(30), ws.next()).await {
            Ok(Some(Ok(Message::Close(f)))) => {
                let _ = ws.close(None).await;
                return Attempt::Welcomed(f.map(|f| u16::from(f.code)));
            }
            Ok(Some(Ok(_))) => continue,
            _ => return Attempt::Welcomed(None),
        }
    }
}

/// Opens 100 event sockets at once and starts the drain (SIGTERM) `after`
/// that; returns how each went.
async fn drain_among_upgrades(after: Duration) -> Vec<Attempt> {
    let mut cloud = TestCloud::start(Topology::Single, &["--drain-timeout", "10s"]).await;
    let players = cloud.signup_many("player", 100).await;
    let node = cloud.node(0);
    let url = format!("{}/v1/events", node.api.replace("http://", "ws://"));
    let attempts: Vec<_> = players
        .iter()
        .map(|p| tokio::spawn(attempt(url.clone(), p.access.clone())))
        .collect();
    tokio::time::sleep(after).await;
    node.signal(Signal::SIGTERM);
    let mut outcomes = Vec::new();
    for a in attempts {
        outcomes.push(a.await.unwrap());
    }
    let status = cloud.node_mut(0).exit_status(Duration::from_secs(20)).await;
    assert_eq!(status.code(), Some(0));
    outcomes
}

/// Issue 12, item 10: a socket upgraded just before the drain could register
/// after the drain had closed the others, and never got its 1001. The race
/// is narrow: the drain starts at several points of a burst of upgrades.
#[tokio::test]
async fn every_socket_welcomed_around_a_drain_gets_1001() {
    for (round, ms) in [0, 2, 4, 6, 8, 10, 15, 20, 30, 40].into_iter().enumerate() {
        let outcomes = drain_among_upgrades(Duration::from_millis(ms)).await;
        let welcomed = outcomes
            .iter()
            .filter(|o| matches!(o, Attempt::Welcomed(_)))
            .count();
        let without: Vec<_> = outcomes
            .iter()
            .filter(|o| matches!(o, Attempt::Welcomed(c) if *c != Some(1001)))
            .collect();
        assert!(
            without.is_empty(),
            "round {round} (drain {ms} ms into the burst): {} of {welcomed} welcomed \
             sockets ended without 1001: {without:?}",
            without.len()
        );
    }
}
