//! Node configuration: defaults, then a TOML file, then `ANYPLAY_*` environment
//! variables and flags (a flag wins over its variable, both win over the file).

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Parser;
use serde::Deserialize;

use crate::duration;

/// Where sign-in codes go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MailSinkConfig {
    /// Append one line per code to this file.
    Log(PathBuf),
    /// Keep codes in process (a cloud that runs inside the load harness); nodes
    /// given the same box share it.
    Memory(crate::mail::MemoryMail),
}

/// Per-IP request limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimits {
    pub enabled: bool,
    /// `POST /v1/auth/email` per IP and per email address, per 15 minutes.
    pub auth_email_per_15m: u32,
    /// Every other call, per IP, per minute.
    pub calls_per_minute: u32,
}

/// The friend rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FriendLimits {
    pub max_friends: u32,
    pub max_outgoing: u32,
    /// Requests a young account may send per 24 h.
    pub daily_requests_new: u32,
    /// Accounts younger than this are "young".
    pub new_account_age: Duration,
}

/// Limits on every PostgreSQL session of the node's pool, so that a node cut off in
/// the middle of a transaction cannot hold its row locks for good (zero: no limit).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DbTimeouts {
    /// Longest wait for a lock; the statement then fails.
    pub lock: Duration,
    /// Longest run of one statement.
    pub statement: Duration,
    /// Longest a session may sit in an open transaction without sending anything;
    /// the server then ends the session, which rolls back and frees its locks.
    pub idle_in_transaction: Duration,
}

impl Default for DbTimeouts {
    fn default() -> Self {
        DbTimeouts {
            lock: Duration::from_secs(2),
            statement: Duration::from_secs(5),
            idle_in_transaction: Duration::from_secs(5),
        }
    }
}

/// What a TCP connection to a listener may take, so that slow or silent
/// clients cannot hold sockets for good.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HttpLimits {
    /// Time to send a complete request head, counted from the connection's
    /// opening or the end of its previous response (so also an idle keep-alive).
    pub header_timeout: Duration,
    /// Time without a byte either way, on a connection not upgraded to a WebSocket.
    pub idle_timeout: Duration,
    /// Time a request body has to arrive whole, once its head is in.
    pub body_timeout: Duration,
    /// Open connections on the public listener, event sockets included; more are closed at once.
    pub max_connections: usize,
    /// Open connections one source address (an IPv6 /64) may hold; more from it are closed at
    /// once. `None`: no cap of its own.
    pub max_connections_per_ip: Option<usize>,
}

/// Everything a node needs to run.
#[derive(Debug, Clone)]
pub struct Config {
    pub listen: SocketAddr,
    pub ops_listen: SocketAddr,
    pub database_url: String,
    pub node_id: String,
    pub nats_url: Option<String>,
    /// Part of every NATS subject: clusters that share a NATS never hear each other.
    pub cluster_id: String,
    /// A NATS credentials file, when the server asks for one.
    pub nats_creds: Option<PathBuf>,
    pub mail: MailSinkConfig,
    pub drain_timeout: Duration,
    pub db_connections: u32,
    pub db_timeouts: DbTimeouts,
    pub admin_token: Option<String>,
    /// The public listener's certificate and key: HTTPS and WSS.
    pub tls: Option<crate::tls::TlsFiles>,
    /// `GET /v1/admin/codes` answers the newest sign-in code of an address (load runs
    /// against a deployed cloud); only with an admin token.
    pub test_codes: bool,
    pub access_token_ttl: Duration,
    pub rate_limits: RateLimits,
    pub friend_limits: FriendLimits,
    pub ping_interval: Duration,
    pub outbound_queue: usize,
    /// An event socket's kernel send buffer, in bytes (the kernel doubles it).
    pub event_send_buffer: usize,
    /// Longest a write to an event socket may take before the client counts as a slow consumer.
    pub ws_write_timeout: Duration,
    pub http: HttpLimits,
    /// Forwarders whose connections may open with a PROXY v1 header naming their client.
    pub proxy_protocol_from: Vec<IpAddr>,
    /// Deliveries for other nodes that may wait for NATS; more are shed.
    pub bus_queue: usize,
    pub lease_renew: Duration,
    pub lease_expiry: Duration,
    /// A defect built in on purpose, for `anyplay-chaos selftest`.
    #[cfg(feature = "seeded-defects")]
    pub seeded_defect: Option<crate::defects::SeededDefect>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            listen: ([127, 0, 0, 1], 8080).into(),
            ops_listen: ([127, 0, 0, 1], 9090).into(),
            database_url: "sqlite:anyplay.db".into(),
            node_id: "node-1".into(),
            nats_url: None,
            cluster_id: "default".into(),
            nats_creds: None,
            mail: MailSinkConfig::Log("mail.log".into()),
            drain_timeout: Duration::from_secs(5),
            db_connections: 8,
            db_timeouts: DbTimeouts::default(),
            admin_token: None,
            tls: None,
            test_codes: false,
            access_token_ttl: Duration::from_secs(15 * 60),
            rate_limits: RateLimits {
                enabled: true,
                auth_email_per_15m: 10,
                calls_per_minute: 300,
            },
            friend_limits: FriendLimits {
                max_friends: 500,
                max_outgoing: 100,
                daily_requests_new: 10,
                new_account_age: Duration::from_secs(24 * 3600),
            },
            ping_interval: Duration::from_secs(20),
            outbound_queue: 256,
            event_send_buffer: 8 * 1024,
            ws_write_timeout: Duration::from_secs(5),
            http: HttpLimits {
                header_timeout: Duration::from_secs(20),
                idle_timeout: Duration::from_secs(60),
                body_timeout: Duration::from_secs(10),
                max_connections: 50_000,
                max_connections_per_ip: Some(256),
            },
            proxy_protocol_from: Vec::new(),
            bus_queue: 4096,
            lease_renew: Duration::from_secs(3),
            lease_expiry: Duration::from_secs(10),
            #[cfg(feature = "seeded-defects")]
            seeded_defect: None,
        }
    }
}

