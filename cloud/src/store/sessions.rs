//! Sessions (parties): create, join, leave and read. Each write is one transaction
//! that keeps the size rule and "one session per account" under any concurrency,
//! on one node or many.
//!
//! How the rules hold:
//! * **size**: join and leave lock the session row first (`FOR UPDATE` on
//!   PostgreSQL; SQLite has one writer), then count and insert, so two joins of
//!   one session never count the same members.
//! * **one session per account**: `session_members.account_id` is UNIQUE; a race
//!   the checks did not see ends in a unique violation, reported as
//!   [`SessionError::AlreadyInSession`].
//! * **join order**: `session_members.id` grows with each insert, so ordering by
//!   it gives the members in join order and the longest-standing member first.

use serde::Serialize;
use sqlx::Row;

use super::{now_ms, rfc3339, Store, StoreError, WriteTx};
#[cfg(feature = "seeded-defects")]
use crate::defects::SeededDefect;

/// How many members a session may hold: 2 to 16.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MaxMembers(u8);

impl MaxMembers {
    pub const MIN: u8 = 2;
    pub const MAX: u8 = 16;

    /// `None` outside `MIN..=MAX`.
    pub fn new(n: i64) -> Option<MaxMembers> {
        (i64::from(Self::MIN)..=i64::from(Self::MAX))
            .contains(&n)
            .then_some(MaxMembers(n as u8))
    }

    pub fn get(self) -> u8 {
        self.0
    }
}

/// A session as the API shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Session {
    pub id: i64,
    pub leader: i64,
    /// In join order.
    pub members: Vec<i64>,
    pub max_members: i64,
    pub created_at: String,
}

/// Why a session call was refused.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error("no such session")]
    NotFound,
    #[error("the account is already in a session")]
    AlreadyInSession,
    #[error("only a friend of the leader, not blocked by or blocking a member, may join")]
    NotAllowed,
    #[error("the session is full")]
    Full,
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<sqlx::Error> for SessionError {
    fn from(e: sqlx::Error) -> Self {
        SessionError::Store(e.into())
    }
}

/// What a member's leaving did to the session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Departure {
    /// The last member left: the session is gone.
    Closed,
    /// Others remain (in join order); `new_leader` is set when the leader left.
    Left {
        remaining: Vec<i64>,
        new_leader: Option<i64>,
    },
}

/// The outcome of `leaver` leaving a session with these `members` (in join
/// order) and this `leader`; `None` when `leaver` is not a member. Leadership
/// goes to the longest-standing remaining member.
pub(crate) fn depart(members: &[i64], leader: i64, leaver: i64) -> Option<Departure> {
    if !members.contains(&leaver) {
        return None;
    }
    let remaining: Vec<i64> = members.iter().copied().filter(|&m| m != leaver).collect();
    #[cfg(feature = "seeded-defects")]
    if crate::defects::active(SeededDefect::NewestLeads) {
        return Some(match remaining.last() {
            None => Departure::Closed,
            Some(&last) => Departure::Left {
                new_leader: (leader == leaver).then_some(last),
                remaining,
            },
        });
    }
    Some(match remaining.first() {
        None => Departure::Closed,
        Some(&first) => Departure::Left {
            new_leader: (leader == leaver).then_some(first),
            remaining,
        },
    })
}

impl Store {
    /// Opens a session led by `leader`, its first member.
    pub async fn create_session(
        &self,
        leader: i64,
        max_members: MaxMembers,
    ) -> Result<Session, SessionError> {
        let now = now_ms();
        let mut tx = self.begin().await?;
        if session_of(&mut tx, leader).await?.is_some() {
            return Err(SessionError::AlreadyInSession);
        }
        let id: i64 = sqlx::query_scalar(
            "INSERT INTO sessions (leader, max_members, created_at) VALUES ($1, $2, $3) RETURNING id",
        )
        .bind(leader)
        .bind(i64::from(max_members.get()))
        .bind(now)
        .fetch_one(&mut *tx.tx)
        .await?;
        add_member(&mut tx, id, leader, now).await?;
        tx.commit().await?;
        Ok(Session {
            id,
            leader,
            members: vec![leader],
            max_members: i64::from(max_members.get()),
            created_at: rfc3339(now),
        })
    }

