//! Connection records, written many rows to a statement.
//!
//! A storm breaks thousands of event connections at once: thousands of record
//! removals, then thousands of registrations, each one statement; that queue, not
//! SQLite, bounded how fast a storm came back. Here the calls wait in a
//! [`WriteQueue`], and each batch is written as consecutive registrations in one
//! multi-row upsert and consecutive removals in one multi-row delete. Each caller gets
//! the answer its call alone would have had. A registration checks its access token in
//! the same statement: a welcome's re-read of the token and its record were two round
//! trips of every reconnect (`anyplay_welcome_step_seconds`, results/storm).

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use sqlx::{AnyPool, Row};
use tokio::sync::oneshot;

use super::connections::{ConnectionRecord, Registered};
use super::write_queue::{self, WriteQueue};
use super::{cluster_now_ms, Backend, StoreError, StoreResult, Writer};
use crate::metrics::PoolMetrics;

/// The most calls one statement takes. SQLite finds each bound parameter by a scan of
/// the statement's parameters, so binding grows with their square: 100 rows (500
/// parameters) cost a fraction of what 500 rows did (found with `perf` in a storm).
const MAX_ROWS: usize = 100;

/// The most calls one writer turn takes, so writers queued behind it wait a bounded time.
const MAX_BATCH: usize = 4 * MAX_ROWS;

/// The handle the store keeps.
pub(super) struct ConnectionWrites {
    queue: WriteQueue<Call>,
}

enum Call {
    Register {
        account_id: i64,
        /// The hash of the access token the connection opened with.
        token_hash: String,
        connection_id: String,
        node: String,
        lease: Duration,
        answer: oneshot::Sender<StoreResult<Option<Registered>>>,
    },
    Remove {
        account_id: i64,
        connection_id: String,
        answer: oneshot::Sender<StoreResult<bool>>,
    },
}

impl Call {
    fn account_id(&self) -> i64 {
        match self {
            Call::Register { account_id, .. } | Call::Remove { account_id, .. } => *account_id,
        }
    }

    fn is_register(&self) -> bool {
        matches!(self, Call::Register { .. })
    }
}

impl write_queue::Call for Call {
    fn abandoned(&self) -> bool {
        match self {
            Call::Register { answer, .. } => answer.is_closed(),
            Call::Remove { answer, .. } => answer.is_closed(),
        }
    }
}

impl ConnectionWrites {
    /// Starts the writing task.
    pub(super) fn start(writer: Writer, backend: Backend, metrics: PoolMetrics) -> Self {
        let pool = writer.pool.clone();
        let queue = WriteQueue::start(writer, metrics, MAX_BATCH, move |calls| {
            let pool = pool.clone();
            async move {
                for group in groups(calls) {
                    write_group(&pool, backend, group).await;
                }
            }
        });
        ConnectionWrites { queue }
    }

    pub(super) async fn register(
        &self,
        account_id: i64,
        token_hash: String,
        connection_id: &str,
        node: &str,
        lease: Duration,
    ) -> StoreResult<Option<Registered>> {
        self.queue
            .ask(|answer| Call::Register {
                account_id,
                token_hash,
                connection_id: connection_id.to_string(),
                node: node.to_string(),
                lease,
                answer,
            })
            .await?
    }

    pub(super) async fn remove(&self, account_id: i64, connection_id: &str) -> StoreResult<bool> {
        self.queue
            .ask(|answer| Call::Remove {
                account_id,
                connection_id: connection_id.to_string(),
                answer,
            })
            .await?
    }
}

/// Splits calls, in order, into groups one statement can write: calls of one kind in
/// a row, with no account twice (a later call on it must see the earlier one done).
fn groups(calls: Vec<Call>) -> Vec<Vec<Call>> {
    let mut groups: Vec<Vec<Call>> = Vec::new();
    let mut accounts = HashSet::new();
    for call in calls {
        let fits = groups.last().is_some_and(|g| {
            g.len() < MAX_ROWS
                && g[0].is_register() == call.is_register()
                && !accounts.contains(&call.account_id())
        });
        if !fits {
            accounts.clear();
            groups.push(Vec::new());
        }
        accounts.insert(call.account_id());
        groups.last_mut().expect("pushed above").push(call);
    }
    groups
}

