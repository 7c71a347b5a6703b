//! Rules that must hold whatever the concurrency: friend limits, party size,
//! and a small pool that never stalls.

use std::time::Duration;

use futures_util::future::join_all;
use reqwest::{Method, StatusCode};
use serde_json::json;

use crate::support::{Player, TestNode};

async fn signup_many(node: &TestNode, prefix: &str, n: usize) -> Vec<Player> {
    join_all((0..n).map(|i| node.signup_owned(format!("{prefix}{i}")))).await
}

#[tokio::test]
async fn twenty_requests_at_once_from_a_new_account_give_exactly_ten() {
    let node = TestNode::start(&[]).await;
    let newbie = node.signup("newbie").await;
    let targets = signup_many(&node, "target_", 20).await;
    let results = join_all(targets.iter().map(|t| {
        node.call(
            Method::POST,
            "/v1/friends/requests",
            Some(&newbie.access),
            Some(json!({"handle": t.handle})),
        )
    }))
    .await;
    let ok = results
        .iter()
        .filter(|(s, _)| *s == StatusCode::CREATED)
        .count();
    let limited: Vec<_> = results
        .iter()
        .filter(|(s, _)| *s != StatusCode::CREATED)
        .collect();
    assert_eq!(ok, 10, "{limited:?}");
    for (s, v) in limited {
        assert_eq!(*s, StatusCode::UNPROCESSABLE_ENTITY);
        assert_eq!(
            (v["error"]["code"].as_str(), v["error"]["limit"].as_str()),
            (Some("limit_reached"), Some("daily"))
        );
    }
    let (_, list) = node
        .call(Method::GET, "/v1/friends", Some(&newbie.access), None)
        .await;
    assert_eq!(list["outgoing"].as_array().unwrap().len(), 10);
}

/// A leader with `n` friends (they ask, the leader accepts: accepting has no daily limit).
async fn leader_with_friends(node: &TestNode, n: usize) -> (Player, Vec<Player>) {
    let leader = node.signup("leader").await;
    let friends = signup_many(node, "friend_", n).await;
    for f in &friends {
        let (s, v) = node
            .call(
                Method::POST,
                "/v1/friends/requests",
                Some(&f.access),
                Some(json!({"handle": "leader"})),
            )
            .await;
        assert_eq!(s, StatusCode::CREATED, "{v}");
        let (s, v) = node
            .call(
                Method::POST,
                &format!("/v1/friends/requests/{}/accept", f.id),
                Some(&leader.access),
                None,
            )
            .await;
        assert_eq!(s, StatusCode::OK, "{v}");
    }
    (leader, friends)
}

#[tokio::test]
async fn thirty_joins_at_once_never_overfill_a_session_of_four() {
    let node = TestNode::start(&[]).await;
    let (leader, friends) = leader_with_friends(&node, 30).await;
    let (s, session) = node
        .call(
            Method::POST,
            "/v1/sessions",
            Some(&leader.access),
            Some(json!({"max_members": 4})),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED);
    let id = session["id"].as_i64().unwrap();
    let path = format!("/v1/sessions/{id}/join");
    let results = join_all(
        friends
            .iter()
            .map(|f| node.call(Method::POST, &path, Some(&f.access), None)),
    )
    .await;
    let joined = results.iter().filter(|(s, _)| *s == StatusCode::OK).count();
    assert_eq!(joined, 3, "leader + 3 = 4");
    for (s, v) in results.iter().filter(|(s, _)| *s != StatusCode::OK) {
        assert_eq!(
            (*s, v["error"]["code"].as_str()),
            (StatusCode::CONFLICT, Some("session_full"))
        );
    }
    for (_, v) in results.iter().filter(|(s, _)| *s == StatusCode::OK) {
        assert!(v["members"].as_array().unwrap().len() <= 4);
    }
    let (_, v) = node
        .call(
            Method::GET,
            &format!("/v1/sessions/{id}"),
            Some(&leader.access),
            None,
        )
        .await;
    assert_eq!(v["members"].as_array().unwrap().len(), 4);
}

#[tokio::test]
async fn many_joins_on_two_connections_do_not_stall() {
    let node = TestNode::start(&["--db-connections", "2"]).await;
    let (leader, friends) = leader_with_friends(&node, 24).await;
    // Rounds of: the leader opens a session of 16, everyone joins at once, reads it, leaves.
    for round in 0..3 {
        let (s, session) = node
            .call(
                Method::POST,
                "/v1/sessions",
                Some(&leader.access),
                Some(json!({"max_members": 16})),
            )
            .await;
        assert_eq!(s, StatusCode::CREATED, "round {round}");
        let id = session["id"].as_i64().unwrap();
        let work = join_all(friends.iter().map(|f| async {
            let join = node
                .call(
                    Method::POST,
                    &format!("/v1/sessions/{id}/join"),
                    Some(&f.access),
                    None,
                )
                .await;
            let get = node
                .call(
                    Method::GET,
                    &format!("/v1/sessions/{id}"),
                    Some(&f.access),
                    None,
                )
                .await;
            let list = node
                .call(Method::GET, "/v1/friends", Some(&f.access), None)
                .await;
            let leave = node
                .call(
                    Method::POST,
                    &format!("/v1/sessions/{id}/leave"),
                    Some(&f.access),
                    None,
                )
                .await;
            [join.0, get.0, list.0, leave.0]
        }));
        let results = tokio::time::timeout(Duration::from_secs(60), work)
            .await
            .expect("no stall");
        let joined = results.iter().filter(|r| r[0] == StatusCode::OK).count();
        assert_eq!(joined, 15, "round {round}: 16 seats, the leader holds one");
        assert!(results.iter().all(|r| r[2] == StatusCode::OK));
        let (s, _) = node
            .call(
                Method::POST,
                &format!("/v1/sessions/{id}/leave"),
                Some(&leader.access),
                None,
            )
            .await;
        assert_eq!(s, StatusCode::NO_CONTENT);
    }
}
