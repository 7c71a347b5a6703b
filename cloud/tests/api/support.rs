//! Test support: a real `anyplay-cloud` process on free loopback ports, and
//! players that sign up through its mail log and talk HTTP and WebSocket to it.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

/// Generous bound for anything that should happen "at once" on a loaded 2-core machine.
pub const SOON: Duration = Duration::from_secs(10);

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A node process; killed when dropped.
pub struct TestNode {
    pub dir: PathBuf,
    pub api: String,
    pub ops: String,
    pub child: Option<Child>,
    pub http: reqwest::Client,
}

impl TestNode {
    /// Starts a node on SQLite in a fresh directory with `extra` flags and the
    /// per-IP limits lifted (every test client comes from 127.0.0.1).
    pub async fn start(extra: &[&str]) -> TestNode {
        let mut args = vec!["--no-rate-limits"];
        args.extend_from_slice(extra);
        TestNode::start_limited(&args).await
    }

    /// Starts a node with the default per-IP limits unless `extra` changes them.
    pub async fn start_limited(extra: &[&str]) -> TestNode {
        let dir = std::env::temp_dir().join(format!(
            "anyplay-it-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let (api_port, ops_port) = (free_port(), free_port());
        let log = std::fs::File::create(dir.join("node.log")).unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_anyplay-cloud"))
            .args(["--listen", &format!("127.0.0.1:{api_port}")])
            .args(["--ops-listen", &format!("127.0.0.1:{ops_port}")])
            .args([
                "--database-url",
                &format!("sqlite:{}", dir.join("cloud.db").display()),
            ])
            .args(["--mail-log", dir.join("mail.log").to_str().unwrap()])
            .args(["--node-id", "node-t"])
            .args(extra)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start anyplay-cloud");
        let node = TestNode {
            dir,
            api: format!("http://127.0.0.1:{api_port}"),
            ops: format!("http://127.0.0.1:{ops_port}"),
            child: Some(child),
            http: reqwest::Client::new(),
        };
        node.wait_ready().await;
        node
    }

    async fn wait_ready(&self) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Ok(r) = self.http.get(format!("{}/readyz", self.ops)).send().await {
                if r.status() == StatusCode::OK {
                    return;
                }
            }
            assert!(
                Instant::now() < deadline,
                "node not ready; log:\n{}",
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("node.log")).unwrap_or_default()
    }

    /// The newest code the mail log holds for `email`.
    pub async fn code_for(&self, email: &str) -> String {
        let deadline = Instant::now() + SOON;
        loop {
            let text = std::fs::read_to_string(self.dir.join("mail.log")).unwrap_or_default();
            let needle = format!(" to={email} code=");
            if let Some(code) = text
                .lines()
                .rev()
                .find_map(|l| l.split_once(&needle).map(|(_, c)| c.to_string()))
            {
                return code;
            }
            assert!(
                Instant::now() < deadline,
                "no code for {email} in the mail log"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Sends a raw request; returns the status and the JSON body (Null when empty).
    pub async fn call(
        &self,
        method: Method,
        path: &str,
        token: Option<&str>,
        body: Option<Value>,
    ) -> (StatusCode, Value) {
        let mut req = self.http.request(method, format!("{}{path}", self.api));
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        if let Some(b) = body {
            req = req.json(&b);
        }
        let resp = req.send().await.expect("request sent");
        let status = resp.status();
        let text = resp.text().await.unwrap_or_default();
        (status, serde_json::from_str(&text).unwrap_or(Value::Null))
    }

    pub async fn ops_get(&self, path: &str) -> (StatusCode, String) {
        let resp = self
            .http
            .get(format!("{}{path}", self.ops))
            .send()
            .await
            .expect("ops request");
        (resp.status(), resp.text().await.unwrap_or_default())
    }

    /// Signs up a new player with this handle.
    pub async fn signup(&self, handle: &str) -> Player {
        let email = format!("{handle}@example.test").to_lowercase();
        let (s, v) = self
            .call(
                Method::POST,
                "/v1/auth/email",
                None,
                Some(json!({ "email": email })),
            )
            .await;
        assert_eq!(s, StatusCode::ACCEPTED, "{v}");
        let challenge = v["challenge_id"].as_str().unwrap().to_string();
        let code = self.code_for(&email).await;
        let (s, v) = self
            .call(
                Method::POST,
                "/v1/auth/code",
                None,
                Some(json!({ "challenge_id": challenge, "code": code })),
            )
            .await;
        assert_eq!(s, StatusCode::OK, "{v}");
        assert_eq!(v["status"], "signup_required", "{v}");
        let (s, v) = self
            .call(
                Method::POST,
                "/v1/auth/signup",
                None,
                Some(json!({ "signup_token": v["signup_token"], "handle": handle })),
            )
            .await;
        assert_eq!(s, StatusCode::CREATED, "{v}");
        Player {
            id: v["account"]["id"].as_i64().unwrap(),
            handle: handle.to_string(),
            email,
            access: v["access_token"].as_str().unwrap().to_string(),
            refresh: v["refresh_token"].as_str().unwrap().to_string(),
        }
    }

    /// `signup` with an owned handle, for building many players at once.
    pub async fn signup_owned(&self, handle: String) -> Player {
        self.signup(&handle).await
    }

    /// Makes `a` and `b` friends (request by `a`, accept by `b`).
    pub async fn befriend(&self, a: &Player, b: &Player) {
        let (s, v) = self
            .call(
                Method::POST,
                "/v1/friends/requests",
                Some(&a.access),
                Some(json!({"handle": b.handle})),
            )
            .await;
        assert_eq!(s, StatusCode::CREATED, "{v}");
        let (s, v) = self
            .call(
                Method::POST,
                &format!("/v1/friends/requests/{}/accept", a.id),
                Some(&b.access),
                None,
            )
            .await;
        assert_eq!(s, StatusCode::OK, "{v}");
    }

    /// Opens the event connection of `player` and returns it after its welcome.
    pub async fn connect(&self, player: &Player) -> (Events, Value) {
        let url = format!("{}/v1/events", self.api.replace("http://", "ws://"));
        let mut req = url.into_client_request().unwrap();
        req.headers_mut().insert(
            "authorization",
            format!("Bearer {}", player.access).parse().unwrap(),
        );
        let (ws, _) = tokio_tungstenite::connect_async(req)
            .await
            .expect("websocket connect");
        let mut events = Events { ws };
        let welcome = events.next().await;
        assert_eq!(welcome["type"], "welcome", "{welcome}");
        (events, welcome)
    }

    /// Sends SIGTERM and waits for the exit.
    pub fn terminate(&mut self) -> ExitStatus {
        let child = self.child.as_mut().unwrap();
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(child.id() as i32),
            nix::sys::signal::Signal::SIGTERM,
        )
        .unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                return status;
            }
            assert!(Instant::now() < deadline, "node did not exit after SIGTERM");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

impl Drop for TestNode {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

pub struct Player {
    pub id: i64,
    pub handle: String,
    pub email: String,
    pub access: String,
    pub refresh: String,
}

/// A client's event connection.
pub struct Events {
    pub ws: WebSocketStream<MaybeTlsStream<TcpStream>>,
}

/// How a connection ended, seen from the client.
#[derive(Debug, PartialEq, Eq)]
pub enum End {
    Close(u16),
    NoCloseFrame,
}

impl Events {
    /// The next event (text frame as JSON); panics on close or after `SOON`.
    pub async fn next(&mut self) -> Value {
        loop {
            let msg = tokio::time::timeout(SOON, self.ws.next())
                .await
                .expect("an event within the time limit")
                .expect("the connection is open")
                .expect("a frame");
            match msg {
                Message::Text(t) => return serde_json::from_str(t.as_str()).expect("JSON event"),
                Message::Close(f) => panic!("connection closed: {f:?}"),
                _ => continue,
            }
        }
    }

    /// The next event of this type, skipping (and returning) others.
    pub async fn next_of(&mut self, kind: &str) -> Value {
        loop {
            let e = self.next().await;
            if e["type"] == kind {
                return e;
            }
        }
    }

    /// Waits for the end of the connection and says how it ended.
    pub async fn closed(&mut self) -> End {
        loop {
            match tokio::time::timeout(SOON, self.ws.next())
                .await
                .expect("the connection ends in time")
            {
                Some(Ok(Message::Close(Some(f)))) => return End::Close(u16::from(f.code)),
                Some(Ok(Message::Close(None))) | None | Some(Err(_)) => return End::NoCloseFrame,
                Some(Ok(_)) => continue,
            }
        }
    }

    /// Sends a text frame.
    pub async fn send_text(&mut self, text: String) {
        self.ws
            .send(Message::Text(text.into()))
            .await
            .expect("send");
    }

    /// Nothing arrives within `wait` (pings aside).
    pub async fn quiet_for(&mut self, wait: Duration) -> Option<Value> {
        let until = tokio::time::Instant::now() + wait;
        loop {
            match tokio::time::timeout_at(until, self.ws.next()).await {
                Err(_) => return None,
                Ok(Some(Ok(Message::Text(t)))) => {
                    return Some(serde_json::from_str(t.as_str()).unwrap_or(Value::Null))
                }
                Ok(Some(Ok(Message::Close(f)))) => {
                    return Some(json!({"closed": f.map(|f| u16::from(f.code))}))
                }
                Ok(Some(Ok(_))) => continue,
                Ok(_) => return Some(json!({"closed": null})),
            }
        }
    }
}
