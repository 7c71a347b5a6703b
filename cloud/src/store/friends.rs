//! Friends, friend requests and blocks: the lists, the rules, and the statements of
//! every change to the relation of two accounts.
//!
//! Every write that changes how two accounts relate first locks both account rows,
//! in id order, on PostgreSQL (SQLite's single writer already serialises). So two
//! calls about the same pair never interleave, and the limits, which count rows of
//! one account, hold whatever the concurrency across nodes: every write that adds
//! to a count holds the lock of the account counted. Requests and accepts, the bulk
//! of the writes, go many to a transaction ([`super::friend_writes`]); their
//! statements here take many pairs at once.

use std::collections::HashMap;
use std::time::Duration;

use serde::ser::SerializeStruct;
use serde::{Serialize, Serializer};
use sqlx::Row;

use super::json_list::{json_in, json_list, json_rows};
use super::presence::version_from_db;
use super::{now_ms, rfc3339, Backend, PresenceState, Store, StoreError, StoreResult, WriteTx};
use crate::config::FriendLimits;
use crate::events::AccountRef;

/// The window of the young accounts' daily request limit.
pub(super) const DAY: Duration = Duration::from_secs(24 * 3600);

/// Which friend limit a call ran into; the error object names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LimitKind {
    /// One of the two accounts has the most friends allowed.
    Friends,
    /// The caller has the most open outgoing requests allowed.
    Outgoing,
    /// A young caller has sent the most requests allowed in 24 h.
    Daily,
}

impl LimitKind {
    pub fn as_str(self) -> &'static str {
        match self {
            LimitKind::Friends => "friends",
            LimitKind::Outgoing => "outgoing",
            LimitKind::Daily => "daily",
        }
    }
}

impl std::fmt::Display for LimitKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            LimitKind::Friends => "the friend limit is reached",
            LimitKind::Outgoing => "too many open outgoing friend requests",
            LimitKind::Daily => "a new account may send no more friend requests today",
        })
    }
}

/// Why a friend request, an accept or a block was refused.
#[derive(Debug, thiserror::Error)]
pub enum FriendError {
    /// No such account, no such request, or (on purpose the same) the target blocked the caller.
    #[error("not found")]
    NotFound,
    #[error("you have blocked this account")]
    Blocked,
    #[error("you cannot send a friend request to yourself")]
    CannotFriendSelf,
    #[error("you cannot block yourself")]
    CannotBlockSelf,
    #[error("you are already friends")]
    AlreadyFriends,
    #[error("you have already sent this account a friend request")]
    AlreadyRequested,
    #[error("{0}")]
    LimitReached(LimitKind),
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<sqlx::Error> for FriendError {
    fn from(e: sqlx::Error) -> Self {
        FriendError::Store(e.into())
    }
}

/// What `GET /v1/friends` shows, as the contract shapes it.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct FriendsOverview {
    pub friends: Vec<Friend>,
    pub incoming: Vec<PendingRequest>,
    pub outgoing: Vec<PendingRequest>,
    pub blocked: Vec<AccountRef>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Friend {
    pub account_id: i64,
    pub handle: String,
    pub since: String,
    #[serde(serialize_with = "presence_json")]
    pub presence: PresenceState,
}

/// A friend request as either side lists it: the other account and when it was sent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PendingRequest {
    pub account_id: i64,
    pub handle: String,
    pub at: String,
}

fn presence_json<S: Serializer>(p: &PresenceState, s: S) -> Result<S::Ok, S::Error> {
    let mut st = s.serialize_struct("presence", 3)?;
    st.serialize_field("online", &p.online)?;
    st.serialize_field("activity", &p.activity)?;
    st.serialize_field("version", &p.version)?;
    st.end()
}

/// What a friend request did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RequestOutcome {
    /// A new request from `caller` to `target`.
    Requested { caller: AccountRef, target: i64 },
    /// `target` had already asked `caller`: that request is accepted, they are friends.
    Friends { caller: AccountRef, target: i64 },
}