/// Problems with the configuration, reported before the node starts.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("config file {path}: {source}")]
    Parse {
        path: PathBuf,
        source: Box<toml::de::Error>,
    },
    #[error("{0}")]
    Invalid(String),
}

/// Reads an optional duration of the TOML file in the one grammar of [`duration`].
fn optional_duration<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
    let text = String::deserialize(d)?;
    duration::parse(&text)
        .map(Some)
        .map_err(serde::de::Error::custom)
}

/// How sign-in codes are delivered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum MailSinkKind {
    /// Append `<time> to=<email> code=<code>` lines to the --mail-log file.
    Log,
    /// Keep codes in memory (only useful when the node runs inside another program).
    Memory,
}

/// The command line of `anyplay-cloud`. Every flag also reads an `ANYPLAY_*`
/// variable, and every flag can be set in the `--config` TOML file under the
/// same name with underscores (`ops_listen = "127.0.0.1:9090"`).
#[derive(Debug, Default, Parser, Deserialize)]
#[command(
    name = "anyplay-cloud",
    version,
    about = "The anyplay game backend node."
)]
#[serde(deny_unknown_fields, default)]
pub struct Args {
    /// TOML file with any of the settings below (flags and variables override it).
    #[arg(long, env = "ANYPLAY_CONFIG")]
    #[serde(skip)]
    pub config: Option<PathBuf>,

    /// Address of the public API and event WebSockets [default: 127.0.0.1:8080].
    #[arg(long, env = "ANYPLAY_LISTEN")]
    pub listen: Option<SocketAddr>,

    /// Address of the operations listener: /healthz, /readyz, /metrics, /v1/admin/* [default: 127.0.0.1:9090].
    #[arg(long, env = "ANYPLAY_OPS_LISTEN")]
    pub ops_listen: Option<SocketAddr>,

    /// The store: `sqlite:PATH` (embedded, WAL) or `postgres://user@host:port/db` (a cluster) [default: sqlite:anyplay.db].
    #[arg(long, env = "ANYPLAY_DATABASE_URL")]
    pub database_url: Option<String>,

    /// This node's name, shown in welcomes and admin views; unique within a cluster [default: node-1].
    #[arg(long, env = "ANYPLAY_NODE_ID")]
    pub node_id: Option<String>,

    /// NATS server that carries events between nodes (needed when several nodes share a PostgreSQL store); a user and password or a token may be in the URL.
    #[arg(long, env = "ANYPLAY_NATS_URL")]
    pub nats_url: Option<String>,

