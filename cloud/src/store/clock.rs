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

/// How far the store's clock was found from this node's, in microseconds, and how far that
/// reading may be off (half its round trip; `i64::MAX` before any).
static STORE_OFFSET_US: AtomicI64 = AtomicI64::new(0);
static STORE_OFFSET_ERROR_US: AtomicI64 = AtomicI64::new(i64::MAX);

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
/// taken as read halfway, unless the answer came too late to tell. True when it was told.
pub(super) fn observed(before_us: i64, store_us: i64, after_us: i64) -> bool {
    let Some(reading) = offset_us(before_us, store_us, after_us) else {
        return false;
    };
    let kept = Reading {
        offset_us: STORE_OFFSET_US.load(Ordering::Relaxed),
        error_us: STORE_OFFSET_ERROR_US.load(Ordering::Relaxed),
    };
    let taken = kept.or(reading);
    STORE_OFFSET_US.store(taken.offset_us, Ordering::Relaxed);
    STORE_OFFSET_ERROR_US.store(taken.error_us, Ordering::Relaxed);
    true
}

/// An offset from the store's clock, give or take `error_us`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Reading {
    offset_us: i64,
    error_us: i64,
}

impl Reading {
    /// The better of the kept reading and a new one. Nodes on one machine must agree to the
    /// millisecond (an event made elsewhere just before a connection opened here is not for
    /// it), so a new reading that agrees with the kept one within both their errors, and is
    /// no finer, leaves the finer kept; one that disagrees means a clock stepped, and wins.
    fn or(self, new: Reading) -> Reading {
        let agrees =
            (new.offset_us - self.offset_us).abs() <= new.error_us.saturating_add(self.error_us);
        if agrees && new.error_us >= self.error_us {
            self
        } else {
            new
        }
    }
}

fn offset_us(before_us: i64, store_us: i64, after_us: i64) -> Option<Reading> {
    let round_trip = after_us - before_us;
    (round_trip <= MAX_ROUND_TRIP_US).then(|| Reading {
        offset_us: store_us - (before_us + round_trip / 2),
        error_us: round_trip / 2,
    })
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
            Some(Reading {
                offset_us: -7_000_000,
                error_us: 20_000
            })
        );
        assert_eq!(offset_us(5, 5, 5).map(|r| r.offset_us), Some(0));
        // Answered 3 s late (a paused store): too late to tell the time by.
        assert_eq!(offset_us(1_000_000, 4_000_000, 4_000_000), None);
    }

    #[test]
    fn the_finest_reading_is_kept_until_the_clocks_step_apart() {
        let reading = |offset_us, error_us| Reading {
            offset_us,
            error_us,
        };
        let none = reading(0, i64::MAX);
        let fine = none.or(reading(1_000, 300));
        assert_eq!(fine, reading(1_000, 300));
        // A slower reading that agrees tells nothing new: the finer one stays.
        assert_eq!(fine.or(reading(9_000, 20_000)), fine);
        // A finer one replaces it.
        assert_eq!(fine.or(reading(1_100, 100)), reading(1_100, 100));
        // One that cannot be the same offset, however slow: a clock stepped.
        assert_eq!(
            fine.or(reading(-30_000_000, 20_000)),
            reading(-30_000_000, 20_000)
        );
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
