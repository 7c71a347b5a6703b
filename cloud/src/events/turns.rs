//! Registration turns: the sockets of one account register on this node one at a time, so
//! the store records them in the order the hub took them (its record is the hub's newest, and
//! a renewal never closes that one as replaced). Only sockets of the same account wait for
//! each other: turns shared by stripes of accounts made a storm's unrelated reconnects queue
//! behind each other's store round trips, 12 accounts to a stripe with 12,500 reconnecting
//! on a node (`anyplay_welcome_step_seconds{step="turn"}` 9 s on average at 50,000 players).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::OwnedMutexGuard;

/// An account's lock, and how many of its sockets hold it or wait for it.
struct Entry {
    lock: Arc<tokio::sync::Mutex<()>>,
    takers: usize,
}

/// The turns of the accounts registering now.
#[derive(Default)]
pub struct Turns {
    /// An entry per account with a socket registering or waiting to; gone with the last.
    entries: Mutex<HashMap<i64, Entry>>,
}

/// An account's turn, held until dropped.
pub struct Turn<'a> {
    // Released before the taker is counted out.
    _guard: OwnedMutexGuard<()>,
    _taker: Taker<'a>,
}

/// One socket counted among its account's takers until dropped, its wait finished or not.
struct Taker<'a> {
    turns: &'a Turns,
    account_id: i64,
}

impl Turns {
    fn entries(&self) -> std::sync::MutexGuard<'_, HashMap<i64, Entry>> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Waits until no other socket of the account holds its turn, then holds it.
    pub async fn take(&self, account_id: i64) -> Turn<'_> {
        let lock = {
            let mut entries = self.entries();
            let entry = entries.entry(account_id).or_insert_with(|| Entry {
                lock: Arc::default(),
                takers: 0,
            });
            entry.takers += 1;
            entry.lock.clone()
        };
        let taker = Taker {
            turns: self,
            account_id,
        };
        Turn {
            _guard: lock.lock_owned().await,
            _taker: taker,
        }
    }

    /// Accounts with an entry (for tests).
    #[cfg(test)]
    fn len(&self) -> usize {
        self.entries().len()
    }
}

impl Drop for Taker<'_> {
    fn drop(&mut self) {
        let mut entries = self.turns.entries();
        if let Some(entry) = entries.get_mut(&self.account_id) {
            entry.takers -= 1;
            if entry.takers == 0 {
                entries.remove(&self.account_id);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn only_sockets_of_the_same_account_wait_for_each_other() {
        let turns = Turns::default();
        let first = turns.take(1).await;
        // Another account's turn comes at once, whatever stripe it would have shared.
        let other = tokio::time::timeout(Duration::from_secs(1), turns.take(1 + 1024)).await;
        assert!(other.is_ok(), "account 1025 waited for account 1");
        let second = tokio::time::timeout(Duration::from_millis(100), turns.take(1)).await;
        assert!(second.is_err(), "account 1's second socket did not wait");
        drop(other);
        drop(first);
        let second = turns.take(1).await;
        drop(second);
        assert_eq!(turns.len(), 0, "no lock kept once every turn is done");
    }

    #[tokio::test]
    async fn a_wait_given_up_leaves_nothing_behind() {
        let turns = Turns::default();
        let held = turns.take(7).await;
        let gave_up = tokio::time::timeout(Duration::from_millis(50), turns.take(7)).await;
        assert!(gave_up.is_err());
        assert_eq!(turns.len(), 1);
        drop(held);
        assert_eq!(turns.len(), 0);
    }
}
