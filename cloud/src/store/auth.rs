//! Sign-in: email challenges, signup tokens, access and refresh tokens.
//!
//! Tokens are random; the store keeps only their SHA-256, so a copy of the
//! database does not sign anyone in.

use std::collections::HashMap;
use std::time::Duration;

use rand::RngCore;
use sha2::{Digest, Sha256};
use sqlx::{AnyPool, Row};

use super::accounts::{account_from_row, account_in, Account, ACCOUNT_COLUMNS};
use super::json_list::{json_in, json_list};
use super::{now_ms, sql, Backend, Serial, Store, StoreResult, WriteTx};

const CHALLENGE_TTL_MS: i64 = 10 * 60 * 1000;
const MAX_CODE_TRIES: i64 = 5;
const SIGNUP_TTL_MS: i64 = 30 * 60 * 1000;
const REFRESH_TTL_MS: i64 = 30 * 24 * 3600 * 1000;
pub(super) const AUTH_EMAIL_WINDOW_MS: i64 = 15 * 60 * 1000;

/// A fresh pair of tokens.
#[derive(Debug, Clone)]
pub struct IssuedTokens {
    pub access_token: String,
    pub refresh_token: String,
    pub expires_in: u64,
}

/// The outcome of `POST /v1/auth/code`.
#[derive(Debug)]
pub enum CodeCheck {
    SignedIn(Account, IssuedTokens),
    SignupRequired { signup_token: String },
    Invalid,
}

/// The outcome of a signup.
#[derive(Debug)]
pub enum Signup {
    Created(Account, IssuedTokens),
    InvalidToken,
    HandleTaken,
}

/// Whether a new challenge may be created.
#[derive(Debug)]
pub enum ChallengeIssue {
    Created {
        challenge_id: String,
        code: String,
    },
    /// Over the limit of `by` (the address or the IP); retry after this long.
    Limited {
        by: ChallengeKey,
        wait: Duration,
    },
}

/// What the sign-in email limit counts challenges by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChallengeKey {
    Ip,
    Email,
}

