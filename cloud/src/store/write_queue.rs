//! A queue of write calls that one task serves in batches, in the writer's turn.
//!
//! Taken one by one, every write pays a writer turn (SQLite's one writer, behind its
//! FIFO queue) and round trips from a runtime that is busy with the requests that made
//! them. Here the calls wait on a channel, and one task takes whatever waits when it
//! gets the turn, so a burst of calls costs a few statements. There is no timer to
//! fill a batch: a batch is whatever queued while the last one was written, so a lone
//! call costs what it did alone.

use std::future::Future;
use std::time::Instant;

use tokio::sync::{mpsc, oneshot};

use super::{StoreError, StoreResult, Writer};
use crate::metrics::{Held, PoolMetrics};

/// A queued call: it holds the channel its caller waits on.
pub(super) trait Call: Send + 'static {
    /// The caller stopped waiting: the call writes nothing, as a lone write dropped
    /// while waiting for the writer would.
    fn abandoned(&self) -> bool;
}

/// The handle the store keeps; the task behind it ends with the store.
pub(super) struct WriteQueue<C> {
    calls: mpsc::UnboundedSender<Queued<C>>,
    metrics: PoolMetrics,
}

struct Queued<C> {
    call: C,
    since: Instant,
    /// Counts the call as waiting for the writer in the pool metrics, as a lone
    /// write waiting for its turn would be.
    _waiting: Held,
}

impl<C: Call> WriteQueue<C> {
    /// Starts the task that hands `write` every batch of at most `max_batch` calls,
    /// in the order they came, while it holds the writer's turn.
    pub(super) fn start<W, F>(
        writer: Writer,
        metrics: PoolMetrics,
        max_batch: usize,
        write: W,
    ) -> Self
    where
        W: FnMut(Vec<C>) -> F + Send + 'static,
        F: Future<Output = ()> + Send + 'static,
    {
        let (calls, queued) = mpsc::unbounded_channel();
        tokio::spawn(serve(queued, writer, metrics.clone(), max_batch, write));
        WriteQueue { calls, metrics }
    }

    /// Queues the call that `make` builds around its answer channel, and waits for the answer.
    pub(super) async fn ask<T>(
        &self,
        make: impl FnOnce(oneshot::Sender<T>) -> C,
    ) -> StoreResult<T> {
        let (answer, answered) = oneshot::channel();
        let queued = Queued {
            call: make(answer),
            since: Instant::now(),
            _waiting: Held::new(&self.metrics.waiting),
        };
        self.calls
            .send(queued)
            .map_err(|_| StoreError::TaskStopped)?;
        answered.await.map_err(|_| StoreError::TaskStopped)
    }
}

/// Takes the writer's turn whenever a call waits, and writes every call waiting.
async fn serve<C: Call, W, F>(
    mut queued: mpsc::UnboundedReceiver<Queued<C>>,
    writer: Writer,
    metrics: PoolMetrics,
    max_batch: usize,
    mut write: W,
) where
    W: FnMut(Vec<C>) -> F,
    F: Future<Output = ()>,
{
    let mut batch = Vec::new();
    while queued.recv_many(&mut batch, max_batch).await > 0 {
        let turn = writer.turn().await;
        // What queued while we waited for the turn joins this batch.
        while batch.len() < max_batch {
            match queued.try_recv() {
                Ok(next) => batch.push(next),
                Err(_) => break,
            }
        }
        let calls: Vec<C> = batch
            .drain(..)
            .map(|q| {
                metrics
                    .acquire_seconds
                    .observe(q.since.elapsed().as_secs_f64());
                q.call
            })
            .filter(|c| !c.abandoned())
            .collect();
        write(calls).await;
        drop(turn);
    }
}