/// What a block did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockOutcome {
    /// The two were friends until now (the blocked account hears `friend_removed`).
    pub were_friends: bool,
}

/// What a friend request or an accept depends on, read under the pair's lock:
/// "caller" is who calls, "target" the other account of the pair.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct PairFacts {
    target_blocked_caller: bool,
    caller_blocked_target: bool,
    already_friends: bool,
    already_requested: bool,
    /// The target has an open request to the caller.
    they_asked: bool,
    caller_friends: u64,
    target_friends: u64,
    caller_outgoing: u64,
    caller_sent_today: u64,
    pub(super) caller_is_young: bool,
}

/// What a friend request turns into when no rule refuses it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Decision {
    Request,
    AcceptTheirs,
}

/// The rules of a friend request, in the order the contract's errors take precedence.
pub(super) fn decide_request(
    f: &PairFacts,
    limits: &FriendLimits,
) -> Result<Decision, FriendError> {
    #[cfg(feature = "seeded-defects")]
    if crate::defects::active(crate::defects::SeededDefect::BlockRefusalsSwapped) {
        if f.target_blocked_caller {
            return Err(FriendError::Blocked);
        }
        if f.caller_blocked_target {
            return Err(FriendError::NotFound);
        }
    }
    // Indistinguishable from "no such handle", so a block stays invisible.
    if f.target_blocked_caller {
        return Err(FriendError::NotFound);
    }
    if f.caller_blocked_target {
        return Err(FriendError::Blocked);
    }
    if f.already_friends {
        return Err(FriendError::AlreadyFriends);
    }
    if f.already_requested {
        return Err(FriendError::AlreadyRequested);
    }
    if f.they_asked {
        // Accepting is not sending: only the friend limit of both sides applies.
        check_friend_limit(f.caller_friends, f.target_friends, limits)?;
        return Ok(Decision::AcceptTheirs);
    }
    // A caller with a full friend list could never have this request accepted.
    check_friend_limit(f.caller_friends, 0, limits)?;
    if f.caller_outgoing >= u64::from(limits.max_outgoing) {
        return Err(FriendError::LimitReached(LimitKind::Outgoing));
    }
    let daily = limits.daily_requests_new;
    #[cfg(feature = "seeded-defects")]
    let daily = daily
        / (1 + u32::from(crate::defects::active(
            crate::defects::SeededDefect::DailyLimitHalved,
        )));
    #[cfg(feature = "seeded-defects")]
    let daily = match crate::defects::active(crate::defects::SeededDefect::DailyLimitIgnored) {
        true => u32::MAX,
        false => daily,
    };
    if f.caller_is_young && f.caller_sent_today >= u64::from(daily) {
        return Err(FriendError::LimitReached(LimitKind::Daily));
    }
    Ok(Decision::Request)
}

/// The rules of accepting the target's request: it must be open, and both sides have room.
pub(super) fn decide_accept(f: &PairFacts, limits: &FriendLimits) -> Result<(), FriendError> {
    if !f.they_asked {
        return Err(FriendError::NotFound);
    }
    check_friend_limit(f.caller_friends, f.target_friends, limits)
}

/// Two accounts may become friends while both have room for one more.
fn check_friend_limit(
    a_friends: u64,
    b_friends: u64,
    limits: &FriendLimits,
) -> Result<(), FriendError> {
    if a_friends.max(b_friends) >= u64::from(limits.max_friends) {
        return Err(FriendError::LimitReached(LimitKind::Friends));
    }
    Ok(())
}

/// An account row read under its lock.
pub(super) struct LockedAccount {
    pub(super) id: i64,
    pub(super) handle: String,
    pub(super) created_at: i64,
}

impl LockedAccount {
    pub(super) fn reference(&self) -> AccountRef {
        AccountRef {
            account_id: self.id,
            handle: self.handle.clone(),
        }
    }
}

