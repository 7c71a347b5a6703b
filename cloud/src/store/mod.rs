//! The store: every durable fact of the cloud, behind one interface.
//!
//! Two backends share the SQL text through sqlx's `Any` driver (both accept `$N`
//! parameters, `RETURNING` and `ON CONFLICT`); what differs lives in [`Backend`]:
//!
//! * **SQLite** (the embedded default): WAL mode, a pool of readers, and one writer
//!   connection behind a FIFO semaphore, so writers are served first come, first
//!   served and a burst cannot starve an early one. SQLite has one writer anyway;
//!   the queue makes the order explicit instead of leaving it to busy-retries.
//! * **PostgreSQL** (a cluster of nodes): one pool; rules that span rows (friend
//!   limits, party size) take row locks in a fixed order inside the transaction.
//!
//! A handler never asks the pool for a second connection while it holds a
//! transaction: everything inside a write goes through its [`WriteTx`].
//!
//! The methods are grouped by topic in the sibling modules.

mod accounts;
mod auth;
mod cards;
mod clock;
mod connection_writes;
mod connections;
mod friend_writes;
mod friends;
mod json_list;
mod limits;
mod lookups;
mod presence;
mod retention;
mod sessions;
mod write_queue;

pub use accounts::{Account, Privacy};
pub use auth::{ChallengeIssue, ChallengeKey, CodeCheck, IssuedTokens, Signup};
pub use cards::{Card, Relation, Trophies, True};
pub use clock::{cluster_now_ms, cluster_now_us, now_ms, now_us};
pub use connections::{ConnectionRecord, Reasserted, Registered};
pub use friends::{
    BlockOutcome, Friend, FriendError, FriendsOverview, LimitKind, PendingRequest, RequestOutcome,
};
pub use presence::PresenceState;
pub use sessions::{Departure, MaxMembers, Session, SessionError};

use std::sync::Arc;
use std::time::{Duration, Instant};

use sqlx::any::{AnyConnectOptions, AnyPoolOptions};
use sqlx::{Any, AnyPool, Executor, Transaction};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::config::DbTimeouts;
use crate::metrics::PoolMetrics;
use connection_writes::ConnectionWrites;
use friend_writes::FriendWrites;
use lookups::Lookup;

/// What can go wrong in the store, as the handlers need to tell it apart.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("database error: {0}")]
    Database(#[from] sqlx::Error),
    #[error("migration failed: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    #[error("unsupported database url {0:?} (expected sqlite:... or postgres://...)")]
    UnsupportedUrl(String),
    #[error("a batching task of the store stopped")]
    TaskStopped,
    /// The error of a statement that answered several callers at once.
    #[error("{0}")]
    Shared(Arc<StoreError>),
}

impl StoreError {
    /// True when the write lost a race on a unique key.
    pub fn is_unique_violation(&self) -> bool {
        match self {
            StoreError::Database(sqlx::Error::Database(e)) => e.is_unique_violation(),
            _ => false,
        }
    }
}

pub type StoreResult<T> = Result<T, StoreError>;

/// Which database is behind the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

impl Backend {
    /// Row-lock suffix for a `SELECT` inside a write transaction. SQLite's single
    /// writer already serialises writes, and it has no `FOR UPDATE`.
    pub fn for_update(self) -> &'static str {
        match self {
            Backend::Sqlite => "",
            Backend::Postgres => " FOR UPDATE",
        }
    }

    /// Row-lock suffix that keeps the rows read from the table named `alias` from being
    /// deleted until the statement's transaction ends (a delete waits, or one that came
    /// first hides them). SQLite's single writer already does.
    pub fn for_share_of(self, alias: &str) -> String {
        match self {
            Backend::Sqlite => String::new(),
            Backend::Postgres => format!(" FOR SHARE OF {alias}"),
        }
    }
}

/// The store handle; cheap to clone.
#[derive(Clone)]
pub struct Store {
    inner: Arc<Inner>,
}

struct Inner {
    backend: Backend,
    /// Reads (and, on PostgreSQL, writes too).
    pool: AnyPool,
    /// Where writes go.
    writer: Writer,
    /// Where the node's lease upkeep writes: on PostgreSQL a connection of its own, so
    /// that a pool busy with a storm's requests cannot delay a renewal past the lease
    /// (the fence would then close every connection of the node). SQLite: the writer.
    upkeep: Writer,
    /// Registrations and removals of event connections, many rows to a statement.
    connection_writes: ConnectionWrites,
    /// Friend requests and accepts, many to a transaction.
    friend_writes: FriendWrites,
    /// The account of each (hashed) access token asked at the same moment.
    token_accounts: Lookup<String, i64>,
    /// The presence and friends of each account announced at the same moment.
    presence_and_friends: Lookup<i64, (PresenceState, Vec<i64>)>,
    metrics: PoolMetrics,
}

