//! Hostile and malformed input: each gets the contract's error, changes nothing,
//! and the node keeps serving.

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

use crate::support::{each_topology, TestCloud, TestNode, Topology};

each_topology!(
    malformed_bodies_get_contract_errors,
    bad_ids_tokens_and_paths,
    rate_limits_answer_429_with_retry_after,
    nul_characters_in_text_fields_are_refused,
);

async fn raw(
    node: &TestNode,
    method: Method,
    path: &str,
    token: Option<&str>,
    body: Vec<u8>,
) -> (StatusCode, Value) {
    let mut req = node
        .http
        .request(method, format!("{}{path}", node.api))
        .header("content-type", "application/json")
        .body(body);
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    let resp = req.send().await.unwrap();
    let status = resp.status();
    (
        status,
        serde_json::from_str(&resp.text().await.unwrap()).unwrap_or(Value::Null),
    )
}

fn code(v: &Value) -> Option<&str> {
    v["error"]["code"].as_str()
}

async fn malformed_bodies_get_contract_errors(topology: Topology) {
    let cloud = TestCloud::start(topology, &[]).await;
    let ann = cloud.signup("ann").await;
    let node = cloud.http(&ann);
    let t = Some(ann.access.as_str());
    let cases: Vec<(&str, Vec<u8>, StatusCode, &str)> = vec![
        (
            "/v1/auth/email",
            b"{not json".to_vec(),
            StatusCode::BAD_REQUEST,
            "bad_request",
        ),
        (
            "/v1/auth/email",
            br#"{"email": 5}"#.to_vec(),
            StatusCode::BAD_REQUEST,
            "bad_request",
        ),
        (
            "/v1/auth/email",
            b"[]".to_vec(),
            StatusCode::BAD_REQUEST,
            "bad_request",
        ),
        (
            "/v1/auth/signup",
            b"{\"signup_token\":\"x\",\"handle\":\"\xff\xfe\"}".to_vec(),
            StatusCode::BAD_REQUEST,
            "bad_request",
        ),
        (
            "/v1/friends/requests",
            br#"{"handle": ["a"]}"#.to_vec(),
            StatusCode::BAD_REQUEST,
            "bad_request",
        ),
        (
            "/v1/sessions",
            br#"{"max_members": "four"}"#.to_vec(),
            StatusCode::BAD_REQUEST,
            "bad_request",
        ),
        (
            "/v1/blocks",
            br#"{"account_id": "1 OR 1=1"}"#.to_vec(),
            StatusCode::BAD_REQUEST,
            "bad_request",
        ),
        (
            "/v1/me/trophies",
            vec![b'a'; 20_000],
            StatusCode::PAYLOAD_TOO_LARGE,
            "too_large",
        ),
    ];
    for (path, body, status, want) in cases {
        let (s, v) = raw(node, Method::POST, path, t, body).await;
        assert_eq!((s, code(&v)), (status, Some(want)), "{path}: {v}");
        assert!(v["error"]["message"].is_string());
    }
    let (s, v) = raw(
        node,
        Method::PUT,
        "/v1/presence",
        t,
        br#"{"activity": "x", "version": -1}"#.to_vec(),
    )
    .await;
    assert_eq!(
        (s, code(&v)),
        (StatusCode::BAD_REQUEST, Some("bad_request"))
    );
    let (s, v) = raw(
        node,
        Method::PATCH,
        "/v1/me",
        t,
        br#"{"privacy": "public", "admin": true}"#.to_vec(),
    )
    .await;
    assert_eq!(
        (s, code(&v)),
        (StatusCode::BAD_REQUEST, Some("bad_request")),
        "unknown fields on a profile change"
    );

    // Nothing changed, and the node still answers.
    let (s, me) = node.call(Method::GET, "/v1/me", t, None).await;
    assert_eq!(
        (s, me["privacy"].as_str()),
        (StatusCode::OK, Some("friends"))
    );
}

