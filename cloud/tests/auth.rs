//! Sign-in, signup, refresh, profile and logout.

use std::net::IpAddr;

use futures_util::future::join_all;
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

use crate::support::{each_topology, End, TestCloud, TestNode, Topology};

each_topology!(
    sign_in_again_refresh_and_profile,
    five_wrong_codes_burn_the_challenge,
    wrong_codes_at_once_burn_the_challenge,
    a_burst_of_sign_in_emails_stays_within_the_caps,
    signup_rules,
    logout_closes_the_connection_with_4003_and_revokes,
    a_refresh_racing_a_logout_keeps_no_token,
    a_socket_opened_during_a_logout_is_closed,
);

async fn sign_in_again_refresh_and_profile(topology: Topology) {
    let cloud = TestCloud::start(topology, &[]).await;
    let ann = cloud.signup("Ann_1").await;
    let node = cloud.http(&ann);
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

/// In a pair the tries alternate between the nodes: the store counts them.
async fn five_wrong_codes_burn_the_challenge(topology: Topology) {
    let cloud = TestCloud::start(topology, &[]).await;
    let node = cloud.node(0);
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
    for i in 0..5 {
        let (s, v) = cloud
            .node(i + 1)
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
    let (s, _) = cloud
        .node(1)
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

/// Sends `n` wrong codes at once for a new challenge of `email`, through the nodes in
/// turn; each must be refused. Returns the challenge and its right code.
async fn wrong_codes_at_once(cloud: &TestCloud, email: &str, n: usize) -> (Value, String) {
    let node = cloud.node(0);
    let (_, v) = node
        .call(
            Method::POST,
            "/v1/auth/email",
            None,
            Some(json!({ "email": email })),
        )
        .await;
    let challenge = v["challenge_id"].clone();
    let code = node.code_for(email).await;
    let wrong = if code == "000000" { "111111" } else { "000000" };
    let body = json!({"challenge_id": challenge, "code": wrong});
    let answers = join_all((0..n).map(|i| {
        cloud
            .node(i)
            .call(Method::POST, "/v1/auth/code", None, Some(body.clone()))
    }))
    .await;
    for (s, v) in &answers {
        assert_eq!(
            (*s, v["error"]["code"].as_str()),
            (StatusCode::UNAUTHORIZED, Some("invalid_code")),
            "{v}"
        );
    }
    (challenge, code)
}

/// Regression (issue 12): on PostgreSQL each try read the count and wrote back
/// read + 1, so wrong codes sent at once cost one try between them and left the
/// challenge open to more guesses. Five at once, or fifty, burn it.
async fn wrong_codes_at_once_burn_the_challenge(topology: Topology) {
    let cloud = TestCloud::start(topology, &[]).await;
    let mut bursts: Vec<_> = (0..8).map(|i| (format!("five{i}@y.z"), 5)).collect();
    bursts.push(("fifty@y.z".to_string(), 50));
    let burned = join_all(
        bursts
            .iter()
            .map(|(email, n)| wrong_codes_at_once(&cloud, email, *n)),
    )
    .await;
    for ((email, n), (challenge, code)) in bursts.iter().zip(burned) {
        let (s, v) = cloud
            .node(1)
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
            "{n} wrong codes at once burn the challenge of {email}: {v}"
        );
    }
}

/// `POST /v1/auth/email` from `ip` (a loopback address of its own) through `node`.
async fn email_from(node: &TestNode, ip: IpAddr, email: &str) -> StatusCode {
    let client = reqwest::Client::builder()
        .local_address(ip)
        .build()
        .expect("a client");
    client
        .post(format!("{}/v1/auth/email", node.api))
        .json(&json!({ "email": email }))
        .send()
        .await
        .expect("request sent")
        .status()
}

/// Regression (issue 12): the per-IP and per-address windows were counted and then
/// written in two steps, so a burst through two nodes got past them.
async fn a_burst_of_sign_in_emails_stays_within_the_caps(topology: Topology) {
    let cloud = TestCloud::start_limited(topology, &["--rate-auth-email", "10"]).await;
    let accepted = |statuses: Vec<StatusCode>| {
        assert!(
            statuses
                .iter()
                .all(|s| [StatusCode::ACCEPTED, StatusCode::TOO_MANY_REQUESTS].contains(s)),
            "{statuses:?}"
        );
        statuses
            .iter()
            .filter(|s| **s == StatusCode::ACCEPTED)
            .count()
    };
    // One address from forty IPs.
    let one_address = join_all(
        (0..40u8).map(|i| email_from(cloud.node(i as usize), [127, 0, 1, i + 1].into(), "cap@y.z")),
    )
    .await;
    assert_eq!(accepted(one_address), 10, "per address");
    // Forty addresses from one IP.
    let emails: Vec<String> = (0..40).map(|i| format!("cap{i}@y.z")).collect();
    let one_ip = join_all(
        emails
            .iter()
            .enumerate()
            .map(|(i, e)| email_from(cloud.node(i), [127, 0, 2, 1].into(), e)),
    )
    .await;
    assert_eq!(accepted(one_ip), 10, "per IP");
}

/// In a pair the handle is taken through one node and asked for through the other.
async fn signup_rules(topology: Topology) {
    let cloud = TestCloud::start(topology, &[]).await;
    let taken = cloud.signup("taken").await;
    let node = cloud.node(taken.http_node + 1);
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

/// In a pair the socket is on the other node than the logout call.
async fn logout_closes_the_connection_with_4003_and_revokes(topology: Topology) {
    let cloud = TestCloud::start(topology, &[]).await;
    let ann = cloud.signup("ann").await;
    let (mut events, _) = cloud.connect(&ann).await;
    let (s, _) = cloud
        .call(&ann, Method::POST, "/v1/auth/logout", None)
        .await;
    assert_eq!(s, StatusCode::NO_CONTENT);
    assert_eq!(events.closed().await, End::Close(4003));
    let (s, v) = cloud.call(&ann, Method::GET, "/v1/me", None).await;
    assert_eq!(
        (s, v["error"]["code"].as_str()),
        (StatusCode::UNAUTHORIZED, Some("unauthorized"))
    );
    let (s, _) = cloud
        .http(&ann)
        .call(
            Method::POST,
            "/v1/auth/refresh",
            None,
            Some(json!({"refresh_token": ann.refresh})),
        )
        .await;
    assert_eq!(s, StatusCode::UNAUTHORIZED);
}

/// Regression (issue 30): on PostgreSQL a refresh that raced a logout could insert its new
/// refresh token after the logout had deleted the account's tokens, so it outlived the
/// logout. Whatever the order, no token made by the refresh works once both answered.
async fn a_refresh_racing_a_logout_keeps_no_token(topology: Topology) {
    let cloud = TestCloud::start(topology, &[]).await;
    for round in 0..30 {
        let ann = cloud.signup(&format!("race{round}")).await;
        let refresh = cloud.node(round).call(
            Method::POST,
            "/v1/auth/refresh",
            None,
            Some(json!({"refresh_token": ann.refresh})),
        );
        let logout =
            cloud
                .node(round + 1)
                .call(Method::POST, "/v1/auth/logout", Some(&ann.access), None);
        let ((refreshed, fresh), (logged_out, _)) = tokio::join!(refresh, logout);
        assert_eq!(logged_out, StatusCode::NO_CONTENT);
        if refreshed != StatusCode::OK {
            assert_eq!(refreshed, StatusCode::UNAUTHORIZED, "{fresh}");
            continue;
        }
        let (s, _) = cloud
            .node(round)
            .call(
                Method::POST,
                "/v1/auth/refresh",
                None,
                Some(json!({"refresh_token": fresh["refresh_token"]})),
            )
            .await;
        assert_eq!(
            s,
            StatusCode::UNAUTHORIZED,
            "round {round}: the new refresh token outlived the logout"
        );
        let (s, _) = cloud
            .node(round)
            .call(Method::GET, "/v1/me", fresh["access_token"].as_str(), None)
            .await;
        assert_eq!(
            s,
            StatusCode::UNAUTHORIZED,
            "round {round}: the new access token outlived the logout"
        );
    }
}

/// Regression (issue 30): a socket whose token was checked just before a logout revoked it,
/// and registered just after the logout closed the account's connections, stayed open.
async fn a_socket_opened_during_a_logout_is_closed(topology: Topology) {
    let cloud = TestCloud::start(topology, &[]).await;
    for round in 0..20 {
        let ann = cloud.signup(&format!("sock{round}")).await;
        let connect = cloud.socket(&ann).try_connect(&ann);
        let logout =
            cloud
                .node(round + 1)
                .call(Method::POST, "/v1/auth/logout", Some(&ann.access), None);
        let (connected, (logged_out, _)) = tokio::join!(connect, logout);
        assert_eq!(logged_out, StatusCode::NO_CONTENT);
        // Refused: the logout came first.
        let Ok(mut events) = connected else {
            continue;
        };
        assert_eq!(
            events.closed().await,
            End::Close(4003),
            "round {round}: the socket outlived the logout"
        );
    }
}

/// `--test-codes`: the operations listener gives out an address's newest open code, only
/// behind the admin token, and only on a node started so.
#[tokio::test]
async fn test_codes_are_given_only_behind_the_admin_token() {
    const TOKEN: &str = "codes-token";
    let cloud = TestCloud::start(Topology::Single, &["--test-codes", "--admin-token", TOKEN]).await;
    let node = cloud.node(0);
    let codes = |email: &str, token: Option<&str>| {
        let mut request = node
            .http
            .get(format!("{}/v1/admin/codes", node.ops))
            .query(&[("email", email)]);
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        async move {
            let response = request.send().await.expect("ops request");
            let status = response.status();
            (
                status,
                response.json::<Value>().await.unwrap_or(Value::Null),
            )
        }
    };
    let (s, _) = codes("zoe@example.com", Some(TOKEN)).await;
    assert_eq!(s, StatusCode::NOT_FOUND, "no challenge yet");
    for _ in 0..2 {
        node.call(
            Method::POST,
            "/v1/auth/email",
            None,
            Some(json!({"email": "zoe@example.com"})),
        )
        .await;
    }
    let mailed = node.code_for("zoe@example.com").await;
    let (s, v) = codes("Zoe@Example.com", Some(TOKEN)).await;
    assert_eq!((s, v["code"].as_str()), (StatusCode::OK, Some(&*mailed)));
    for token in [None, Some("codes-tokem")] {
        let (s, v) = codes("zoe@example.com", token).await;
        assert_eq!(s, StatusCode::UNAUTHORIZED, "{v}");
    }

    let plain = TestCloud::start(Topology::Single, &["--admin-token", TOKEN]).await;
    let (s, _) = plain.node(0).ops_get("/v1/admin/codes?email=a@b.co").await;
    assert_eq!(
        s,
        StatusCode::NOT_FOUND,
        "a node without --test-codes has none"
    );
}
