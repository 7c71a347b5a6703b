//! What the store keeps only for a while: rows past their use are deleted by every node's
//! upkeep, so tables of tokens, challenges, request logs and rate windows stay bounded by
//! the traffic of their window, not of the store's whole life.

use std::time::Duration;

use super::auth::AUTH_EMAIL_WINDOW_MS;
use super::friends::ms;
use super::friends::DAY;
use super::{Store, StoreResult};

impl Store {
    /// Deletes every row past its use at `now` (ms), with per-address windows of
    /// `rate_window`; how many rows went.
    pub async fn purge_expired(&self, now: i64, rate_window: Duration) -> StoreResult<u64> {
        let purges = [
            ("DELETE FROM refresh_tokens WHERE expires_at < $1", now),
            ("DELETE FROM access_tokens WHERE expires_at < $1", now),
            ("DELETE FROM signup_tokens WHERE expires_at < $1", now),
            // The email limit counts the challenges of its window.
            (
                "DELETE FROM challenges WHERE created_at < $1",
                now - 2 * AUTH_EMAIL_WINDOW_MS,
            ),
            // The daily request limit counts a day of requests.
            (
                "DELETE FROM friend_request_log WHERE at < $1",
                now - ms(DAY),
            ),
            (
                "DELETE FROM rate_windows WHERE window_start < $1",
                now - 2 * ms(rate_window),
            ),
        ];
        let mut tx = self.begin().await?;
        let mut purged = 0;
        for (sql, before) in purges {
            purged += sqlx::query(sql)
                .bind(before)
                .execute(&mut *tx.tx)
                .await?
                .rows_affected();
        }
        tx.commit().await?;
        Ok(purged)
    }
}

#[cfg(test)]
mod tests {
    use super::super::sessions::fixture::{account, postgres, sqlite};
    use super::*;
    use crate::store::now_ms;

    const HOUR: i64 = 3_600_000;

    /// One row of each table long past its use and one still of use, for `account`.
    async fn rows(store: &Store, account: i64, tag: &str) {
        let now = now_ms();
        let mut tx = store.begin().await.expect("begin");
        for (at, kind) in [(now - 3 * 24 * HOUR, "old"), (now + HOUR, "new")] {
            let key = format!("{tag}-{kind}");
            for sql in [
                "INSERT INTO refresh_tokens (token_hash, account_id, expires_at) VALUES ($1, $2, $3)",
                "INSERT INTO access_tokens (token_hash, account_id, expires_at) VALUES ($1, $2, $3)",
            ] {
                sqlx::query(sql)
                    .bind(&key)
                    .bind(account)
                    .bind(at)
                    .execute(&mut *tx.tx)
                    .await
                    .expect("token");
            }
            sqlx::query(
                "INSERT INTO signup_tokens (token_hash, email, expires_at) VALUES ($1, $2, $3)",
            )
            .bind(&key)
            .bind(format!("{key}@test"))
            .bind(at)
            .execute(&mut *tx.tx)
            .await
            .expect("signup token");
            sqlx::query(
                "INSERT INTO challenges (id, email, code, ip, created_at, expires_at) \
                 VALUES ($1, $2, '123456', '127.0.0.1', $3, $3)",
            )
            .bind(&key)
            .bind(format!("{key}@test"))
            .bind(at.min(now))
            .execute(&mut *tx.tx)
            .await
            .expect("challenge");
            sqlx::query("INSERT INTO friend_request_log (from_id, at) VALUES ($1, $2)")
                .bind(account)
                .bind(at.min(now))
                .execute(&mut *tx.tx)
                .await
                .expect("request log");
            sqlx::query("INSERT INTO rate_windows (ip, window_start, calls) VALUES ($1, $2, 1)")
                .bind(&key)
                .bind(at.min(now))
                .execute(&mut *tx.tx)
                .await
                .expect("rate window");
        }
        tx.commit().await.expect("commit");
    }

    /// How many rows of `account` (or `tag`) each table still holds.
    async fn left(store: &Store, account: i64, tag: &str) -> Vec<i64> {
        let like = format!("{tag}-%");
        let mut counts = Vec::new();
        for sql in [
            "SELECT COUNT(*) FROM refresh_tokens WHERE token_hash LIKE $1",
            "SELECT COUNT(*) FROM access_tokens WHERE token_hash LIKE $1",
            "SELECT COUNT(*) FROM signup_tokens WHERE token_hash LIKE $1",
            "SELECT COUNT(*) FROM challenges WHERE id LIKE $1",
            "SELECT COUNT(*) FROM rate_windows WHERE ip LIKE $1",
        ] {
            counts.push(
                sqlx::query_scalar(sql)
                    .bind(&like)
                    .fetch_one(store.upkeep_reader())
                    .await
                    .expect("count"),
            );
        }
        counts.push(
            sqlx::query_scalar("SELECT COUNT(*) FROM friend_request_log WHERE from_id = $1")
                .bind(account)
                .fetch_one(store.upkeep_reader())
                .await
                .expect("count"),
        );
        counts
    }

    async fn rows_past_use_go_and_the_rest_stay(store: &Store) {
        let account = account(store, "friends").await;
        let tag = format!("purge-{account}");
        rows(store, account, &tag).await;
        assert_eq!(left(store, account, &tag).await, [2; 6]);
        let purged = store
            .purge_expired(now_ms(), Duration::from_secs(60))
            .await
            .expect("purge");
        assert!(purged >= 6, "{purged}");
        assert_eq!(left(store, account, &tag).await, [1; 6]);
    }

    #[tokio::test]
    async fn rows_past_use_go_and_the_rest_stay_on_sqlite() {
        rows_past_use_go_and_the_rest_stay(&sqlite().await.store).await;
    }

    #[tokio::test]
    async fn rows_past_use_go_and_the_rest_stay_on_postgres() {
        rows_past_use_go_and_the_rest_stay(&postgres().await).await;
    }
}
