//! Point reads that many callers make at the same moment, answered many keys to a
//! statement.
//!
//! A reconnect storm asks the same two questions thousands of times within a second:
//! whose is this access token (every upgrade and every call), and what are this
//! account's presence and friends (every announcement). One statement each would queue
//! thousands of round trips on the readers, and every other read (a friends list) would
//! wait behind them. A [`Lookup`] collects the keys asked while its last statements ran
//! and reads them with one `IN (...)` statement. There is no timer: a lone key is read
//! at once, alone.

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::hash::Hash;
use std::sync::Arc;

use tokio::sync::{mpsc, oneshot, Semaphore};

use super::{StoreError, StoreResult};

/// The most keys one statement reads (binding grows with the square of the parameters
/// on SQLite, see `connection_writes`).
const MAX_KEYS: usize = 100;

/// Statements of one lookup in flight at once: room for a burst without taking every
/// reader from the other reads.
const IN_FLIGHT: usize = 2;

type Asked<K, V> = (K, oneshot::Sender<StoreResult<Option<V>>>);

/// One kind of point read, batched. Cheap to share; the task behind it ends with it.
pub(super) struct Lookup<K, V> {
    asked: mpsc::UnboundedSender<Asked<K, V>>,
}

impl<K, V> Lookup<K, V>
where
    K: Eq + Hash + Clone + Send + Sync + 'static,
    V: Clone + Send + 'static,
{
    /// Starts the task that answers with `read`, which returns what it found of the
    /// keys it is given (absent: none).
    pub(super) fn start<R, F>(read: R) -> Self
    where
        R: Fn(Vec<K>) -> F + Send + Sync + 'static,
        F: Future<Output = StoreResult<HashMap<K, V>>> + Send + 'static,
    {
        let (asked, queue) = mpsc::unbounded_channel();
        tokio::spawn(run(queue, Arc::new(read)));
        Lookup { asked }
    }

    pub(super) async fn get(&self, key: K) -> StoreResult<Option<V>> {
        let (answer, answered) = oneshot::channel();
        self.asked
            .send((key, answer))
            .map_err(|_| StoreError::TaskStopped)?;
        answered.await.map_err(|_| StoreError::TaskStopped)?
    }
}

async fn run<K, V, R, F>(mut queue: mpsc::UnboundedReceiver<Asked<K, V>>, read: Arc<R>)
where
    K: Eq + Hash + Clone + Send + Sync + 'static,
    V: Clone + Send + 'static,
    R: Fn(Vec<K>) -> F + Send + Sync + 'static,
    F: Future<Output = StoreResult<HashMap<K, V>>> + Send + 'static,
{
    let in_flight = Arc::new(Semaphore::new(IN_FLIGHT));
    let mut batch = Vec::new();
    loop {
        // A place first: what is asked while every statement runs joins the next one.
        let Ok(place) = in_flight.clone().acquire_owned().await else {
            return;
        };
        if queue.recv_many(&mut batch, MAX_KEYS).await == 0 {
            return;
        }
        let asked: Vec<Asked<K, V>> = batch
            .drain(..)
            .filter(|(_, answer)| !answer.is_closed())
            .collect();
        let read = read.clone();
        tokio::spawn(async move {
            let keys: HashSet<&K> = asked.iter().map(|(k, _)| k).collect();
            let keys = keys.into_iter().cloned().collect();
            let found = read(keys).await;
            drop(place);
            answer(asked, found);
        });
    }
}

/// Gives each caller what was found of its key, or the statement's error.
fn answer<K: Eq + Hash, V: Clone>(asked: Vec<Asked<K, V>>, found: StoreResult<HashMap<K, V>>) {
    // A send fails only when the caller stopped waiting; nobody is left to tell.
    match found {
        Ok(found) => {
            for (key, answer) in asked {
                let _ = answer.send(Ok(found.get(&key).cloned()));
            }
        }
        Err(e) => {
            let e = Arc::new(e);
            for (_, answer) in asked {
                let _ = answer.send(Err(StoreError::Shared(e.clone())));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    /// A lookup over "k is found when even", that counts its statements and can be held.
    fn evens(statements: Arc<AtomicUsize>, held: Arc<tokio::sync::RwLock<()>>) -> Lookup<u32, u32> {
        Lookup::start(move |keys: Vec<u32>| {
            let (statements, held) = (statements.clone(), held.clone());
            async move {
                let _held = held.read().await;
                statements.fetch_add(1, Ordering::SeqCst);
                if keys.contains(&13) {
                    return Err(StoreError::TaskStopped);
                }
                Ok(keys
                    .into_iter()
                    .filter(|k| k % 2 == 0)
                    .map(|k| (k, k * 10))
                    .collect())
            }
        })
    }

    #[tokio::test]
    async fn keys_asked_while_statements_run_are_read_together() {
        let statements = Arc::new(AtomicUsize::new(0));
        let held = Arc::new(tokio::sync::RwLock::new(()));
        let lookup = Arc::new(evens(statements.clone(), held.clone()));
        let hold = held.write().await;
        // However the asks fall between the two places, 6 keys take at most 3 statements.
        let asks: Vec<_> = [1, 2, 2, 3, 4, 6]
            .into_iter()
            .map(|k| {
                let lookup = lookup.clone();
                tokio::spawn(async move { lookup.get(k).await.expect("read") })
            })
            .collect();
        tokio::time::sleep(Duration::from_millis(50)).await;
        drop(hold);
        let mut answers = Vec::new();
        for ask in asks {
            answers.push(ask.await.expect("task"));
        }
        assert_eq!(
            answers,
            [None, Some(20), Some(20), None, Some(40), Some(60)]
        );
        let n = statements.load(Ordering::SeqCst);
        assert!((1..=3).contains(&n), "{n} statements for 6 keys");
    }

    #[tokio::test]
    async fn a_failed_statement_fails_the_keys_read_with_it_only() {
        let statements = Arc::new(AtomicUsize::new(0));
        let held = Arc::new(tokio::sync::RwLock::new(()));
        let lookup = evens(statements, held);
        assert!(matches!(lookup.get(13).await, Err(StoreError::Shared(_))));
        assert_eq!(lookup.get(8).await.expect("read"), Some(80));
    }
}
