//! Friend requests and accepts, many to a transaction.
//!
//! A friend graph fills in bursts: thousands of requests and accepts a second, each of
//! them, alone, a transaction of seven or eight statements behind SQLite's one writer.
//! Here they wait in a [`WriteQueue`]; each batch is split into groups in which no
//! account appears twice, and each group is one transaction of a few statements that
//! take all its pairs at once: lock the accounts, read every pair's facts, open the
//! requests, make the friendships.
//!
//! Each caller gets the answer its call would have had in some order of the batch's
//! calls, one at a time, which is all a client can ask of calls that were waiting at
//! the same moment (none was answered before another was made). Every rule reads only
//! rows of the pair's two accounts, so the calls of a group, on disjoint pairs, could
//! have run in any order, and the groups run one after another. A strict queue order
//! would not do: a friend graph chains calls through shared accounts (a-b, b-c, c-d,
//! ...), and kept in order it split a batch of 400 into 160 groups.

use std::collections::{HashMap, HashSet};

use sqlx::AnyPool;
use tokio::sync::oneshot;

use super::friends::{
    befriend, decide_accept, decide_request, insert_requests, lock_accounts, ms, pair_facts,
    Decision, FriendError, RequestOutcome,
};
use super::json_list::{json_in, json_list};
use super::lookups::Lookup;
use super::write_queue::{self, WriteQueue};
use super::{now_ms, Backend, StoreError, StoreResult, WriteTx, Writer};
use crate::config::FriendLimits;
use crate::events::AccountRef;
use crate::metrics::PoolMetrics;

/// The most calls in one transaction: its widest statement (the friendships, two
/// rows of three per call) stays at a few hundred parameters, which SQLite binds
/// cheaply (its binding grows with their square).
const MAX_GROUP: usize = 50;

/// The most calls one writer turn takes, so writers queued behind it wait a bounded time.
const MAX_BATCH: usize = 8 * MAX_GROUP;

/// The handle the store keeps.
pub(super) struct FriendWrites {
    queue: WriteQueue<Ready>,
    /// The account of each handle asked at the same moment (handles never change,
    /// so a request's target is found before it queues for the writer).
    handles: Lookup<String, i64>,
}

type Answer<T> = oneshot::Sender<Result<T, FriendError>>;

/// A call with both accounts of its pair known.
struct Ready {
    caller: i64,
    /// The account asked (a request) or whose request is accepted (an accept).
    other: i64,
    limits: FriendLimits,
    answer: Reply,
}

enum Reply {
    Request(Answer<RequestOutcome>),
    Accept(Answer<AccountRef>),
}

impl write_queue::Call for Ready {
    fn abandoned(&self) -> bool {
        match &self.answer {
            Reply::Request(answer) => answer.is_closed(),
            Reply::Accept(answer) => answer.is_closed(),
        }
    }
}

/// What a call did when no rule refused it.
struct Done {
    caller: AccountRef,
    befriended: bool,
}

impl Ready {
    fn finish(self, result: Result<Done, FriendError>) {
        // A send fails only when the caller stopped waiting; nobody is left to tell.
        match self.answer {
            Reply::Request(answer) => {
                let target = self.other;
                let _ = answer.send(result.map(|done| match done.befriended {
                    true => RequestOutcome::Friends {
                        caller: done.caller,
                        target,
                    },
                    false => RequestOutcome::Requested {
                        caller: done.caller,
                        target,
                    },
                }));
            }
            Reply::Accept(answer) => {
                let _ = answer.send(result.map(|done| done.caller));
            }
        }
    }
}

impl FriendWrites {
    /// Starts the writing task; handles are looked up on `readers`.
    pub(super) fn start(
        writer: Writer,
        readers: AnyPool,
        backend: Backend,
        metrics: PoolMetrics,
    ) -> Self {
        let pool = writer.pool.clone();
        let queue = WriteQueue::start(writer, metrics, MAX_BATCH, move |calls| {
            let pool = pool.clone();
            async move {
                for group in groups(calls) {
                    write_group(&pool, backend, group).await;
                }
            }
        });
        let handles =
            Lookup::start(move |handles| accounts_by_handle(readers.clone(), backend, handles));
        FriendWrites { queue, handles }
    }

    pub(super) async fn request(
        &self,
        caller: i64,
        handle: &str,
        limits: FriendLimits,
    ) -> Result<RequestOutcome, FriendError> {
        let target = self
            .handles
            .get(handle.to_string())
            .await?
            .ok_or(FriendError::NotFound)?;
        if target == caller {
            return Err(FriendError::CannotFriendSelf);
        }
        self.queue
            .ask(|answer| Ready {
                caller,
                other: target,
                limits,
                answer: Reply::Request(answer),
            })
            .await?
    }