    /// Adds `account_id` to the session and returns it with the new member last.
    pub async fn join_session(
        &self,
        session_id: i64,
        account_id: i64,
    ) -> Result<Session, SessionError> {
        let now = now_ms();
        let mut tx = self.begin().await?;
        // The lock comes first: every join and leave of this session waits here,
        // so the count below is the count at insert time.
        let lock = tx.backend().for_update();
        let row = sqlx::query(&format!(
            "SELECT leader, max_members, created_at FROM sessions WHERE id = $1{lock}"
        ))
        .bind(session_id)
        .fetch_optional(&mut *tx.tx)
        .await?
        .ok_or(SessionError::NotFound)?;
        let leader: i64 = row.try_get("leader")?;
        let max_members: i64 = row.try_get("max_members")?;
        let created_at: i64 = row.try_get("created_at")?;
        if session_of(&mut tx, account_id).await?.is_some() {
            return Err(SessionError::AlreadyInSession);
        }
        if !may_join(&mut tx, session_id, leader, account_id).await? {
            return Err(SessionError::NotAllowed);
        }
        let mut members = members_of(&mut tx, session_id).await?;
        let seats = max_members;
        #[cfg(feature = "seeded-defects")]
        let seats = seats + i64::from(crate::defects::active(SeededDefect::SessionOneTooMany))
            - i64::from(crate::defects::active(SeededDefect::FullASeatEarly));
        if members.len() as i64 >= seats {
            return Err(SessionError::Full);
        }
        add_member(&mut tx, session_id, account_id, now).await?;
        tx.commit().await?;
        members.push(account_id);
        Ok(Session {
            id: session_id,
            leader,
            members,
            max_members,
            created_at: rfc3339(created_at),
        })
    }

    /// Removes `account_id` from the session, handing leadership over or closing
    /// the session as needed.
    pub async fn leave_session(
        &self,
        session_id: i64,
        account_id: i64,
    ) -> Result<Departure, SessionError> {
        let mut tx = self.begin().await?;
        let lock = tx.backend().for_update();
        let leader: i64 =
            sqlx::query_scalar(&format!("SELECT leader FROM sessions WHERE id = $1{lock}"))
                .bind(session_id)
                .fetch_optional(&mut *tx.tx)
                .await?
                .ok_or(SessionError::NotFound)?;
        let members = members_of(&mut tx, session_id).await?;
        let departure = depart(&members, leader, account_id).ok_or(SessionError::NotFound)?;
        sqlx::query("DELETE FROM session_members WHERE session_id = $1 AND account_id = $2")
            .bind(session_id)
            .bind(account_id)
            .execute(&mut *tx.tx)
            .await?;
        match &departure {
            Departure::Closed => {
                sqlx::query("DELETE FROM sessions WHERE id = $1")
                    .bind(session_id)
                    .execute(&mut *tx.tx)
                    .await?;
            }
            Departure::Left {
                new_leader: Some(new_leader),
                ..
            } => {
                sqlx::query("UPDATE sessions SET leader = $1 WHERE id = $2")
                    .bind(new_leader)
                    .bind(session_id)
                    .execute(&mut *tx.tx)
                    .await?;
            }
            Departure::Left {
                new_leader: None, ..
            } => {}
        }
        tx.commit().await?;
        Ok(departure)
    }

    /// The session as `viewer` sees it; `None` unless `viewer` is a member.
    pub async fn session_for_member(
        &self,
        session_id: i64,
        viewer: i64,
    ) -> Result<Option<Session>, StoreError> {
        // One statement, so the session and its members come from one snapshot.
        let rows = sqlx::query(
            "SELECT s.leader, s.max_members, s.created_at, m.account_id \
             FROM sessions s JOIN session_members m ON m.session_id = s.id \
             WHERE s.id = $1 ORDER BY m.id",
        )
        .bind(session_id)
        .fetch_all(self.reader())
        .await?;
        let Some(first) = rows.first() else {
            return Ok(None);
        };
        let members = rows
            .iter()
            .map(|r| r.try_get("account_id"))
            .collect::<Result<Vec<i64>, _>>()?;
        if !members.contains(&viewer) {
            return Ok(None);
        }
        Ok(Some(Session {
            id: session_id,
            leader: first.try_get("leader")?,
            members,
            max_members: first.try_get("max_members")?,
            created_at: rfc3339(first.try_get("created_at")?),
        }))
    }
}

/// The session the account is in, if any.
async fn session_of(tx: &mut WriteTx, account_id: i64) -> Result<Option<i64>, sqlx::Error> {
    sqlx::query_scalar("SELECT session_id FROM session_members WHERE account_id = $1")
        .bind(account_id)
        .fetch_optional(&mut *tx.tx)
        .await
}

