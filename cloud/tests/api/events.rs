//! The event connection: welcome, friend and presence events on both sides,
//! replacement (4001), oversized messages (1009).

use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde_json::json;

use crate::support::{each_topology, End, Events, TestCloud, Topology};

each_topology!(
    friendship_and_presence_reach_both_sockets,
    a_second_connection_replaces_the_first_with_4001,
    an_oversized_client_message_closes_with_1009,
    the_event_socket_needs_a_valid_token,
);

async fn friendship_and_presence_reach_both_sockets(topology: Topology) {
    let cloud = TestCloud::start(topology, &[]).await;
    let ann = cloud.signup("ann").await;
    let bob = cloud.signup("bob").await;
    let (mut ann_ev, welcome) = cloud.connect(&ann).await;
    assert_eq!(welcome["account_id"], ann.id);
    assert_eq!(welcome["node"], cloud.socket(&ann).id.as_str());
    assert_eq!(welcome["ping_interval_s"], 20);
    assert!(welcome["connection_id"].is_string() && welcome["server_time"].is_string());
    let (mut bob_ev, _) = cloud.connect(&bob).await;

    let (s, v) = cloud
        .call(
            &ann,
            Method::POST,
            "/v1/friends/requests",
            Some(json!({"handle": "BOB"})),
        )
        .await;
    assert_eq!(
        (s, v),
        (StatusCode::CREATED, json!({"status": "requested"}))
    );
    let e = bob_ev.next_of("friend_request").await;
    assert_eq!(e["from"], json!({"account_id": ann.id, "handle": "ann"}));
    assert_eq!(e["seq"], 1);

    let (s, v) = cloud
        .call(
            &bob,
            Method::POST,
            &format!("/v1/friends/requests/{}/accept", ann.id),
            None,
        )
        .await;
    assert_eq!((s, v), (StatusCode::OK, json!({"status": "friends"})));
    let e = ann_ev.next_of("friend_accepted").await;
    assert_eq!(
        (e["account_id"].as_i64(), e["handle"].as_str()),
        (Some(bob.id), Some("bob"))
    );

    let (s, list) = cloud.call(&ann, Method::GET, "/v1/friends", None).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(list["friends"][0]["account_id"], bob.id);
    assert_eq!(list["friends"][0]["presence"]["online"], true);

    // A change reaches the friend with its version; a stale one is accepted and ignored.
    let (s, _) = cloud
        .call(
            &ann,
            Method::PUT,
            "/v1/presence",
            Some(json!({"activity": "in lobby", "version": 5})),
        )
        .await;
    assert_eq!(s, StatusCode::NO_CONTENT);
    // Events from different nodes may arrive out of order (the contract lets a friend
    // see only the latest state): what counts is that the newest version arrives.
    let e = next_version_at_least(&mut bob_ev, ann.id, 5).await;
    assert_eq!(
        (
            e["version"].as_u64(),
            e["activity"].as_str(),
            e["online"].as_bool()
        ),
        (Some(5), Some("in lobby"), Some(true))
    );
    let (s, _) = cloud
        .call(
            &ann,
            Method::PUT,
            "/v1/presence",
            Some(json!({"activity": "old", "version": 3})),
        )
        .await;
    assert_eq!(s, StatusCode::NO_CONTENT);
    let (s, _) = cloud
        .call(
            &ann,
            Method::PUT,
            "/v1/presence",
            Some(json!({"activity": "playing", "version": 6})),
        )
        .await;
    assert_eq!(s, StatusCode::NO_CONTENT);
    let e = next_version_at_least(&mut bob_ev, ann.id, 6).await;
    assert_eq!(
        (e["version"].as_u64(), e["activity"].as_str()),
        (Some(6), Some("playing")),
        "version 3 was never sent"
    );

    // Seq counts up per connection.
    let (s, _) = cloud
        .call(
            &ann,
            Method::PUT,
            "/v1/presence",
            Some(json!({"activity": "x", "version": 7})),
        )
        .await;
    assert_eq!(s, StatusCode::NO_CONTENT);
    let seq_before = e["seq"].as_u64().unwrap();
    let e = bob_ev.next_of("presence").await;
    assert_eq!(e["seq"].as_u64(), Some(seq_before + 1));

    // Going offline is a presence event with the current version.
    drop(ann_ev);
    let e = loop {
        let e = next_version_at_least(&mut bob_ev, ann.id, 7).await;
        if e["online"] == false {
            break e;
        }
    };
    assert_eq!(e["version"].as_u64(), Some(7));
}

