//! The cloud-wide record of event connections: one row per online account, with
//! the node that holds it and a lease that node renews. A node that dies stops
//! renewing, and its rows expire.

use std::time::Duration;

use super::json_list::{json_list, json_texts};
use super::{cluster_now_ms, Backend, Store, StoreResult};

/// Renews the leases of `$2`'s records whose connection id is in the JSON array `$3`:
/// one statement whatever their number. SQLite has one writer, so nothing else holds
/// the rows.
const RENEW_SQLITE: &str = concat!(
    "UPDATE connections SET lease_until = $1 WHERE node = $2 AND connection_id IN (",
    json_texts!(sqlite, "$3"),
    ")"
);

/// The same on PostgreSQL, where registrations hold rows in their transactions: a
/// renewal skips the rows one holds (its write gives the row a fresh lease, or removes
/// it) instead of waiting behind it, so it neither queues behind a storm of welcomes
/// nor deadlocks with them. It answers how many of the records exist, held or not.
const RENEW_POSTGRES: &str = concat!(
    "WITH live AS (",
    json_texts!(postgres, "$3"),
    "), \
     mine AS (SELECT account_id FROM connections \
       WHERE node = $2 AND connection_id IN (SELECT value FROM live) FOR UPDATE SKIP LOCKED), \
     renewed AS (UPDATE connections SET lease_until = $1 FROM mine \
       WHERE connections.account_id = mine.account_id) \
     SELECT COUNT(*) FROM connections WHERE node = $2 AND connection_id IN (SELECT value FROM live)"
);

/// Another connection the account had when a new one registered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectionRecord {
    pub connection_id: String,
    pub node: String,
    /// When its lease runs out (ms since the epoch): its node renewed it `lease` before.
    pub lease_until_ms: i64,
}

/// The result of registering a connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Registered {
    /// The connection this one replaces, if its lease was still alive.
    pub previous: Option<ConnectionRecord>,
}

/// What [`Store::reassert_connections`] found of this node's live connections.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Reasserted {
    /// Accounts whose record was put back: online again for their friends.
    pub back: Vec<i64>,
    /// Connections (account, connection id) whose account another connection holds now.
    pub taken: Vec<(i64, String)>,
}

impl Store {
    /// Makes `connection_id` on `node` the account's one connection while `token` is still
    /// one of its valid access tokens, and returns the live one it replaced; `None` when the
    /// token was revoked (a logout) or expired, and nothing was written. A logout that
    /// revokes the token at the same moment either comes first, or waits for the record and
    /// then finds it to close. Written with other registrations waiting at the same time,
    /// in one statement (see `connection_writes`).
    pub async fn register_connection(
        &self,
        account_id: i64,
        token: &str,
        connection_id: &str,
        node: &str,
        lease: Duration,
    ) -> StoreResult<Option<Registered>> {
        self.inner
            .connection_writes
            .register(
                account_id,
                super::auth::hash(token),
                connection_id,
                node,
                lease,
            )
            .await
    }

    /// Removes the record if it is still this connection's; true when the
    /// account went offline by it (false when it had been replaced). Written with
    /// other removals waiting at the same time, in one statement.
    pub async fn remove_connection(
        &self,
        account_id: i64,
        connection_id: &str,
    ) -> StoreResult<bool> {
        self.inner
            .connection_writes
            .remove(account_id, connection_id)
            .await
    }

    /// The node holding each of these accounts' connection (absent: offline).
    pub async fn connection_nodes(&self, accounts: &[i64]) -> StoreResult<Vec<(i64, String)>> {
        let mut found = Vec::with_capacity(accounts.len());
        // Bounded IN lists keep every statement within both databases' parameter limits.
        for chunk in accounts.chunks(500) {
            let sql = format!(
                "SELECT account_id, node FROM connections WHERE account_id IN ({})",
                super::placeholders(1, chunk.len())
            );
            let mut query = sqlx::query_as::<_, (i64, String)>(&sql);
            for id in chunk {
                query = query.bind(*id);
            }
            found.extend(query.fetch_all(self.reader()).await?);
        }
        Ok(found)
    }

