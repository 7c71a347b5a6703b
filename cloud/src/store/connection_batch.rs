//! Group commit of connection records on SQLite.
//!
//! A storm breaks thousands of connections at once: thousands of record removals,
//! then thousands of registrations. Each one alone would take a turn of the single
//! writer (and a BEGIN and COMMIT). Here they wait in a channel instead, and one task
//! runs all that are waiting (up to [`MAX_BATCH`]) in one writer turn and one
//! transaction, in arrival order, answering each caller as if it had run alone.
//!
//! There is no timer to fill a batch: a batch is whatever queued while the writer was
//! busy, so a lone request costs what it did alone. The task takes its place in the
//! writer's FIFO queue like any other writer, so other writes keep their fairness.

use std::sync::Arc;
use std::time::Instant;

use sqlx::AnyPool;
use tokio::sync::mpsc::{self, error::TryRecvError};
use tokio::sync::{oneshot, Semaphore};

use super::connections::{register_in, remove_in, NewRecord, Registered};
use super::{Backend, StoreError, StoreResult};
use crate::metrics::PoolMetrics;

/// The most requests one writer turn takes: keeps a batch's transaction short, so
/// writers queued behind it wait a bounded time.
const MAX_BATCH: usize = 512;

/// One caller's write and where its answer goes.
enum Request {
    Register {
        record: NewRecord,
        answer: oneshot::Sender<StoreResult<Registered>>,
    },
    Remove {
        account_id: i64,
        connection_id: String,
        answer: oneshot::Sender<StoreResult<bool>>,
    },
}

/// What one request did inside the batch's transaction, kept until the commit.
enum Outcome {
    Registered(Registered),
    Removed(bool),
}

struct Queued {
    request: Request,
    since: Instant,
}

/// The handle the store keeps; the task behind it ends when the store is dropped.
pub(super) struct ConnectionBatcher {
    requests: mpsc::UnboundedSender<Queued>,
    metrics: PoolMetrics,
}

impl ConnectionBatcher {
    /// Starts the batching task on the writer pool and its FIFO queue.
    pub(super) fn start(writer: AnyPool, queue: Arc<Semaphore>, metrics: PoolMetrics) -> Self {
        let (requests, queued) = mpsc::unbounded_channel();
        tokio::spawn(run(queued, writer, queue, metrics.clone()));
        ConnectionBatcher { requests, metrics }
    }

    pub(super) async fn register(&self, record: NewRecord) -> StoreResult<Registered> {
        let (answer, answered) = oneshot::channel();
        self.submit(Request::Register { record, answer })?;
        answered.await.map_err(|_| StoreError::WriterStopped)?
    }

    pub(super) async fn remove(&self, account_id: i64, connection_id: &str) -> StoreResult<bool> {
        let (answer, answered) = oneshot::channel();
        self.submit(Request::Remove {
            account_id,
            connection_id: connection_id.to_string(),
            answer,
        })?;
        answered.await.map_err(|_| StoreError::WriterStopped)?
    }

    fn submit(&self, request: Request) -> StoreResult<()> {
        // A queued request waits for the writer as a lone write would: the pool
        // metrics count it until its batch takes the turn.
        self.metrics.waiting.inc();
        let queued = Queued {
            request,
            since: Instant::now(),
        };
        self.requests.send(queued).map_err(|_| {
            self.metrics.waiting.dec();
            StoreError::WriterStopped
        })
    }
}

/// Takes the writer's turn whenever a request waits, and runs everything waiting.
async fn run(
    mut queued: mpsc::UnboundedReceiver<Queued>,
    writer: AnyPool,
    queue: Arc<Semaphore>,
    metrics: PoolMetrics,
) {
    let mut batch = Vec::with_capacity(MAX_BATCH);
    while let Some(first) = queued.recv().await {
        let Ok(turn) = queue.clone().acquire_owned().await else {
            return;
        };
        batch.push(first);
        while batch.len() < MAX_BATCH {
            match queued.try_recv() {
                Ok(next) => batch.push(next),
                Err(TryRecvError::Empty | TryRecvError::Disconnected) => break,
            }
        }
        let requests: Vec<Request> = batch
            .drain(..)
            .map(|q| {
                metrics.waiting.dec();
                metrics
                    .acquire_seconds
                    .observe(q.since.elapsed().as_secs_f64());
                q.request
            })
            // A caller that gave up before its turn writes nothing, as a lone
            // write dropped while waiting for the writer would.
            .filter(|r| !r.abandoned())
            .collect();
        if !requests.is_empty() {
            let outcomes = write_batch(&writer, &requests).await;
            answer(requests, outcomes);
        }
        drop(turn);
    }
}