fn random_token() -> String {
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    hex(&bytes)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

pub(super) fn hash(token: &str) -> String {
    hex(&Sha256::digest(token.as_bytes()))
}

impl Store {
    /// Creates a sign-in challenge unless `ip` or `email` used up their window.
    pub async fn create_challenge(
        &self,
        email: &str,
        ip: &str,
        per_window: Option<u32>,
    ) -> StoreResult<ChallengeIssue> {
        let now = now_ms();
        let mut tx = self.begin().await?;
        if let Some(limit) = per_window {
            let since = now - AUTH_EMAIL_WINDOW_MS;
            // Count and insert as one step, or a burst through several nodes gets past the cap.
            tx.serialize_on(Serial::ChallengesFromIp(ip)).await?;
            tx.serialize_on(Serial::ChallengesToEmail(email)).await?;
            for (by, column, value) in [
                (ChallengeKey::Ip, "ip", ip),
                (ChallengeKey::Email, "email", email),
            ] {
                let rows = sqlx::query(&format!(
                    "SELECT created_at FROM challenges WHERE {column} = $1 AND created_at > $2 \
                     ORDER BY created_at LIMIT $3"
                ))
                .bind(value)
                .bind(since)
                .bind(limit as i64)
                .fetch_all(&mut *tx.tx)
                .await?;
                if rows.len() >= limit as usize {
                    // The window frees up when its oldest entry ages out.
                    let oldest: i64 = match rows.first() {
                        Some(row) => row.try_get("created_at")?,
                        None => now,
                    };
                    let wait = (oldest + AUTH_EMAIL_WINDOW_MS - now).max(1000);
                    return Ok(ChallengeIssue::Limited {
                        by,
                        wait: Duration::from_millis(wait as u64),
                    });
                }
            }
        }
        let challenge_id = random_token();
        let code = format!("{:06}", rand::rng().next_u32() % 1_000_000);
        sqlx::query(
            "INSERT INTO challenges (id, email, code, ip, attempts, burned, created_at, expires_at) \
             VALUES ($1, $2, $3, $4, 0, 0, $5, $6)",
        )
        .bind(&challenge_id)
        .bind(email)
        .bind(&code)
        .bind(ip)
        .bind(now)
        .bind(now + CHALLENGE_TTL_MS)
        .execute(&mut *tx.tx)
        .await?;
        // Old challenges are only kept for the rate window.
        sqlx::query("DELETE FROM challenges WHERE created_at < $1")
            .bind(now - 2 * AUTH_EMAIL_WINDOW_MS)
            .execute(&mut *tx.tx)
            .await?;
        tx.commit().await?;
        Ok(ChallengeIssue::Created { challenge_id, code })
    }

    /// The code of the newest challenge of `email` still open (neither burned nor expired),
    /// for `--test-codes`.
    pub async fn newest_code(&self, email: &str) -> StoreResult<Option<String>> {
        let row = sqlx::query(
            "SELECT code FROM challenges WHERE email = $1 AND burned = 0 AND expires_at > $2 \
             ORDER BY created_at DESC LIMIT 1",
        )
        .bind(email)
        .bind(now_ms())
        .fetch_optional(self.reader())
        .await?;
        row.map(|row| row.try_get("code"))
            .transpose()
            .map_err(Into::into)
    }

    /// Checks a code: a right one signs in (or asks for a signup); five wrong ones burn the challenge.
    pub async fn check_code(
        &self,
        challenge_id: &str,
        code: &str,
        access_ttl: Duration,
    ) -> StoreResult<CodeCheck> {
        let now = now_ms();
        let mut tx = self.begin().await?;
        // Locked, so that tries at the same moment each count: read + 1 is written back.
        let lock = tx.backend().for_update();
        let row = sqlx::query(&format!(
            "SELECT email, code, attempts, burned, expires_at FROM challenges WHERE id = $1{lock}"
        ))
        .bind(challenge_id)
        .fetch_optional(&mut *tx.tx)
        .await?;
        let Some(row) = row else {
            return Ok(CodeCheck::Invalid);
        };
        let burned: i64 = row.try_get("burned")?;
        let expires_at: i64 = row.try_get("expires_at")?;
        if burned != 0 || expires_at < now {
            return Ok(CodeCheck::Invalid);
        }
        let expected: String = row.try_get("code")?;
        if expected != code {
            let attempts: i64 = row.try_get::<i64, _>("attempts")? + 1;
            sqlx::query("UPDATE challenges SET attempts = $1, burned = $2 WHERE id = $3")
                .bind(attempts)
                .bind(i64::from(attempts >= MAX_CODE_TRIES))
                .bind(challenge_id)
                .execute(&mut *tx.tx)
                .await?;
            tx.commit().await?;
            return Ok(CodeCheck::Invalid);
        }
        // A code signs in once.
        sqlx::query("UPDATE challenges SET burned = 1 WHERE id = $1")
            .bind(challenge_id)
            .execute(&mut *tx.tx)
            .await?;
        let email: String = row.try_get("email")?;
        let account = sqlx::query(&sql(&format!(
            "SELECT {ACCOUNT_COLUMNS} FROM accounts WHERE email = $1"
        )))
        .bind(&email)
        .fetch_optional(&mut *tx.tx)
        .await?;
        let outcome = match account {
            Some(row) => {
                let account = account_from_row(&row)?;
                let tokens = issue_tokens(&mut tx, account.id, access_ttl).await?;
                CodeCheck::SignedIn(account, tokens)
            }
            None => {
                let signup_token = random_token();
                sqlx::query(
                    "INSERT INTO signup_tokens (token_hash, email, expires_at) VALUES ($1, $2, $3)",
                )
                .bind(hash(&signup_token))
                .bind(&email)
                .bind(now + SIGNUP_TTL_MS)
                .execute(&mut *tx.tx)
                .await?;
                CodeCheck::SignupRequired { signup_token }
            }
        };
        tx.commit().await?;
        Ok(outcome)
    }

    /// Creates the account of a signup token with this (valid, lower-cased) handle.
    pub async fn signup(
        &self,
        signup_token: &str,
        handle: &str,
        access_ttl: Duration,
    ) -> StoreResult<Signup> {
        let now = now_ms();
        let mut tx = self.begin().await?;
        let email: Option<String> = sqlx::query_scalar(
            "SELECT email FROM signup_tokens WHERE token_hash = $1 AND expires_at > $2",
        )
        .bind(hash(signup_token))
        .bind(now)
        .fetch_optional(&mut *tx.tx)
        .await?;
        let Some(email) = email else {
            return Ok(Signup::InvalidToken);
        };
        let taken: Option<i64> = sqlx::query_scalar("SELECT id FROM accounts WHERE handle = $1")
            .bind(handle)
            .fetch_optional(&mut *tx.tx)
            .await?;
        if taken.is_some() {
            return Ok(Signup::HandleTaken);
        }
        let inserted = sqlx::query_scalar::<_, i64>(&sql(
            "INSERT INTO accounts (email, handle, privacy, avatar, created_at) \
             VALUES ($1, $2, 'friends', NULL, $3) RETURNING id",
        ))
        .bind(&email)
        .bind(handle)
        .bind(now)
        .fetch_one(&mut *tx.tx)
        .await;
        let id = match inserted {
            Ok(id) => id,
            // Two signups raced for the handle (PostgreSQL) or the email got an account meanwhile.
            Err(sqlx::Error::Database(e)) if e.is_unique_violation() => {
                return Ok(if e.message().contains("handle") {
                    Signup::HandleTaken
                } else {
                    Signup::InvalidToken
                });
            }
            Err(e) => return Err(e.into()),
        };
        sqlx::query("INSERT INTO presence (account_id, activity, version, updated_at) VALUES ($1, '', $2, $3)")
            .bind(id)
            .bind(super::presence::version_to_db(0))
            .bind(now)
            .execute(&mut *tx.tx)
            .await?;
        sqlx::query("DELETE FROM signup_tokens WHERE token_hash = $1")
            .bind(hash(signup_token))
            .execute(&mut *tx.tx)
            .await?;
        let tokens = issue_tokens(&mut tx, id, access_ttl).await?;
        let account = account_in(&mut tx, id).await?;
        tx.commit().await?;
        Ok(match account {
            Some(account) => Signup::Created(account, tokens),
            None => Signup::InvalidToken,
        })
    }

    /// Swaps a refresh token for a new pair; the old one stops working. A logout of the
    /// account takes turns with it, so the new pair is revoked or never made.
    pub async fn refresh(
        &self,
        refresh_token: &str,
        access_ttl: Duration,
    ) -> StoreResult<Option<(Account, IssuedTokens)>> {
        let mut tx = self.begin().await?;
        let owner: Option<i64> =
            sqlx::query_scalar("SELECT account_id FROM refresh_tokens WHERE token_hash = $1")
                .bind(hash(refresh_token))
                .fetch_optional(&mut *tx.tx)
                .await?;
        let Some(owner) = owner else {
            return Ok(None);
        };
        tx.serialize_on(Serial::Tokens(owner)).await?;
        // Read again after the turn: a logout before it took the token.
        let account_id: Option<i64> = sqlx::query_scalar(
            "DELETE FROM refresh_tokens WHERE token_hash = $1 AND expires_at > $2 RETURNING account_id",
        )
        .bind(hash(refresh_token))
        .bind(now_ms())
        .fetch_optional(&mut *tx.tx)
        .await?;
        let Some(account_id) = account_id else {
            return Ok(None);
        };
        let tokens = issue_tokens(&mut tx, account_id, access_ttl).await?;
        let account = account_in(&mut tx, account_id).await?;
        tx.commit().await?;
        Ok(account.map(|a| (a, tokens)))
    }

    /// Revokes every token of the account.
    pub async fn logout(&self, account_id: i64) -> StoreResult<()> {
        let mut tx = self.begin().await?;
        tx.serialize_on(Serial::Tokens(account_id)).await?;
        for table in ["refresh_tokens", "access_tokens"] {
            sqlx::query(&format!("DELETE FROM {table} WHERE account_id = $1"))
                .bind(account_id)
                .execute(&mut *tx.tx)
                .await?;
        }
        tx.commit().await
    }

    /// The account an access token belongs to, if it is valid now. Read with the other
    /// tokens asked at the same moment.
    pub async fn account_for_access_token(&self, token: &str) -> StoreResult<Option<i64>> {
        self.inner.token_accounts.get(hash(token)).await
    }
}

/// The accounts of those of these hashed access tokens that have not expired, read
/// together (see `lookups`).
pub(super) async fn token_accounts(
    pool: AnyPool,
    backend: Backend,
    hashes: Vec<String>,
) -> StoreResult<HashMap<String, i64>> {
    let sql = format!(
        "SELECT token_hash, account_id FROM access_tokens WHERE expires_at > $1 AND {}",
        json_in!(backend, json_texts, "token_hash", "$2")
    );
    Ok(sqlx::query_as::<_, (String, i64)>(&sql)
        .bind(now_ms())
        .bind(json_list(&hashes))
        .fetch_all(&pool)
        .await?
        .into_iter()
        .collect())
}

async fn issue_tokens(
    tx: &mut WriteTx,
    account_id: i64,
    access_ttl: Duration,
) -> StoreResult<IssuedTokens> {
    let now = now_ms();
    let access_token = random_token();
    let refresh_token = random_token();
    sqlx::query(
        "INSERT INTO access_tokens (token_hash, account_id, expires_at) VALUES ($1, $2, $3)",
    )
    .bind(hash(&access_token))
    .bind(account_id)
    .bind(now + access_ttl.as_millis() as i64)
    .execute(&mut *tx.tx)
    .await?;
    sqlx::query(
        "INSERT INTO refresh_tokens (token_hash, account_id, expires_at) VALUES ($1, $2, $3)",
    )
    .bind(hash(&refresh_token))
    .bind(account_id)
    .bind(now + REFRESH_TTL_MS)
    .execute(&mut *tx.tx)
    .await?;
    // Expired access tokens of this account are of no further use.
    sqlx::query("DELETE FROM access_tokens WHERE account_id = $1 AND expires_at < $2")
        .bind(account_id)
        .bind(now)
        .execute(&mut *tx.tx)
        .await?;
    Ok(IssuedTokens {
        access_token,
        refresh_token,
        expires_in: access_ttl.as_secs(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_random_and_hashed() {
        let a = random_token();
        assert_eq!(a.len(), 64);
        assert_ne!(a, random_token());
        assert_eq!(hash(&a).len(), 64);
        assert_ne!(hash(&a), a);
    }
}