/// The members in join order.
async fn members_of(tx: &mut WriteTx, session_id: i64) -> Result<Vec<i64>, sqlx::Error> {
    sqlx::query_scalar("SELECT account_id FROM session_members WHERE session_id = $1 ORDER BY id")
        .bind(session_id)
        .fetch_all(&mut *tx.tx)
        .await
}

/// True when `joiner` is a friend of the leader and no block stands between
/// `joiner` and any member, in either direction.
async fn may_join(
    tx: &mut WriteTx,
    session_id: i64,
    leader: i64,
    joiner: i64,
) -> Result<bool, sqlx::Error> {
    let row = sqlx::query(
        "SELECT \
           (SELECT COUNT(*) FROM friendships WHERE account_id = $1 AND friend_id = $2) AS friend, \
           (SELECT COUNT(*) FROM blocks b JOIN session_members m ON m.session_id = $3 \
              AND ((b.blocker_id = $2 AND b.blocked_id = m.account_id) \
                OR (b.blocked_id = $2 AND b.blocker_id = m.account_id))) AS blocks",
    )
    .bind(leader)
    .bind(joiner)
    .bind(session_id)
    .fetch_one(&mut *tx.tx)
    .await?;
    let friend: i64 = row.try_get("friend")?;
    let blocks: i64 = row.try_get("blocks")?;
    Ok(friend > 0 && blocks == 0)
}

/// Inserts a member; losing the race on the UNIQUE account id means the account
/// joined another session meanwhile.
async fn add_member(
    tx: &mut WriteTx,
    session_id: i64,
    account_id: i64,
    now: i64,
) -> Result<(), SessionError> {
    sqlx::query(
        "INSERT INTO session_members (session_id, account_id, joined_at) VALUES ($1, $2, $3)",
    )
    .bind(session_id)
    .bind(account_id)
    .bind(now)
    .execute(&mut *tx.tx)
    .await
    .map_err(|e| match StoreError::from(e) {
        e if e.is_unique_violation() => SessionError::AlreadyInSession,
        e => SessionError::Store(e),
    })?;
    Ok(())
}

/// A store on a fresh SQLite file (or on PostgreSQL) with helpers to make
/// accounts and relations, for the tests of this module and of `cards`.
#[cfg(test)]
pub(super) mod fixture {
    use std::path::PathBuf;
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::time::Duration;

    use crate::metrics::Metrics;
    use crate::store::{now_ms, Store, StoreOptions};

    pub struct Fixture {
        pub store: Store,
        file: Option<PathBuf>,
    }

    impl Drop for Fixture {
        fn drop(&mut self) {
            if let Some(file) = &self.file {
                for suffix in ["", "-wal", "-shm"] {
                    let mut name = file.clone().into_os_string();
                    name.push(suffix);
                    let _ = std::fs::remove_file(name);
                }
            }
        }
    }

    async fn open_url(url: &str) -> Store {
        let opts = StoreOptions {
            url: url.to_string(),
            connections: 4,
            acquire_timeout: Duration::from_secs(10),
            timeouts: crate::config::DbTimeouts::default(),
        };
        Store::open(&opts, Metrics::default().pool)
            .await
            .expect("open store")
    }

    /// A store on the PostgreSQL database named by `ANYPLAY_TEST_POSTGRES_URL`,
    /// which `deploy/test.sh` starts; without it these tests fail, not skip.
    pub async fn postgres() -> Store {
        let url = std::env::var("ANYPLAY_TEST_POSTGRES_URL").expect(
            "ANYPLAY_TEST_POSTGRES_URL is not set: run the tests with deploy/test.sh, which starts PostgreSQL",
        );
        open_url(&url).await
    }