/// Runs the requests in order in one transaction; any error rolls back all of them.
async fn write_batch(writer: &AnyPool, requests: &[Request]) -> StoreResult<Vec<Outcome>> {
    let mut tx = writer.begin().await?;
    let lock = Backend::Sqlite.for_update();
    let mut outcomes = Vec::with_capacity(requests.len());
    for request in requests {
        outcomes.push(match request {
            Request::Register { record, .. } => {
                Outcome::Registered(register_in(&mut tx, lock, record).await?)
            }
            Request::Remove {
                account_id,
                connection_id,
                ..
            } => Outcome::Removed(remove_in(&mut *tx, *account_id, connection_id).await?),
        });
    }
    tx.commit().await?;
    Ok(outcomes)
}

/// Gives each caller its own result, or every caller the batch's error.
fn answer(requests: Vec<Request>, outcomes: StoreResult<Vec<Outcome>>) {
    // A send fails only when the caller stopped waiting; nobody is left to tell.
    match outcomes {
        Ok(outcomes) => {
            for (request, outcome) in requests.into_iter().zip(outcomes) {
                match (request, outcome) {
                    (Request::Register { answer, .. }, Outcome::Registered(r)) => {
                        let _ = answer.send(Ok(r));
                    }
                    (Request::Remove { answer, .. }, Outcome::Removed(r)) => {
                        let _ = answer.send(Ok(r));
                    }
                    _ => unreachable!("write_batch gives each request an outcome of its kind"),
                }
            }
        }
        Err(e) => {
            let e = Arc::new(e);
            for request in requests {
                match request {
                    Request::Register { answer, .. } => {
                        let _ = answer.send(Err(StoreError::Batch(e.clone())));
                    }
                    Request::Remove { answer, .. } => {
                        let _ = answer.send(Err(StoreError::Batch(e.clone())));
                    }
                }
            }
        }
    }
}

