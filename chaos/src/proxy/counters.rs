//! A proxy's counters: connections open now and in total, bytes forwarded each way.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::link::Direction;

#[derive(Debug, Default)]
pub(crate) struct Counters {
    open: AtomicU64,
    total: AtomicU64,
    upstream_bytes: AtomicU64,
    downstream_bytes: AtomicU64,
}

/// A snapshot of a proxy's counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    pub connections_now: u64,
    pub connections_total: u64,
    /// Client to upstream.
    pub bytes_upstream: u64,
    /// Upstream to client.
    pub bytes_downstream: u64,
}

/// Counts one open connection until dropped.
pub(crate) struct OpenConnection(Arc<Counters>);

impl Counters {
    pub(crate) fn opened(self: &Arc<Self>) -> OpenConnection {
        self.open.fetch_add(1, Ordering::Relaxed);
        self.total.fetch_add(1, Ordering::Relaxed);
        OpenConnection(Arc::clone(self))
    }

    pub(crate) fn forwarded(&self, direction: Direction, bytes: usize) {
        let counter = match direction {
            Direction::Upstream => &self.upstream_bytes,
            Direction::Downstream => &self.downstream_bytes,
        };
        counter.fetch_add(u64::try_from(bytes).unwrap_or(u64::MAX), Ordering::Relaxed);
    }

    pub(crate) fn stats(&self) -> Stats {
        Stats {
            connections_now: self.open.load(Ordering::Relaxed),
            connections_total: self.total.load(Ordering::Relaxed),
            bytes_upstream: self.upstream_bytes.load(Ordering::Relaxed),
            bytes_downstream: self.downstream_bytes.load(Ordering::Relaxed),
        }
    }
}

impl Drop for OpenConnection {
    fn drop(&mut self) {
        self.0.open.fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_connections_and_bytes() {
        let counters = Arc::new(Counters::default());
        let first = counters.opened();
        let second = counters.opened();
        drop(first);
        counters.forwarded(Direction::Upstream, 5);
        counters.forwarded(Direction::Downstream, 7);
        counters.forwarded(Direction::Downstream, 1);
        assert_eq!(
            counters.stats(),
            Stats {
                connections_now: 1,
                connections_total: 2,
                bytes_upstream: 5,
                bytes_downstream: 8,
            }
        );
        drop(second);
        assert_eq!(counters.stats().connections_now, 0);
    }
}