    /// The cluster's id, part of every NATS subject, so that clusters sharing a NATS never hear each other; letters, digits, '-' and '_' [default: default].
    #[arg(long, env = "ANYPLAY_CLUSTER_ID")]
    pub cluster_id: Option<String>,

    /// A NATS credentials file (JWT and seed), for a NATS server that asks for one.
    #[arg(long, env = "ANYPLAY_NATS_CREDS")]
    pub nats_creds: Option<PathBuf>,

    /// Where sign-in codes go [default: log].
    #[arg(long, env = "ANYPLAY_MAIL_SINK", value_enum)]
    pub mail_sink: Option<MailSinkKind>,

    /// File the `log` mail sink appends to, one line per code [default: mail.log].
    #[arg(long, env = "ANYPLAY_MAIL_LOG")]
    pub mail_log: Option<PathBuf>,

    /// Longest a graceful drain (SIGTERM or POST /v1/admin/drain) may take before the node exits [default: 5s].
    #[arg(long, env = "ANYPLAY_DRAIN_TIMEOUT", value_parser = duration::parse)]
    #[serde(deserialize_with = "optional_duration")]
    pub drain_timeout: Option<Duration>,

    /// Store connections this node keeps open [default: 8].
    #[arg(long, env = "ANYPLAY_DB_CONNECTIONS")]
    pub db_connections: Option<u32>,

    /// PostgreSQL: longest a statement waits for a lock (0s: no limit) [default: 2s].
    #[arg(long, env = "ANYPLAY_DB_LOCK_TIMEOUT", value_parser = duration::parse)]
    #[serde(deserialize_with = "optional_duration")]
    pub db_lock_timeout: Option<Duration>,

    /// PostgreSQL: longest run of one statement (0s: no limit) [default: 5s].
    #[arg(long, env = "ANYPLAY_DB_STATEMENT_TIMEOUT", value_parser = duration::parse)]
    #[serde(deserialize_with = "optional_duration")]
    pub db_statement_timeout: Option<Duration>,

    /// PostgreSQL: longest a session may idle inside a transaction before the server ends it (0s: no limit) [default: 5s].
    #[arg(long, env = "ANYPLAY_DB_IDLE_IN_TRANSACTION_TIMEOUT", value_parser = duration::parse)]
    #[serde(deserialize_with = "optional_duration")]
    pub db_idle_in_transaction_timeout: Option<Duration>,

    /// Bearer token required on the /v1/admin/* paths (none: open, for a loopback-only listener).
    #[arg(long, env = "ANYPLAY_ADMIN_TOKEN")]
    pub admin_token: Option<String>,

    /// Serve the public listener over HTTPS and WSS with this certificate chain (PEM); needs --tls-key.
    #[arg(long, env = "ANYPLAY_TLS_CERT", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,

    /// The private key (PEM) of --tls-cert.
    #[arg(long, env = "ANYPLAY_TLS_KEY", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,

    /// Answer GET /v1/admin/codes?email=ADDR with the newest sign-in code of that address, for load runs against a deployed cloud. Never the default; needs --admin-token.
    #[arg(long, env = "ANYPLAY_TEST_CODES", num_args = 0..=1, default_missing_value = "true")]
    pub test_codes: Option<bool>,

    /// Lifetime of access tokens [default: 15m].
    #[arg(long, env = "ANYPLAY_ACCESS_TOKEN_TTL", value_parser = duration::parse)]
    #[serde(deserialize_with = "optional_duration")]
    pub access_token_ttl: Option<Duration>,

    /// Lift every per-IP rate limit (load tests from one address).
    #[arg(long, env = "ANYPLAY_NO_RATE_LIMITS", num_args = 0..=1, default_missing_value = "true")]
    pub no_rate_limits: Option<bool>,

    /// Sign-in emails allowed per IP and per address in 15 minutes [default: 10].
    #[arg(long, env = "ANYPLAY_RATE_AUTH_EMAIL")]
    pub rate_auth_email: Option<u32>,

    /// Other calls allowed per IP per minute [default: 300].
    #[arg(long, env = "ANYPLAY_RATE_CALLS_PER_MINUTE")]
    pub rate_calls_per_minute: Option<u32>,

    /// Most friends an account may have [default: 500].
    #[arg(long, env = "ANYPLAY_MAX_FRIENDS")]
    pub max_friends: Option<u32>,

