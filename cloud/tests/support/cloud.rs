//! The cloud under test in one of two topologies, and its players.
//!
//! `Single` is one node on SQLite. `Pair` is two nodes (`node-a-<db>`, `node-b-<db>`)
//! on a fresh PostgreSQL database `<db>` with NATS between them, from the servers that
//! `ANYPLAY_TEST_POSTGRES_URL` and `ANYPLAY_TEST_NATS_URL` name (deploy/test.sh
//! starts them); without them a pair test fails, it never skips. In a pair,
//! player i makes its HTTP calls on node i % 2 and holds its event socket on
//! node (i + 1) % 2, so every event and every close crosses nodes.
//! [`TestCloud::pair_builder`] makes a pair with a NATS server of the test's own, a
//! database URL of its own per node, or environment variables for one node.

use std::sync::atomic::{AtomicUsize, Ordering};

use futures_util::future::join_all;
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

use super::database::TestDatabase;
use super::node::{Backend, TestNode};
use super::Events;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Topology {
    /// One node on SQLite.
    Single,
    /// Two nodes on one PostgreSQL database, with NATS between them.
    Pair,
}

/// Which node carries each of many concurrent calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Through {
    /// Each caller's own HTTP node.
    Home,
    /// Call i through node i: in a pair, both nodes in turn, whoever calls.
    Alternating,
}

pub struct TestCloud {
    nodes: Vec<TestNode>,
    // Declared after the nodes so that it is dropped after they are killed.
    database: Option<TestDatabase>,
    /// Players signed up so far: the next one's index.
    players: AtomicUsize,
}

pub struct Player {
    pub id: i64,
    pub handle: String,
    pub email: String,
    pub access: String,
    pub refresh: String,
    /// Index of the node that serves this player's HTTP calls.
    pub http_node: usize,
    /// Index of the node that holds this player's event socket.
    pub socket_node: usize,
}

/// How a pair reaches its servers; [`PairBuilder::start`] starts it.
pub struct PairBuilder<'a, F = fn(usize, &str) -> String> {
    nats_url: Option<&'a str>,
    database_url_of: F,
    /// Environment variables added for each node.
    env: [Vec<(String, String)>; 2],
    /// The nodes' ids, when not the pair's own (named after its database).
    ids: Option<[&'a str; 2]>,
}

impl<'a, F: Fn(usize, &str) -> String> PairBuilder<'a, F> {
    /// Both nodes use NATS at `url` (a server the test may stop) instead of the shared one.
    pub fn nats(self, url: &'a str) -> Self {
        PairBuilder {
            nats_url: Some(url),
            ..self
        }
    }

    /// Node `i` reaches the pair's database at `url_of(i, database_url)`.
    pub fn database_url_of<G: Fn(usize, &str) -> String>(self, url_of: G) -> PairBuilder<'a, G> {
        PairBuilder {
            nats_url: self.nats_url,
            database_url_of: url_of,
            env: self.env,
            ids: self.ids,
        }
    }

    /// The nodes take these ids (two pairs on one NATS may then share them).
    pub fn node_ids(self, ids: [&'a str; 2]) -> Self {
        PairBuilder {
            ids: Some(ids),
            ..self
        }
    }

    /// Node `i` runs with the environment variables `vars` added.
    pub fn env(mut self, i: usize, vars: Vec<(String, String)>) -> Self {
        self.env[i].extend(vars);
        self
    }

    /// Starts both nodes with `extra` flags (per-IP limits as `extra` says) on a
    /// fresh database.
    pub async fn start(self, extra: &[&str]) -> TestCloud {
        let postgres = required_env("ANYPLAY_TEST_POSTGRES_URL");
        let nats_url = match self.nats_url {
            Some(url) => url.to_string(),
            None => required_env("ANYPLAY_TEST_NATS_URL"),
        };
        let database = TestDatabase::create(&postgres).await;
        // Tests run in parallel on one NATS server, and NATS subjects are
        // named after nodes: the database name keeps each pair's apart.
        let mut nodes = Vec::new();
        // One after the other: the first runs the migrations.
        for (i, name) in ["node-a", "node-b"].into_iter().enumerate() {
            let database_url = (self.database_url_of)(i, database.url());
            let backend = Backend::Cluster {
                database_url: &database_url,
                nats_url: &nats_url,
            };
            let id = match self.ids {
                Some(ids) => ids[i].to_string(),
                None => format!("{name}-{}", database.name()),
            };
            nodes.push(TestNode::start(&id, &backend, extra, &self.env[i]).await);
        }
        TestCloud {
            nodes,
            database: Some(database),
            players: AtomicUsize::new(0),
        }
    }
}

/// The value of a variable the pair topology cannot run without.
fn required_env(name: &str) -> String {
    match std::env::var(name) {
        Ok(v) if !v.is_empty() => v,
        _ => panic!(
            "{name} is not set: pair tests run two nodes on PostgreSQL and NATS. \
             Run the tests with deploy/test.sh, or in one shell: \
             `source deploy/test-services.sh && cargo test --release -p anyplay-cloud --test integration`"
        ),
    }
}

impl TestCloud {
    /// Starts the cloud with the per-IP limits lifted (every test client comes
    /// from 127.0.0.1) and `extra` flags on every node.
    pub async fn start(topology: Topology, extra: &[&str]) -> TestCloud {
        let mut args = vec!["--no-rate-limits"];
        args.extend_from_slice(extra);
        TestCloud::start_limited(topology, &args).await
    }