impl Request {
    fn abandoned(&self) -> bool {
        match self {
            Request::Register { answer, .. } => answer.is_closed(),
            Request::Remove { answer, .. } => answer.is_closed(),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::super::sessions::fixture::{account, sqlite};
    use super::super::{ConnectionRecord, Store, StoreError};
    use super::MAX_BATCH;

    const LEASE: Duration = Duration::from_secs(60);

    fn register(
        store: &Store,
        account_id: i64,
        connection_id: &str,
    ) -> tokio::task::JoinHandle<Result<Option<ConnectionRecord>, StoreError>> {
        let (store, connection_id) = (store.clone(), connection_id.to_string());
        tokio::spawn(async move {
            let r = store
                .register_connection(account_id, &connection_id, "node-a", LEASE)
                .await?;
            Ok(r.previous)
        })
    }

    fn remove(
        store: &Store,
        account_id: i64,
        connection_id: &str,
    ) -> tokio::task::JoinHandle<Result<bool, StoreError>> {
        let (store, connection_id) = (store.clone(), connection_id.to_string());
        tokio::spawn(async move { store.remove_connection(account_id, &connection_id).await })
    }

    /// Waits until `n` requests wait for the writer; while a test holds the writer's
    /// turn, they all land in the next batch, in the order they queued.
    async fn until_queued(store: &Store, n: i64) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while store.metrics().waiting.get() < n {
            assert!(
                tokio::time::Instant::now() < deadline,
                "only {} of {n} requests queued for the writer after 10 s",
                store.metrics().waiting.get()
            );
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }

    fn previous(connection_id: &str) -> Option<ConnectionRecord> {
        Some(ConnectionRecord {
            connection_id: connection_id.to_string(),
            node: "node-a".to_string(),
        })
    }

    #[tokio::test]
    async fn a_second_registration_in_the_batch_replaces_the_first() {
        let f = sqlite().await;
        let a = account(&f.store, "public").await;
        let held = f.store.begin().await.unwrap();
        let first = register(&f.store, a, "c1");
        until_queued(&f.store, 1).await;
        let second = register(&f.store, a, "c2");
        until_queued(&f.store, 2).await;
        drop(held);
        assert_eq!(first.await.unwrap().unwrap(), None);
        assert_eq!(second.await.unwrap().unwrap(), previous("c1"));
    }

    #[tokio::test]
    async fn a_remove_in_the_batch_sees_the_registrations_before_it() {
        let f = sqlite().await;
        let (a, b) = (
            account(&f.store, "public").await,
            account(&f.store, "public").await,
        );
        let held = f.store.begin().await.unwrap();
        let register_a = register(&f.store, a, "a1");
        until_queued(&f.store, 1).await;
        let remove_a = remove(&f.store, a, "a1");
        until_queued(&f.store, 2).await;
        let register_b1 = register(&f.store, b, "b1");
        until_queued(&f.store, 3).await;
        let register_b2 = register(&f.store, b, "b2");
        until_queued(&f.store, 4).await;
        // b1 was replaced by b2: removing it must leave b2's record alone.
        let remove_b1 = remove(&f.store, b, "b1");
        until_queued(&f.store, 5).await;
        drop(held);
        assert_eq!(register_a.await.unwrap().unwrap(), None);
        assert!(remove_a.await.unwrap().unwrap(), "a1 was a's connection");
        assert_eq!(register_b1.await.unwrap().unwrap(), None);
        assert_eq!(register_b2.await.unwrap().unwrap(), previous("b1"));
        assert!(!remove_b1.await.unwrap().unwrap(), "b1 had been replaced");
        let online = f.store.connection_nodes(&[a, b]).await.unwrap();
        assert_eq!(online, vec![(b, "node-a".to_string())]);
    }

    #[tokio::test]
    async fn concurrent_callers_each_get_their_own_answer() {
        let f = sqlite().await;
        // More than one batch holds, so the split between batches is crossed too.
        let n = MAX_BATCH + 88;
        let mut accounts = Vec::with_capacity(n);
        for _ in 0..n {
            accounts.push(account(&f.store, "public").await);
        }
        let firsts: Vec<_> = accounts
            .iter()
            .map(|&id| register(&f.store, id, &format!("first-{id}")))
            .collect();
        for (first, id) in firsts.into_iter().zip(&accounts) {
            assert_eq!(first.await.unwrap().unwrap(), None, "account {id}");
        }
        let held = f.store.begin().await.unwrap();
        let seconds: Vec<_> = accounts
            .iter()
            .map(|&id| register(&f.store, id, &format!("second-{id}")))
            .collect();
        until_queued(&f.store, n as i64).await;
        drop(held);
        for (second, id) in seconds.into_iter().zip(&accounts) {
            let expected = previous(&format!("first-{id}"));
            assert_eq!(second.await.unwrap().unwrap(), expected, "account {id}");
        }
    }

    #[tokio::test]
    async fn a_failed_batch_fails_every_caller_and_writes_nothing() {
        let f = sqlite().await;
        let (a, b, c) = (
            account(&f.store, "public").await,
            account(&f.store, "public").await,
            account(&f.store, "public").await,
        );
        for (id, connection_id) in [(a, "a1"), (c, "c1")] {
            f.store
                .register_connection(id, connection_id, "node-a", LEASE)
                .await
                .unwrap();
        }
        let held = f.store.begin().await.unwrap();
        let remove_c = remove(&f.store, c, "c1");
        until_queued(&f.store, 1).await;
        // Connection ids are unique across accounts: b cannot take a's.
        let clash = register(&f.store, b, "a1");
        until_queued(&f.store, 2).await;
        let register_c = register(&f.store, c, "c2");
        until_queued(&f.store, 3).await;
        drop(held);
        let clash = clash.await.unwrap().unwrap_err();
        assert!(clash.is_unique_violation(), "{clash}");
        for e in [
            remove_c.await.unwrap().unwrap_err(),
            register_c.await.unwrap().unwrap_err(),
            clash,
        ] {
            assert!(matches!(e, StoreError::Batch(_)), "{e}");
        }
        // The remove before the failure was rolled back with the rest.
        let online = f.store.connection_nodes(&[a, b, c]).await.unwrap();
        let node = "node-a".to_string();
        assert_eq!(online, vec![(a, node.clone()), (c, node)]);
        // The next request gets a batch of its own.
        let registered = f.store.register_connection(c, "c2", "node-a", LEASE).await;
        assert_eq!(registered.unwrap().previous, previous("c1"));
    }

    #[tokio::test]
    async fn a_caller_that_gave_up_before_its_turn_writes_nothing() {
        let f = sqlite().await;
        let (a, b) = (
            account(&f.store, "public").await,
            account(&f.store, "public").await,
        );
        let held = f.store.begin().await.unwrap();
        let gave_up = register(&f.store, a, "a1");
        until_queued(&f.store, 1).await;
        gave_up.abort();
        assert!(gave_up.await.unwrap_err().is_cancelled());
        let waited = register(&f.store, b, "b1");
        until_queued(&f.store, 2).await;
        drop(held);
        assert_eq!(waited.await.unwrap().unwrap(), None);
        let online = f.store.connection_nodes(&[a, b]).await.unwrap();
        assert_eq!(online, vec![(b, "node-a".to_string())]);
    }
}