async fn a_second_connection_replaces_the_first_with_4001(topology: Topology) {
    let cloud = TestCloud::start(topology, &[]).await;
    let ann = cloud.signup("ann").await;
    let bob = cloud.signup("bob").await;
    cloud.befriend(&ann, &bob).await;
    let (mut bob_ev, _) = cloud.connect(&bob).await;
    let (mut first, w1) = cloud.connect(&ann).await;
    let (mut second, w2) = cloud.connect(&ann).await;
    assert_ne!(w1["connection_id"], w2["connection_id"]);
    assert_eq!(first.closed().await, End::Close(4001));

    // The new one gets events; the friend never saw ann go offline.
    let (s, _) = cloud
        .call(
            &ann,
            Method::PUT,
            "/v1/presence",
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
    let (s, conns) = cloud.socket(&ann).ops_get("/v1/admin/connections").await;
    assert_eq!(s, StatusCode::OK);
    let conns: serde_json::Value = serde_json::from_str(&conns).unwrap();
    let mine: Vec<_> = conns["connections"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["account_id"] == ann.id)
        .collect();
    assert_eq!(mine.len(), 1);
    assert_eq!(mine[0]["connection_id"], w2["connection_id"]);
    let extra = second.quiet_for(Duration::from_millis(200)).await;
    assert!(extra.is_none(), "{extra:?}");
}

async fn an_oversized_client_message_closes_with_1009(topology: Topology) {
    let cloud = TestCloud::start(topology, &[]).await;
    let ann = cloud.signup("ann").await;
    let (mut ev, _) = cloud.connect(&ann).await;
    ev.send_text("small messages are ignored".into()).await;
    assert!(ev.quiet_for(Duration::from_millis(200)).await.is_none());
    ev.send_text("x".repeat(5000)).await;
    assert_eq!(ev.closed().await, End::Close(1009));
    // The node is fine.
    let (s, _) = cloud
        .socket(&ann)
        .call(Method::GET, "/v1/me", Some(&ann.access), None)
        .await;
    assert_eq!(s, StatusCode::OK);
}

async fn the_event_socket_needs_a_valid_token(topology: Topology) {
    let cloud = TestCloud::start(topology, &[]).await;
    let ann = cloud.signup("ann").await;
    let node = cloud.socket(&ann);
    let url = format!("{}/v1/events?token=wrong", node.api);
    let resp = node.http.get(&url).send().await.unwrap();
    assert_eq!(resp.status(), StatusCode::UNAUTHORIZED);
    // ?token= works as well as the header.
    let ws = format!(
        "{}/v1/events?token={}",
        node.api.replace("http", "ws"),
        ann.access
    );
    let (mut s, _) = tokio_tungstenite::connect_async(ws)
        .await
        .expect("connect with ?token=");
    use futures_util::StreamExt;
    let first = s.next().await.unwrap().unwrap();
    assert!(first.to_text().unwrap().contains("\"welcome\""));
}

/// The next presence event of `account` with a version of at least `version`; an older
/// one on the way (a stale event from another node) is skipped, but never version 3,
/// the stale change the tests send on purpose.
async fn next_version_at_least(
    events: &mut Events,
    account: i64,
    version: u64,
) -> serde_json::Value {
    loop {
        let e = events.next_of("presence").await;
        assert_ne!(e["version"], 3, "a stale change was sent: {e}");
        if e["account_id"] == account && e["version"].as_u64() >= Some(version) {
            return e;
        }
    }
}
