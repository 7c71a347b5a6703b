//! A store that fails or goes silent under a cluster (PostgreSQL): what a node must
//! not leave behind, and what it must not hold up on the other node.

use std::time::{Duration, Instant};

use reqwest::{Method, StatusCode};
use sqlx::Executor;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

use crate::support::{End, Player, TestCloud, TestNode, SOON};

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