    pub(super) async fn accept(
        &self,
        caller: i64,
        from: i64,
        limits: FriendLimits,
    ) -> Result<AccountRef, FriendError> {
        self.queue
            .ask(|answer| Ready {
                caller,
                other: from,
                limits,
                answer: Reply::Accept(answer),
            })
            .await?
    }
}

/// The accounts of these handles, for the [`Lookup`].
async fn accounts_by_handle(
    pool: AnyPool,
    backend: Backend,
    handles: Vec<String>,
) -> StoreResult<HashMap<String, i64>> {
    let sql = format!(
        "SELECT handle, id FROM accounts WHERE {}",
        json_in!(backend, json_texts, "handle", "$1")
    );
    Ok(sqlx::query_as::<_, (String, i64)>(&sql)
        .bind(json_list(&handles))
        .fetch_all(&pool)
        .await?
        .into_iter()
        .collect())
}

/// Splits calls into groups of at most [`MAX_GROUP`] with no account twice in a group:
/// each call goes to the first group with room that holds neither of its accounts, so
/// calls that share an account run in the order they came.
fn groups(calls: Vec<Ready>) -> Vec<Vec<Ready>> {
    let mut groups: Vec<(Vec<Ready>, HashSet<i64>)> = Vec::new();
    for call in calls {
        let free = |(group, accounts): &(Vec<Ready>, HashSet<i64>)| {
            group.len() < MAX_GROUP
                && !accounts.contains(&call.caller)
                && !accounts.contains(&call.other)
        };
        let g = match groups.iter().position(free) {
            Some(g) => g,
            None => {
                groups.push((Vec::new(), HashSet::new()));
                groups.len() - 1
            }
        };
        let (group, accounts) = &mut groups[g];
        accounts.extend([call.caller, call.other]);
        group.push(call);
    }
    groups.into_iter().map(|(group, _)| group).collect()
}

/// Writes a group in one transaction and answers its callers. When the transaction
/// fails, each call is tried alone, so only a call that cannot be written gets an error.
async fn write_group(pool: &AnyPool, backend: Backend, group: Vec<Ready>) {
    match transaction(pool, backend, &group).await {
        Ok(results) => {
            for (call, result) in group.into_iter().zip(results) {
                call.finish(result);
            }
        }
        Err(e) if group.len() == 1 => group
            .into_iter()
            .for_each(|call| call.finish(Err(FriendError::Store(StoreError::Shared(e.clone()))))),
        Err(_) => {
            for call in group {
                let result = match transaction(pool, backend, std::slice::from_ref(&call)).await {
                    Ok(mut results) => results.remove(0),
                    Err(e) => Err(FriendError::Store(StoreError::Shared(e))),
                };
                call.finish(result);
            }
        }
    }
}

/// One transaction for the group: each call's result, in the group's order. Refused
/// calls change nothing; the transaction fails only on a database error.
async fn transaction(
    pool: &AnyPool,
    backend: Backend,
    group: &[Ready],
) -> Result<Vec<Result<Done, FriendError>>, std::sync::Arc<StoreError>> {
    let inner = async {
        let now = now_ms();
        let mut tx = WriteTx {
            tx: pool.begin().await?,
            // The write queue holds the writer's turn for the whole batch.
            _turn: None,
            backend,
        };
        let ids: Vec<i64> = group.iter().flat_map(|c| [c.caller, c.other]).collect();
        let accounts = lock_accounts(&mut tx, &ids).await?;
        let pairs: Vec<(i64, i64)> = group.iter().map(|c| (c.caller, c.other)).collect();
        let facts = pair_facts(&mut tx, &pairs, now).await?;
        let mut requests = Vec::new();
        let mut friendships = Vec::new();
        let results: Vec<Result<Done, FriendError>> = group
            .iter()
            .zip(facts)
            .map(|(call, mut facts)| {
                // A request to an account that does not exist is refused by its handle
                // lookup; an accept from one finds no open request.
                let me = accounts.get(&call.caller).ok_or(FriendError::NotFound)?;
                facts.caller_is_young = me.created_at > now - ms(call.limits.new_account_age);
                let befriended = match call.answer {
                    Reply::Request(_) => {
                        decide_request(&facts, &call.limits)? == Decision::AcceptTheirs
                    }
                    Reply::Accept(_) => {
                        decide_accept(&facts, &call.limits)?;
                        true
                    }
                };
                match befriended {
                    true => friendships.push((call.caller, call.other)),
                    false => requests.push((call.caller, call.other)),
                }
                Ok(Done {
                    caller: me.reference(),
                    befriended,
                })
            })
            .collect();
        if !requests.is_empty() {
            insert_requests(&mut tx, &requests, now).await?;
        }
        if !friendships.is_empty() {
            befriend(&mut tx, &friendships, now).await?;
        }
        tx.commit().await?;
        Ok::<_, StoreError>(results)
    };
    inner.await.map_err(std::sync::Arc::new)
}

