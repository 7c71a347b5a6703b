//! Sign-in, signup, refresh, profile and logout.

use reqwest::{Method, StatusCode};
use serde_json::json;

use crate::support::{End, TestNode};

#[tokio::test]
async fn sign_in_again_refresh_and_profile() {
    let node = TestNode::start(&[]).await;
    let ann = node.signup("Ann_1").await;
    assert_eq!(ann.handle, "Ann_1");

    let (s, me) = node
        .call(Method::GET, "/v1/me", Some(&ann.access), None)
        .await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(me["handle"], "ann_1", "handles are lower-cased");
    assert_eq!(me["privacy"], "friends");
    assert!(me["avatar"].is_null());
    assert!(me["created_at"].as_str().unwrap().ends_with('Z'));

    // The same email signs in (no signup this time).
    let (_, v) = node
        .call(
            Method::POST,
            "/v1/auth/email",
            None,
            Some(json!({"email": ann.email})),
        )
        .await;
    let code = node.code_for(&ann.email).await;
    let (s, v) = node
        .call(
            Method::POST,
            "/v1/auth/code",
            None,
            Some(json!({"challenge_id": v["challenge_id"], "code": code})),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["status"], "signed_in");
    assert_eq!(v["account"]["id"], ann.id);
    assert_eq!(v["expires_in"], 900);

    // Refresh rotates: the old refresh token stops working.
    let (s, fresh) = node
        .call(
            Method::POST,
            "/v1/auth/refresh",
            None,
            Some(json!({"refresh_token": ann.refresh})),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{fresh}");
    assert_ne!(fresh["refresh_token"], ann.refresh.as_str());
    let (s, v) = node
        .call(
            Method::POST,
            "/v1/auth/refresh",
            None,
            Some(json!({"refresh_token": ann.refresh})),
        )
        .await;
    assert_eq!(
        (s, v["error"]["code"].as_str()),
        (StatusCode::UNAUTHORIZED, Some("invalid_token"))
    );

    let (s, v) = node
        .call(
            Method::PATCH,
            "/v1/me",
            Some(&ann.access),
            Some(json!({"avatar": "cat", "privacy": "public"})),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(
        (v["avatar"].as_str(), v["privacy"].as_str()),
        (Some("cat"), Some("public"))
    );
    let (s, v) = node
        .call(
            Method::PATCH,
            "/v1/me",
            Some(&ann.access),
            Some(json!({"privacy": "secret"})),
        )
        .await;
    assert_eq!(
        (s, v["error"]["code"].as_str()),
        (StatusCode::UNPROCESSABLE_ENTITY, Some("invalid_privacy"))
    );
    let (s, _) = node
        .call(
            Method::POST,
            "/v1/me/trophies",
            Some(&ann.access),
            Some(json!({"name": "First blood"})),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED);
}

#[tokio::test]
async fn five_wrong_codes_burn_the_challenge() {
    let node = TestNode::start(&[]).await;
    let (_, v) = node
        .call(
            Method::POST,
            "/v1/auth/email",
            None,
            Some(json!({"email": "x@y.z"})),
        )
        .await;
    let challenge = v["challenge_id"].clone();
    let code = node.code_for("x@y.z").await;
    let wrong = if code == "000000" { "111111" } else { "000000" };
    for _ in 0..5 {
        let (s, v) = node
            .call(
                Method::POST,
                "/v1/auth/code",
                None,
                Some(json!({"challenge_id": challenge, "code": wrong})),
            )
            .await;
        assert_eq!(
            (s, v["error"]["code"].as_str()),
            (StatusCode::UNAUTHORIZED, Some("invalid_code"))
        );
    }
    let (s, _) = node
        .call(
            Method::POST,
            "/v1/auth/code",
            None,
            Some(json!({"challenge_id": challenge, "code": code})),
        )
        .await;
    assert_eq!(
        s,
        StatusCode::UNAUTHORIZED,
        "a burned challenge does not take the right code"
    );
}

#[tokio::test]
async fn signup_rules() {
    let node = TestNode::start(&[]).await;
    node.signup("taken").await;
    let (_, v) = node
        .call(
            Method::POST,
            "/v1/auth/email",
            None,
            Some(json!({"email": "new@x.y"})),
        )
        .await;
    let code = node.code_for("new@x.y").await;
    let (_, v) = node
        .call(
            Method::POST,
            "/v1/auth/code",
            None,
            Some(json!({"challenge_id": v["challenge_id"], "code": code})),
        )
        .await;
    let token = v["signup_token"].clone();
    for (handle, status, code) in [
        ("TAKEN", StatusCode::CONFLICT, "handle_taken"),
        ("no", StatusCode::UNPROCESSABLE_ENTITY, "invalid_handle"),
        (
            "bad-char",
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_handle",
        ),
        (
            "x'); DROP TABLE accounts;--",
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_handle",
        ),
    ] {
        let (s, v) = node
            .call(
                Method::POST,
                "/v1/auth/signup",
                None,
                Some(json!({"signup_token": token, "handle": handle})),
            )
            .await;
        assert_eq!(
            (s, v["error"]["code"].as_str()),
            (status, Some(code)),
            "{handle}"
        );
    }
    let (s, v) = node
        .call(
            Method::POST,
            "/v1/auth/signup",
            None,
            Some(json!({"signup_token": "nope", "handle": "fine"})),
        )
        .await;
    assert_eq!(
        (s, v["error"]["code"].as_str()),
        (StatusCode::UNAUTHORIZED, Some("invalid_token"))
    );
    let (s, _) = node
        .call(
            Method::POST,
            "/v1/auth/signup",
            None,
            Some(json!({"signup_token": token, "handle": "fine"})),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED);
    let (s, v) = node
        .call(
            Method::POST,
            "/v1/auth/email",
            None,
            Some(json!({"email": "not-an-email"})),
        )
        .await;
    assert_eq!(
        (s, v["error"]["code"].as_str()),
        (StatusCode::BAD_REQUEST, Some("invalid_email"))
    );
}

#[tokio::test]
async fn logout_closes_the_connection_with_4003_and_revokes() {
    let node = TestNode::start(&[]).await;
    let ann = node.signup("ann").await;
    let (mut events, _) = node.connect(&ann).await;
    let (s, _) = node
        .call(Method::POST, "/v1/auth/logout", Some(&ann.access), None)
        .await;
    assert_eq!(s, StatusCode::NO_CONTENT);
    assert_eq!(events.closed().await, End::Close(4003));
    let (s, v) = node
        .call(Method::GET, "/v1/me", Some(&ann.access), None)
        .await;
    assert_eq!(
        (s, v["error"]["code"].as_str()),
        (StatusCode::UNAUTHORIZED, Some("unauthorized"))
    );
    let (s, _) = node
        .call(
            Method::POST,
            "/v1/auth/refresh",
            None,
            Some(json!({"refresh_token": ann.refresh})),
        )
        .await;
    assert_eq!(s, StatusCode::UNAUTHORIZED);
}
