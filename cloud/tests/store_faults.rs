//! A store that fails or goes silent under a cluster (PostgreSQL): what a node must
//! not leave behind, and what it must not hold up on the other node.

use std::time::{Duration, Instant};

use futures_util::future::join_all;
use reqwest::{Method, StatusCode};
use serde_json::json;
use sqlx::Executor;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

use crate::support::{address_of, via, End, Player, TcpProxy, TestCloud, TestNats, TestNode, SOON};

/// Whether `watcher`'s friend list shows `friend` online.
async fn shown_online(node: &TestNode, watcher: &Player, friend: &Player) -> bool {
    let (s, v) = node
        .call(Method::GET, "/v1/friends", Some(&watcher.access), None)
        .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    v["friends"]
        .as_array()
        .expect("a friend list")
        .iter()
        .find(|f| f["account_id"] == friend.id)
        .map(|f| f["presence"]["online"] == true)
        .expect("the friend is listed")
}

/// Regression (issue 12): when recording a connection failed after it had replaced
/// an older one on the same node, the older one's record stayed, and the node renewed
/// it for as long as it ran: the account looked online with no socket anywhere.
#[tokio::test]
async fn a_failed_registration_leaves_no_record_that_is_renewed() {
    let cloud = TestCloud::pair(&[]).await;
    let ann = cloud.signup("ann").await;
    let bob = cloud.signup("bob").await;
    cloud.befriend(&ann, &bob).await;
    let a = cloud.node(0);
    let (mut first, _) = a.connect(&ann).await;
    let mut sql = cloud.sql().await;
    // Recording any new connection now fails; renewing leases still works.
    sql.execute(
        "CREATE FUNCTION refuse_connection() RETURNS trigger LANGUAGE plpgsql AS \
         $$ BEGIN RAISE EXCEPTION 'refused by the test'; END $$; \
         CREATE TRIGGER refuse BEFORE INSERT OR UPDATE OF connection_id ON connections \
         FOR EACH ROW EXECUTE FUNCTION refuse_connection();",
    )
    .await
    .unwrap();
    let url = format!("{}/v1/events", a.api.replace("http://", "ws://"));
    let mut req = url.into_client_request().unwrap();
    req.headers_mut().insert(
        "authorization",
        format!("Bearer {}", ann.access).parse().unwrap(),
    );
    let (second, _) = tokio_tungstenite::connect_async(req).await.unwrap();
    assert_eq!(
        first.closed().await,
        End::Close(4001),
        "replaced on the node"
    );
    let mut second = crate::support::Events { ws: second };
    assert!(
        matches!(second.quiet_for(SOON).await, Some(v) if v.get("closed").is_some()),
        "the unrecorded connection is ended"
    );
    sql.execute("DROP TRIGGER refuse ON connections")
        .await
        .unwrap();

    // No socket is left: within a lease (10 s) and a renewal (3 s) ann is offline.
    let deadline = Instant::now() + Duration::from_secs(25);
    loop {
        let rows: i64 =
            sqlx::query_scalar("SELECT count(*) FROM connections WHERE account_id = $1")
                .bind(ann.id)
                .fetch_one(&mut sql)
                .await
                .unwrap();
        if rows == 0 && !shown_online(cloud.node(1), &bob, &ann).await {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "ann still has {rows} connection record(s) 25 s after her last socket ended"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// A friend request by `from` to `to` and its cancellation, through `node`; the
/// statuses and how long each call took.
async fn request_and_cancel(
    node: &TestNode,
    from: &Player,
    to: &Player,
) -> Vec<(StatusCode, Duration)> {
    let mut out = Vec::new();
    for (method, path, body) in [
        (
            Method::POST,
            "/v1/friends/requests".to_string(),
            Some(json!({"handle": to.handle})),
        ),
        (
            Method::DELETE,
            format!("/v1/friends/requests/{}", to.id),
            None,
        ),
    ] {
        let started = Instant::now();
        let (s, _) = node.call(method, &path, Some(&from.access), body).await;
        out.push((s, started.elapsed()));
    }
    out
}

/// Regression (issue 12): sessions had no lock, statement or idle-in-transaction
/// timeout, so a node cut off from PostgreSQL in the middle of a transaction kept
/// its row locks for good, and every write of the other node on those rows waited.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_cut_off_mid_transaction_does_not_stall_the_other() {
    let postgres = std::env::var("ANYPLAY_TEST_POSTGRES_URL").unwrap_or_default();
    let proxy = TcpProxy::start(address_of(&postgres)).await;
    let cloud = TestCloud::pair_builder()
        .database_url_of(|i, url| {
            if i == 1 {
                via(url, proxy.addr)
            } else {
                url.to_string()
            }
        })
        .start(&["--no-rate-limits", "--daily-requests-new", "1000000"])
        .await;
    let b = cloud.node(1);
    let hot = cloud.signup("hot").await;
    let on_a = cloud.signup("on_a").await;
    let on_b = cloud.signup_many("on_b", 6).await;
    // B keeps locking the hot account's row, request after request (its calls hang
    // once it is cut off; they end with the test).
    let load = join_all(on_b.iter().map(|p| async {
        loop {
            request_and_cancel(b, p, &hot).await;
        }
    }));
    tokio::select! {
        _ = load => unreachable!("the load never ends"),
        () = cut_off_mid_transaction_then_write(&cloud, &proxy, &on_a, &hot) => {}
    }
}

async fn cut_off_mid_transaction_then_write(
    cloud: &TestCloud,
    proxy: &TcpProxy,
    on_a: &Player,
    hot: &Player,
) {
    let a = cloud.node(0);
    tokio::time::sleep(Duration::from_millis(500)).await;

    // Cut B off while one of its sessions holds row locks in an open transaction.
    let mut sql = cloud.sql().await;
    let mut caught = false;
    for attempt in 0..100 {
        proxy.pause();
        let ports: Vec<i32> = proxy.upstream_ports().iter().map(|p| *p as i32).collect();
        let settle = Instant::now() + Duration::from_millis(300);
        while Instant::now() < settle && !caught {
            let holding: i64 = sqlx::query_scalar(
                "SELECT count(*) FROM pg_stat_activity WHERE client_port = ANY($1) \
                 AND state LIKE 'idle in transaction%' AND backend_xid IS NOT NULL",
            )
            .bind(&ports)
            .fetch_one(&mut sql)
            .await
            .unwrap();
            caught = holding > 0;
        }
        if caught {
            eprintln!("B cut off holding row locks (attempt {attempt})");
            break;
        }
        proxy.resume();
        tokio::time::sleep(Duration::from_millis(37 * (attempt % 5 + 1))).await;
    }
    assert!(caught, "never caught B in the middle of a transaction");
    let cut = Instant::now();

    // A's writes on the same rows: every call answers within a bound, and they
    // succeed again once B's stranded session is ended.
    let bound = Duration::from_secs(12);
    let mut succeeded = false;
    while !succeeded {
        assert!(
            cut.elapsed() < Duration::from_secs(30),
            "A's writes on the rows B held did not succeed within 30 s of the cut"
        );
        let calls = tokio::time::timeout(bound * 2, request_and_cancel(a, on_a, hot))
            .await
            .unwrap_or_else(|_| panic!("a write on A hung for {:?} after the cut", bound * 2));
        for (status, took) in &calls {
            assert!(*took < bound, "a call on A took {took:?} ({status})");
        }
        succeeded = calls
            .iter()
            .all(|(s, _)| *s == StatusCode::CREATED || *s == StatusCode::NO_CONTENT);
    }
    eprintln!("A's writes succeeded {:?} after the cut", cut.elapsed());
}

/// Issue 11: a node cut off from PostgreSQL kept its players connected while the
/// other node expired their records and told friends they had left; a second device
/// on the other node was then welcomed beside the first, and events routed by the
/// store never reached them. The node now lets its connections go (1011) before its
/// leases can run out, so friends hear "offline" only for players who are gone.
#[tokio::test]
async fn a_node_cut_off_from_the_store_closes_its_connections_before_its_leases_run_out() {
    let postgres = std::env::var("ANYPLAY_TEST_POSTGRES_URL").unwrap_or_default();
    let proxy = TcpProxy::start(address_of(&postgres)).await;
    let cloud = TestCloud::pair_builder()
        .database_url_of(|i, url| {
            if i == 0 {
                via(url, proxy.addr)
            } else {
                url.to_string()
            }
        })
        .start(&[])
        .await;
    let (a, b) = (cloud.node(0), cloud.node(1));
    let ann = cloud.signup("ann").await;
    let bob = cloud.signup("bob").await;
    cloud.befriend(&ann, &bob).await;
    let (mut bob_ev, _) = b.connect(&bob).await;
    let (mut ann_ev, _) = a.connect(&ann).await;
    let e = bob_ev.next_of("presence").await;
    assert_eq!(
        (e["account_id"].as_i64(), e["online"].as_bool()),
        (Some(ann.id), Some(true))
    );

    proxy.pause();
    let cut = Instant::now();
    assert_eq!(ann_ev.closed().await, End::Close(1011));
    let closed = Instant::now();
    // Before the leases could run out: the last renewal was at most 3 s before the cut.
    assert!(
        closed - cut < Duration::from_secs(10),
        "closed {:?} after the cut",
        closed - cut
    );
    let offline = tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            let e = bob_ev.next_of("presence").await;
            if e["account_id"] == ann.id && e["online"] == false {
                return Instant::now();
            }
        }
    })
    .await
    .expect("bob hears that ann left once her record expires");
    assert!(
        offline >= closed,
        "bob heard ann left before her connection closed"
    );
    proxy.resume();
}