#[cfg(test)]
mod tests {
    use super::super::sessions::fixture::{account, block, postgres, sqlite, until_queued};
    use super::super::Store;
    use super::*;
    use std::time::Duration;

    fn limits() -> FriendLimits {
        FriendLimits {
            max_friends: 100,
            max_outgoing: 2,
            daily_requests_new: 50,
            new_account_age: Duration::from_secs(3600),
        }
    }

    fn ready(caller: i64, other: i64) -> Ready {
        Ready {
            caller,
            other,
            limits: limits(),
            answer: Reply::Accept(oneshot::channel().0),
        }
    }

    fn pairs(groups: &[Vec<Ready>]) -> Vec<Vec<(i64, i64)>> {
        groups
            .iter()
            .map(|g| g.iter().map(|c| (c.caller, c.other)).collect())
            .collect()
    }

    #[test]
    fn each_call_takes_the_first_group_free_of_its_accounts() {
        let calls = [
            (1, 2),
            (3, 4),
            (2, 3),
            (5, 6),
            (1, 2),
            (7, 8),
            (4, 9),
            (1, 5),
        ];
        let split = groups(calls.iter().map(|&(a, b)| ready(a, b)).collect());
        assert_eq!(
            pairs(&split),
            [
                vec![(1, 2), (3, 4), (5, 6), (7, 8)],
                vec![(2, 3), (4, 9), (1, 5)],
                vec![(1, 2)],
            ]
        );
        let calls = [(1, 2), (2, 3), (3, 1)];
        let split = groups(calls.iter().map(|&(a, b)| ready(a, b)).collect());
        assert_eq!(pairs(&split), [[(1, 2)], [(2, 3)], [(3, 1)]]);
    }

    #[test]
    fn a_group_holds_at_most_max_group_calls() {
        let calls = (0..MAX_GROUP as i64 + 1).map(|i| ready(2 * i, 2 * i + 1));
        let split = groups(calls.collect());
        assert_eq!(
            split.iter().map(Vec::len).collect::<Vec<_>>(),
            [MAX_GROUP, 1]
        );
    }

    async fn handle(store: &Store, id: i64) -> String {
        store.account(id).await.unwrap().unwrap().handle
    }

    type Pending<T> = tokio::task::JoinHandle<Result<T, FriendError>>;

    fn request(store: &Store, caller: i64, handle: &str) -> Pending<RequestOutcome> {
        let (store, handle) = (store.clone(), handle.to_string());
        tokio::spawn(async move { store.send_friend_request(caller, &handle, &limits()).await })
    }

    fn accept(store: &Store, caller: i64, from: i64) -> Pending<AccountRef> {
        let store = store.clone();
        tokio::spawn(async move { store.accept_friend_request(caller, from, &limits()).await })
    }

    fn requested(outcome: Result<RequestOutcome, FriendError>) -> Option<bool> {
        match outcome {
            Ok(RequestOutcome::Requested { .. }) => Some(false),
            Ok(RequestOutcome::Friends { .. }) => Some(true),
            Err(_) => None,
        }
    }