/// A write transaction. Dropping it without [`WriteTx::commit`] rolls back.
pub struct WriteTx {
    pub(crate) tx: Transaction<'static, Any>,
    // Declared after `tx` so the queue place is released only once the
    // connection went back to its pool.
    _turn: Option<OwnedSemaphorePermit>,
    backend: Backend,
}

impl WriteTx {
    pub async fn commit(self) -> StoreResult<()> {
        self.tx.commit().await?;
        Ok(())
    }

    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// Waits until no other transaction holds `key`, then holds it until this one
    /// ends. For rules over rows that may not exist yet, which a row lock cannot
    /// cover. SQLite's single writer serialises every write already.
    pub(crate) async fn serialize_on(&mut self, key: Serial<'_>) -> StoreResult<()> {
        if self.backend == Backend::Postgres {
            let (class, key) = key.parts();
            // In FROM: the function returns `void`, which the `Any` driver cannot decode.
            sqlx::query("SELECT 1 FROM pg_advisory_xact_lock($1, hashtext($2))")
                .bind(class)
                .bind(key)
                .execute(&mut *self.tx)
                .await?;
        }
        Ok(())
    }
}

/// What [`WriteTx::serialize_on`] can serialise on. Transactions that take more than
/// one take them in the order of this enum, so they cannot deadlock.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Serial<'a> {
    /// The sign-in challenges from one IP address.
    ChallengesFromIp(&'a str),
    /// The sign-in challenges to one email address.
    ChallengesToEmail(&'a str),
    /// One account's tokens: a refresh and a logout of it take turns.
    Tokens(i64),
}

impl Serial<'_> {
    /// PostgreSQL's two-key advisory lock: a class, and the key as text.
    fn parts(self) -> (i32, String) {
        match self {
            Serial::ChallengesFromIp(ip) => (2, ip.to_string()),
            Serial::ChallengesToEmail(email) => (3, email.to_string()),
            Serial::Tokens(account) => (4, account.to_string()),
        }
    }
}

/// Where writes go: the pool, and on SQLite (one writer) the FIFO queue in which
/// writers wait their turn, first come, first served.
#[derive(Clone)]
struct Writer {
    pool: AnyPool,
    queue: Option<Arc<Semaphore>>,
}

impl Writer {
    /// Waits for the right to write; hold what it returns while writing.
    async fn turn(&self) -> Option<OwnedSemaphorePermit> {
        let queue = self.queue.clone()?;
        Some(queue.acquire_owned().await.expect("queue never closed"))
    }
}

/// Settings the store needs from the node's configuration.
#[derive(Debug, Clone)]
pub struct StoreOptions {
    pub url: String,
    pub connections: u32,
    pub acquire_timeout: Duration,
    /// PostgreSQL only (SQLite has its busy timeout).
    pub timeouts: DbTimeouts,
}

