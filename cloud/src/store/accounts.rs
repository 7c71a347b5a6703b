//! Accounts, their profile fields and trophies.

use serde::{Deserialize, Serialize};
use sqlx::Row;

use super::{now_ms, rfc3339, sql, Store, StoreResult, WriteTx};

/// Who may see an account's full card.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Privacy {
    Public,
    Friends,
    Private,
}

impl Privacy {
    pub fn as_str(self) -> &'static str {
        match self {
            Privacy::Public => "public",
            Privacy::Friends => "friends",
            Privacy::Private => "private",
        }
    }

    pub fn parse(s: &str) -> Option<Privacy> {
        match s {
            "public" => Some(Privacy::Public),
            "friends" => Some(Privacy::Friends),
            "private" => Some(Privacy::Private),
            _ => None,
        }
    }
}

/// An account as the API shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Account {
    pub id: i64,
    pub handle: String,
    pub created_at: String,
    pub privacy: Privacy,
    pub avatar: Option<String>,
}

pub(super) const ACCOUNT_COLUMNS: &str = "id, handle, created_at, privacy, avatar";

pub(super) fn account_from_row(row: &sqlx::any::AnyRow) -> StoreResult<Account> {
    let privacy: String = row.try_get("privacy")?;
    Ok(Account {
        id: row.try_get("id")?,
        handle: row.try_get("handle")?,
        created_at: rfc3339(row.try_get("created_at")?),
        privacy: Privacy::parse(&privacy).unwrap_or(Privacy::Friends),
        avatar: row.try_get(&*sql("avatar"))?,
    })
}

impl Store {
    pub async fn account(&self, id: i64) -> StoreResult<Option<Account>> {
        let row = sqlx::query(&sql(&format!(
            "SELECT {ACCOUNT_COLUMNS} FROM accounts WHERE id = $1"
        )))
        .bind(id)
        .fetch_optional(self.reader())
        .await?;
        row.as_ref().map(account_from_row).transpose()
    }

    /// Changes avatar and/or privacy; `avatar: Some(None)` clears it.
    pub async fn update_account(
        &self,
        id: i64,
        avatar: Option<Option<String>>,
        privacy: Option<Privacy>,
    ) -> StoreResult<Option<Account>> {
        let mut tx = self.begin().await?;
        if let Some(avatar) = avatar {
            sqlx::query(&sql("UPDATE accounts SET avatar = $1 WHERE id = $2"))
                .bind(avatar)
                .bind(id)
                .execute(&mut *tx.tx)
                .await?;
        }
        if let Some(privacy) = privacy {
            sqlx::query("UPDATE accounts SET privacy = $1 WHERE id = $2")
                .bind(privacy.as_str())
                .bind(id)
                .execute(&mut *tx.tx)
                .await?;
        }
        let account = account_in(&mut tx, id).await?;
        tx.commit().await?;
        Ok(account)
    }

    pub async fn add_trophy(&self, account_id: i64, name: &str) -> StoreResult<()> {
        let mut tx = self.begin().await?;
        sqlx::query("INSERT INTO trophies (account_id, name, granted_at) VALUES ($1, $2, $3)")
            .bind(account_id)
            .bind(name)
            .bind(now_ms())
            .execute(&mut *tx.tx)
            .await?;
        tx.commit().await
    }
}

pub(super) async fn account_in(tx: &mut WriteTx, id: i64) -> StoreResult<Option<Account>> {
    let row = sqlx::query(&sql(&format!(
        "SELECT {ACCOUNT_COLUMNS} FROM accounts WHERE id = $1"
    )))
    .bind(id)
    .fetch_optional(&mut *tx.tx)
    .await?;
    row.as_ref().map(account_from_row).transpose()
}