/// The rows of these accounts, locked in id order on PostgreSQL (one order for every
/// transaction: no deadlock), by id; an id with no account is absent.
pub(super) async fn lock_accounts(
    tx: &mut WriteTx,
    ids: &[i64],
) -> StoreResult<HashMap<i64, LockedAccount>> {
    let backend = tx.backend();
    let sql = format!(
        "SELECT id, handle, created_at FROM accounts WHERE {} ORDER BY id{}",
        json_in!(backend, json_ids, "id", "$1"),
        backend.for_update()
    );
    let mut accounts = HashMap::with_capacity(ids.len());
    for row in sqlx::query(&sql)
        .bind(json_list(ids))
        .fetch_all(&mut *tx.tx)
        .await?
    {
        let account = LockedAccount {
            id: row.try_get("id")?,
            handle: row.try_get("handle")?,
            created_at: row.try_get("created_at")?,
        };
        accounts.insert(account.id, account);
    }
    Ok(accounts)
}

/// Locks the pair's rows (see [`lock_accounts`]).
async fn lock_pair(tx: &mut WriteTx, me: i64, other: i64) -> StoreResult<()> {
    lock_accounts(tx, &[me, other]).await.map(drop)
}

fn count(row: &sqlx::any::AnyRow, column: &str) -> StoreResult<u64> {
    Ok(row.try_get::<i64, _>(column)?.max(0) as u64)
}

/// The facts of each (caller, target) pair, in the order given, in one statement.
/// `caller_is_young` is left false: it depends on the caller's row and the limits.
pub(super) async fn pair_facts(
    tx: &mut WriteTx,
    pairs: &[(i64, i64)],
    now: i64,
) -> StoreResult<Vec<PairFacts>> {
    let calls = json_rows(tx.backend(), 1, &["i", "caller", "target"]);
    let sql = format!(
        "WITH calls AS ({calls}) \
         SELECT calls.i, \
           (SELECT COUNT(*) FROM blocks WHERE blocker_id = calls.target AND blocked_id = calls.caller) AS target_blocked_caller, \
           (SELECT COUNT(*) FROM blocks WHERE blocker_id = calls.caller AND blocked_id = calls.target) AS caller_blocked_target, \
           (SELECT COUNT(*) FROM friendships WHERE account_id = calls.caller AND friend_id = calls.target) AS already_friends, \
           (SELECT COUNT(*) FROM friend_requests WHERE from_id = calls.caller AND to_id = calls.target) AS already_requested, \
           (SELECT COUNT(*) FROM friend_requests WHERE from_id = calls.target AND to_id = calls.caller) AS they_asked, \
           (SELECT COUNT(*) FROM friendships WHERE account_id = calls.caller) AS caller_friends, \
           (SELECT COUNT(*) FROM friendships WHERE account_id = calls.target) AS target_friends, \
           (SELECT COUNT(*) FROM friend_requests WHERE from_id = calls.caller) AS caller_outgoing, \
           (SELECT COUNT(*) FROM friend_request_log WHERE from_id = calls.caller AND at > $2) AS caller_sent_today \
         FROM calls"
    );
    let numbered: Vec<(usize, i64, i64)> = pairs
        .iter()
        .enumerate()
        .map(|(i, &(caller, target))| (i, caller, target))
        .collect();
    let rows = sqlx::query(&sql)
        .bind(json_list(&numbered))
        .bind(now - ms(DAY))
        .fetch_all(&mut *tx.tx)
        .await?;
    let mut facts = vec![PairFacts::default(); pairs.len()];
    for row in rows {
        let i: i64 = row.try_get("i")?;
        facts[i as usize] = PairFacts {
            target_blocked_caller: count(&row, "target_blocked_caller")? > 0,
            caller_blocked_target: count(&row, "caller_blocked_target")? > 0,
            already_friends: count(&row, "already_friends")? > 0,
            already_requested: count(&row, "already_requested")? > 0,
            they_asked: count(&row, "they_asked")? > 0,
            caller_friends: count(&row, "caller_friends")?,
            target_friends: count(&row, "target_friends")?,
            caller_outgoing: count(&row, "caller_outgoing")?,
            caller_sent_today: count(&row, "caller_sent_today")?,
            caller_is_young: false,
        };
    }
    Ok(facts)
}