/// The other side of the fence: with the store out of reach of every node, nobody can
/// retire a record, so nobody lets its players go either.
#[tokio::test]
async fn a_store_out_of_reach_of_every_node_keeps_the_connections() {
    let postgres = std::env::var("ANYPLAY_TEST_POSTGRES_URL").unwrap_or_default();
    let proxy = TcpProxy::start(address_of(&postgres)).await;
    // A NATS of its own: the shared one carries the renewals of every other test's nodes.
    let nats = TestNats::start().await;
    let cloud = TestCloud::pair_builder()
        .nats(&nats.url)
        .database_url_of(|_, url| via(url, proxy.addr))
        .start(&[])
        .await;
    let ann = cloud.signup("ann").await;
    let (mut ann_ev, _) = cloud.node(0).connect(&ann).await;
    proxy.pause();
    // Past a lease (10 s) and the fence's moment (8 s after the last renewal).
    let closed = ann_ev.quiet_for(Duration::from_secs(13)).await;
    proxy.resume();
    assert!(
        closed.is_none(),
        "ann's connection ended while no node could reach the store: {closed:?}"
    );
}

/// Issue 30: a drain whose store hung waited on it for good (clearing the node's records,
/// then closing the pool); chaos hid it by SIGKILLing after the drain timeout. The node now
/// gives the store until its deadline and exits 0 all the same; the leases expire its records.
#[tokio::test]
async fn a_drain_ends_in_time_when_the_store_hangs() {
    let postgres = std::env::var("ANYPLAY_TEST_POSTGRES_URL").unwrap_or_default();
    let proxy = TcpProxy::start(address_of(&postgres)).await;
    let mut cloud = TestCloud::pair_builder()
        .database_url_of(|i, url| {
            if i == 0 {
                via(url, proxy.addr)
            } else {
                url.to_string()
            }
        })
        .start(&["--drain-timeout", "2s"])
        .await;
    let ann = cloud.signup("ann").await;
    let (_ann_ev, _) = cloud.node(0).connect(&ann).await;

    proxy.pause();
    let node = cloud.node_mut(0);
    node.signal(nix::sys::signal::Signal::SIGTERM);
    let stopped = Instant::now();
    // The drain timeout, and room for a busy machine: a hang would never end.
    let status = node.exit_status(Duration::from_secs(15)).await;
    assert_eq!(status.code(), Some(0), "log:\n{}", node.log());
    assert!(
        stopped.elapsed() < Duration::from_secs(15),
        "exited {:?} after SIGTERM",
        stopped.elapsed()
    );
    proxy.resume();
}

