//! A node that cannot renew its connection leases, while another node can, lets its
//! connections go before its leases run out. Past that moment the other node retires the
//! records, tells friends those accounts left, and may welcome them again: a connection
//! still open here would put one account on two nodes, and hear nothing routed to it.
//!
//! When no node renews (the store is down for everyone), nobody can retire anything, and
//! the connections stay: the records are put back once the store answers again.

use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::time::Duration;

use futures_util::StreamExt;

use crate::events::CloseCode;
use crate::state::AppState;
use crate::store::{now_ms, StoreResult};

/// How long before its leases run out a node closes its connections: room for the closes
/// to go out before another node can expire the records.
const MARGIN: Duration = Duration::from_secs(2);

/// How late after this node's next renewal was due another node's renewal must come to
/// show that the store answers others and not this one (renewals before an outage that
/// hits everyone come no later than that).
const HEARD_LATE: Duration = Duration::from_secs(1);

/// How long the fence's own last renewal may take.
const LAST_TRY: Duration = Duration::from_secs(1);

/// How often the fence looks at the renewals.
const LOOK_EVERY: Duration = Duration::from_millis(250);

/// How often a node renews its leases, and how long one lasts.
#[derive(Debug, Clone, Copy)]
struct Leases {
    renew: Duration,
    expiry: Duration,
}

/// When this node and the others last renewed their leases, and whether this one has let
/// its connections go since its last renewal.
pub struct Fence {
    renewed_ms: AtomicI64,
    /// When this node last heard another renew (its own clock).
    others_renewed_ms: AtomicI64,
    tripped: AtomicBool,
}

impl Fence {
    /// A fence whose leases were renewed at `start_ms` (a node starts with fresh
    /// registrations).
    pub fn new(start_ms: i64) -> Fence {
        Fence {
            renewed_ms: AtomicI64::new(start_ms),
            others_renewed_ms: AtomicI64::new(i64::MIN),
            tripped: AtomicBool::new(false),
        }
    }

    /// A renewal that started at `started_ms` went through: every lease it extended is
    /// good until `started_ms + lease_expiry`.
    pub fn renewed(&self, started_ms: i64) {
        self.renewed_ms.fetch_max(started_ms, Ordering::Relaxed);
        self.tripped.store(false, Ordering::Relaxed);
    }

    /// Another node renewed its leases at `at_ms`.
    fn others_renewed(&self, at_ms: i64) {
        self.others_renewed_ms.fetch_max(at_ms, Ordering::Relaxed);
    }

    /// True once per outage: when the leases renewed last are about to run out and another
    /// node could retire them (it renewed after this node's next renewal failed to, or the
    /// bus is out and cannot tell).
    fn trips(&self, now_ms: i64, leases: Leases, bus_up: bool) -> bool {
        let renewed = self.renewed_ms.load(Ordering::Relaxed);
        let due = renewed + (leases.expiry - MARGIN).as_millis() as i64;
        let missed = renewed + (leases.renew + HEARD_LATE).as_millis() as i64;
        let others_can = !bus_up || self.others_renewed_ms.load(Ordering::Relaxed) > missed;
        now_ms >= due && others_can && !self.tripped.swap(true, Ordering::Relaxed)
    }

    /// Closes every connection of the node (1011) when its fence trips; only in a
    /// cluster, where another node could take its accounts.
    pub async fn watch(&self, state: &AppState) {
        if !state.bus.is_cluster() {
            return std::future::pending().await;
        }
        tokio::join!(self.listen(state), self.look(state));
    }

    async fn listen(&self, state: &AppState) {
        let own = state.config.node_id.as_bytes();
        loop {
            match state.bus.renewals().await {
                Some(mut renewals) => {
                    while let Some(message) = renewals.next().await {
                        if &*message.payload != own {
                            self.others_renewed(now_ms());
                        }
                    }
                }
                None => tokio::time::sleep(LOOK_EVERY).await,
            }
        }
    }

    /// Renews the leases of `live` (this node's connections); on success, notes it and
    /// tells the other nodes.
    pub async fn renew(&self, state: &AppState, live: &[(i64, String, i64)]) -> StoreResult<u64> {
        let node = &state.config.node_id;
        let started_ms = now_ms();
        let renewed = state
            .store
            .renew_leases(node, live, state.config.lease_expiry)
            .await?;
        self.renewed(started_ms);
        state.bus.announce_renewal(node).await;
        Ok(renewed)
    }

    /// One last renewal, bounded: a node that was only frozen (SIGSTOP) for a while reaches
    /// the store at once and keeps its connections.
    async fn renews(&self, state: &AppState) -> bool {
        let live = state.hub.accounts();
        matches!(
            tokio::time::timeout(LAST_TRY, self.renew(state, &live)).await,
            Ok(Ok(_))
        )
    }

    async fn look(&self, state: &AppState) {
        let mut tick = tokio::time::interval(LOOK_EVERY);
        loop {
            tick.tick().await;
            let leases = Leases {
                renew: state.config.lease_renew,
                expiry: state.config.lease_expiry,
            };
            if self.trips(now_ms(), leases, state.bus.is_connected()) && !self.renews(state).await {
                tracing::warn!(
                    connections = state.hub.len(),
                    "cannot renew connection leases while other nodes can: closing every connection before they run out"
                );
                state.hub.close_all(CloseCode::StoreLost);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LEASES: Leases = Leases {
        renew: Duration::from_secs(3),
        expiry: Duration::from_secs(10),
    };

    #[test]
    fn trips_once_when_another_node_renews_and_this_one_cannot() {
        let fence = Fence::new(1_000);
        fence.others_renewed(1_000 + 5_000);
        assert!(!fence.trips(1_000 + 7_999, LEASES, true));
        assert!(fence.trips(1_000 + 8_000, LEASES, true));
        assert!(!fence.trips(1_000 + 9_000, LEASES, true), "once per outage");
    }

    /// The others' renewals from before the outage (up to this node's next renewal) say
    /// nothing: a store out for everyone keeps every connection.
    #[test]
    fn holds_when_no_node_renews_after_this_one_missed() {
        let fence = Fence::new(1_000);
        fence.others_renewed(1_000 + 3_900);
        assert!(!fence.trips(60_000, LEASES, true));
    }

    #[test]
    fn trips_when_the_bus_cannot_tell() {
        let fence = Fence::new(1_000);
        assert!(fence.trips(9_000, LEASES, false));
    }

    #[test]
    fn a_renewal_rearms_it() {
        let fence = Fence::new(0);
        fence.others_renewed(5_000);
        assert!(fence.trips(8_000, LEASES, true));
        fence.renewed(9_000);
        fence.others_renewed(14_000);
        assert!(!fence.trips(16_000, LEASES, true));
        assert!(fence.trips(17_000, LEASES, true));
    }

    #[test]
    fn an_older_renewal_that_ends_late_does_not_move_it_back() {
        let fence = Fence::new(0);
        fence.renewed(5_000);
        fence.renewed(2_000);
        fence.others_renewed(10_000);
        assert!(!fence.trips(12_999, LEASES, true));
        assert!(fence.trips(13_000, LEASES, true));
    }
}