    /// Most open outgoing friend requests [default: 100].
    #[arg(long, env = "ANYPLAY_MAX_OUTGOING")]
    pub max_outgoing: Option<u32>,

    /// Friend requests an account younger than 24 h may send per day [default: 10].
    #[arg(long, env = "ANYPLAY_DAILY_REQUESTS_NEW")]
    pub daily_requests_new: Option<u32>,

    /// Interval of WebSocket pings; two unanswered close the connection [default: 20s].
    #[arg(long, env = "ANYPLAY_PING_INTERVAL", value_parser = duration::parse)]
    #[serde(deserialize_with = "optional_duration")]
    pub ping_interval: Option<Duration>,

    /// Events a connection may have queued before it is closed as a slow consumer (1013) [default: 256].
    #[arg(long, env = "ANYPLAY_OUTBOUND_QUEUE")]
    pub outbound_queue: Option<usize>,

    /// An event socket's kernel send buffer in bytes, so that a reader that falls behind fills the outbound queue instead of megabytes the kernel would buffer; 0 leaves it to the kernel [default: 8192].
    #[arg(long, env = "ANYPLAY_EVENT_SEND_BUFFER")]
    pub event_send_buffer: Option<usize>,

    /// Longest a write to an event socket may take; the client is then a slow consumer, closed 1013 if it takes that close within as long again, else dropped [default: 5s].
    #[arg(long, env = "ANYPLAY_WS_WRITE_TIMEOUT", value_parser = duration::parse)]
    #[serde(deserialize_with = "optional_duration")]
    pub ws_write_timeout: Option<Duration>,

    /// Time a connection has to send a complete request head, from its opening or its previous response [default: 20s].
    #[arg(long, env = "ANYPLAY_HTTP_HEADER_TIMEOUT", value_parser = duration::parse)]
    #[serde(deserialize_with = "optional_duration")]
    pub http_header_timeout: Option<Duration>,

    /// Time a request body has to arrive whole once its head is in; a body that trickles in answers 408 [default: 10s].
    #[arg(long, env = "ANYPLAY_HTTP_BODY_TIMEOUT", value_parser = duration::parse)]
    #[serde(deserialize_with = "optional_duration")]
    pub http_body_timeout: Option<Duration>,

    /// Time an HTTP connection (not an event socket) may pass without a byte either way [default: 60s].
    #[arg(long, env = "ANYPLAY_HTTP_IDLE_TIMEOUT", value_parser = duration::parse)]
    #[serde(deserialize_with = "optional_duration")]
    pub http_idle_timeout: Option<Duration>,

    /// Open connections the public listener holds, event sockets included; more are closed at once [default: 50000].
    #[arg(long, env = "ANYPLAY_MAX_CONNECTIONS")]
    pub max_connections: Option<usize>,

    /// Open connections one source address (IPv6: one /64) may hold; more from it are closed at once [default: 256; none with --no-rate-limits].
    #[arg(long, env = "ANYPLAY_MAX_CONNECTIONS_PER_IP")]
    pub max_connections_per_ip: Option<usize>,

    /// Addresses of forwarders (a load balancer, a fault proxy) whose connections may begin with a PROXY protocol v1 header; the client it names is then the source for the per-IP limits. Comma-separated [default: none].
    #[arg(long, env = "ANYPLAY_PROXY_PROTOCOL_FROM", value_delimiter = ',')]
    pub proxy_protocol_from: Option<Vec<IpAddr>>,

    /// Events for other nodes that may queue while NATS is slow or away; more are shed (counted) [default: 4096].
    #[arg(long, env = "ANYPLAY_BUS_QUEUE")]
    pub bus_queue: Option<usize>,

    /// Runs with a defect built in on purpose (self-test only; not in the TOML file).
    #[cfg(feature = "seeded-defects")]
    #[arg(long, env = "ANYPLAY_SEEDED_DEFECT", value_enum, hide = true)]
    #[serde(skip)]
    pub seeded_defect: Option<crate::defects::SeededDefect>,
}

macro_rules! overlay {
    ($low:ident, $high:ident; $($field:ident),* $(,)?) => {
        Args {
            config: $high.config.or($low.config),
            #[cfg(feature = "seeded-defects")]
            seeded_defect: $high.seeded_defect.or($low.seeded_defect),
            $($field: $high.$field.or($low.$field)),*
        }
    };
}