/// A node that died between recording a connection and welcoming it left a live record of an
/// account whose friends had heard it go offline. The account's next connection, elsewhere,
/// found that record, took itself for a replacement and told nobody it was back: friends saw
/// it offline while it played (a self-test run's events_missing, "online … (never)"). A
/// replacement on a node that is gone now says the account is online.
#[tokio::test]
async fn a_record_left_by_a_dead_node_does_not_keep_a_return_unannounced() {
    let cloud = TestCloud::pair(&[]).await;
    let ann = cloud.signup("ann").await;
    let bob = cloud.signup("bob").await;
    cloud.befriend(&ann, &bob).await;
    let b = cloud.node(1);
    let (mut bob_ev, _) = b.connect(&bob).await;
    // A node that no longer exists recorded ann's connection a moment ago.
    let mut sql = cloud.sql().await;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    sqlx::query(
        "INSERT INTO connections (account_id, connection_id, node, since, lease_until) \
         VALUES ($1, 'ghost', 'node-gone', $2, $3)",
    )
    .bind(ann.id)
    .bind(now)
    .bind(now + 10_000)
    .execute(&mut sql)
    .await
    .unwrap();
    let (_ann_ev, _) = b.connect(&ann).await;
    let e = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            let e = bob_ev.next_of("presence").await;
            if e["account_id"] == ann.id {
                return e;
            }
        }
    })
    .await
    .expect("bob hears that ann is online");
    assert_eq!(e["online"], true, "{e}");
}