/// Opens a request from each `(from, to)` pair, and logs it for the daily limit.
pub(super) async fn insert_requests(
    tx: &mut WriteTx,
    pairs: &[(i64, i64)],
    now: i64,
) -> StoreResult<()> {
    let rows = json_rows(tx.backend(), 1, &["a", "b"]);
    let statements = match tx.backend() {
        // SQLite has no writes inside WITH: two statements.
        Backend::Sqlite => vec![
            format!("INSERT INTO friend_requests (from_id, to_id, at) SELECT a, b, $2 FROM ({rows})"),
            format!("INSERT INTO friend_request_log (from_id, at) SELECT a, $2 FROM ({rows})"),
        ],
        Backend::Postgres => vec![format!(
            "WITH pairs AS ({rows}), \
             requested AS (INSERT INTO friend_requests (from_id, to_id, at) SELECT a, b, $2 FROM pairs) \
             INSERT INTO friend_request_log (from_id, at) SELECT a, $2 FROM pairs"
        )],
    };
    execute_each(tx, &statements, &json_list(pairs), now).await
}

/// Makes each pair friends (one row per direction) and drops their requests.
pub(super) async fn befriend(tx: &mut WriteTx, pairs: &[(i64, i64)], now: i64) -> StoreResult<()> {
    let both_ways: Vec<(i64, i64)> = pairs.iter().flat_map(|&(a, b)| [(a, b), (b, a)]).collect();
    let rows = json_rows(tx.backend(), 1, &["a", "b"]);
    let both_ways = json_list(&both_ways);
    let insert = match tx.backend() {
        Backend::Sqlite => {
            // SQLite has no writes inside WITH: the delete goes first, on its own.
            let drop = format!("DELETE FROM friend_requests WHERE (from_id, to_id) IN ({rows})");
            sqlx::query(&drop).bind(&both_ways).execute(&mut *tx.tx).await?;
            // `WHERE true`: SQLite cannot tell `ON CONFLICT` after `SELECT … FROM` from a join.
            format!(
                "INSERT INTO friendships (account_id, friend_id, since) \
                 SELECT a, b, $2 FROM ({rows}) WHERE true \
                 ON CONFLICT (account_id, friend_id) DO NOTHING"
            )
        }
        // `from_id = ANY(ARRAY(…))` probes the key's index (see `json_in`); the pair test
        // alone hashed a scan of every open request.
        Backend::Postgres => format!(
            "WITH pairs AS ({rows}), \
             dropped AS (DELETE FROM friend_requests WHERE from_id = ANY(ARRAY(SELECT a FROM pairs)) \
               AND (from_id, to_id) IN (SELECT a, b FROM pairs)) \
             INSERT INTO friendships (account_id, friend_id, since) SELECT a, b, $2 FROM pairs \
             ON CONFLICT (account_id, friend_id) DO NOTHING"
        ),
    };
    execute_each(tx, &[insert], &both_ways, now).await
}

/// Runs each statement with `$1` the rows and `$2` now.
async fn execute_each(
    tx: &mut WriteTx,
    statements: &[String],
    rows: &str,
    now: i64,
) -> StoreResult<()> {
    for sql in statements {
        sqlx::query(sql)
            .bind(rows)
            .bind(now)
            .execute(&mut *tx.tx)
            .await?;
    }
    Ok(())
}

async fn delete_requests_between(tx: &mut WriteTx, a: i64, b: i64) -> StoreResult<()> {
    sqlx::query("DELETE FROM friend_requests WHERE (from_id = $1 AND to_id = $2) OR (from_id = $2 AND to_id = $1)")
        .bind(a)
        .bind(b)
        .execute(&mut *tx.tx)
        .await?;
    Ok(())
}

/// Ends a friendship both ways; true when there was one.
async fn delete_friendship(tx: &mut WriteTx, a: i64, b: i64) -> StoreResult<bool> {
    let removed = sqlx::query(
        "DELETE FROM friendships WHERE (account_id = $1 AND friend_id = $2) OR (account_id = $2 AND friend_id = $1)",
    )
    .bind(a)
    .bind(b)
    .execute(&mut *tx.tx)
    .await?
    .rows_affected();
    Ok(removed > 0)
}

