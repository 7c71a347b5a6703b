//! A fake cloud node for the harness's own tests: the contract's calls the players make, kept in
//! memory, with a `log` mail sink; no limits, no persistence, one node. It stands in for
//! `anyplay-cloud` so the harness is tested on its own; the real cloud has its own suite.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};

use axum::extract::ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade};
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use axum::{Json, Router};
use serde_json::{json, Value};
use tokio::sync::mpsc;

type Shared = Arc<Fake>;

struct Fake {
    mail_log: PathBuf,
    state: Mutex<Cloud>,
}

#[derive(Default)]
struct Cloud {
    next_id: u64,
    challenges: HashMap<String, (String, String)>,
    signups: HashMap<String, String>,
    by_email: HashMap<String, u64>,
    handles: HashMap<String, u64>,
    names: HashMap<u64, String>,
    access: HashMap<String, u64>,
    refresh: HashMap<String, u64>,
    friends: HashMap<u64, BTreeSet<u64>>,
    requests: HashSet<(u64, u64)>,
    presence: HashMap<u64, u64>,
    connections: HashMap<u64, (u64, mpsc::UnboundedSender<Message>)>,
    sessions: HashMap<u64, Vec<u64>>,
    member_of: HashMap<u64, u64>,
    requests_served: u64,
}

impl Cloud {
    fn id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    fn tokens(&mut self, account: u64) -> Value {
        let (access, refresh) = (format!("a{}", self.id()), format!("r{}", self.id()));
        self.access.insert(access.clone(), account);
        self.refresh.insert(refresh.clone(), account);
        json!({"access_token": access, "refresh_token": refresh, "expires_in": 900,
               "account": {"id": account, "handle": self.names[&account], "created_at": "2025-01-01T00:00:00Z",
                           "privacy": "friends", "avatar": null}})
    }

    fn send(&self, to: u64, event: Value) {
        if let Some((_, tx)) = self.connections.get(&to) {
            let _ = tx.send(Message::Text(event.to_string().into()));
        }
    }
}

fn unauthorized() -> Response {
    error(StatusCode::UNAUTHORIZED, "unauthorized")
}

fn error(status: StatusCode, code: &str) -> Response {
    (
        status,
        Json(json!({"error": {"code": code, "message": code}})),
    )
        .into_response()
}

impl Fake {
    fn lock(&self) -> MutexGuard<'_, Cloud> {
        let mut cloud = self.state.lock().expect("fake state");
        cloud.requests_served += 1;
        cloud
    }

    /// The caller's account, by its bearer token.
    fn caller(&self, headers: &HeaderMap) -> Option<(u64, MutexGuard<'_, Cloud>)> {
        let cloud = self.lock();
        let token = headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .unwrap_or_default();
        let id = *cloud.access.get(token)?;
        Some((id, cloud))
    }
}

/// Serves a fake node on a free loopback port; its base URL, e.g. `http://127.0.0.1:PORT`.
pub async fn start(mail_log: PathBuf) -> String {
    let fake = Arc::new(Fake {
        mail_log,
        state: Mutex::new(Cloud::default()),
    });
    let app = Router::new()
        .route("/v1/auth/email", post(auth_email))
        .route("/v1/auth/code", post(auth_code))
        .route("/v1/auth/signup", post(auth_signup))
        .route("/v1/auth/refresh", post(auth_refresh))
        .route("/v1/friends", get(friends))
        .route("/v1/friends/requests", post(friend_request))
        .route("/v1/friends/requests/{id}/accept", post(friend_accept))
        .route("/v1/presence", put(presence))
        .route("/v1/sessions", post(session_create))
        .route("/v1/sessions/{id}", get(session_get))
        .route("/v1/sessions/{id}/join", post(session_join))
        .route("/v1/sessions/{id}/leave", post(session_leave))
        .route("/v1/cards", get(cards))
        .route("/v1/events", get(events))
        .route("/metrics", get(metrics))
        .with_state(fake);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a free port");
    let addr = listener.local_addr().expect("bound");
    tokio::spawn(async move { axum::serve(listener, app).await.expect("the fake serves") });
    format!("http://{addr}")
}

async fn auth_email(State(fake): State<Shared>, Json(body): Json<Value>) -> Response {
    let email = body["email"].as_str().unwrap_or_default().to_string();
    let mut cloud = fake.lock();
    let id = cloud.id();
    let code = format!("{:06}", id % 1_000_000);
    let challenge = format!("c{id}");
    cloud
        .challenges
        .insert(challenge.clone(), (email.clone(), code.clone()));
    // Written before the answer, as the contract's log sink flushes at once.
    let line = format!("2025-01-01T00:00:00Z to={email} code={code}\n");
    use std::io::Write;
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&fake.mail_log)
        .expect("mail log");
    file.write_all(line.as_bytes()).expect("mail log write");
    (
        StatusCode::ACCEPTED,
        Json(json!({"challenge_id": challenge})),
    )
        .into_response()
}