impl Args {
    /// `high` wins field by field.
    fn overlay(self, high: Args) -> Args {
        let low = self;
        overlay!(low, high; listen, ops_listen, database_url, node_id, nats_url, cluster_id,
            nats_creds, mail_sink,
            mail_log, drain_timeout, db_connections, db_lock_timeout, db_statement_timeout,
            db_idle_in_transaction_timeout, admin_token, tls_cert, tls_key, test_codes, access_token_ttl,
            no_rate_limits, rate_auth_email, rate_calls_per_minute, max_friends, max_outgoing,
            daily_requests_new, ping_interval, outbound_queue, event_send_buffer, ws_write_timeout,
            http_header_timeout, http_body_timeout, http_idle_timeout, max_connections,
            max_connections_per_ip, proxy_protocol_from, bus_queue)
    }

    fn read_file(path: &Path) -> Result<Args, ConfigError> {
        let text = crate::small_file::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.into(),
            source,
        })?;
        toml::from_str(&text).map_err(|source| ConfigError::Parse {
            path: path.into(),
            source: Box::new(source),
        })
    }

    /// Builds the node's configuration: defaults, then the file, then these arguments.
    pub fn into_config(self) -> Result<Config, ConfigError> {
        let args = match &self.config {
            Some(path) => Args::read_file(path)?.overlay(self),
            None => self,
        };
        let d = Config::default();
        let mail = match args.mail_sink.unwrap_or(MailSinkKind::Log) {
            MailSinkKind::Log => {
                MailSinkConfig::Log(args.mail_log.unwrap_or_else(|| "mail.log".into()))
            }
            MailSinkKind::Memory => MailSinkConfig::Memory(crate::mail::MemoryMail::default()),
        };
        let config = Config {
            listen: args.listen.unwrap_or(d.listen),
            ops_listen: args.ops_listen.unwrap_or(d.ops_listen),
            database_url: args.database_url.unwrap_or(d.database_url),
            node_id: args.node_id.unwrap_or(d.node_id),
            nats_url: args.nats_url,
            cluster_id: args.cluster_id.unwrap_or(d.cluster_id),
            nats_creds: args.nats_creds,
            mail,
            drain_timeout: args.drain_timeout.unwrap_or(d.drain_timeout),
            db_connections: args.db_connections.unwrap_or(d.db_connections),
            db_timeouts: DbTimeouts {
                lock: args.db_lock_timeout.unwrap_or(d.db_timeouts.lock),
                statement: args.db_statement_timeout.unwrap_or(d.db_timeouts.statement),
                idle_in_transaction: args
                    .db_idle_in_transaction_timeout
                    .unwrap_or(d.db_timeouts.idle_in_transaction),
            },
            admin_token: args.admin_token.filter(|t| !t.is_empty()),
            tls: match (args.tls_cert, args.tls_key) {
                (Some(cert), Some(key)) => Some(crate::tls::TlsFiles { cert, key }),
                (None, None) => None,
                // A config file may name one of the two.
                _ => {
                    return Err(ConfigError::Invalid(
                        "tls_cert and tls_key go together".into(),
                    ))
                }
            },
            test_codes: args.test_codes.unwrap_or(false),
            access_token_ttl: args.access_token_ttl.unwrap_or(d.access_token_ttl),
            rate_limits: RateLimits {
                enabled: !args.no_rate_limits.unwrap_or(false),
                auth_email_per_15m: args
                    .rate_auth_email
                    .unwrap_or(d.rate_limits.auth_email_per_15m),
                calls_per_minute: args
                    .rate_calls_per_minute
                    .unwrap_or(d.rate_limits.calls_per_minute),
            },
            friend_limits: FriendLimits {
                max_friends: args.max_friends.unwrap_or(d.friend_limits.max_friends),
                max_outgoing: args.max_outgoing.unwrap_or(d.friend_limits.max_outgoing),
                daily_requests_new: args
                    .daily_requests_new
                    .unwrap_or(d.friend_limits.daily_requests_new),
                new_account_age: d.friend_limits.new_account_age,
            },
            ping_interval: args.ping_interval.unwrap_or(d.ping_interval),
            outbound_queue: args.outbound_queue.unwrap_or(d.outbound_queue),
            event_send_buffer: args.event_send_buffer.unwrap_or(d.event_send_buffer),
            ws_write_timeout: args.ws_write_timeout.unwrap_or(d.ws_write_timeout),
            http: HttpLimits {
                header_timeout: args.http_header_timeout.unwrap_or(d.http.header_timeout),
                idle_timeout: args.http_idle_timeout.unwrap_or(d.http.idle_timeout),
                body_timeout: args.http_body_timeout.unwrap_or(d.http.body_timeout),
                max_connections: args.max_connections.unwrap_or(d.http.max_connections),
                // A load test from one address lifts the per-address limits, this one with them.
                max_connections_per_ip: match args.max_connections_per_ip {
                    Some(n) => Some(n),
                    None if args.no_rate_limits.unwrap_or(false) => None,
                    None => d.http.max_connections_per_ip,
                },
            },
            proxy_protocol_from: args.proxy_protocol_from.unwrap_or_default(),
            bus_queue: args.bus_queue.unwrap_or(d.bus_queue),
            lease_renew: d.lease_renew,
            lease_expiry: d.lease_expiry,
            #[cfg(feature = "seeded-defects")]
            seeded_defect: args.seeded_defect,
        };
        config.validate()?;
        Ok(config)
    }
}