/// A pair-changing delete of at most one row, under the pair's lock; true when a row went.
async fn delete_one_under_lock(store: &Store, me: i64, other: i64, sql: &str) -> StoreResult<bool> {
    let mut tx = store.begin().await?;
    lock_pair(&mut tx, me, other).await?;
    let removed = sqlx::query(sql)
        .bind(me)
        .bind(other)
        .execute(&mut *tx.tx)
        .await?
        .rows_affected()
        > 0;
    tx.commit().await?;
    Ok(removed)
}

pub(super) fn ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

impl Store {
    /// Friends (with presence), incoming and outgoing requests and blocked accounts,
    /// read by one statement so the four lists are one consistent snapshot.
    pub async fn friends_overview(&self, account_id: i64) -> StoreResult<FriendsOverview> {
        let rows = sqlx::query(
            "SELECT 'friend' AS kind, a.id, a.handle, f.since AS at, \
                    p.activity, p.version, c.account_id AS online \
             FROM friendships f JOIN accounts a ON a.id = f.friend_id \
             LEFT JOIN presence p ON p.account_id = a.id \
             LEFT JOIN connections c ON c.account_id = a.id \
             WHERE f.account_id = $1 \
             UNION ALL \
             SELECT 'incoming', a.id, a.handle, r.at, NULL, NULL, NULL \
             FROM friend_requests r JOIN accounts a ON a.id = r.from_id WHERE r.to_id = $1 \
             UNION ALL \
             SELECT 'outgoing', a.id, a.handle, r.at, NULL, NULL, NULL \
             FROM friend_requests r JOIN accounts a ON a.id = r.to_id WHERE r.from_id = $1 \
             UNION ALL \
             SELECT 'blocked', a.id, a.handle, b.at, NULL, NULL, NULL \
             FROM blocks b JOIN accounts a ON a.id = b.blocked_id WHERE b.blocker_id = $1 \
             ORDER BY at, id",
        )
        .bind(account_id)
        .fetch_all(self.reader())
        .await?;
        let mut out = FriendsOverview::default();
        for row in rows {
            let kind: String = row.try_get("kind")?;
            let account_id: i64 = row.try_get("id")?;
            let handle: String = row.try_get("handle")?;
            let at: i64 = row.try_get("at")?;
            match kind.as_str() {
                "friend" => out.friends.push(Friend {
                    account_id,
                    handle,
                    since: rfc3339(at),
                    presence: PresenceState {
                        online: row.try_get::<Option<i64>, _>("online")?.is_some(),
                        activity: row
                            .try_get::<Option<String>, _>("activity")?
                            .unwrap_or_default(),
                        version: row
                            .try_get::<Option<i64>, _>("version")?
                            .map_or(0, version_from_db),
                    },
                }),
                "incoming" => out.incoming.push(PendingRequest {
                    account_id,
                    handle,
                    at: rfc3339(at),
                }),
                "outgoing" => out.outgoing.push(PendingRequest {
                    account_id,
                    handle,
                    at: rfc3339(at),
                }),
                _ => out.blocked.push(AccountRef { account_id, handle }),
            }
        }
        Ok(out)
    }

    /// `caller` asks the account with this (lower-cased) handle to be friends; when
    /// that account had already asked, this accepts its request instead.
    pub async fn send_friend_request(
        &self,
        caller: i64,
        handle: &str,
        limits: &FriendLimits,
    ) -> Result<RequestOutcome, FriendError> {
        self.inner
            .friend_writes
            .request(caller, handle, *limits)
            .await
    }

    /// `caller` accepts the open request of `from`; returns the caller's id and
    /// handle (what the requester hears in `friend_accepted`).
    pub async fn accept_friend_request(
        &self,
        caller: i64,
        from: i64,
        limits: &FriendLimits,
    ) -> Result<AccountRef, FriendError> {
        self.inner.friend_writes.accept(caller, from, *limits).await
    }

