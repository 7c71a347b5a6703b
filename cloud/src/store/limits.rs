//! Call counts per source address and window, for the per-IP limit of a cluster.

use super::{Store, StoreResult};

impl Store {
    /// Counts one call of `ip` in the window starting at `window_start` (ms); returns
    /// the calls of that window so far, this one included.
    pub async fn count_call(&self, ip: &str, window_start: i64) -> StoreResult<i64> {
        let mut tx = self.begin().await?;
        let calls = sqlx::query_scalar(
            "INSERT INTO rate_windows (ip, window_start, calls) VALUES ($1, $2, 1) \
             ON CONFLICT (ip, window_start) DO UPDATE SET calls = rate_windows.calls + 1 \
             RETURNING calls",
        )
        .bind(ip)
        .bind(window_start)
        .fetch_one(&mut *tx.tx)
        .await?;
        // Windows that ended are of no further use.
        sqlx::query("DELETE FROM rate_windows WHERE ip = $1 AND window_start < $2")
            .bind(ip)
            .bind(window_start)
            .execute(&mut *tx.tx)
            .await?;
        tx.commit().await?;
        Ok(calls)
    }
}