/// Writes a group in one statement and answers its callers. When the statement fails,
/// each call is tried alone, so only a call that cannot be written gets an error.
async fn write_group(pool: &AnyPool, backend: Backend, mut group: Vec<Call>) {
    match statement(pool, backend, &group).await {
        Ok(outcomes) => answer(group, outcomes),
        Err(e) if group.len() == 1 => fail(group.remove(0), e),
        Err(_) => {
            for call in group {
                let alone = [call];
                match statement(pool, backend, &alone).await {
                    Ok(outcomes) => answer(alone.into(), outcomes),
                    Err(e) => {
                        let [call] = alone;
                        fail(call, e)
                    }
                }
            }
        }
    }
}

async fn statement(pool: &AnyPool, backend: Backend, group: &[Call]) -> StoreResult<Outcomes> {
    if group[0].is_register() {
        register_rows(pool, backend, group)
            .await
            .map(Outcomes::Registered)
    } else {
        remove_rows(pool, group).await.map(Outcomes::Removed)
    }
}

/// What a group's statement did, by connection id.
enum Outcomes {
    Registered(HashMap<String, Registered>),
    Removed(HashSet<String>),
}

/// Gives each caller its own result. A send fails only when the caller stopped
/// waiting; nobody is left to tell.
fn answer(group: Vec<Call>, outcomes: Outcomes) {
    match outcomes {
        Outcomes::Registered(mut registered) => {
            for call in group {
                if let Call::Register {
                    connection_id,
                    answer,
                    ..
                } = call
                {
                    // The upsert returns a row for every call whose token was valid.
                    let _ = answer.send(Ok(registered.remove(&connection_id)));
                }
            }
        }
        Outcomes::Removed(removed) => {
            for call in group {
                if let Call::Remove {
                    connection_id,
                    answer,
                    ..
                } = call
                {
                    let _ = answer.send(Ok(removed.contains(&connection_id)));
                }
            }
        }
    }
}

/// Makes each call's connection its account's one connection, if the call's access token
/// is still a valid token of that account (revoked by a logout or expired, the call writes
/// nothing and gets no row back). The upsert keeps the record it replaces in the `prev_*`
/// columns and returns them. The primary key serialises registrations of one account
/// across nodes (on PostgreSQL a second one waits for the first to commit, then updates
/// the row the first wrote), so two at once never both see no previous connection; the
/// token rows are held against a logout's delete until the records are in, so that logout
/// finds them. Rows go in account order, so two nodes' statements lock shared rows in the
/// same order and cannot deadlock.
async fn register_rows(
    pool: &AnyPool,
    backend: Backend,
    group: &[Call],
) -> StoreResult<HashMap<String, Registered>> {
    let now = cluster_now_ms();
    let mut rows: Vec<(i64, &str, &str, i64, &str)> = group
        .iter()
        .filter_map(|call| match call {
            Call::Register {
                account_id,
                token_hash,
                connection_id,
                node,
                lease,
                ..
            } => Some((
                *account_id,
                connection_id.as_str(),
                node.as_str(),
                now + lease.as_millis() as i64,
                token_hash.as_str(),
            )),
            Call::Remove { .. } => None,
        })
        .collect();
    rows.sort_unstable_by_key(|r| r.0);
    let values = super::tuples(rows.len(), 6);
    let now_at = rows.len() * 6 + 1;
    // `VALUES` names its columns column1, column2 … on both databases; the `WHERE` also
    // keeps SQLite from reading `ON CONFLICT` as the join's `ON`.
    let sql = format!(
        "INSERT INTO connections (account_id, connection_id, node, since, lease_until) \
         SELECT v.column1, v.column2, v.column3, v.column4, v.column5 \
         FROM (VALUES {values}) AS v \
         JOIN access_tokens t ON t.token_hash = v.column6 AND t.account_id = v.column1 \
         WHERE t.expires_at > ${now_at} \
         ORDER BY v.column1{lock} \
         ON CONFLICT (account_id) DO UPDATE SET \
         prev_connection_id = connections.connection_id, \
         prev_node = connections.node, \
         prev_lease_until = connections.lease_until, \
         connection_id = excluded.connection_id, node = excluded.node, \
         since = excluded.since, lease_until = excluded.lease_until \
         RETURNING connection_id, prev_connection_id, prev_node, prev_lease_until",
        lock = backend.for_share_of("t"),
    );
    let mut query = sqlx::query(&sql).persistent(rows.len() == 1);
    for (account_id, connection_id, node, lease_until, token_hash) in rows {
        query = query
            .bind(account_id)
            .bind(connection_id)
            .bind(node)
            .bind(now)
            .bind(lease_until)
            .bind(token_hash);
    }
    query = query.bind(super::now_ms());
    let mut registered = HashMap::with_capacity(group.len());
    for row in query.fetch_all(pool).await? {
        let previous = match row.try_get::<Option<i64>, _>("prev_lease_until")? {
            Some(lease_until) if lease_until >= now => Some(ConnectionRecord {
                connection_id: row.try_get("prev_connection_id")?,
                node: row.try_get("prev_node")?,
                lease_until_ms: lease_until,
            }),
            _ => None,
        };
        registered.insert(row.try_get("connection_id")?, Registered { previous });
    }
    Ok(registered)
}