impl Store {
    /// Connects, runs the migrations of the backend, and returns the store.
    pub async fn open(opts: &StoreOptions, metrics: PoolMetrics) -> StoreResult<Store> {
        sqlx::any::install_default_drivers();
        let backend = if opts.url.starts_with("sqlite:") {
            Backend::Sqlite
        } else if opts.url.starts_with("postgres://") || opts.url.starts_with("postgresql://") {
            Backend::Postgres
        } else {
            return Err(StoreError::UnsupportedUrl(opts.url.clone()));
        };
        let connect: AnyConnectOptions = sqlite_create_if_missing(&opts.url).parse()?;
        let base = AnyPoolOptions::new()
            .acquire_timeout(opts.acquire_timeout)
            .min_connections(1);
        let (pool, writer, upkeep) = match backend {
            Backend::Sqlite => {
                let writer = sqlite_pragmas(base.clone().max_connections(1))
                    .connect_with(connect.clone())
                    .await?;
                // Migrate through the writer before any reader opens the file.
                sqlx::migrate!("migrations/sqlite").run(&writer).await?;
                let readers = sqlite_pragmas(base.max_connections(opts.connections.max(1)))
                    .connect_with(connect)
                    .await?;
                let writer = Writer {
                    pool: writer,
                    queue: Some(Arc::new(Semaphore::new(1))),
                };
                (readers, writer.clone(), writer)
            }
            Backend::Postgres => {
                let pool = postgres_session(base.clone(), opts.timeouts)
                    .max_connections(opts.connections.max(2))
                    .connect_with(connect.clone())
                    .await?;
                sqlx::migrate!("migrations/postgres").run(&pool).await?;
                #[cfg(feature = "seeded-defects")]
                if crate::defects::active(crate::defects::SeededDefect::MigrationRenamesColumn) {
                    // Whichever node of this build starts first renames it; the others find
                    // it renamed.
                    let renamed =
                        sqlx::query("ALTER TABLE accounts RENAME COLUMN avatar TO avatar_url")
                            .execute(&pool)
                            .await;
                    tracing::warn!(?renamed, "seeded defect: renamed accounts.avatar");
                }
                let upkeep = Writer {
                    pool: postgres_session(base, opts.timeouts)
                        .max_connections(1)
                        .connect_with(connect)
                        .await?,
                    queue: None,
                };
                let writer = Writer {
                    pool: pool.clone(),
                    queue: None,
                };
                (pool, writer, upkeep)
            }
        };
        let store = Inner {
            backend,
            connection_writes: ConnectionWrites::start(writer.clone(), backend, metrics.clone()),
            friend_writes: FriendWrites::start(
                writer.clone(),
                pool.clone(),
                backend,
                metrics.clone(),
            ),
            token_accounts: {
                let pool = pool.clone();
                Lookup::start(move |hashes| auth::token_accounts(pool.clone(), backend, hashes))
            },
            presence_and_friends: {
                let pool = pool.clone();
                Lookup::start(move |accounts| {
                    presence::presence_and_friends_of(pool.clone(), accounts)
                })
            },
            pool,
            writer,
            upkeep,
            metrics,
        };
        store.metrics.size.set(opts.connections as i64);
        let store = Store {
            inner: Arc::new(store),
        };
        store.sync_cluster_clock(3).await?;
        Ok(store)
    }

    /// Sets the cluster's clock ([`cluster_now_us`]) by the store's own; on SQLite, one
    /// node alone, its own clock is the cluster's. The node does so at its start and
    /// before each renewal of its leases. A reading that came back too slowly to tell the
    /// time by is left (the clock keeps the last one), and asked again up to `tries` times.
    pub async fn sync_cluster_clock(&self, tries: u32) -> StoreResult<()> {
        if self.backend() == Backend::Sqlite {
            return Ok(());
        }
        for _ in 0..tries {
            let before_us = now_us();
            let store_us: i64 = sqlx::query_scalar(
                "SELECT CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000000 AS BIGINT)",
            )
            .fetch_one(&self.inner.upkeep.pool)
            .await?;
            if clock::observed(before_us, store_us, now_us()) {
                break;
            }
        }
        Ok(())
    }

    pub fn backend(&self) -> Backend {
        self.inner.backend
    }

    /// The pool for reads outside a transaction.
    pub(crate) fn reader(&self) -> &AnyPool {
        &self.inner.pool
    }

    /// Starts a write transaction; on SQLite this waits its turn in the writer queue.
    pub async fn begin(&self) -> StoreResult<WriteTx> {
        self.begin_on(&self.inner.writer).await
    }

    /// Starts a write transaction of the lease upkeep (see [`Inner::upkeep`]).
    pub(crate) async fn begin_upkeep(&self) -> StoreResult<WriteTx> {
        self.begin_on(&self.inner.upkeep).await
    }

    /// Where the lease upkeep reads: its own connection on PostgreSQL, the readers on SQLite.
    pub(crate) fn upkeep_reader(&self) -> &AnyPool {
        match self.inner.backend {
            Backend::Sqlite => self.reader(),
            Backend::Postgres => &self.inner.upkeep.pool,
        }
    }

    async fn begin_on(&self, writer: &Writer) -> StoreResult<WriteTx> {
        self.timed_acquire(async {
            let turn = writer.turn().await;
            Ok(WriteTx {
                tx: writer.pool.begin().await?,
                _turn: turn,
                backend: self.inner.backend,
            })
        })
        .await
    }

    /// Counts a wait for the right to write in the pool metrics.
    async fn timed_acquire<T>(
        &self,
        acquire: impl std::future::Future<Output = StoreResult<T>>,
    ) -> StoreResult<T> {
        let started = Instant::now();
        let metrics = &self.inner.metrics;
        let waiting = crate::metrics::Held::new(&metrics.waiting);
        let result = acquire.await;
        drop(waiting);
        metrics
            .acquire_seconds
            .observe(started.elapsed().as_secs_f64());
        result
    }

    /// A cheap round trip, for readiness.
    pub async fn ping(&self) -> StoreResult<()> {
        self.inner.pool.execute("SELECT 1").await?;
        Ok(())
    }

