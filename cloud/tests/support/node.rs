//! One `anyplay-cloud` process on free loopback ports: raw HTTP, operations and
//! WebSocket calls to it, its mail log and its exit. Killed when dropped.

use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use reqwest::{Method, StatusCode};
use serde_json::Value;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

use super::{Events, Player, SOON};

/// Where a node keeps its state.
pub enum Backend<'a> {
    /// Its own SQLite file, in the node's directory.
    Sqlite,
    /// A PostgreSQL database shared with the other nodes, and NATS between them.
    Cluster {
        database_url: &'a str,
        nats_url: &'a str,
    },
}

/// A node process; killed when dropped.
pub struct TestNode {
    /// The `--node-id`, as welcomes and admin views show it.
    pub id: String,
    dir: PathBuf,
    pub api: String,
    pub ops: String,
    child: Option<Child>,
    pub http: reqwest::Client,
}

static NEXT: AtomicUsize = AtomicUsize::new(0);

/// Below the ephemeral range: a port from `bind(0)` could be taken, before the node binds it,
/// by an outgoing connection of a test running beside (a node then failed to start).
fn free_port() -> u16 {
    anyplay_cloud::ports::free_port().expect("a free loopback port")
}

impl TestNode {
    /// Starts a node named `id` on `backend` with `args` and the environment variables
    /// `env` added, in a fresh directory (its log, mail log and SQLite file), and waits
    /// until it is ready.
    pub async fn start(
        id: &str,
        backend: &Backend<'_>,
        args: &[&str],
        env: &[(String, String)],
    ) -> TestNode {
        let dir = std::env::temp_dir().join(format!(
            "anyplay-it-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("node directory");
        let (api_port, ops_port) = (free_port(), free_port());
        let log = std::fs::File::create(dir.join("node.log")).expect("node log");
        let mut command = Command::new(env!("CARGO_BIN_EXE_anyplay-cloud"));
        command
            .args(["--listen", &format!("127.0.0.1:{api_port}")])
            .args(["--ops-listen", &format!("127.0.0.1:{ops_port}")])
            .args(["--mail-log", &dir.join("mail.log").display().to_string()])
            .args(["--node-id", id]);
        match backend {
            Backend::Sqlite => {
                command.args([
                    "--database-url",
                    &format!("sqlite:{}", dir.join("cloud.db").display()),
                ]);
            }
            Backend::Cluster {
                database_url,
                nats_url,
            } => {
                command
                    .args(["--database-url", database_url])
                    .args(["--nats-url", nats_url]);
            }
        }
        let child = command
            .args(args)
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start anyplay-cloud");
        let mut node = TestNode {
            id: id.to_string(),
            dir,
            api: format!("http://127.0.0.1:{api_port}"),
            ops: format!("http://127.0.0.1:{ops_port}"),
            child: Some(child),
            http: reqwest::Client::new(),
        };
        node.wait_ready().await;
        node
    }

    async fn wait_ready(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Ok(r) = self.http.get(format!("{}/readyz", self.ops)).send().await {
                if r.status() == StatusCode::OK {
                    return;
                }
            }
            if let Some(status) = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                panic!("node {} exited ({status}); log:\n{}", self.id, self.log());
            }
            assert!(
                Instant::now() < deadline,
                "node {} not ready; log:\n{}",
                self.id,
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("node.log")).unwrap_or_default()
    }

    /// The newest code this node's mail log holds for `email`.
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
                "no code for {email} in the mail log of {}",
                self.id
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

    /// The value of a metric (its first sample) in `/metrics`; 0 when absent.
    /// A series' value, 0 when absent: `name` alone takes its first series whatever its
    /// labels, `name{labels}` that one series.
    pub async fn metric(&self, name: &str) -> f64 {
        let (s, text) = self.ops_get("/metrics").await;
        assert_eq!(s, StatusCode::OK, "{text}");
        text.lines()
            .filter(|l| !l.starts_with('#'))
            .find_map(|l| {
                let (key, value) = l.rsplit_once(' ')?;
                let key = if name.contains('{') {
                    key
                } else {
                    key.split('{').next()?
                };
                (key == name).then(|| value.parse().ok()).flatten()
            })
            .unwrap_or(0.0)
    }

    /// The URL of this node's SQLite file (a single node's store).
    pub fn sqlite_url(&self) -> String {
        format!("sqlite:{}", self.dir.join("cloud.db").display())
    }

    /// `GET /v1/admin/connections` (no admin token): the connections this node lists.
    pub async fn connections(&self) -> Vec<Value> {
        let (s, text) = self.ops_get("/v1/admin/connections").await;
        assert_eq!(s, StatusCode::OK, "{text}");
        let view: Value = serde_json::from_str(&text).expect("JSON connections");
        assert_eq!(view["node"], self.id.as_str());
        view["connections"]
            .as_array()
            .expect("a connection list")
            .clone()
    }

    /// Opens the event connection of `player` here and returns it after its welcome.
    pub async fn connect(&self, player: &Player) -> (Events, Value) {
        let mut events = self.try_connect(player).await.expect("websocket connect");
        let welcome = events.next().await;
        assert_eq!(welcome["type"], "welcome", "{welcome}");
        (events, welcome)
    }

    /// Opens the event connection of `player` here, before its welcome; the error when
    /// the upgrade is refused.
    pub async fn try_connect(
        &self,
        player: &Player,
    ) -> Result<Events, tokio_tungstenite::tungstenite::Error> {
        let url = format!("{}/v1/events", self.api.replace("http://", "ws://"));
        let mut req = url.into_client_request().expect("a WebSocket request");
        req.headers_mut().insert(
            "authorization",
            format!("Bearer {}", player.access)
                .parse()
                .expect("a header value"),
        );
        let (ws, _) = tokio_tungstenite::connect_async(req).await?;
        Ok(Events { ws })
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("a running node").id()
    }

    /// Sends `signal` to the process.
    pub fn signal(&self, signal: Signal) {
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(self.pid() as i32), signal)
            .expect("signal the node");
    }

    /// Waits up to `within` for the process to exit.
    pub async fn exit_status(&mut self, within: Duration) -> ExitStatus {
        let child = self.child.as_mut().expect("a node process");
        let deadline = Instant::now() + within;
        loop {
            if let Some(status) = child.try_wait().expect("process status") {
                return status;
            }
            assert!(Instant::now() < deadline, "node {} did not exit", self.id);
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

impl Drop for TestNode {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        if std::thread::panicking() {
            eprintln!(
                "node {} kept its log: {}",
                self.id,
                self.dir.join("node.log").display()
            );
        } else {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}
