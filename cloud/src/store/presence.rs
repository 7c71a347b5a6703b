//! Presence: each account's activity and version, and who its friends are (the
//! audience of its presence events).

use std::collections::hash_map::{Entry, HashMap};

use sqlx::{AnyPool, Row};

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

    /// [`Store::presence`] and [`Store::friend_ids`] in one read, made with the other
    /// accounts announced at the same moment: every welcome and every break of a
    /// reconnect storm pays it.
    pub async fn presence_and_friends(
        &self,
        account_id: i64,
    ) -> StoreResult<(PresenceState, Vec<i64>)> {
        let found = self.inner.presence_and_friends.get(account_id).await?;
        Ok(found.unwrap_or_else(|| {
            let unknown = PresenceState {
                online: false,
                activity: String::new(),
                version: 0,
            };
            (unknown, Vec::new())
        }))
    }
}

/// The presence and friend ids of each of these accounts (absent: no such account), in
/// one statement (see `lookups`).
pub(super) async fn presence_and_friends_of(
    pool: AnyPool,
    accounts: Vec<i64>,
) -> StoreResult<HashMap<i64, (PresenceState, Vec<i64>)>> {
    // One row per friend (one with no friend_id when there is none); an account
    // always has its presence row, made with it.
    let sql = format!(
        "SELECT p.account_id, p.activity, p.version, c.account_id AS online, f.friend_id \
         FROM presence p \
         LEFT JOIN connections c ON c.account_id = p.account_id \
         LEFT JOIN friendships f ON f.account_id = p.account_id \
         WHERE p.account_id IN ({})",
        super::placeholders(1, accounts.len())
    );
    let mut query = sqlx::query(&sql).persistent(accounts.len() == 1);
    for account in &accounts {
        query = query.bind(*account);
    }
    let mut found: HashMap<i64, (PresenceState, Vec<i64>)> = HashMap::new();
    for row in query.fetch_all(&pool).await? {
        let account: i64 = row.try_get("account_id")?;
        let (_, friends) = match found.entry(account) {
            Entry::Occupied(e) => e.into_mut(),
            Entry::Vacant(e) => {
                let presence = PresenceState {
                    online: row.try_get::<Option<i64>, _>("online")?.is_some(),
                    activity: row.try_get("activity")?,
                    version: version_from_db(row.try_get("version")?),
                };
                e.insert((presence, Vec::new()))
            }
        };
        if let Some(friend) = row.try_get::<Option<i64>, _>("friend_id")? {
            friends.push(friend);
        }
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::super::sessions::fixture::{account, befriend, exec, postgres, register, sqlite};
    use super::*;

    #[tokio::test]
    async fn presence_and_friends_on_sqlite() {
        presence_and_friends_in_one_read(&sqlite().await.store).await;
    }

    #[tokio::test]
    async fn presence_and_friends_on_postgres() {
        presence_and_friends_in_one_read(&postgres().await).await;
    }

    async fn presence_and_friends_in_one_read(store: &Store) {
        let [ann, bob, cat] = [
            account(store, "friends").await,
            account(store, "friends").await,
            account(store, "friends").await,
        ];
        for id in [ann, bob] {
            exec(
                store,
                "INSERT INTO presence (account_id, activity, version, updated_at) VALUES ($1, 'lobby', $2, $3)",
                id,
                version_to_db(7),
            )
            .await;
        }
        befriend(store, ann, bob).await;
        befriend(store, ann, cat).await;
        let (presence, mut friends) = store.presence_and_friends(ann).await.expect("read");
        friends.sort();
        assert_eq!(friends, vec![bob, cat]);
        assert_eq!(presence, store.presence(ann).await.expect("presence"));
        assert_eq!(
            presence,
            PresenceState {
                online: false,
                activity: "lobby".into(),
                version: 7
            }
        );

        let lease = std::time::Duration::from_secs(30);
        register(store, bob, &format!("{bob}-p"), "n1", lease).await;
        let (presence, friends) = store.presence_and_friends(bob).await.expect("read");
        assert_eq!(friends, vec![ann]);
        assert!(presence.online);
        assert_eq!(presence, store.presence(bob).await.expect("presence"));
    }

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
