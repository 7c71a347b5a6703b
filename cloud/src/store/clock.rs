//! The store's time: the wall clock read once, when the node first asks (at its
//! start), carried on by the monotonic clock since.
//!
//! Leases, token expiry and the fence compare times read apart by seconds, on this node
//! and on others. The wall clock can jump (an NTP step): a node whose clock jumped ahead
//! would see every other node's leases as run out, and one whose clock jumped back would
//! write leases the others see as run out, so players would go offline while connected.
//! A step does not move the monotonic clock. The price: a node whose wall clock was
//! already wrong at its start stays as wrong until it restarts; so leases, which nodes
//! compare with each other's, are written and judged on the store's clock instead
//! ([`cluster_now_us`]).

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::OnceLock;
use std::time::{Instant, SystemTime};

/// A wall-clock reading and the monotonic moment it was taken.
struct Anchor {
    wall_us: i64,
    at: Instant,
}

impl Anchor {
    fn now() -> Anchor {
        let at = Instant::now();
        let wall_us = match SystemTime::now().duration_since(SystemTime::UNIX_EPOCH) {
            Ok(since) => since.as_micros() as i64,
            Err(before) => -(before.duration().as_micros() as i64),
        };
        Anchor { wall_us, at }
    }

    /// Microseconds since the epoch at `moment` (not before the anchor).
    fn us_at(&self, moment: Instant) -> i64 {
        self.wall_us + moment.saturating_duration_since(self.at).as_micros() as i64
    }
}

static ANCHOR: OnceLock<Anchor> = OnceLock::new();

/// Microseconds since the Unix epoch: fine enough to order an event against a
/// connection opened in the same millisecond.
pub fn now_us() -> i64 {
    ANCHOR.get_or_init(Anchor::now).us_at(Instant::now())
}

/// Milliseconds since the Unix epoch: the store's time unit.
pub fn now_ms() -> i64 {
    now_us().div_euclid(1_000)
}

/// How far the store's clock was last found from this node's, in microseconds.
static STORE_OFFSET_US: AtomicI64 = AtomicI64::new(0);

/// Microseconds since the epoch on the cluster's one clock, the store's: what nodes
/// compare with each other's (connection leases, the moment an event was made against
/// the moment a connection opened). A node whose wall clock was wrong at its start would
/// otherwise expire the others' live records or drop their events (ahead), or write
/// leases they see as run out and events they see as older than their connections
/// (behind), for as long as it runs.
pub fn cluster_now_us() -> i64 {
    now_us() + STORE_OFFSET_US.load(Ordering::Relaxed)
}

/// [`cluster_now_us`] in milliseconds, the store's unit.
pub fn cluster_now_ms() -> i64 {
    cluster_now_us().div_euclid(1_000)
}

/// The longest round trip whose reading of the store's clock is taken: a reading is off by
/// up to half its round trip, and a store that was paused or queued the question answers
/// seconds late (the cluster's clock would then jump by as much, and a connection opened
/// on it refuse events made elsewhere just before).
const MAX_ROUND_TRIP_US: i64 = 50_000;

/// The store read `store_us` on its clock between this node's `before_us` and `after_us`:
/// taken as read halfway, unless the answer came too late to tell. True when taken.
pub(super) fn observed(before_us: i64, store_us: i64, after_us: i64) -> bool {
    match offset_us(before_us, store_us, after_us) {
        Some(offset) => {
            STORE_OFFSET_US.store(offset, Ordering::Relaxed);
            true
        }
        None => false,
    }
}

fn offset_us(before_us: i64, store_us: i64, after_us: i64) -> Option<i64> {
    let round_trip = after_us - before_us;
    (round_trip <= MAX_ROUND_TRIP_US).then(|| store_us - (before_us + round_trip / 2))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn time_moves_on_with_the_monotonic_clock_from_the_anchor() {
        let anchor = Anchor {
            wall_us: 1_000_000,
            at: Instant::now(),
        };
        let later = anchor.at + Duration::from_millis(1_500);
        assert_eq!(anchor.us_at(later), 2_500_000);
        assert_eq!(anchor.us_at(anchor.at), 1_000_000);
    }

    #[test]
    fn the_store_s_clock_is_taken_as_read_halfway_through_a_short_round_trip() {
        // The store's clock is 7 s behind this node's; its answer took 40 ms.
        assert_eq!(
            offset_us(1_000_000, 1_020_000 - 7_000_000, 1_040_000),
            Some(-7_000_000)
        );
        assert_eq!(offset_us(5, 5, 5), Some(0));
        // Answered 3 s late (a paused store): too late to tell the time by.
        assert_eq!(offset_us(1_000_000, 4_000_000, 4_000_000), None);
    }

    #[test]
    fn starts_at_the_wall_clock_and_never_goes_back() {
        let wall = Anchor::now().wall_us;
        let first = now_us();
        assert!((first - wall).abs() < 1_000_000, "{first} vs {wall}");
        let mut last = first;
        for _ in 0..1_000 {
            let next = now_us();
            assert!(next >= last, "{next} < {last}");
            last = next;
        }
        assert!(now_ms() >= first / 1_000);
    }
}
