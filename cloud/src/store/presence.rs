//! Presence: each account's activity and version, and who its friends are (the
//! audience of its presence events).

use sqlx::Row;

use super::{now_ms, Store, StoreResult};

/// What friends see of an account.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PresenceState {
    pub online: bool,
    pub activity: String,
    pub version: u64,
}

/// Versions are u64 in the API and BIGINT (i64) in the store; flipping the top
/// bit maps one onto the other keeping the order, so `<` works in SQL for every u64.
pub(crate) fn version_to_db(v: u64) -> i64 {
    (v ^ (1 << 63)) as i64
}

pub(crate) fn version_from_db(v: i64) -> u64 {
    (v as u64) ^ (1 << 63)
}

impl Store {
    /// Stores a change if its version is newer than the stored one; returns the
    /// new state when it was applied, `None` when it was stale (a safe retry).
    pub async fn set_presence(
        &self,
        account_id: i64,
        activity: &str,
        version: u64,
    ) -> StoreResult<Option<PresenceState>> {
        let mut tx = self.begin().await?;
        let applied = sqlx::query(
            "UPDATE presence SET activity = $1, version = $2, updated_at = $3 \
             WHERE account_id = $4 AND version < $2",
        )
        .bind(activity)
        .bind(version_to_db(version))
        .bind(now_ms())
        .bind(account_id)
        .execute(&mut *tx.tx)
        .await?
        .rows_affected()
            > 0;
        let online: Option<i64> =
            sqlx::query_scalar("SELECT account_id FROM connections WHERE account_id = $1")
                .bind(account_id)
                .fetch_optional(&mut *tx.tx)
                .await?;
        tx.commit().await?;
        Ok(applied.then(|| PresenceState {
            online: online.is_some(),
            activity: activity.to_string(),
            version,
        }))
    }

    /// The account's presence as its friends see it now.
    pub async fn presence(&self, account_id: i64) -> StoreResult<PresenceState> {
        let row = sqlx::query(
            "SELECT p.activity, p.version, c.account_id AS online FROM presence p \
             LEFT JOIN connections c ON c.account_id = p.account_id WHERE p.account_id = $1",
        )
        .bind(account_id)
        .fetch_optional(self.reader())
        .await?;
        Ok(match row {
            Some(row) => PresenceState {
                online: row.try_get::<Option<i64>, _>("online")?.is_some(),
                activity: row.try_get("activity")?,
                version: version_from_db(row.try_get("version")?),
            },
            None => PresenceState {
                online: false,
                activity: String::new(),
                version: 0,
            },
        })
    }

    /// The account's friends: who hears of its presence.
    pub async fn friend_ids(&self, account_id: i64) -> StoreResult<Vec<i64>> {
        Ok(
            sqlx::query_scalar("SELECT friend_id FROM friendships WHERE account_id = $1")
                .bind(account_id)
                .fetch_all(self.reader())
                .await?,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_mapping_keeps_order_over_all_u64() {
        let samples = [
            0u64,
            1,
            42,
            i64::MAX as u64,
            i64::MAX as u64 + 1,
            u64::MAX - 1,
            u64::MAX,
        ];
        for w in samples.windows(2) {
            assert!(version_to_db(w[0]) < version_to_db(w[1]), "{w:?}");
        }
        for v in samples {
            assert_eq!(version_from_db(version_to_db(v)), v);
        }
    }
}