/// Removes each call's record if it is still that connection's (a replaced one's
/// record belongs to its successor), and returns the connection ids removed. In
/// account order, as registrations are.
async fn remove_rows(pool: &AnyPool, group: &[Call]) -> StoreResult<HashSet<String>> {
    let mut rows: Vec<(i64, &str)> = group
        .iter()
        .filter_map(|call| match call {
            Call::Remove {
                account_id,
                connection_id,
                ..
            } => Some((*account_id, connection_id.as_str())),
            Call::Register { .. } => None,
        })
        .collect();
    rows.sort_unstable_by_key(|r| r.0);
    let values = super::tuples(rows.len(), 2);
    let sql = format!(
        "DELETE FROM connections WHERE (account_id, connection_id) IN (VALUES {values}) \
         RETURNING connection_id"
    );
    let mut query = sqlx::query_scalar::<_, String>(&sql).persistent(rows.len() == 1);
    for (account_id, connection_id) in rows {
        query = query.bind(account_id).bind(connection_id);
    }
    Ok(query.fetch_all(pool).await?.into_iter().collect())
}

/// Gives a call that could not be written its error.
fn fail(call: Call, e: StoreError) {
    match call {
        Call::Register { answer, .. } => {
            let _ = answer.send(Err(e));
        }
        Call::Remove { answer, .. } => {
            let _ = answer.send(Err(e));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::sessions::fixture::{account, postgres, sqlite, token, until_queued};
    use super::super::{ConnectionRecord, Registered, Store};
    use super::MAX_ROWS;
    use std::collections::HashMap;
    use std::time::Duration;

    const LEASE: Duration = Duration::from_secs(60);

    /// Accounts with a valid token each, made before a test holds the writer.
    struct Signed(HashMap<i64, String>);

    impl Signed {
        async fn of(store: &Store, accounts: &[i64]) -> Signed {
            let mut tokens = HashMap::new();
            for &account in accounts {
                tokens.insert(account, token(store, account).await);
            }
            Signed(tokens)
        }

        /// Registers with the account's token: `None` when the store refused it.
        fn try_register(
            &self,
            store: &Store,
            account_id: i64,
            connection_id: &str,
        ) -> tokio::task::JoinHandle<Option<Registered>> {
            let (store, connection_id) = (store.clone(), connection_id.to_string());
            let token = self.0[&account_id].clone();
            tokio::spawn(async move {
                store
                    .register_connection(account_id, &token, &connection_id, "node-a", LEASE)
                    .await
                    .expect("register")
            })
        }

        /// Registers with the account's valid token: the connection it replaced.
        fn register(
            &self,
            store: &Store,
            account_id: i64,
            connection_id: &str,
        ) -> tokio::task::JoinHandle<Option<ConnectionRecord>> {
            let registering = self.try_register(store, account_id, connection_id);
            tokio::spawn(async move {
                registering
                    .await
                    .expect("joined")
                    .expect("a valid token")
                    .previous
            })
        }
    }

    fn remove(
        store: &Store,
        account_id: i64,
        connection_id: &str,
    ) -> tokio::task::JoinHandle<bool> {
        let (store, connection_id) = (store.clone(), connection_id.to_string());
        tokio::spawn(async move {
            store
                .remove_connection(account_id, &connection_id)
                .await
                .expect("remove")
        })
    }

    fn replaced(previous: Option<ConnectionRecord>) -> Option<String> {
        previous.map(|p| p.connection_id)
    }

    #[tokio::test]
    async fn a_batch_answers_each_call_as_if_it_ran_alone() {
        let f = sqlite().await;
        let (a, b) = (
            account(&f.store, "public").await,
            account(&f.store, "public").await,
        );
        let signed = Signed::of(&f.store, &[a, b]).await;
        let register = |store: &Store, account, id: &str| signed.register(store, account, id);
        // Holding a transaction holds the writer: everything below queues into one batch.
        let held = f.store.begin().await.expect("begin");
        let calls_before = f.store.metrics().waiting.get();
        let register_a = register(&f.store, a, "a1");
        until_queued(&f.store, calls_before + 1).await;
        let remove_a = remove(&f.store, a, "a1");
        until_queued(&f.store, calls_before + 2).await;
        let register_b1 = register(&f.store, b, "b1");
        until_queued(&f.store, calls_before + 3).await;
        let register_b2 = register(&f.store, b, "b2");
        until_queued(&f.store, calls_before + 4).await;
        // b1 was replaced by b2: removing it must leave b2's record alone.
        let remove_b1 = remove(&f.store, b, "b1");
        until_queued(&f.store, calls_before + 5).await;
        let register_a2 = register(&f.store, a, "a2");
        until_queued(&f.store, calls_before + 6).await;
        drop(held);
        assert_eq!(register_a.await.unwrap(), None);
        assert!(remove_a.await.unwrap(), "a1 was a's connection");
        assert_eq!(register_b1.await.unwrap(), None);
        assert_eq!(replaced(register_b2.await.unwrap()), Some("b1".into()));
        assert!(!remove_b1.await.unwrap(), "b1 had been replaced");
        assert_eq!(register_a2.await.unwrap(), None, "a1 had gone offline");
        let mut online = f.store.connection_nodes(&[a, b]).await.unwrap();
        online.sort();
        assert_eq!(
            online,
            vec![(a, "node-a".to_string()), (b, "node-a".to_string())]
        );
    }

    #[tokio::test]
    async fn a_call_that_cannot_be_written_fails_alone() {
        let f = sqlite().await;
        let (a, b, c) = (
            account(&f.store, "public").await,
            account(&f.store, "public").await,
            account(&f.store, "public").await,
        );
        let signed = Signed::of(&f.store, &[a, b, c]).await;
        signed.register(&f.store, a, "a1").await.unwrap();
        let held = f.store.begin().await.expect("begin");
        let calls_before = f.store.metrics().waiting.get();
        let register_c = signed.register(&f.store, c, "c1");
        until_queued(&f.store, calls_before + 1).await;
        // Connection ids are unique across accounts: b cannot take a's.
        let clash = {
            let (store, token) = (f.store.clone(), signed.0[&b].clone());
            tokio::spawn(async move {
                store
                    .register_connection(b, &token, "a1", "node-a", LEASE)
                    .await
            })
        };
        until_queued(&f.store, calls_before + 2).await;
        drop(held);
        let clash = clash.await.unwrap().unwrap_err();
        assert!(clash.is_unique_violation(), "{clash}");
        assert_eq!(register_c.await.unwrap(), None);
        let mut online = f.store.connection_nodes(&[a, b, c]).await.unwrap();
        online.sort();
        let node = "node-a".to_string();
        assert_eq!(online, vec![(a, node.clone()), (c, node)]);
    }

    /// Signed out since its upgrade: a registration in a batch with others writes nothing and
    /// says so; the others are written.
    #[tokio::test]
    async fn a_registration_whose_token_was_revoked_writes_nothing() {
        let f = sqlite().await;
        let (a, b) = (
            account(&f.store, "public").await,
            account(&f.store, "public").await,
        );
        let signed = Signed::of(&f.store, &[a, b]).await;
        f.store.logout(a).await.expect("logout");
        let held = f.store.begin().await.expect("begin");
        let calls_before = f.store.metrics().waiting.get();
        let register_a = signed.try_register(&f.store, a, "a1");
        until_queued(&f.store, calls_before + 1).await;
        let register_b = signed.try_register(&f.store, b, "b1");
        until_queued(&f.store, calls_before + 2).await;
        drop(held);
        assert_eq!(register_a.await.unwrap(), None, "a signed out");
        assert_eq!(
            register_b.await.unwrap(),
            Some(Registered { previous: None })
        );
        let online = f.store.connection_nodes(&[a, b]).await.unwrap();
        assert_eq!(online, vec![(b, "node-a".to_string())]);
    }

    /// A logout that deleted the token but has not committed yet: the registration waits
    /// for it, then writes nothing. Had it gone on, the logout would look for the account's
    /// connections before the record was there, and miss this one.
    #[tokio::test]
    async fn a_registration_waits_for_a_logout_in_flight_on_postgres() {
        let store = postgres().await;
        let a = account(&store, "public").await;
        let signed = Signed::of(&store, &[a]).await;
        let mut logout = store.begin().await.expect("begin");
        sqlx::query("DELETE FROM access_tokens WHERE account_id = $1")
            .bind(a)
            .execute(&mut *logout.tx)
            .await
            .expect("revoke");
        let registering = signed.try_register(&store, a, &format!("{a}-late"));
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(!registering.is_finished(), "waits for the logout's delete");
        logout.commit().await.expect("commit");
        assert_eq!(registering.await.unwrap(), None);
        assert!(store.connection_nodes(&[a]).await.unwrap().is_empty());
    }

    #[tokio::test]
    async fn more_calls_than_a_statement_takes_each_get_their_answer_on_sqlite() {
        many_calls_each_get_their_answer(&sqlite().await.store).await;
    }

    #[tokio::test]
    async fn more_calls_than_a_statement_takes_each_get_their_answer_on_postgres() {
        many_calls_each_get_their_answer(&postgres().await).await;
    }

    async fn many_calls_each_get_their_answer(store: &Store) {
        let n = MAX_ROWS + 88;
        let mut accounts = Vec::with_capacity(n);
        for _ in 0..n {
            accounts.push(account(store, "public").await);
        }
        let signed = Signed::of(store, &accounts).await;
        let register = |store: &Store, account, id: &str| signed.register(store, account, id);
        let firsts: Vec<_> = accounts
            .iter()
            .map(|&id| register(store, id, &format!("first-{id}")))
            .collect();
        for (first, id) in firsts.into_iter().zip(&accounts) {
            assert_eq!(first.await.unwrap(), None, "account {id}");
        }
        let seconds: Vec<_> = accounts
            .iter()
            .map(|&id| register(store, id, &format!("second-{id}")))
            .collect();
        for (second, id) in seconds.into_iter().zip(&accounts) {
            let expected = Some(format!("first-{id}"));
            assert_eq!(replaced(second.await.unwrap()), expected, "account {id}");
        }
        // Every other account leaves, once by its live connection and once by the old one.
        let removals: Vec<_> = accounts
            .iter()
            .step_by(2)
            .flat_map(|&id| {
                [
                    (remove(store, id, &format!("first-{id}")), false),
                    (remove(store, id, &format!("second-{id}")), true),
                ]
            })
            .collect();
        for (removal, expected) in removals {
            assert_eq!(removal.await.unwrap(), expected);
        }
        let online = store.connection_nodes(&accounts).await.unwrap();
        assert_eq!(online.len(), n / 2);
    }
}