async fn auth_code(State(fake): State<Shared>, Json(body): Json<Value>) -> Response {
    let mut cloud = fake.lock();
    let challenge = body["challenge_id"].as_str().unwrap_or_default();
    let Some((email, code)) = cloud.challenges.get(challenge).cloned() else {
        return error(StatusCode::UNAUTHORIZED, "invalid_code");
    };
    if body["code"].as_str() != Some(code.as_str()) {
        return error(StatusCode::UNAUTHORIZED, "invalid_code");
    }
    cloud.challenges.remove(challenge);
    match cloud.by_email.get(&email).copied() {
        Some(account) => {
            let mut tokens = cloud.tokens(account);
            tokens["status"] = json!("signed_in");
            Json(tokens).into_response()
        }
        None => {
            let token = format!("s{}", cloud.id());
            cloud.signups.insert(token.clone(), email);
            Json(json!({"status": "signup_required", "signup_token": token})).into_response()
        }
    }
}

async fn auth_signup(State(fake): State<Shared>, Json(body): Json<Value>) -> Response {
    let mut cloud = fake.lock();
    let Some(email) = cloud
        .signups
        .remove(body["signup_token"].as_str().unwrap_or_default())
    else {
        return error(StatusCode::UNAUTHORIZED, "invalid_token");
    };
    let handle = body["handle"].as_str().unwrap_or_default().to_lowercase();
    if cloud.handles.contains_key(&handle) {
        return error(StatusCode::CONFLICT, "handle_taken");
    }
    let id = cloud.id();
    cloud.by_email.insert(email, id);
    cloud.handles.insert(handle.clone(), id);
    cloud.names.insert(id, handle);
    (StatusCode::CREATED, Json(cloud.tokens(id))).into_response()
}

async fn auth_refresh(State(fake): State<Shared>, Json(body): Json<Value>) -> Response {
    let mut cloud = fake.lock();
    match cloud
        .refresh
        .remove(body["refresh_token"].as_str().unwrap_or_default())
    {
        Some(id) => Json(cloud.tokens(id)).into_response(),
        None => error(StatusCode::UNAUTHORIZED, "invalid_token"),
    }
}

async fn friends(State(fake): State<Shared>, headers: HeaderMap) -> Response {
    let Some((me, cloud)) = fake.caller(&headers) else {
        return unauthorized();
    };
    let list: Vec<Value> = cloud
        .friends
        .get(&me)
        .into_iter()
        .flatten()
        .map(|f| json!({"account_id": f}))
        .collect();
    Json(json!({"friends": list, "incoming": [], "outgoing": [], "blocked": []})).into_response()
}

