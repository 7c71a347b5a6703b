//! A proxy's counters: connections open now and in total, bytes forwarded each way, and what the
//! faults took (bytes dropped, connections refused, connections a fault closed or reset).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::link::Direction;

#[derive(Debug, Default)]
pub(crate) struct Counters {
    open: AtomicU64,
    total: AtomicU64,
    upstream_bytes: AtomicU64,
    downstream_bytes: AtomicU64,
    dropped_bytes: AtomicU64,
    refused: AtomicU64,
    faulted: AtomicU64,
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
    /// Read and thrown away by drop-cuts.
    pub bytes_dropped: u64,
    /// Refused by drop-cuts, never dialled upstream.
    pub connections_refused: u64,
    /// Closed or reset by a lasting fault (limit_data, timeout, a drop-cut that took bytes).
    pub connections_faulted: u64,
}

/// Counts one open connection until dropped.
pub(crate) struct OpenConnection {
    counters: Arc<Counters>,
    serial: u64,
}

impl OpenConnection {
    /// The connection's number in its proxy, from 0 in the order accepted.
    pub(crate) fn serial(&self) -> u64 {
        self.serial
    }
}

impl Counters {
    pub(crate) fn opened(self: &Arc<Self>) -> OpenConnection {
        self.open.fetch_add(1, Ordering::Relaxed);
        let serial = self.total.fetch_add(1, Ordering::Relaxed);
        OpenConnection {
            counters: Arc::clone(self),
            serial,
        }
    }

    pub(crate) fn forwarded(&self, direction: Direction, bytes: usize) {
        let counter = match direction {
            Direction::Upstream => &self.upstream_bytes,
            Direction::Downstream => &self.downstream_bytes,
        };
        add(counter, bytes);
    }

    pub(crate) fn dropped(&self, bytes: usize) {
        add(&self.dropped_bytes, bytes);
    }

    pub(crate) fn refused(&self) {
        add(&self.refused, 1);
    }

    pub(crate) fn faulted(&self) {
        add(&self.faulted, 1);
    }

    pub(crate) fn stats(&self) -> Stats {
        Stats {
            connections_now: self.open.load(Ordering::Relaxed),
            connections_total: self.total.load(Ordering::Relaxed),
            bytes_upstream: self.upstream_bytes.load(Ordering::Relaxed),
            bytes_downstream: self.downstream_bytes.load(Ordering::Relaxed),
            bytes_dropped: self.dropped_bytes.load(Ordering::Relaxed),
            connections_refused: self.refused.load(Ordering::Relaxed),
            connections_faulted: self.faulted.load(Ordering::Relaxed),
        }
    }
}

fn add(counter: &AtomicU64, amount: usize) {
    counter.fetch_add(u64::try_from(amount).unwrap_or(u64::MAX), Ordering::Relaxed);
}

impl Drop for OpenConnection {
    fn drop(&mut self) {
        self.counters.open.fetch_sub(1, Ordering::Relaxed);
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
        assert_eq!((first.serial(), second.serial()), (0, 1));
        drop(first);
        counters.forwarded(Direction::Upstream, 5);
        counters.forwarded(Direction::Downstream, 7);
        counters.forwarded(Direction::Downstream, 1);
        counters.dropped(3);
        counters.refused();
        counters.faulted();
        counters.faulted();
        assert_eq!(
            counters.stats(),
            Stats {
                connections_now: 1,
                connections_total: 2,
                bytes_upstream: 5,
                bytes_downstream: 8,
                bytes_dropped: 3,
                connections_refused: 1,
                connections_faulted: 2,
            }
        );
        drop(second);
        assert_eq!(counters.stats().connections_now, 0);
    }
}
