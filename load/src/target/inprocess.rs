//! The cloud inside the harness: one node on SQLite (the default), or `--nodes` on
//! PostgreSQL + NATS in a database of the run's own, all delivering sign-in codes
//! into one memory mail box. Handed to scenarios as a [`Target`] with node control
//! (for the `stop-node` and `kill-node` storms) and a probe of the store pool.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyplay_cloud::config::MailSinkConfig;
use anyplay_cloud::{Config, MemoryMail, Node};
use futures_util::future::BoxFuture;
use futures_util::FutureExt;
use sqlx::migrate::MigrateDatabase;

use crate::error::LoadError;
use crate::settings::Mode;
use crate::target::{CodeSource, NodeControl, NodeEndpoint, PoolProbe, Target};

/// How long a player waits for its sign-in code before the login counts as failed.
const CODE_WAIT: Duration = Duration::from_secs(30);

/// Nodes running in this process; dropped with [`InProcess::shutdown`].
pub struct InProcess {
    nodes: Arc<Nodes>,
    dir: PathBuf,
    /// The PostgreSQL database made for this run, dropped at the end.
    database: Option<String>,
}

/// The nodes, each taken out when it is stopped or killed.
struct Nodes(Mutex<Vec<Option<Node>>>);

impl Nodes {
    fn take(&self, index: usize) -> Option<Node> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get_mut(index)
            .and_then(Option::take)
    }
}

impl InProcess {
    /// Starts the nodes the mode asks for and returns them with their target. Boxed (here, as
    /// every entry point a binary or test awaits) so its future tree is compiled once, in this
    /// crate (results/ci).
    pub fn start<'a>(mode: &'a Mode) -> BoxFuture<'a, Result<(InProcess, Target), LoadError>> {
        Box::pin(async move {
            let (count, database_url, nats_url, default_limits) = match mode {
                Mode::InProcess { default_limits } => (1, None, None, *default_limits),
                Mode::Cluster {
                    nodes,
                    database_url,
                    nats_url,
                    default_limits,
                } => (
                    *nodes,
                    Some(database_url.clone()),
                    Some(nats_url.clone()),
                    *default_limits,
                ),
                Mode::External(_) => {
                    return Err(LoadError::InProcess(
                        "an external run has no in-process cloud".into(),
                    ))
                }
            };
            let run = run_tag();
            let dir = std::env::temp_dir().join(format!("anyplay-load-{run}"));
            std::fs::create_dir_all(&dir).map_err(|e| {
                LoadError::InProcess(format!("cannot create {}: {e}", dir.display()))
            })?;
            let database = match &database_url {
                Some(server) => Some(create_database(server, &run).await?),
                None => None,
            };
            let mail = MemoryMail::default();
            let mut nodes = Vec::with_capacity(count);
            for i in 0..count {
                let mut config = Config {
                    listen: ([127, 0, 0, 1], 0).into(),
                    ops_listen: ([127, 0, 0, 1], 0).into(),
                    node_id: node_id(i, database.is_some().then_some(run.as_str())),
                    mail: MailSinkConfig::Memory(mail.clone()),
                    nats_url: nats_url.clone(),
                    database_url: match &database {
                        Some(url) => url.clone(),
                        None => format!("sqlite:{}", dir.join("cloud.db").display()),
                    },
                    db_connections: 16,
                    ..Config::default()
                };
                config.rate_limits.enabled = default_limits;
                if !default_limits {
                    // Every player calls from this one address, as with --no-rate-limits.
                    config.http.max_connections_per_ip = None;
                }
                let node = Node::start(config)
                    .await
                    .map_err(|e| LoadError::InProcess(format!("in-process node {}: {e}", i + 1)))?;
                nodes.push(node);
            }
            let endpoints = nodes
                .iter()
                .map(|n| NodeEndpoint {
                    api: format!("http://{}", n.public_addr()),
                    ops: Some(format!("http://{}", n.ops_addr())),
                    pid: None,
                })
                .collect();
            let nodes = Arc::new(Nodes(Mutex::new(nodes.into_iter().map(Some).collect())));
            let target = Target {
                nodes: endpoints,
                codes: Arc::new(MemoryCodes(mail)),
                control: Some(nodes.clone()),
                pool: Some(nodes.clone()),
            };
            Ok((
                InProcess {
                    nodes,
                    dir,
                    database,
                },
                target,
            ))
        })
    }

    /// Drains every node still running, drops the run's database and its files. Boxed, as
    /// `start`.
    pub fn shutdown(self) -> BoxFuture<'static, ()> {
        Box::pin(async move {
            let count = self.nodes.0.lock().map(|n| n.len()).unwrap_or(0);
            for i in 0..count {
                if let Some(node) = self.nodes.take(i) {
                    node.drain();
                    let _ = node.wait().await;
                }
            }
            if let Some(url) = &self.database {
                if let Err(e) = sqlx::Postgres::drop_database(url).await {
                    tracing::warn!("could not drop the run's database: {e}");
                }
            }
            let _ = std::fs::remove_dir_all(&self.dir);
        })
    }
}

