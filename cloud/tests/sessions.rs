//! Sessions (parties): create, join, leave, leadership, events to the other members.

use reqwest::{Method, StatusCode};
use serde_json::json;

use crate::support::{each_topology, TestCloud, Topology};

each_topology!(create_join_leave_with_events);

async fn create_join_leave_with_events(topology: Topology) {
    let cloud = TestCloud::start(topology, &[]).await;
    let lea = cloud.signup("lea").await;
    let max = cloud.signup("max").await;
    let out = cloud.signup("outsider").await;
    cloud.befriend(&max, &lea).await;
    let (mut lea_ev, _) = cloud.connect(&lea).await;
    let (mut max_ev, _) = cloud.connect(&max).await;

    let (s, session) = cloud
        .call(
            &lea,
            Method::POST,
            "/v1/sessions",
            Some(json!({"max_members": 4})),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED, "{session}");
    assert_eq!(
        (session["leader"].as_i64(), session["max_members"].as_i64()),
        (Some(lea.id), Some(4))
    );
    assert_eq!(session["members"], json!([lea.id]));
    let id = session["id"].as_i64().unwrap();

    let (s, v) = cloud
        .call(
            &lea,
            Method::POST,
            "/v1/sessions",
            Some(json!({"max_members": 4})),
        )
        .await;
    assert_eq!(
        (s, v["error"]["code"].as_str()),
        (StatusCode::CONFLICT, Some("already_in_session"))
    );
    let (s, v) = cloud
        .call(
            &max,
            Method::POST,
            "/v1/sessions",
            Some(json!({"max_members": 1})),
        )
        .await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY, "{v}");

    let (s, v) = cloud
        .call(&out, Method::POST, &format!("/v1/sessions/{id}/join"), None)
        .await;
    assert_eq!(
        (s, v["error"]["code"].as_str()),
        (StatusCode::FORBIDDEN, Some("not_allowed"))
    );
    let (s, v) = cloud
        .call(&out, Method::GET, &format!("/v1/sessions/{id}"), None)
        .await;
    assert_eq!(s, StatusCode::NOT_FOUND, "{v}");

    let (s, v) = cloud
        .call(&max, Method::POST, &format!("/v1/sessions/{id}/join"), None)
        .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["members"], json!([lea.id, max.id]));
    let e = lea_ev.next_of("session_member_joined").await;
    assert_eq!(
        (e["session_id"].as_i64(), e["account_id"].as_i64()),
        (Some(id), Some(max.id))
    );

    // The leader leaves: leadership passes to the longest-standing member.
    let (s, _) = cloud
        .call(
            &lea,
            Method::POST,
            &format!("/v1/sessions/{id}/leave"),
            None,
        )
        .await;
    assert_eq!(s, StatusCode::NO_CONTENT);
    let e = max_ev.next_of("session_member_left").await;
    assert_eq!(e["account_id"], lea.id);
    let e = max_ev.next_of("session_leader_changed").await;
    assert_eq!(
        (e["session_id"].as_i64(), e["leader"].as_i64()),
        (Some(id), Some(max.id))
    );
    let (s, v) = cloud
        .call(&max, Method::GET, &format!("/v1/sessions/{id}"), None)
        .await;
    assert_eq!(
        (s, v["leader"].as_i64(), v["members"].clone()),
        (StatusCode::OK, Some(max.id), json!([max.id]))
    );

    let (s, _) = cloud
        .call(
            &lea,
            Method::POST,
            &format!("/v1/sessions/{id}/leave"),
            None,
        )
        .await;
    assert_eq!(s, StatusCode::NOT_FOUND, "not a member any more");
    let (s, _) = cloud
        .call(
            &max,
            Method::POST,
            &format!("/v1/sessions/{id}/leave"),
            None,
        )
        .await;
    assert_eq!(s, StatusCode::NO_CONTENT);
    let (s, _) = cloud
        .call(&max, Method::GET, &format!("/v1/sessions/{id}"), None)
        .await;
    assert_eq!(
        s,
        StatusCode::NOT_FOUND,
        "the last to leave closes the session"
    );
}
