//! Friends and blocks over HTTP, on nodes run in this process: the order of the
//! request errors, each limit naming itself, the events of every change, and the
//! limits across two nodes sharing one PostgreSQL (`ANYPLAY_TEST_POSTGRES_URL`,
//! which `deploy/test.sh` starts; without it that test fails, it does not skip).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use anyplay_cloud::config::FriendLimits;
use anyplay_cloud::{Config, MailSinkConfig, MemoryMail, Node};
use futures_util::future::join_all;
use futures_util::StreamExt;
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

const SOON: Duration = Duration::from_secs(10);

/// One or more nodes on one store; players sign up through the first.
struct Cloud {
    apis: Vec<String>,
    mail: MemoryMail,
    http: reqwest::Client,
    _nodes: Vec<Node>,
    _dir: Option<TempDir>,
}

struct TempDir(std::path::PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

struct Player {
    id: i64,
    handle: String,
    access: String,
}

static NEXT: AtomicUsize = AtomicUsize::new(0);

/// A tag that keeps handles and emails unique across runs on a kept database.
fn unique() -> String {
    let ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() % 100_000_000);
    format!("{ms}_{}", NEXT.fetch_add(1, Ordering::Relaxed))
}

fn limits(max_friends: u32, max_outgoing: u32, daily: u32) -> FriendLimits {
    FriendLimits {
        max_friends,
        max_outgoing,
        daily_requests_new: daily,
        new_account_age: Duration::from_secs(24 * 3600),
    }
}

impl Cloud {
    async fn sqlite(friend_limits: FriendLimits) -> Cloud {
        let dir = std::env::temp_dir().join(format!(
            "anyplay-friends-{}-{}",
            std::process::id(),
            unique()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let url = format!("sqlite:{}", dir.join("cloud.db").display());
        Cloud::start(&url, 1, friend_limits, Some(TempDir(dir))).await
    }

    async fn start(
        url: &str,
        nodes: usize,
        friend_limits: FriendLimits,
        dir: Option<TempDir>,
    ) -> Cloud {
        let mut started = Vec::new();
        // One after the other: each runs the migrations on start.
        for i in 0..nodes {
            let mut config = Config {
                listen: ([127, 0, 0, 1], 0).into(),
                ops_listen: ([127, 0, 0, 1], 0).into(),
                database_url: url.to_string(),
                node_id: format!("fl-{i}-{}", unique()),
                mail: MailSinkConfig::Memory(MemoryMail::default()),
                friend_limits,
                ..Config::default()
            };
            config.rate_limits.enabled = false;
            started.push(Node::start(config).await.expect("node starts"));
        }
        Cloud {
            apis: started
                .iter()
                .map(|n| format!("http://{}", n.public_addr()))
                .collect(),
            mail: started[0].memory_mail().expect("memory mail"),
            http: reqwest::Client::new(),
            _nodes: started,
            _dir: dir,
        }
    }

    async fn call_on(
        &self,
        node: usize,
        method: Method,
        path: &str,
        who: &Player,
        body: Option<Value>,
    ) -> (StatusCode, Value) {
        let mut req = self
            .http
            .request(method, format!("{}{path}", self.apis[node]))
            .bearer_auth(&who.access);
        if let Some(b) = body {
            req = req.json(&b);
        }
        let resp = req.send().await.expect("request sent");
        let status = resp.status();
        let text = resp.text().await.unwrap_or_default();
        (status, serde_json::from_str(&text).unwrap_or(Value::Null))
    }

    async fn call(
        &self,
        method: Method,
        path: &str,
        who: &Player,
        body: Option<Value>,
    ) -> (StatusCode, Value) {
        self.call_on(0, method, path, who, body).await
    }

    async fn post(&self, path: &str, body: Value) -> Value {
        let resp = self
            .http
            .post(format!("{}{path}", self.apis[0]))
            .json(&body)
            .send()
            .await
            .unwrap();
        assert!(resp.status().is_success(), "{path}: {}", resp.status());
        resp.json().await.unwrap()
    }

    /// A new player whose handle starts with `prefix` (made unique).
    async fn signup(&self, prefix: &str) -> Player {
        let handle = format!("{prefix}{}", unique());
        let email = format!("{handle}@example.test");
        let v = self.post("/v1/auth/email", json!({ "email": email })).await;
        let code = self.mail.take_code(&email).await;
        let v = self
            .post(
                "/v1/auth/code",
                json!({ "challenge_id": v["challenge_id"], "code": code }),
            )
            .await;
        let v = self
            .post(
                "/v1/auth/signup",
                json!({ "signup_token": v["signup_token"], "handle": handle }),
            )
            .await;
        Player {
            id: v["account"]["id"].as_i64().unwrap(),
            handle,
            access: v["access_token"].as_str().unwrap().to_string(),
        }
    }

    async fn request(&self, from: &Player, handle: &str) -> (StatusCode, Value) {
        self.call(
            Method::POST,
            "/v1/friends/requests",
            from,
            Some(json!({ "handle": handle })),
        )
        .await
    }

    async fn list(&self, who: &Player) -> Value {
        let (s, v) = self.call(Method::GET, "/v1/friends", who, None).await;
        assert_eq!(s, StatusCode::OK, "{v}");
        v
    }

    async fn connect(&self, who: &Player) -> Events {
        let url = format!("{}/v1/events", self.apis[0].replace("http://", "ws://"));
        let mut req = url.into_client_request().unwrap();
        req.headers_mut().insert(
            "authorization",
            format!("Bearer {}", who.access).parse().unwrap(),
        );
        let (ws, _) = tokio_tungstenite::connect_async(req)
            .await
            .expect("websocket connect");
        let mut events = Events(ws);
        assert_eq!(events.next().await["type"], "welcome");
        events
    }
}

fn error(v: &Value) -> (Option<&str>, Option<&str>) {
    (v["error"]["code"].as_str(), v["error"]["limit"].as_str())
}

fn ids(list: &Value, key: &str) -> Vec<i64> {
    list[key]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["account_id"].as_i64().unwrap())
        .collect()
}

struct Events(WebSocketStream<MaybeTlsStream<TcpStream>>);

impl Events {
    async fn next(&mut self) -> Value {
        loop {
            let msg = tokio::time::timeout(SOON, self.0.next())
                .await
                .expect("an event in time")
                .expect("open")
                .expect("a frame");
            if let Message::Text(t) = msg {
                return serde_json::from_str(t.as_str()).unwrap();
            }
        }
    }

