//! Sessions (parties): create, join, leave, leadership, events to the other members.

use reqwest::{Method, StatusCode};
use serde_json::json;

use crate::support::TestNode;

#[tokio::test]
async fn create_join_leave_with_events() {
    let node = TestNode::start(&[]).await;
    let lea = node.signup("lea").await;
    let max = node.signup("max").await;
    let out = node.signup("outsider").await;
    node.befriend(&max, &lea).await;
    let (mut lea_ev, _) = node.connect(&lea).await;
    let (mut max_ev, _) = node.connect(&max).await;

    let (s, session) = node
        .call(
            Method::POST,
            "/v1/sessions",
            Some(&lea.access),
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

    let (s, v) = node
        .call(
            Method::POST,
            "/v1/sessions",
            Some(&lea.access),
            Some(json!({"max_members": 4})),
        )
        .await;
    assert_eq!(
        (s, v["error"]["code"].as_str()),
        (StatusCode::CONFLICT, Some("already_in_session"))
    );
    let (s, v) = node
        .call(
            Method::POST,
            "/v1/sessions",
            Some(&max.access),
            Some(json!({"max_members": 1})),
        )
        .await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY, "{v}");

    let (s, v) = node
        .call(
            Method::POST,
            &format!("/v1/sessions/{id}/join"),
            Some(&out.access),
            None,
        )
        .await;
    assert_eq!(
        (s, v["error"]["code"].as_str()),
        (StatusCode::FORBIDDEN, Some("not_allowed"))
    );
    let (s, v) = node
        .call(
            Method::GET,
            &format!("/v1/sessions/{id}"),
            Some(&out.access),
            None,
        )
        .await;
    assert_eq!(s, StatusCode::NOT_FOUND, "{v}");

    let (s, v) = node
        .call(
            Method::POST,
            &format!("/v1/sessions/{id}/join"),
            Some(&max.access),
            None,
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["members"], json!([lea.id, max.id]));
    let e = lea_ev.next_of("session_member_joined").await;
    assert_eq!(
        (e["session_id"].as_i64(), e["account_id"].as_i64()),
        (Some(id), Some(max.id))
    );

    // The leader leaves: leadership passes to the longest-standing member.
    let (s, _) = node
        .call(
            Method::POST,
            &format!("/v1/sessions/{id}/leave"),
            Some(&lea.access),
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
    let (s, v) = node
        .call(
            Method::GET,
            &format!("/v1/sessions/{id}"),
            Some(&max.access),
            None,
        )
        .await;
    assert_eq!(
        (s, v["leader"].as_i64(), v["members"].clone()),
        (StatusCode::OK, Some(max.id), json!([max.id]))
    );

    let (s, _) = node
        .call(
            Method::POST,
            &format!("/v1/sessions/{id}/leave"),
            Some(&lea.access),
            None,
        )
        .await;
    assert_eq!(s, StatusCode::NOT_FOUND, "not a member any more");
    let (s, _) = node
        .call(
            Method::POST,
            &format!("/v1/sessions/{id}/leave"),
            Some(&max.access),
            None,
        )
        .await;
    assert_eq!(s, StatusCode::NO_CONTENT);
    let (s, _) = node
        .call(
            Method::GET,
            &format!("/v1/sessions/{id}"),
            Some(&max.access),
            None,
        )
        .await;
    assert_eq!(
        s,
        StatusCode::NOT_FOUND,
        "the last to leave closes the session"
    );
}