async fn friend_request(
    State(fake): State<Shared>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Response {
    let Some((me, mut cloud)) = fake.caller(&headers) else {
        return unauthorized();
    };
    let Some(&them) = cloud
        .handles
        .get(body["handle"].as_str().unwrap_or_default())
    else {
        return error(StatusCode::NOT_FOUND, "not_found");
    };
    if cloud.requests.remove(&(them, me)) {
        cloud.friends.entry(me).or_default().insert(them);
        cloud.friends.entry(them).or_default().insert(me);
        return Json(json!({"status": "friends"})).into_response();
    }
    cloud.requests.insert((me, them));
    (StatusCode::CREATED, Json(json!({"status": "requested"}))).into_response()
}

async fn friend_accept(
    State(fake): State<Shared>,
    headers: HeaderMap,
    Path(from): Path<u64>,
) -> Response {
    let Some((me, mut cloud)) = fake.caller(&headers) else {
        return unauthorized();
    };
    if !cloud.requests.remove(&(from, me)) {
        return error(StatusCode::NOT_FOUND, "not_found");
    }
    cloud.friends.entry(me).or_default().insert(from);
    cloud.friends.entry(from).or_default().insert(me);
    Json(json!({"status": "friends"})).into_response()
}

async fn presence(
    State(fake): State<Shared>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Response {
    let Some((me, mut cloud)) = fake.caller(&headers) else {
        return unauthorized();
    };
    let version = body["version"].as_u64().unwrap_or(0);
    if version > cloud.presence.get(&me).copied().unwrap_or(0) {
        cloud.presence.insert(me, version);
        let event = json!({"type": "presence", "seq": 1, "account_id": me, "online": true,
                           "activity": body["activity"], "version": version});
        for friend in cloud.friends.get(&me).cloned().unwrap_or_default() {
            cloud.send(friend, event.clone());
        }
    }
    StatusCode::NO_CONTENT.into_response()
}

fn session_json(id: u64, members: &[u64]) -> Value {
    json!({"id": id, "leader": members[0], "members": members, "max_members": 16, "created_at": "x"})
}

async fn session_create(State(fake): State<Shared>, headers: HeaderMap) -> Response {
    let Some((me, mut cloud)) = fake.caller(&headers) else {
        return unauthorized();
    };
    if cloud.member_of.contains_key(&me) {
        return error(StatusCode::CONFLICT, "already_in_session");
    }
    let id = cloud.id();
    cloud.sessions.insert(id, vec![me]);
    cloud.member_of.insert(me, id);
    (StatusCode::CREATED, Json(session_json(id, &[me]))).into_response()
}

async fn session_get(
    State(fake): State<Shared>,
    headers: HeaderMap,
    Path(id): Path<u64>,
) -> Response {
    let Some((me, cloud)) = fake.caller(&headers) else {
        return unauthorized();
    };
    match cloud.sessions.get(&id) {
        Some(members) if members.contains(&me) => Json(session_json(id, members)).into_response(),
        _ => error(StatusCode::NOT_FOUND, "not_found"),
    }
}

async fn session_join(
    State(fake): State<Shared>,
    headers: HeaderMap,
    Path(id): Path<u64>,
) -> Response {
    let Some((me, mut cloud)) = fake.caller(&headers) else {
        return unauthorized();
    };
    if cloud.member_of.contains_key(&me) {
        return error(StatusCode::CONFLICT, "already_in_session");
    }
    let Some(members) = cloud.sessions.get_mut(&id) else {
        return error(StatusCode::NOT_FOUND, "not_found");
    };
    members.push(me);
    let members = members.clone();
    cloud.member_of.insert(me, id);
    Json(session_json(id, &members)).into_response()
}

async fn session_leave(
    State(fake): State<Shared>,
    headers: HeaderMap,
    Path(id): Path<u64>,
) -> Response {
    let Some((me, mut cloud)) = fake.caller(&headers) else {
        return unauthorized();
    };
    if cloud.member_of.get(&me) != Some(&id) {
        return error(StatusCode::NOT_FOUND, "not_found");
    }
    cloud.member_of.remove(&me);
    let members = cloud
        .sessions
        .get_mut(&id)
        .expect("a member's session exists");
    members.retain(|m| *m != me);
    if members.is_empty() {
        cloud.sessions.remove(&id);
    }
    StatusCode::NO_CONTENT.into_response()
}

async fn cards(
    State(fake): State<Shared>,
    headers: HeaderMap,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    let Some((_, cloud)) = fake.caller(&headers) else {
        return unauthorized();
    };
    let ids: Result<Vec<u64>, _> = q
        .get("ids")
        .map(String::as_str)
        .unwrap_or_default()
        .split(',')
        .map(str::parse)
        .collect();
    let Ok(ids) = ids else {
        return error(StatusCode::BAD_REQUEST, "bad_request");
    };
    let cards: Vec<Value> = ids
        .iter()
        .map(|id| match cloud.names.get(id) {
            Some(handle) => {
                json!({"account_id": id, "handle": handle, "relation": "none", "limited": true})
            }
            None => json!({"account_id": id, "missing": true}),
        })
        .collect();
    Json(json!({"cards": cards})).into_response()
}

async fn metrics(State(fake): State<Shared>) -> String {
    let cloud = fake.lock();
    format!(
        "# TYPE fake_requests_total counter\nfake_requests_total {}\nfake_connections {}\n",
        cloud.requests_served,
        cloud.connections.len()
    )
}

async fn events(
    State(fake): State<Shared>,
    headers: HeaderMap,
    upgrade: WebSocketUpgrade,
) -> Response {
    let Some((me, cloud)) = fake.caller(&headers) else {
        return unauthorized();
    };
    drop(cloud);
    // Small events: the default 128 KiB read buffer per socket would dwarf the harness.
    upgrade
        .read_buffer_size(4 * 1024)
        .on_upgrade(move |socket| connection(fake, me, socket))
}

async fn connection(fake: Shared, me: u64, mut socket: WebSocket) {
    let (tx, mut rx) = mpsc::unbounded_channel();
    let connection_id = {
        let mut cloud = fake.lock();
        let id = cloud.id();
        if let Some((_, old)) = cloud.connections.insert(me, (id, tx)) {
            let _ = old.send(Message::Close(Some(CloseFrame {
                code: 4001,
                reason: "replaced".into(),
            })));
        }
        id
    };
    let welcome = json!({"type": "welcome", "node": "fake-1", "connection_id": connection_id.to_string(),
                         "account_id": me, "server_time": "2025-01-01T00:00:00Z", "ping_interval_s": 20});
    if socket
        .send(Message::Text(welcome.to_string().into()))
        .await
        .is_ok()
    {
        loop {
            tokio::select! {
                out = rx.recv() => match out {
                    Some(message) => if socket.send(message).await.is_err() { break },
                    None => break,
                },
                incoming = socket.recv() => match incoming {
                    Some(Ok(Message::Close(_))) | Some(Err(_)) | None => break,
                    Some(Ok(_)) => {}
                },
            }
        }
    }
    let mut cloud = fake.lock();
    if cloud
        .connections
        .get(&me)
        .is_some_and(|(id, _)| *id == connection_id)
    {
        cloud.connections.remove(&me);
    }
}
