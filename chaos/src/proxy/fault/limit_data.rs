//! The `limit_data` fault: a connection is closed on both sides (FIN) right after exactly `bytes`
//! have passed in the covered direction(s), counted from when the fault reached it. Both
//! directions draw on one count, so two writers can never pass more than the limit between them.

use std::sync::{Mutex, PoisonError};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Limit {
    pub(crate) bytes: u64,
    /// A new fault counts from zero again.
    pub(crate) generation: u64,
}

/// One connection's count under the limit.
#[derive(Debug, Default)]
pub(crate) struct Budget(Mutex<Count>);

#[derive(Debug, Default)]
struct Count {
    generation: u64,
    /// Taken by writers, written or about to be.
    taken: u64,
    written: u64,
}

impl Budget {
    /// Takes up to `want` bytes to write; 0 once the limit is spent.
    pub(crate) fn take(&self, limit: Limit, want: usize) -> usize {
        self.with(limit, |count| {
            let left = limit.bytes.saturating_sub(count.taken);
            let take = left.min(u64::try_from(want).unwrap_or(u64::MAX));
            count.taken += take;
            usize::try_from(take).unwrap_or(want)
        })
    }

    /// Counts `bytes` of what was taken as written; true once the limit is reached.
    pub(crate) fn written(&self, limit: Limit, bytes: usize) -> bool {
        self.with(limit, |count| {
            count.written += u64::try_from(bytes).unwrap_or(u64::MAX);
            count.written >= limit.bytes
        })
    }

    pub(crate) fn reached(&self, limit: Limit) -> bool {
        self.with(limit, |count| count.written >= limit.bytes)
    }

    fn with<T>(&self, limit: Limit, f: impl FnOnce(&mut Count) -> T) -> T {
        let mut count = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if count.generation != limit.generation {
            *count = Count {
                generation: limit.generation,
                ..Count::default()
            };
        }
        f(&mut count)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gives_out_exactly_the_limit_and_counts_afresh_for_a_new_fault() {
        let budget = Budget::default();
        let limit = Limit {
            bytes: 10,
            generation: 1,
        };
        assert_eq!(budget.take(limit, 4), 4);
        assert_eq!(budget.take(limit, 4), 4);
        assert_eq!(budget.take(limit, 4), 2);
        assert_eq!(budget.take(limit, 4), 0);
        assert!(!budget.written(limit, 8));
        assert!(!budget.reached(limit));
        assert!(budget.written(limit, 2));
        assert!(budget.reached(limit));

        let next = Limit {
            bytes: 3,
            generation: 2,
        };
        assert!(!budget.reached(next));
        assert_eq!(budget.take(next, 100), 3);

        let nothing = Limit {
            bytes: 0,
            generation: 3,
        };
        assert!(budget.reached(nothing), "a zero limit is reached at once");
    }
}
