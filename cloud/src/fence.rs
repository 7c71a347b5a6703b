//! A node that cannot renew its connection leases lets its connections go before the
//! leases can run out. Past that moment another node retires the records, tells friends
//! those accounts left, and may welcome them again: a connection still open here would
//! put one account on two nodes, and hear nothing routed to it.

use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::time::Duration;

use crate::events::CloseCode;
use crate::state::AppState;
use crate::store::now_ms;

/// How long before its leases run out a node without renewals closes its connections:
/// room for the closes to go out before another node can expire the records.
const MARGIN: Duration = Duration::from_secs(2);

/// How often the fence looks at the last renewal.
const LOOK_EVERY: Duration = Duration::from_millis(250);

/// When this node last renewed its leases, and whether it has let its connections go
/// since then.
pub struct Fence {
    renewed_ms: AtomicI64,
    tripped: AtomicBool,
}

impl Fence {
    /// A fence whose leases were renewed at `start_ms` (a node starts with fresh
    /// registrations).
    pub fn new(start_ms: i64) -> Fence {
        Fence {
            renewed_ms: AtomicI64::new(start_ms),
            tripped: AtomicBool::new(false),
        }
    }

    /// A renewal that started at `started_ms` went through: every lease it extended is
    /// good until `started_ms + lease_expiry`.
    pub fn renewed(&self, started_ms: i64) {
        self.renewed_ms.fetch_max(started_ms, Ordering::Relaxed);
        self.tripped.store(false, Ordering::Relaxed);
    }

    /// True once per outage: when the leases renewed last are about to run out.
    fn trips(&self, now_ms: i64, lease_expiry: Duration) -> bool {
        let due =
            self.renewed_ms.load(Ordering::Relaxed) + (lease_expiry - MARGIN).as_millis() as i64;
        now_ms >= due && !self.tripped.swap(true, Ordering::Relaxed)
    }

    /// Closes every connection of the node (1011) each time its leases are about to run
    /// out unrenewed; only in a cluster, where another node could take its accounts.
    pub async fn watch(&self, state: &AppState) {
        if !state.bus.is_cluster() {
            return std::future::pending().await;
        }
        let mut tick = tokio::time::interval(LOOK_EVERY);
        loop {
            tick.tick().await;
            if self.trips(now_ms(), state.config.lease_expiry) {
                tracing::warn!(
                    connections = state.hub.len(),
                    "cannot renew connection leases: closing every connection before they run out"
                );
                state.hub.close_all(CloseCode::StoreLost);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXPIRY: Duration = Duration::from_secs(10);

    #[test]
    fn trips_once_when_the_last_renewal_is_about_to_run_out() {
        let fence = Fence::new(1_000);
        assert!(!fence.trips(1_000 + 7_999, EXPIRY));
        assert!(fence.trips(1_000 + 8_000, EXPIRY));
        assert!(!fence.trips(1_000 + 9_000, EXPIRY), "once per outage");
    }

    #[test]
    fn a_renewal_rearms_it() {
        let fence = Fence::new(0);
        assert!(fence.trips(8_000, EXPIRY));
        fence.renewed(9_000);
        assert!(!fence.trips(16_000, EXPIRY));
        assert!(fence.trips(17_000, EXPIRY));
    }

    #[test]
    fn an_older_renewal_that_ends_late_does_not_move_it_back() {
        let fence = Fence::new(0);
        fence.renewed(5_000);
        fence.renewed(2_000);
        assert!(!fence.trips(12_999, EXPIRY));
        assert!(fence.trips(13_000, EXPIRY));
    }
}
