//! Rules that must hold whatever the concurrency: friend limits, party size,
//! and a small pool that never stalls.

use std::time::Duration;

use futures_util::future::join_all;
use reqwest::{Method, StatusCode};
use serde_json::json;
use tokio::sync::Barrier;

use crate::support::{each_topology, Player, TestCloud, Through, Topology};

each_topology!(
    twenty_requests_at_once_from_a_new_account_give_exactly_ten,
    thirty_joins_at_once_never_overfill_a_session_of_four,
    many_joins_on_two_connections_do_not_stall,
);

async fn twenty_requests_at_once_from_a_new_account_give_exactly_ten(topology: Topology) {
    let cloud = TestCloud::start(topology, &[]).await;
    twenty_requests_give_exactly_ten(&cloud, Through::Home).await;
}

/// A new account sends 20 friend requests at once, each through the node
/// `through` names: exactly 10 succeed, the others name the daily limit.
pub async fn twenty_requests_give_exactly_ten(cloud: &TestCloud, through: Through) {
    let newbie = cloud.signup("newbie").await;
    let targets = cloud.signup_many("target_", 20).await;
    let results = join_all(targets.iter().enumerate().map(|(i, t)| {
        cloud.through(through, i, &newbie).call(
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
    let (_, list) = cloud.call(&newbie, Method::GET, "/v1/friends", None).await;
    assert_eq!(list["outgoing"].as_array().unwrap().len(), 10);
}

/// A leader with `n` friends (they ask, the leader accepts: accepting has no daily limit).
async fn leader_with_friends(cloud: &TestCloud, n: usize) -> (Player, Vec<Player>) {
    let leader = cloud.signup("leader").await;
    let friends = cloud.signup_many("friend_", n).await;
    for f in &friends {
        let (s, v) = cloud
            .call(
                f,
                Method::POST,
                "/v1/friends/requests",
                Some(json!({"handle": "leader"})),
            )
            .await;
        assert_eq!(s, StatusCode::CREATED, "{v}");
        let (s, v) = cloud
            .call(
                &leader,
                Method::POST,
                &format!("/v1/friends/requests/{}/accept", f.id),
                None,
            )
            .await;
        assert_eq!(s, StatusCode::OK, "{v}");
    }
    (leader, friends)
}

async fn thirty_joins_at_once_never_overfill_a_session_of_four(topology: Topology) {
    let cloud = TestCloud::start(topology, &[]).await;
    thirty_joins_never_overfill_four(&cloud, Through::Home).await;
}

/// 30 friends of a leader join the leader's session of 4 at once, each through
/// the node `through` names: 3 get in, the others find it full.
pub async fn thirty_joins_never_overfill_four(cloud: &TestCloud, through: Through) {
    let (leader, friends) = leader_with_friends(cloud, 30).await;
    let (s, session) = cloud
        .call(
            &leader,
            Method::POST,
            "/v1/sessions",
            Some(json!({"max_members": 4})),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED);
    let id = session["id"].as_i64().unwrap();
    let path = format!("/v1/sessions/{id}/join");
    let results = join_all(friends.iter().enumerate().map(|(i, f)| {
        cloud
            .through(through, i, f)
            .call(Method::POST, &path, Some(&f.access), None)
    }))
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
    let (_, v) = cloud
        .call(&leader, Method::GET, &format!("/v1/sessions/{id}"), None)
        .await;
    assert_eq!(v["members"].as_array().unwrap().len(), 4);
}

async fn many_joins_on_two_connections_do_not_stall(topology: Topology) {
    let cloud = TestCloud::start(topology, &["--db-connections", "2"]).await;
    let (leader, friends) = leader_with_friends(&cloud, 24).await;
    // Rounds of: the leader opens a session of 16, everyone joins at once, reads
    // it, and once every join is answered, leaves (a seat freed earlier would
    // take a 16th join: a pair does run leaves before the last joins).
    for round in 0..3 {
        let joins_answered = Barrier::new(friends.len());
        let (s, session) = cloud
            .call(
                &leader,
                Method::POST,
                "/v1/sessions",
                Some(json!({"max_members": 16})),
            )
            .await;
        assert_eq!(s, StatusCode::CREATED, "round {round}");
        let id = session["id"].as_i64().unwrap();
        let work = join_all(friends.iter().map(|f| async {
            let join = cloud
                .call(f, Method::POST, &format!("/v1/sessions/{id}/join"), None)
                .await;
            let get = cloud
                .call(f, Method::GET, &format!("/v1/sessions/{id}"), None)
                .await;
            let list = cloud.call(f, Method::GET, "/v1/friends", None).await;
            joins_answered.wait().await;
            let leave = cloud
                .call(f, Method::POST, &format!("/v1/sessions/{id}/leave"), None)
                .await;
            [join.0, get.0, list.0, leave.0]
        }));
        let results = tokio::time::timeout(Duration::from_secs(60), work)
            .await
            .expect("no stall");
        let joined = results.iter().filter(|r| r[0] == StatusCode::OK).count();
        assert_eq!(joined, 15, "round {round}: 16 seats, the leader holds one");
        assert!(results.iter().all(|r| r[2] == StatusCode::OK));
        let (s, _) = cloud
            .call(
                &leader,
                Method::POST,
                &format!("/v1/sessions/{id}/leave"),
                None,
            )
            .await;
        assert_eq!(s, StatusCode::NO_CONTENT);
    }
}
