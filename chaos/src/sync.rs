//! Locking a std mutex without caring whether an earlier holder panicked.

use std::sync::{Mutex, MutexGuard, PoisonError};

/// Locks `mutex`; what our mutexes guard (ids, handles, counters) stays valid even when a
/// holder panicked, so poisoning is ignored.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