    #[tokio::test]
    async fn a_batch_answers_each_call_as_if_it_ran_alone() {
        let f = sqlite().await;
        let store = &f.store;
        let mut ids = Vec::new();
        for _ in 0..8 {
            ids.push(account(store, "public").await);
        }
        let [a, b, c, d, e, g, x, y] = ids[..] else {
            unreachable!()
        };
        let mut handles = HashMap::new();
        for &id in &ids {
            handles.insert(id, handle(store, id).await);
        }
        block(store, g, e).await;
        // Holding a transaction holds the writer: every call below lands in one batch.
        let held = store.begin().await.expect("begin");
        let before = store.metrics().waiting.get();
        let mut queued = 0;
        let mut next = || {
            queued += 1;
            before + queued
        };
        let a_asks_b = request(store, a, &handles[&b]);
        until_queued(store, next()).await;
        let b_asks_a = request(store, b, &handles[&a]);
        until_queued(store, next()).await;
        let c_asks_d = request(store, c, &handles[&d]);
        until_queued(store, next()).await;
        let d_accepts_c = accept(store, d, c);
        until_queued(store, next()).await;
        let a_asks_b_again = request(store, a, &handles[&b]);
        until_queued(store, next()).await;
        let e_accepts_nobody = accept(store, e, a);
        until_queued(store, next()).await;
        let e_asks_blocker = request(store, e, &handles[&g]);
        until_queued(store, next()).await;
        // Answered from the handle lookup, without a place in the writer's queue.
        let unknown = request(store, x, "no_such_handle_anywhere");
        let itself = request(store, x, &handles[&x]);
        // x may have two open requests: the third is refused.
        let x_asks: Vec<_> = [a, b, y]
            .iter()
            .map(|other| request(store, x, &handles[other]))
            .collect();
        for _ in 0..3 {
            until_queued(store, next()).await;
        }
        drop(held);
        assert_eq!(requested(a_asks_b.await.unwrap()), Some(false));
        let friends = b_asks_a.await.unwrap().expect("b accepts a's request");
        assert_eq!(
            friends,
            RequestOutcome::Friends {
                caller: AccountRef {
                    account_id: b,
                    handle: handles[&b].clone()
                },
                target: a
            }
        );
        assert_eq!(requested(c_asks_d.await.unwrap()), Some(false));
        assert_eq!(d_accepts_c.await.unwrap().unwrap().account_id, d);
        assert!(matches!(
            a_asks_b_again.await.unwrap(),
            Err(FriendError::AlreadyFriends)
        ));
        assert!(matches!(
            e_accepts_nobody.await.unwrap(),
            Err(FriendError::NotFound)
        ));
        assert!(matches!(
            e_asks_blocker.await.unwrap(),
            Err(FriendError::NotFound)
        ));
        assert!(matches!(unknown.await.unwrap(), Err(FriendError::NotFound)));
        assert!(matches!(
            itself.await.unwrap(),
            Err(FriendError::CannotFriendSelf)
        ));
        // The three were waiting together: any two of them go first.
        let mut sent = 0;
        let mut refused = 0;
        for r in x_asks {
            match r.await.unwrap() {
                Ok(RequestOutcome::Requested { .. }) => sent += 1,
                Err(FriendError::LimitReached(crate::store::LimitKind::Outgoing)) => refused += 1,
                other => panic!("x's request: {other:?}"),
            }
        }
        assert_eq!((sent, refused), (2, 1));
        let of = |id| async move {
            let o = store.friends_overview(id).await.unwrap();
            let friends: Vec<i64> = o.friends.iter().map(|f| f.account_id).collect();
            let outgoing: Vec<i64> = o.outgoing.iter().map(|r| r.account_id).collect();
            (friends, outgoing)
        };
        assert_eq!(of(a).await, (vec![b], vec![]));
        assert_eq!(of(d).await, (vec![c], vec![]));
        assert_eq!(of(x).await.1.len(), 2);
    }

    #[tokio::test]
    async fn a_friend_ring_written_at_once_is_whole_on_sqlite() {
        friend_ring(&sqlite().await.store).await;
    }

    #[tokio::test]
    async fn a_friend_ring_written_at_once_is_whole_on_postgres() {
        friend_ring(&postgres().await).await;
    }

    /// 150 accounts each ask the next two on a ring, all at once, and each asked one
    /// accepts as soon as its request is open: every account ends with four friends.
    async fn friend_ring(store: &Store) {
        let n = 3 * MAX_GROUP;
        let mut ids = Vec::with_capacity(n);
        for _ in 0..n {
            ids.push(account(store, "public").await);
        }
        let mut handles = Vec::with_capacity(n);
        for &id in &ids {
            handles.push(handle(store, id).await);
        }
        let mut pairs = Vec::new();
        for i in 0..n {
            for k in 1..=2 {
                let j = (i + k) % n;
                let store = store.clone();
                let (asker, asked, handle) = (ids[i], ids[j], handles[j].clone());
                pairs.push(tokio::spawn(async move {
                    let big = FriendLimits {
                        max_outgoing: 10,
                        ..limits()
                    };
                    match store.send_friend_request(asker, &handle, &big).await? {
                        RequestOutcome::Requested { .. } => {
                            store.accept_friend_request(asked, asker, &big).await?;
                        }
                        RequestOutcome::Friends { .. } => panic!("nobody asked {asker} first"),
                    }
                    Ok::<_, FriendError>(())
                }));
            }
        }
        for pair in pairs {
            pair.await.unwrap().expect("request and accept");
        }
        for &id in &ids {
            let overview = store.friends_overview(id).await.unwrap();
            assert_eq!(overview.friends.len(), 4, "account {id}");
            assert!(overview.incoming.is_empty() && overview.outgoing.is_empty());
        }
    }
}