    /// Connections in use right now, for `/metrics`.
    pub fn busy(&self) -> u32 {
        let p = &self.inner.pool;
        let readers = p.size() - p.num_idle() as u32;
        let w = &self.inner.writer;
        let writer = match w.queue {
            Some(_) => w.pool.size() - w.pool.num_idle() as u32,
            // The same pool as the readers'.
            None => 0,
        };
        readers + writer
    }

    pub fn metrics(&self) -> &PoolMetrics {
        &self.inner.metrics
    }

    pub async fn close(&self) {
        self.inner.upkeep.pool.close().await;
        self.inner.writer.pool.close().await;
        self.inner.pool.close().await;
    }
}

/// `sqlite:path` would fail on a missing file; a node creates its database.
fn sqlite_create_if_missing(url: &str) -> String {
    if url.starts_with("sqlite:") && !url.contains("mode=") && !url.contains(":memory:") {
        let sep = if url.contains('?') { '&' } else { '?' };
        format!("{url}{sep}mode=rwc")
    } else {
        url.to_string()
    }
}

fn sqlite_pragmas(opts: AnyPoolOptions) -> AnyPoolOptions {
    // A connection to a local file does not go stale the way a network one can:
    // skip the ping on every acquire, a round trip to SQLite's worker thread
    // that the single writer would pay on every write.
    opts.test_before_acquire(false)
        .after_connect(|conn, _meta| {
            Box::pin(async move {
                conn.execute(
                    "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; \
                 PRAGMA busy_timeout = 5000; PRAGMA foreign_keys = ON;",
                )
                .await?;
                Ok(())
            })
        })
}

/// Every pooled PostgreSQL session gets the node's timeouts, so that no session of
/// a node that went silent mid-transaction keeps its locks for good.
fn postgres_session(opts: AnyPoolOptions, timeouts: DbTimeouts) -> AnyPoolOptions {
    let settings = session_settings(timeouts);
    opts.after_connect(move |conn, _meta| {
        let settings = settings.clone();
        Box::pin(async move {
            conn.execute(settings.as_str()).await?;
            Ok(())
        })
    })
}

/// The `SET` statements of [`postgres_session`]; PostgreSQL reads a bare number as
/// milliseconds, and 0 as no limit.
fn session_settings(t: DbTimeouts) -> String {
    format!(
        "SET lock_timeout = {}; SET statement_timeout = {}; \
         SET idle_in_transaction_session_timeout = {};",
        t.lock.as_millis(),
        t.statement.as_millis(),
        t.idle_in_transaction.as_millis()
    )
}

/// RFC 3339 in UTC, as the API shows times.
pub fn rfc3339(ms: i64) -> String {
    let t = time::OffsetDateTime::from_unix_timestamp_nanos(ms as i128 * 1_000_000)
        .unwrap_or(time::OffsetDateTime::UNIX_EPOCH);
    t.format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}

/// A statement as this build writes it: as given, unless a seeded defect renamed a column.
fn sql(text: &str) -> std::borrow::Cow<'_, str> {
    #[cfg(feature = "seeded-defects")]
    return crate::defects::renamed_column(text);
    #[cfg(not(feature = "seeded-defects"))]
    text.into()
}

/// `$1, $2, ...` for an `IN (...)` list starting at parameter `first`.
pub(crate) fn placeholders(first: usize, n: usize) -> String {
    (first..first + n)
        .map(|i| format!("${i}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `($1, $2), ($3, $4), ...`: `rows` rows of `width` parameters, for a multi-row `VALUES`.
pub(crate) fn tuples(rows: usize, width: usize) -> String {
    (0..rows)
        .map(|row| format!("({})", placeholders(row * width + 1, width)))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_count_from_first() {
        assert_eq!(placeholders(2, 3), "$2, $3, $4");
        assert_eq!(tuples(2, 2), "($1, $2), ($3, $4)");
    }

    #[test]
    fn sessions_get_the_timeouts_in_milliseconds() {
        assert_eq!(
            session_settings(DbTimeouts::default()),
            "SET lock_timeout = 2000; SET statement_timeout = 5000; \
             SET idle_in_transaction_session_timeout = 5000;"
        );
    }

    #[test]
    fn rfc3339_is_utc() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
    }

    #[test]
    fn sqlite_urls_create_the_file() {
        assert_eq!(
            sqlite_create_if_missing("sqlite:a.db"),
            "sqlite:a.db?mode=rwc"
        );
        assert_eq!(
            sqlite_create_if_missing("sqlite::memory:"),
            "sqlite::memory:"
        );
    }
}