async fn bad_ids_tokens_and_paths(topology: Topology) {
    let cloud = TestCloud::start(topology, &[]).await;
    let ann = cloud.signup("ann").await;
    let node = cloud.http(&ann);
    let t = Some(ann.access.as_str());
    for path in [
        "/v1/sessions/abc",
        "/v1/sessions/0",
        "/v1/sessions/-3",
        "/v1/sessions/+3",
        "/v1/sessions/%203",
        "/v1/sessions/99999999999999999999999",
    ] {
        let (s, v) = node.call(Method::GET, path, t, None).await;
        assert_eq!(
            (s, code(&v)),
            (StatusCode::BAD_REQUEST, Some("bad_request")),
            "{path}"
        );
    }
    let (s, v) = node
        .call(Method::POST, "/v1/friends/requests/x'--/accept", t, None)
        .await;
    assert_eq!(
        (s, code(&v)),
        (StatusCode::BAD_REQUEST, Some("bad_request"))
    );
    let (s, v) = node
        .call(
            Method::POST,
            "/v1/friends/requests",
            t,
            Some(json!({"handle": "x' OR '1'='1"})),
        )
        .await;
    assert_eq!((s, code(&v)), (StatusCode::NOT_FOUND, Some("not_found")));
    let (s, v) = node.call(Method::GET, "/v1/me", Some("forged"), None).await;
    assert_eq!(
        (s, code(&v)),
        (StatusCode::UNAUTHORIZED, Some("unauthorized"))
    );
    let (s, v) = node.call(Method::GET, "/v1/me", None, None).await;
    assert_eq!(
        (s, code(&v)),
        (StatusCode::UNAUTHORIZED, Some("unauthorized"))
    );
    let (s, v) = node.call(Method::GET, "/v1/nothing/here", t, None).await;
    assert_eq!((s, code(&v)), (StatusCode::NOT_FOUND, Some("not_found")));
    // A query the event path cannot read gets the contract's JSON error, not axum's text.
    let (s, v) = raw(
        node,
        Method::GET,
        "/v1/events?token=a&token=b",
        None,
        Vec::new(),
    )
    .await;
    assert_eq!(
        (s, code(&v)),
        (StatusCode::BAD_REQUEST, Some("bad_request")),
        "{v}"
    );
}

/// In a pair the calls alternate between the nodes: the contract has limits
/// "count across all nodes when the store is shared".
async fn rate_limits_answer_429_with_retry_after(topology: Topology) {
    let cloud = TestCloud::start_limited(
        topology,
        &["--rate-calls-per-minute", "5", "--rate-auth-email", "2"],
    )
    .await;
    let call = |i: usize| {
        let node = cloud.node(i);
        node.http.get(format!("{}/v1/me", node.api)).send()
    };
    // No window holds more than these five, wherever a window ends among them.
    for i in 0..5 {
        assert_eq!(call(i).await.unwrap().status(), StatusCode::UNAUTHORIZED);
    }
    // A pair's windows are the cluster clock's minutes: when one ended among the first
    // five calls, the refusal comes within five more (a minute holds six of eleven).
    let mut refused = None;
    for i in 5..11 {
        let resp = call(i).await.unwrap();
        if resp.status() != StatusCode::UNAUTHORIZED {
            refused = Some(resp);
            break;
        }
    }
    let resp = refused.expect("eleven calls in a minute, none refused");
    assert_eq!(resp.status(), StatusCode::TOO_MANY_REQUESTS);
    let retry: u64 = resp.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=60).contains(&retry), "{retry}");
    let v: Value = resp.json().await.unwrap();
    assert_eq!(code(&v), Some("rate_limited"));

    let emails = [
        StatusCode::ACCEPTED,
        StatusCode::ACCEPTED,
        StatusCode::TOO_MANY_REQUESTS,
    ];
    for (i, expected) in emails.into_iter().enumerate() {
        let (s, _) = cloud
            .node(i)
            .call(
                Method::POST,
                "/v1/auth/email",
                None,
                Some(json!({"email": "a@b.c"})),
            )
            .await;
        assert_eq!(s, expected);
    }
}