    /// The next event that is not a presence event.
    async fn next_change(&mut self) -> Value {
        loop {
            let e = self.next().await;
            if e["type"] != "presence" {
                return e;
            }
        }
    }
}

#[tokio::test]
async fn request_errors_come_in_the_contract_order() {
    let cloud = Cloud::sqlite(limits(500, 100, 10)).await;
    let ann = cloud.signup("ann").await;
    let bob = cloud.signup("bob").await;

    for handle in ["nobody_at_all", "no", "x' OR '1'='1"] {
        let (s, v) = cloud.request(&ann, handle).await;
        assert_eq!(
            (s, error(&v)),
            (StatusCode::NOT_FOUND, (Some("not_found"), None)),
            "{handle}"
        );
    }
    let (s, v) = cloud.request(&ann, &ann.handle.to_uppercase()).await;
    assert_eq!(
        (s, error(&v).0),
        (StatusCode::UNPROCESSABLE_ENTITY, Some("cannot_friend_self"))
    );

    let (s, v) = cloud.request(&ann, &bob.handle.to_uppercase()).await;
    assert_eq!(
        (s, v),
        (StatusCode::CREATED, json!({"status": "requested"}))
    );
    let (s, v) = cloud.request(&ann, &bob.handle).await;
    assert_eq!(
        (s, error(&v).0),
        (StatusCode::CONFLICT, Some("already_requested"))
    );
    assert_eq!(ids(&cloud.list(&ann).await, "outgoing"), [bob.id]);
    assert_eq!(ids(&cloud.list(&bob).await, "incoming"), [ann.id]);

    // Asking back accepts.
    let (s, v) = cloud.request(&bob, &ann.handle).await;
    assert_eq!((s, v), (StatusCode::OK, json!({"status": "friends"})));
    let (s, v) = cloud.request(&ann, &bob.handle).await;
    assert_eq!(
        (s, error(&v).0),
        (StatusCode::CONFLICT, Some("already_friends"))
    );
    let list = cloud.list(&ann).await;
    assert_eq!(ids(&list, "friends"), [bob.id]);
    assert_eq!(
        (ids(&list, "incoming").len(), ids(&list, "outgoing").len()),
        (0, 0)
    );
    let friend = &list["friends"][0];
    assert_eq!(friend["handle"], bob.handle.as_str());
    assert!(friend["since"].as_str().unwrap().ends_with('Z'));
    assert_eq!(
        friend["presence"],
        json!({"online": false, "activity": "", "version": 0})
    );

    // Blocking ends the friendship; it is idempotent and invisible to the blocked.
    for _ in 0..2 {
        let (s, _) = cloud
            .call(
                Method::POST,
                "/v1/blocks",
                &bob,
                Some(json!({"account_id": ann.id})),
            )
            .await;
        assert_eq!(s, StatusCode::NO_CONTENT);
    }
    let (s, v) = cloud.request(&ann, &bob.handle).await;
    assert_eq!(
        (s, error(&v).0),
        (StatusCode::NOT_FOUND, Some("not_found")),
        "the target blocked the caller"
    );
    let (s, v) = cloud.request(&bob, &ann.handle).await;
    assert_eq!(
        (s, error(&v).0),
        (StatusCode::FORBIDDEN, Some("blocked")),
        "the caller blocked the target"
    );
    let list = cloud.list(&bob).await;
    assert_eq!(
        (ids(&list, "friends"), ids(&list, "blocked")),
        (vec![], vec![ann.id])
    );
    assert_eq!(
        list["blocked"][0],
        json!({"account_id": ann.id, "handle": ann.handle})
    );
    assert!(ids(&cloud.list(&ann).await, "friends").is_empty());

    let path = format!("/v1/blocks/{}", ann.id);
    let (s, _) = cloud.call(Method::DELETE, &path, &bob, None).await;
    assert_eq!(s, StatusCode::NO_CONTENT);
    let (s, _) = cloud.call(Method::DELETE, &path, &bob, None).await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    let (s, _) = cloud.request(&ann, &bob.handle).await;
    assert_eq!(s, StatusCode::CREATED, "unblocked");

    let blocks = [
        (
            json!({"account_id": bob.id}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "cannot_block_self",
        ),
        (
            json!({"account_id": 999_999_999}),
            StatusCode::NOT_FOUND,
            "not_found",
        ),
        (
            json!({"account_id": 0}),
            StatusCode::BAD_REQUEST,
            "bad_request",
        ),
        (json!({}), StatusCode::BAD_REQUEST, "bad_request"),
    ];
    for (body, status, code) in blocks {
        let (s, v) = cloud
            .call(Method::POST, "/v1/blocks", &bob, Some(body.clone()))
            .await;
        assert_eq!((s, error(&v).0), (status, Some(code)), "{body}");
    }
}

#[tokio::test]
async fn missing_requests_and_friendships_are_404() {
    let cloud = Cloud::sqlite(limits(500, 100, 10)).await;
    let ann = cloud.signup("ann").await;
    let bob = cloud.signup("bob").await;
    let (s, _) = cloud.request(&ann, &bob.handle).await;
    assert_eq!(s, StatusCode::CREATED);
    let calls = [
        // Only the target accepts or declines, only the sender cancels.
        (
            Method::POST,
            format!("/v1/friends/requests/{}/accept", bob.id),
            &ann,
        ),
        (
            Method::POST,
            format!("/v1/friends/requests/{}/decline", bob.id),
            &ann,
        ),
        (
            Method::DELETE,
            format!("/v1/friends/requests/{}", ann.id),
            &bob,
        ),
        (Method::DELETE, format!("/v1/friends/{}", bob.id), &ann),
        (Method::DELETE, format!("/v1/blocks/{}", bob.id), &ann),
        (
            Method::POST,
            "/v1/friends/requests/999999999/accept".to_string(),
            &bob,
        ),
    ];
    for (method, path, who) in calls {
        let (s, v) = cloud.call(method.clone(), &path, who, None).await;
        assert_eq!(
            (s, error(&v).0),
            (StatusCode::NOT_FOUND, Some("not_found")),
            "{method} {path}"
        );
    }
    let (s, _) = cloud
        .call(
            Method::DELETE,
            &format!("/v1/friends/requests/{}", bob.id),
            &ann,
            None,
        )
        .await;
    assert_eq!(s, StatusCode::NO_CONTENT);
    assert!(ids(&cloud.list(&bob).await, "incoming").is_empty());
}

#[tokio::test]
async fn each_limit_names_itself() {
    let cloud = Cloud::sqlite(limits(1, 2, 3)).await;
    let [ann, bob, cat, dan] = [
        cloud.signup("ann").await,
        cloud.signup("bob").await,
        cloud.signup("cat").await,
        cloud.signup("dan").await,
    ];
    let (s, _) = cloud.request(&ann, &bob.handle).await;
    assert_eq!(s, StatusCode::CREATED);
    let (s, _) = cloud
        .call(
            Method::POST,
            &format!("/v1/friends/requests/{}/accept", ann.id),
            &bob,
            None,
        )
        .await;
    assert_eq!(s, StatusCode::OK);

    // A full friend list can neither ask nor accept; others may still ask it.
    let (s, v) = cloud.request(&ann, &cat.handle).await;
    assert_eq!(
        (s, error(&v)),
        (
            StatusCode::UNPROCESSABLE_ENTITY,
            (Some("limit_reached"), Some("friends"))
        )
    );
    let (s, _) = cloud.request(&cat, &ann.handle).await;
    assert_eq!(s, StatusCode::CREATED);
    let (s, v) = cloud
        .call(
            Method::POST,
            &format!("/v1/friends/requests/{}/accept", cat.id),
            &ann,
            None,
        )
        .await;
    assert_eq!(error(&v), (Some("limit_reached"), Some("friends")), "{s}");
    assert_eq!(
        ids(&cloud.list(&ann).await, "incoming"),
        [cat.id],
        "a refused accept changes nothing"
    );

    // Two open requests at most; a cancelled one frees a place but still counts today.
    let targets = [
        cloud.signup("t").await,
        cloud.signup("t").await,
        cloud.signup("t").await,
    ];
    for t in &targets[..2] {
        assert_eq!(cloud.request(&dan, &t.handle).await.0, StatusCode::CREATED);
    }
    let (_, v) = cloud.request(&dan, &targets[2].handle).await;
    assert_eq!(error(&v), (Some("limit_reached"), Some("outgoing")));
    let cancel = format!("/v1/friends/requests/{}", targets[0].id);
    assert_eq!(
        cloud.call(Method::DELETE, &cancel, &dan, None).await.0,
        StatusCode::NO_CONTENT
    );
    assert_eq!(
        cloud.request(&dan, &targets[2].handle).await.0,
        StatusCode::CREATED
    );
    let cancel = format!("/v1/friends/requests/{}", targets[1].id);
    assert_eq!(
        cloud.call(Method::DELETE, &cancel, &dan, None).await.0,
        StatusCode::NO_CONTENT
    );
    let (_, v) = cloud.request(&dan, &targets[0].handle).await;
    assert_eq!(error(&v), (Some("limit_reached"), Some("daily")));
}

#[tokio::test]
async fn every_change_tells_the_other_side() {
    let cloud = Cloud::sqlite(limits(500, 100, 10)).await;
    let ann = cloud.signup("ann").await;
    let bob = cloud.signup("bob").await;
    let mut ann_ev = cloud.connect(&ann).await;
    let mut bob_ev = cloud.connect(&bob).await;

    cloud.request(&ann, &bob.handle).await;
    let e = bob_ev.next_change().await;
    assert_eq!(
        (&e["type"], &e["from"]),
        (
            &json!("friend_request"),
            &json!({"account_id": ann.id, "handle": ann.handle})
        )
    );
    let decline = format!("/v1/friends/requests/{}/decline", ann.id);
    assert_eq!(
        cloud.call(Method::POST, &decline, &bob, None).await.0,
        StatusCode::NO_CONTENT
    );
    let e = ann_ev.next_change().await;
    assert_eq!(
        (&e["type"], &e["account_id"]),
        (&json!("friend_request_declined"), &json!(bob.id))
    );

    cloud.request(&ann, &bob.handle).await;
    bob_ev.next_change().await;
    let cancel = format!("/v1/friends/requests/{}", bob.id);
    assert_eq!(
        cloud.call(Method::DELETE, &cancel, &ann, None).await.0,
        StatusCode::NO_CONTENT
    );
    let e = bob_ev.next_change().await;
    assert_eq!(
        (&e["type"], &e["account_id"]),
        (&json!("friend_request_cancelled"), &json!(ann.id))
    );

    // Asking back: the first asker hears `friend_accepted`, and each gets the other's presence.
    cloud.request(&bob, &ann.handle).await;
    ann_ev.next_change().await;
    assert_eq!(cloud.request(&ann, &bob.handle).await.0, StatusCode::OK);
    let e = bob_ev.next().await;
    assert_eq!(
        e,
        json!({"seq": e["seq"], "type": "friend_accepted", "account_id": ann.id, "handle": ann.handle})
    );
    let e = bob_ev.next().await;
    assert_eq!(
        (&e["type"], &e["account_id"], &e["online"]),
        (&json!("presence"), &json!(ann.id), &json!(true))
    );
    let e = ann_ev.next().await;
    assert_eq!(
        (&e["type"], &e["account_id"], &e["online"]),
        (&json!("presence"), &json!(bob.id), &json!(true))
    );

    assert_eq!(
        cloud
            .call(
                Method::DELETE,
                &format!("/v1/friends/{}", bob.id),
                &ann,
                None
            )
            .await
            .0,
        StatusCode::NO_CONTENT
    );
    let e = bob_ev.next_change().await;
    assert_eq!(
        (&e["type"], &e["account_id"]),
        (&json!("friend_removed"), &json!(ann.id))
    );

    // A block tells a friend `friend_removed`, and a non-friend nothing.
    cloud.request(&ann, &bob.handle).await;
    bob_ev.next_change().await;
    cloud.request(&bob, &ann.handle).await;
    ann_ev.next_change().await;
    let block = json!({"account_id": ann.id});
    assert_eq!(
        cloud
            .call(Method::POST, "/v1/blocks", &bob, Some(block.clone()))
            .await
            .0,
        StatusCode::NO_CONTENT
    );
    let e = ann_ev.next_change().await;
    assert_eq!(
        (&e["type"], &e["account_id"]),
        (&json!("friend_removed"), &json!(bob.id))
    );
    assert_eq!(
        cloud
            .call(Method::POST, "/v1/blocks", &bob, Some(block))
            .await
            .0,
        StatusCode::NO_CONTENT
    );
    let quiet = tokio::time::timeout(Duration::from_millis(300), ann_ev.next()).await;
    assert!(quiet.is_err(), "a second block says nothing: {quiet:?}");
}

/// Two nodes on one PostgreSQL: the rules hold across them.
#[tokio::test]
async fn limits_hold_across_two_nodes_on_postgres() {
    let url = std::env::var("ANYPLAY_TEST_POSTGRES_URL")
        .expect("ANYPLAY_TEST_POSTGRES_URL is not set: run the tests with deploy/test.sh, which starts PostgreSQL");
    let cloud = Cloud::start(&url, 2, limits(3, 100, 10), None).await;

    // A new account: 20 requests at once through both nodes, exactly 10 go through.
    let newbie = cloud.signup("n").await;
    let targets = join_all((0..20).map(|_| cloud.signup("t"))).await;
    let results = join_all(targets.iter().enumerate().map(|(i, t)| {
        let body = json!({ "handle": t.handle });
        cloud.call_on(
            i % 2,
            Method::POST,
            "/v1/friends/requests",
            &newbie,
            Some(body),
        )
    }))
    .await;
    let ok = results
        .iter()
        .filter(|(s, _)| *s == StatusCode::CREATED)
        .count();
    assert_eq!(ok, 10, "{results:?}");
    for (s, v) in results.iter().filter(|(s, _)| *s != StatusCode::CREATED) {
        assert_eq!(
            (*s, error(v)),
            (
                StatusCode::UNPROCESSABLE_ENTITY,
                (Some("limit_reached"), Some("daily"))
            )
        );
    }
    assert_eq!(ids(&cloud.list(&newbie).await, "outgoing").len(), 10);

    // Ten ask a leader who may have three friends; accepting them all at once
    // through both nodes gives exactly three.
    let leader = cloud.signup("l").await;
    let askers = join_all((0..10).map(|_| cloud.signup("a"))).await;
    for a in &askers {
        assert_eq!(
            cloud.request(a, &leader.handle).await.0,
            StatusCode::CREATED
        );
    }
    let results = join_all(askers.iter().enumerate().map(|(i, a)| {
        let path = format!("/v1/friends/requests/{}/accept", a.id);
        let (cloud, leader) = (&cloud, &leader);
        async move {
            cloud
                .call_on(i % 2, Method::POST, &path, leader, None)
                .await
        }
    }))
    .await;
    assert_eq!(
        results.iter().filter(|(s, _)| *s == StatusCode::OK).count(),
        3,
        "{results:?}"
    );
    assert_eq!(ids(&cloud.list(&leader).await, "friends").len(), 3);

    // Pairs asking each other at once through different nodes end as friends,
    // with one request made and one turned into the friendship.
    let pairs =
        join_all((0..6).map(|_| async { (cloud.signup("p").await, cloud.signup("q").await) }))
            .await;
    let results = join_all(pairs.iter().map(|(p, q)| async {
        let body = |h: &str| Some(json!({ "handle": h }));
        let (a, b) = tokio::join!(
            cloud.call_on(0, Method::POST, "/v1/friends/requests", p, body(&q.handle)),
            cloud.call_on(1, Method::POST, "/v1/friends/requests", q, body(&p.handle)),
        );
        let mut statuses = [a.0, b.0];
        statuses.sort();
        statuses
    }))
    .await;
    for statuses in results {
        assert_eq!(statuses, [StatusCode::OK, StatusCode::CREATED]);
    }
    for (p, q) in &pairs {
        let list = cloud.list(p).await;
        assert_eq!(
            (ids(&list, "friends"), ids(&list, "outgoing")),
            (vec![q.id], vec![])
        );
    }
}