    /// Starts the cloud with the default per-IP limits unless `extra` changes them.
    pub async fn start_limited(topology: Topology, extra: &[&str]) -> TestCloud {
        match topology {
            Topology::Single => TestCloud {
                nodes: vec![TestNode::start("node-t", &Backend::Sqlite, extra, &[]).await],
                database: None,
                players: AtomicUsize::new(0),
            },
            Topology::Pair => TestCloud::pair_builder().start(extra).await,
        }
    }

    /// A two-node cluster, for the tests that only a cluster can run.
    pub async fn pair(extra: &[&str]) -> TestCloud {
        TestCloud::start(Topology::Pair, extra).await
    }

    /// A two-node cluster whose surroundings a test bends: a NATS server of its
    /// own, a proxy in one node's way to the database. What it leaves alone comes
    /// from the shared test servers.
    pub fn pair_builder<'a>() -> PairBuilder<'a> {
        PairBuilder {
            nats_url: None,
            database_url_of: |_, url| url.to_string(),
            env: Default::default(),
            ids: None,
        }
    }

    /// A direct connection to the cluster's database, to look at or bend what the
    /// nodes store. Panics on a single node.
    pub async fn sql(&self) -> sqlx::PgConnection {
        use sqlx::Connection;
        sqlx::PgConnection::connect(self.database_url())
            .await
            .expect("a connection to the test database")
    }

    /// The URL of the cluster's database. Panics on a single node.
    pub fn database_url(&self) -> &str {
        self.database.as_ref().expect("a pair has a database").url()
    }

    /// Node `i`, counted round the cloud (`node(1)` of a single node is node 0),
    /// so a test can spread calls over "both" nodes in either topology.
    pub fn node(&self, i: usize) -> &TestNode {
        &self.nodes[i % self.nodes.len()]
    }

    pub fn node_mut(&mut self, i: usize) -> &mut TestNode {
        let n = self.nodes.len();
        &mut self.nodes[i % n]
    }

    /// The node that serves `player`'s HTTP calls.
    pub fn http(&self, player: &Player) -> &TestNode {
        self.node(player.http_node)
    }

    /// The node that holds `player`'s event socket.
    pub fn socket(&self, player: &Player) -> &TestNode {
        self.node(player.socket_node)
    }

    /// The node that carries call `i` of many by `caller`.
    pub fn through(&self, through: Through, i: usize, caller: &Player) -> &TestNode {
        match through {
            Through::Home => self.http(caller),
            Through::Alternating => self.node(i),
        }
    }

    /// An authenticated call by `player`, on its HTTP node.
    pub async fn call(
        &self,
        player: &Player,
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> (StatusCode, Value) {
        self.http(player)
            .call(method, path, Some(&player.access), body)
            .await
    }

    /// Opens `player`'s event connection on its socket node; returns it after its welcome.
    pub async fn connect(&self, player: &Player) -> (Events, Value) {
        self.socket(player).connect(player).await
    }

    /// Signs up a new player with this handle, on the HTTP node it gets.
    pub async fn signup(&self, handle: &str) -> Player {
        let index = self.players.fetch_add(1, Ordering::Relaxed);
        let (http_node, socket_node) = (index % self.nodes.len(), (index + 1) % self.nodes.len());
        let node = self.node(http_node);
        let email = format!("{handle}@example.test").to_lowercase();
        let (s, v) = node
            .call(
                Method::POST,
                "/v1/auth/email",
                None,
                Some(json!({ "email": email })),
            )
            .await;
        assert_eq!(s, StatusCode::ACCEPTED, "{v}");
        let challenge = v["challenge_id"].clone();
        let code = node.code_for(&email).await;
        let (s, v) = node
            .call(
                Method::POST,
                "/v1/auth/code",
                None,
                Some(json!({ "challenge_id": challenge, "code": code })),
            )
            .await;
        assert_eq!(s, StatusCode::OK, "{v}");
        assert_eq!(v["status"], "signup_required", "{v}");
        let (s, v) = node
            .call(
                Method::POST,
                "/v1/auth/signup",
                None,
                Some(json!({ "signup_token": v["signup_token"], "handle": handle })),
            )
            .await;
        assert_eq!(s, StatusCode::CREATED, "{v}");
        let text = |v: &Value| v.as_str().expect("a token").to_string();
        Player {
            id: v["account"]["id"].as_i64().expect("an account id"),
            handle: handle.to_string(),
            email,
            access: text(&v["access_token"]),
            refresh: text(&v["refresh_token"]),
            http_node,
            socket_node,
        }
    }

    /// `n` new players named `<prefix>0`, `<prefix>1`, … signed up at once.
    pub async fn signup_many(&self, prefix: &str, n: usize) -> Vec<Player> {
        let handles: Vec<String> = (0..n).map(|i| format!("{prefix}{i}")).collect();
        join_all(handles.iter().map(|h| self.signup(h))).await
    }

    /// Makes `a` and `b` friends (request by `a`, accept by `b`, each on its HTTP node).
    pub async fn befriend(&self, a: &Player, b: &Player) {
        let (s, v) = self
            .call(
                a,
                Method::POST,
                "/v1/friends/requests",
                Some(json!({"handle": b.handle})),
            )
            .await;
        assert_eq!(s, StatusCode::CREATED, "{v}");
        let (s, v) = self
            .call(
                b,
                Method::POST,
                &format!("/v1/friends/requests/{}/accept", a.id),
                None,
            )
            .await;
        assert_eq!(s, StatusCode::OK, "{v}");
    }
}