/// Regression (issue 12): PostgreSQL cannot store U+0000 in text, so a NUL in a text
/// field was a 500 there. Every text input refuses it with its endpoint's error.
async fn nul_characters_in_text_fields_are_refused(topology: Topology) {
    let cloud = TestCloud::start(topology, &[]).await;
    let ann = cloud.signup("ann").await;
    let node = cloud.http(&ann);
    let t = Some(ann.access.as_str());
    let nul = |s: &str| format!("{s}\u{0}{s}");
    let cases = [
        (
            Method::PUT,
            "/v1/presence",
            t,
            json!({"activity": nul("a"), "version": 1}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_activity",
        ),
        (
            Method::PATCH,
            "/v1/me",
            t,
            json!({"avatar": nul("a")}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_avatar",
        ),
        (
            Method::PATCH,
            "/v1/me",
            t,
            json!({"privacy": nul("public")}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_privacy",
        ),
        (
            Method::PATCH,
            "/v1/me",
            t,
            json!({"privacy": null}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_privacy",
        ),
        (
            Method::POST,
            "/v1/me/trophies",
            t,
            json!({"name": nul("cup")}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_name",
        ),
        (
            Method::POST,
            "/v1/friends/requests",
            t,
            json!({"handle": nul("bob")}),
            StatusCode::NOT_FOUND,
            "not_found",
        ),
        (
            Method::POST,
            "/v1/auth/email",
            None,
            json!({"email": nul("a@b.c")}),
            StatusCode::BAD_REQUEST,
            "invalid_email",
        ),
        (
            Method::POST,
            "/v1/auth/code",
            None,
            json!({"challenge_id": nul("x"), "code": "123456"}),
            StatusCode::UNAUTHORIZED,
            "invalid_code",
        ),
        (
            Method::POST,
            "/v1/auth/code",
            None,
            json!({"challenge_id": "x", "code": nul("1")}),
            StatusCode::UNAUTHORIZED,
            "invalid_code",
        ),
        (
            Method::POST,
            "/v1/auth/signup",
            None,
            json!({"signup_token": "x", "handle": nul("abc")}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_handle",
        ),
        (
            Method::POST,
            "/v1/auth/signup",
            None,
            json!({"signup_token": nul("x"), "handle": "abcd"}),
            StatusCode::UNAUTHORIZED,
            "invalid_token",
        ),
        (
            Method::POST,
            "/v1/auth/refresh",
            None,
            json!({"refresh_token": nul("x")}),
            StatusCode::UNAUTHORIZED,
            "invalid_token",
        ),
    ];
    for (method, path, token, body, status, error) in cases {
        let (s, v) = node
            .call(method.clone(), path, token, Some(body.clone()))
            .await;
        assert_eq!(
            (s, code(&v)),
            (status, Some(error)),
            "{method} {path} {body}: {v}"
        );
    }
    // Nothing changed, and the node still serves.
    let (s, me) = node.call(Method::GET, "/v1/me", t, None).await;
    assert_eq!(s, StatusCode::OK);
    assert!(me["avatar"].is_null(), "{me}");
    assert_eq!(me["privacy"], "friends");
}

/// Regression (issue 30): a call past a limit counted in the store took a store
/// connection, an upsert (the per-IP window) or locks and reads (the sign-in email
/// windows), each time. Once a node has refused a source, it refuses it again from memory
/// until the window can have freed up: with the tables locked, the refusals still come at once.
#[tokio::test]
async fn a_call_refused_by_a_limit_costs_no_store_work() {
    use sqlx::Executor;

    let cloud = TestCloud::start_limited(
        Topology::Pair,
        &["--rate-calls-per-minute", "5", "--rate-auth-email", "2"],
    )
    .await;
    let node = cloud.node(0);
    let me = || async {
        node.http
            .get(format!("{}/v1/me", node.api))
            .send()
            .await
            .expect("request sent")
            .status()
    };
    let email = |address: &'static str| async move {
        node.call(
            Method::POST,
            "/v1/auth/email",
            None,
            Some(json!({ "email": address })),
        )
        .await
        .0
    };
    // Up to each limit, and one refusal that finds it out in the store.
    for _ in 0..5 {
        assert_eq!(me().await, StatusCode::UNAUTHORIZED);
    }
    assert_eq!(me().await, StatusCode::TOO_MANY_REQUESTS);
    for expected in [
        StatusCode::ACCEPTED,
        StatusCode::ACCEPTED,
        StatusCode::TOO_MANY_REQUESTS,
    ] {
        assert_eq!(email("refused@y.z").await, expected);
    }
    // The store locked: a call that needs it waits out the node's lock timeout and fails.
    let mut sql = cloud.sql().await;
    sql.execute("BEGIN").await.unwrap();
    sql.execute("LOCK TABLE rate_windows, challenges IN ACCESS EXCLUSIVE MODE")
        .await
        .unwrap();
    let started = std::time::Instant::now();
    for _ in 0..10 {
        assert_eq!(me().await, StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(email("refused@y.z").await, StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(email("other@y.z").await, StatusCode::TOO_MANY_REQUESTS);
    }
    let took = started.elapsed();
    sql.execute("ROLLBACK").await.unwrap();
    // Each call that waited would take the node's lock timeout (2 s): 30 of them, a minute.
    assert!(
        took < std::time::Duration::from_secs(10),
        "30 refusals took {took:?}: they waited for the locked store"
    );
}

/// Sends `GET /v1/me` on a connection of its own from `from`, opened with `header` (a PROXY
/// v1 line, or nothing); the status line the node answered, or "" when it closed without one.
async fn me_via(node: &TestNode, from: std::net::Ipv4Addr, header: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let addr: std::net::SocketAddr = node.api.trim_start_matches("http://").parse().unwrap();
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind((from, 0).into()).unwrap();
    let mut stream = socket.connect(addr).await.unwrap();
    let request = format!("{header}GET /v1/me HTTP/1.1\r\nHost: n\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer).await;
    let answer = String::from_utf8_lossy(&answer);
    answer.lines().next().unwrap_or_default().to_string()
}

/// Behind a forwarder every client shares its address: the forwarder the node trusts names
/// each client in a PROXY header, and the per-address limits count that client. Anyone
/// else's header is a bad request, so a client cannot pick the address it is counted as.
#[tokio::test]
async fn a_trusted_forwarders_proxy_header_names_whom_the_limits_count() {
    let forwarder = std::net::Ipv4Addr::new(127, 0, 0, 1);
    let cloud = TestCloud::start_limited(
        Topology::Single,
        &[
            "--rate-calls-per-minute",
            "3",
            "--proxy-protocol-from",
            "127.0.0.1",
        ],
    )
    .await;
    let node = cloud.node(0);
    let header = |client: &str| format!("PROXY TCP4 {client} 127.0.0.1 40000 80\r\n");
    let ann = header("127.0.9.1");
    for _ in 0..3 {
        assert!(me_via(node, forwarder, &ann).await.contains(" 401 "));
    }
    assert!(me_via(node, forwarder, &ann).await.contains(" 429 "));
    // Another client behind the same forwarder, and the forwarder's own calls, count apart.
    assert!(me_via(node, forwarder, &header("127.0.9.2"))
        .await
        .contains(" 401 "));
    assert!(me_via(node, forwarder, "").await.contains(" 401 "));
    // From an address the node does not trust, the header is not read.
    let stranger = me_via(
        node,
        std::net::Ipv4Addr::new(127, 0, 0, 2),
        &header("127.0.9.3"),
    )
    .await;
    assert!(
        !stranger.contains(" 401 ") && !stranger.contains(" 429 "),
        "{stranger}"
    );
    // A malformed header from the forwarder closes the connection.
    let bad = me_via(node, forwarder, "PROXY TCP4 not-an-address\r\n").await;
    assert_eq!(bad, "");
}
