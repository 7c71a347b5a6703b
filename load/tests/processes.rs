//! The real binaries as processes: `anyplay-cloud` nodes (on SQLite, or in a cluster on
//! PostgreSQL and NATS) and `anyplay-load` runs.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use sqlx::migrate::MigrateDatabase;

use crate::support::{temp_path, Services};

/// The `anyplay-load` binary of this build.
pub const LOAD: &str = env!("CARGO_BIN_EXE_anyplay-load");

/// The `anyplay-cloud` binary of this build: a workspace member, so it sits beside ours in the
/// target directory (this test runs from `target/release/deps/`).
fn cloud_binary() -> PathBuf {
    let exe = std::env::current_exe().expect("the test executable's path");
    let path = exe
        .parent()
        .and_then(|deps| deps.parent())
        .map(|dir| dir.join("anyplay-cloud"))
        .expect("the test executable sits in target/<profile>/deps");
    assert!(
        path.is_file(),
        "{} is missing: build it first with `cargo build --release --workspace --all-targets` \
         (deploy/test.sh does)",
        path.display()
    );
    path
}

/// Below the ephemeral range: a port from `bind(0)` could be taken, before the node binds it,
/// by an outgoing connection of a test running beside (a node then failed to start).
fn free_port() -> u16 {
    anyplay_cloud::ports::free_port().expect("a free loopback port")
}

/// One `anyplay-cloud` process with a mail log and no rate limits; killed when dropped, its
/// directory kept when the test failed.
pub struct CloudProcess {
    pub child: Child,
    dir: PathBuf,
    mail_log: PathBuf,
    pub api: String,
    pub ops: String,
}

impl CloudProcess {
    /// A node alone on SQLite, with a mail log of its own.
    pub async fn sqlite() -> CloudProcess {
        let dir = temp_path("cloud");
        std::fs::create_dir_all(&dir).expect("the node's directory");
        let database = format!("sqlite:{}", dir.join("cloud.db").display());
        let mail_log = dir.join("mail.log");
        CloudProcess::start(dir, mail_log, &["--database-url", &database]).await
    }

    /// Node `node_id` of cluster `cluster_id` on PostgreSQL `database_url` and NATS
    /// `nats_url`, appending its codes to the cluster's `mail_log`, with `extra` flags.
    async fn cluster(
        node_id: &str,
        cluster_id: &str,
        (database_url, nats_url): (&str, &str),
        mail_log: &Path,
        extra: &[&str],
    ) -> CloudProcess {
        let dir = temp_path(node_id);
        std::fs::create_dir_all(&dir).expect("the node's directory");
        let mut args = vec![
            "--node-id",
            node_id,
            "--cluster-id",
            cluster_id,
            "--database-url",
            database_url,
            "--nats-url",
            nats_url,
        ];
        args.extend_from_slice(extra);
        CloudProcess::start(dir, mail_log.to_path_buf(), &args).await
    }

    async fn start(dir: PathBuf, mail_log: PathBuf, args: &[&str]) -> CloudProcess {
        let (api_port, ops_port) = (free_port(), free_port());
        let log = std::fs::File::create(dir.join("node.log")).expect("the node's log");
        let child = Command::new(cloud_binary())
            .args(["--listen", &format!("127.0.0.1:{api_port}")])
            .args(["--ops-listen", &format!("127.0.0.1:{ops_port}")])
            .args(["--mail-log", &mail_log.display().to_string()])
            .arg("--no-rate-limits")
            .args(args)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("anyplay-cloud starts");
        let scheme = match args.contains(&"--tls-cert") {
            true => "https",
            false => "http",
        };
        let mut node = CloudProcess {
            child,
            dir,
            mail_log,
            api: format!("{scheme}://127.0.0.1:{api_port}"),
            ops: format!("http://127.0.0.1:{ops_port}"),
        };
        node.wait_ready().await;
        node
    }

    async fn wait_ready(&mut self) {
        let http = reqwest::Client::new();
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let ready = http.get(format!("{}/readyz", self.ops)).send().await;
            if ready.is_ok_and(|r| r.status() == 200) {
                return;
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("anyplay-cloud exited ({status}); its log:\n{}", self.log());
            }
            assert!(
                Instant::now() < deadline,
                "anyplay-cloud not ready in 30 s; its log:\n{}",
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    pub fn mail_log(&self) -> PathBuf {
        self.mail_log.clone()
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("node.log")).unwrap_or_default()
    }
}

impl Drop for CloudProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            eprintln!("anyplay-cloud kept its files in {}", self.dir.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// Two nodes on a database and a cluster id of their own, appending codes to one mail log.
pub struct Cluster {
    pub nodes: [CloudProcess; 2],
    pub mail_log: PathBuf,
}

impl Cluster {
    /// The nodes started with `extra` flags beside the cluster's.
    pub async fn start(services: &Services, tag: &str, extra: &[&str]) -> Cluster {
        let name = format!("anyplay_load_{}_{tag}", std::process::id());
        let (server, _) = services
            .postgres_url
            .rsplit_once('/')
            .expect("a database URL with a path");
        let database = format!("{server}/{name}");
        sqlx::Postgres::create_database(&database)
            .await
            .expect("a database for the cluster");
        let mail_log = temp_path(&format!("{tag}-mail.log"));
        let node = |i: usize| {
            let node_id = format!("{tag}-{}-{i}", std::process::id());
            let (database, nats, mail_log, name) = (
                database.clone(),
                services.nats_url.clone(),
                mail_log.clone(),
                name.clone(),
            );
            async move {
                let stores = (database.as_str(), nats.as_str());
                CloudProcess::cluster(&node_id, &name, stores, &mail_log, extra).await
            }
        };
        let nodes = [node(1).await, node(2).await];
        Cluster { nodes, mail_log }
    }

    /// The load's flags for these nodes, codes from the mail log.
    pub fn flags(&self) -> Vec<String> {
        let mut flags = Vec::new();
        for node in &self.nodes {
            flags.extend(["--url".to_string(), node.api.clone()]);
        }
        flags.extend([
            "--mail-log".to_string(),
            self.mail_log.display().to_string(),
        ]);
        flags
    }
}

/// Runs the `anyplay-load` binary with `args`, bounded in time.
pub async fn load(args: &[String]) -> Output {
    let run = tokio::process::Command::new(LOAD)
        .args(args)
        .kill_on_drop(true)
        .output();
    tokio::time::timeout(Duration::from_secs(180), run)
        .await
        .expect("anyplay-load ends within 3 minutes")
        .expect("anyplay-load runs")
}