    pub async fn sqlite() -> Fixture {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let file = std::env::temp_dir().join(format!(
            "anyplay-store-test-{}-{}.db",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        let store = open_url(&format!("sqlite:{}", file.display())).await;
        Fixture {
            store,
            file: Some(file),
        }
    }

    /// A new account with a handle unique across runs (PostgreSQL keeps data).
    pub async fn account(store: &Store, privacy: &str) -> i64 {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let tag = format!(
            "{}_{}_{}",
            now_ms() % 1_000_000_000,
            std::process::id() % 100_000,
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let mut tx = store.begin().await.expect("begin");
        let id: i64 = sqlx::query_scalar(
            "INSERT INTO accounts (email, handle, privacy, created_at) VALUES ($1, $2, $3, $4) RETURNING id",
        )
        .bind(format!("{tag}@test"))
        .bind(format!("t{tag}"))
        .bind(privacy)
        .bind(now_ms())
        .fetch_one(&mut *tx.tx)
        .await
        .expect("insert account");
        tx.commit().await.expect("commit");
        id
    }

    /// A valid access token of `account`, as a sign-in issues one.
    pub async fn token(store: &Store, account: i64) -> String {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let token = format!(
            "token-of-{account}-{}-{}",
            now_ms(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let mut tx = store.begin().await.expect("begin");
        sqlx::query(
            "INSERT INTO access_tokens (token_hash, account_id, expires_at) VALUES ($1, $2, $3)",
        )
        .bind(crate::store::auth::hash(&token))
        .bind(account)
        .bind(now_ms() + 3_600_000)
        .execute(&mut *tx.tx)
        .await
        .expect("insert token");
        tx.commit().await.expect("commit");
        token
    }

    /// Registers a connection of `account` with a token of its own, as a welcome does.
    pub async fn register(
        store: &Store,
        account: i64,
        connection_id: &str,
        node: &str,
        lease: Duration,
    ) -> crate::store::Registered {
        let token = token(store, account).await;
        store
            .register_connection(account, &token, connection_id, node, lease)
            .await
            .expect("register")
            .expect("a valid token")
    }

    pub async fn exec(store: &Store, sql: &str, a: i64, b: i64) {
        let mut tx = store.begin().await.expect("begin");
        sqlx::query(sql)
            .bind(a)
            .bind(b)
            .bind(now_ms())
            .execute(&mut *tx.tx)
            .await
            .expect("exec");
        tx.commit().await.expect("commit");
    }

    pub async fn befriend(store: &Store, a: i64, b: i64) {
        let sql = "INSERT INTO friendships (account_id, friend_id, since) VALUES ($1, $2, $3)";
        exec(store, sql, a, b).await;
        exec(store, sql, b, a).await;
    }

    /// Waits until `n` calls wait for the writer: while a test holds the writer's turn
    /// (SQLite), they all land in the next batch, in the order they queued.
    pub async fn until_queued(store: &Store, n: i64) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while store.metrics().waiting.get() < n {
            assert!(
                tokio::time::Instant::now() < deadline,
                "only {} of {n} calls queued for the writer after 10 s",
                store.metrics().waiting.get()
            );
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }

    pub async fn block(store: &Store, blocker: i64, blocked: i64) {
        exec(
            store,
            "INSERT INTO blocks (blocker_id, blocked_id, at) VALUES ($1, $2, $3)",
            blocker,
            blocked,
        )
        .await;
    }
}

#[cfg(test)]
mod tests {
    use super::fixture::{account, befriend, block, postgres, sqlite};
    use super::*;

    #[test]
    fn max_members_is_two_to_sixteen() {
        assert_eq!(MaxMembers::new(1), None);
        assert_eq!(MaxMembers::new(2).map(MaxMembers::get), Some(2));
        assert_eq!(MaxMembers::new(16).map(MaxMembers::get), Some(16));
        assert_eq!(MaxMembers::new(17), None);
        assert_eq!(MaxMembers::new(-3), None);
        assert_eq!(MaxMembers::new(i64::MAX), None);
    }

    #[test]
    fn a_non_member_cannot_leave() {
        assert_eq!(depart(&[1, 2], 1, 3), None);
    }

    #[test]
    fn the_last_member_closes_the_session() {
        assert_eq!(depart(&[5], 5, 5), Some(Departure::Closed));
    }

    #[test]
    fn a_leaving_leader_hands_over_to_the_longest_standing_member() {
        assert_eq!(
            depart(&[7, 3, 9], 7, 7),
            Some(Departure::Left {
                remaining: vec![3, 9],
                new_leader: Some(3)
            })
        );
        // After an earlier hand-over the leader need not be the first joiner.
        assert_eq!(
            depart(&[3, 9, 4], 9, 9),
            Some(Departure::Left {
                remaining: vec![3, 4],
                new_leader: Some(3)
            })
        );
    }

    #[test]
    fn a_member_leaving_keeps_the_leader() {
        assert_eq!(
            depart(&[7, 3, 9], 7, 3),
            Some(Departure::Left {
                remaining: vec![7, 9],
                new_leader: None
            })
        );
    }

    async fn leader_with_friends(store: &Store, friends: usize) -> (i64, Vec<i64>) {
        let leader = account(store, "friends").await;
        let mut ids = Vec::new();
        for _ in 0..friends {
            let f = account(store, "friends").await;
            befriend(store, leader, f).await;
            ids.push(f);
        }
        (leader, ids)
    }

    #[tokio::test]
    async fn join_leave_and_read_follow_the_rules_on_sqlite() {
        join_leave_and_read_follow_the_rules(&sqlite().await.store).await;
    }

    #[tokio::test]
    async fn join_leave_and_read_follow_the_rules_on_postgres() {
        join_leave_and_read_follow_the_rules(&postgres().await).await;
    }

    async fn join_leave_and_read_follow_the_rules(store: &Store) {
        let (leader, friends) = leader_with_friends(store, 3).await;
        let (a, b, c) = (friends[0], friends[1], friends[2]);
        let stranger = account(store, "public").await;
        let max = MaxMembers::new(3).expect("valid");

        let s = store.create_session(leader, max).await.expect("create");
        assert_eq!(
            (s.leader, s.members.clone(), s.max_members),
            (leader, vec![leader], 3)
        );
        assert!(matches!(
            store.create_session(leader, max).await,
            Err(SessionError::AlreadyInSession)
        ));
        assert!(matches!(
            store.join_session(i64::MAX, a).await,
            Err(SessionError::NotFound)
        ));
        assert!(matches!(
            store.join_session(s.id, stranger).await,
            Err(SessionError::NotAllowed)
        ));

        let joined = store.join_session(s.id, a).await.expect("join a");
        assert_eq!(joined.members, vec![leader, a]);
        assert!(matches!(
            store.join_session(s.id, a).await,
            Err(SessionError::AlreadyInSession)
        ));
        block(store, b, a).await;
        assert!(matches!(
            store.join_session(s.id, b).await,
            Err(SessionError::NotAllowed)
        ));
        store.join_session(s.id, c).await.expect("join c");
        let d = account(store, "friends").await;
        befriend(store, leader, d).await;
        assert!(matches!(
            store.join_session(s.id, d).await,
            Err(SessionError::Full)
        ));

        assert_eq!(
            store
                .session_for_member(s.id, stranger)
                .await
                .expect("read"),
            None
        );
        let seen = store
            .session_for_member(s.id, c)
            .await
            .expect("read")
            .expect("member");
        assert_eq!(seen.members, vec![leader, a, c]);
        assert_eq!(seen.created_at, s.created_at);

        assert!(matches!(
            store.leave_session(s.id, stranger).await,
            Err(SessionError::NotFound)
        ));
        assert_eq!(
            store.leave_session(s.id, leader).await.expect("leave"),
            Departure::Left {
                remaining: vec![a, c],
                new_leader: Some(a)
            }
        );
        let seen = store
            .session_for_member(s.id, a)
            .await
            .expect("read")
            .expect("member");
        assert_eq!((seen.leader, seen.members), (a, vec![a, c]));
        store.leave_session(s.id, c).await.expect("leave c");
        assert_eq!(
            store.leave_session(s.id, a).await.expect("leave a"),
            Departure::Closed
        );
        assert_eq!(store.session_for_member(s.id, a).await.expect("read"), None);
        assert!(matches!(
            store.join_session(s.id, d).await,
            Err(SessionError::NotFound)
        ));
        // Everyone is free to start again.
        store.create_session(a, max).await.expect("create again");
    }

    /// 30 joins at once at a session of 4: exactly 3 get in, on every store given.
    async fn concurrent_joins_keep_the_size(stores: &[Store]) {
        let (leader, friends) = leader_with_friends(&stores[0], 30).await;
        let s = stores[0]
            .create_session(leader, MaxMembers::new(4).expect("valid"))
            .await
            .expect("create");
        let joins = friends.iter().enumerate().map(|(i, &f)| {
            let store = stores[i % stores.len()].clone();
            tokio::spawn(async move { store.join_session(s.id, f).await })
        });
        let mut joined = 0;
        for join in joins.collect::<Vec<_>>() {
            match join.await.expect("task") {
                Ok(_) => joined += 1,
                Err(SessionError::Full) => {}
                Err(e) => panic!("unexpected {e:?}"),
            }
        }
        assert_eq!(joined, 3);
        let seen = stores[0]
            .session_for_member(s.id, leader)
            .await
            .expect("read")
            .expect("member");
        assert_eq!(seen.members.len(), 4);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn concurrent_joins_keep_the_size_on_sqlite() {
        let fx = sqlite().await;
        concurrent_joins_keep_the_size(std::slice::from_ref(&fx.store)).await;
    }

    /// Two stores on one PostgreSQL database stand for two nodes.
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn concurrent_joins_keep_the_size_on_postgres_across_nodes() {
        concurrent_joins_keep_the_size(&[postgres().await, postgres().await]).await;
    }
}
