//! Locking a std mutex without caring whether an earlier holder panicked.

use std::sync::{Mutex, MutexGuard, PoisonError};

/// Locks `mutex`; the data behind our mutexes stays consistent even when a holder panicked
/// (every critical section is a plain field update), so poisoning is ignored.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