/// A tag unique to one in-process cloud, naming its files, database and cluster node ids. The
/// counter matters: clouds started in the same microsecond by one process (parallel tests)
/// would otherwise share a SQLite file or collide on `CREATE DATABASE`.
fn run_tag() -> String {
    static STARTED: AtomicU64 = AtomicU64::new(0);
    format!(
        "{}-{}-{}",
        std::process::id(),
        STARTED.fetch_add(1, Ordering::Relaxed),
        crate::measure::facts::unix_micros()
    )
}

/// The id of node `index` (0-based). Cluster nodes address each other on NATS subjects named by
/// node id, so a cluster's ids carry the run's tag: two runs on one NATS server (a test suite, or
/// a run beside `anyplay-chaos`) never deliver events or replacements into each other's nodes.
fn node_id(index: usize, cluster_run: Option<&str>) -> String {
    match cluster_run {
        Some(run) => format!("node-{}-{run}", index + 1),
        None => format!("node-{}", index + 1),
    }
}

/// Makes a fresh database for the run `run` on the server of `server_url` and returns its URL.
async fn create_database(server_url: &str, run: &str) -> Result<String, LoadError> {
    let name = format!("anyplay_load_{}", run.replace('-', "_"));
    let url = match server_url.rsplit_once('/') {
        Some((base, path)) if !base.ends_with('/') && !base.ends_with(':') => {
            // Keep any `?options` of the given URL.
            let query = path
                .split_once('?')
                .map(|(_, q)| format!("?{q}"))
                .unwrap_or_default();
            format!("{base}/{name}{query}")
        }
        _ => format!("{}/{name}", server_url.trim_end_matches('/')),
    };
    sqlx::Postgres::create_database(&url).await.map_err(|e| {
        LoadError::InProcess(format!(
            "cannot create a database for the run on {server_url}: {e}"
        ))
    })?;
    Ok(url)
}

/// Sign-in codes from the nodes' shared memory mail box.
struct MemoryCodes(MemoryMail);

impl CodeSource for MemoryCodes {
    fn code_for<'a>(&'a self, email: &'a str) -> BoxFuture<'a, Result<String, LoadError>> {
        async move {
            tokio::time::timeout(CODE_WAIT, self.0.take_code(email))
                .await
                .map_err(|_| LoadError::NoCode {
                    email: email.to_string(),
                    waited: CODE_WAIT,
                })
        }
        .boxed()
    }
}

impl NodeControl for Nodes {
    fn stop(&self, node: usize) -> BoxFuture<'_, Result<(), LoadError>> {
        async move {
            let node = self
                .take(node)
                .ok_or_else(|| LoadError::InProcess(format!("node {} is not running", node + 1)))?;
            node.drain();
            node.wait()
                .await
                .map_err(|e| LoadError::InProcess(format!("the node failed while draining: {e}")))
        }
        .boxed()
    }

    fn kill(&self, node: usize) -> BoxFuture<'_, Result<(), LoadError>> {
        async move {
            let node = self
                .take(node)
                .ok_or_else(|| LoadError::InProcess(format!("node {} is not running", node + 1)))?;
            node.abort();
            Ok(())
        }
        .boxed()
    }
}

impl PoolProbe for Nodes {
    fn busy(&self) -> u32 {
        let nodes = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        nodes.iter().flatten().map(Node::pool_busy).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_node_ids_carry_the_run_and_stay_valid() {
        assert_eq!(node_id(0, None), "node-1");
        let id = node_id(1, Some(&run_tag()));
        assert!(
            id.starts_with(&format!("node-2-{}-", std::process::id())),
            "{id}"
        );
        assert!(id.len() <= 64, "the cloud's limit on node ids");
        assert_ne!(run_tag(), run_tag(), "two clouds of one process");
    }

    #[tokio::test]
    async fn one_sqlite_node_serves_and_gives_codes() {
        let (cloud, target) = InProcess::start(&Mode::InProcess {
            default_limits: false,
        })
        .await
        .unwrap();
        assert_eq!(target.nodes.len(), 1);
        let http = reqwest::Client::new();
        let ready = http
            .get(format!("{}/readyz", target.nodes[0].ops.as_ref().unwrap()))
            .send()
            .await
            .unwrap();
        assert_eq!(ready.status(), 200);
        let sent = http
            .post(format!("{}/v1/auth/email", target.nodes[0].api))
            .json(&serde_json::json!({"email": "a@b.c"}))
            .send()
            .await
            .unwrap();
        assert_eq!(sent.status(), 202);
        let code = target.codes.code_for("a@b.c").await.unwrap();
        assert_eq!(code.len(), 6);
        cloud.shutdown().await;
    }
}