impl Config {
    fn validate(&self) -> Result<(), ConfigError> {
        let bad = |m: &str| Err(ConfigError::Invalid(m.into()));
        if self.db_connections == 0 {
            return bad("db_connections must be at least 1");
        }
        let token = |s: &str| {
            !s.is_empty()
                && s.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        };
        if !token(&self.cluster_id) {
            return bad(
                "cluster_id: only letters, digits, '-' and '_' (it is part of NATS subjects)",
            );
        }
        if self.outbound_queue == 0
            || self.bus_queue == 0
            || self.http.max_connections == 0
            || self.http.max_connections_per_ip == Some(0)
        {
            return bad(
                "outbound_queue, bus_queue, max_connections and max_connections_per_ip must be at least 1",
            );
        }
        if self.test_codes && self.admin_token.is_none() {
            // Anyone who reaches the operations listener could sign in as anyone.
            return bad("test_codes needs an admin_token");
        }
        let limits = &self.rate_limits;
        if limits.enabled && (limits.auth_email_per_15m == 0 || limits.calls_per_minute == 0) {
            // Zero would refuse every call; lifting the limits is its own flag.
            return bad("rate_auth_email and rate_calls_per_minute must be at least 1 (--no-rate-limits lifts them)");
        }
        if [
            self.ws_write_timeout,
            self.http.header_timeout,
            self.http.body_timeout,
            self.http.idle_timeout,
        ]
        .iter()
        .any(Duration::is_zero)
        {
            return bad("ws_write_timeout, http_header_timeout, http_body_timeout and http_idle_timeout must be longer than zero");
        }
        if self.ping_interval.is_zero() || self.access_token_ttl.is_zero() {
            return bad("ping_interval and access_token_ttl must be longer than zero");
        }
        if self.node_id.is_empty() || self.node_id.len() > 64 {
            return bad("node_id must be 1 to 64 characters");
        }
        if self.database_url.starts_with("postgres") && self.nats_url.is_none() {
            tracing::warn!(
                "a PostgreSQL store without --nats-url: events will not reach other nodes"
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_override_the_file() {
        let dir = std::env::temp_dir().join(format!("anyplay-config-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("node.toml");
        std::fs::write(
            &file,
            "node_id = \"from-file\"\ndb_connections = 3\ndrain_timeout = \"2s\"\n",
        )
        .unwrap();
        let args = Args::parse_from([
            "anyplay-cloud",
            "--config",
            file.to_str().unwrap(),
            "--node-id",
            "flag",
        ]);
        let config = args.into_config().unwrap();
        assert_eq!(config.node_id, "flag");
        assert_eq!(config.db_connections, 3);
        assert_eq!(config.drain_timeout, Duration::from_secs(2));
    }

    /// `--rate-auth-email 0` used to start a node that panicked on every sign-in.
    #[test]
    fn a_rate_limit_of_zero_is_refused_unless_the_limits_are_lifted() {
        for flag in ["--rate-auth-email", "--rate-calls-per-minute"] {
            let refused = Args::parse_from(["anyplay-cloud", flag, "0"]).into_config();
            assert!(
                matches!(&refused, Err(ConfigError::Invalid(m)) if m.contains("at least 1")),
                "{flag}: {refused:?}"
            );
            let lifted = Args::parse_from(["anyplay-cloud", flag, "0", "--no-rate-limits"]);
            assert!(lifted.into_config().is_ok(), "{flag} with --no-rate-limits");
        }
    }

    /// Test codes open sign-in as anyone to whoever reaches the operations listener: never
    /// without the admin token. TLS needs both files.
    #[test]
    fn test_codes_need_the_admin_token_and_tls_its_two_files() {
        let config = |flags: &[&str]| {
            let args = ["anyplay-cloud"].iter().chain(flags).copied();
            Args::try_parse_from(args)
                .map_err(|e| e.to_string())?
                .into_config()
                .map_err(|e| e.to_string())
        };
        assert!(config(&["--test-codes"]).is_err_and(|e| e.contains("admin_token")));
        assert!(config(&["--test-codes", "--admin-token", "t"]).is_ok_and(|c| c.test_codes));
        assert!(config(&[]).is_ok_and(|c| !c.test_codes && c.tls.is_none()));
        assert!(config(&["--tls-cert", "c.pem"]).is_err());
        let tls = config(&["--tls-cert", "c.pem", "--tls-key", "k.pem"])
            .unwrap()
            .tls;
        assert_eq!(
            tls.map(|t| (t.cert, t.key)),
            Some(("c.pem".into(), "k.pem".into()))
        );
    }

    #[test]
    fn the_per_address_connection_cap_goes_with_the_per_address_limits() {
        let config = |flags: &[&str]| {
            let args = ["anyplay-cloud"].iter().chain(flags).copied();
            Args::parse_from(args).into_config()
        };
        let cap = |flags: &[&str]| config(flags).unwrap().http.max_connections_per_ip;
        assert_eq!(cap(&[]), Some(256));
        assert_eq!(cap(&["--no-rate-limits"]), None);
        assert_eq!(
            cap(&["--no-rate-limits", "--max-connections-per-ip", "9"]),
            Some(9)
        );
        assert!(config(&["--max-connections-per-ip", "0"]).is_err());
    }

    #[test]
    fn database_timeouts_come_from_flags_and_the_file() {
        let config = Args::parse_from(["anyplay-cloud"]).into_config().unwrap();
        assert_eq!(config.db_timeouts, DbTimeouts::default());
        let dir = std::env::temp_dir().join(format!("anyplay-config-db-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("node.toml");
        std::fs::write(&file, "db_statement_timeout = \"30s\"\n").unwrap();
        let config = Args::parse_from([
            "anyplay-cloud",
            "--config",
            file.to_str().unwrap(),
            "--db-lock-timeout",
            "500ms",
            "--db-idle-in-transaction-timeout",
            "0s",
        ])
        .into_config()
        .unwrap();
        assert_eq!(
            config.db_timeouts,
            DbTimeouts {
                lock: Duration::from_millis(500),
                statement: Duration::from_secs(30),
                idle_in_transaction: Duration::ZERO,
            }
        );
    }

    #[test]
    fn file_durations_follow_the_shared_grammar() {
        let dir = std::env::temp_dir().join(format!("anyplay-config-dur-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("node.toml");
        std::fs::write(&file, "ping_interval = \"1.5s\"\n").unwrap();
        let config = Args::parse_from(["anyplay-cloud", "--config", file.to_str().unwrap()])
            .into_config()
            .unwrap();
        assert_eq!(config.ping_interval, Duration::from_millis(1500));
        std::fs::write(&file, "ping_interval = \"5\"\n").unwrap();
        let err = Args::parse_from(["anyplay-cloud", "--config", file.to_str().unwrap()])
            .into_config()
            .unwrap_err();
        assert!(err.to_string().contains("`5` is not a duration"), "{err}");
        let err = Args::try_parse_from(["anyplay-cloud", "--ping-interval", "5 s"]).unwrap_err();
        assert!(err.to_string().contains("`5 s` is not a duration"), "{err}");
    }

    #[test]
    fn unknown_file_keys_are_refused() {
        let dir = std::env::temp_dir().join(format!("anyplay-config-bad-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("node.toml");
        std::fs::write(&file, "node_idd = \"x\"\n").unwrap();
        let err = Args::parse_from(["anyplay-cloud", "--config", file.to_str().unwrap()])
            .into_config()
            .unwrap_err();
        assert!(err.to_string().contains("node_idd"), "{err}");
    }
}
