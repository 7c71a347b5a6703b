//! Call counts per source address and window, for the per-IP limit of a cluster.

use super::{Store, StoreResult};

impl Store {
    /// Counts one call of `ip` in the window starting at `window_start` (ms); returns
    /// the calls of that window so far, this one included. One statement on its own: the
    /// address's row stays locked for that statement, not for a transaction's round trips
    /// (every player behind one address shares the row). Ended windows go with the
    /// retention purge.
    pub async fn count_call(&self, ip: &str, window_start: i64) -> StoreResult<i64> {
        let calls = sqlx::query_scalar(
            "INSERT INTO rate_windows (ip, window_start, calls) VALUES ($1, $2, 1) \
             ON CONFLICT (ip, window_start) DO UPDATE SET calls = rate_windows.calls + 1 \
             RETURNING calls",
        )
        .bind(ip)
        .bind(window_start)
        .fetch_one(&self.inner.writer.pool)
        .await?;
        Ok(calls)
    }
}