    /// Extends the leases of this node's records of `live` connections (account,
    /// connection id, since), and answers how many of those records exist: fewer than
    /// `live` means some expired while this node could not renew them. A record of a
    /// connection that is gone from the node (it was replaced here while recording its
    /// successor failed) is not renewed: it expires, and the account goes offline.
    pub async fn renew_leases(
        &self,
        node: &str,
        live: &[(i64, String, i64)],
        lease: Duration,
    ) -> StoreResult<u64> {
        let until = cluster_now_ms() + lease.as_millis() as i64;
        let ids: Vec<&str> = live.iter().map(|(_, id, _)| id.as_str()).collect();
        let ids = json_list(&ids);
        let mut tx = self.begin_upkeep().await?;
        let present = match self.backend() {
            Backend::Sqlite => sqlx::query(RENEW_SQLITE)
                .bind(until)
                .bind(node)
                .bind(ids)
                .execute(&mut *tx.tx)
                .await?
                .rows_affected(),
            Backend::Postgres => sqlx::query_scalar::<_, i64>(RENEW_POSTGRES)
                .bind(until)
                .bind(node)
                .bind(ids)
                .fetch_one(&mut *tx.tx)
                .await?
                .max(0) as u64,
        };
        tx.commit().await?;
        Ok(present)
    }

    /// Puts back the records of live connections that are missing (their lease ran out
    /// while this node could not reach the store, and another node retired them).
    /// A record another connection of the account holds now is left alone: that
    /// connection replaced this node's one while the bus could not say so.
    pub async fn reassert_connections(
        &self,
        node: &str,
        live: &[(i64, String, i64)],
        lease: Duration,
    ) -> StoreResult<Reasserted> {
        let until = cluster_now_ms() + lease.as_millis() as i64;
        let mut found = Reasserted::default();
        // In account order, as registrations write: inserts that wait on each other's
        // rows then cannot deadlock.
        let mut live = live.to_vec();
        live.sort_unstable_by_key(|(account, _, _)| *account);
        for chunk in live.chunks(500) {
            let sql = format!(
                "SELECT connection_id FROM connections WHERE connection_id IN ({})",
                super::placeholders(1, chunk.len())
            );
            let mut query = sqlx::query_scalar::<_, String>(&sql);
            for (_, connection_id, _) in chunk {
                query = query.bind(connection_id.as_str());
            }
            let present: std::collections::HashSet<String> = query
                .fetch_all(self.upkeep_reader())
                .await?
                .into_iter()
                .collect();
            let mut tx = self.begin_upkeep().await?;
            for (account_id, connection_id, since) in
                chunk.iter().filter(|c| !present.contains(&c.1))
            {
                let inserted = sqlx::query(
                    "INSERT INTO connections (account_id, connection_id, node, since, lease_until) \
                     VALUES ($1, $2, $3, $4, $5) ON CONFLICT (account_id) DO NOTHING",
                )
                .bind(account_id)
                .bind(connection_id.as_str())
                .bind(node)
                .bind(since)
                .bind(until)
                .execute(&mut *tx.tx)
                .await?
                .rows_affected();
                if inserted > 0 {
                    found.back.push(*account_id);
                } else {
                    found.taken.push((*account_id, connection_id.clone()));
                }
            }
            tx.commit().await?;
        }
        Ok(found)
    }

    /// Deletes records whose lease ran out (their node stopped renewing) and
    /// returns their accounts, which are now offline.
    pub async fn expire_leases(&self) -> StoreResult<Vec<i64>> {
        let mut tx = self.begin_upkeep().await?;
        let gone = sqlx::query_scalar(
            "DELETE FROM connections WHERE lease_until < $1 RETURNING account_id",
        )
        .bind(cluster_now_ms())
        .fetch_all(&mut *tx.tx)
        .await?;
        tx.commit().await?;
        Ok(gone)
    }

    /// Deletes every record of `node` (at its start after a crash, and at the
    /// end of its drain) and returns their accounts.
    pub async fn clear_node(&self, node: &str) -> StoreResult<Vec<i64>> {
        let mut tx = self.begin_upkeep().await?;
        let gone =
            sqlx::query_scalar("DELETE FROM connections WHERE node = $1 RETURNING account_id")
                .bind(node)
                .fetch_all(&mut *tx.tx)
                .await?;
        tx.commit().await?;
        Ok(gone)
    }
}

#[cfg(test)]
mod tests {
    use super::super::sessions::fixture::{account, exec, postgres, register, sqlite};
    use super::*;

    #[tokio::test]
    async fn registrations_return_what_they_replaced_on_sqlite() {
        registrations_return_what_they_replaced(&sqlite().await.store).await;
    }

    #[tokio::test]
    async fn registrations_return_what_they_replaced_on_postgres() {
        registrations_return_what_they_replaced(&postgres().await).await;
    }

    #[tokio::test]
    async fn a_renewal_extends_this_nodes_live_records_only_on_sqlite() {
        a_renewal_extends_this_nodes_live_records_only(&sqlite().await.store).await;
    }