    /// `caller` declines the open request of `from`; false when there was none.
    pub async fn decline_friend_request(&self, caller: i64, from: i64) -> StoreResult<bool> {
        delete_one_under_lock(
            self,
            caller,
            from,
            "DELETE FROM friend_requests WHERE from_id = $2 AND to_id = $1",
        )
        .await
    }

    /// `caller` withdraws its own open request to `to`; false when there was none.
    pub async fn cancel_friend_request(&self, caller: i64, to: i64) -> StoreResult<bool> {
        delete_one_under_lock(
            self,
            caller,
            to,
            "DELETE FROM friend_requests WHERE from_id = $1 AND to_id = $2",
        )
        .await
    }

    /// `caller` ends its friendship with `friend`; false when they were not friends.
    pub async fn unfriend(&self, caller: i64, friend: i64) -> StoreResult<bool> {
        let mut tx = self.begin().await?;
        lock_pair(&mut tx, caller, friend).await?;
        let removed = delete_friendship(&mut tx, caller, friend).await?;
        tx.commit().await?;
        Ok(removed)
    }

    /// `caller` blocks `target`: their friendship and requests both ways end.
    /// Blocking again changes nothing and succeeds.
    pub async fn block(&self, caller: i64, target: i64) -> Result<BlockOutcome, FriendError> {
        if caller == target {
            return Err(FriendError::CannotBlockSelf);
        }
        let mut tx = self.begin().await?;
        if lock_accounts(&mut tx, &[caller, target]).await?.len() < 2 {
            return Err(FriendError::NotFound);
        }
        #[cfg(feature = "seeded-defects")]
        let kept = crate::defects::active(crate::defects::SeededDefect::BlockKeepsFriends);
        #[cfg(not(feature = "seeded-defects"))]
        let kept = false;
        let were_friends = !kept && delete_friendship(&mut tx, caller, target).await?;
        delete_requests_between(&mut tx, caller, target).await?;
        sqlx::query(
            "INSERT INTO blocks (blocker_id, blocked_id, at) VALUES ($1, $2, $3) \
             ON CONFLICT (blocker_id, blocked_id) DO NOTHING",
        )
        .bind(caller)
        .bind(target)
        .bind(now_ms())
        .execute(&mut *tx.tx)
        .await?;
        tx.commit().await?;
        Ok(BlockOutcome { were_friends })
    }