    #[tokio::test]
    async fn a_renewal_extends_this_nodes_live_records_only_on_postgres() {
        a_renewal_extends_this_nodes_live_records_only(&postgres().await).await;
    }

    async fn lease_of(store: &Store, account: i64) -> i64 {
        sqlx::query_scalar("SELECT lease_until FROM connections WHERE account_id = $1")
            .bind(account)
            .fetch_one(store.reader())
            .await
            .expect("lease")
    }

    async fn a_renewal_extends_this_nodes_live_records_only(store: &Store) {
        let short = Duration::from_secs(5);
        let (ann, bob, cat) = (
            account(store, "friends").await,
            account(store, "friends").await,
            account(store, "friends").await,
        );
        let node = format!("renew-{ann}");
        for (who, on) in [
            (ann, node.as_str()),
            (bob, node.as_str()),
            (cat, "elsewhere"),
        ] {
            let id = format!("{who}-conn");
            register(store, who, &id, on, short).await;
        }
        let before = [
            lease_of(store, ann).await,
            lease_of(store, bob).await,
            lease_of(store, cat).await,
        ];

        // Bob's connection is gone from the node; cat's record is another node's.
        let live = [
            (ann, format!("{ann}-conn"), 0),
            (cat, format!("{cat}-conn"), 0),
            (bob, format!("{bob}-gone"), 0),
        ];
        let renewed = store
            .renew_leases(&node, &live, Duration::from_secs(60))
            .await;
        assert_eq!(renewed.expect("renew"), 1);
        assert!(lease_of(store, ann).await > before[0] + 50_000);
        assert_eq!(lease_of(store, bob).await, before[1]);
        assert_eq!(lease_of(store, cat).await, before[2]);
    }

    /// A renewal that waited for the rows a storm of registrations holds fell behind
    /// them (and deadlocked with them): it renews what it can and leaves the held rows
    /// to the write that holds them.
    #[tokio::test]
    async fn a_renewal_does_not_wait_for_a_record_a_write_holds_on_postgres() {
        let store = postgres().await;
        let (ann, bob) = (
            account(&store, "friends").await,
            account(&store, "friends").await,
        );
        let node = format!("held-{ann}");
        for who in [ann, bob] {
            let id = format!("{who}-conn");
            register(&store, who, &id, &node, Duration::from_secs(5)).await;
        }
        let mut holder = store.begin().await.expect("begin");
        sqlx::query("SELECT 1 FROM connections WHERE account_id = $1 FOR UPDATE")
            .bind(bob)
            .execute(&mut *holder.tx)
            .await
            .expect("hold bob's record");

        let live = [
            (ann, format!("{ann}-conn"), 0),
            (bob, format!("{bob}-conn"), 0),
        ];
        let before = lease_of(&store, bob).await;
        let present = store
            .renew_leases(&node, &live, Duration::from_secs(60))
            .await;
        // Both records exist (no need to put one back); the held one keeps its lease.
        assert_eq!(
            present.expect("a renewal that does not wait for the lock"),
            2
        );
        holder.commit().await.expect("commit");
        assert_eq!(lease_of(&store, bob).await, before);
        assert!(lease_of(&store, ann).await > before + 50_000);
    }

    async fn registrations_return_what_they_replaced(store: &Store) {
        let ann = account(store, "friends").await;
        let lease = Duration::from_secs(30);
        let (first, second, third) = (format!("{ann}-a"), format!("{ann}-b"), format!("{ann}-c"));

        let none = register(store, ann, &first, "n1", lease).await;
        assert_eq!(none.previous, None);
        let replaced = register(store, ann, &second, "n2", lease)
            .await
            .previous
            .expect("the first one");
        assert_eq!(
            (replaced.connection_id.as_str(), replaced.node.as_str()),
            (first.as_str(), "n1")
        );
        assert!(replaced.lease_until_ms >= cluster_now_ms());

        // A record whose lease ran out is no previous connection (its node is gone).
        exec(
            store,
            "UPDATE connections SET lease_until = $2, since = $3 WHERE account_id = $1",
            ann,
            cluster_now_ms() - 1,
        )
        .await;
        let expired = register(store, ann, &third, "n1", lease).await;
        assert_eq!(expired.previous, None);

        // Gone offline in between: nothing is replaced, whatever the row held before.
        assert!(!store.remove_connection(ann, &second).await.expect("remove"));
        assert!(store.remove_connection(ann, &third).await.expect("remove"));
        let fresh = register(store, ann, &first, "n2", lease).await;
        assert_eq!(fresh.previous, None);
    }
}