    /// `caller` lifts its block of `target`; false when there was none.
    pub async fn unblock(&self, caller: i64, target: i64) -> StoreResult<bool> {
        delete_one_under_lock(
            self,
            caller,
            target,
            "DELETE FROM blocks WHERE blocker_id = $1 AND blocked_id = $2",
        )
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> FriendLimits {
        FriendLimits {
            max_friends: 5,
            max_outgoing: 3,
            daily_requests_new: 2,
            new_account_age: DAY,
        }
    }

    fn refused(f: PairFacts) -> LimitKind {
        match decide_request(&f, &limits()) {
            Err(FriendError::LimitReached(kind)) => kind,
            other => panic!("expected a limit, got {other:?}"),
        }
    }

    #[test]
    fn a_plain_request_within_limits_is_sent() {
        assert_eq!(
            decide_request(&PairFacts::default(), &limits()).ok(),
            Some(Decision::Request)
        );
    }

    #[test]
    fn a_block_by_the_target_looks_like_no_such_account_and_comes_first() {
        let f = PairFacts {
            target_blocked_caller: true,
            caller_blocked_target: true,
            already_requested: true,
            ..Default::default()
        };
        assert!(matches!(
            decide_request(&f, &limits()),
            Err(FriendError::NotFound)
        ));
    }

    #[test]
    fn the_callers_own_block_comes_before_the_relation() {
        let f = PairFacts {
            caller_blocked_target: true,
            already_friends: true,
            ..Default::default()
        };
        assert!(matches!(
            decide_request(&f, &limits()),
            Err(FriendError::Blocked)
        ));
    }

    #[test]
    fn the_relation_comes_before_the_limits() {
        let full = PairFacts {
            caller_friends: 5,
            caller_outgoing: 3,
            ..Default::default()
        };
        let f = PairFacts {
            already_friends: true,
            ..full
        };
        assert!(matches!(
            decide_request(&f, &limits()),
            Err(FriendError::AlreadyFriends)
        ));
        let f = PairFacts {
            already_requested: true,
            ..full
        };
        assert!(matches!(
            decide_request(&f, &limits()),
            Err(FriendError::AlreadyRequested)
        ));
    }

    #[test]
    fn their_open_request_is_accepted_whatever_the_sending_limits() {
        let f = PairFacts {
            they_asked: true,
            caller_outgoing: 3,
            caller_sent_today: 2,
            caller_is_young: true,
            ..Default::default()
        };
        assert_eq!(
            decide_request(&f, &limits()).ok(),
            Some(Decision::AcceptTheirs)
        );
    }

    #[test]
    fn accepting_theirs_needs_room_on_both_sides() {
        let base = PairFacts {
            they_asked: true,
            ..Default::default()
        };
        let f = PairFacts {
            target_friends: 5,
            ..base
        };
        assert_eq!(refused(f), LimitKind::Friends);
        let f = PairFacts {
            caller_friends: 5,
            ..base
        };
        assert_eq!(refused(f), LimitKind::Friends);
    }

    #[test]
    fn limits_are_checked_friends_then_outgoing_then_daily() {
        let all = PairFacts {
            caller_friends: 5,
            caller_outgoing: 3,
            caller_sent_today: 2,
            caller_is_young: true,
            ..Default::default()
        };
        assert_eq!(refused(all), LimitKind::Friends);
        let f = PairFacts {
            caller_friends: 4,
            ..all
        };
        assert_eq!(refused(f), LimitKind::Outgoing);
        let f = PairFacts {
            caller_friends: 4,
            caller_outgoing: 2,
            ..all
        };
        assert_eq!(refused(f), LimitKind::Daily);
    }

    #[test]
    fn only_young_accounts_have_a_daily_limit() {
        let f = PairFacts {
            caller_sent_today: 50,
            caller_is_young: false,
            ..Default::default()
        };
        assert_eq!(decide_request(&f, &limits()).ok(), Some(Decision::Request));
    }

    #[test]
    fn a_target_with_a_full_friend_list_can_still_be_asked() {
        let f = PairFacts {
            target_friends: 5,
            ..Default::default()
        };
        assert_eq!(decide_request(&f, &limits()).ok(), Some(Decision::Request));
    }

    #[test]
    fn limit_kinds_have_the_contract_names() {
        let names: Vec<_> = [LimitKind::Friends, LimitKind::Outgoing, LimitKind::Daily]
            .map(LimitKind::as_str)
            .into();
        assert_eq!(names, ["friends", "outgoing", "daily"]);
    }

    #[test]
    fn the_overview_has_the_contract_shape() {
        let overview = FriendsOverview {
            friends: vec![Friend {
                account_id: 2,
                handle: "bob".into(),
                since: rfc3339(0),
                presence: PresenceState {
                    online: true,
                    activity: "menu".into(),
                    version: 3,
                },
            }],
            incoming: vec![PendingRequest {
                account_id: 3,
                handle: "cat".into(),
                at: rfc3339(0),
            }],
            outgoing: vec![],
            blocked: vec![AccountRef {
                account_id: 4,
                handle: "dan".into(),
            }],
        };
        assert_eq!(
            serde_json::to_value(&overview).unwrap(),
            serde_json::json!({
                "friends": [{"account_id": 2, "handle": "bob", "since": "1970-01-01T00:00:00Z",
                             "presence": {"online": true, "activity": "menu", "version": 3}}],
                "incoming": [{"account_id": 3, "handle": "cat", "at": "1970-01-01T00:00:00Z"}],
                "outgoing": [],
                "blocked": [{"account_id": 4, "handle": "dan"}],
            })
        );
    }
}
